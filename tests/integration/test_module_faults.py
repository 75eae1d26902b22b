"""Faults on every module, injected by the simulator's fault API. Each test says what must hold: the module
retried and succeeded (and the retries are in its result), or it failed with a message naming the request and
the answer, and the cluster is exactly as before (never a half-applied policy, no backup for a write that did not
happen). Failed and hung migrations for vm_migration_verify on the maintenance scenario are in
test_vm_migration_verify.py (test_failed_migration_fails_with_its_reason, test_hung_migration_times_out_naming_the_open_check)."""
from __future__ import annotations

import json
import time

import pytest
import yaml

from support.policy import PAGE_OPTIONS, PAGE_POLICY
from support.simulator import evict, running_kubesim
from support.waiting import wait_for

from .module_call import call_module

pytestmark = pytest.mark.simulator

FACTS, POLICY, VERIFY = "kubevirt_eviction_facts", "descheduler_policy", "vm_migration_verify"


def get(sim, path: str) -> dict:
    return sim.request_json("GET", path)


def policy_configmap(sim) -> dict:
    return get(sim, "/api/v1/namespaces/descheduler/configmaps/descheduler")


def cluster_state(sim) -> dict:
    """Everything a module could write: the policy ConfigMap (whole) and the ResourcePatches."""
    patches = get(sim, "/apis/operator.alauda.io/v1alpha1/namespaces/descheduler/resourcepatches")["items"]
    return {"configmap": policy_configmap(sim), "resourcepatches": sorted(p["metadata"]["name"] for p in patches)}


@pytest.fixture
def sim(rebalance_two_workers):
    """For the read-only modules: one simulator for the module; each test clears its faults."""
    with rebalance_two_workers.without_faults() as shared:
        yield shared


@pytest.fixture
def fresh(tmp_path):
    """For the policy writes: a simulator of its own."""
    with running_kubesim("rebalance-two-workers", tmp_path / "sim") as started:
        yield started


def policy_args(sim, tmp_path, **extra) -> dict:
    return {"kubeconfig": sim.kubeconfig, "backup_dir": str(tmp_path / "backups"), "cluster_name": "workload", **PAGE_OPTIONS, **extra}


def backups(tmp_path) -> list:
    folder = tmp_path / "backups"
    return sorted(folder.iterdir()) if folder.exists() else []


# ------------------------------------------------------------------------ kubevirt_eviction_facts
def test_facts_retries_a_503_burst_and_succeeds(sim):
    sim.add_fault(verb="list", resource="virtualmachineinstances", status=503, count=3)
    result = call_module(FACTS, {"kubeconfig": sim.kubeconfig})
    assert not result["failed"], result
    assert {v["name"] for v in result["vmis"]} == {"vm-1", "vm-2"}
    assert [r["status"] for r in result["api"]["retried"]] == [503, 503, 503]
    assert sim.counters()["list virtualmachineinstances"] == 4


def test_facts_waits_as_long_as_retry_after_asks(sim):
    sim.add_fault(verb="list", resource="pods", status=429, retryAfter=1, count=2)
    started = time.monotonic()
    result = call_module(FACTS, {"kubeconfig": sim.kubeconfig})
    assert not result["failed"], result
    assert time.monotonic() - started >= 2
    assert [(r["status"], r["wait"]) for r in result["api"]["retried"]] == [(429, 1.0), (429, 1.0)]


def test_facts_survives_a_latency_spike_and_dropped_connections(sim):
    sim.add_fault(verb="list", resource="nodes", latency=1.5, count=1)
    sim.add_fault(verb="list", resource="virtualmachines", drop=True, count=2)
    result = call_module(FACTS, {"kubeconfig": sim.kubeconfig})
    assert not result["failed"], result
    assert len(result["nodes"]) == 3 and len(result["vmis"]) == 2
    assert sum(1 for r in result["api"]["retried"] if r["status"] == 0) == 2


def test_facts_gives_up_after_api_retries_naming_the_request_and_answer(sim):
    sim.add_fault(verb="list", resource="pods", status=500)
    result = call_module(FACTS, {"kubeconfig": sim.kubeconfig, "api_retries": 2})
    assert result["failed"]
    assert result["msg"].startswith("list pods with fieldSelector status.phase!=Succeeded,status.phase!=Failed: 500 InternalError: "
                                    "Internal error occurred: injected by kubesim (gave up after 3 attempts).")
    assert "api_retries" in result["msg"] and sim.counters()["list pods"] == 3


def test_facts_stops_at_api_timeout_instead_of_waiting_out_a_long_retry_after(sim):
    sim.add_fault(verb="list", resource="pods", status=429, retryAfter=30)
    started = time.monotonic()
    result = call_module(FACTS, {"kubeconfig": sim.kubeconfig, "api_timeout": 5})
    assert result["failed"] and "would pass api_timeout" in result["msg"]
    assert time.monotonic() - started < 5


# ------------------------------------------------------------------------------ descheduler_policy
def test_policy_update_retried_after_503s_lands_once_and_exactly(fresh, tmp_path):
    fresh.add_fault(verb="update", resource="configmaps", namespace="descheduler", status=503, count=2)
    result = call_module(POLICY, policy_args(fresh, tmp_path))
    assert not result["failed"] and result["changed"], result
    assert policy_configmap(fresh)["data"]["policy.yaml"] == PAGE_POLICY
    assert fresh.counters()["update configmaps"] == 3 and len(backups(tmp_path)) == 1


