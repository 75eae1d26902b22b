"""The planner against upstream's own LowNodeUtilization cases (descheduler v0.36
pkg/framework/plugins/nodeutilization/lownodeutilization_test.go): TestLowNodeUtilization runs every case twice, by
requests and with the metrics server (`expectedPodsEvicted`, `expectedPodsWithMetricsEvicted`), and
TestLowNodeUtilizationWithPrometheusMetrics runs the Prometheus cases. The data of each case is carried over (nodes,
Pods, NodeMetrics, PodMetrics, query samples, thresholds, expected evictions); the upstream test helpers are
rebuilt as plain dicts: `BuildTestNode(name, millicpu, memory, pods)`, `BuildTestPod(name, millicpu, memory, node)`
(namespace default, cpu and memory requests set even at 0), `BuildNodeMetrics`/`BuildPodMetrics(name, millicpu,
memory)`, the evictor with `nodeFit: true` and default protections. Then our own rules: what stops a profile that
reads actual usage, and what each node row shows."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import plan as planner

N1, N2, N3 = "n1", "n2", "n3"
HIGH_PRIORITY, LOW_PRIORITY = 10000, 0
EXTENDED = "example.com/foo"
SYSTEM_CRITICAL = 2000000000
MIRROR = {"kubernetes.io/created-by": '{"kind":"SerializedReference","apiVersion":"v1","reference":{"kind":"Pod"}}',
          "kubernetes.io/config.source": "api", "kubernetes.io/config.mirror": "mirror"}
OWNERS = {"rs": {"kind": "ReplicaSet", "apiVersion": "v1", "name": "replicaset-1"}, "ds": {"kind": "DaemonSet", "apiVersion": "v1"},
          "normal": {"kind": "Pod", "apiVersion": "v1"}}
QUERY = "instance:node_cpu:rate:sum"


# ------------------------------------------------------------------------------------------ upstream's builders
def build_test_node(name, millicpu, memory, pods, unschedulable=False, labels=None, extended=None):
    allocatable = {"cpu": "{0}m".format(millicpu), "memory": str(memory), "pods": str(pods)}
    if extended is not None:
        allocatable[EXTENDED] = str(extended)
    spec = {"unschedulable": True} if unschedulable else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec,
            "status": {"capacity": dict(allocatable), "allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}}


def build_test_pod(name, millicpu, memory, node, owner="rs", namespace="default", priority=None, best_effort=False, extended=None, **spec):
    requests = {} if best_effort else {"cpu": "{0}m".format(millicpu), "memory": str(memory)}
    if extended is not None:
        requests[EXTENDED] = str(extended)
    metadata = {"name": name, "namespace": namespace}
    if owner:
        metadata["ownerReferences"] = [dict(OWNERS[owner])]
    body = {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": requests}}]}
    if priority is not None:
        body["priority"] = priority
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body, "status": {"phase": "Running"}}


def with_local_storage(pod):
    """upstream's withLocalStorage: a normal owner, a hostPath/emptyDir volume, and the mirror Pod annotations."""
    pod["metadata"]["ownerReferences"] = [dict(OWNERS["normal"])]
    pod["spec"]["volumes"] = [{"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {"sizeLimit": "10"}}]
    pod["metadata"]["annotations"] = dict(MIRROR)
    return pod


def critical(pod, owner=True):
    """upstream's withCriticalPod (the first cases leave the owner out)."""
    if owner:
        pod["metadata"]["ownerReferences"] = [dict(OWNERS["normal"])]
    else:
        pod["metadata"].pop("ownerReferences", None)
    pod["metadata"]["namespace"] = "kube-system"
    pod["spec"]["priority"] = SYSTEM_CRITICAL
    return pod


def three_nodes(n1_pods=9, n3_unschedulable=True):
    return [build_test_node(N1, 4000, 3000, n1_pods), build_test_node(N2, 4000, 3000, 10), build_test_node(N3, 4000, 3000, 10, unschedulable=n3_unschedulable)]


def usual_pods(cpu=400, memory=0, movers=None, p9_cpu=400, critical_owner=True):
    """p1..p5 (evictable unless `movers` says otherwise) on n1, then the ones that never move: p6 DaemonSet, p7 local
    storage and mirror, p8 system critical; p9 on n2."""
    pods = movers if movers is not None else [build_test_pod("p{0}".format(i), cpu, memory, N1) for i in range(1, 6)]
    return pods + [build_test_pod("p6", cpu, memory, N1, owner="ds"), with_local_storage(build_test_pod("p7", cpu, memory, N1)),
                   critical(build_test_pod("p8", cpu, memory, N1), owner=critical_owner), build_test_pod("p9", p9_cpu, memory, N2)]


def kubernetes_metrics(nodes, pods, namespace="default"):
    """BuildNodeMetrics/BuildPodMetrics as the collection passes them (the collector's first sample is the raw value)."""
    return {"source": "KubernetesMetrics", "nodes": {n: {"cpu": c, "memory": m} for n, (c, m) in nodes.items()},
            "pods": {"{0}/{1}".format(namespace, p): {"cpu": c, "memory": m} for p, (c, m) in pods.items()}}


def prometheus(samples, query=QUERY):
    return {"source": "Prometheus", "query": query, "nodes": {n: {"MetricResource": int(v * 100)} for n, v in samples.items()},
            "values": dict(samples)}


def lnu_policy(thresholds, targets, deviation=False, metrics=None, exclude=None, include=None, node_limit=None):
    args = {"thresholds": dict(thresholds), "targetThresholds": dict(targets)}
    if deviation:
        args["useDeviationThresholds"] = True
    if metrics is not None:
        args["metricsUtilization"] = metrics
    if exclude or include:
        args["evictableNamespaces"] = {k: v for k, v in (("exclude", exclude), ("include", include)) if v}
    if node_limit is not None:
        args["evictionLimits"] = {"node": node_limit}
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "upstream", "pluginConfig": [{"name": "DefaultEvictor", "args": {"nodeFit": True}},
                                                               {"name": "LowNodeUtilization", "args": args}],
                          "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}


METRICS_SERVER = {"source": "KubernetesMetrics"}
CPU_PODS = ({"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50})
USUAL_POD_METRICS = {"p{0}".format(i): (401, 0) for i in range(1, 6)}
USUAL_NODE_METRICS = {N1: (3201, 0), N2: (401, 0), N3: (11, 0)}


def selector_pod(name, west):
    return build_test_pod(name, 400, 0, N1, owner="normal", nodeSelector={"datacenter": "west"}) if west else build_test_pod(name, 400, 0, N1)


def affinity_pod(name):
    terms = [{"matchExpressions": [{"key": "datacenter", "operator": "In", "values": ["west"]}]}]
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    return build_test_pod(name, 400, 0, N1, owner="normal", affinity={"nodeAffinity": required})


def two_nodes_east():
    return [build_test_node(N1, 4000, 3000, 9), build_test_node(N2, 4000, 3000, 10, labels={"datacenter": "east"})]


def extended_nodes(n1_pods):
    return [build_test_node(N1, 4000, 3000, n1_pods, extended=8), build_test_node(N2, 4000, 3000, 10, extended=8),
            build_test_node(N3, 4000, 3000, 10, unschedulable=True)]


def extended_pod(name, node, amount=1, owner="rs"):
    return build_test_pod(name, 0, 0, node, owner=owner, extended=amount)


# name -> (policy args, nodes, pods, node metrics, pod metrics, expected by requests, expected with metrics, evicted Pods)
CASES = {
    "no evictable pods": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), three_nodes(),
        [build_test_pod("p{0}".format(i), 400, 0, N1, owner="ds") for i in range(1, 5)]
        + [with_local_storage(build_test_pod("p5", 400, 0, N1)), critical(build_test_pod("p6", 400, 0, N1), owner=False), build_test_pod("p9", 400, 0, N2)],
        {N1: (2401, 1714978816), N2: (401, 1714978816), N3: (10, 1714978816)}, USUAL_POD_METRICS, 0, 0, None),
    "without priorities": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), three_nodes(), usual_pods(critical_owner=False), USUAL_NODE_METRICS,
        USUAL_POD_METRICS, 4, 4, None),
    "without priorities, but excluding namespaces": (
        dict(zip(("thresholds", "targets"), CPU_PODS), exclude=["namespace1"]), three_nodes(),
        usual_pods(movers=[build_test_pod("p{0}".format(i), 400, 0, N1, owner="normal", namespace="namespace1") for i in range(1, 6)],
                   critical_owner=False),
        USUAL_NODE_METRICS, USUAL_POD_METRICS, 0, 0, None),
    "without priorities, but include only default namespace": (
        dict(zip(("thresholds", "targets"), CPU_PODS), include=["default"]), three_nodes(),
        usual_pods(movers=[build_test_pod("p1", 400, 0, N1), build_test_pod("p2", 400, 0, N1)]
                   + [build_test_pod("p{0}".format(i), 400, 0, N1, owner=None, namespace="namespace{0}".format(i)) for i in (3, 4, 5)]),
        USUAL_NODE_METRICS, USUAL_POD_METRICS, 2, 2, None),
    "without priorities stop when cpu capacity is depleted": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), three_nodes(), usual_pods(), {N1: (3201, 0), N2: (401, 0), N3: (0, 0)},
        USUAL_POD_METRICS, 4, 4, None),
    "with priorities": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), three_nodes(),
        [build_test_pod("p{0}".format(i), 400, 0, N1, priority=HIGH_PRIORITY) for i in range(1, 5)]
        + [build_test_pod("p5", 400, 0, N1, priority=LOW_PRIORITY), build_test_pod("p6", 400, 0, N1, owner="ds", priority=HIGH_PRIORITY),
           with_local_storage(build_test_pod("p7", 400, 0, N1, priority=LOW_PRIORITY)), critical(build_test_pod("p8", 400, 0, N1)),
           build_test_pod("p9", 400, 0, N2)],
        USUAL_NODE_METRICS, USUAL_POD_METRICS, 4, 4, None),
    "without priorities evicting best-effort pods only": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), three_nodes(),
        usual_pods(movers=[build_test_pod(n, 400, 0, N1, best_effort=n != "p3") for n in ("p1", "p2", "p3", "p4", "p5")]),
        USUAL_NODE_METRICS, USUAL_POD_METRICS, 4, 4, ["p1", "p2", "p4", "p5"]),
    "with extended resource": (
        {"thresholds": {"pods": 30, EXTENDED: 30}, "targets": {"pods": 50, EXTENDED: 50}},
        extended_nodes(n1_pods=9),
        [extended_pod("p{0}".format(i), N1) for i in range(1, 6)]
        + [extended_pod("p6", N1, owner="normal"), with_local_storage(extended_pod("p7", N1)), critical(extended_pod("p8", N1)),
           extended_pod("p9", N2)],
        USUAL_NODE_METRICS, USUAL_POD_METRICS, 3, 0, None),
    "with extended resource in some of nodes": (
        {"thresholds": {"pods": 30, EXTENDED: 30}, "targets": {"pods": 50, EXTENDED: 50}},
        [build_test_node(N1, 4000, 3000, 9, extended=8), build_test_node(N2, 4000, 3000, 10), build_test_node(N3, 4000, 3000, 10, unschedulable=True)],
        [extended_pod("p1", N1), build_test_pod("p9", 0, 0, N2)], USUAL_NODE_METRICS, USUAL_POD_METRICS, 0, 0, None),
    "with extended resource in some of nodes with deviation": (
        {"thresholds": {"pods": 5, EXTENDED: 10}, "targets": {"pods": 5, EXTENDED: 10}, "deviation": True},
        extended_nodes(n1_pods=10),
        [extended_pod("p1", N1), extended_pod("p2", N2, amount=7), build_test_pod("p3", 0, 0, N2), build_test_pod("p8", 0, 0, N3),
         build_test_pod("p9", 0, 0, N3)],
        USUAL_NODE_METRICS, USUAL_POD_METRICS, 1, 0, None),
    "without priorities, but only other node is unschedulable": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), [build_test_node(N1, 4000, 3000, 9), build_test_node(N2, 4000, 3000, 10, unschedulable=True)],
        usual_pods()[:-1], {N1: (3201, 0), N2: (401, 0)}, USUAL_POD_METRICS, 0, 0, None),
    "without priorities, but only other node doesn't match pod node selector for p4 and p5": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), two_nodes_east(),
        usual_pods(movers=[selector_pod(n, n in ("p4", "p5")) for n in ("p1", "p2", "p3", "p4", "p5")])[:-1],
        {N1: (3201, 0), N2: (401, 0)}, {p: (401, 0) for p in ("p1", "p2", "p3")}, 3, 3, None),
    "without priorities, but only other node doesn't match pod node affinity for p4 and p5": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), two_nodes_east(),
        usual_pods(movers=[build_test_pod("p1", 400, 0, N1), build_test_pod("p2", 400, 0, N1), build_test_pod("p3", 400, 0, N1), affinity_pod("p4"),
                           affinity_pod("p5")], p9_cpu=0),
        {N1: (3201, 0), N2: (401, 0)}, {p: (401, 0) for p in ("p1", "p2", "p3")}, 3, 3, None),
    "deviation thresholds": (
        {"thresholds": {"cpu": 5, "pods": 5}, "targets": {"cpu": 5, "pods": 5}, "deviation": True}, three_nodes(), usual_pods(),
        USUAL_NODE_METRICS, USUAL_POD_METRICS, 2, 2, None),
    "deviation thresholds and overevicting memory": (
        {"thresholds": {"cpu": 5, "pods": 5}, "targets": {"cpu": 5, "pods": 5}, "deviation": True}, three_nodes(n1_pods=10),
        usual_pods(memory=375)[:-1] + [build_test_pod("p9", 400, 3000, N2)],
        {N1: (4000, 3000), N2: (4000, 3000), N3: (4000, 3000)},
        dict({"p{0}".format(i): (400, 375) for i in range(1, 9)}, p9=(400, 3000)), 0, 0, None),
    "without priorities different evictions for requested and actual resources": (
        dict(zip(("thresholds", "targets"), CPU_PODS)), two_nodes_east(),
        usual_pods(movers=[build_test_pod("p1", 400, 0, N1), build_test_pod("p2", 400, 0, N1), build_test_pod("p3", 400, 0, N1), affinity_pod("p4"),
                           affinity_pod("p5")], p9_cpu=0),
        {N1: (3201, 0), N2: (401, 0)}, {p: (801, 0) for p in ("p1", "p2", "p3")}, 3, 2, None),
    "without priorities with node eviction limit": (
        dict(zip(("thresholds", "targets"), CPU_PODS), node_limit=2), three_nodes(), usual_pods(critical_owner=False), USUAL_NODE_METRICS,
        USUAL_POD_METRICS, 2, 2, None),
}


