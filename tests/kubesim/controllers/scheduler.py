"""The default scheduler: binds Pods that have no node to the feasible node with the most free requested
capacity, preferring nodes that match a preferred node affinity. Feasibility: requests against allocatable
(cpu, memory, pods), nodeSelector, required node affinity, taints (NoSchedule/NoExecute) against
tolerations, unschedulable (cordoned) and NotReady nodes. Unschedulable Pods get the PodScheduled=False
condition and a FailedScheduling event with the upstream summary, and are retried when the cluster
changes. Simplified: no pod (anti-)affinity, topology spread, preemption or volume topology."""
from __future__ import annotations

import copy
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


def node_usage(cluster, node_name: str) -> dict[str, int]:
    """Requests of the non-terminal Pods bound to a node."""
    used = Counter()
    for entry in cluster.store.entries("pods"):
        pod = entry.obj
        if (pod.get("spec") or {}).get("nodeName") == node_name and not is_terminal(pod):
            used.update(pod_requests(pod))
    return {"cpu": used["cpu"], "memory": used["memory"], "pods": used["pods"]}


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


def _preference(pod: dict, node: dict) -> int:
    preferred = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}) \
        .get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return sum(int(p.get("weight", 1)) for p in preferred
               if _match_node_selector_term(p.get("preference") or {}, node))


def choose_node(cluster, pod: dict, exclude: tuple[str, ...] = ()) -> tuple[str | None, str]:
    """The node the scheduler would pick, or None and the FailedScheduling message."""
    nodes = [e.obj for e in cluster.store.entries("nodes") if e.obj["metadata"]["name"] not in exclude]
    reasons: Counter = Counter()
    best, best_score = None, None
    for node in nodes:
        usage = node_usage(cluster, node["metadata"]["name"])
        reason = unfit_reason(cluster, pod, node, usage)
        if reason:
            reasons[reason] += 1
            continue
        allocatable = node_allocatable(node)
        free = sum((allocatable[r] - usage[r]) / allocatable[r] for r in ("cpu", "memory") if allocatable[r])
        score = (_preference(pod, node), free, node["metadata"]["name"])
        if best_score is None or score[:2] > best_score[:2]:
            best, best_score = node["metadata"]["name"], score
    if best is not None:
        return best, ""
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
