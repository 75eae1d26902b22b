"""The default scheduler: binds Pods that have no node to the best-scoring feasible node.

Filters (`unfit_reason`): requests against allocatable (cpu, memory, pods), nodeSelector, required node
affinity, taints (NoSchedule/NoExecute) against tolerations, unschedulable (cordoned) and NotReady nodes.
Unschedulable Pods get the PodScheduled=False condition and a FailedScheduling event with the upstream
summary, and are retried when the cluster changes.

Scoring (`node_scores`) as kube-scheduler's default score plugins do, each plugin's node scores on 0..100
(MaxNodeScore), summed with the default weights of `pkg/scheduler/apis/config/v1/default_plugins.go`:
- TaintToleration (weight 3): the number of PreferNoSchedule taints the Pod's PreferNoSchedule (or
  effect-less) tolerations do not tolerate, normalized in reverse (`helper.DefaultNormalizeScore(100, true)`:
  the node with most such taints 0, a node with none 100);
- NodeAffinity (weight 2): the sum of the weights of the preferred terms the node matches (weight 0 skipped),
  normalized (`DefaultNormalizeScore(100, false)`);
- NodeResourcesFit (weight 1), strategy LeastAllocated, cpu and memory weight 1:
  `(allocatable - requested) * 100 / allocatable` per resource (0 when over), averaged, integer arithmetic;
  requested = the node's NonZeroRequested plus the incoming Pod's, where a container without a cpu or memory
  request counts 100m / 200Mi (`quantity.NON_ZERO_DEFAULTS`);
- NodeResourcesBalancedAllocation (weight 1): `(1 - std) * 100` of the cpu and memory fractions
  requested / allocatable (capped at 1; std = |f_cpu - f_mem| / 2), on the real requests (no defaults);
  skipped for a BestEffort Pod (no cpu or memory request), as upstream's PreScore returns Skip.
With one feasible node nothing is scored. Upstream picks at random among the nodes with the highest total;
here the first by name wins, so runs are repeatable.

Upstream source: kubernetes `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`,
`nodeaffinity/node_affinity.go`, `noderesources/fit.go`, `least_allocated.go`, `balanced_allocation.go`,
`resource_allocation.go`, `helper/normalize_score.go`, `pkg/scheduler/schedule_one.go` (selectHost).
Simplified: no pod (anti-)affinity, topology spread, preemption or volume topology; of the default score
plugins PodTopologySpread (2), InterPodAffinity (2), ImageLocality (1) and VolumeBinding (1) are left out
(no spread constraints or pod affinity are modelled, images are never pulled, volumes never bound to a
topology); every feasible node is scored (no percentageOfNodesToScore)."""
from __future__ import annotations

import copy
import math
from collections import Counter

from .. import events
from ..api import now_iso
from ..errors import ApiError
from ..quantity import is_terminal, node_allocatable, pod_requests
from ..selectors import Requirement
from ..store import ADDED, DELETED, MODIFIED, Event
from . import Controller

_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def _match_node_selector_term(term: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    for expr in term.get("matchExpressions") or []:
        op = expr.get("operator")
        if op in ("Gt", "Lt"):
            try:
                value, bound = int(labels.get(expr["key"], "")), int((expr.get("values") or ["0"])[0])
            except ValueError:
                return False
            if (op == "Gt" and value <= bound) or (op == "Lt" and value >= bound):
                return False
        elif not Requirement(expr["key"], _OPS[op], tuple(expr.get("values") or ())).matches(labels):
            return False
    for expr in term.get("matchFields") or []:
        if expr.get("key") == "metadata.name":
            inside = node["metadata"]["name"] in (expr.get("values") or [])
            if (expr.get("operator") == "In") != inside:
                return False
    return True


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def unfit_reason(cluster, pod: dict, node: dict, usage: dict | None = None) -> str | None:
    """Why the Pod cannot go to the node (the scheduler's reason text), or None when it fits."""
    spec = pod.get("spec") or {}
    node_spec = node.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    if node_spec.get("unschedulable") and not _tolerates(spec.get("tolerations") or [], {
            "key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
        return "node(s) were unschedulable"
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") != "True":
        return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity/selector"
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_match_node_selector_term(t, node) for t in terms):
        return "node(s) didn't match Pod's node affinity/selector"
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and \
                not _tolerates(spec.get("tolerations") or [], taint):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    usage = usage if usage is not None else node_usage(cluster, node["metadata"]["name"])
    allocatable, wanted = node_allocatable(node), pod_requests(pod)
    for resource, label in (("cpu", "Insufficient cpu"), ("memory", "Insufficient memory"),
                            ("pods", "Too many pods")):
        if usage[resource] + wanted[resource] > allocatable[resource]:
            return label
    return None


MAX_NODE_SCORE = 100
# default_plugins.go weights of the score plugins simulated here (the others are left out, see the docstring)
SCORE_WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1}
_SCORED_RESOURCES = ("cpu", "memory")


def _preference(pod: dict, node: dict) -> int:
    """NodeAffinity's raw score: the weights of the preferred terms the node matches."""
    preferred = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}) \
        .get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return sum(int(p["weight"]) for p in preferred      # weight 0 (unset) terms are skipped, as upstream
               if p.get("weight") and _match_node_selector_term(p.get("preference") or {}, node))