def build(case, with_metrics):
    spec, nodes, pods, node_metrics, pod_metrics, _requests, _metrics, _names = CASES[case]
    spec = dict(spec)
    thresholds, targets = spec.pop("thresholds"), spec.pop("targets")
    policy = lnu_policy(thresholds, targets, metrics=METRICS_SERVER if with_metrics else None, **spec)
    usage = kubernetes_metrics(node_metrics, pod_metrics) if with_metrics else None
    return policy, copy.deepcopy(nodes), copy.deepcopy(pods), usage


@pytest.mark.parametrize("case", list(CASES))
def test_low_node_utilization_by_requests(case):
    policy, nodes, pods, _usage = build(case, False)
    result = planner.plan_policy(policy, nodes, pods)
    evicted = [e["pod"] for e in result["evictions"]]
    assert len(evicted) == CASES[case][5], (evicted, result["stop_reason"], result["profiles"][0].get("node_stop"))
    if CASES[case][7] is not None:
        assert evicted == CASES[case][7]
    assert {n["usage_source"] for n in result["nodes"]} <= {"requests"}


@pytest.mark.parametrize("case", list(CASES))
def test_low_node_utilization_with_metrics_enabled(case):
    policy, nodes, pods, usage = build(case, True)
    result = planner.plan_policy(policy, nodes, pods, actual_usage=usage)
    evicted = [e["pod"] for e in result["evictions"]]
    assert len(evicted) == CASES[case][6], (evicted, result["stop_reason"], result["profiles"][0].get("node_stop"))
    if CASES[case][7] is not None:
        assert evicted == CASES[case][7]
    assert result["usage_source"] == "KubernetesMetrics"
    assert all(e["usage"] == {"cpu": usage["pods"]["default/" + e["pod"]]["cpu"], "memory": usage["pods"]["default/" + e["pod"]]["memory"]}
               for e in result["evictions"])


