"""Namespace deletion: a namespace being deleted turns Terminating, its content is deleted, then the
`kubernetes` finalizer is removed and the namespace goes."""
from __future__ import annotations

import copy

from ..errors import ApiError
from ..store import DELETED, MODIFIED, Event
from . import Controller


class NamespaceController(Controller):
    def on_event(self, event: Event) -> None:
        if event.key == "namespaces" and event.type == MODIFIED and \
                event.obj["metadata"].get("deletionTimestamp"):
            self._terminate(event.obj["metadata"]["name"])
        elif event.type == DELETED and event.namespace:
            entry = self.cluster.store.get("namespaces", "", event.namespace)
            if entry is not None and entry.obj["metadata"].get("deletionTimestamp"):
                self._terminate(event.namespace)

    def _terminate(self, name: str) -> None:
        cluster = self.cluster
        ns_rt = cluster.registry.by_key("namespaces")
        entry = cluster.store.get("namespaces", "", name)
        if entry is None:
            return
        namespace = entry.obj
        if (namespace.get("status") or {}).get("phase") != "Terminating":
            status = copy.deepcopy(namespace)
            status["status"] = {"phase": "Terminating"}
            cluster.update(ns_rt, None, name, status, subresource="status")
        for rt in cluster.registry.types:
            if not rt.namespaced:
                continue
            for item in list(cluster.store.entries(rt.key, name)):
                if not item.obj["metadata"].get("deletionTimestamp"):
                    try:
                        cluster.delete(rt, name, item.obj["metadata"]["name"], {"propagationPolicy": "Background"})
                    except ApiError:
                        pass
        # The last object to go sends a DELETED event that brings us back here.
        if not any(next(cluster.store.entries(rt.key, name), None) for rt in cluster.registry.types if rt.namespaced):
            final = copy.deepcopy(cluster.store.get("namespaces", "", name).obj)
            final.setdefault("spec", {})["finalizers"] = []
            final["metadata"]["finalizers"] = []
            cluster.update(ns_rt, None, name, final)


def register(cluster, manager) -> None:
    manager.add(NamespaceController(cluster))
