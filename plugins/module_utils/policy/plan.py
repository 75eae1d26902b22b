# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What LowNodeUtilization would do with a policy now (written from the upstream facts in
shared/reference/upstream-facts.md and descheduler v0.36 `pkg/framework/plugins/nodeutilization`):

- usage, per the profile's `metricsUtilization`: by requests (none: the sum of the requests of the node's
  non-finished Pods); KubernetesMetrics (`source: KubernetesMetrics` or the deprecated `metricsServer: true`: the
  node's cpu and memory from NodeMetrics as `actual_usage["nodes"]` holds them, `pods` the number of its
  non-finished Pods; a Pod's usage the sum of its PodMetrics containers, `actual_usage["pods"]`); Prometheus
  (`source: Prometheus`: the query's value per node as `MetricResource`, int(value * 100), of a capacity of 100);
  in percent of the node's allocatable, per resource;
- the thresholds: as given, or with `useDeviationThresholds` the mean of the nodes' percentages (of the threshold
  resources, over the nodes that have the resource) minus `thresholds` and plus `targetThresholds`, each clamped to
  [0, 100] (every node row shows them as `thresholds_percent`);
- underutilized: every threshold resource at or below its low threshold (an unschedulable node never is);
  overutilized: any resource above its high threshold; otherwise appropriately utilized;
- source nodes by usage, highest first (upstream's sum of the raw usage values: cpu in millicores, memory in
  bytes, Pods, MetricResource; name order on ties);
- the stop conditions (upstream's continueEvictionCond): the room of the underutilized nodes is their capacity
  capped at the high threshold, int(threshold * 0.01 * capacity), minus their usage, summed for every resource
  counted (the threshold resources plus cpu, memory and pods; MetricResource alone for Prometheus; a resource
  without a threshold is capped at the whole capacity): `total_available`, and `headroom` for the threshold
  resources. A node is left when none of its usage is above its capped capacity or any room is used up (checked
  before the first Pod and after each eviction);
- evictPods, per source node, over the Pods that pass DefaultEvictor's Filter (lowest priority first, then
  BestEffort < Burstable < Guaranteed), each Pod in upstream's order: `evictionLimits.node` reached leaves the node;
  a Pod that tolerates the taints of none of the underutilized nodes is skipped (utils.PodToleratesTaints: every
  effect counts, PreferNoSchedule too, and a node with more taints than the Pod has tolerations is never
  tolerated; "Skipping eviction for pod, doesn't tolerate node taint": candidate reason `UNTOLERATED`, with
  `untolerated` per node); then the PreEvictionFilter with the namespace exclusion (`evictableNamespaces.exclude`,
  then nodeFit); then the Pod's usage (a KubernetesMetrics Pod without PodMetrics is skipped, `unable to get pod
  usage`, listed in `skipped`); then the pod evictor's limits over the whole run, in EvictPod's order:
  `maxNoOfPodsToEvictTotal` ends the run, `maxNoOfPodsToEvictPerNode` leaves the node, a Pod over its namespace's
  `maxNoOfPodsToEvictPerNamespace` is skipped. Each eviction takes the Pod's usage (requests, or its PodMetrics)
  off its node and off the room. Prometheus gives no Pod usage, so an eviction is unconstrained: usage and room
  stay as they were, and without `evictionLimits.node` one Pod per source node is evicted ("Currently, only a
  single pod eviction is allowed");
- DefaultEvictor's Filter: the evict annotation bypasses it (not the loop's checks above); otherwise bare and
  mirror Pods, Pods with a deletionTimestamp or an eviction already in progress, the active protections (local
  storage, PVC, system-critical, DaemonSet), the label selector and the priority threshold; its
  PreEvictionFilter: nodeFit (`kube/node_fit.py`: another Ready node that the evictor's own `nodeSelector`
  selects matches the Pod's node selector and required node affinity, has no NoSchedule/NoExecute taint the Pod
  does not tolerate, room for every resource the Pod requests, is not cordoned and holds no Pod the Pod's
  required anti-affinity excludes), judged on the requests of the Pods as they are before the run;
- QoS class as the descheduler's GetPodQOS (`kube/qos.py`: cpu and memory only, zero counts as unset).
A profile that reads actual usage and gets none (or usage from another source or query) stops with
`actual usage not read: ...`; usage that lacks a node or a threshold resource stops with upstream's `error getting
node usage: ...`; a metricsUtilization upstream refuses to build stops with upstream's words.

Simplified: what the planner does not evaluate is listed per field in each profile's `not_evaluated`
(`not_evaluated()`): DefaultEvictor `namespaceLabelSelector`, `minReplicas` above 1, `minPodAge`,
`priorityThreshold.name`, the active `PodsWithoutPDB` and
`PodsWithResourceClaims` protections and PodsWithPVC's `protectedStorageClasses` (every PVC protects here).
Not modelled at all: the metrics collector's smoothing of node usage over time (the usage given is taken as the
collector's value; its first sample is the raw value). Percentages are computed in upstream's float order (used / capacity * 100), which can
land one float step off an exact boundary as upstream's do. With equal sort keys the descheduler's order is not
defined, so each planned eviction lists its equally ranked `alternatives`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import protections
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import annotations, labels, meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import (
    NOT_FIT,
    allocatable,
    is_ready,
    node_fit_error,
    node_usage,
    tolerates,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.qos import pod_qos as qos_class
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    DEFAULT_EVICTOR,
    KUBERNETES_METRICS,
    LOW_NODE_UTILIZATION,
    METRIC_RESOURCE,
    PROMETHEUS,
    enabled_plugins,
    metrics_source,
    plugin_config,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES, pod_requests
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import (
    match_label_selector,
    matches_selector_string,
    parse_label_selector,
)

UNDER = "underutilized"
OVER = "overutilized"
APPROPRIATE = "appropriately utilized"
REQUESTS = "requests"
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
IN_PROGRESS_ANNOTATION = "descheduler.alpha.kubernetes.io/eviction-in-progress"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SYSTEM_CRITICAL_PRIORITY = 2000000000
QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
METRIC_CAPACITY = 100   # referencedResourceListForNodeCapacity: a query's value is a percentage of 100

NO_UNDER = "No node is underutilized, nothing to do here, you might tune your thresholds further"
ALL_UNDER = "All nodes are underutilized, nothing to do here"
NONE_OVER = "All nodes are under target utilization, nothing to do here"
FEW_UNDER = "Number of nodes underutilized is less or equal than NumberOfNodes, nothing to do here"
TOO_FEW_NODES = "The cluster size is 0 or 1 meaning eviction causes service disruption or degradation. So aborting.."
NO_USAGE = "actual usage not read: "
USAGE_ERROR = "error getting node usage: "
CANNOT_START = "LowNodeUtilization cannot start: "
PLAN_ERRORS = (NO_USAGE, USAGE_ERROR, CANNOT_START)   # stop reasons that mean the plan could not be made
NO_POD_USAGE = "unable to get pod usage"
SINGLE_EVICTION = ("Currently, only a single pod eviction is allowed (Prometheus gives no per-Pod usage; "
                   "evictionLimits.node allows more)")
NOT_ABOVE = "node is no longer above target utilization"
NO_ROOM = "no headroom left on the underutilized nodes"
EXCLUDED = "namespace is excluded (evictableNamespaces.exclude)"
UNTOLERATED = "doesn't tolerate node taint: tolerates the taints of no underutilized node"
NAMESPACE_LIMIT = "maxNoOfPodsToEvictPerNamespace reached"


# ------------------------------------------------------------------------------------------ nodes
def select_nodes(selector: Optional[str], nodes: List[dict]) -> List[dict]:
    """nodeutil.ReadyNodes: the Ready nodes a label selector string selects (all Ready nodes without one)."""
    requirements = parse_label_selector(selector or "")
    return [n for n in nodes if is_ready(n) and matches_selector_string(requirements, labels(n))]


def active_pods(pods: List[dict]) -> Dict[str, List[dict]]:
    by_node: Dict[str, List[dict]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            by_node.setdefault(node, []).append(pod)
    return by_node


def percent_of(used: int, capacity: int) -> float:
    """ResourceUsageToResourceThreshold's float64(used) / float64(capacity) * 100, in that order: 7 of 100 is
    7.000000000000001, above a threshold of 7, as upstream classifies it."""
    return float(used) / float(capacity) * 100 if capacity > 0 else 0.0


def percentages(usage: Dict[str, int], capacity: Dict[str, int], resources: Sequence[str]) -> Dict[str, float]:
    return {r: percent_of(usage.get(r, 0), capacity[r]) if capacity.get(r) else 0.0 for r in resources}


def known_percentages(usage: Dict[str, int], capacity: Dict[str, int], resources: Sequence[str]) -> Dict[str, float]:
    """ResourceUsageToResourceThreshold: the percentages of the resources the node has a capacity for (a resource it
    does not list is left out, so the deviation mean does not count it; classification reads it as 0)."""
    return {r: percent_of(usage.get(r, 0), capacity[r]) for r in resources if r in capacity}


def classify(percent: Dict[str, float], thresholds: Dict[str, float], targets: Dict[str, float], schedulable: bool) -> str:
    if schedulable and all(percent.get(r, 0.0) <= thresholds[r] for r in thresholds):
        return UNDER
    if any(percent.get(r, 0.0) > targets[r] for r in targets):
        return OVER
    return APPROPRIATE


def deviation_thresholds(percents: Dict[str, Dict[str, float]], thresholds: Dict[str, float],
                         targets: Dict[str, float]) -> Tuple[Dict[str, float], Dict[str, float]]:
    """assessNodesUsagesAndRelativeThresholds: the mean of each resource over the nodes that have it, minus
    `thresholds` and plus `targetThresholds`, clamped to [0, 100]."""
    totals: Dict[str, float] = {}
    counts: Dict[str, int] = {}
    for percent in percents.values():
        for resource, value in percent.items():
            totals[resource] = totals.get(resource, 0.0) + value
            counts[resource] = counts.get(resource, 0) + 1
    mean = {r: totals[r] / counts[r] for r in totals}
    low = {r: min(max(v - thresholds.get(r, 0.0), 0.0), 100.0) for r, v in mean.items()}
    high = {r: min(max(v + targets.get(r, 0.0), 0.0), 100.0) for r, v in mean.items()}
    return low, high


def capped_capacity(capacity: Dict[str, int], high: Dict[str, float], resources: Sequence[str]) -> Dict[str, int]:
    """capNodeCapacitiesToThreshold: the capacity capped at the high threshold, int(threshold * 0.01 * capacity) as
    upstream computes it (0 for a resource the node does not have, the whole capacity without a threshold)."""
    capped = {}
    for resource in resources:
        if resource not in capacity:
            capped[resource] = 0
        elif resource not in high:
            capped[resource] = capacity[resource]
        else:
            capped[resource] = int(float(high[resource]) * 0.01 * float(capacity[resource]))
    return capped


def counted_resources(source: str, resources: Sequence[str]) -> List[str]:
    """extendedResourceNames: the threshold resources, plus cpu, memory and pods unless the usage is a query's."""
    if source == PROMETHEUS:
        return list(resources)
    return list(resources) + [r for r in RESOURCES if r not in resources]


# ------------------------------------------------------------------------------------------ usage sources
def usage_source(args: dict) -> Tuple[Optional[str], Optional[str]]:
    """Where the profile's usage comes from, and upstream's error when NewLowNodeUtilization would refuse the args."""
    utilization = args.get("metricsUtilization")
    if utilization is None:
        return REQUESTS, None
    utilization = utilization if isinstance(utilization, dict) else {}
    if utilization.get("source") == PROMETHEUS:
        problem = prometheus_problem(args, utilization)
        if problem:
            return None, problem
    source = metrics_source(utilization)
    if source in (KUBERNETES_METRICS, PROMETHEUS):
        return source, None
    return None, "unrecognized metrics source" if source else "metrics source is empty"


def prometheus_problem(args: dict, utilization: dict) -> Optional[str]:
    """validatePrometheusMetricsUtilization, in upstream's words."""
    prometheus = utilization.get("prometheus")
    if not isinstance(prometheus, dict):
        return "prometheus property is missing"
    if not prometheus.get("query"):
        return "prometheus query is missing"
    for field, name in (("thresholds", "thresholds"), ("targetThresholds", "targetThresholds")):
        given = sorted(args.get(field) or {})
        if given != [METRIC_RESOURCE]:
            return "{0} are expected to specify a single instance of \"{1}\" resource, got [{2}] instead".format(name, METRIC_RESOURCE, " ".join(given))
    return None


def actual_usage_problem(source: str, args: dict, actual: Optional[dict]) -> Optional[str]:
    """Why `actual` cannot stand for what the profile reads; None when it can."""
    if not isinstance(actual, dict):
        return "LowNodeUtilization.metricsUtilization reads {0} usage and none was given; read it first (metrics.read_actual_usage)".format(source)
    if actual.get("source") != source:
        return "LowNodeUtilization.metricsUtilization reads {0} usage, the usage given is {1}'s".format(source, actual.get("source"))
    query = ((args.get("metricsUtilization") or {}).get("prometheus") or {}).get("query")
    if source == PROMETHEUS and actual.get("query") not in (None, query):
        return "LowNodeUtilization.metricsUtilization.prometheus.query is {0!r}, the usage given answers {1!r}".format(query, actual.get("query"))
    return None


def node_usages(source: str, nodes: Sequence[dict], pods_by_node: Dict[str, List[dict]], counted: Sequence[str],
                actual: Optional[dict], requested: Dict[str, Dict[str, int]]) -> Tuple[Dict[str, Dict[str, int]], Optional[str]]:
    """usageClient.sync: each node's usage of the counted resources (`requested`: each node's summed requests);
    upstream's error when the usage lacks a node or a resource (the first node in order that does)."""
    usage: Dict[str, Dict[str, int]] = {}
    measured = (actual or {}).get("nodes") or {}
    for node in nodes:
        name = meta(node)["name"]
        on_node = pods_by_node.get(name, [])
        if source == REQUESTS:
            usage[name] = {r: requested[name].get(r, 0) for r in counted}
            continue
        if name not in measured:
            if source == PROMETHEUS:
                return {}, "unable to find metric entry for {0}".format(name)
            return {}, "unable to find node \"{0}\" in the collected metrics".format(name)
        if source == PROMETHEUS:
            usage[name] = {METRIC_RESOURCE: int(measured[name].get(METRIC_RESOURCE, 0))}
            continue
        # the metrics collector keeps cpu and memory; `pods` is the number of the node's Pods
        values = {r: int(measured[name][r]) for r in ("cpu", "memory") if r in measured[name]}
        values["pods"] = len(on_node)
        for resource in counted:
            if resource not in values:
                return {}, "unable to find \"{0}\" resource for collected \"{1}\" node metric".format(resource, name)
        usage[name] = values
    return usage, None


def pod_key(pod: dict) -> str:
    return "{0}/{1}".format(meta(pod).get("namespace"), meta(pod).get("name"))


def pod_usage(source: str, pod: dict, counted: Sequence[str], actual: Optional[dict]) -> Optional[Dict[str, int]]:
    """usageClient.podUsage: the Pod's requests, or the sum of its PodMetrics (None when it has none, as a Pod whose
    PodMetrics cannot be read); {} for Prometheus, which has no per-Pod value."""
    if source == PROMETHEUS:
        return {}
    if source == KUBERNETES_METRICS:
        measured = ((actual or {}).get("pods") or {}).get(pod_key(pod))
        if measured is None:
            return None
        return {r: int(v) for r, v in measured.items() if r in counted and r != "pods"}
    requested = pod_requests(pod)
    return {r: requested.get(r, 0) for r in counted if r != "pods"}


# ------------------------------------------------------------------------------------------ pods
def priority(pod: dict) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) else 0


def vm_name(pod: dict) -> Optional[str]:
    return annotations(pod).get("kubevirt.io/domain") or labels(pod).get("vm.kubevirt.io/name")


def _volumes(pod: dict) -> List[dict]:
    return (pod.get("spec") or {}).get("volumes") or []


def node_capacity(node: dict) -> Dict[str, int]:
    """The node's allocatable, plus the 100 a query's MetricResource is a percentage of."""
    capacity = allocatable(node)
    capacity[METRIC_RESOURCE] = METRIC_CAPACITY
    return capacity


class State:
    """Per-node capacity and usage during the plan (usage changes as Pods are planned away), and the view nodeFit
    judges on: the Ready nodes the evictor's `nodeSelector` selects with their Pods and requests before the run (an
    evicted virt-launcher Pod stays on its node until its migration ends). `usage`: each node's usage of the
    counted resources, by requests when not given."""

    def __init__(self, nodes: List[dict], pods_by_node: Dict[str, List[dict]], fit_nodes: Sequence[dict] = (),
                 usage: Optional[Dict[str, Dict[str, int]]] = None, requested: Optional[Dict[str, Dict[str, int]]] = None) -> None:
        self.nodes = {meta(n)["name"]: n for n in nodes}
        self.capacity = {name: node_capacity(n) for name, n in self.nodes.items()}
        self.requested = dict(requested or {})
        for name in set(self.nodes) | {meta(n)["name"] for n in fit_nodes}:
            if name not in self.requested:
                self.requested[name] = node_usage(pods_by_node.get(name, []))
        self.usage = usage if usage is not None else {name: dict(self.requested[name]) for name in self.nodes}
        self.pods_by_node = pods_by_node
        self.fit_nodes = list(fit_nodes)
        self.fit_usage = {meta(n)["name"]: self.requested[meta(n)["name"]] for n in self.fit_nodes}
        self.fit_capacity = {meta(n)["name"]: allocatable(n) for n in self.fit_nodes}

    def fit_errors(self, pod: dict, source: str) -> Optional[Dict[str, str]]:
        """PodFitsAnyOtherNode: None when the Pod fits another node, else NodeFit's error per node tried."""
        errors = {}
        for node in self.fit_nodes:
            name = meta(node)["name"]
            if name == source:
                continue
            error = node_fit_error(pod, node, self.pods_by_node.get(name, []), self.fit_usage[name], self.fit_capacity[name])
            if error is None:
                return None
            errors[name] = error
        return errors


def filter_reason(pod: dict, evictor: dict) -> Optional[str]:
    """Why DefaultEvictor's Filter would not pass `pod` (LowNodeUtilization's removable Pods); None when it would. The
    evict annotation bypasses this Filter only: the checks of the eviction loop (`loop_reason`) still apply."""
    if EVICT_ANNOTATION in annotations(pod):
        return None
    if evictor.get("noEvictionPolicy") == "Mandatory" and NO_EVICTION_ANNOTATION in annotations(pod):
        return "pod has the prefer-no-eviction annotation (noEvictionPolicy: Mandatory)"   # e.g. a cooldown mark
    if meta(pod).get("deletionTimestamp"):
        return "pod is terminating"
    if annotations(pod).get(IN_PROGRESS_ANNOTATION):
        return "eviction in background already requested"
    if MIRROR_ANNOTATION in annotations(pod):
        return "pod is a mirror pod"
    selector = evictor.get("labelSelector")
    if selector is not None and not match_label_selector(selector, labels(pod)):
        return "labels do not match DefaultEvictor labelSelector"
    owners = meta(pod).get("ownerReferences") or []
    if not owners:
        return "pod does not have any ownerRefs"
    active = protections(evictor)
    if "DaemonSetPods" in active and any(o.get("kind") == "DaemonSet" for o in owners):
        return "pod is a DaemonSet pod (DaemonSetPods)"
    if "SystemCriticalPods" in active and priority(pod) >= SYSTEM_CRITICAL_PRIORITY:
        return "pod is system critical (SystemCriticalPods)"
    if "PodsWithLocalStorage" in active and any("emptyDir" in v or "hostPath" in v for v in _volumes(pod)):
        return "pod has local storage (PodsWithLocalStorage)"
    if "PodsWithPVC" in active and any("persistentVolumeClaim" in v or "ephemeral" in v for v in _volumes(pod)):
        return "pod has a PVC (PodsWithPVC)"
    threshold = (evictor.get("priorityThreshold") or {}).get("value")
    if isinstance(threshold, int) and priority(pod) >= threshold:
        return "pod priority is at or above priorityThreshold"
    return None


def taint_text(taint: dict) -> str:
    value = taint.get("value")
    return "{0}{1}:{2}".format(taint.get("key") or "", "=" + value if value else "", taint.get("effect") or "")


def untolerated_taints(pod: dict, destination_taints: Dict[str, List[dict]]) -> Optional[Dict[str, List[str]]]:
    """utils.PodToleratesTaints over the underutilized nodes' `spec.taints`, every effect counted (PreferNoSchedule
    too): None when, for at least one of them, the Pod has at least as many tolerations as the node has taints
    (upstream's count check) and tolerates each; else per node what it does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    missing = {}
    for name, taints in destination_taints.items():
        untolerated = [taint_text(t) for t in taints if not any(tolerates(tol, t) for tol in tolerations)]
        if not untolerated and len(tolerations) >= len(taints):
            return None
        missing[name] = untolerated or ["{0} tolerations for {1} taints (upstream counts them first)".format(len(tolerations), len(taints))]
    return missing


def loop_reason(pod: dict, evictor: dict, excluded: Sequence[str], state: State, node: str,
                destination_taints: Dict[str, List[dict]]) -> Tuple[Optional[str], Dict[str, Any]]:
    """Why evictPods skips a Pod that passed the Filter, in upstream's order: the underutilized nodes' taints, then
    the PreEvictionFilter with the namespace exclusion (the excluded namespaces, then nodeFit); (None, {}) when none
    does. The second value has the details a candidate shows (`untolerated`, `node_fit`)."""
    untolerated = untolerated_taints(pod, destination_taints)
    if untolerated is not None:
        return UNTOLERATED, {"untolerated": untolerated}
    if meta(pod).get("namespace") in excluded:
        return EXCLUDED, {}
    if evictor.get("nodeFit"):
        errors = state.fit_errors(pod, node)
        if errors is not None:
            return NOT_FIT, {"node_fit": errors}   # upstream's V(4) "Pod does not fit on node" errors
    return None, {}


def _fit_nodes(evictor: dict, nodes: List[dict]) -> List[dict]:
    try:
        return select_nodes(evictor.get("nodeSelector"), nodes)
    except ValueError:
        return []   # upstream: "unable to list ready nodes", and no Pod passes nodeFit


def not_evaluated(profile: dict) -> List[str]:
    """The profile's plugin arguments, set to a value that changes what upstream does, that the planner does not
    evaluate, as `Plugin.path` (an active protection as `DefaultEvictor.podProtections[Name]`)."""
    evictor = plugin_config(profile, DEFAULT_EVICTOR) or {}
    pvc_config = ((evictor.get("podProtections") or {}).get("config") or {}).get("PodsWithPVC") or {}
    active = protections(evictor)
    checks = (
        ("namespaceLabelSelector", bool((evictor.get("namespaceLabelSelector") or {}).get("matchLabels"))),
        ("minReplicas", isinstance(evictor.get("minReplicas"), int) and evictor["minReplicas"] > 1),
        ("minPodAge", evictor.get("minPodAge") is not None),
        ("priorityThreshold.name", bool((evictor.get("priorityThreshold") or {}).get("name"))),
        ("podProtections[PodsWithoutPDB]", "PodsWithoutPDB" in active),
        ("podProtections[PodsWithResourceClaims]", "PodsWithResourceClaims" in active),
        ("podProtections.config.PodsWithPVC.protectedStorageClasses", "PodsWithPVC" in active and bool(pvc_config.get("protectedStorageClasses"))),
    )
    return ["{0}.{1}".format(DEFAULT_EVICTOR, path) for path, applies in checks if applies]


# ------------------------------------------------------------------------------------------ plan
def _round(percent: Dict[str, float]) -> Dict[str, float]:
    return {r: round(v, 2) for r, v in percent.items()}


def _limit(*values: Any) -> Optional[int]:
    present = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return min(present) if present else None


def _stop_before_eviction(selected: List[dict], low: List[str], high: List[str], args: dict) -> Optional[str]:
    """LowNodeUtilization's early exits, in upstream's order and words."""
    if not low:
        return NO_UNDER
    if len(low) <= (args.get("numberOfNodes") or 0):
        return FEW_UNDER
    if len(low) == len(selected):
        return ALL_UNDER
    if not high:
        return NONE_OVER
    return None


def _empty_result(profile: dict) -> Dict[str, Any]:
    return {"profile": profile.get("name"), "usage_source": None, "nodes": [], "candidates": [], "evictions": [], "skipped": [],
            "warnings": [], "stop_reason": None, "headroom": {}, "total_available": {}, "not_evaluated": not_evaluated(profile)}


def plan_profile(policy: dict, profile: dict, nodes: List[dict], pods: List[dict], counters: dict, actual_usage: Optional[dict] = None) -> dict:
    """The plan of one profile's LowNodeUtilization; `counters` (total, per node, per namespace) carry over between profiles."""
    counters.setdefault("nodes", {})
    evictor = plugin_config(profile, DEFAULT_EVICTOR) or {}
    args = plugin_config(profile, LOW_NODE_UTILIZATION) or {}
    thresholds = dict(args.get("thresholds") or {})
    targets = dict(args.get("targetThresholds") or {})
    resources = list(thresholds)
    deviation = bool(args.get("useDeviationThresholds"))
    result = _empty_result(profile)
    source, problem = usage_source(args)
    result["usage_source"] = source
    if problem:
        result["stop_reason"] = CANNOT_START + problem
        return result
    if source != REQUESTS:
        missing = actual_usage_problem(source, args, actual_usage)
        if missing:
            result["stop_reason"] = NO_USAGE + missing
            return result
    selected = select_nodes(policy.get("nodeSelector"), nodes)
    pods_by_node = active_pods(pods)
    counted = counted_resources(source, resources)
    fit_nodes = _fit_nodes(evictor, nodes)
    requested = {meta(n)["name"]: node_usage(pods_by_node.get(meta(n)["name"], [])) for n in selected + fit_nodes}
    usage, error = node_usages(source, selected, pods_by_node, counted, actual_usage, requested)
    if error:
        result["stop_reason"] = TOO_FEW_NODES if len(selected) < 2 else USAGE_ERROR + error
        return result
    state = State(selected, pods_by_node, fit_nodes, usage, requested)
    percents = {name: known_percentages(usage[name], state.capacity[name], resources) for name in state.nodes}
    if deviation:
        low_threshold, high_threshold = deviation_thresholds(percents, thresholds, targets)
    else:
        low_threshold, high_threshold = thresholds, targets
    categories: Dict[str, str] = {}
    for node in selected:
        name = meta(node)["name"]
        categories[name] = classify(percents[name], low_threshold, high_threshold, not (node.get("spec") or {}).get("unschedulable"))
        row = {"name": name, "usage_percent": _round(percentages(usage[name], state.capacity[name], resources)), "category": categories[name],
               "requests_percent": _round(percentages(requested[name], state.capacity[name], RESOURCES)),
               "usage_source": source}
        if deviation:
            row["thresholds_percent"] = {"low": _round(low_threshold), "high": _round(high_threshold)}
        result["nodes"].append(row)
    low = [n for n in categories if categories[n] == UNDER]
    high = [n for n in categories if categories[n] == OVER]
    result["stop_reason"] = TOO_FEW_NODES if len(selected) < 2 else _stop_before_eviction(selected, low, high, args)
    if result["stop_reason"]:
        return result
    available = {n: capped_capacity(state.capacity[n], high_threshold, counted) for n in low + high}
    room = {r: sum(available[n][r] - usage[n][r] for n in low) for r in counted}
    high.sort(key=lambda n: (-sum(usage[n].values()), n))
    for node in high:
        _evict_from_node(node, policy, args, evictor, state, available[node], room, counters, result,
                         {"source": source, "counted": counted, "actual": actual_usage, "low": low, "deviation": deviation,
                          "thresholds": (low_threshold, high_threshold), "resources": resources})
    result["headroom"] = {r: round(room[r], 2) for r in resources}
    result["total_available"] = dict(room)
    return result


def _stop_condition(usage: Dict[str, int], available: Dict[str, int], room: Dict[str, int]) -> Optional[str]:
    """continueEvictionCond, as the reason to stop: no usage above the capped capacity, or some room used up."""
    if not any(available.get(r, 0) < value for r, value in usage.items()):
        return NOT_ABOVE
    if any(value <= 0 for value in room.values()):
        return NO_ROOM
    return None


def _evict_from_node(node: str, policy: dict, args: dict, evictor: dict, state: State, available: Dict[str, int], room: Dict[str, int],
                     counters: dict, result: dict, mode: dict) -> None:
    """evictPods for one source node: the candidates with their reasons, the planned evictions and why the node was left."""
    source, counted = mode["source"], mode["counted"]
    unconstrained = source == PROMETHEUS
    node_limit = (args.get("evictionLimits") or {}).get("node")
    node_limit = node_limit if isinstance(node_limit, int) and not isinstance(node_limit, bool) else None
    excluded = list((args.get("evictableNamespaces") or {}).get("exclude") or [])
    destination_taints = {n: list((state.nodes[n].get("spec") or {}).get("taints") or []) for n in mode["low"]}
    on_node = sorted(state.pods_by_node.get(node, []), key=lambda p: (meta(p).get("namespace") or "", meta(p).get("name") or ""))
    passed = []    # the Pods that pass DefaultEvictor's Filter: upstream's removable Pods
    skip: Dict[int, Optional[str]] = {}
    for pod in on_node:
        reason = filter_reason(pod, evictor)
        details: Dict[str, Any] = {}
        if reason is None:
            passed.append(pod)
            reason, details = loop_reason(pod, evictor, excluded, state, node, destination_taints)
            skip[id(pod)] = reason
        result["candidates"].append(dict({"node": node, "namespace": meta(pod).get("namespace"), "pod": meta(pod).get("name"),
                                          "vm": vm_name(pod), "removable": reason is None, "reason": reason}, **details))
    rank = {id(p): (priority(p), QOS_RANK[qos_class(p)]) for p in passed}
    passed.sort(key=lambda p: rank[id(p)])
    evictable = [p for p in passed if skip[id(p)] is None]
    evicted_here = 0
    usage = state.usage[node]
    # upstream checks the stop conditions before the first Pod whenever a Pod passes the evictor's Filter (the taints,
    # a pre-eviction filter and the namespace exclusion come later), so a node of unfit Pods says why it was left
    stop = _stop_condition(usage, available, room) if passed else None
    for pod in passed if stop is None else []:
        if node_limit is not None and evicted_here >= node_limit:
            stop = "per-node eviction limit reached"   # evictionLimits.node, checked first for each Pod
            break
        if skip[id(pod)] is not None:
            continue   # its candidate says why: the taints, the excluded namespaces, nodeFit
        use = pod_usage(source, pod, counted, mode["actual"])
        if use is None:
            result["skipped"].append({"node": node, "namespace": meta(pod).get("namespace"), "pod": meta(pod).get("name"),
                                      "vm": vm_name(pod), "reason": NO_POD_USAGE})
            continue
        stop = _limit_reached(policy, counters, node, meta(pod).get("namespace"))
        if stop == NAMESPACE_LIMIT:
            stop = None
            continue
        if stop:
            break
        _plan_eviction(pod, node, use, evictable, rank, unconstrained, counters, result)
        if unconstrained and node_limit is None:
            stop = SINGLE_EVICTION
            break
        evicted_here += 1
        if unconstrained:
            continue   # upstream neither updates the usage nor checks the stop conditions again
        warning = flapping(state, node, mode["low"], pod, use, mode["thresholds"], mode["resources"], mode["deviation"])
        if warning:
            result["warnings"].append(warning)
        for resource in room:
            taken = 1 if resource == "pods" else use.get(resource, 0)
            usage[resource] = usage.get(resource, 0) - taken
            room[resource] -= taken
        stop = _stop_condition(usage, available, room)
        if stop:
            break
    result.setdefault("node_stop", {})[node] = stop


def _limit_reached(policy: dict, counters: dict, node: str, namespace: Optional[str]) -> Optional[str]:
    """The pod evictor's limits in EvictPod's order (total, per node, per namespace), counted over the whole run."""
    total_limit = _limit(policy.get("maxNoOfPodsToEvictTotal"))
    if total_limit is not None and counters["total"] >= total_limit:
        return "maxNoOfPodsToEvictTotal reached"
    per_node = _limit(policy.get("maxNoOfPodsToEvictPerNode"))
    if per_node is not None and counters["nodes"].get(node, 0) >= per_node:
        return "per-node eviction limit reached"
    per_namespace = _limit(policy.get("maxNoOfPodsToEvictPerNamespace"))
    if per_namespace is not None and counters["namespaces"].get(namespace, 0) >= per_namespace:
        return NAMESPACE_LIMIT
    return None


def _plan_eviction(pod: dict, node: str, use: Dict[str, int], evictable: List[dict], rank: Dict[int, Tuple[int, int]], unconstrained: bool,
                   counters: dict, result: dict) -> None:
    """Record the eviction of `pod`, with the Pods of its namespace ranked the same after it (`alternatives`: the
    descheduler's order among equal keys is not defined), and count it against the run's limits."""
    namespace = meta(pod).get("namespace")
    after = evictable[next(index for index, other in enumerate(evictable) if other is pod) + 1:]
    same = [p for p in after if rank[id(p)] == rank[id(pod)] and meta(p).get("namespace") == namespace]
    result["evictions"].append({"node": node, "namespace": namespace, "pod": meta(pod).get("name"), "vm": vm_name(pod),
                                "requests": pod_requests(pod), "usage": None if unconstrained else use,
                                "alternatives": [meta(p).get("name") for p in same], "alternative_vms": [vm_name(p) for p in same]})
    counters["total"] += 1
    counters["nodes"][node] = counters["nodes"].get(node, 0) + 1
    counters["namespaces"][namespace] = counters["namespaces"].get(namespace, 0) + 1


def flapping(state: State, source: str, low: List[str], pod: dict, use: Dict[str, int], thresholds: Tuple[dict, dict],
             resources: Sequence[str], deviation: bool = False) -> Optional[dict]:
    """A warning when moving `pod` (its usage `use`) from `source` to the emptiest underutilized node would swap their
    categories under the (low, high) `thresholds`."""
    low_threshold, high_threshold = thresholds
    destination = min(low, key=lambda n: (sum(percentages(state.usage[n], state.capacity[n], resources).values()), n))
    after_source = {r: state.usage[source].get(r, 0) - (1 if r == "pods" else use.get(r, 0)) for r in resources}
    after_destination = {r: state.usage[destination].get(r, 0) + (1 if r == "pods" else use.get(r, 0)) for r in resources}
    source_percent = percentages(after_source, state.capacity[source], resources)
    destination_percent = percentages(after_destination, state.capacity[destination], resources)
    source_under = all(source_percent[r] <= low_threshold[r] for r in resources)
    destination_over = any(destination_percent[r] > high_threshold[r] for r in resources)
    if not (source_under or destination_over):
        return None
    moved = dict(use, pods=1)
    share = {r: 100.0 * moved.get(r, 0) / state.capacity[destination][r] for r in resources if state.capacity[destination].get(r)}
    needed = {r: int(math.floor(v)) + 1 for r, v in share.items() if v > 0}
    what = []
    if source_under:
        what.append("{0} becomes underutilized".format(source))
    if destination_over:
        what.append("{0} becomes overutilized".format(destination))
    gaps = ", ".join("{0} {1} points".format(r, v) for r, v in sorted(needed.items()))
    keep = ("Keep the band around the mean (thresholds plus targetThresholds) wider than one VM's share" if deviation
            else "Keep targetThresholds above thresholds by more than one VM's share")
    message = ("moving {0} from {1} to {2}: {3}, so the next run moves it back. {4}: {5}.".format(
        vm_name(pod) or meta(pod).get("name"), source, destination, " and ".join(what), keep, gaps))
    return {"code": "flapping", "pod": meta(pod).get("name"), "vm": vm_name(pod), "source": source, "destination": destination,
            "gap_needed": needed, "message": message}


def plan_policy(policy: dict, nodes: List[dict], pods: List[dict], vm_profiles: Sequence[str] = (), actual_usage: Optional[dict] = None) -> dict:
    """The plan of every profile with LowNodeUtilization in balance, in policy order, sharing the run's limits.
    `actual_usage`: what metrics.read_actual_usage read, for a profile whose metricsUtilization asks for it.

    `evictions` of the result is the run's whole list; `nodes`, `stop_reason` and `usage_source` are the first such
    profile's."""
    counters: Dict[str, Any] = {"total": 0, "nodes": {}, "namespaces": {}}
    profiles = []
    for profile in policy.get("profiles") or []:
        if isinstance(profile, dict) and LOW_NODE_UTILIZATION in enabled_plugins(profile, "balance"):
            profiles.append(plan_profile(policy, profile, nodes, pods, counters, actual_usage))
    first = profiles[0] if profiles else {"nodes": [], "stop_reason": "no profile enables LowNodeUtilization in balance", "usage_source": None}
    evictions = [e for p in profiles for e in p["evictions"]]
    return {"profiles": profiles, "nodes": first["nodes"], "stop_reason": first["stop_reason"], "usage_source": first["usage_source"],
            "evictions": evictions, "vms": [e["vm"] for e in evictions], "warnings": [w for p in profiles for w in p["warnings"]],
            "skipped": [s for p in profiles for s in p.get("skipped", [])], "vm_profiles": list(vm_profiles)}
