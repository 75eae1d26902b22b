"""The drain's edge without a cluster: options refused before any request, which eviction answers are the drain's to
decide (never retried), and uncordon in and out of check mode (a dry-run patch in check mode)."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Failure
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_node_drain as drain


def options(**given):
    return drain.KubevirtNodeDrainOptions.from_params(spec_params(drain.ARG_SPEC, **given))


def node(unschedulable=False):
    return {"metadata": {"name": "worker-1"}, "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


class StubClient:
    """The verbs NodeApi uses, recorded; a patch answers the node as the server would store it."""

    def __init__(self, stored):
        self.stored = stored
        self.patches = []

    def require_kind(self, kind, group=None):
        return kind

    def get(self, resource, name, namespace=None):
        return self.stored

    def patch(self, resource, name, body, namespace=None, patch_type="merge", dry_run=False, request=None):
        self.patches.append({"resource": resource, "name": name, "body": body, "dry_run": dry_run, "request": request})
        return {"metadata": self.stored["metadata"], "spec": {"unschedulable": True} if body["spec"]["unschedulable"] else {},
                "status": self.stored["status"]}

    def list_kind(self, kind, group=None, **kwargs):
        return None     # no KubeVirt here: nothing is marked for evacuation


class EvacuatingClient(StubClient):
    """A cordoned node with two VMs a stopped drain left marked: vm-a with a Pending evacuation migration, vm-b with one
    already Running. `listed` is virt-api's resource list (None: the group is not served); `refuse` fails a cancel."""

    def __init__(self, listed, refuse=None):
        super().__init__(node(unschedulable=True))
        self.listed, self.refuse, self.calls = listed, refuse, []

    def list_kind(self, kind, group=None, **kwargs):
        if kind == "VirtualMachineInstance":
            return [{"metadata": {"name": name, "namespace": "vms"},
                     "status": {"nodeName": "worker-1", "evacuationNodeName": "worker-1", "phase": "Running"}} for name in ("vm-a", "vm-b")]
        return [{"metadata": {"name": "mig-a", "namespace": "vms", "uid": "u-a", "annotations": {kv.EVACUATION_MIGRATION_ANNOTATION: "worker-1"}},
                 "spec": {"vmiName": "vm-a"}, "status": {"phase": "Pending"}},
                {"metadata": {"name": "mig-b", "namespace": "vms", "uid": "u-b", "annotations": {kv.EVACUATION_MIGRATION_ANNOTATION: "worker-1"}},
                 "spec": {"vmiName": "vm-b"}, "status": {"phase": "Running"}}]

    def get_path(self, path, request, query_params=()):
        self.calls.append(("discover", path))
        if self.listed is None:
            raise ApiFailure(request, 404, "NotFound", "the server could not find the requested resource")
        return self.listed

    def put_path(self, path, body, request):
        self.calls.append(("cancel", path, body))
        if self.refuse:
            raise ApiFailure(request, *self.refuse)
        return None

    def delete(self, resource, name, namespace=None, preconditions=None, dry_run=False, **kwargs):
        self.calls.append(("delete", resource, namespace, name, preconditions, dry_run))


# ------------------------------------------------------------------------------------------ options
def test_options_are_checked_before_any_request_and_the_node_is_stripped():
    assert drain.validate(options(node=" worker-1 ")).node == "worker-1"
    for given, path, words in (({"node": "Bad_Node"}, "node", "'Bad_Node' is not a valid node name"),
                               ({"node": "worker-1", "timeout": 0}, "timeout", "must be more than 0 seconds"),
                               ({"node": "worker-1", "max_parallel": 0}, "max_parallel", "must be 1 or more")):
        with pytest.raises(InvalidOption) as caught:
            drain.run(options(**given), False, client=StubClient(node()))
        assert caught.value.path == path and caught.value.message.startswith(path + ": ") and words in caught.value.message


# ------------------------------------------------------------------------------------------ evictions
@pytest.mark.parametrize("status, message, answer", [
    (429, kv.WEBHOOK_DENIED + 'Eviction triggered evacuation of VMI "vms/vm-live"', True),
    (429, kv.PDB_VIOLATION, True),
    (429, "Too many requests, please try again later.", False),   # server overload: retried
    (404, 'pods "virt-launcher-x" not found', True),
    (500, kv.MULTIPLE_PDBS, True),
    (500, "etcdserver: request timed out", False),
    (503, "", False),
])
def test_kubevirts_and_the_pdb_checks_answers_are_the_drains_to_decide(status, message, answer):
    assert drain.is_eviction_answer(Failure(status, "", message, retryable=status in (429, 500, 503))) is answer


