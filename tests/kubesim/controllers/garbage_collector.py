"""Garbage collection of dependents through ownerReferences: background deletion when an owner goes,
foreground deletion (the `foregroundDeletion` finalizer) when asked."""
from __future__ import annotations

import copy

from ..errors import ApiError
from ..store import DELETED, MODIFIED, Event
from . import Controller


class GarbageCollector(Controller):
    def on_event(self, event: Event) -> None:
        meta = event.obj["metadata"]
        if event.type == DELETED:
            self._delete_dependents(meta["uid"], "Background")
        elif event.type == MODIFIED and meta.get("deletionTimestamp") and \
                "foregroundDeletion" in (meta.get("finalizers") or []):
            self._delete_dependents(meta["uid"], "Foreground")
            self._finish_foreground(event)
        # A dependent that went away may let a foreground owner finish.
        if event.type == DELETED:
            for ref in meta.get("ownerReferences") or []:
                self._finish_owner_by_uid(ref.get("uid"), event)

    def _delete_dependents(self, uid: str, policy: str) -> None:
        cluster = self.cluster
        for key, ns, name in cluster.store.dependents(uid):
            rt = cluster.registry.by_key(key)
            entry = cluster.store.get(key, ns, name)
            if rt is None or entry is None or entry.obj["metadata"].get("deletionTimestamp"):
                continue
            refs = entry.obj["metadata"].get("ownerReferences") or []
            # Another live owner keeps the dependent (the real collector only drops the dead reference).
            if any(r.get("uid") != uid and self._owner_alive(r, ns) for r in refs):
                continue
            try:
                cluster.delete(rt, ns or None, name, {"propagationPolicy": policy})
            except ApiError:
                pass

    def _owner_alive(self, ref: dict, namespace: str) -> bool:
        rt = self.cluster.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if rt is None:
            return False
        entry = self.cluster.store.get(rt.key, namespace if rt.namespaced else "", ref.get("name", ""))
        return entry is not None and entry.obj["metadata"].get("uid") == ref.get("uid")

    def _finish_owner_by_uid(self, uid: str | None, event: Event) -> None:
        if not uid:
            return
        for ref in event.obj["metadata"].get("ownerReferences") or []:
            if ref.get("uid") != uid:
                continue
            rt = self.cluster.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
            if rt is None:
                return
            entry = self.cluster.store.get(rt.key, event.namespace if rt.namespaced else "", ref.get("name", ""))
            if entry is not None:
                self._finish_foreground(Event(0, rt.key, event.namespace, MODIFIED, entry.obj))

    def _finish_foreground(self, event: Event) -> None:
        meta = event.obj["metadata"]
        if "foregroundDeletion" not in (meta.get("finalizers") or []) or self.cluster.store.dependents(meta["uid"]):
            return
        rt = self.cluster.registry.by_key(event.key)
        owner = copy.deepcopy(event.obj)
        owner["metadata"]["finalizers"] = [f for f in meta["finalizers"] if f != "foregroundDeletion"]
        try:
            self.cluster.update(rt, meta.get("namespace"), meta["name"], owner)
        except ApiError:
            pass


def register(cluster, manager) -> None:
    manager.add(GarbageCollector(cluster))
