"""`kubevirt_ops.rebalance.kubevirt_node_drain` with `nodes`: two nodes drained at once in one call, as a rolling
maintenance drains a batch. The scenario (drain_scenario.write_batch_scenario): four LiveMigrate VMs on each of worker-1
and worker-2, worker-3 empty, parallelMigrationsPerCluster 3 (per node the default 2). One simulator for the module:
the check-mode and refused runs change nothing, the drain comes last."""
from __future__ import annotations

import re

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import ARG_SPEC, KubevirtNodeDrainOptions, run

from .ansible_run import run_ansible_module
from .conftest import kubectl_available, running_kubesim
from .drain_scenario import write_batch_scenario
from .module_call import run_service

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

NS = "vms"
BATCH = ["worker-1", "worker-2"]
SPARE = "worker-3"
PER_CLUSTER = 3
SHARES = {"worker-1": 2, "worker-2": 1}
VMS = {node: ["vm-{0}-{1}".format(node, i) for i in range(4)] for node in BATCH}
MIGRATED = re.compile(r"^(worker-[12]): vms/(vm-worker-[12]-\d) migrated (worker-[12]) -> worker-3 in [\d.]+ s \((\d) of 4 done\)$")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    home = tmp_path_factory.mktemp("drain-batch")
    scenario = write_batch_scenario(home / "batch.yaml", drained=tuple(BATCH), spare=SPARE, per_cluster=PER_CLUSTER, time_scale=8)
    with running_kubesim(str(scenario), home / "sim", settle=True) as started:
        yield started


def vmis(sim) -> dict:
    return {v["metadata"]["name"]: v for v in sim.kubectl_json("get", "vmi", "-n", NS)["items"]}


def unschedulable(sim, node: str) -> bool:
    return sim.kubectl("get", "node", node, "-o", "jsonpath={.spec.unschedulable}").stdout == "true"


def migration_counters(sim) -> dict:
    return sim.admin("GET", "counters?cluster=workload")["workload"]["migrations"]


def test_the_scenario_has_four_vms_on_each_node_of_the_batch(sim):
    placed = {name: vmi["status"].get("nodeName") for name, vmi in vmis(sim).items()}
    assert placed == {vm: node for node in BATCH for vm in VMS[node]}


def test_check_mode_reads_every_nodes_preflight_and_dry_runs_both_cordons(sim):
    sim.reset_counters()
    result = run_ansible_module(sim, "kubevirt_ops.rebalance.kubevirt_node_drain", {"nodes": BATCH, "max_parallel_per_node": SHARES},
                                check=True)
    assert result["changed"] is True and result["drained"] is False and result["nodes"] == BATCH
    assert set(result["nodes_results"]) == set(BATCH) and result["concurrency_per_node"] == SHARES
    for node in BATCH:
        pre = result["nodes_results"][node]["preflight"]
        assert sorted(vm["name"] for vm in pre["vms"]) == VMS[node] and {vm["action"] for vm in pre["vms"]} == {"live_migrate"}
        # the batch's VMs are placed together, only on the node outside the batch
        assert pre["capacity"]["batch"] == BATCH and pre["capacity"]["fits"] is True
        assert set(pre["capacity"]["placements"].values()) == {SPARE} and len(pre["capacity"]["placements"]) == 4
        assert pre["limits"]["parallel_migrations_per_cluster"] == PER_CLUSTER
        # (ansible shows the top-level diff and keeps it out of the result)
        assert result["nodes_results"][node]["diff"] == {"before": {"unschedulable": False}, "after": {"unschedulable": True}}
    # two dry-run cordons went to the server, nothing stored, no eviction
    assert sim.counters().get("patch nodes") == 2 and "create pods/eviction" not in sim.counters()
    assert not any(unschedulable(sim, node) for node in BATCH)