def test_metrics_enabled_extended_resource_is_upstreams_sync_error():
    policy, nodes, pods, usage = build("with extended resource", True)
    result = planner.plan_policy(policy, nodes, pods, actual_usage=usage)
    assert result["stop_reason"] == 'error getting node usage: unable to find "example.com/foo" resource for collected "n1" node metric'


def test_deviation_thresholds_rows_show_the_mean_band():
    # cpu: n1 3200/4000 = 80, n2 10, n3 0 -> mean 30, band 25..35; pods: 8/9, 1/10, 0 -> mean 32.96, band 27.96..37.96
    policy, nodes, pods, _usage = build("deviation thresholds", False)
    result = planner.plan_policy(policy, nodes, pods)
    rows = {n["name"]: n for n in result["nodes"]}
    assert rows["n1"]["thresholds_percent"] == {"low": {"cpu": 25.0, "pods": 27.96}, "high": {"cpu": 35.0, "pods": 37.96}}
    assert all(r["thresholds_percent"] == rows["n1"]["thresholds_percent"] for r in rows.values())
    assert [rows[n]["category"] for n in (N1, N2, N3)] == ["overutilized", "underutilized", "appropriately utilized"]
    # n2 capped at 35 % cpu = 1400m and int(3.796) = 3 Pods, minus its usage: two 400m Pods leave 200m and no Pod
    assert result["profiles"][0]["total_available"] == {"cpu": 200, "pods": 0, "memory": 3000}
    assert result["profiles"][0]["node_stop"] == {"n1": "no headroom left on the underutilized nodes"}


