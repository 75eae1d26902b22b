"""The eviction loop's taint check (descheduler v0.36 nodeutilization.go evictPods -> utils.PodToleratesTaints): a Pod
that tolerates the taints of none of the underutilized nodes is skipped ("Skipping eviction for pod, doesn't
tolerate node taint"), with or without nodeFit, every taint effect counted, and a node with more taints than the
Pod has tolerations never tolerated. Upstream's TestLowNodeUtilizationWithTaints first, then our own cases on the
round nodes of test_plan (cpu 10, memory 100, 100 Pods; worker-a over target with one movable VM)."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import forecast
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import plan as planner

from .test_plan import evicted, node, pod, policy
from .test_plan_actual import PROMETHEUS_UTILIZATION, build_test_node, build_test_pod, lnu_policy, prometheus

UPSTREAM_TAINT = {"key": "key", "value": "value", "effect": "NoSchedule"}
GPU = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
INFRA = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
CP_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


# ------------------------------------------------------------------------------------------ upstream's cases
def upstream_taint_case(name):
    """TestLowNodeUtilizationWithTaints: n1 2000m/3000/10 Pods with 8 Pods of 200m, thresholds pods 20 / targets pods
    70, nodeFit on, and the pod evictor's maxPodsToEvictPerNode set to the evictions the case expects."""
    n1, n2, n3 = build_test_node("n1", 2000, 3000, 10), build_test_node("n2", 1000, 3000, 10), build_test_node("n3", 1000, 3000, 10)
    n3["spec"]["taints"] = [dict(UPSTREAM_TAINT)]
    on_n1 = [build_test_pod("pod_{0}_n1".format(i), 200, 0, "n1") for i in range(1, 9)]
    tolerant = build_test_pod("tolerate_pod", 200, 0, "n1", tolerations=[{"key": "key", "value": "value"}])
    cases = {
        "No taints": ([n1, n2, build_test_node("n3", 1000, 3000, 10)], on_n1 + [build_test_pod("pod_9_n2", 200, 0, "n2")], 1),
        "No pod tolerates node taint": ([n1, n3], on_n1 + [build_test_pod("pod_9_n3", 200, 0, "n3")], 0),
        "Pod which tolerates node taint": ([n1, n3], on_n1[:7] + [tolerant, build_test_pod("pod_9_n3", 200, 0, "n3")], 1),
    }
    nodes, pods, expected = cases[name]
    policy = dict(lnu_policy({"pods": 20}, {"pods": 70}), maxNoOfPodsToEvictPerNode=expected)
    return policy, nodes, pods, expected


@pytest.mark.parametrize("name", ["No taints", "No pod tolerates node taint", "Pod which tolerates node taint"])
def test_upstreams_low_node_utilization_with_taints(name):
    policy, nodes, pods, expected = upstream_taint_case(name)
    result = planner.plan_policy(policy, nodes, pods)
    assert len(result["evictions"]) == expected
    if name == "Pod which tolerates node taint":
        assert evicted(result) == ["tolerate_pod"]


def test_upstreams_untolerated_case_without_the_limit_is_decided_by_the_taint():
    # upstream's case sets the per-node limit to 0 as well; without it the taint alone keeps all eight Pods
    policy, nodes, pods, _expected = upstream_taint_case("No pod tolerates node taint")
    del policy["maxNoOfPodsToEvictPerNode"]
    result = planner.plan_policy(policy, nodes, pods)
    reasons = {c["pod"]: c["reason"] for c in result["profiles"][0]["candidates"]}
    assert result["evictions"] == [] and set(reasons.values()) == {planner.UNTOLERATED}
    assert result["profiles"][0]["candidates"][0]["untolerated"] == {"n3": ["key=value:NoSchedule"]}


# ------------------------------------------------------------------------------------------ our cases
def cluster(mover, b_taints=(GPU,), c_taints=(INFRA,)):
    """worker-a: `mover` plus a non-VM filler (70 of 100, over the target 60); worker-b and worker-c empty, so both
    underutilized, with the taints given; a tainted control plane."""
    nodes = [node("worker-a"), node("worker-b", taints=list(b_taints)), node("worker-c", taints=list(c_taints)),
             node("cp", control_plane=True, taints=[CP_TAINT])]
    return nodes, [mover, pod("filler", "worker-a", memory=60, labels={}, owner="ReplicaSet")]


