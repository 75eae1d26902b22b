"""Recording core/v1 Events the way client-go's recorder does: one Event per object, reason and message,
with `count` and `lastTimestamp` bumped on repeats. A write the API refuses (a namespace being terminated
forbids new content) drops the Event, as the recorder's broadcaster does ("Server rejected event (will not
retry!)"): the component that records it carries on."""
from __future__ import annotations

import copy
import hashlib

from .api import Cluster, now_iso
from .errors import ApiError


def record(cluster: Cluster, involved: dict, event_type: str, reason: str, message: str, component: str,
           host: str = "") -> dict | None:
    events = cluster.registry.by_key("events")
    if events is None:
        return None
    meta = involved.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    digest = hashlib.sha1(f"{meta.get('uid')}|{reason}|{message}|{component}".encode()).hexdigest()[:16]
    name = f"{meta.get('name', 'object')}.{digest}"
    now = now_iso()
    with cluster.lock:
        try:
            return _write(cluster, events, namespace, name, involved, event_type, reason, message, component, host,
                          now)
        except ApiError:
            return None


def _write(cluster: Cluster, events, namespace: str, name: str, involved: dict, event_type: str, reason: str,
           message: str, component: str, host: str, now: str) -> dict:
    meta = involved.get("metadata") or {}
    existing = cluster.find(events, namespace, name)
    if existing is not None:
        updated = copy.deepcopy(existing)
        updated["count"] = int(existing.get("count", 1)) + 1
        updated["lastTimestamp"] = now
        return cluster.update(events, namespace, name, updated)
    source = {"component": component, **({"host": host} if host else {})}
    return cluster.create(events, namespace, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": involved.get("kind"), "apiVersion": involved.get("apiVersion"),
                           "namespace": meta.get("namespace"), "name": meta.get("name"),
                           "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
        "type": event_type, "reason": reason, "message": message, "source": source,
        "reportingComponent": component, "reportingInstance": host or component,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1})


def for_object(cluster: Cluster, namespace: str, kind: str, name: str) -> list[dict]:
    """Events about one object (for tests and for controllers that check what they already said)."""
    events = cluster.registry.by_key("events")
    return [e.obj for e in cluster.store.entries(events.key, namespace)
            if (e.obj.get("involvedObject") or {}).get("kind") == kind
            and (e.obj.get("involvedObject") or {}).get("name") == name]
