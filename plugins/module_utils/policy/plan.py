# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What LowNodeUtilization would do with a policy now, by requests (written from the upstream facts in
shared/reference/upstream-facts.md, descheduler v0.36):

- usage = sum of the requests of the node's non-finished Pods / node allocatable, per resource, in percent;
- underutilized: every threshold resource at or below its threshold (an unschedulable node never is);
  overutilized: any resource above its target threshold; otherwise appropriately utilized;
- source nodes by usage, highest first (the sum of the threshold resources' percentages); on a node the
  removable Pods lowest priority first, then BestEffort < Burstable < Guaranteed;
- a node is left when it is no longer above target, when the headroom of the underutilized nodes (target
  minus usage, per resource) is used up, or at its limit (`maxNoOfPodsToEvictPerNode`,
  `evictionLimits.node`); the run stops at `maxNoOfPodsToEvictTotal`; a Pod over its namespace's limit is
  skipped;
- DefaultEvictor: the evict annotation bypasses every filter; otherwise bare and mirror Pods, Pods with a
  deletionTimestamp or an eviction already in progress, the active protections (local storage, PVC,
  system-critical, DaemonSet), the label selector, the excluded namespaces, the priority threshold and
  nodeFit (`kube/node_fit.py`: another Ready node that the evictor's own `nodeSelector` selects matches the
  Pod's node selector and required node affinity, has no NoSchedule/NoExecute taint the Pod does not
  tolerate, room for every resource the Pod requests, is not cordoned and holds no Pod the Pod's required
  anti-affinity excludes), judged on the Pods as they are before the run;
- QoS class as the descheduler's GetPodQOS (`kube/qos.py`: cpu and memory only, zero counts as unset).

Simplified: what the planner does not evaluate is listed per field in each profile's `not_evaluated`
(`not_evaluated()`): DefaultEvictor `namespaceLabelSelector`, `minReplicas` above 1, `minPodAge`,
`priorityThreshold.name`, `noEvictionPolicy: Mandatory`, the active `PodsWithoutPDB` and
`PodsWithResourceClaims` protections and PodsWithPVC's `protectedStorageClasses` (every PVC protects here);
LowNodeUtilization `useDeviationThresholds` and `metricsUtilization`. With equal sort keys the descheduler's
order is not defined, so each planned eviction lists its equally ranked `alternatives`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import protections
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import annotations, labels, meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import NOT_FIT, allocatable, is_ready, node_fit_error, node_usage
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.qos import pod_qos as qos_class
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    DEFAULT_EVICTOR,
    LOW_NODE_UTILIZATION,
    enabled_plugins,
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
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
IN_PROGRESS_ANNOTATION = "descheduler.alpha.kubernetes.io/eviction-in-progress"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SYSTEM_CRITICAL_PRIORITY = 2000000000
QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}

NO_UNDER = "No node is underutilized, nothing to do here, you might tune your thresholds further"
ALL_UNDER = "All nodes are underutilized, nothing to do here"
NONE_OVER = "All nodes are under target utilization, nothing to do here"
FEW_UNDER = "Number of nodes underutilized is less or equal than NumberOfNodes, nothing to do here"
TOO_FEW_NODES = "The cluster size is 0 or 1 meaning eviction causes service disruption or degradation. So aborting.."


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


def percentages(usage: Dict[str, int], capacity: Dict[str, int], resources: Sequence[str]) -> Dict[str, float]:
    return {r: (100.0 * usage.get(r, 0) / capacity[r]) if capacity.get(r) else 0.0 for r in resources}


def classify(percent: Dict[str, float], thresholds: Dict[str, float], targets: Dict[str, float], schedulable: bool) -> str:
    if schedulable and all(percent[r] <= thresholds[r] for r in thresholds):
        return UNDER
    if any(percent[r] > targets[r] for r in targets):
        return OVER
    return APPROPRIATE


# ------------------------------------------------------------------------------------------ pods
def priority(pod: dict) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) else 0


def vm_name(pod: dict) -> Optional[str]:
    return annotations(pod).get("kubevirt.io/domain") or labels(pod).get("vm.kubevirt.io/name")


def _volumes(pod: dict) -> List[dict]:
    return (pod.get("spec") or {}).get("volumes") or []