def test_overevicting_memory_is_stopped_by_the_memory_room():
    # memory has no threshold but is counted: n2 is full (3000 of 3000), so nothing may move there
    policy, nodes, pods, _usage = build("deviation thresholds and overevicting memory", False)
    result = planner.plan_policy(policy, nodes, pods)
    assert result["profiles"][0]["total_available"]["memory"] == 0 and result["profiles"][0]["headroom"] == {"cpu": 1000, "pods": 2}
    assert result["profiles"][0]["node_stop"] == {"n1": "no headroom left on the underutilized nodes"}


# ------------------------------------------------------------------------------------------ Prometheus
SAMPLES = {N1: 0.5695757575757561, N2: 0.4245454545454522, N3: 0.20381818181818104}
PROMETHEUS_UTILIZATION = {"source": "Prometheus", "prometheus": {"query": QUERY}}

# name -> (thresholds, targets, deviation, evictionLimits.node, samples, expected)
PROMETHEUS_CASES = {
    "with instance:node_cpu:rate:sum query": (30, 50, False, None, SAMPLES, 1),
    "with instance:node_cpu:rate:sum query with more evictions": (30, 50, False, 3, SAMPLES, 3),
    "with instance:node_cpu:rate:sum query with deviation": (5, 5, True, 2, SAMPLES, 2),
    "with instance:node_cpu:rate:sum query and deviation thresholds": (10, 10, True, None, {N1: 1, N2: 0.5, N3: 0}, 1),
}


