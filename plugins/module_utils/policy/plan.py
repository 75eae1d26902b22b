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
  nodeFit (requests fit on another selected node that is schedulable, ready and untainted for the Pod).

Simplified: nodeFit checks requests, node selector, unschedulable and NoSchedule taints, not affinity;
`namespaceLabelSelector`, `minReplicas`, `minPodAge`, `PodsWithoutPDB` and `PodsWithResourceClaims` are not
evaluated (reported in `not_evaluated`); with equal sort keys the descheduler's order is not defined, so
each planned eviction lists its equally ranked `alternatives`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import protections
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import annotations, labels, meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    DEFAULT_EVICTOR,
    LOW_NODE_UTILIZATION,
    enabled_plugins,
    plugin_config,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import amount, pod_requests
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
def node_ready(node: dict) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def select_nodes(policy: dict, nodes: List[dict]) -> List[dict]:
    """The Ready nodes the policy's nodeSelector selects (all Ready nodes without one)."""
    requirements = parse_label_selector(policy.get("nodeSelector") or "")
    return [n for n in nodes if node_ready(n) and matches_selector_string(requirements, labels(n))]


def active_pods(pods: List[dict]) -> Dict[str, List[dict]]:
    by_node: Dict[str, List[dict]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            by_node.setdefault(node, []).append(pod)
    return by_node


def allocatable(node: dict) -> Dict[str, int]:
    result = {}
    for resource, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            result[resource] = amount(resource, value)
        except ValueError:
            continue
    return result


def used(pods: List[dict]) -> Dict[str, int]:
    total: Dict[str, int] = {}
    for pod in pods:
        for resource, value in pod_requests(pod).items():
            total[resource] = total.get(resource, 0) + value
    return total


def percentages(usage: Dict[str, int], capacity: Dict[str, int], resources: Sequence[str]) -> Dict[str, float]:
    return {r: (100.0 * usage.get(r, 0) / capacity[r]) if capacity.get(r) else 0.0 for r in resources}


def classify(percent: Dict[str, float], thresholds: Dict[str, float], targets: Dict[str, float], schedulable: bool) -> str:
    if schedulable and all(percent[r] <= thresholds[r] for r in thresholds):
        return UNDER
    if any(percent[r] > targets[r] for r in targets):
        return OVER
    return APPROPRIATE


# ------------------------------------------------------------------------------------------ pods
def qos_class(pod: dict) -> str:
    containers = ((pod.get("spec") or {}).get("containers") or []) + ((pod.get("spec") or {}).get("initContainers") or [])
    requests_seen = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        req, lim = resources.get("requests") or {}, resources.get("limits") or {}
        if req or lim:
            requests_seen = True
        for resource in ("cpu", "memory"):
            if resource not in lim or (resource in req and str(req[resource]) != str(lim[resource])):
                guaranteed = False
    if not requests_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def priority(pod: dict) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) else 0


def vm_name(pod: dict) -> Optional[str]:
    return annotations(pod).get("kubevirt.io/domain") or labels(pod).get("vm.kubevirt.io/name")


def _volumes(pod: dict) -> List[dict]:
    return (pod.get("spec") or {}).get("volumes") or []


def _tolerates(pod: dict, taint: dict) -> bool:
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("operator") == "Exists" and not toleration.get("key"):
            return True
        if toleration.get("key") != taint.get("key"):
            continue
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value") == taint.get("value"):
            return True
    return False


class State:
    """Per-node capacity and usage during the plan (usage changes as Pods are planned away)."""

    def __init__(self, nodes: List[dict], pods_by_node: Dict[str, List[dict]]) -> None:
        self.nodes = {meta(n)["name"]: n for n in nodes}
        self.capacity = {name: allocatable(n) for name, n in self.nodes.items()}
        self.usage = {name: used(pods_by_node.get(name, [])) for name in self.nodes}

    def fits_elsewhere(self, pod: dict, source: str) -> bool:
        requests = pod_requests(pod)
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        for name, node in self.nodes.items():
            if name == source or (node.get("spec") or {}).get("unschedulable"):
                continue
            if any(labels(node).get(k) != v for k, v in selector.items()):
                continue
            taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
            if any(not _tolerates(pod, t) for t in taints):
                continue
            capacity, usage = self.capacity[name], self.usage[name]
            if all(usage.get(r, 0) + v <= capacity.get(r, 0) for r, v in requests.items() if r in capacity):
                return True
        return False


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
    if evictor.get("nodeFit") and not state.fits_elsewhere(pod, node):
        return "pod does not fit on any other node (nodeFit)"
    return None


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
    selected = select_nodes(policy, nodes)
    pods_by_node = active_pods(pods)
    state = State(selected, pods_by_node)
    result: Dict[str, Any] = {"profile": profile.get("name"), "nodes": [], "candidates": [], "evictions": [], "warnings": [],
                              "stop_reason": None, "headroom": {},
                              "not_evaluated": [f for f in ("namespaceLabelSelector", "minReplicas", "minPodAge") if f in evictor]}
    categories: Dict[str, str] = {}
    percents: Dict[str, Dict[str, float]] = {}
    for node in selected:
        name = meta(node)["name"]
        percents[name] = percentages(state.usage[name], state.capacity[name], resources)
        categories[name] = classify(percents[name], thresholds, targets, not (node.get("spec") or {}).get("unschedulable"))
        result["nodes"].append({"name": name, "usage_percent": _round(percents[name]), "category": categories[name]})
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
            result["candidates"].append({"node": node, "namespace": meta(pod).get("namespace"), "pod": meta(pod).get("name"),
                                         "vm": vm_name(pod), "removable": reason is None, "reason": reason})
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