# ------------------------------------------------------------------------------------------ uncordon
def test_uncordon_patches_a_cordoned_node_and_check_mode_sends_the_patch_as_a_dry_run():
    client = StubClient(node(unschedulable=True))
    result = drain.run(options(node="worker-1", state="uncordon"), True, client=client)
    assert result["changed"] is True and result["cordoned"] is True and result["ready"] is True
    assert result["diff"] == {"before": {"unschedulable": True}, "after": {"unschedulable": False}}
    assert client.patches == [{"resource": "Node", "name": "worker-1", "body": {"spec": {"unschedulable": None}}, "dry_run": True,
                               "request": "uncordon node worker-1"}]
    client = StubClient(node(unschedulable=True))
    result = drain.run(options(node="worker-1", state="uncordon"), False, client=client)
    assert result["changed"] is True and result["cordoned"] is False and [p["dry_run"] for p in client.patches] == [False]


def test_uncordon_of_a_schedulable_node_changes_nothing():
    client = StubClient(node())
    result = drain.run(options(node="worker-1", state="uncordon"), False, client=client)
    assert result["changed"] is False and client.patches == []


SERVED = {"resources": [{"name": "virtualmachineinstances/evacuate/cancel"}, {"name": "virtualmachines/evacuate/cancel"}]}
CANCEL_PATH = "/apis/subresources.kubevirt.io/v1/namespaces/vms/virtualmachineinstances/{0}/evacuate/cancel"


@pytest.mark.parametrize("check_mode", [False, True])
def test_uncordon_cancels_the_evacuations_a_stopped_drain_left_before_giving_the_node_back(check_mode):
    client = EvacuatingClient(SERVED)
    result = drain.run(options(node="worker-1", state="uncordon"), check_mode, client=client)
    body = {"kind": "EvacuateCancelOptions", "apiVersion": "kubevirt.io/v1", "evacuationNodeName": "worker-1"}
    if check_mode:
        body["dryRun"] = ["All"]
    assert client.calls == [("discover", "/apis/subresources.kubevirt.io/v1"),
                            ("cancel", CANCEL_PATH.format("vm-a"), body),
                            ("delete", "VirtualMachineInstanceMigration", "vms", "mig-a", {"uid": "u-a"}, check_mode),
                            ("cancel", CANCEL_PATH.format("vm-b"), body)]   # mig-b already runs: left to finish
    assert [p["dry_run"] for p in client.patches] == [check_mode]          # the uncordon comes after the cancels
    evacuations = result["evacuations"]
    assert result["changed"] is True and evacuations["served"] is True
    assert evacuations["stayed"] == ["vms/vm-a"] and evacuations["moving"] == ["vms/vm-b"] and evacuations["advice"] is None
    assert evacuations["deleted_migrations"] == ["vms/mig-a"]
    assert result["diff"] == {"before": {"unschedulable": True, "marked_for_evacuation": ["vms/vm-a", "vms/vm-b"]},
                              "after": {"unschedulable": False, "marked_for_evacuation": []}}


def test_uncordon_on_a_kubevirt_without_the_cancel_says_what_goes_on_and_how_to_stop_it():
    for listed in (None, {"resources": [{"name": "virtualmachines/migrate"}]}):
        client = EvacuatingClient(listed)
        result = drain.run(options(node="worker-1", state="uncordon"), False, client=client)
        assert [call[0] for call in client.calls] == ["discover"]          # nothing is cancelled or deleted
        evacuations = result["evacuations"]
        assert evacuations["served"] is False and evacuations["continuing"] == ["vms/vm-a", "vms/vm-b"]
        assert "virtctl evacuate-cancel node worker-1" in evacuations["advice"]
        assert result["diff"]["after"]["marked_for_evacuation"] == ["vms/vm-a", "vms/vm-b"]


def test_a_refused_cancel_is_reported_and_a_missing_permission_fails_the_task():
    client = EvacuatingClient(SERVED, refuse=(400, "BadRequest", 'Node "worker-1" has NodeDrainTaintKey "kubevirt.io/drain:NoSchedule"'))
    result = drain.run(options(node="worker-1", state="uncordon"), False, client=client)
    assert result["evacuations"]["failed"] == ["vms/vm-a", "vms/vm-b"] and "NodeDrainTaintKey" in result["evacuations"]["vms"][0]["reason"]
    assert not any(call[0] == "delete" for call in client.calls) and result["evacuations"]["advice"]
    client = EvacuatingClient(SERVED, refuse=(403, "Forbidden", "cannot update resource"))
    with pytest.raises(ApiFailure):
        drain.run(options(node="worker-1", state="uncordon"), False, client=client)
    assert client.patches == []                                             # the node stays cordoned


