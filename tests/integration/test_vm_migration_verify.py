"""`kubevirt_ops.rebalance.vm_migration_verify` against the simulator: a descheduler-triggered migration passes,
a failed one fails with its reason, a strategy None VM that is restarted fails on its UID, a hung migration times
out naming the open check, a drain-triggered migration is classified as drain (its node cordoned, as kubectl drain does) and an
evacuation whose evidence is gone as unknown, never drain, the requests while waiting do not
grow with the waiting time, and the module returns within a second of the deciding event."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client, config, watch

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_verify import ARG_SPEC, VmMigrationVerifyOptions, run

from support.policy import PAGE_POLICY
from support.waiting import wait_for

from .ansible_run import edit_policy_as_page, run_ansible_module
from .conftest import kubectl_available
from .module_call import run_service
from .test_kubevirt_eviction_facts import simulator  # noqa: F401  # pylint: disable=unused-import  # the fixture, shared

pytestmark = pytest.mark.simulator

MODULE = "kubevirt_ops.rebalance.vm_migration_verify"


# ------------------------------------------------------------------------------------------ helpers
def run_module(sim, expect_failure: bool = False, module: str = MODULE, **args) -> dict:
    """Run a module (this file's by default) once with the venv's ansible (ad hoc, local connection) and return its result."""
    return run_ansible_module(sim, module, args, expect_failure=expect_failure)


def options(sim, **given) -> VmMigrationVerifyOptions:
    """The module's options for the simulator, with a 60 s timeout unless given."""
    return VmMigrationVerifyOptions.from_params(spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, **dict({"timeout": 60}, **given)))


def record(sim, **given) -> dict:
    """mode=record in this process, as the module runs it, once every recorded VMI runs on a node and has its launcher
    (a simulator just started may still be scheduling them on a busy machine)."""
    def recorded_running():
        out = run(options(sim, mode="record", **given), False)
        return out if all(entry["node"] and entry["launcher"] for entry in out["baseline"].values()) else None
    return wait_for(recorded_running, what="the recorded VMIs running on a node")


def verify(sim, **given) -> dict:
    """mode=verify in this process (faster than an ansible run, so the timing tests measure the module, not ansible),
    called again while it reports progress, as its action plugin does."""
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, **dict({"timeout": 60}, **given))
    return run_service(run, VmMigrationVerifyOptions, params)


def core(sim) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(sim.kubeconfig))


def launcher_of(sim, namespace: str, vmi: str) -> str:
    pods = sim.kubectl_json("get", "pods", "-n", namespace, "-l", "kubevirt.io=virt-launcher")["items"]
    return next(p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith("virt-launcher-{0}-".format(vmi))
                and p["status"].get("phase") == "Running")


def evict(sim, namespace: str, pod: str, descheduler: bool = False) -> None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace,
                                                          annotations={"requested-by": "sigs.k8s.io/descheduler"} if descheduler else None))
    try:
        core(sim).create_namespaced_pod_eviction(pod, namespace, body)
    except client.exceptions.ApiException as error:
        assert error.status == 429, error  # KubeVirt answers 429 when it migrates instead


def apply_page_policy(sim, tmp_path: Path) -> None:
    """Edit the policy ConfigMap as the page does (kubectl edit with an editor that writes the page's policy)."""
    edit_policy_as_page(sim, tmp_path, PAGE_POLICY)


def record_running(sim, vm: str) -> dict:
    """The baseline of vms/<vm> once its launcher runs (a freshly started scenario may still be starting Pods)."""
    return record(sim, names=["vms/" + vm])


def evict_and_verify(sim, vm: str, fault: str | None = None, cordon: bool = False, **given) -> dict:
    """Record vms/<vm>, optionally annotate a simulator migration fault, optionally cordon its node (as `kubectl drain`
    does first), evict its launcher (no descheduler annotation), and verify; returns the module result."""
    if fault:
        sim.kubectl("annotate", "vmi", vm, "-n", "vms", "kubesim.io/migration=" + fault)
    before = record_running(sim, vm)
    if cordon:
        sim.kubectl("cordon", before["baseline"][vm]["node"])
    evict(sim, "vms", before["baseline"][vm]["launcher"])
    return verify(sim, names=["vms/" + vm], baseline=before["baseline"], **given)