class State:
    """Per-node capacity and usage during the plan (usage changes as Pods are planned away), and the view nodeFit
    judges on: the Ready nodes the evictor's `nodeSelector` selects with their Pods before the run (an evicted
    virt-launcher Pod stays on its node until its migration ends)."""

    def __init__(self, nodes: List[dict], pods_by_node: Dict[str, List[dict]], fit_nodes: Sequence[dict] = ()) -> None:
        self.nodes = {meta(n)["name"]: n for n in nodes}
        self.capacity = {name: allocatable(n) for name, n in self.nodes.items()}
        self.usage = {name: node_usage(pods_by_node.get(name, [])) for name in self.nodes}
        self.pods_by_node = pods_by_node
        self.fit_nodes = list(fit_nodes)
        self.fit_usage = {meta(n)["name"]: node_usage(pods_by_node.get(meta(n)["name"], [])) for n in self.fit_nodes}
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


def filter_reason(pod: dict, evictor: dict, excluded: Sequence[str], state: State, node: str) -> Optional[str]:
    """Why DefaultEvictor (and LowNodeUtilization's namespace filter) would not evict `pod`; None when it would."""
    if EVICT_ANNOTATION in annotations(pod):
        return None
    if meta(pod).get("deletionTimestamp"):
        return "pod is terminating"
    if annotations(pod).get(IN_PROGRESS_ANNOTATION):
        return "eviction in background already requested"
    if MIRROR_ANNOTATION in annotations(pod):
        return "pod is a mirror pod"
    if meta(pod).get("namespace") in excluded:
        return "namespace is excluded (evictableNamespaces.exclude)"
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
    if evictor.get("nodeFit") and state.fit_errors(pod, node) is not None:
        return NOT_FIT
    return None


def _fit_nodes(evictor: dict, nodes: List[dict]) -> List[dict]:
    try:
        return select_nodes(evictor.get("nodeSelector"), nodes)
    except ValueError:
        return []   # upstream: "unable to list ready nodes", and no Pod passes nodeFit


def not_evaluated(profile: dict) -> List[str]:
    """The profile's plugin arguments, set to a value that changes what upstream does, that the planner does not
    evaluate, as `Plugin.path` (an active protection as `DefaultEvictor.podProtections[Name]`)."""
    evictor = plugin_config(profile, DEFAULT_EVICTOR) or {}
    args = plugin_config(profile, LOW_NODE_UTILIZATION) or {}
    pvc_config = ((evictor.get("podProtections") or {}).get("config") or {}).get("PodsWithPVC") or {}
    active = protections(evictor)
    checks = (
        ("namespaceLabelSelector", bool((evictor.get("namespaceLabelSelector") or {}).get("matchLabels"))),
        ("minReplicas", isinstance(evictor.get("minReplicas"), int) and evictor["minReplicas"] > 1),
        ("minPodAge", evictor.get("minPodAge") is not None),
        ("priorityThreshold.name", bool((evictor.get("priorityThreshold") or {}).get("name"))),
        ("noEvictionPolicy", evictor.get("noEvictionPolicy") == "Mandatory"),
        ("podProtections[PodsWithoutPDB]", "PodsWithoutPDB" in active),
        ("podProtections[PodsWithResourceClaims]", "PodsWithResourceClaims" in active),
        ("podProtections.config.PodsWithPVC.protectedStorageClasses", "PodsWithPVC" in active and bool(pvc_config.get("protectedStorageClasses"))),
    )
    found = ["{0}.{1}".format(DEFAULT_EVICTOR, path) for path, applies in checks if applies]
    found.extend("{0}.{1}".format(LOW_NODE_UTILIZATION, path) for path in ("useDeviationThresholds", "metricsUtilization") if args.get(path))
    return found


# ------------------------------------------------------------------------------------------ plan
def _round(percent: Dict[str, float]) -> Dict[str, float]:
    return {r: round(v, 2) for r, v in percent.items()}


def _limit(*values: Any) -> Optional[int]:
    present = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return min(present) if present else None