def intolerable_prefer_no_schedule(pod: dict, node: dict) -> int:
    """TaintToleration's raw score: the node's PreferNoSchedule taints that the Pod's PreferNoSchedule or
    effect-less tolerations do not tolerate."""
    tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or []
                   if not t.get("effect") or t.get("effect") == "PreferNoSchedule"]
    return sum(1 for taint in (node.get("spec") or {}).get("taints") or []
               if taint.get("effect") == "PreferNoSchedule" and not _tolerates(tolerations, taint))


def default_normalize(scores: dict[str, int], reverse: bool) -> dict[str, int]:
    """helper.DefaultNormalizeScore: scale [0, max] to [0, 100]; reversed, 100 minus that (all 100 at max 0)."""
    highest = max(scores.values(), default=0)
    if highest == 0:
        return {name: MAX_NODE_SCORE if reverse else score for name, score in scores.items()}
    scaled = {name: MAX_NODE_SCORE * score // highest for name, score in scores.items()}
    return {name: MAX_NODE_SCORE - score for name, score in scaled.items()} if reverse else scaled


def least_allocated_score(requested: dict[str, int], allocatable: dict[str, int]) -> int:
    """LeastAllocated over cpu and memory, weight 1 each (a resource the node has none of is left out)."""
    total, weights = 0, 0
    for resource in _SCORED_RESOURCES:
        capacity, used = allocatable.get(resource, 0), requested.get(resource, 0)
        if capacity == 0:
            continue
        total += 0 if used > capacity else (capacity - used) * MAX_NODE_SCORE // capacity
        weights += 1
    return total // weights if weights else 0


def balanced_allocation_score(requested: dict[str, int], allocatable: dict[str, int]) -> int:
    """BalancedAllocation over cpu and memory: (1 - standard deviation of the fractions) * 100."""
    fractions = [min(requested.get(r, 0) / allocatable[r], 1.0) for r in _SCORED_RESOURCES if allocatable.get(r)]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def node_requests(cluster) -> dict[str, dict[str, Counter]]:
    """Per node, what its non-terminal Pods request: `requested` (as the Pods say, plus `pods`: their
    number) and `non_zero` (NonZeroRequested: missing cpu/memory requests counted as the defaults)."""
    usage: dict[str, dict[str, Counter]] = {}
    for entry in cluster.store.entries("pods"):
        pod = entry.obj
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not is_terminal(pod):
            counted = usage.setdefault(node, {"requested": Counter(), "non_zero": Counter()})
            counted["requested"].update(pod_requests(pod))
            counted["non_zero"].update(pod_requests(pod, non_zero=True))
    return usage


def node_usage(cluster, node_name: str) -> dict[str, int]:
    """Requests of the non-terminal Pods bound to a node."""
    used = node_requests(cluster).get(node_name, {}).get("requested") or Counter()
    return {"cpu": used["cpu"], "memory": used["memory"], "pods": used["pods"]}


def node_scores(pod: dict, nodes: list[dict], usage: dict[str, dict[str, Counter]]) -> dict[str, dict[str, int]]:
    """Each feasible node's normalized score per plugin and the weighted `total` (see the module docstring);
    `usage` is what `node_requests` answers."""
    names = [n["metadata"]["name"] for n in nodes]
    wanted, wanted_non_zero = pod_requests(pod), pod_requests(pod, non_zero=True)
    plugins: dict[str, dict[str, int]] = {
        "TaintToleration": default_normalize({n["metadata"]["name"]: intolerable_prefer_no_schedule(pod, n)
                                              for n in nodes}, reverse=True),
        "NodeAffinity": default_normalize({n["metadata"]["name"]: _preference(pod, n) for n in nodes}, reverse=False),
        "NodeResourcesFit": {}, "NodeResourcesBalancedAllocation": {},
    }
    best_effort = not any(wanted[r] for r in _SCORED_RESOURCES)
    for node in nodes:
        name, allocatable = node["metadata"]["name"], node_allocatable(node)
        on_node = usage.get(name) or {"requested": Counter(), "non_zero": Counter()}
        plugins["NodeResourcesFit"][name] = least_allocated_score(
            {r: on_node["non_zero"][r] + wanted_non_zero[r] for r in _SCORED_RESOURCES}, allocatable)
        plugins["NodeResourcesBalancedAllocation"][name] = 0 if best_effort else balanced_allocation_score(
            {r: on_node["requested"][r] + wanted[r] for r in _SCORED_RESOURCES}, allocatable)
    result = {}
    for name in names:
        result[name] = {plugin: scores[name] for plugin, scores in plugins.items()}
        result[name]["total"] = sum(SCORE_WEIGHTS[plugin] * scores[name] for plugin, scores in plugins.items())
    return result


def choose_node(cluster, pod: dict, exclude: tuple[str, ...] = ()) -> tuple[str | None, str]:
    """The node the scheduler would pick, or None and the FailedScheduling message."""
    nodes = [e.obj for e in cluster.store.entries("nodes") if e.obj["metadata"]["name"] not in exclude]
    usage = node_requests(cluster)
    reasons: Counter = Counter()
    feasible = []
    for node in nodes:
        used = (usage.get(node["metadata"]["name"]) or {}).get("requested") or Counter()
        reason = unfit_reason(cluster, pod, node, {r: used[r] for r in ("cpu", "memory", "pods")})
        if reason:
            reasons[reason] += 1
        else:
            feasible.append(node)
    if len(feasible) == 1:
        return feasible[0]["metadata"]["name"], ""
    if feasible:
        scores = node_scores(pod, feasible, usage)
        # upstream selectHost picks at random among the highest totals; the first by name, for repeatable runs
        return min(scores, key=lambda name: (-scores[name]["total"], name)), ""
    total = len(nodes) + len(exclude)
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    if exclude:
        detail = ", ".join(filter(None, [detail, f"{len(exclude)} node(s) were excluded"]))
    return None, f"0/{total} nodes are available: {detail}." if detail else f"0/{total} nodes are available."


class Scheduler(Controller):
    keys = ("pods", "nodes")

    def __init__(self, cluster):
        super().__init__(cluster)
        self._pending: set[tuple[str, str]] = set()

    def on_event(self, event: Event) -> None:
        if event.key == "pods":
            pod = event.obj
            ident = (event.namespace, pod["metadata"]["name"])
            if event.type == DELETED:
                self._pending.discard(ident)
                self._retry_pending()     # freed capacity
            elif event.type in (ADDED, MODIFIED) and self._wants_scheduling(pod):
                self._schedule(pod)
        elif event.type in (ADDED, MODIFIED):
            self._retry_pending()

    @staticmethod
    def _wants_scheduling(pod: dict) -> bool:
        spec = pod.get("spec") or {}
        return (not spec.get("nodeName") and not pod["metadata"].get("deletionTimestamp")
                and spec.get("schedulerName", "default-scheduler") == "default-scheduler" and not is_terminal(pod))

    def _retry_pending(self) -> None:
        for namespace, name in sorted(self._pending):
            entry = self.cluster.store.get("pods", namespace, name)
            if entry is None or not self._wants_scheduling(entry.obj):
                self._pending.discard((namespace, name))
            else:
                self._schedule(entry.obj)

    def _schedule(self, pod: dict) -> None:
        cluster, meta = self.cluster, pod["metadata"]
        pods = cluster.registry.by_key("pods")
        ident = (meta["namespace"], meta["name"])
        node, message = choose_node(cluster, pod)
        try:
            if node is None:
                self._pending.add(ident)
                conditions = (pod.get("status") or {}).get("conditions") or []
                if any(c.get("type") == "PodScheduled" and c.get("message") == message for c in conditions):
                    return
                status = copy.deepcopy(pod)
                status.setdefault("status", {})["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                     "lastTransitionTime": now_iso()}]
                cluster.update(pods, meta["namespace"], meta["name"], status, subresource="status")
                events.record(cluster, pod, "Warning", "FailedScheduling", message, "default-scheduler")
                return
            self._pending.discard(ident)
            bound = copy.deepcopy(pod)
            bound["spec"]["nodeName"] = node
            cluster.update(pods, meta["namespace"], meta["name"], bound)
            events.record(cluster, pod, "Normal", "Scheduled",
                          f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}", "default-scheduler")
        except ApiError:
            pass


def register(cluster, manager) -> None:
    if cluster.registry.by_key("pods") is not None and cluster.registry.by_key("nodes") is not None:
        manager.add(Scheduler(cluster))