# ------------------------------------------------------------------------------------------ node or nodes
class NoClient:
    """A client that must not be asked: the option checks come before any request."""

    def require_kind(self, kind, group=None):
        raise AssertionError("a request before the options were checked")


@pytest.mark.parametrize("given, path, words", [
    ({}, "node", "one of node or nodes is required"),
    ({"node": "worker-1", "nodes": ["worker-2"]}, "nodes", "node and nodes are mutually exclusive"),
    ({"nodes": ["worker-1"], "state": "uncordon"}, "nodes", "works with state drained only, not uncordon"),
    ({"nodes": ["worker-1"], "state": "safe_to_shutdown"}, "nodes", "Use node for state safe_to_shutdown"),
    ({"nodes": []}, "nodes", "names no node"),
    ({"nodes": ["worker-1", "Bad_Node"]}, "nodes[1]", "'Bad_Node' is not a valid node name"),
    ({"nodes": ["worker-1", " worker-1"]}, "nodes[1]", "'worker-1' is named twice"),
    ({"nodes": ["worker-1"], "max_parallel_per_node": {"worker-9": 1}}, "max_parallel_per_node.worker-9",
     "'worker-9' is not a node of this drain (worker-1)"),
    ({"nodes": ["worker-1"], "max_parallel_per_node": {"worker-1": 0}}, "max_parallel_per_node.worker-1", "a whole number of 1 or more, not 0"),
    ({"nodes": ["worker-1"], "max_parallel_per_node": {"worker-1": True}}, "max_parallel_per_node.worker-1", "not True"),
    ({"nodes": ["worker-1"], "max_parallel_per_node": {"worker-1": 1.5}}, "max_parallel_per_node.worker-1", "not 1.5"),
    ({"node": "worker-1", "max_parallel_per_node": {"worker-2": 1}}, "max_parallel_per_node.worker-2", "not a node of this drain"),
])
def test_node_or_nodes_and_the_shares_are_checked_before_any_request(given, path, words):
    with pytest.raises(InvalidOption) as caught:
        drain.run(options(**given), False, client=NoClient())
    assert caught.value.path == path and caught.value.message.startswith(path + ": ") and words in caught.value.message


def test_nodes_and_shares_are_stripped_and_a_survey_string_share_is_a_number():
    checked = drain.validate(options(nodes=[" worker-1", "worker-2 "], max_parallel_per_node={" worker-2": "2", "worker-1": 1}))
    assert checked.nodes == ["worker-1", "worker-2"] and checked.node is None
    assert checked.max_parallel_per_node == {"worker-2": 2, "worker-1": 1}
    assert drain.validate(options(node="worker-1")).nodes is None


# ------------------------------------------------------------------------------------------ the share of concurrency
LIMITS = {"parallel_migrations_per_cluster": 5, "parallel_outbound_migrations_per_node": 2}


def test_a_nodes_share_replaces_max_parallel_within_kubevirts_limits():
    shared = drain.validate(options(nodes=["a", "b", "c"], max_parallel_per_node={"a": 2, "b": 4}, max_parallel=1))
    assert drain.node_concurrency(LIMITS, shared, "a") == 2
    assert drain.node_concurrency(LIMITS, shared, "b") == 2      # never more than parallelOutboundMigrationsPerNode
    assert drain.node_concurrency(LIMITS, shared, "c") == 1      # not listed: max_parallel
    plain = drain.validate(options(nodes=["a", "b"]))
    assert drain.node_concurrency(LIMITS, plain, "a") == 2       # KubeVirt's limits
    assert drain.node_concurrency(dict(LIMITS, parallel_migrations_per_cluster=1), plain, "a") == 1


def vm_fact(node, index):
    return {"namespace": "vms", "name": "vm-{0}-{1}".format(node, index), "uid": "uid-{0}-{1}".format(node, index), "node": node,
            "verdict": "migrate", "phase": "Running", "launcher": {"name": "virt-launcher-{0}-{1}".format(node, index)}}


def preflight(node, concurrency, vms=4, per_cluster=5):
    return {"vms": [drain.plan.vm_plan(vm_fact(node, i), None) for i in range(vms)], "pods": {"other": []}, "raw_pods": [],
            "concurrency": concurrency, "limits": dict(LIMITS, parallel_migrations_per_cluster=per_cluster)}


