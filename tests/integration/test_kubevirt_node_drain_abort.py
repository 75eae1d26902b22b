"""Giving a node back after a drain that did not finish (issue 28, point 4): the drain times out while KubeVirt holds an
evacuation in its queue (parallelMigrationsPerCluster 1, taken by the blocker's hanging migration); `state: uncordon`
cancels it through virt-api's evacuate/cancel, so that no migration moves the VM once the queue frees, and names it.
On a KubeVirt without the subresource (v1.6) the result says that KubeVirt goes on evacuating it and how to stop it,
and KubeVirt does create the migration: the same wait proves that the cancel is what keeps the VM where it is."""
from __future__ import annotations

import time

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import ARG_SPEC, KubevirtNodeDrainOptions, run

from support.waiting import wait_for

from .conftest import kubectl_available, start_kubesim, stop_kubesim
from .drain_scenario import write_queued_scenario
from .module_call import run_service

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

NS = "vms"
TIME_SCALE = 20
# Simulated seconds watched after the queue frees: the evacuation controller rechecks a waiting node every 5 s and, once
# a slot is free, creates the migration at once; without the cancel a migration appears within a few seconds.
WATCH_SIMULATED = 60


def module(sim, check_mode: bool = False, **args) -> dict:
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, api_timeout=30, **args)
    return run_service(run, KubevirtNodeDrainOptions, params, check_mode)


def vmi(sim, name: str) -> dict:
    return sim.kubectl_json("get", "vmi", name, "-n", NS)


def migrations_of(sim, name: str) -> list:
    return sorted(m["metadata"]["name"] for m in sim.kubectl_json("get", "vmim", "-n", NS)["items"] if m["spec"]["vmiName"] == name)


def stopped_drain(tmp_path, kubevirt_version: str | None = None):
    """The simulator with the blocker's migration hanging and a drain of worker-1 stopped by its timeout: vm-a marked for
    evacuation and queued in KubeVirt, vm-b never evicted; worker-1 cordoned."""
    sim = start_kubesim(str(write_queued_scenario(tmp_path / "queued.yaml", time_scale=TIME_SCALE)), tmp_path / "sim")
    sim.settle()
    if kubevirt_version:
        kubevirt = sim.kubectl_json("get", "kubevirt", "-n", "kubevirt")["items"][0]["metadata"]["name"]
        sim.kubectl("patch", "kubevirt", kubevirt, "-n", "kubevirt", "--subresource=status", "--type=merge",
                    "-p", '{"status":{"observedKubeVirtVersion":"%s"}}' % kubevirt_version)
    sim.kubectl("create", "-f", "-", input='{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstanceMigration",'
                '"metadata":{"name":"blocker-move","namespace":"%s"},"spec":{"vmiName":"blocker"}}' % NS)
    wait_for(lambda: sim.kubectl_json("get", "vmim", "blocker-move", "-n", NS)["status"].get("phase") == "Running", timeout=20,
             what="blocker's migration")
    drain = module(sim, node="worker-1", timeout=6)
    assert drain["failed"] and drain["timed_out"] and drain["cordoned"], drain.get("msg")
    results = {vm["name"]: vm["result"] for vm in drain["vms"]}
    assert results == {"vm-a": "timeout", "vm-b": "pending"} or results == {"vm-a": "timeout", "vm-b": "timeout"}, results
    assert vmi(sim, "vm-a")["status"]["evacuationNodeName"] == "worker-1" and migrations_of(sim, "vm-a") == []
    return sim


def free_the_queue(sim) -> None:
    sim.kubectl("delete", "vmim", "blocker-move", "-n", NS)


def test_uncordon_after_a_timed_out_drain_cancels_the_queued_evacuation_and_no_migration_follows(tmp_path):
    sim = stopped_drain(tmp_path)
    try:
        # check mode: the cancel and the uncordon go as dry runs, the result says what a run would do
        preview = module(sim, check_mode=True, node="worker-1", state="uncordon")
        assert preview["changed"] and preview["evacuations"]["stayed"] == ["vms/vm-a"], preview
        assert vmi(sim, "vm-a")["status"]["evacuationNodeName"] == "worker-1"
        assert sim.kubectl_json("get", "node", "worker-1")["spec"].get("unschedulable") is True

        result = module(sim, node="worker-1", state="uncordon")
        evacuations = result["evacuations"]
        assert result["changed"] and not result.get("failed") and evacuations["served"] is True
        assert evacuations["marked"] == ["vms/vm-a"] and evacuations["stayed"] == ["vms/vm-a"] and evacuations["advice"] is None
        assert evacuations["vms"][0]["reason"] == "evacuation cancelled; the VM stays on worker-1"
        assert "evacuationNodeName" not in vmi(sim, "vm-a")["status"]
        assert not sim.kubectl_json("get", "node", "worker-1")["spec"].get("unschedulable")

        free_the_queue(sim)
        time.sleep(WATCH_SIMULATED / TIME_SCALE)
        sim.settle()
        assert migrations_of(sim, "vm-a") == [] and migrations_of(sim, "vm-b") == []
        assert vmi(sim, "vm-a")["status"]["nodeName"] == vmi(sim, "vm-b")["status"]["nodeName"] == "worker-1"

        again = module(sim, node="worker-1", state="uncordon")
        assert again["changed"] is False and again["evacuations"]["marked"] == []
    finally:
        stop_kubesim(sim)


def test_uncordon_on_kubevirt_without_evacuate_cancel_says_evacuations_continue_and_how_to_stop_them(tmp_path):
    sim = stopped_drain(tmp_path, kubevirt_version="v1.6.3")
    try:
        result = module(sim, node="worker-1", state="uncordon")
        evacuations = result["evacuations"]
        assert result["changed"] and evacuations["served"] is False and evacuations["continuing"] == ["vms/vm-a"]
        assert evacuations["stayed"] == [] and result["diff"]["after"]["marked_for_evacuation"] == ["vms/vm-a"]
        assert evacuations["advice"].startswith("KubeVirt goes on evacuating vms/vm-a from worker-1")
        assert "virtctl evacuate-cancel node worker-1" in evacuations["advice"] and "kubectl patch vmi vm-a -n vms" in evacuations["advice"]
        assert vmi(sim, "vm-a")["status"]["evacuationNodeName"] == "worker-1"
        # what the cancel prevents: once the queue frees, KubeVirt migrates the VM off the node given back
        free_the_queue(sim)
        wait_for(lambda: migrations_of(sim, "vm-a"), timeout=WATCH_SIMULATED / TIME_SCALE + 10, what="KubeVirt's migration of vm-a")
    finally:
        stop_kubesim(sim)
