"""rolling_maintenance: the order (an empty spare first), batches within KubeVirt's limits, the spare room and the PDBs,
the second migrations a plan costs, the shares of the cluster's migrations, and the taint helpers."""
from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import rolling_maintenance as rm

GI = 1024 ** 3
LIMITS = {"parallel_migrations_per_cluster": 5, "parallel_outbound_migrations_per_node": 2}


def node(name, used_gi=0, memory_gi=64, taints=None, schedulable=True):
    return {"name": name, "schedulable": schedulable, "taints": taints or [], "allocatable": {"cpu": 16000, "memory": memory_gi * GI, "pods": 110},
            "requested": {"cpu": 0, "memory": used_gi * GI, "pods": 0}}


def vm(index, on, memory_gi=4, action="live_migrate", pdbs=()):
    return {"key": "vms/vm-{0}".format(index), "node": on, "action": action, "requests": {"cpu": 1000, "memory": memory_gi * GI, "pods": 1},
            "pdbs": list(pdbs)}


def cluster(per_node, memory_gi=64, vm_gi=4):
    """Nodes worker-1.. with the given VM counts (used memory from their VMs)."""
    vms, nodes = [], []
    for number, count in enumerate(per_node, 1):
        name = "worker-{0}".format(number)
        first = len(vms)
        vms.extend(vm(first + offset, name, vm_gi) for offset in range(count))
        nodes.append(node(name, used_gi=count * vm_gi, memory_gi=memory_gi))
    return nodes, vms


def test_an_empty_spare_goes_first_and_every_vm_moves_once():
    nodes, vms = cluster([3, 3, 3, 0])
    result = rm.plan(nodes, vms, [n["name"] for n in nodes], LIMITS, max_nodes_in_parallel=1)
    assert result["order"] == ["worker-4", "worker-1", "worker-2", "worker-3"]
    assert result["second_migrations"] == [] and result["unplaced"] == []
    assert result["migrations"] == 9 and result["migrations_per_vm"] == 1.0
    assert [b["nodes"] for b in result["batches"]] == [["worker-4"], ["worker-1"], ["worker-2"], ["worker-3"]]


def test_without_spare_the_first_node_costs_second_migrations_and_is_refused():
    nodes, vms = cluster([3, 3, 3, 3])
    result = rm.plan(nodes, vms, [n["name"] for n in nodes], LIMITS, max_nodes_in_parallel=1)
    assert len(result["second_migrations"]) == 3 and result["migrations"] == 15
    assert {a["from"] for a in result["second_migrations"]} == {"worker-1"}
    assert all(a["lands_on"] != "worker-1" for a in result["second_migrations"])
    problems = rm.problems(result, allow_double_migrations=False)
    assert [p["code"] for p in problems] == ["second_migrations"] and problems[0]["option"] == "allow_double_migrations"
    assert "3 of 12 VMs twice" in problems[0]["message"] and "vms/vm-0 (worker-1 -> " in problems[0]["message"]
    assert rm.problems(result, allow_double_migrations=True) == []


def test_a_node_outside_the_set_is_spare_room():
    nodes, vms = cluster([3, 3, 0])
    result = rm.plan(nodes, vms, ["worker-1", "worker-2"], LIMITS, max_nodes_in_parallel=1)
    assert result["order"] == ["worker-1", "worker-2"] and result["second_migrations"] == []
    assert result["batches"][0]["second_migrations"] == []


def test_batches_grow_as_limits_and_room_allow():
    nodes, vms = cluster([2, 2, 2, 0, 0, 0], memory_gi=64)
    result = rm.plan(nodes, vms, [n["name"] for n in nodes], LIMITS, max_nodes_in_parallel=3)
    assert result["nodes_at_once"] == 3   # ceil(5 / 2)
    assert [b["nodes"] for b in result["batches"]][0] == ["worker-4", "worker-5", "worker-6"]
    assert result["batches"][0]["max_parallel"] == {"worker-4": 2, "worker-5": 2, "worker-6": 1}
    assert result["batches"][1]["nodes"] == ["worker-1", "worker-2", "worker-3"]
    assert result["second_migrations"] == []
    narrow = rm.plan(nodes, vms, [n["name"] for n in nodes], LIMITS, max_nodes_in_parallel=2)
    assert max(len(b["nodes"]) for b in narrow["batches"]) == 2


def test_a_batch_never_holds_more_pods_of_a_pdb_than_it_allows():
    nodes, vms = cluster([2, 2, 0, 0])
    vms[0]["pdbs"] = ["vms/pool"]
    vms[2]["pdbs"] = ["vms/pool"]
    result = rm.plan(nodes, vms, ["worker-1", "worker-2"], LIMITS, max_nodes_in_parallel=3, pdbs={"vms/pool": 1})
    assert [b["nodes"] for b in result["batches"]] == [["worker-1"], ["worker-2"]]
    allowed = rm.plan(nodes, vms, ["worker-1", "worker-2"], LIMITS, max_nodes_in_parallel=3, pdbs={"vms/pool": 2})
    assert [b["nodes"] for b in allowed["batches"]] == [["worker-1", "worker-2"]]


def test_started_nodes_of_a_stopped_run_go_first():
    nodes, vms = cluster([3, 3, 0])
    result = rm.plan(nodes, vms, ["worker-2", "worker-3"], LIMITS, max_nodes_in_parallel=1, in_progress=["worker-2"])
    assert result["order"] == ["worker-2", "worker-3"]


def test_no_room_at_all_is_a_capacity_problem():
    nodes, vms = cluster([10, 10], memory_gi=48)
    result = rm.plan(nodes, vms, ["worker-1", "worker-2"], LIMITS, max_nodes_in_parallel=1)
    assert result["unplaced"]
    assert [p["code"] for p in rm.problems(result, allow_double_migrations=True)] == ["capacity"]


def test_vms_that_do_not_move_are_not_placed_and_restarts_are_not_migrations():
    nodes, vms = cluster([0, 0])
    vms = [vm(1, "worker-1", action="blocked"), vm(2, "worker-1", action="restart"), vm(3, "worker-1")]
    result = rm.plan(nodes, vms, ["worker-1"], LIMITS, max_nodes_in_parallel=1)
    assert result["migrations"] == 1 and result["vms"] == 1
    assert set(result["batches"][0]["second_migrations"]) == set()


def test_nodes_at_once_and_shares():
    assert rm.nodes_at_once(LIMITS, 10) == 3
    assert rm.nodes_at_once(LIMITS, 1) == 1
    assert rm.nodes_at_once({"parallel_migrations_per_cluster": 4, "parallel_outbound_migrations_per_node": 2}, 10) == 2
    assert rm.migration_shares(["a", "b"], LIMITS) == {"a": 2, "b": 2}
    assert rm.migration_shares(["a", "b", "c", "d", "e", "f"], LIMITS) == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1}
    assert sum(rm.migration_shares(["a", "b", "c"], LIMITS).values()) == 5


def test_taint_helpers_keep_other_taints():
    other = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    tainted = rm.with_pending_taint([other, rm.pending_taint("old")], "run-1")
    assert tainted == [other, {"key": rm.PENDING_TAINT_KEY, "value": "run-1", "effect": "PreferNoSchedule"}]
    assert rm.without_pending_taint(tainted) == [other]
    assert rm.without_pending_taint(None) == []
