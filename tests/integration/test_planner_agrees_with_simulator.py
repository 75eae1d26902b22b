"""The simulator's descheduler and the collection's planner agree on generated clusters, in each way
LowNodeUtilization can measure usage: requests, deviation thresholds (`useDeviationThresholds`), the metrics
server (`metricsUtilization.source: KubernetesMetrics`) and Prometheus (`source: Prometheus`).

Each example generates 2-5 workers and 0-6 VM launcher Pods per worker (tests/support/agreement.py builds them into
an in-process simulator cluster), a VM-scoped policy as descheduler_policy renders it (thresholds, targets, the
limits maxNoOfPodsToEvictTotal/PerNode/PerNamespace and evictionLimits.node, nodeFit, excluded namespaces), runs ONE
cycle of the simulator's descheduler and compares the Pods it evicted, in order, and the node categories it logged
with plan_policy's on the same nodes and Pods read from the cluster's store. In the metrics modes every VM has an
actual load, which the simulator's metrics model serves (NodeMetrics/PodMetrics, and its Prometheus for the
query drawn); the planner gets what the simulator serves, converted by the collection's own readers
(cluster/metrics.py) into the `actual_usage` dict. The two are written independently from upstream (descheduler
v0.36), so agreement is evidence for both and a disagreement is a bug in one of them.

Ties: upstream leaves the order of equally ranked Pods (same priority and QoS class) and of equally used source
nodes undefined; the simulator shuffles them with a seeded rng (the seed is drawn), the planner takes name order
and lists the others as `alternatives`. The clusters are generated so that ties never change the outcome, and the
comparison is modulo the alternatives: on one node, Pods of equal rank are always VMs of one kind (same namespace,
size and load), so whichever the descheduler picks the rest of the cycle is the same and only the names may
differ, which must then be among the planner's alternatives. Nodes never tie: every node's agent Pod differs in
memory by less than a VM's size step, so no two nodes have the same summed usage (upstream's sort key); with
Prometheus, whose only resource is the query's value, two workers may get the same value: such examples are left out
when a total or per-namespace limit makes the node order matter, else the evictions are compared node by node.
Generating no ties at all would keep the alternatives and the priority/QoS ordering out of the test; comparing
modulo alternatives with unequal tied Pods would be unsound (the choice changes what follows).

Simulator internals are used (an in-process cluster, its descheduler's run_once, its metrics model): marked
`simulator`."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings, target
from hypothesis import strategies as st

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster import metrics as readers
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import plan as planner
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.render import render_policy

from support.agreement import (NAMESPACES, PROFILE, PROMETHEUS_QUERIES, PROMETHEUS_SECRET, PROMETHEUS_URL, QOS_CLASSES, VM_LABELS,
                               ClusterSpec, VmKind, WorkerSpec, agent_memory_mi, build_cluster, describe, disagreements, metrics_section,
                               planner_run, prometheus_answer, served_metrics, simulator_run)

pytestmark = pytest.mark.simulator

EXAMPLES = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
WORKER_NAMES = ("worker-a", "worker-b", "worker-c", "worker-d", "worker-e")
RESOURCES = ("cpu", "memory", "pods")
MAX_VMS_PER_NODE = 6

seeds = st.integers(0, 2 ** 32 - 1)


@st.composite
def vm_kinds(draw, worker: tuple, agent_mi: int, loaded: bool) -> tuple:
    """The (kind, count) pairs of one worker (cpu cores, memory GiB, pods): one kind per (priority, QoS class),
    requests within allocatable, now and then VMs still starting or tolerating the dedicated taint; with `loaded`, each
    kind's actual load."""
    cpu_cores, memory_gi, pods = worker
    ranks = draw(st.lists(st.tuples(st.sampled_from((0, 100, 1000)), st.sampled_from(QOS_CLASSES)), unique=True, max_size=4))
    free = {"cpu": cpu_cores * 1000 - 100, "memory": memory_gi * 1024 - agent_mi, "pods": pods - 1, "vms": MAX_VMS_PER_NODE}
    kinds = []
    for priority, qos in ranks:
        kind = VmKind(namespace=draw(st.sampled_from(NAMESPACES)), priority=priority, qos=qos,
                      cpu_m=draw(st.sampled_from((250, 500, 1000, 2000, 4000))),
                      memory_mi=draw(st.sampled_from((256, 512, 1024, 2048, 4096, 8192))),
                      in_scope=draw(st.sampled_from((True, True, True, True, False))),
                      load_cpu_m=draw(st.sampled_from((0, 100, 500, 1000, 2000, 4000))) if loaded else 0,
                      load_memory_mi=draw(st.sampled_from((256, 512, 1024, 2048, 4096, 8192))) if loaded else 0,
                      starting=draw(st.sampled_from((False,) * 9 + (True,))),
                      tolerates_dedicated=draw(st.sampled_from((False, False, False, True))))
        cpu, memory = (0, 0) if qos == "BestEffort" else (kind.cpu_m, kind.memory_mi)
        count = draw(st.integers(1, 3))
        while count and (count * cpu > free["cpu"] or count * memory > free["memory"] or count > min(free["pods"], free["vms"])):
            count -= 1   # a scheduler would not have placed more
        if count:
            kinds.append((kind, count))
            for key, used in (("cpu", count * cpu), ("memory", count * memory), ("pods", count), ("vms", count)):
                free[key] -= used
    return tuple(kinds)


