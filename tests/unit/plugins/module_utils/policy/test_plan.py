"""The planner (LowNodeUtilization by requests) on hand-built clusters with known answers: classification at
the boundaries, early exits, source and Pod ordering, limits, headroom, the DefaultEvictor filters and the
flapping warning. Node sizes are round (cpu 10 cores, memory 100 bytes, 100 Pods) so percentages are plain."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import plan as planner

from .. import k8s_objects as k8s


def node(name, **kwargs):
    return k8s.node(name, cpu="10", memory="100", pods="100", **kwargs)


def pod(name, node_name, memory=10, cpu="100m", namespace="vms", labels=None, priority=None, volumes=None, owner="VirtualMachineInstance",
        limits=None, annotations=None, **spec):
    containers = [{"name": "compute", "resources": {"requests": {"cpu": cpu, "memory": str(memory)}}}]
    if limits:
        containers[0]["resources"]["limits"] = limits
    metadata = {"name": name, "namespace": namespace, "labels": {"app": "vm"} if labels is None else labels,
                "annotations": dict(annotations or {})}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": owner, "name": "o-" + name, "uid": "u-" + name, "controller": True}]
    body = {"nodeName": node_name, "containers": containers, "volumes": list(volumes or [{"name": "private", "emptyDir": {}}])}
    if priority is not None:
        body["priority"] = priority
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body, "status": {"phase": "Running"}}


def policy(thresholds=None, targets=None, selector="node-role.kubernetes.io/worker", per_node=None, per_ns=None, total=None, evictor=None,
           lnu=None):
    evictor_args = {"labelSelector": {"matchLabels": {"app": "vm"}}, "podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]}}
    evictor_args.update(evictor or {})
    lnu_args = {"thresholds": thresholds or {"memory": 30}, "targetThresholds": targets or {"memory": 60}}
    lnu_args.update(lnu or {})
    result = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "nodeSelector": selector,
              "profiles": [{"name": "vm-rebalance",
                            "pluginConfig": [{"name": "DefaultEvictor", "args": evictor_args}, {"name": "LowNodeUtilization", "args": lnu_args}],
                            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    for key, value in (("maxNoOfPodsToEvictPerNode", per_node), ("maxNoOfPodsToEvictPerNamespace", per_ns),
                       ("maxNoOfPodsToEvictTotal", total)):
        if value is not None:
            result[key] = value
    return result


def two_nodes(a_pods, b_memory=10):
    """worker-a with `a_pods`, worker-b with one non-VM Pod of `b_memory`."""
    nodes = [node("worker-a"), node("worker-b"), node("cp", control_plane=True)]
    pods = list(a_pods) + [pod("b-base", "worker-b", memory=b_memory, labels={}, owner="ReplicaSet")]
    return nodes, pods


def categories(result):
    return {n["name"]: n["category"] for n in result["nodes"]}


def evicted(result):
    return [e["pod"] for e in result["evictions"]]


# ------------------------------------------------------------------------------------------ classification
@pytest.mark.parametrize("memory, category", [(30, "underutilized"), (31, "appropriately utilized"), (60, "appropriately utilized"),
                                              (61, "overutilized")])
def test_classification_boundaries(memory, category):
    nodes, pods = two_nodes([pod("a", "worker-a", memory=memory)])
    result = planner.plan_policy(policy(), nodes, pods)
    assert categories(result)["worker-a"] == category


def test_usage_by_requests_in_percent_and_node_selector():
    nodes, pods = two_nodes([pod("a", "worker-a", memory=70, cpu="2500m")])
    pods.append(pod("cp-pod", "cp", memory=99, labels={}))
    result = planner.plan_policy(policy(thresholds={"cpu": 20, "memory": 30, "pods": 5}, targets={"cpu": 40, "memory": 60, "pods": 10}),
                                 nodes, pods)
    assert [n["name"] for n in result["nodes"]] == ["worker-a", "worker-b"]
    assert result["nodes"][0]["usage_percent"] == {"cpu": 25.0, "memory": 70.0, "pods": 1.0}
    assert result["nodes"][1]["usage_percent"] == {"cpu": 1.0, "memory": 10.0, "pods": 1.0}


def test_finished_pods_do_not_count():
    nodes, pods = two_nodes([pod("a", "worker-a", memory=50), pod("done", "worker-a", memory=50)])
    pods[1]["status"]["phase"] = "Succeeded"
    assert categories(planner.plan_policy(policy(), nodes, pods))["worker-a"] == "appropriately utilized"


def test_unschedulable_node_is_never_underutilized():
    nodes, pods = two_nodes([pod("a", "worker-a", memory=70)])
    nodes[1]["spec"]["unschedulable"] = True
    result = planner.plan_policy(policy(), nodes, pods)
    assert categories(result)["worker-b"] == "appropriately utilized"
    assert result["stop_reason"] == planner.NO_UNDER and result["evictions"] == []


def test_not_ready_nodes_are_left_out():
    nodes, pods = two_nodes([pod("a", "worker-a", memory=70)])
    nodes[1] = node("worker-b", ready=False)
    result = planner.plan_policy(policy(), nodes, pods)
    assert result["stop_reason"] == planner.TOO_FEW_NODES


@pytest.mark.parametrize("a_memory, b_memory, reason", [
    (70, 40, planner.NO_UNDER),
    (20, 10, planner.ALL_UNDER),
    (50, 10, planner.NONE_OVER),
])
def test_early_exits_with_upstream_words(a_memory, b_memory, reason):
    nodes, pods = two_nodes([pod("a", "worker-a", memory=a_memory)], b_memory=b_memory)
    result = planner.plan_policy(policy(), nodes, pods)
    assert result["stop_reason"] == reason and result["evictions"] == []


def test_number_of_nodes():
    nodes, pods = two_nodes([pod("a", "worker-a", memory=70)])
    result = planner.plan_policy(policy(lnu={"numberOfNodes": 1}), nodes, pods)
    assert result["stop_reason"] == planner.FEW_UNDER


# ------------------------------------------------------------------------------------------ ordering and stopping
def test_stops_when_node_is_no_longer_above_target():
    nodes, pods = two_nodes([pod("a1", "worker-a", memory=35), pod("a2", "worker-a", memory=35)])
    result = planner.plan_policy(policy(), nodes, pods)
    assert evicted(result) == ["a1"] and result["profiles"][0]["node_stop"]["worker-a"] == "node is no longer above target utilization"
    assert result["evictions"][0]["alternatives"] == ["a2"]


def test_lowest_priority_then_qos_first():
    guaranteed = pod("g", "worker-a", memory=10, cpu="100m", limits={"cpu": "100m", "memory": "10"})
    burstable = pod("b", "worker-a", memory=10)
    high = pod("h", "worker-a", memory=10, priority=100)
    best_effort = pod("e", "worker-a", memory=0)
    best_effort["spec"]["containers"][0]["resources"] = {}
    filler = pod("filler", "worker-a", memory=40, labels={})
    nodes, pods = two_nodes([high, guaranteed, burstable, best_effort, filler])
    result = planner.plan_policy(policy(targets={"memory": 50}), nodes, pods)
    assert evicted(result) == ["e", "b", "g"]
    assert planner.qos_class(guaranteed) == "Guaranteed" and planner.qos_class(burstable) == "Burstable"
    assert planner.qos_class(best_effort) == "BestEffort"


def test_source_nodes_highest_usage_first_and_total_limit():
    nodes = [node("worker-a"), node("worker-b"), node("worker-c")]
    pods = [pod("a1", "worker-a", memory=35), pod("a2", "worker-a", memory=35), pod("b1", "worker-b", memory=40),
            pod("b2", "worker-b", memory=40), pod("c-base", "worker-c", memory=5, labels={})]
    result = planner.plan_policy(policy(total=1), nodes, pods)
    assert evicted(result) == ["b1"]
    assert result["profiles"][0]["node_stop"]["worker-a"] == "maxNoOfPodsToEvictTotal reached"


@pytest.mark.parametrize("limits, expected", [
    ({"per_node": 1}, ["a1"]),
    ({"lnu": {"evictionLimits": {"node": 2}}}, ["a1", "a2"]),
    ({"per_node": 3, "lnu": {"evictionLimits": {"node": 1}}}, ["a1"]),
    ({}, ["a1", "a2", "a3"]),
])
def test_per_node_limits(limits, expected):
    a_pods = [pod("a{0}".format(i), "worker-a", memory=10) for i in (1, 2, 3)] + [pod("filler", "worker-a", memory=60, labels={})]
    nodes, pods = two_nodes(a_pods, b_memory=0)
    result = planner.plan_policy(policy(targets={"memory": 50}, **limits), nodes, pods)
    assert evicted(result) == expected


def test_namespace_limit_skips_the_pod_and_goes_on():
    a_pods = [pod("a1", "worker-a", namespace="ns1"), pod("a2", "worker-a", namespace="ns1"), pod("a3", "worker-a", namespace="ns2"),
              pod("filler", "worker-a", memory=60, labels={})]
    nodes, pods = two_nodes(a_pods, b_memory=0)
    result = planner.plan_policy(policy(targets={"memory": 50}, per_ns=1), nodes, pods)
    assert evicted(result) == ["a1", "a3"]


def test_headroom_of_the_underutilized_nodes_bounds_the_run():
    # worker-b: target 60, used 45 -> headroom 15; the first VM (20) uses it up, worker-a stays at 80
    a_pods = [pod("a{0}".format(i), "worker-a", memory=20) for i in (1, 2, 3, 4, 5)]
    nodes, pods = two_nodes(a_pods, b_memory=45)
    result = planner.plan_policy(policy(thresholds={"memory": 45}), nodes, pods)
    assert evicted(result) == ["a1"]
    assert result["profiles"][0]["node_stop"]["worker-a"] == "no headroom left on the underutilized nodes"
    assert result["profiles"][0]["headroom"] == {"memory": -5.0}


# ------------------------------------------------------------------------------------------ filters
@pytest.mark.parametrize("make, reason", [
    (lambda: pod("x", "worker-a", labels={"app": "other"}), "labels do not match DefaultEvictor labelSelector"),
    (lambda: pod("x", "worker-a", owner=None), "pod does not have any ownerRefs"),
    (lambda: pod("x", "worker-a", owner="DaemonSet"), "pod is a DaemonSet pod (DaemonSetPods)"),
    (lambda: pod("x", "worker-a", priority=2000001000), "pod is system critical (SystemCriticalPods)"),
    (lambda: pod("x", "worker-a", namespace="kube-system"), "namespace is excluded (evictableNamespaces.exclude)"),
    (lambda: pod("x", "worker-a", annotations={"kubernetes.io/config.mirror": "x"}), "pod is a mirror pod"),
    (lambda: pod("x", "worker-a", annotations={"descheduler.alpha.kubernetes.io/eviction-in-progress": "true"}),
     "eviction in background already requested"),
])
def test_filters(make, reason):
    nodes, pods = two_nodes([make(), pod("filler", "worker-a", memory=60, labels={})])
    result = planner.plan_policy(policy(lnu={"evictableNamespaces": {"exclude": ["kube-system"]}}), nodes, pods)
    candidate = [c for c in result["profiles"][0]["candidates"] if c["pod"] == "x"][0]
    assert candidate == {"node": "worker-a", "namespace": candidate["namespace"], "pod": "x", "vm": None, "removable": False, "reason": reason}
    assert result["evictions"] == []


def test_protections_local_storage_and_pvc():
    pvc_pod = pod("x", "worker-a", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "p", "emptyDir": {}}])
    nodes, pods = two_nodes([pvc_pod, pod("filler", "worker-a", memory=60, labels={})])
    local = planner.plan_policy(policy(evictor={"podProtections": {}}), nodes, pods)
    assert local["profiles"][0]["candidates"][1]["reason"] == "pod has local storage (PodsWithLocalStorage)"
    pvc = planner.plan_policy(policy(evictor={"podProtections": {"defaultDisabled": ["PodsWithLocalStorage"], "extraEnabled": ["PodsWithPVC"]}}),
                              nodes, pods)
    assert pvc["profiles"][0]["candidates"][1]["reason"] == "pod has a PVC (PodsWithPVC)"
    assert evicted(planner.plan_policy(policy(), nodes, pods)) == ["x"]


def test_evict_annotation_bypasses_every_filter():
    bare = pod("x", "worker-a", owner=None, labels={}, annotations={"descheduler.alpha.kubernetes.io/evict": ""})
    nodes, pods = two_nodes([bare, pod("filler", "worker-a", memory=60, labels={})])
    assert evicted(planner.plan_policy(policy(), nodes, pods)) == ["x"]


NOT_FIT = "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as unschedulable"


def test_node_fit():
    big = pod("x", "worker-a", memory=95)
    nodes, pods = two_nodes([big], b_memory=10)
    # nodeFit tries every Ready node (the evictor has no nodeSelector here): the control plane too, kept out by its taint
    nodes[2]["spec"]["taints"] = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    result = planner.plan_policy(policy(evictor={"nodeFit": True}), nodes, pods)
    assert result["profiles"][0]["candidates"][0]["reason"] == NOT_FIT
    assert evicted(planner.plan_policy(policy(evictor={"nodeFit": False}), nodes, pods)) == ["x"]
    tainted = copy.deepcopy(nodes)
    tainted[1]["spec"]["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
    # an untainted underutilized worker-c too small for y: upstream skips a Pod that tolerates the taints of no
    # underutilized node before nodeFit is asked, so worker-c lets y through that check and worker-b's taint decides nodeFit
    tainted.append(k8s.node("worker-c", cpu="10", memory="50", pods="100"))
    small = [pod("y", "worker-a", memory=70)] + pods[1:]
    result = planner.plan_policy(policy(evictor={"nodeFit": True}), tainted, small)
    assert result["profiles"][0]["candidates"][0]["reason"] == NOT_FIT
    small[0]["spec"]["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
    assert evicted(planner.plan_policy(policy(evictor={"nodeFit": True}), tainted, small)) == ["y"]


# ------------------------------------------------------------------------------------------ flapping and VMs
def test_flapping_warning_with_the_gap_that_avoids_it():
    # one VM of 25 moves worker-a 65 -> 40 and worker-b 25 -> 50: with thresholds 40 / targets 45 they swap
    nodes, pods = two_nodes([pod("a1", "worker-a", memory=25), pod("filler", "worker-a", memory=40, labels={})], b_memory=25)
    result = planner.plan_policy(policy(thresholds={"memory": 40}, targets={"memory": 45}), nodes, pods)
    assert evicted(result) == ["a1"]
    warning = result["warnings"][0]
    assert warning["code"] == "flapping" and warning["source"] == "worker-a" and warning["destination"] == "worker-b"
    assert warning["gap_needed"] == {"memory": 26} and "worker-a becomes underutilized" in warning["message"]
    calm = planner.plan_policy(policy(thresholds={"memory": 30}, targets={"memory": 60}), nodes, pods)
    assert calm["warnings"] == []


def test_vm_names_of_launchers():
    launcher = pod("virt-launcher-vm-1-abcde", "worker-a", memory=70, annotations={"kubevirt.io/domain": "vm-1"})
    nodes, pods = two_nodes([launcher])
    result = planner.plan_policy(policy(), nodes, pods)
    assert result["vms"] == ["vm-1"] and result["evictions"][0]["requests"]["memory"] == 70


def test_policy_without_low_node_utilization():
    nodes, pods = two_nodes([pod("a", "worker-a", memory=70)])
    bare = policy()
    bare["profiles"][0]["plugins"] = {}
    result = planner.plan_policy(bare, nodes, pods)
    assert result["evictions"] == [] and "no profile enables LowNodeUtilization" in result["stop_reason"]