class EvictionApi:
    """KubeVirt's answer to every launcher eviction: the evacuation started."""

    def __init__(self):
        self.evicted = []

    def evict(self, namespace, name):
        self.evicted.append(name)
        return {"code": 429, "message": kv.WEBHOOK_DENIED + 'Eviction triggered evacuation of VMI "{0}/{1}"'.format(namespace, name)}


def vmi(node, index, where=None):
    return {"metadata": {"namespace": "vms", "name": "vm-{0}-{1}".format(node, index), "uid": "uid-{0}-{1}".format(node, index)},
            "status": {"nodeName": where or node, "phase": "Running"}}


class Cache:
    """The WatchSet's reading side: what the streams hold; every VMI of nodes a, b and c running at home unless `vmis`
    says otherwise."""

    def __init__(self, vmis=(), vmims=()):
        home = [vmi(node, index) for node in ("a", "b", "c") for index in range(4)]
        self.cache = {"vmis": {(v["metadata"]["namespace"], v["metadata"]["name"]): v for v in home + list(vmis)}}
        self._vmims = list(vmims)

    def objects(self, name):
        return self._vmims if name == "vmims" else list(self.cache.get(name, {}).values())


def in_flight(batch):
    return {node: batch._in_flight(node) for node in batch.nodes}


def test_each_node_keeps_its_share_in_flight_and_the_batch_the_cluster_limit():
    api = EvictionApi()
    batch = drain.Drain(None, api, {"a": preflight("a", 2), "b": preflight("b", 2), "c": preflight("c", 1)}, clock=lambda: 0.0)
    assert batch.step(Cache()) is False
    assert in_flight(batch) == {"a": 2, "b": 2, "c": 1} and batch.peak_in_flight == 5
    assert batch.peak_per_node == {"a": 2, "b": 2, "c": 1} and {n: e["requests"] for n, e in batch.evictions.items()} == {"a": 2, "b": 2, "c": 1}
    assert batch.evictions["a"]["responses"] == {"429": 2}
    batch.step(Cache())   # nothing finished: nothing more is asked
    assert len(api.evicted) == 5


def test_the_nodes_take_turns_when_the_cluster_limit_is_below_their_sum():
    api = EvictionApi()
    batch = drain.Drain(None, api, {n: preflight(n, 2, per_cluster=3) for n in ("a", "b", "c")}, clock=lambda: 0.0)
    batch.step(Cache())
    # 2 + 2 + 2 allowed per node, 3 in the cluster: one each, not a's two and b's one
    assert batch.cluster_limit == 3 and in_flight(batch) == {"a": 1, "b": 1, "c": 1}
    assert api.evicted == ["virt-launcher-a-0", "virt-launcher-b-0", "virt-launcher-c-0"]


def migrated(node, index, target):
    """The VMI on `target` and the Succeeded migration from its node that moved it."""
    vmim = {"metadata": {"namespace": "vms", "name": "kubevirt-evacuation-{0}-{1}".format(node, index)},
            "spec": {"vmiName": "vm-{0}-{1}".format(node, index)},
            "status": {"phase": "Succeeded", "migrationState": {"sourceNode": node, "targetNode": target}}}
    return vmi(node, index, target), vmim


def test_a_finished_migration_frees_its_nodes_place_and_the_node_is_done_with_its_last_vm():
    api = EvictionApi()
    batch = drain.Drain(None, api, {"a": preflight("a", 2, vms=3), "b": preflight("b", 1, vms=1)}, clock=lambda: 0.0)
    batch.step(Cache())
    assert in_flight(batch) == {"a": 2, "b": 1}
    done = [migrated("b", 0, "spare")]
    batch.step(Cache([d[0] for d in done], [d[1] for d in done]))
    # b's VM migrated: b is done (its place is not given to a, which keeps its own share of 2)
    assert in_flight(batch) == {"a": 2, "b": 0} and "b" in batch.finished_seconds and "a" not in batch.finished_seconds
    done.append(migrated("a", 0, "spare"))
    batch.step(Cache([d[0] for d in done], [d[1] for d in done]))
    assert in_flight(batch) == {"a": 2, "b": 0} and api.evicted[-1] == "virt-launcher-a-2"
    assert [i["result"]["result"] for i in batch.node_items("a") if i["result"]] == ["migrated"]


