"""drain_plan: kubectl drain's Pod filters, the preflight problems per policy option, capacity by requests,
the migration concurrency from KubeVirt's limits, and the outcome of one VM from upstream-shaped objects."""
from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import drain_plan as plan

FILTERS = {"all_pods": True, "ignore_daemonsets": True, "delete_emptydir_data": True, "force": True}
POLICY = {"allow_shutdown": False, "allow_loss": False, "allow_blocked": False, "require_capacity": True}


def pod(name, owner=None, emptydir=False, launcher=False, phase="Running"):
    metadata = {"name": name, "namespace": "ns", "labels": {"kubevirt.io": "virt-launcher"} if launcher else {}}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    return {"metadata": metadata, "spec": {"nodeName": "n1", "volumes": [{"name": "v", "emptyDir": {}}] if emptydir else []},
            "status": {"phase": phase}}


def vm(name, action, memory=100):
    return {"namespace": "ns", "name": name, "action": action, "reason": "r", "blocked_message": "denied" if action == "blocked" else None,
            "requests": {"memory": memory, "cpu": 10, "pods": 1}}


def test_classify_pods_follows_kubectl_drain_filters():
    pods = [pod("ds", owner="DaemonSet"), pod("bare"), pod("web", owner="ReplicaSet", emptydir=True),
            pod("virt-launcher-a", owner="VirtualMachineInstance", emptydir=True, launcher=True), pod("done", phase="Succeeded")]
    result = plan.classify_pods(pods, **FILTERS)
    assert result["ignored"] == ["ns/ds"] and result["skipped"] == ["ns/done"] and result["refused"] == []
    assert result["evict"] == ["ns/bare", "ns/virt-launcher-a", "ns/web"]
    strict = plan.classify_pods(pods, all_pods=True, ignore_daemonsets=False, delete_emptydir_data=False, force=False)
    assert {entry["pod"]: entry["reason"] for entry in strict["refused"]} == {
        "ns/ds": plan.DAEMONSET_REFUSED, "ns/bare": plan.UNMANAGED_REFUSED, "ns/web": plan.LOCAL_STORAGE_REFUSED,
        "ns/virt-launcher-a": plan.LOCAL_STORAGE_REFUSED}
    launchers_only = plan.classify_pods(pods, all_pods=False, ignore_daemonsets=True, delete_emptydir_data=True, force=True)
    assert launchers_only["evict"] == ["ns/virt-launcher-a"]


def test_problems_name_the_option_that_allows_each():
    vms = [vm("a", "live_migrate"), vm("b", "restart"), vm("c", "lost"), vm("d", "blocked"), vm("e", "replace")]
    room = {"fits": False, "nodes": ["n2"], "unplaced": ["ns/a"]}
    found = plan.problems(vms, {"refused": []}, room, **POLICY)
    assert [(p["code"], p["option"]) for p in found] == [("vms_lost", "allow_loss"), ("vms_shut_down", "allow_shutdown"),
                                                         ("vms_blocked", "allow_blocked"), ("capacity", "require_capacity")]
    assert found[1]["vms"] == ["ns/b", "ns/e"] and "ns/d: denied" in found[2]["message"]
    assert plan.problems(vms, {"refused": []}, room, allow_shutdown=True, allow_loss=True, allow_blocked=True, require_capacity=False) == []


def test_capacity_places_largest_memory_first_on_schedulable_untainted_nodes():
    nodes = [{"name": "n1", "schedulable": True, "kubevirt_schedulable": True, "taints": [], "allocatable": {"memory": 1000}, "requested": {}},
             {"name": "n2", "schedulable": True, "kubevirt_schedulable": True, "taints": [], "allocatable": {"memory": 300, "cpu": 1000, "pods": 10},
              "requested": {"memory": 0, "cpu": 0, "pods": 0}},
             {"name": "n3", "schedulable": False, "kubevirt_schedulable": True, "taints": [], "allocatable": {"memory": 9000}, "requested": {}},
             {"name": "cp", "schedulable": True, "kubevirt_schedulable": True, "taints": [{"effect": "NoSchedule"}],
              "allocatable": {"memory": 9000}, "requested": {}}]
    room = plan.capacity(nodes, "n1", [vm("small", "live_migrate", 100), vm("big", "restart", 200), vm("stays", "blocked", 50),
                                       vm("third", "live_migrate", 100)])
    assert room["nodes"] == ["n2"] and room["placements"] == {"ns/big": "n2", "ns/small": "n2"}
    assert room["unplaced"] == ["ns/third"] and room["fits"] is False


def test_concurrency_is_the_per_node_limit_capped_by_the_cluster_limit_and_max_parallel():
    assert plan.concurrency({"parallel_outbound_migrations_per_node": 2, "parallel_migrations_per_cluster": 5}, None) == 2
    assert plan.concurrency({"parallel_outbound_migrations_per_node": 8, "parallel_migrations_per_cluster": 5}, None) == 5
    assert plan.concurrency({"parallel_outbound_migrations_per_node": 2, "parallel_migrations_per_cluster": 5}, 1) == 1


def vmi(uid, node, phase="Running"):
    return {"metadata": {"namespace": "ns", "name": "a", "uid": uid}, "status": {"nodeName": node, "phase": phase}}


def vmim(name, phase, source="n1", created="2025-01-01T00:00:00Z", reason=None):
    state = {"sourceNode": source, "targetNode": "n2"}
    if reason:
        state["failureReason"] = reason
    return {"metadata": {"namespace": "ns", "name": name, "creationTimestamp": created}, "spec": {"vmiName": "a"},
            "status": {"phase": phase, "migrationState": state}}


def test_outcome_of_a_live_migration_needs_the_vmi_elsewhere_and_a_succeeded_migration():
    item = {"namespace": "ns", "name": "a", "uid": "u1", "action": "live_migrate"}
    assert plan.outcome(item, vmi("u1", "n1"), [vmim("m1", "Running")], set(), "n1") is None
    assert plan.outcome(item, vmi("u1", "n2"), [vmim("m1", "Running")], set(), "n1") is None   # the VMIM is not Succeeded yet
    done = plan.outcome(item, vmi("u1", "n2"), [vmim("m1", "Succeeded")], set(), "n1")
    assert done == {"result": "migrated", "target_node": "n2", "uid_after": "u1", "migration": "m1", "reason": None}
    failed = plan.outcome(item, vmi("u1", "n1"), [vmim("m0", "Failed", reason="old"), vmim("m1", "Failed", reason="boom")], {"m0"}, "n1")
    assert failed["result"] == "failed" and failed["reason"] == "migration m1 failed: boom"
    assert plan.outcome(item, vmi("u1", "n1"), [vmim("m0", "Failed")], {"m0"}, "n1") is None   # an earlier run's failure


def test_outcome_of_shutdowns():
    restart = {"namespace": "ns", "name": "a", "uid": "u1", "action": "restart"}
    assert plan.outcome(restart, vmi("u1", "n1"), [], set(), "n1") is None
    assert plan.outcome(restart, vmi("u2", "n3"), [], set(), "n1")["result"] == "restarted"
    lost = dict(restart, action="lost")
    assert plan.outcome(lost, vmi("u1", "n1", phase="Failed"), [], set(), "n1")["result"] == "deleted"
    replace = dict(restart, action="replace", owner_name="rs")
    assert plan.outcome(replace, None, [], set(), "n1")["result"] == "replaced"
