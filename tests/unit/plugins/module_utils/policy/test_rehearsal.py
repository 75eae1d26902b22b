"""The rehearsal's sizing and prediction on hand-built two-worker clusters: the chosen thresholds keep every margin
and the flapping gap, the planner predicts exactly the asked moves and a quiet next run, a busier destination needs
more or larger test VMs, full workers are refused with their figures, and the comparison names every difference."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import rehearsal_objects as objects
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import rehearsal
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import plan_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.rehearsal_plan import pick_workers, worker_problem

from .. import k8s_objects as k8s

NAMESPACE = "kubevirt-ops-rehearsal"
LABELS = {"app": "kubevirt-ops-rehearsal"}
GI = objects.GI


def filler(name, node, memory_gi, cpu="500m"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "workloads"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "{0}Gi".format(memory_gi)}}}]},
            "status": {"phase": "Running"}}


def cluster(a_gi, b_gi):
    """Two 64Gi workers whose other Pods request `a_gi` and `b_gi` of memory."""
    nodes = [k8s.node("worker-a"), k8s.node("worker-b"), k8s.node("control-plane-1", control_plane=True)]
    return nodes, [filler("a", "worker-a", a_gi), filler("b", "worker-b", b_gi)]


def size(nodes, pods, source="worker-a", destination="worker-b", moves=1, **options):
    return rehearsal.size(nodes, pods, source, destination, moves, NAMESPACE, LABELS, **options)


@pytest.mark.parametrize("a_gi, b_gi, moves", [(28.8, 24.3, 1), (10, 10, 1), (28.8, 24.3, 2), (30, 34, 1), (0, 0, 3)])
def test_the_sizing_keeps_every_margin_and_the_planner_predicts_exactly_the_moves(a_gi, b_gi, moves):
    nodes, pods = cluster(a_gi, b_gi)
    sizing = size(nodes, pods, moves=moves)
    threshold, target = sizing["thresholds"]["memory"], sizing["target_thresholds"]["memory"]
    assert target - threshold >= 5
    prediction = sizing["prediction"]
    assert prediction["holds"] and prediction["problems"] == []
    assert prediction["moves"] == moves and (prediction["from"], prediction["to"]) == ("worker-a", "worker-b")
    assert set(prediction["candidates"]) == set(sizing["vm_names"]) and len(sizing["vm_names"]) == sizing["vm_count"] > moves
    first = {n["name"]: n for n in prediction["first_run"]["nodes"]}
    after = {n["name"]: n for n in prediction["next_run"]["nodes"]}
    assert first["worker-a"]["category"] == "overutilized" and first["worker-b"]["category"] == "underutilized"
    assert first["worker-a"]["usage_percent"]["memory"] >= target + 2 - 0.01   # margin 2 above the target with the test VMs
    assert after["worker-a"]["usage_percent"]["memory"] <= target - 2 + 0.01   # and below it after the moves
    assert after["worker-a"]["usage_percent"]["memory"] >= threshold + 2 - 0.01   # but not underutilized: nothing moves back
    assert after["worker-b"]["usage_percent"]["memory"] <= target - 2 + 0.01
    assert prediction["next_run"]["evictions"] == []
    assert sizing["policy_options"]["rebalance_max_pods_to_evict_total"] == moves


def test_the_smallest_test_vms_are_chosen_and_a_busier_destination_needs_more():
    nodes, pods = cluster(10, 10)
    even = size(nodes, pods)
    nodes, pods = cluster(10, 30)
    uneven = size(nodes, pods)
    assert even["vm_memory_bytes"] * even["vm_count"] < uneven["vm_memory_bytes"] * uneven["vm_count"]
    smaller = objects.launcher_memory(even["vm_memory_bytes"] - 256 * objects.MI)
    assert rehearsal._thresholds(rehearsal.node_figures(nodes[0], [pods[0]]), rehearsal.node_figures(nodes[1], [filler("b", "worker-b", 10)]),
                                 smaller, even["vm_count"], 1, 2.0, 5) is None


def test_the_prediction_is_checked_with_the_real_launchers_and_fails_when_a_vm_landed_on_the_destination():
    nodes, pods = cluster(28.8, 24.3)
    sizing = size(nodes, pods)
    launchers = [objects.launcher_stand_in(name, NAMESPACE, "worker-a", "worker-b", sizing["vm_memory_bytes"], LABELS, None)
                 for name in sizing["vm_names"]]
    holds = rehearsal.predict(sizing["policy"], nodes, pods + launchers, "worker-a", "worker-b", 1, sizing["vm_names"], NAMESPACE)
    assert holds["holds"]
    launchers[1]["spec"]["nodeName"] = "worker-b"
    broken = rehearsal.predict(sizing["policy"], nodes, pods + launchers, "worker-a", "worker-b", 1, sizing["vm_names"], NAMESPACE)
    assert not broken["holds"] and "the planner predicts 0 eviction(s), not 1" in broken["problems"][0]


def test_full_workers_are_refused_with_their_free_memory_and_the_fix():
    nodes, pods = cluster(62.5, 20)
    with pytest.raises(rehearsal.RehearsalRefused) as refused:
        size(nodes, pods)
    message = refused.value.message
    assert message.startswith("rehearse_nodes: not enough free allocatable on worker-a for the test VMs: 1.5Gi memory")
    assert "Free memory on worker-a (or pick other workers with rehearse_nodes), or lower rehearse_moves." in message
    assert refused.value.details["figures"]["worker-a"]["free"]["memory"] == int(1.5 * GI)


def test_no_size_that_keeps_the_gap_is_refused_with_both_workers_figures():
    nodes, pods = cluster(5, 60)
    with pytest.raises(rehearsal.RehearsalRefused) as refused:
        size(nodes, pods, memory_max=2 * GI)
    assert "no test VM size makes worker-a overutilized and worker-b underutilized with 1 migration(s) and a gap of 5 points" \
        in refused.value.message
    assert "worker-b 93.75% (4.0Gi free)" in refused.value.message


def test_the_policy_is_the_bounded_memory_only_policy_the_rebalance_role_renders():
    policy = rehearsal.rehearsal_policy("worker-a", "worker-b", LABELS, 47, 52, 1)
    assert policy["nodeSelector"] == "kubernetes.io/hostname in (worker-a,worker-b)"
    assert (policy["maxNoOfPodsToEvictPerNode"], policy["maxNoOfPodsToEvictPerNamespace"], policy["maxNoOfPodsToEvictTotal"]) == (1, 1, 1)
    evictor, lnu = (config["args"] for config in policy["profiles"][0]["pluginConfig"])
    assert evictor["labelSelector"] == {"matchLabels": LABELS} and evictor["nodeFit"] is True
    assert lnu == {"thresholds": {"memory": 47}, "targetThresholds": {"memory": 52}}
    nodes, pods = cluster(10, 10)
    assert plan_policy(policy, nodes, pods)["stop_reason"]   # no test VMs: nothing to do


def test_the_comparison_names_each_difference_from_the_prediction():
    prediction = {"moves": 1, "candidates": ["rehearsal-vm-1", "rehearsal-vm-2"], "from": "worker-a", "to": "worker-b"}
    move = {"vm": "rehearsal-vm-2", "namespace": NAMESPACE, "from": "worker-a", "to": "worker-b"}
    assert rehearsal.compare(prediction, [move, {"vm": "prod", "namespace": "vms", "from": "x", "to": "y"}], NAMESPACE)["matches"]
    wrong = rehearsal.compare(prediction, [dict(move, vm="other", to="worker-c"), move], NAMESPACE)
    assert not wrong["matches"]
    assert wrong["problems"] == ["2 VM(s) moved, 1 predicted", "other moved, not one of the predicted rehearsal-vm-1, rehearsal-vm-2",
                                 "other moved from worker-a to worker-c, predicted from worker-a to worker-b"]
    assert rehearsal.compare(prediction, [], NAMESPACE)["lines"] == ["no test VM moved", "not as predicted: 0 VM(s) moved, 1 predicted"]


def test_the_prediction_lines_say_sizes_usage_and_what_moves():
    nodes, pods = cluster(28.8, 24.3)
    lines = rehearsal.prediction_lines(size(nodes, pods))
    assert lines[0].startswith("2 test VM(s) of ") and "policy memory thresholds" in lines[0]
    assert lines[1].startswith("worker-a: memory ") and "overutilized now with the test VMs" in lines[1]
    assert lines[-1].startswith("predicted: 1 live migration(s) from worker-a to worker-b of one of rehearsal-vm-1, rehearsal-vm-2")


def test_workers_are_checked_or_picked_busiest_first():
    nodes, pods = cluster(10, 30)
    assert pick_workers(nodes, pods, None) == ["worker-b", "worker-a"]
    assert pick_workers(nodes, pods, ["worker-a", "worker-b"]) == ["worker-a", "worker-b"]
    cordoned = [k8s.node("worker-a"), k8s.node("worker-b", unschedulable=True)]
    assert worker_problem(cordoned[1], "worker-b") == "node worker-b is cordoned (spec.unschedulable)"
    assert worker_problem(None, "worker-x") == "node worker-x does not exist"
    with pytest.raises(rehearsal.RehearsalRefused) as refused:
        pick_workers(cordoned, pods, None)
    assert refused.value.message.startswith("rehearse_nodes: the rehearsal needs two schedulable KubeVirt workers, found 1 (worker-a)")
    with pytest.raises(rehearsal.RehearsalRefused, match="node worker-b is cordoned"):
        pick_workers(cordoned, pods, ["worker-a", "worker-b"])


def test_test_vms_moved_after_their_creation_are_named_before_the_apply():
    """Issue 28: a scheduled run of the installed policy moved a test VM between its creation and the apply; the check right
    before the apply names it (and a VM in flight, with a second launcher), rather than letting the comparison fail later."""
    nodes, pods = cluster(28.8, 24.3)
    sizing = size(nodes, pods)
    launchers = [objects.launcher_stand_in(name, NAMESPACE, "worker-a", "worker-b", sizing["vm_memory_bytes"], LABELS, None)
                 for name in sizing["vm_names"]]
    assert rehearsal.misplaced(pods + launchers, sizing["vm_names"], NAMESPACE, "worker-a") == []
    moved, in_flight = launchers[0], dict(launchers[1], spec=dict(launchers[1]["spec"], nodeName="worker-b"),
                                          metadata=dict(launchers[1]["metadata"], name="virt-launcher-target"))
    moved["spec"]["nodeName"] = "worker-b"
    problems = rehearsal.misplaced(pods + launchers + [in_flight], sizing["vm_names"], NAMESPACE, "worker-a")
    assert problems == ["{0} (on worker-b)".format(sizing["vm_names"][0]), "{0} (on worker-a and worker-b)".format(sizing["vm_names"][1])]
    finished = dict(launchers[0], status={"phase": "Succeeded"})
    gone = rehearsal.misplaced(pods + [finished] + launchers[1:2], sizing["vm_names"], NAMESPACE, "worker-a")
    assert gone == ["{0} (no running launcher)".format(sizing["vm_names"][0])]
