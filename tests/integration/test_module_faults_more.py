"""Faults on descheduler_run, vm_migration_wait and kubevirt_node_drain, injected by the simulator's fault API and
run in this process (module_call). Each test says what must hold: the module retried (or reconnected) and its
result is the one without faults, or it failed naming the request and the cluster shows that nothing was done.
The same for kubevirt_eviction_facts, descheduler_policy and vm_migration_verify is in test_module_faults.py."""
from __future__ import annotations

import threading
import time

import pytest

from support.simulator import kubectl_available, running_kubesim
from support.waiting import wait_for

from .module_call import call_module
from .test_vm_migration_wait import start_migration

RUN, WAIT, DRAIN = "descheduler_run", "vm_migration_wait", "kubevirt_node_drain"
pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]


def jobs(sim) -> dict:
    return {j["metadata"]["name"]: j for j in sim.kubectl_json("-n", "descheduler", "get", "jobs")["items"]}


def retried(result: dict) -> list:
    return [(r["request"].split(" ")[0], r["status"], r["wait"]) for r in result["api"]["retried"]]


# ------------------------------------------------------------------------------------------ descheduler_run
@pytest.fixture
def run_sim(rebalance_two_workers):
    """One rebalance-two-workers for the runs: each creates a Job of its own name (or none), so they do not interfere."""
    with rebalance_two_workers.without_faults() as shared:
        yield shared


def assert_parsed_run(sim, result: dict, name: str) -> None:
    """The run is the Job created, it completed, and its Pod's log was read and parsed."""
    assert not result["failed"], result
    assert result["trigger"] == "create" and result["job"]["name"] == name and result["job"]["created"] is True
    assert result["job"]["result"] == "Complete" and result["log_lines"] and result["classification"]
    assert {c["node"] for c in result["classification"]} >= {"worker-a", "worker-b"}
    job = jobs(sim)[name]
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual" and job["status"].get("succeeded") == 1


def test_run_retries_a_503_burst_on_the_job_and_pod_reads_and_parses_the_run(run_sim):
    """503s on listing Jobs and Pods (the watch's start), on watching Jobs and on reading the Pod's log: every read is
    retried or reopened, one Job is created (a create is not repeated), and the run is parsed as without faults."""
    assert "faults-503" not in jobs(run_sim)
    for verb, resource in (("list", "jobs"), ("list", "pods"), ("watch", "jobs")):
        run_sim.add_fault(verb=verb, resource=resource, namespace="descheduler", status=503, count=2)
    run_sim.add_fault(verb="get", resource="pods/log", namespace="descheduler", status=503, count=1)
    result = call_module(RUN, {"kubeconfig": run_sim.kubeconfig, "trigger": "create", "job_name": "faults-503", "timeout": 60})
    assert_parsed_run(run_sim, result, "faults-503")
    assert sorted(retried(result)) == sorted([("list", 503, 0.5), ("list", 503, 1.0)] * 2 + [("read", 503, 0.5)])
    assert result["watch"]["reconnects"] >= 2
    assert run_sim.admin("GET", "faults")["faults"] == []  # every injected answer was given
    assert run_sim.counters()["create jobs"] == 1


def test_run_waits_as_long_as_retry_after_asks_on_the_job_and_pod_reads(run_sim):
    """429s with Retry-After on listing Jobs and Pods: the run waits what the server asks, then is parsed."""
    run_sim.add_fault(verb="list", resource="jobs", namespace="descheduler", status=429, retryAfter=1, count=1)
    run_sim.add_fault(verb="list", resource="pods", namespace="descheduler", status=429, retryAfter=1, count=1)
    started = time.monotonic()
    result = call_module(RUN, {"kubeconfig": run_sim.kubeconfig, "trigger": "create", "job_name": "faults-429", "timeout": 60})
    assert_parsed_run(run_sim, result, "faults-429")
    assert time.monotonic() - started >= 2
    assert sorted(retried(result)) == [("list", 429, 1.0), ("list", 429, 1.0)]
    assert run_sim.admin("GET", "faults")["faults"] == []
    assert run_sim.counters()["create jobs"] == 1


def test_run_whose_create_fails_for_good_names_the_request_and_creates_no_job(run_sim):
    """A 500 on every POST of a Job: the run fails naming the create and the answer; no Job of that name exists and no
    other manual Job appeared."""
    manual_before = {n for n, j in jobs(run_sim).items() if j["metadata"].get("annotations", {}).get("cronjob.kubernetes.io/instantiate")}
    run_sim.add_fault(verb="create", resource="jobs", namespace="descheduler", status=500)
    result = call_module(RUN, {"kubeconfig": run_sim.kubeconfig, "trigger": "create", "job_name": "never-created", "timeout": 30,
                               "api_retries": 1})
    assert result["failed"] and result["msg"].startswith("create jobs descheduler/never-created: 500 InternalError"), result
    run_sim.clear_faults()
    after = jobs(run_sim)
    assert "never-created" not in after
    assert {n for n, j in after.items() if j["metadata"].get("annotations", {}).get("cronjob.kubernetes.io/instantiate")} == manual_before