def prometheus_cluster():
    nodes = three_nodes(n3_unschedulable=False)
    pods = [build_test_pod("p{0}".format(i), 400, 0, N1) for i in range(1, 6)]
    pods += [build_test_pod("p6", 400, 0, N1, owner="ds"), with_local_storage(build_test_pod("p7", 400, 0, N1)), critical(build_test_pod("p8", 400, 0, N1)),
             build_test_pod("p9", 400, 0, N2)]
    return nodes, pods


@pytest.mark.parametrize("case", list(PROMETHEUS_CASES))
def test_low_node_utilization_with_prometheus_metrics(case):
    low, high, deviation, node_limit, samples, expected = PROMETHEUS_CASES[case]
    policy = lnu_policy({"MetricResource": low}, {"MetricResource": high}, deviation=deviation, metrics=PROMETHEUS_UTILIZATION,
                        node_limit=node_limit)
    nodes, pods = prometheus_cluster()
    result = planner.plan_policy(policy, nodes, pods, actual_usage=prometheus(samples))
    assert [e["node"] for e in result["evictions"]] == [N1] * expected
    assert all(e["usage"] is None for e in result["evictions"])
    rows = {n["name"]: n for n in result["nodes"]}
    assert {n: rows[n]["usage_percent"]["MetricResource"] for n in rows} == {n: int(v * 100) for n, v in samples.items()}
    if node_limit is None:
        assert result["profiles"][0]["node_stop"][N1] == planner.SINGLE_EVICTION