def candidate(result, name):
    return next(c for c in result["profiles"][0]["candidates"] if c["pod"] == name)


def test_a_vm_that_tolerates_one_of_two_underutilized_nodes_is_evicted():
    tolerant = pod("vm", "worker-a", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}])
    result = planner.plan_policy(policy(), *cluster(tolerant))
    assert evicted(result) == ["vm"]
    assert candidate(result, "vm")["removable"] is True and candidate(result, "vm")["reason"] is None


def test_a_vm_that_tolerates_no_underutilized_node_is_skipped_without_node_fit():
    result = planner.plan_policy(policy(), *cluster(pod("vm", "worker-a")))
    assert evicted(result) == []
    assert candidate(result, "vm") == {"node": "worker-a", "namespace": "vms", "pod": "vm", "vm": None, "removable": False,
                                       "reason": planner.UNTOLERATED,
                                       "untolerated": {"worker-b": ["dedicated=gpu:NoSchedule"], "worker-c": ["dedicated=infra:NoSchedule"]}}
    assert result["profiles"][0]["node_stop"]["worker-a"] is None   # upstream goes through the Pods and evicts none


@pytest.mark.parametrize("effect", ["PreferNoSchedule", "NoExecute", "NoSchedule"])
def test_every_taint_effect_counts(effect):
    # nodeFit ignores a PreferNoSchedule taint (test_plan_node_fit); the loop's check does not
    soft = {"key": "maintenance", "value": "on", "effect": effect}
    result = planner.plan_policy(policy(), *cluster(pod("vm", "worker-a"), b_taints=[soft], c_taints=[soft]))
    assert evicted(result) == [] and candidate(result, "vm")["untolerated"]["worker-b"] == ["maintenance=on:" + effect]
    tolerant = pod("vm", "worker-a", tolerations=[{"key": "maintenance", "operator": "Exists"}])
    assert evicted(planner.plan_policy(policy(), *cluster(tolerant, b_taints=[soft], c_taints=[soft]))) == ["vm"]


def test_an_untainted_underutilized_node_lets_every_pod_through():
    assert evicted(planner.plan_policy(policy(), *cluster(pod("vm", "worker-a"), c_taints=()))) == ["vm"]


def test_fewer_tolerations_than_taints_never_tolerate_the_node():
    # upstream compares the counts first: one toleration that tolerates everything is not enough for two taints
    everything = pod("vm", "worker-a", tolerations=[{"operator": "Exists"}])
    two = [GPU, {"key": "zone", "value": "east", "effect": "PreferNoSchedule"}]
    result = planner.plan_policy(policy(), *cluster(everything, b_taints=two, c_taints=two))
    assert evicted(result) == []
    assert candidate(result, "vm")["untolerated"] == {"worker-b": ["1 tolerations for 2 taints (upstream counts them first)"],
                                                      "worker-c": ["1 tolerations for 2 taints (upstream counts them first)"]}
    everything["spec"]["tolerations"].append({"operator": "Exists"})
    assert evicted(planner.plan_policy(policy(), *cluster(everything, b_taints=two, c_taints=two))) == ["vm"]


def test_only_the_underutilized_nodes_taints_count():
    # worker-c is untainted but appropriately utilized (45 of 100), so it does not let the VM through
    nodes, pods = cluster(pod("vm", "worker-a"), c_taints=())
    pods.append(pod("c-base", "worker-c", memory=45, labels={}, owner="ReplicaSet"))
    result = planner.plan_policy(policy(), nodes, pods)
    assert {n["name"]: n["category"] for n in result["nodes"]}["worker-c"] == "appropriately utilized"
    assert evicted(result) == [] and sorted(candidate(result, "vm")["untolerated"]) == ["worker-b"]


# ------------------------------------------------------------------------------------------ order of the checks
def test_the_taint_check_comes_before_the_namespace_exclusion_and_node_fit():
    # a Pod that fails both is skipped for the taints: upstream never asks the PreEvictionFilter about it
    excluded = pod("vm", "worker-a", namespace="kube-system")
    result = planner.plan_policy(policy(evictor={"nodeFit": True}, lnu={"evictableNamespaces": {"exclude": ["kube-system"]}}), *cluster(excluded))
    assert candidate(result, "vm")["reason"] == planner.UNTOLERATED and "node_fit" not in candidate(result, "vm")
    tolerant = pod("vm", "worker-a", namespace="kube-system", tolerations=[dict(GPU, operator="Equal")])
    result = planner.plan_policy(policy(evictor={"nodeFit": True}, lnu={"evictableNamespaces": {"exclude": ["kube-system"]}}), *cluster(tolerant))
    assert candidate(result, "vm")["reason"] == planner.EXCLUDED


