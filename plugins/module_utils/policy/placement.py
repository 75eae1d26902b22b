# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where kube-scheduler would put the target Pod of a migrating VM, for the forecast (written from kube-scheduler
v1.35 `pkg/scheduler/framework/plugins/noderesources`: fit.go, least_allocated.go, balanced_allocation.go and
resource_allocation.go).

- The nodes tried: every Ready node except the Pod's own (KubeVirt never migrates a VM to the node it runs on) that
  the Pod fits by `kube/node_fit.node_fit_error` (node selector and required affinity, NoSchedule/NoExecute taints,
  requests against allocatable, cordon, required anti-affinity).
- The score: the default profile's two resource scores, each of weight 1, on cpu and memory (weight 1 each):
  NodeResourcesFit with the LeastAllocated strategy, per resource (allocatable - requested) * 100 / allocatable in
  integers (0 when over), averaged; `requested` counts a container without a cpu or memory request as 100m and
  200Mi (the scheduler's non-zero requests), the Pod's own included; plus NodeResourcesBalancedAllocation, 100 *
  (1 - the spread of the cpu and memory fractions, |a - b| / 2), on the real requests with the Pod's, each fraction
  capped at 1, 0 for a Pod that requests neither.
- The Pod placed is the migration's target Pod as KubeVirt renders it (virt-controller `createTargetPod`): from the VMI,
  not from the current launcher, so the `kubernetes.io/hostname NotIn [<node it came from>]` term KubeVirt added to a
  former target Pod (label `kubevirt.io/migrationJobUID`) is dropped, and a term excluding the current node is added to
  every required node selector term (`migration_target`).
- The other default scores (TaintToleration's PreferNoSchedule, preferred node affinity, topology spread,
  inter-Pod affinity, image locality) are left out: they weigh in only where a cluster sets them. Ties go to the
  first node by name (the scheduler picks among equal scores at random), and each choice lists the nodes it tied
  with.
"""

from __future__ import annotations

import copy
import math
from typing import Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import allocatable, is_ready, node_fit_error, node_usage
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import pod_requests

SCORED = ("cpu", "memory")
DEFAULT_MILLI_CPU = 100                   # schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY = 200 * 1024 * 1024        # schedutil.DefaultMemoryRequest
MAX_NODE_SCORE = 100
TIE_RULE = ("kube-scheduler default score (NodeResourcesFit LeastAllocated + NodeResourcesBalancedAllocation on cpu and memory requests); "
            "ties to the first node by name")


MIGRATION_JOB_LABEL = "kubevirt.io/migrationJobUID"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _required_terms(pod: dict) -> Optional[dict]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return affinity.get("requiredDuringSchedulingIgnoredDuringExecution")


def migration_target(pod: dict, source: str) -> dict:
    """The target Pod KubeVirt creates to migrate the VM of launcher `pod` away from `source` (a new copy)."""
    target = copy.deepcopy(pod)
    spec = target.setdefault("spec", {})
    spec.pop("nodeName", None)
    required = _required_terms(target)
    if MIGRATION_JOB_LABEL in ((target.get("metadata") or {}).get("labels") or {}) and required:
        for term in required.get("nodeSelectorTerms") or []:   # the previous migration's exclusion, not the VMI's own
            term["matchExpressions"] = [e for e in term.get("matchExpressions") or []
                                        if not (e.get("key") == HOSTNAME_LABEL and e.get("operator") == "NotIn")]
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    terms = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {}).setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        term.setdefault("matchExpressions", []).append({"key": HOSTNAME_LABEL, "operator": "NotIn", "values": [source]})
    target.setdefault("metadata", {}).setdefault("labels", {})[MIGRATION_JOB_LABEL] = "forecast"
    return target


def non_zero_requests(pod: dict) -> Dict[str, int]:
    """The Pod's cpu and memory requests with the scheduler's defaults for a container that sets none."""
    requested = pod_requests(pod)
    result = {r: requested.get(r, 0) for r in SCORED}
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        if "cpu" not in requests:
            result["cpu"] += DEFAULT_MILLI_CPU
        if "memory" not in requests:
            result["memory"] += DEFAULT_MEMORY
    return result


def least_allocated_score(requested: Dict[str, int], capacity: Dict[str, int]) -> int:
    score, weights = 0, 0
    for resource in SCORED:
        total = capacity.get(resource, 0)
        if total == 0:
            continue
        used = requested.get(resource, 0)
        score += 0 if used > total else (total - used) * MAX_NODE_SCORE // total
        weights += 1
    return score // weights if weights else 0


def balanced_allocation_score(requested: Dict[str, int], capacity: Dict[str, int]) -> int:
    fractions = [min(float(requested.get(r, 0)) / float(capacity[r]), 1.0) for r in SCORED if capacity.get(r)]
    spread = 0.0
    if len(fractions) == 2:
        spread = math.fabs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        spread = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - spread) * MAX_NODE_SCORE)


class Placement:
    """The cluster as the scheduler sees it while the forecast moves Pods: each Ready node's Pods, requests and
    non-zero requests, kept up to date move by move (no pass over every Pod per move)."""

    def __init__(self, nodes: List[dict], pods_by_node: Dict[str, List[dict]]) -> None:
        self.nodes = sorted((n for n in nodes if is_ready(n)), key=lambda n: meta(n)["name"])
        self.capacity = {meta(n)["name"]: allocatable(n) for n in self.nodes}
        self.pods = {name: list(pods_by_node.get(name, [])) for name in self.capacity}
        self.used = {name: node_usage(self.pods[name]) for name in self.capacity}
        self.non_zero: Dict[str, Dict[str, int]] = {}
        for name, on_node in self.pods.items():
            totals = {r: 0 for r in SCORED}
            for pod in on_node:
                for resource, value in non_zero_requests(pod).items():
                    totals[resource] += value
            self.non_zero[name] = totals

    def score(self, pod: dict, name: str, own: Optional[Dict[str, int]] = None, own_non_zero: Optional[Dict[str, int]] = None) -> int:
        """The node's score for the Pod (`own`, `own_non_zero`: its requests and non-zero requests, when known)."""
        own = pod_requests(pod) if own is None else own
        own_non_zero = non_zero_requests(pod) if own_non_zero is None else own_non_zero
        fit = least_allocated_score({r: self.non_zero[name][r] + own_non_zero[r] for r in SCORED}, self.capacity[name])
        if not any(own.get(r, 0) for r in SCORED):
            return fit   # BalancedAllocation skips a best-effort Pod
        return fit + balanced_allocation_score({r: self.used[name].get(r, 0) + own.get(r, 0) for r in SCORED}, self.capacity[name])

    def choose(self, pod: dict, source: str) -> dict:
        """`{destination, score, tied, scores, errors}`: the node the scheduler would pick for the Pod leaving `source`
        (None when it fits none), its score, the other nodes with the same score, every fitting node's score, and
        NodeFit's reason for each node it does not fit."""
        scores: Dict[str, int] = {}
        errors: Dict[str, str] = {}
        own, own_non_zero = pod_requests(pod), non_zero_requests(pod)
        for node in self.nodes:
            name = meta(node)["name"]
            if name == source:
                continue
            error = node_fit_error(pod, node, self.pods[name], self.used[name], self.capacity[name])
            if error is None:
                scores[name] = self.score(pod, name, own, own_non_zero)
            else:
                errors[name] = error
        if not scores:
            return {"destination": None, "score": None, "tied": [], "scores": {}, "errors": errors}
        best = max(scores.values())
        tied = [name for name in sorted(scores) if scores[name] == best]
        return {"destination": tied[0], "score": best, "tied": tied[1:], "scores": scores, "errors": errors}

    def move(self, pod: dict, moved: dict, source: str, destination: str) -> None:
        """`pod` leaves `source`; `moved` (the same Pod on `destination`) arrives."""
        requested, own_non_zero = pod_requests(pod), non_zero_requests(pod)
        if source in self.pods:
            self.pods[source] = [p for p in self.pods[source] if p is not pod]
            self._add(source, requested, own_non_zero, -1)
        self.pods[destination].append(moved)
        self._add(destination, requested, own_non_zero, 1)

    def _add(self, name: str, requested: Dict[str, int], own_non_zero: Dict[str, int], sign: int) -> None:
        for resource, value in requested.items():
            self.used[name][resource] = self.used[name].get(resource, 0) + sign * value
        for resource, value in own_non_zero.items():
            self.non_zero[name][resource] += sign * value
