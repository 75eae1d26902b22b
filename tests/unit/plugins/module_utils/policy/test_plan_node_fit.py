"""The planner's nodeFit and QoS as the descheduler v0.36 has them (DefaultEvictor PreEvictionFilter ->
nodeutil.PodFitsAnyOtherNode over the Ready nodes of the evictor's own nodeSelector; utils.GetPodQOS), and the
per-field `not_evaluated`. Same round nodes as test_plan: cpu 10, memory 100, 100 Pods; worker-a is over target."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import plan as planner

from .test_plan import evicted, node, pod, policy

NOT_FIT = "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as unschedulable"
CP_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
INFRA_TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
KVM = "devices.kubevirt.io/kvm"


def cluster(mover, **worker_b):
    """worker-a: `mover` plus a non-VM filler (over target); worker-b: empty, changed by `worker_b`; worker-c: empty
    (so a node stays underutilized) but dedicated to infra by a taint; a control plane with its taint."""
    b = node("worker-b")
    for key, value in worker_b.items():
        if key == "labels":
            b["metadata"]["labels"].update(value)
        elif key == "allocatable":
            b["status"]["allocatable"].update(value)
        elif key == "conditions":
            b["status"]["conditions"] = value
        else:
            b["spec"][key] = value
    cp = node("cp", control_plane=True)
    cp["spec"]["taints"] = [CP_TAINT]
    c = node("worker-c")
    c["spec"]["taints"] = [INFRA_TAINT]
    return [node("worker-a"), b, c, cp], [mover, pod("filler", "worker-a", memory=60, labels={}, owner="ReplicaSet")]


def fit(mover, evictor=None, **worker_b):
    nodes, pods = cluster(mover, **worker_b)
    result = planner.plan_policy(policy(evictor=dict({"nodeFit": True}, **(evictor or {}))), nodes, pods)
    return candidate(result, mover["metadata"]["name"]), evicted(result)


def past_the_taint_check(mover):
    """For a test of nodeFit on worker-b where worker-b is not an underutilized node the mover tolerates: upstream
    skips a Pod that tolerates the taints of no underutilized node before nodeFit is asked (test_plan_taints.py), so
    the mover tolerates worker-c's infra taint and requests a device worker-c lacks (give worker-b `allocatable={KVM:
    "1k"}`): worker-c lets it through the taint check and fails nodeFit, so worker-b alone decides."""
    mover["spec"].setdefault("tolerations", []).append(dict(INFRA_TAINT, operator="Equal"))
    mover["spec"]["containers"][0]["resources"]["requests"][KVM] = "1"
    return mover


def candidate(result, name):
    return next(c for c in result["profiles"][0]["candidates"] if c["pod"] == name)


def affinity(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


# ------------------------------------------------------------------------------------------ node affinity and selector
def test_required_node_affinity_that_no_other_node_matches_keeps_the_pod():
    mover = pod("vm", "worker-a", affinity=affinity({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["east"]}]}))
    entry, moved = fit(mover, labels={"zone": "west"})
    assert entry["reason"] == NOT_FIT and moved == []
    assert entry["node_fit"] == {"worker-b": "pod node selector does not match the node label", "worker-c": "pod node selector does not match the node label",
                                 "cp": "pod node selector does not match the node label"}
    assert fit(mover, labels={"zone": "east"})[1] == ["vm"]


@pytest.mark.parametrize("terms, labels, fits", [
    # terms are ORed, the expressions of one term ANDed
    ([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["east"]}]},
      {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}], {"gpu": "a100"}, True),
    ([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["east"]}, {"key": "gpu", "operator": "Exists"}]}],
     {"gpu": "a100"}, False),
    ([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["east"]}]}], {}, True),
    ([{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}], {"gpu": "a100"}, False),
    ([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}], {"cores": "16"}, True),
    ([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}], {"cores": "8"}, False),
    ([{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}], {"cores": "many"}, False),
    ([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-b"]}]}], {}, True),
    ([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["worker-b"]}]}], {}, False),
    ([{}], {}, False),   # an empty term selects no node
])
def test_node_affinity_terms(terms, labels, fits):
    mover = pod("vm", "worker-a", affinity=affinity(*terms))
    assert fit(mover, labels=labels)[1] == (["vm"] if fits else [])


def test_preferred_affinity_does_not_matter():
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["east"]}]}}]}}
    assert fit(pod("vm", "worker-a", affinity=preferred), labels={"zone": "west"})[1] == ["vm"]


def test_node_selector_of_the_pod():
    mover = pod("vm", "worker-a", nodeSelector={"disk": "ssd"})
    assert fit(mover)[0]["node_fit"]["worker-b"] == "pod node selector does not match the node label"
    assert fit(mover, labels={"disk": "ssd"})[1] == ["vm"]


# ------------------------------------------------------------------------------------------ taints
@pytest.mark.parametrize("effect, fits", [("NoSchedule", False), ("NoExecute", False), ("PreferNoSchedule", True)])
def test_taint_effects(effect, fits):
    # nodeFit counts NoSchedule and NoExecute only; the mover passes the loop's taint check (every effect) by worker-c
    entry, moved = fit(past_the_taint_check(pod("vm", "worker-a")), taints=[{"key": "maintenance", "value": "on", "effect": effect}],
                       allocatable={KVM: "1k"})
    assert moved == (["vm"] if fits else [])
    if not fits:
        assert entry["node_fit"]["worker-b"] == "pod does not tolerate taints on the node"


@pytest.mark.parametrize("toleration, fits", [
    ({"operator": "Exists"}, True),                                                       # empty key with Exists: every taint
    ({"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}, True),
    ({"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}, False),        # another effect
    ({"key": "maintenance", "value": "on"}, True),                                        # no operator means Equal
    ({"key": "maintenance", "operator": "Equal", "value": "off"}, False),
    ({"key": "other", "operator": "Exists"}, False),
])
def test_toleration_matching(toleration, fits):
    mover = pod("vm", "worker-a", tolerations=[toleration])
    assert fit(mover, taints=[{"key": "maintenance", "value": "on", "effect": "NoExecute"}])[1] == (["vm"] if fits else [])


# ------------------------------------------------------------------------------------------ readiness, cordon
def test_cordoned_node_does_not_fit_even_when_its_taint_is_tolerated():
    # a cordoned worker-b is no underutilized node, so worker-c's taint decides the loop's taint check
    tolerant = past_the_taint_check(pod("vm", "worker-a", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]))
    entry, moved = fit(tolerant, unschedulable=True, allocatable={KVM: "1k"})
    assert moved == [] and entry["node_fit"]["worker-b"] == "node is not schedulable"


def test_only_ready_nodes_are_tried_and_a_node_without_ready_condition_is_ready():
    # a worker-b that is not Ready is no underutilized node either, so worker-c's taint decides the loop's taint check
    entry, moved = fit(past_the_taint_check(pod("vm", "worker-a")), conditions=[{"type": "Ready", "status": "Unknown"}], allocatable={KVM: "1k"})
    assert moved == [] and sorted(entry["node_fit"]) == ["cp", "worker-c"]
    assert fit(past_the_taint_check(pod("vm", "worker-a")), conditions=[], allocatable={KVM: "1k"})[1] == ["vm"]


def test_the_evictors_node_selector_decides_the_nodes_tried_not_the_policys():
    # the policy selects workers only; the evictor's nodeSelector (here none) lets nodeFit try the control plane.
    # The VM tolerates the underutilized worker-b's taint (upstream skips a Pod that tolerates no underutilized node
    # before nodeFit) but needs a device only the control plane has, so worker-b fails nodeFit and cp alone fits.
    tolerant = pod("vm", "worker-a", tolerations=[{"key": "maintenance", "operator": "Exists"}, {"key": CP_TAINT["key"], "operator": "Exists"}])
    tolerant["spec"]["containers"][0]["resources"]["requests"][KVM] = "1"
    nodes, pods = cluster(tolerant, taints=[{"key": "maintenance", "effect": "NoSchedule"}])
    nodes[3]["status"]["allocatable"][KVM] = "1k"
    assert evicted(planner.plan_policy(policy(evictor={"nodeFit": True}), nodes, pods)) == ["vm"]
    only_workers = policy(evictor={"nodeFit": True, "nodeSelector": "node-role.kubernetes.io/worker"})
    assert evicted(planner.plan_policy(only_workers, nodes, pods)) == []


# ------------------------------------------------------------------------------------------ resources
def test_a_resource_the_other_node_lacks_does_not_fit():
    mover = pod("vm", "worker-a")
    mover["spec"]["containers"][0]["resources"]["requests"]["devices.kubevirt.io/kvm"] = "1"
    entry, moved = fit(mover)
    assert moved == [] and entry["node_fit"]["worker-b"] == "insufficient devices.kubevirt.io/kvm"
    assert fit(mover, allocatable={"devices.kubevirt.io/kvm": "1k"})[1] == ["vm"]


def test_extended_resource_counts_what_the_nodes_pods_request():
    mover = pod("vm", "worker-a")
    mover["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    nodes, pods = cluster(mover, allocatable={"nvidia.com/gpu": "1"})
    holder = pod("gpu-user", "worker-b", labels={}, owner="ReplicaSet")
    holder["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    result = planner.plan_policy(policy(evictor={"nodeFit": True}), nodes, pods + [holder])
    assert evicted(result) == [] and candidate(result, "vm")["node_fit"]["worker-b"] == "insufficient nvidia.com/gpu"


@pytest.mark.parametrize("allocatable, error", [({"cpu": "50m"}, "insufficient cpu"), ({"ephemeral-storage": "1Gi"}, "insufficient ephemeral-storage"),
                                                ({"pods": "0"}, "insufficient pods")])
def test_basic_and_storage_resources(allocatable, error):
    mover = pod("vm", "worker-a")
    mover["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "2Gi"
    allocatable = dict({"ephemeral-storage": "10Gi"}, **allocatable)
    assert fit(mover, allocatable=allocatable)[0]["node_fit"]["worker-b"] == error


def test_required_pod_anti_affinity_against_pods_on_the_node():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    mover = pod("vm", "worker-a", affinity=anti)
    nodes, pods = cluster(mover)
    pods.append(pod("db-0", "worker-b", memory=1, labels={"app": "db"}, owner="StatefulSet"))
    result = planner.plan_policy(policy(evictor={"nodeFit": True}), nodes, pods)
    assert evicted(result) == []
    assert candidate(result, "vm")["node_fit"]["worker-b"] == "pod matches inter-pod anti-affinity rule of other pod on node"
    pods[-1]["metadata"]["namespace"] = "other"   # the term looks in the Pod's own namespace only
    assert evicted(planner.plan_policy(policy(evictor={"nodeFit": True}), nodes, pods)) == ["vm"]


# ------------------------------------------------------------------------------------------ QoS
def test_zero_cpu_and_memory_requests_are_best_effort_and_go_first():
    zero = pod("zero", "worker-a", memory=0, cpu="0")
    burstable = pod("burst", "worker-a", memory=10)
    assert planner.qos_class(zero) == "BestEffort"
    nodes, pods = cluster(burstable)
    pods.insert(0, zero)
    result = planner.plan_policy(policy(targets={"memory": 65}), nodes, pods)
    assert evicted(result)[0] == "zero"


def test_qos_counts_cpu_and_memory_only():
    gpu_only = pod("g", "worker-a", memory=0, cpu="0")
    gpu_only["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    assert planner.qos_class(gpu_only) == "BestEffort"


# ------------------------------------------------------------------------------------------ not_evaluated
def test_not_evaluated_lists_each_simplified_field():
    evictor = {"minPodAge": "5m", "minReplicas": 2, "namespaceLabelSelector": {"matchLabels": {"team": "a"}},
               "priorityThreshold": {"name": "high"}, "noEvictionPolicy": "Mandatory",
               "podProtections": {"defaultDisabled": ["PodsWithLocalStorage"], "extraEnabled": ["PodsWithoutPDB", "PodsWithPVC"],
                                  "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}}}}
    result = planner.plan_policy(policy(evictor=evictor, lnu={"useDeviationThresholds": True}), *cluster(pod("vm", "worker-a")))
    assert result["profiles"][0]["not_evaluated"] == [
        "DefaultEvictor.namespaceLabelSelector", "DefaultEvictor.minReplicas", "DefaultEvictor.minPodAge",
        "DefaultEvictor.priorityThreshold.name", "DefaultEvictor.podProtections[PodsWithoutPDB]",
        "DefaultEvictor.podProtections.config.PodsWithPVC.protectedStorageClasses"]   # deviation and noEvictionPolicy are evaluated (issue 17)
    plain = planner.plan_policy(policy(evictor={"nodeFit": True, "minReplicas": 1, "noEvictionPolicy": "Preferred"}),
                                *cluster(pod("vm", "worker-a")))
    assert plain["profiles"][0]["not_evaluated"] == []


@pytest.mark.parametrize("no_eviction_policy, extra, moved", [
    ("Mandatory", {}, []),                                                          # a cooldown mark holds the VM
    ("Preferred", {}, ["vm"]),                                                      # upstream: the DefaultEvictor ignores it
    ("Mandatory", {"descheduler.alpha.kubernetes.io/evict": ""}, ["vm"]),           # the evict annotation is checked first
])
def test_prefer_no_eviction_holds_a_vm_only_with_the_mandatory_policy(no_eviction_policy, extra, moved):
    marked = pod("vm", "worker-a")
    marked["metadata"]["annotations"] = dict(marked["metadata"].get("annotations") or {},
                                             **{"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}, **extra)
    result = planner.plan_policy(policy(evictor={"noEvictionPolicy": no_eviction_policy}), *cluster(marked))
    assert evicted(result) == moved
    if not moved:
        assert candidate(result, "vm")["reason"] == "pod has the prefer-no-eviction annotation (noEvictionPolicy: Mandatory)"