def test_prometheus_usage_is_not_updated_after_an_eviction():
    # n1 at 56 stays above target 50 and the room (50 - 20 = 30) stays whole: three evictions with evictionLimits.node 3
    policy = lnu_policy({"MetricResource": 30}, {"MetricResource": 50}, metrics=PROMETHEUS_UTILIZATION, node_limit=3)
    nodes, pods = prometheus_cluster()
    result = planner.plan_policy(policy, nodes, pods, actual_usage=prometheus(SAMPLES))
    assert result["profiles"][0]["total_available"] == {"MetricResource": 30} and result["profiles"][0]["headroom"] == {"MetricResource": 30}
    assert result["profiles"][0]["node_stop"][N1] == "per-node eviction limit reached"


@pytest.mark.parametrize("points, category", [(7, "overutilized"), (29, "appropriately utilized"), (30, "appropriately utilized")])
def test_percentages_in_upstreams_float_order(points, category):
    # float64(7) / 100 * 100 is 7.000000000000001, above a target of 7; 29 (28.999999999999996) and 30 are not
    policy = lnu_policy({"MetricResource": 0}, {"MetricResource": points}, metrics=PROMETHEUS_UTILIZATION)
    nodes, pods = prometheus_cluster()
    usage = prometheus({N1: 0.5, N2: 0.5, N3: 0.5})
    usage["nodes"][N1]["MetricResource"] = points
    assert planner.plan_policy(policy, nodes, pods, actual_usage=usage)["nodes"][0]["category"] == category


@pytest.mark.parametrize("utilization, thresholds, problem", [
    ({"source": "Prometheus"}, {"MetricResource": 30}, "prometheus property is missing"),
    ({"source": "Prometheus", "prometheus": {}}, {"MetricResource": 30}, "prometheus query is missing"),
    (PROMETHEUS_UTILIZATION, {"cpu": 30}, 'thresholds are expected to specify a single instance of "MetricResource" resource, got [cpu] instead'),
    ({"source": "Graphite"}, {"cpu": 30}, "unrecognized metrics source"),
    ({}, {"cpu": 30}, "metrics source is empty"),
])
def test_metrics_utilization_upstream_refuses_to_build(utilization, thresholds, problem):
    targets = {r: 50 for r in thresholds}
    nodes, pods = prometheus_cluster()
    result = planner.plan_policy(lnu_policy(thresholds, targets, metrics=utilization), nodes, pods, actual_usage=prometheus(SAMPLES))
    assert result["stop_reason"] == "LowNodeUtilization cannot start: " + problem and result["evictions"] == []