def plan_profile(policy: dict, profile: dict, nodes: List[dict], pods: List[dict], counters: dict) -> dict:
    """The plan of one profile's LowNodeUtilization; `counters` (total, per namespace) carry over between profiles."""
    evictor = plugin_config(profile, DEFAULT_EVICTOR) or {}
    args = plugin_config(profile, LOW_NODE_UTILIZATION) or {}
    thresholds = dict(args.get("thresholds") or {})
    targets = dict(args.get("targetThresholds") or {})
    resources = list(thresholds)
    selected = select_nodes(policy.get("nodeSelector"), nodes)
    pods_by_node = active_pods(pods)
    state = State(selected, pods_by_node, _fit_nodes(evictor, nodes))
    result: Dict[str, Any] = {"profile": profile.get("name"), "nodes": [], "candidates": [], "evictions": [], "warnings": [],
                              "stop_reason": None, "headroom": {}, "not_evaluated": not_evaluated(profile)}
    categories: Dict[str, str] = {}
    percents: Dict[str, Dict[str, float]] = {}
    for node in selected:
        name = meta(node)["name"]
        percents[name] = percentages(state.usage[name], state.capacity[name], resources)
        categories[name] = classify(percents[name], thresholds, targets, not (node.get("spec") or {}).get("unschedulable"))
        result["nodes"].append({"name": name, "usage_percent": _round(percents[name]), "category": categories[name],
                                "requests_percent": _round(percentages(state.usage[name], state.capacity[name], RESOURCES))})
    low = [n for n in categories if categories[n] == UNDER]
    high = [n for n in categories if categories[n] == OVER]
    if len(selected) < 2:
        result["stop_reason"] = TOO_FEW_NODES
    elif not low:
        result["stop_reason"] = NO_UNDER
    elif len(low) <= (args.get("numberOfNodes") or 0):
        result["stop_reason"] = FEW_UNDER
    elif len(low) == len(selected):
        result["stop_reason"] = ALL_UNDER
    elif not high:
        result["stop_reason"] = NONE_OVER
    if result["stop_reason"]:
        return result
    headroom = {r: sum(targets[r] * state.capacity[n].get(r, 0) / 100.0 - state.usage[n].get(r, 0) for n in low) for r in resources}
    per_node_limit = _limit(policy.get("maxNoOfPodsToEvictPerNode"), (args.get("evictionLimits") or {}).get("node"))
    ns_limit = _limit(policy.get("maxNoOfPodsToEvictPerNamespace"))
    total_limit = _limit(policy.get("maxNoOfPodsToEvictTotal"))
    excluded = list((args.get("evictableNamespaces") or {}).get("exclude") or [])
    high.sort(key=lambda n: (-sum(percents[n].values()), n))
    for node in high:
        on_node = sorted(pods_by_node.get(node, []), key=lambda p: (meta(p).get("namespace") or "", meta(p).get("name") or ""))
        removable = []
        for pod in on_node:
            reason = filter_reason(pod, evictor, excluded, state, node)
            candidate = {"node": node, "namespace": meta(pod).get("namespace"), "pod": meta(pod).get("name"),
                         "vm": vm_name(pod), "removable": reason is None, "reason": reason}
            if reason == NOT_FIT:
                candidate["node_fit"] = state.fit_errors(pod, node)   # upstream's V(4) "Pod does not fit on node" errors
            result["candidates"].append(candidate)
            if reason is None:
                removable.append(pod)
        removable.sort(key=lambda p: (priority(p), QOS_RANK[qos_class(p)]))
        evicted_here = 0
        stop = None
        for index, pod in enumerate(removable):
            current = percentages(state.usage[node], state.capacity[node], resources)
            if not any(current[r] > targets[r] for r in resources):
                stop = "node is no longer above target utilization"
                break
            if any(headroom[r] <= 0 for r in resources):
                stop = "no headroom left on the underutilized nodes"
                break
            if total_limit is not None and counters["total"] >= total_limit:
                stop = "maxNoOfPodsToEvictTotal reached"
                break
            if per_node_limit is not None and evicted_here >= per_node_limit:
                stop = "per-node eviction limit reached"
                break
            namespace = meta(pod).get("namespace")
            if ns_limit is not None and counters["namespaces"].get(namespace, 0) >= ns_limit:
                continue
            key = (priority(pod), QOS_RANK[qos_class(pod)])
            alternatives = [meta(p).get("name") for p in removable[index + 1:]
                            if (priority(p), QOS_RANK[qos_class(p)]) == key and meta(p).get("namespace") == namespace]
            requests = pod_requests(pod)
            result["evictions"].append({"node": node, "namespace": namespace, "pod": meta(pod).get("name"), "vm": vm_name(pod),
                                        "requests": requests, "alternatives": alternatives,
                                        "alternative_vms": [vm_name(p) for p in removable[index + 1:] if meta(p).get("name") in alternatives]})
            warning = flapping(state, node, low, pod, thresholds, targets, resources)
            if warning:
                result["warnings"].append(warning)
            for resource, value in requests.items():
                state.usage[node][resource] = state.usage[node].get(resource, 0) - value
                if resource in headroom:
                    headroom[resource] -= value
            counters["total"] += 1
            counters["namespaces"][namespace] = counters["namespaces"].get(namespace, 0) + 1
            evicted_here += 1
        result.setdefault("node_stop", {})[node] = stop
    result["headroom"] = {r: round(v, 2) for r, v in headroom.items()}
    return result


