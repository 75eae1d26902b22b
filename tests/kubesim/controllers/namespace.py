"""Namespace deletion: a namespace being deleted turns Terminating, its content is deleted (Background
propagation), then the `kubernetes` finalizer is removed and the namespace goes.

Each pass writes the namespace deleter's five status conditions, as kube-controller-manager does, so a client
can tell what keeps a namespace Terminating: `NamespaceContentRemaining` True `SomeResourcesRemain` "Some
resources are remaining: pods. has 2 resource instances, virtualmachineinstances.kubevirt.io has 1 resource
instances" (`<resource>.<group>`, sorted) and `NamespaceFinalizersRemaining` True `SomeFinalizersRemain` "Some
content in the namespace has finalizers remaining: kubevirt.io/virtualMachineControllerFinalize in 1 resource
instances" while objects remain (Pods in their grace period count as remaining), otherwise their "ok" variants
(False, `ContentRemoved` "All content successfully removed", `ContentHasNoFinalizers` "All content-preserving
finalizers finished"); `NamespaceDeletionDiscoveryFailure`, `NamespaceDeletionGroupVersionParsingFailure` and
`NamespaceDeletionContentFailure` always carry their ok variants here (discovery cannot fail in-process; a
refused delete is retried at the next pass).

Upstream source: kubernetes `pkg/controller/namespace/deletion/namespaced_resources_deleter.go`
(deleteAllContent), `status_condition_utils.go` (messages, reasons, updateConditions). Simplified: a pass runs on
each event that can change the outcome (the namespace changes, an object in it goes) rather than on a requeue
estimate; kinds served from another kind's storage (events.k8s.io Event) are counted once."""
from __future__ import annotations

import copy
from collections import Counter

from ..api import now_iso
from ..errors import ApiError
from ..store import DELETED, MODIFIED, Event
from . import Controller

CONDITION_TYPES = ("NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
                   "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining")
OK_CONDITIONS = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": ("ContentDeleted",
                                        "All content successfully deleted, may be waiting on finalization"),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


def remaining_conditions(remaining: Counter, finalizers: Counter) -> dict[str, tuple[str, str, str]]:
    """type -> (status, reason, message) of the conditions that report remaining content (ProcessContentTotals)."""
    found = {}
    if remaining:
        items = sorted(f"{resource} has {count} resource instances" for resource, count in remaining.items())
        found["NamespaceContentRemaining"] = ("True", "SomeResourcesRemain",
                                              f"Some resources are remaining: {', '.join(items)}")
    if finalizers:
        items = sorted(f"{name} in {count} resource instances" for name, count in finalizers.items())
        found["NamespaceFinalizersRemaining"] = ("True", "SomeFinalizersRemain",
                                                 f"Some content in the namespace has finalizers remaining: "
                                                 f"{', '.join(items)}")
    return found


def update_conditions(conditions: list[dict], found: dict[str, tuple[str, str, str]]) -> list[dict]:
    """updateConditions: every deleter condition type present, the found ones or their ok variant; the
    transition time moves only when the status changes."""
    result = [c for c in conditions if c.get("type") not in CONDITION_TYPES]
    old = {c.get("type"): c for c in conditions}
    for ctype in CONDITION_TYPES:
        status, reason, message = found.get(ctype) or ("False", *OK_CONDITIONS[ctype])
        previous = old.get(ctype)
        changed = previous is None or previous.get("status") != status
        result.append({"type": ctype, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now_iso() if changed else previous.get("lastTransitionTime")})
    return result


class NamespaceController(Controller):
    def on_event(self, event: Event) -> None:
        if event.key == "namespaces" and event.type == MODIFIED and \
                event.obj["metadata"].get("deletionTimestamp"):
            self._terminate(event.obj["metadata"]["name"])
        elif event.type == DELETED and event.namespace:
            entry = self.cluster.store.get("namespaces", "", event.namespace)
            if entry is not None and entry.obj["metadata"].get("deletionTimestamp"):
                self._terminate(event.namespace)

    def _namespaced_types(self) -> list:
        """One resource type per storage: its objects are deleted and counted once."""
        seen, types = set(), []
        for rt in self.cluster.registry.types:
            if rt.namespaced and rt.key not in seen:
                seen.add(rt.key)
                types.append(rt)
        return types

    def _terminate(self, name: str) -> None:
        cluster = self.cluster
        ns_rt = cluster.registry.by_key("namespaces")
        if cluster.store.get("namespaces", "", name) is None:
            return
        types = self._namespaced_types()
        for rt in types:
            for item in list(cluster.store.entries(rt.key, name)):
                if not item.obj["metadata"].get("deletionTimestamp"):
                    try:
                        cluster.delete(rt, name, item.obj["metadata"]["name"], {"propagationPolicy": "Background"})
                    except ApiError:
                        pass
        remaining, finalizers = Counter(), Counter()
        for rt in types:
            for item in cluster.store.entries(rt.key, name):
                remaining[f"{rt.plural}.{rt.group}"] += 1
                finalizers.update(item.obj["metadata"].get("finalizers") or [])
        entry = cluster.store.get("namespaces", "", name)
        if entry is None:
            return
        namespace = entry.obj
        status = namespace.get("status") or {}
        conditions = update_conditions(list(status.get("conditions") or []),
                                       remaining_conditions(remaining, finalizers))
        if status.get("phase") != "Terminating" or conditions != list(status.get("conditions") or []):
            changed = copy.deepcopy(namespace)
            changed["status"] = {**status, "phase": "Terminating", "conditions": conditions}
            namespace = cluster.update(ns_rt, None, name, changed, subresource="status")
        # The last object to go sends a DELETED event that brings us back here.
        if not remaining:
            final = copy.deepcopy(namespace)
            final.setdefault("spec", {})["finalizers"] = []
            final["metadata"]["finalizers"] = []
            cluster.update(ns_rt, None, name, final)


def register(cluster, manager) -> None:
    manager.add(NamespaceController(cluster))