def test_a_batch_without_room_for_its_vms_is_refused_naming_each_node_and_changes_nothing(sim):
    sim.reset_counters()
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, api_timeout=30, nodes=BATCH + [SPARE], timeout=60)
    result = run_service(run, KubevirtNodeDrainOptions, params)
    assert result["failed"] and result["changed"] is False and result["drained"] is False
    assert result["msg"].startswith("Preflight refused to drain worker-1, worker-2, worker-3 at once, nothing was changed: "
                                    "worker-1: the other schedulable nodes (none) cannot hold ")
    assert "| worker-2: the other schedulable nodes (none)" in result["msg"]
    for node in BATCH:
        problems = result["nodes_results"][node]["preflight"]["problems"]
        assert [p["code"] for p in problems] == ["capacity"] and sorted(problems[0]["vms"]) == ["vms/" + vm for vm in VMS[node]]
        assert result["nodes_results"][node]["msg"].startswith("Preflight refused to drain {0}, nothing".format(node))
    assert result["nodes_results"][SPARE]["preflight"]["problems"] == [] and "failed" not in result["nodes_results"][SPARE]
    assert "patch nodes" not in sim.counters() and "create pods/eviction" not in sim.counters()
    assert not any(unschedulable(sim, node) for node in BATCH + [SPARE])


def test_two_nodes_drain_in_one_call_within_their_shares_and_the_cluster_limit(sim):
    before = vmis(sim)
    sim.reset_counters()
    shown, resumed = [], []

    def counted(options, check_mode):
        resumed.append(options.resume is not None)
        return run(options, check_mode)

    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, api_timeout=30, nodes=BATCH, max_parallel_per_node=SHARES, timeout=120,
                         progress_every=1)
    result = run_service(counted, KubevirtNodeDrainOptions, params, show=shown.append)
    assert result["drained"] and not result.get("failed") and not result["timed_out"], result.get("msg")
    everything = sorted("vms/" + vm for node in BATCH for vm in VMS[node])
    assert sorted(result["migrated"]) == sorted(result["moved"]) == everything and result["left"] == []
    assert any(resumed), "the drain ended in its first call: the sliced calls were not exercised"
    for node in BATCH:
        own = result["nodes_results"][node]
        assert own["drained"] and sorted(own["migrated"]) == ["vms/" + vm for vm in VMS[node]] and own["safe_to_shutdown"]["safe"]
        assert own["peak_in_flight"] == SHARES[node] and own["concurrency"] == SHARES[node]
        assert own["evictions"]["requests"] == 4 and own["waited_seconds"] <= result["waited_seconds"]
        assert unschedulable(sim, node)
    # the first step sends worker-1's two and worker-2's one: the cluster's three
    assert result["peak_in_flight"] == PER_CLUSTER and result["evictions"]["requests"] == 8
    # one WatchSet: a Pods stream per node, the VMIs, the migrations and the PDBs, each listed once in the last call
    assert result["watch"]["lists"] - result["watch"]["relists_after_410"] == len(BATCH) + 3
    # every VM live-migrated exactly once, to the spare, from its own node
    after = vmis(sim)
    succeeded = {}
    for vmim in sim.kubectl_json("get", "vmim", "-n", NS)["items"]:
        assert vmim["status"]["phase"] == "Succeeded", vmim["metadata"]["name"]
        succeeded.setdefault(vmim["spec"]["vmiName"], []).append(vmim["status"]["migrationState"]["sourceNode"])
    assert succeeded == {vm: [node] for node in BATCH for vm in VMS[node]}
    for name, vmi in after.items():
        assert vmi["metadata"]["uid"] == before[name]["metadata"]["uid"] and vmi["status"]["nodeName"] == SPARE
    # the simulator's peaks: per node within the shares, in all within parallelMigrationsPerCluster
    counters = migration_counters(sim)
    assert counters["started"] == 8 and counters["peak"] <= PER_CLUSTER
    assert all(counters["peak_per_node"].get(node, 0) <= SHARES[node] for node in BATCH), counters
    assert all(counters["marked_peak_per_node"].get(node, 0) <= SHARES[node] for node in BATCH), counters
    # one line per migration, each under its node's name and counted per node, in order
    lines = [MIGRATED.match(line) for line in shown if MIGRATED.match(line)]
    assert len(lines) == 8, shown
    for node in BATCH:
        own = [m for m in lines if m.group(1) == node]
        assert all(m.group(3) == node and m.group(2) in VMS[node] for m in own)
        assert [int(m.group(4)) for m in own] == [1, 2, 3, 4]