@st.composite
def clusters(draw, loaded: bool = False) -> ClusterSpec:
    """2-5 workers, now and then one cordoned or tainted for dedicated use; the last one is often new and empty, as when
    a rebalance is wanted; with `loaded`, the VMs' loads and the node overhead of the metrics model."""
    workers = []
    count = draw(st.integers(2, 5))
    for index in range(count):
        size = (draw(st.sampled_from((4, 8, 16))), draw(st.sampled_from((8, 16, 32))), draw(st.sampled_from((10, 20, 110))))
        vms = draw(vm_kinds(size, agent_memory_mi(index), loaded))
        if index == count - 1 and draw(st.booleans()):
            vms = ()
        workers.append(WorkerSpec(WORKER_NAMES[index], *size, vms, cordoned=draw(st.sampled_from((False,) * 7 + (True,))),
                                  dedicated=draw(st.sampled_from((False,) * 5 + (True,)))))
    if not loaded:
        return ClusterSpec(tuple(workers))
    return ClusterSpec(tuple(workers), (draw(st.sampled_from((0, 200, 500))), draw(st.sampled_from((0, 512, 1024)))))


@st.composite
def thresholds(draw, deviation: bool, resources: tuple = RESOURCES) -> tuple:
    """thresholds and targetThresholds over the same resources: static ones never above their target (upstream's
    rule), deviations below and above the mean anything from 0 to 30 points."""
    names = draw(st.lists(st.sampled_from(resources), min_size=1, max_size=len(resources), unique=True))
    low, high = {}, {}
    for name in names:
        if deviation:
            low[name], high[name] = draw(st.integers(0, 30)), draw(st.integers(0, 30))
        else:
            low[name] = draw(st.integers(0, 60))
            high[name] = min(100, low[name] + draw(st.integers(0, 25)))
    return low, high


@st.composite
def limits(draw) -> dict:
    """descheduler_policy's limit options (None: not set), nodeFit and the excluded namespaces."""
    def maybe(low: int, high: int):
        return draw(st.none() | st.integers(low, high))
    return {"max_pods_to_evict_total": maybe(0, 6), "max_pods_to_evict_per_node": maybe(0, 3),
            "max_pods_to_evict_per_namespace": maybe(1, 4), "eviction_limit_node": maybe(0, 3), "node_fit": draw(st.booleans()),
            "exclude_namespaces": draw(st.sampled_from((None, None, None, [NAMESPACES[1]])))}