def test_policy_update_dropped_every_time_fails_and_leaves_the_policy_as_it_was(fresh, tmp_path):
    before = cluster_state(fresh)
    fresh.add_fault(verb="update", resource="configmaps", namespace="descheduler", drop=True)
    # a connection cut without an answer is retried until api_timeout (whatever api_retries says), so the bound is the timeout
    result = call_module(POLICY, policy_args(fresh, tmp_path, api_retries=2, api_timeout=8))
    assert result["failed"] and result["msg"].startswith("update configmap descheduler/descheduler: no answer from the API server")
    assert "api_timeout" in result["msg"]
    fresh.clear_faults()
    assert cluster_state(fresh) == before
    # the backup of the untouched ConfigMap was taken before the write: it restores to what is there now
    assert len(backups(tmp_path)) == 1 and yaml.safe_load(backups(tmp_path)[0].read_text())["data"] == before["configmap"]["data"]


def test_policy_conflict_on_update_is_not_retried_and_overwrites_nothing(fresh, tmp_path):
    before = cluster_state(fresh)
    fresh.add_fault(verb="update", resource="configmaps", namespace="descheduler", status=409, count=1,
                    message='Operation cannot be fulfilled on configmaps "descheduler": the object has been modified; '
                            'please apply your changes to the latest version and try again')
    result = call_module(POLICY, policy_args(fresh, tmp_path))
    assert result["failed"] and result["error"]["type"] == "Conflict" and "nothing was overwritten" in result["msg"]
    assert fresh.counters()["update configmaps"] == 1
    assert cluster_state(fresh) == before


def test_policy_read_failing_for_good_fails_before_any_backup_or_write(fresh, tmp_path):
    before = cluster_state(fresh)
    fresh.add_fault(verb="list", resource="kubevirts", status=503)
    result = call_module(POLICY, policy_args(fresh, tmp_path, api_retries=1))
    assert result["failed"] and result["msg"].startswith("list kubevirts.kubevirt.io: 503 ServiceUnavailable")
    assert backups(tmp_path) == [] and "update configmaps" not in fresh.counters()
    assert cluster_state(fresh) == before


def test_policy_absent_with_a_failing_delete_removes_no_patch_and_keeps_the_override(fresh, tmp_path):
    assert not call_module(POLICY, policy_args(fresh, tmp_path))["failed"]
    before = cluster_state(fresh)
    fresh.add_fault(verb="delete", resource="resourcepatches", status=500)
    result = call_module(POLICY, {"kubeconfig": fresh.kubeconfig, "state": "absent", "backup_dir": str(tmp_path / "backups"),
                                  "cluster_name": "workload", "api_retries": 1})
    assert result["failed"] and result["msg"].startswith("delete resourcepatch descheduler/")
    fresh.clear_faults()
    assert cluster_state(fresh) == before


# ------------------------------------------------------------------------------ vm_migration_verify
def record_running(sim) -> dict:
    def recorded_running():
        before = call_module(VERIFY, {"kubeconfig": sim.kubeconfig, "mode": "record", "namespace": "desched-test",
                                      "label_selector": "app=desched-test"})
        assert not before["failed"], before
        return before["baseline"] if all(e["launcher"] for e in before["baseline"].values()) else None
    return wait_for(recorded_running, timeout=30, what="every recorded VM's launcher running")


def test_verify_passes_through_dropped_watches_and_a_503_burst_on_relist(fresh):
    baseline = record_running(fresh)
    fresh.add_fault(verb="watch", resource="virtualmachineinstances", drop=True, count=2)
    fresh.add_fault(verb="watch", resource="virtualmachineinstancemigrations", status=503, count=2)
    evict(fresh, "desched-test", baseline["vm-1"]["launcher"])
    result = call_module(VERIFY, {"kubeconfig": fresh.kubeconfig, "namespace": "desched-test", "names": ["vm-1"],
                                  "baseline": baseline, "timeout": 60})
    assert not result["failed"] and result["passed"], result
    assert result["watch"]["reconnects"] >= 3 and result["waited_seconds"] < 30


def test_verify_reports_a_failed_migration_with_its_reason_and_changes_nothing(fresh):
    baseline = record_running(fresh)
    fresh.kubectl("-n", "desched-test", "annotate", "vmi", "vm-2", "kubesim.io/migration=fail")
    evict(fresh, "desched-test", baseline["vm-2"]["launcher"])
    result = call_module(VERIFY, {"kubeconfig": fresh.kubeconfig, "namespace": "desched-test", "names": ["vm-2"],
                                  "baseline": baseline, "timeout": 60})
    vm = result["vms"][0]
    assert result["passed"] is False and vm["verdict"] == "fail" and "migration_succeeded" in vm["failed_checks"]
    assert vm["migration"]["phase"] == "Failed" and vm["migration"]["failure_reason"] in vm["reason"]
    assert get(fresh, "/apis/kubevirt.io/v1/namespaces/desched-test/virtualmachineinstances/vm-2")["metadata"]["uid"] == \
        baseline["vm-2"]["uid"]


def test_facts_report_a_failing_descheduler_job(fresh):
    """The descheduler Job fails (its policy is not valid); the facts name the failed Job."""
    configmap = policy_configmap(fresh)
    configmap["data"]["policy.yaml"] = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: [{name: x, pluginConfig: " \
                                       "[{name: LowNodeUtilization, args: {thresholds: {cpu: 500}}}]}]\n"
    fresh.kubectl("apply", "-f", "-", input=json.dumps(configmap))

    def failed_jobs():
        result = call_module(FACTS, {"kubeconfig": fresh.kubeconfig, "include": ["descheduler"]})
        assert not result["failed"], result
        jobs = result["descheduler"]["last_jobs"]
        return jobs if any(job["failed"] for job in jobs) else None
    jobs = wait_for(failed_jobs, timeout=45, interval=1, what="a failed descheduler Job in the facts")
    assert any(job["failed"] and job["result"] != "succeeded" for job in jobs), jobs