# ------------------------------------------------------------------------------------------ tests
@pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")
def test_descheduler_migration_passes_with_evidence(simulator, tmp_path):
    sim = simulator("rebalance-two-workers")
    before = run_module(sim, mode="record", namespace="desched-test", label_selector="app=desched-test")
    assert {e["node"] for e in before["baseline"].values()} == {"worker-a"}
    apply_page_policy(sim, tmp_path)
    evidence = tmp_path / "evidence" / "rebalance.json"
    result = run_module(sim, namespace="desched-test", label_selector="app=desched-test", baseline=before["baseline"], timeout=90,
                        require_trigger="descheduler", min_moved=1, evidence_path=str(evidence))
    assert result["passed"] is True and result["failed_vms"] == [], result
    moved = [vm for vm in result["vms"] if vm["verdict"] == "pass"]
    assert len(moved) >= 1
    vm = moved[0]
    assert vm["trigger"] == "descheduler"
    assert vm["migration"]["name"].startswith("kubevirt-evacuation-")
    assert (vm["migration"]["source_node"], vm["migration"]["target_node"]) == ("worker-a", "worker-b")
    assert vm["uid_after"] == before["baseline"][vm["name"]]["uid"]
    assert all(c["result"] == "pass" for c in vm["checks"].values())
    assert any("Eviction in background assumed" in line and before["baseline"][vm["name"]]["launcher"] in line for line in vm["descheduler_log"])
    # cluster state agrees
    vmi = sim.kubectl_json("get", "vmi", vm["name"], "-n", "desched-test")
    assert vmi["status"]["nodeName"] == "worker-b" and vmi["metadata"]["uid"] == vm["uid_before"]
    assert json.loads(evidence.read_text())["passed"] is True
    table = evidence.with_suffix(".md").read_text()
    assert "| desched-test/{0} | pass | worker-a | worker-b |".format(vm["name"]) in table


def test_failed_migration_fails_with_its_reason(simulator):
    sim = simulator("maintenance")
    result = evict_and_verify(sim, "vm-live", "fail", timeout=60)
    vm = result["vms"][0]
    assert result["passed"] is False and result["failed_vms"] == ["vms/vm-live"]
    assert vm["verdict"] == "fail" and "migration_succeeded" in vm["failed_checks"]
    assert vm["migration"]["phase"] == "Failed"
    assert vm["migration"]["failure_reason"] and vm["migration"]["failure_reason"] in vm["reason"]
    assert result["waited_seconds"] < 30


def test_strategy_none_vm_is_restarted_and_fails_on_uid(simulator):
    sim = simulator("maintenance")
    result = evict_and_verify(sim, "vm-none", timeout=60)
    vm = result["vms"][0]
    assert result["passed"] is False and vm["verdict"] == "fail"
    assert vm["failed_checks"] == ["uid_unchanged"] and vm["migration"] is None
    assert sim.kubectl_json("get", "vmims", "-n", "vms")["items"] == [] or all(
        m["spec"]["vmiName"] != "vm-none" for m in sim.kubectl_json("get", "vmims", "-n", "vms")["items"])


def test_hung_migration_times_out_naming_the_open_check(simulator):
    sim = simulator("maintenance")
    result = evict_and_verify(sim, "vm-live", "hang", timeout=4)
    vm = result["vms"][0]
    assert result["passed"] is False and result["timed_out"] is True
    assert vm["verdict"] == "timeout" and "migration_succeeded" in vm["open_checks"]
    assert "migration_succeeded" in vm["reason"] and vm["migration"]["name"] in vm["reason"]
    assert 4 <= result["waited_seconds"] < 5


def test_drain_triggered_migration_is_classified_as_drain(simulator):
    sim = simulator("maintenance")
    result = evict_and_verify(sim, "vm-live", cordon=True, timeout=60, require_trigger="drain")
    vm = result["vms"][0]
    assert result["passed"] is True, (vm["reason"], vm["migration"])
    assert vm["trigger"] == "drain" and vm["checks"]["trigger"]["result"] == "pass"
    assert vm["trigger_reason"] == "an evacuation while node {0} is cordoned (spec.unschedulable)".format(vm["source_node"])
    assert vm["migration"]["name"].startswith("kubevirt-evacuation-") and vm["descheduler_log"] == []
    after = sim.kubectl_json("get", "vmi", "vm-live", "-n", "vms")
    assert after["metadata"]["uid"] == vm["uid_before"] and after["status"]["nodeName"] != vm["source_node"]