def test_a_sliced_batch_goes_on_from_its_snapshot():
    api = EvictionApi()
    pres = {"a": preflight("a", 2), "b": preflight("b", 1)}
    batch = drain.Drain(None, api, pres, clock=lambda: 0.0)
    batch.step(Cache())
    again = drain.Drain.restore(None, EvictionApi(), pres, lambda: 0.0, batch.snapshot())
    assert in_flight(again) == {"a": 2, "b": 1} and again.peak_per_node == {"a": 2, "b": 1} and again.evictions == batch.evictions
    assert again.restored and [i["source_node"] for i in again.items] == ["a"] * 4 + ["b"] * 4


def test_the_batchs_vms_are_placed_together_outside_the_batch():
    def node_fact(name, memory):
        return {"name": name, "schedulable": True, "allocatable": {"memory": memory, "pods": 110}, "requested": {}}

    def vm(name):
        return {"namespace": "vms", "name": name, "action": "live_migrate", "requests": {"memory": 4}}

    facts = [node_fact("a", 100), node_fact("b", 100), node_fact("spare", 10)]
    rooms = drain.batch_capacity(facts, {"a": [vm("a-0"), vm("a-1")], "b": [vm("b-0"), vm("b-1")]})
    # 10 on the spare holds two of the four (first fit by name); a and b hold none (cordoned with the batch)
    assert rooms["a"]["batch"] == rooms["b"]["batch"] == ["a", "b"] and rooms["a"]["nodes"] == ["spare"]
    assert rooms["a"]["fits"] and rooms["a"]["placements"] == {"vms/a-0": "spare", "vms/a-1": "spare"} and rooms["a"]["unplaced"] == []
    assert not rooms["b"]["fits"] and rooms["b"]["placements"] == {} and rooms["b"]["unplaced"] == ["vms/b-0", "vms/b-1"]
    # one node alone: drain_plan.capacity as before, the other nodes as targets
    alone = drain.batch_capacity(facts, {"a": [vm("a-0"), vm("a-1")]})["a"]
    assert alone["fits"] and alone["nodes"] == ["b", "spare"] and "batch" not in alone


# ------------------------------------------------------------------------------------------ the result
def node_outcome(node, vms_ok=True):
    pre = preflight(node, 2, vms=1)
    items = drain.planned_items(node, pre)
    for item in items:
        item["state"] = "done"
        item["result"] = {"result": "migrated", "target_node": "spare", "migration": "m"} if vms_ok else {"result": "failed", "reason": "boom"}
    return pre, items


def test_the_batch_result_has_each_nodes_result_and_names_the_node_that_did_not_finish():
    pre_a, items_a = node_outcome("a")
    pre_b, items_b = node_outcome("b", vms_ok=False)
    pres = {"a": dict(pre_a, node={"name": "a"}), "b": dict(pre_b, node={"name": "b"})}
    batch = drain.Drain(None, EvictionApi(), pres, clock=lambda: 0.0, items=items_a + items_b)
    batch.finished_seconds = {"a": 3.0, "b": 7.5}
    outcome = {"finished": True, "left_vmis": {"a": [], "b": ["vms/vm-b-0"]}, "pods": {"a": [], "b": []}, "watch": {}}
    per_node = {n: drain.node_result(n, pres[n], False, batch, outcome, 9.0) for n in ("a", "b")}
    result = drain.shaped(options(nodes=["a", "b"]), per_node, whole={"waited_seconds": 9.0, "peak_in_flight": 2})
    assert result["nodes"] == ["a", "b"] and result["drained"] is False and result["failed"] is True
    assert result["migrated"] == result["moved"] == ["vms/vm-a-0"] and result["left"] == ["vms/vm-b-0"]
    assert result["nodes_results"]["a"]["drained"] and result["nodes_results"]["a"]["waited_seconds"] == 3.0
    assert result["nodes_results"]["b"]["msg"].startswith("Drain of b did not finish: vms/vm-b-0 failed: boom. Moved: none; still on the node: "
                                                          "vms/vm-b-0. Node b stays cordoned.")
    assert result["msg"].startswith("Drain of b did not finish (a drained): b: vms/vm-b-0 failed: boom. Moved: none; still on the node: "
                                    "vms/vm-b-0. Nodes a, b stay cordoned. Run the task again")
    assert result["concurrency_per_node"] == {"a": 2, "b": 2} and "node" not in result
    # the same node alone: its result at the top, as before
    single = drain.shaped(options(node="b"), {"b": per_node["b"]}, whole={"waited_seconds": 9.0})
    assert single["node"] == "b" and single["failed"] and single["msg"] == per_node["b"]["msg"] and single["waited_seconds"] == 9.0
    assert "nodes_results" not in single and list(single)[-3:] == ["failed", "resume", "msg"]