def test_the_evict_annotation_bypasses_the_filter_not_the_taint_check():
    bare = pod("vm", "worker-a", owner=None, labels={}, annotations={"descheduler.alpha.kubernetes.io/evict": ""})
    result = planner.plan_policy(policy(), *cluster(bare))
    assert evicted(result) == [] and candidate(result, "vm")["reason"] == planner.UNTOLERATED
    assert evicted(planner.plan_policy(policy(), *cluster(bare, c_taints=()))) == ["vm"]


def test_the_node_limit_is_checked_before_the_taints():
    # a1 is evicted; evictionLimits.node 1 then leaves the node at a2, before its taints are looked at
    tolerant = pod("a1", "worker-a", memory=5, tolerations=[dict(INFRA, operator="Equal")])
    nodes, pods = cluster(tolerant)
    pods.append(pod("a2", "worker-a", memory=5, priority=10))
    result = planner.plan_policy(policy(lnu={"evictionLimits": {"node": 1}}), nodes, pods)
    assert evicted(result) == ["a1"] and result["profiles"][0]["node_stop"]["worker-a"] == "per-node eviction limit reached"
    assert candidate(result, "a2")["reason"] == planner.UNTOLERATED


def test_a_skipped_pod_does_not_use_up_the_one_prometheus_eviction():
    # Prometheus: without evictionLimits.node one Pod per source node; the lowest-priority Pod does not tolerate n3
    nodes = [build_test_node("n1", 4000, 3000, 10), build_test_node("n2", 4000, 3000, 10), build_test_node("n3", 4000, 3000, 10)]
    nodes[2]["spec"]["taints"] = [dict(UPSTREAM_TAINT)]
    # nodeFit is on: "low" would fit the untainted n2, which is not underutilized (45 %), so only the taint check keeps it
    tolerant = build_test_pod("high", 400, 0, "n1", priority=100, tolerations=[{"key": "key", "operator": "Exists"}])
    pods = [build_test_pod("low", 400, 0, "n1", priority=0), tolerant]
    policy = lnu_policy({"MetricResource": 30}, {"MetricResource": 50}, metrics=PROMETHEUS_UTILIZATION)
    result = planner.plan_policy(policy, nodes, pods, actual_usage=prometheus({"n1": 0.6, "n2": 0.45, "n3": 0.2}))
    assert evicted(result) == ["high"] and result["profiles"][0]["node_stop"]["n1"] == planner.SINGLE_EVICTION


def test_the_pod_evictors_per_node_limit_counts_over_the_whole_run():
    # two profiles balance the same nodes; maxNoOfPodsToEvictPerNode 1 is the pod evictor's, shared by both
    nodes, pods = cluster(pod("vm", "worker-a", memory=5), c_taints=())
    pods.append(pod("vm-2", "worker-a", memory=5))
    two = policy(per_node=1, targets={"memory": 55})
    two["profiles"].append(dict(two["profiles"][0], name="again"))
    result = planner.plan_policy(two, nodes, pods)
    assert evicted(result) == ["vm"] and result["profiles"][1]["node_stop"]["worker-a"] == "per-node eviction limit reached"


# ------------------------------------------------------------------------------------------ the forecast
def test_the_forecast_of_an_untolerated_cluster_moves_nothing():
    # agree-findings' minimal example: three VMs on worker-a and an empty GPU worker none of them tolerates
    nodes = [node("worker-a"), node("worker-b", taints=[GPU]), node("cp", control_plane=True, taints=[CP_TAINT])]
    pods = [pod("vm-{0}".format(i), "worker-a", memory=25, annotations={"kubevirt.io/domain": "vm-{0}".format(i)}) for i in (1, 2, 3)]
    result = forecast.forecast_policy(policy(), nodes, pods)
    assert result["converged"] is True and result["cycles_to_converge"] == 0 and result["migrations"] == 0