def flapping(state: State, source: str, low: List[str], pod: dict, thresholds: dict, targets: dict, resources: Sequence[str]) -> Optional[dict]:
    """A warning when moving `pod` from `source` to the emptiest underutilized node would swap their categories."""
    requests = pod_requests(pod)
    destination = min(low, key=lambda n: (sum(percentages(state.usage[n], state.capacity[n], resources).values()), n))
    after_source = {r: state.usage[source].get(r, 0) - requests.get(r, 0) for r in resources}
    after_destination = {r: state.usage[destination].get(r, 0) + requests.get(r, 0) for r in resources}
    source_percent = percentages(after_source, state.capacity[source], resources)
    destination_percent = percentages(after_destination, state.capacity[destination], resources)
    source_under = all(source_percent[r] <= thresholds[r] for r in resources)
    destination_over = any(destination_percent[r] > targets[r] for r in resources)
    if not (source_under or destination_over):
        return None
    share = {r: 100.0 * requests.get(r, 0) / state.capacity[destination][r] for r in resources if state.capacity[destination].get(r)}
    needed = {r: int(math.floor(v)) + 1 for r, v in share.items() if v > 0}
    what = []
    if source_under:
        what.append("{0} becomes underutilized".format(source))
    if destination_over:
        what.append("{0} becomes overutilized".format(destination))
    gaps = ", ".join("{0} {1} points".format(r, v) for r, v in sorted(needed.items()))
    message = ("moving {0} from {1} to {2}: {3}, so the next run moves it back. Keep targetThresholds above thresholds by more than one "
               "VM's share: {4}.".format(vm_name(pod) or meta(pod).get("name"), source, destination, " and ".join(what), gaps))
    return {"code": "flapping", "pod": meta(pod).get("name"), "vm": vm_name(pod), "source": source, "destination": destination,
            "gap_needed": needed, "message": message}


def plan_policy(policy: dict, nodes: List[dict], pods: List[dict], vm_profiles: Sequence[str] = ()) -> dict:
    """The plan of every profile with LowNodeUtilization in balance, in policy order, sharing the run's limits.

    `evictions` of the result is the run's whole list; `nodes` and `stop_reason` are the first such profile's."""
    counters: Dict[str, Any] = {"total": 0, "namespaces": {}}
    profiles = []
    for profile in policy.get("profiles") or []:
        if isinstance(profile, dict) and LOW_NODE_UTILIZATION in enabled_plugins(profile, "balance"):
            profiles.append(plan_profile(policy, profile, nodes, pods, counters))
    first = profiles[0] if profiles else {"nodes": [], "stop_reason": "no profile enables LowNodeUtilization in balance"}
    evictions = [e for p in profiles for e in p["evictions"]]
    return {"profiles": profiles, "nodes": first["nodes"], "stop_reason": first["stop_reason"], "evictions": evictions,
            "vms": [e["vm"] for e in evictions], "warnings": [w for p in profiles for w in p["warnings"]],
            "vm_profiles": list(vm_profiles)}
