"""`kubevirt_ops.rebalance.kubevirt_node_drain` against the simulator's `maintenance` scenario (worker-1 holds
vm-live (LiveMigrate), vm-if-possible (LiveMigrateIfPossible), vm-none (None), vm-rwo (LiveMigrate on an RWO
PVC: not migratable) and bare-vmi; worker-3 a VMI replica set's VMI, a pool VM under a maxUnavailable PDB, a
Deployment Pod and DaemonSet Pods), one acceptance point of issue 8 a test. Most tests call the module's
function in process (fast); the refusal test runs the module through ansible."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import ARG_SPEC, KubevirtNodeDrainOptions, run

from .ansible_run import run_ansible_module
from .conftest import kubectl_available, running_kubesim, start_kubesim, stop_kubesim
from .drain_scenario import write_scenario
from .module_call import run_service

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

NS = "vms"
NOT_MIGRATABLE = ('admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
                  "VMI vm-rwo is configured with an eviction strategy but is not live-migratable")
ALLOW_ALL = {"allow_shutdown": True, "allow_loss": True, "allow_blocked": True}


# ------------------------------------------------------------------------------------------ helpers
def drain(sim, check_mode: bool = False, **args) -> dict:
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, api_timeout=30, timeout=40, **args)
    return run_service(run, KubevirtNodeDrainOptions, params, check_mode)


def run_module(sim, expect_failure: bool = False, check: bool = False, **args) -> dict:
    return run_ansible_module(sim, "kubevirt_ops.rebalance.kubevirt_node_drain", args, check=check, expect_failure=expect_failure)


def vmis(sim) -> dict:
    return {v["metadata"]["name"]: v for v in sim.kubectl_json("get", "vmi", "-n", NS)["items"]}


def pods_on(sim, node: str) -> list:
    return [p for p in sim.kubectl_json("get", "pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]
            if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") not in ("Succeeded", "Failed")]


def daemonset_pods(pods: list) -> set:
    return {p["metadata"]["name"] for p in pods if any(r["kind"] == "DaemonSet" for r in p["metadata"].get("ownerReferences", []))}


def unschedulable(sim, node: str) -> bool:
    return sim.kubectl("get", "node", node, "-o", "jsonpath={.spec.unschedulable}").stdout == "true"


def by_name(result: dict) -> dict:
    return {vm["name"]: vm for vm in result["vms"]}


@pytest.fixture
def sim(tmp_path):
    # only the drain moves Pods: the scenario's descheduler CronJob is suspended
    with running_kubesim("maintenance", tmp_path / "sim", suspend=True, settle=True) as started:
        yield started


# ------------------------------------------------------------------------------------------ preflight
def test_drain_refuses_bare_vmi_without_allow_loss_and_changes_nothing(sim):
    launchers_before = {p["metadata"]["name"] for p in pods_on(sim, "worker-1")}
    sim.reset_counters()
    result = run_module(sim, expect_failure=True, node="worker-1", allow_shutdown=True, allow_blocked=True)
    assert result["msg"].startswith("Preflight refused to drain worker-1, nothing was changed: vms/bare-vmi would be shut down and never "
                                    "started again")
    assert [p["code"] for p in result["preflight"]["problems"]] == ["vms_lost"]
    assert result["preflight"]["problems"][0]["option"] == "allow_loss"
    assert by_name(result)["bare-vmi"]["action"] == "lost" and result["changed"] is False
    # nothing happened in the cluster: not cordoned, no eviction, every Pod still there
    assert not unschedulable(sim, "worker-1")
    assert "create pods/eviction" not in sim.counters() and "patch nodes" not in sim.counters()
    assert {p["metadata"]["name"] for p in pods_on(sim, "worker-1")} == launchers_before


def test_check_mode_preflight_reports_every_kind_of_vm(sim):
    sim.reset_counters()
    result = run_module(sim, check=True, node="worker-1", **ALLOW_ALL)
    assert result["changed"] is True and result["cordoned"] is False
    assert not unschedulable(sim, "worker-1")
    # the cordon went to the server as a dry run (nothing stored), no eviction was sent
    assert sim.counters().get("patch nodes") == 1 and "create pods/eviction" not in sim.counters()
    vms = {vm["name"]: vm for vm in result["preflight"]["vms"]}
    assert {name: vm["action"] for name, vm in vms.items()} == {
        "vm-live": "live_migrate", "vm-if-possible": "live_migrate", "vm-none": "restart", "vm-rwo": "blocked", "bare-vmi": "lost"}
    assert vms["vm-rwo"]["blocked_message"] == NOT_MIGRATABLE
    assert result["preflight"]["capacity"]["fits"] is True
    assert set(result["preflight"]["capacity"]["placements"]) == {"vms/vm-live", "vms/vm-if-possible", "vms/vm-none"}
    assert result["preflight"]["limits"] == {"parallel_migrations_per_cluster": 5, "parallel_outbound_migrations_per_node": 2}
    assert {vm["result"] for vm in result["vms"]} == {"pending", "blocked"}


def test_non_migratable_livemigrate_vm_blocks_the_drain_with_kubevirts_message(sim):
    result = drain(sim, node="worker-1", allow_shutdown=True, allow_loss=True)
    assert result["failed"] and [p["code"] for p in result["preflight"]["problems"]] == ["vms_blocked"]
    assert NOT_MIGRATABLE in result["msg"] and "allow_blocked: true" in result["msg"]
    assert not unschedulable(sim, "worker-1")


# ------------------------------------------------------------------------------------------ the drain
def test_drain_migrates_live_vms_restarts_none_vm_and_reports_lost_and_blocked(sim):
    before = vmis(sim)
    daemons = daemonset_pods(pods_on(sim, "worker-1"))
    result = drain(sim, node="worker-1", **ALLOW_ALL)
    assert result["changed"] and result["drained"] and not result.get("failed")
    vms, after = by_name(result), vmis(sim)
    for name in ("vm-live", "vm-if-possible"):
        assert vms[name]["result"] == "migrated" and vms[name]["migration"].startswith("kubevirt-evacuation-")
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"] == vms[name]["uid_after"]
        assert after[name]["status"]["nodeName"] == vms[name]["target_node"] != "worker-1"
        vmim = sim.kubectl_json("get", "vmim", vms[name]["migration"], "-n", NS)
        assert vmim["status"]["phase"] == "Succeeded" and vmim["status"]["migrationState"]["sourceNode"] == "worker-1"
    # strategy None: a restart elsewhere with a new UID, reported so
    assert vms["vm-none"]["result"] == "restarted" and vms["vm-none"]["uid_after"] != before["vm-none"]["metadata"]["uid"]
    assert after["vm-none"]["metadata"]["uid"] == vms["vm-none"]["uid_after"] and after["vm-none"]["status"]["nodeName"] != "worker-1"
    assert vms["bare-vmi"]["result"] == "deleted" and after["bare-vmi"]["status"]["phase"] in ("Failed", "Succeeded")
    assert vms["vm-rwo"]["result"] == "blocked" and vms["vm-rwo"]["reason"] == NOT_MIGRATABLE
    assert result["left"] == ["vms/vm-rwo"] and result["safe_to_shutdown"]["safe"] is False
    # cordoned; DaemonSet Pods and the Deployment Pod stay (pods: launchers)
    assert unschedulable(sim, "worker-1")
    left = pods_on(sim, "worker-1")
    assert daemonset_pods(left) == daemons and any(p["metadata"]["name"].startswith("frontend-") for p in left)
    # the simulator's peak of running migrations from worker-1 stayed within parallelOutboundMigrationsPerNode
    migrations = sim.admin("GET", "counters?cluster=workload")["workload"]["migrations"]
    assert migrations["peak_per_node"]["worker-1"] <= 2 and migrations["marked_peak_per_node"]["worker-1"] <= 2
    assert result["peak_in_flight"] <= 2
    # a second run changes nothing
    again = drain(sim, node="worker-1", **ALLOW_ALL)
    assert again["changed"] is False and by_name(again)["vm-rwo"]["result"] == "blocked"
    # node maintenance, Shutting down and Re-enabling a Node after Eviction: not safe while vm-rwo runs; then stop it, check again,
    # and uncordon
    sim.kubectl("patch", "vm", "vm-rwo", "-n", NS, "--type=merge", "-p", '{"spec":{"runStrategy":"Halted"}}')
    sim.kubectl("wait", "--for=delete", "vmi/vm-rwo", "-n", NS, "--timeout=30s")
    safe = drain(sim, node="worker-1", state="safe_to_shutdown")["safe_to_shutdown"]
    assert safe["safe"] is True and safe["vmis"] == [] and any(p.startswith("apps/frontend-") for p in safe["other_pods"])
    assert drain(sim, node="worker-1", state="uncordon")["changed"] is True
    assert not unschedulable(sim, "worker-1")
    assert drain(sim, node="worker-1", state="uncordon")["changed"] is False


def test_drain_all_pods_replaces_the_replica_set_vmi_finds_the_pool_pdb_and_keeps_daemonsets(sim):
    before = vmis(sim)
    on_node = pods_on(sim, "worker-3")
    daemons = daemonset_pods(on_node)
    frontend = [p["metadata"]["name"] for p in on_node if p["metadata"]["name"].startswith("frontend-")]
    rs_vmi = next(n for n, v in before.items() if n.startswith("web-rs") and v["status"]["nodeName"] == "worker-3")
    pool_vmi = next(n for n, v in before.items() if n.startswith("pool-") and v["status"]["nodeName"] == "worker-3")
    result = drain(sim, node="worker-3", pods="all", allow_shutdown=True)
    assert result["drained"], result.get("msg")
    # the pool's maxUnavailable PDB is found in preflight (it does not stop a LiveMigrate VM: KubeVirt answers first)
    pdb = next(p for p in result["preflight"]["pdbs"] if p["name"] == "pool-pdb")
    assert pdb["needs_scale_subresource"] and pdb["blocks_evictions"] and pdb["max_unavailable"] == 1
    assert [f["code"] for f in pdb["findings"]] == ["pdb_needs_scale_subresource"]
    vms = by_name(result)
    assert vms[rs_vmi]["result"] == "replaced" and vms[rs_vmi]["owner_kind"] == "VirtualMachineInstanceReplicaSet"
    assert vms[pool_vmi]["result"] == "migrated"
    assert vmis(sim)[pool_vmi]["metadata"]["uid"] == before[pool_vmi]["metadata"]["uid"]
    assert rs_vmi not in vmis(sim)
    assert sorted(result["preflight"]["pods"]["ignored"]) == sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}"
                                                                    for p in on_node if p["metadata"]["name"] in daemons)
    assert [p["result"] for p in result["pods"]] == ["evicted"] and result["pods"][0]["name"] == frontend[0]
    left = pods_on(sim, "worker-3")
    assert {p["metadata"]["name"] for p in left} == daemons


def test_migration_failure_mid_drain_leaves_a_clear_state_and_a_second_run_finishes(sim):
    sim.kubectl("annotate", "vmi", "vm-live", "-n", NS, "kubesim.io/migration=fail")
    uid = vmis(sim)["vm-live"]["metadata"]["uid"]
    first = drain(sim, node="worker-1", **ALLOW_ALL)
    assert first["failed"] and first["drained"] is False and first["cordoned"] is True
    vms = by_name(first)
    assert vms["vm-live"]["result"] == "failed" and "failed: Live migration failed" in vms["vm-live"]["reason"]
    assert vms["vm-if-possible"]["result"] == "migrated" and vms["vm-none"]["result"] == "restarted"
    assert "vms/vm-live" in first["left"] and "vms/vm-if-possible" in first["moved"]
    assert "Run the task again to continue" in first["resume"] and "Node worker-1 stays cordoned" in first["msg"]
    assert unschedulable(sim, "worker-1")
    # the cause goes away; the second run waits for KubeVirt's retry of the evacuation instead of evicting again
    sim.kubectl("annotate", "vmi", "vm-live", "-n", NS, "kubesim.io/migration-")
    sim.reset_counters()
    second = drain(sim, node="worker-1", **ALLOW_ALL)
    assert not second.get("failed") and second["drained"]
    assert by_name(second)["vm-live"]["result"] == "migrated" and second["evictions"]["requests"] == 0
    assert vmis(sim)["vm-live"]["metadata"]["uid"] == uid and vmis(sim)["vm-live"]["status"]["nodeName"] != "worker-1"
    assert set(by_name(second)) == {"vm-live", "vm-rwo"}


def test_migrations_per_node_never_exceed_the_limit_with_eight_vms(tmp_path):
    scenario = write_scenario(tmp_path / "eight.yaml", count=8, time_scale=40)
    sim = start_kubesim(str(scenario), tmp_path / "sim")
    try:
        sim.settle()
        assert len([v for v in vmis(sim).values() if v["status"].get("nodeName") == "worker-1"]) == 8
        sim.reset_counters()
        result = drain(sim, node="worker-1")
        assert result["drained"] and result["summary"] == {"migrated": 8}
        migrations = sim.admin("GET", "counters?cluster=workload")["workload"]["migrations"]
        assert migrations["started"] == 8
        assert migrations["peak_per_node"] == {"worker-1": 2} and migrations["marked_peak_per_node"] == {"worker-1": 2}
        assert result["peak_in_flight"] == 2 and result["evictions"] == {"requests": 8, "responses": {"429": 8}}
        limited = drain(sim, node="worker-2", max_parallel=1, require_capacity=False)
        assert limited["drained"] and limited["concurrency"] == 1 and limited["peak_in_flight"] == 1
        migrations = sim.admin("GET", "counters?cluster=workload")["workload"]["migrations"]
        assert migrations["peak_per_node"]["worker-2"] == 1 and migrations["marked_peak_per_node"]["worker-2"] == 1
    finally:
        stop_kubesim(sim)