# ------------------------------------------------------------------------------------------ vm_migration_wait
def test_wait_returns_when_final_through_dropped_watches_and_a_503_burst_on_relist(tmp_path):
    """The migrations' watch is dropped three times, its history compacted (the reconnect gets 410 Gone) and the relist
    answered 503 twice: the wait reconnects, lists again (retried) and returns when the migration has Succeeded."""
    with running_kubesim("rebalance-two-workers", tmp_path / "sim") as sim:
        sim.add_fault(verb="watch", resource="virtualmachineinstancemigrations", drop=True, count=3)
        name = start_migration(sim, "vm-1", "slow")
        sim.reset_counters()
        done: dict = {}
        waiter = threading.Thread(target=lambda: done.update(result=call_module(
            WAIT, {"kubeconfig": sim.kubeconfig, "namespaces": ["desched-test"], "vmi_names": ["vm-1"], "timeout": 60})))
        waiter.start()
        # the first list is done: now fault the relist
        wait_for(lambda: sim.counters().get("list virtualmachineinstancemigrations"), timeout=10, interval=0.02, what="the first list")
        sim.kubectl("annotate", "vmi", "vm-2", "-n", "desched-test", "--overwrite", "faults-more/touched=yes")  # the history moves on
        sim.admin("POST", "compact?cluster=workload")
        sim.add_fault(verb="list", resource="virtualmachineinstancemigrations", status=503, count=2)
        waiter.join(60)
        result = done["result"]
        assert not result["failed"] and result["unfinished"] == 0, result
        [entry] = [m for m in result["migrations"] if m["name"] == name]
        assert entry["phase"] == "Succeeded" and entry["target"] == "worker-b"
        assert result["watch"]["reconnects"] >= 4 and result["watch"]["relists_after_410"] >= 1
        assert sim.counters()["list virtualmachineinstancemigrations"] == 4  # the first list, two 503s, the relist
        assert sim.kubectl_json("get", "vmi", "vm-1", "-n", "desched-test")["status"]["nodeName"] == "worker-b"
        assert sim.kubectl_json("get", "vmim", name, "-n", "desched-test")["status"]["phase"] == "Succeeded"


# ------------------------------------------------------------------------------------------ kubevirt_node_drain
@pytest.fixture
def maintenance(tmp_path):
    """A maintenance scenario of its own (a drain changes it); only the drain moves Pods: the CronJob is suspended."""
    with running_kubesim("maintenance", tmp_path / "sim", suspend=True, settle=True) as sim:
        sim.reset_counters()
        yield sim


def placement(sim) -> dict:
    return {v["metadata"]["name"]: (v["metadata"]["uid"], v["status"].get("nodeName"))
            for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"]}


def cordoned(sim, node: str) -> bool:
    return bool(sim.kubectl_json("get", "node", node)["spec"].get("unschedulable"))


def drain_args(sim, **extra) -> dict:
    return {"kubeconfig": sim.kubeconfig, "node": "worker-1", "allow_shutdown": True, "allow_loss": True, "allow_blocked": True,
            "timeout": 40, **extra}


def test_drain_retries_503_bursts_on_cordon_and_evictions_and_completes(maintenance):
    """503s on the cordon patch and on the evictions: each is retried, the node ends cordoned, the live VMs migrated
    (same UID, another node) and only the blocked VM is left, as without faults."""
    before = placement(maintenance)
    assert not cordoned(maintenance, "worker-1")
    maintenance.add_fault(verb="patch", resource="nodes", status=503, count=2)
    maintenance.add_fault(verb="create", resource="pods/eviction", status=503, count=3)
    result = call_module(DRAIN, drain_args(maintenance))
    assert not result["failed"] and result["drained"] and result["cordoned"], result
    statuses = [(r["request"].split(" ")[0], r["status"]) for r in result["api"]["retried"]]
    assert statuses.count(("cordon", 503)) == 2 and statuses.count(("evict", 503)) == 3
    assert cordoned(maintenance, "worker-1") and result["left"] == ["vms/vm-rwo"]
    after = placement(maintenance)
    for name in ("vm-live", "vm-if-possible"):
        assert after[name][0] == before[name][0] and before[name][1] == "worker-1" != after[name][1]
    assert after["vm-rwo"] == before["vm-rwo"]
    counters = maintenance.counters()
    assert counters["patch nodes"] == 3 and counters["create pods/eviction"] == result["evictions"]["requests"] + 3


def test_drain_whose_cordon_fails_for_good_names_the_request_and_evicts_nothing(maintenance):
    """A 500 on every patch of the node: the drain fails naming the cordon and the answer, before any eviction: the
    node is not cordoned and every VMI is where it was, with the same UID."""
    before = placement(maintenance)
    maintenance.add_fault(verb="patch", resource="nodes", status=500)
    result = call_module(DRAIN, drain_args(maintenance, api_retries=1))
    assert result["failed"] and result["msg"].startswith("cordon node worker-1: 500 InternalError"), result
    maintenance.clear_faults()
    counters = maintenance.counters()
    assert counters["patch nodes"] == 2 and "create pods/eviction" not in counters
    assert not cordoned(maintenance, "worker-1")
    assert placement(maintenance) == before