def test_an_evacuation_without_evidence_of_its_trigger_is_unknown_not_drain(simulator):
    """An evacuation of an uncordoned node, no descheduler run in sight (as when the descheduler's Job was deleted by its
    history limit while the watch was cut): the move passes its five checks, the trigger is unknown with the reason."""
    sim = simulator("maintenance")
    result = evict_and_verify(sim, "vm-live", timeout=60)
    vm = result["vms"][0]
    assert result["passed"] is True and vm["verdict"] == "pass", (vm["reason"], vm["migration"])
    assert vm["trigger"] == "unknown" and "no evidence left" in vm["trigger_reason"] and vm["source_node"] in vm["trigger_reason"]
    assert result["drain_evidence"] == {"nodes": {}, "errors": []}
    node = sim.kubectl_json("get", "node", vm["source_node"])
    assert not node["spec"].get("unschedulable")   # the cluster agrees: nobody cordoned it


def test_requests_while_waiting_do_not_grow_with_the_waiting_time(simulator):
    sim = simulator("maintenance")
    before = record_running(sim, "vm-live")  # a freshly started scenario may not have placed the VM yet
    counts = []
    for seconds in (2, 6):
        sim.reset_counters()
        result = verify(sim, names=["vms/vm-live"], baseline=before["baseline"], timeout=seconds)
        assert result["vms"][0]["verdict"] == "not_moved" and result["timed_out"] is True
        counts.append(sim.admin("GET", "counters?cluster=workload")["workload"]["total"])
    assert counts[0] == counts[1], counts


def test_returns_within_a_second_of_the_deciding_event(simulator):
    sim = simulator("maintenance")
    sim.kubectl("annotate", "vmi", "vm-live", "-n", "vms", "kubesim.io/migration=fail")
    before = record(sim, names=["vms/vm-live"])
    sim.reset_counters()
    seen = {}

    def watch_failure():
        api = client.CustomObjectsApi(config.new_client_from_config(sim.kubeconfig))
        for event in watch.Watch().stream(api.list_namespaced_custom_object, "kubevirt.io", "v1", "vms",
                                          "virtualmachineinstancemigrations", timeout_seconds=60):
            if (event["object"].get("status") or {}).get("phase") == "Failed":
                seen["at"] = time.monotonic()
                return
    watcher = threading.Thread(target=watch_failure, daemon=True)
    watcher.start()
    sim.wait_for_watches({"virtualmachineinstancemigrations": 1})
    done = {}

    def run():
        done["result"] = verify(sim, names=["vms/vm-live"], baseline=before["baseline"], timeout=60)
        done["at"] = time.monotonic()
    runner = threading.Thread(target=run)
    runner.start()
    # the module watches before the eviction: the time measured is from the deciding event to its return
    sim.wait_for_watches({"virtualmachineinstancemigrations": 2, "virtualmachineinstances": 1, "pods": 1})
    evict(sim, "vms", before["baseline"]["vm-live"]["launcher"])
    runner.join(60)
    watcher.join(5)
    assert done["result"]["vms"][0]["verdict"] == "fail", done["result"]
    assert "at" in seen, done["result"]
    assert done["at"] - seen["at"] < 1.0, (done["at"] - seen["at"], done["result"]["watch"], done["result"]["waited_seconds"])


def test_watch_errors_reconnect_and_410_gone_lists_again(simulator):
    sim = simulator("maintenance")
    before = record(sim, names=["vms/vm-live"])
    sim.add_fault(verb="watch", resource="virtualmachineinstances", drop=True, count=1)
    sim.add_fault(verb="watch", resource="virtualmachineinstancemigrations", status=410, reason="Expired",
                  message="too old resource version", count=1)
    sim.reset_counters()
    runner_result = {}
    runner = threading.Thread(target=lambda: runner_result.update(
        verify(sim, names=["vms/vm-live"], baseline=before["baseline"], timeout=60, require_trigger="drain")))
    runner.start()
    # both injected watch faults met and the watches open again, so the migration is seen through the reconnects
    sim.wait_for_watches({"virtualmachineinstancemigrations": 2, "virtualmachineinstances": 2})
    sim.kubectl("cordon", before["baseline"]["vm-live"]["node"])   # a drain: cordon, then evict
    evict(sim, "vms", before["baseline"]["vm-live"]["launcher"])
    runner.join(60)
    assert runner_result["passed"] is True, [(vm["reason"], vm["migration"]) for vm in runner_result["vms"]]
    assert runner_result["watch"]["reconnects"] >= 2 and runner_result["watch"]["relists_after_410"] == 1
    assert sim.counters()["list virtualmachineinstancemigrations"] == 2