# ------------------------------------------------------------------------------------------ our rules
def test_a_profile_that_reads_actual_usage_and_gets_none_stops_and_says_so():
    policy, nodes, pods, _usage = build("without priorities", True)
    result = planner.plan_policy(policy, nodes, pods)
    assert result["stop_reason"].startswith("actual usage not read: ") and "KubernetesMetrics" in result["stop_reason"]
    assert result["evictions"] == [] and result["usage_source"] == "KubernetesMetrics"


def test_usage_from_another_source_or_query_is_refused():
    policy, nodes, pods, usage = build("without priorities", True)
    wrong = planner.plan_policy(policy, nodes, pods, actual_usage=prometheus(SAMPLES))
    assert wrong["stop_reason"] == "actual usage not read: LowNodeUtilization.metricsUtilization reads KubernetesMetrics usage, the usage given is Prometheus's"
    prom_policy = lnu_policy({"MetricResource": 30}, {"MetricResource": 50}, metrics=PROMETHEUS_UTILIZATION)
    other_query = planner.plan_policy(prom_policy, nodes, pods, actual_usage=prometheus(SAMPLES, query="instance:node_memory_utilisation:ratio"))
    assert other_query["stop_reason"].startswith("actual usage not read: ") and "instance:node_memory_utilisation:ratio" in other_query["stop_reason"]
    assert planner.plan_policy(lnu_policy(*CPU_PODS), nodes, pods, actual_usage=usage)["usage_source"] == "requests"   # usage given, not asked for


def test_a_node_without_metrics_is_upstreams_sync_error():
    policy, nodes, pods, usage = build("without priorities", True)
    del usage["nodes"][N2]
    assert planner.plan_policy(policy, nodes, pods, actual_usage=usage)["stop_reason"] == \
        'error getting node usage: unable to find node "n2" in the collected metrics'
    prom_policy = lnu_policy({"MetricResource": 30}, {"MetricResource": 50}, metrics=PROMETHEUS_UTILIZATION)
    samples = prometheus(SAMPLES)
    del samples["nodes"][N3]
    assert planner.plan_policy(prom_policy, nodes, pods, actual_usage=samples)["stop_reason"] == \
        "error getting node usage: unable to find metric entry for n3"


def test_a_pod_without_pod_metrics_is_skipped_and_the_next_one_goes():
    policy, nodes, pods, usage = build("without priorities", True)
    del usage["pods"]["default/p1"]
    result = planner.plan_policy(policy, nodes, pods, actual_usage=usage)
    assert [e["pod"] for e in result["evictions"]] == ["p2", "p3", "p4", "p5"]
    assert result["skipped"] == [{"node": N1, "namespace": "default", "pod": "p1", "vm": None, "reason": "unable to get pod usage"}]


def test_metrics_rows_show_actual_usage_next_to_requests():
    policy, nodes, pods, usage = build("without priorities different evictions for requested and actual resources", True)
    result = planner.plan_policy(policy, nodes, pods, actual_usage=usage)
    n1 = result["nodes"][0]
    assert n1["usage_source"] == "KubernetesMetrics" and n1["usage_percent"] == {"cpu": 80.03, "pods": 88.89}
    assert n1["requests_percent"] == {"cpu": 80.0, "memory": 0.0, "pods": 88.89}


def test_metrics_utilization_and_deviation_are_evaluated_not_listed():
    policy, nodes, pods, _usage = build("deviation thresholds", True)
    assert planner.plan_policy(policy, nodes, pods)["profiles"][0]["not_evaluated"] == []
