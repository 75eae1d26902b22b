"""The ReplicaSet controller: keeps `spec.replicas` active Pods (not finished, not being deleted) from the
template, named `<replicaset>-<5 random chars>`, controlled by the ReplicaSet. A deleted or evicted Pod is
replaced at once (the replacement is scheduled while the old Pod terminates, as upstream), surplus Pods
are deleted (unscheduled, pending and not-ready Pods first, then the newest), and orphan Pods that match
the selector are adopted. Status: `replicas`, `fullyLabeledReplicas`, `readyReplicas`,
`availableReplicas`, `observedGeneration`. Events `SuccessfulCreate` "Created pod: <name>" and
`SuccessfulDelete` "Deleted pod: <name>".

Upstream: pkg/controller/replicaset. Simplified: no slow-start batches, no expectations cache (the
controller reads the store it writes), `minReadySeconds` is ignored (a ready Pod is available), no
`terminatingReplicas`; the `scale` subresource is not served."""
from __future__ import annotations

from ..selectors import match_label_selector_object
from ..store import ADDED, MODIFIED, Event
from .workloads import (OwnerController, adopt_orphans, controller_ref, create_pod, delete_pod, is_active, is_ready,
                        owned, pod_from_template, write_status)

COMPONENT = "replicaset-controller"
_KEY = "replicasets.apps"


def _deletion_order(pods: list[dict]) -> list[dict]:
    """Pods in the order they go when scaling down: unscheduled, then pending, then not ready, newest first
    (upstream ActivePods ordering, simplified)."""
    def rank(pod: dict) -> tuple:
        phase = (pod.get("status") or {}).get("phase", "Pending")
        return (1 if (pod.get("spec") or {}).get("nodeName") else 0,
                {"Pending": 0, "Unknown": 1, "Running": 2}.get(phase, 0), 1 if is_ready(pod) else 0)
    newest_first = sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
                          reverse=True)
    return sorted(newest_first, key=rank)


class ReplicaSetController(OwnerController):
    resource_key = _KEY
    owner_kind = "ReplicaSet"
    owner_group = "apps"
    keys = (_KEY, "pods")

    def _adopt_into_matching(self, pod: dict) -> None:
        labels = pod["metadata"].get("labels") or {}
        if not labels:
            return
        for entry in list(self.cluster.store.entries(_KEY, pod["metadata"]["namespace"])):
            rs = entry.obj
            if not rs["metadata"].get("deletionTimestamp") and \
                    match_label_selector_object((rs.get("spec") or {}).get("selector"), labels):
                self.sync(rs["metadata"]["namespace"], rs["metadata"]["name"])
                return

    def on_unowned_event(self, event: Event) -> None:
        if event.type in (ADDED, MODIFIED) and controller_ref(event.obj) is None and \
                not event.obj["metadata"].get("deletionTimestamp"):
            self._adopt_into_matching(event.obj)

    def reconcile(self, owner: dict) -> None:
        rs = owner
        cluster = self.cluster
        namespace, name = rs["metadata"]["namespace"], rs["metadata"]["name"]
        rt = cluster.registry.by_key(_KEY)
        spec = rs.get("spec") or {}
        uid = rs["metadata"]["uid"]
        pods = owned(cluster, uid, "pods") + adopt_orphans(cluster, rs, spec.get("selector"))
        active = [p for p in pods if is_active(p)]
        wanted = int(spec.get("replicas", 1))
        if len(active) < wanted:
            for _index in range(wanted - len(active)):
                body = pod_from_template(spec.get("template") or {}, namespace, rs, f"{name}-")
                pod = create_pod(cluster, rs, body, COMPONENT)
                if pod is None:
                    break
                active.append(pod)
        elif len(active) > wanted:
            for pod in _deletion_order(active)[:len(active) - wanted]:
                if delete_pod(cluster, rs, pod, COMPONENT):
                    active.remove(pod)
        entry = cluster.store.get(_KEY, namespace, name)
        if entry is None:
            return
        selector = spec.get("selector")
        labelled = [p for p in active if match_label_selector_object(selector, p["metadata"].get("labels") or {})]
        ready = sum(1 for p in active if is_ready(p))
        status = {k: v for k, v in (entry.obj.get("status") or {}).items()
                  if k not in ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas",
                               "observedGeneration")}
        status["replicas"] = len(active)
        for field, value in (("fullyLabeledReplicas", len(labelled)), ("readyReplicas", ready),
                             ("availableReplicas", ready)):
            if value:
                status[field] = value
        status["observedGeneration"] = rs["metadata"].get("generation", 1)
        write_status(cluster, rt, entry.obj, status)


def register(cluster, manager) -> None:
    if cluster.registry.by_key(_KEY) is not None and cluster.registry.by_key("pods") is not None:
        manager.add(ReplicaSetController(cluster))