def vm_policy(spec: ClusterSpec, low: dict, high: dict, options: dict, **source) -> dict:
    """The VM profile descheduler_policy renders for the generated workers; `source` are its usage options
    (use_deviation_thresholds, metrics_source, prometheus_query, prometheus_url, prometheus_auth_secret)."""
    return render_policy(profile_name=PROFILE, nodes=spec.names, vm_labels=dict(VM_LABELS), thresholds=low, target_thresholds=high,
                         **options, **source)


def assert_agree(spec: ClusterSpec, policy: dict, seed: int, actual_usage=None, cluster=None, node_order: bool = True) -> None:
    cluster = cluster or build_cluster(spec)
    plan = planner_run(planner, cluster, policy, actual_usage)   # first: the store as it is before the cycle
    source = actual_usage["source"] if actual_usage else "requests"
    assert {row["usage_source"] for row in plan.plan["nodes"]} <= {source}, plan.plan["nodes"]
    simulator = simulator_run(cluster, policy, seed)
    # steer the search towards cycles where either side evicts
    target(float(max(len(simulator.evictions), len(plan.evictions))), label="evictions")
    problems = disagreements(spec, simulator, plan, node_order)
    assert not problems, describe(policy, simulator, plan, problems)


@EXAMPLES
@given(spec=clusters(), levels=thresholds(deviation=False), options=limits(), seed=seeds)
def test_requests_mode_agrees(spec, levels, options, seed):
    assert_agree(spec, vm_policy(spec, *levels, options), seed)


@EXAMPLES
@given(spec=clusters(), levels=thresholds(deviation=True), options=limits(), seed=seeds)
def test_deviation_thresholds_agree(spec, levels, options, seed):
    assert_agree(spec, vm_policy(spec, *levels, options, use_deviation_thresholds=True), seed)


@EXAMPLES
@given(data=st.data(), spec=clusters(loaded=True), deviation=st.booleans(), options=limits(), seed=seeds)
def test_metrics_server_mode_agrees(data, spec, deviation, options, seed):
    levels = data.draw(thresholds(deviation), label="levels")
    cluster = build_cluster(spec, metrics_section(spec))
    node_items, pod_items = served_metrics(cluster)
    actual = {"source": "KubernetesMetrics", "nodes": readers.node_usage(node_items), "pods": readers.pod_usage(pod_items)}
    policy = vm_policy(spec, *levels, options, use_deviation_thresholds=deviation or None, metrics_source="KubernetesMetrics")
    assert_agree(spec, policy, seed, actual, cluster)


@EXAMPLES
@given(data=st.data(), spec=clusters(loaded=True), query=st.sampled_from(PROMETHEUS_QUERIES), deviation=st.booleans(),
       options=limits(), seed=seeds)
def test_prometheus_mode_agrees(data, spec, query, deviation, options, seed):
    levels = data.draw(thresholds(deviation, ("MetricResource",)), label="levels")
    cluster = build_cluster(spec, metrics_section(spec, prometheus=True))
    actual = readers.prometheus_usage(prometheus_answer(cluster, query), query)
    values = [actual["nodes"][name]["MetricResource"] for name in spec.names]
    # The query's value is the only sort key: equal values leave the order of source nodes undefined. Without Pod usage
    # each source node is evicted from as if it were the only one, so the order only changes what goes when a total or
    # per-namespace limit cuts the run short; otherwise the evictions are compared node by node.
    ordered = len(set(values)) == len(values)
    assume(ordered or (options["max_pods_to_evict_total"] is None and options["max_pods_to_evict_per_namespace"] is None))
    policy = vm_policy(spec, *levels, options, use_deviation_thresholds=deviation or None, metrics_source="Prometheus",
                       prometheus_query=query, prometheus_url=PROMETHEUS_URL, prometheus_auth_secret=dict(PROMETHEUS_SECRET))
    assert_agree(spec, policy, seed, actual, cluster, node_order=ordered)
