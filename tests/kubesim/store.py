"""Object storage for one cluster: objects by resource, a monotonic resourceVersion, an event history for
watches (with compaction, so a too-old resourceVersion gets 410 Gone) and watch fan-out.

Stored objects are never mutated in place: every write stores a new dict, so readers may hold references
and the JSON encoding of each object is cached until it changes."""
from __future__ import annotations

import bisect
import json
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"   # the annotation of the bookmark ending a watch's initial events


def encode(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class Entry:
    __slots__ = ("obj", "_raw")

    def __init__(self, obj: dict):
        self.obj = obj
        self._raw: bytes | None = None

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = encode(self.obj)
        return self._raw


@dataclass
class Event:
    rv: int
    key: str            # resource key (`pods`, `virtualmachineinstances.kubevirt.io`)
    namespace: str
    type: str
    obj: dict
    old: dict | None = None


@dataclass
class Watcher:
    key: str
    namespace: str | None
    matches: Callable[[dict], bool]
    events: "queue.Queue[Event | None]" = field(default_factory=queue.Queue)
    closed: bool = False
    after_rv: int = 0   # as the cache watcher: events at or before the watch's starting point are not sent

    def offer(self, event: Event) -> None:
        """Deliver an event as this watcher sees it: an object entering the selection is ADDED, one
        leaving it is DELETED."""
        if event.key != self.key or (self.namespace and event.namespace != self.namespace):
            return
        if event.rv <= self.after_rv:
            return
        now = self.matches(event.obj)
        before = event.old is not None and self.matches(event.old)
        if event.type == MODIFIED and now and not before and event.old is not None:
            self.events.put(Event(event.rv, event.key, event.namespace, ADDED, event.obj))
        elif event.type == MODIFIED and before and not now:
            self.events.put(Event(event.rv, event.key, event.namespace, DELETED, event.obj))
        elif now:
            self.events.put(event)


class Store:
    def __init__(self, history: int = 50_000):
        self.lock = threading.RLock()
        self.rv = 0
        self._objects: dict[str, dict[str, dict[str, Entry]]] = {}   # key -> namespace -> name -> entry
        self._history: deque[Event] = deque(maxlen=history)
        self.compacted_rv = 0
        self._watchers: list[Watcher] = []
        self._listeners: list[Callable[[Event], None]] = []
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}  # owner uid -> {(key, ns, name)}

    # --------------------------------------------------------------------------------------- reads
    def get(self, key: str, namespace: str, name: str) -> Entry | None:
        return self._objects.get(key, {}).get(namespace, {}).get(name)

    def entries(self, key: str, namespace: str | None = None) -> Iterator[Entry]:
        """The entries as they are now: a copy taken under the lock, so that a request thread writing meanwhile
        cannot change the dicts under a controller's iteration (`dictionary changed size during iteration`)."""
        with self.lock:
            by_ns = self._objects.get(key, {})
            if namespace is not None:
                found = list(by_ns.get(namespace, {}).values())
            else:
                found = [entry for names in by_ns.values() for entry in names.values()]
        return iter(found)

    def sorted_entries(self, key: str, namespace: str | None = None) -> list[tuple[str, str, Entry]]:
        with self.lock:   # as entries: no write changes the dicts while they are read
            by_ns = self._objects.get(key, {})
            spaces = [namespace] if namespace is not None else sorted(by_ns)
            result = []
            for ns in spaces:
                names = by_ns.get(ns, {})
                result.extend((ns, name, names[name]) for name in sorted(names))
            return result

    def sorted_entries_at(self, key: str, namespace: str | None, rv: int) -> list[tuple[str, str, Entry]]:
        """sorted_entries as they were at resourceVersion rv (a consistent snapshot, as etcd reads at a revision):
        the current rows with the changes after rv undone from the event history. Raises LookupError when rv is
        older than the history. Nothing changed since rv (the usual case of a paginated list) costs nothing extra."""
        with self.lock:
            rows = self.sorted_entries(key, namespace)
            if rv >= self.rv:
                return rows
            if rv < self.compacted_rv:
                raise LookupError(rv)
            before = self._state_before(key, namespace, rv)
        if not before:
            return rows
        kept = [row for row in rows if (row[0], row[1]) not in before]
        for (ns, name), obj in before.items():
            if obj is not None:
                bisect.insort(kept, (ns, name, Entry(obj)), key=lambda row: (row[0], row[1]))
        return kept

    def _state_before(self, key: str, namespace: str | None, rv: int) -> dict[tuple[str, str], dict | None]:
        """{(namespace, name): the object at rv, None if absent} for the objects of `key` changed after rv: walking
        the history back, the earliest change after rv holds the object as it was at rv in `old`."""
        before: dict[tuple[str, str], dict | None] = {}
        for event in reversed(self._history):
            if event.rv <= rv:
                break
            if event.key == key and (namespace is None or event.namespace == namespace):
                before[(event.namespace, event.obj["metadata"]["name"])] = event.old
        return before

    def wait_until_fresh(self, rv: int, timeout: float) -> bool:
        """Wait up to timeout seconds until the store has reached rv (the watch cache's waitUntilFreshAndBlock)."""
        deadline = time.monotonic() + timeout
        while self.rv < rv:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def count(self, key: str) -> int:
        return sum(len(v) for v in self._objects.get(key, {}).values())

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        return sorted(self._dependents.get(owner_uid, ()))

    # -------------------------------------------------------------------------------------- writes
    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, key: str, obj: dict, event_type: str) -> Event:
        """Store obj (its metadata.resourceVersion already set by the caller from next_rv())."""
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        names = self._objects.setdefault(key, {}).setdefault(namespace, {})
        old_entry = names.get(name)
        names[name] = Entry(obj)
        old = old_entry.obj if old_entry else None
        self._index_owners(key, namespace, name, old, obj)
        return self._emit(Event(int(meta["resourceVersion"]), key, namespace, event_type, obj, old))

    def remove(self, key: str, namespace: str, name: str, final: dict) -> Event:
        names = self._objects.get(key, {}).get(namespace, {})
        old_entry = names.pop(name, None)
        if not names:
            self._objects.get(key, {}).pop(namespace, None)
        self._index_owners(key, namespace, name, old_entry.obj if old_entry else None, None)
        return self._emit(Event(int(final["metadata"]["resourceVersion"]), key, namespace, DELETED, final,
                                old_entry.obj if old_entry else None))

    def _index_owners(self, key: str, ns: str, name: str, old: dict | None, new: dict | None) -> None:
        ident = (key, ns, name)
        for obj, add in ((old, False), (new, True)):
            for ref in ((obj or {}).get("metadata", {}).get("ownerReferences") or []):
                uid = ref.get("uid")
                if not uid:
                    continue
                if add:
                    self._dependents.setdefault(uid, set()).add(ident)
                else:
                    deps = self._dependents.get(uid)
                    if deps:
                        deps.discard(ident)
                        if not deps:
                            del self._dependents[uid]

    def _emit(self, event: Event) -> Event:
        if len(self._history) == self._history.maxlen:
            self.compacted_rv = self._history[0].rv
        self._history.append(event)
        for watcher in self._watchers:
            watcher.offer(event)
        for listener in self._listeners:
            listener(event)
        return event

    def compact(self) -> int:
        """Forget the event history (as etcd compaction does); older resourceVersions then get 410."""
        with self.lock:
            self.compacted_rv = self.rv
            self._history.clear()
            return self.compacted_rv

    # ------------------------------------------------------------------------------------- watching
    def add_listener(self, listener: Callable[[Event], None]) -> None:
        self._listeners.append(listener)

    def watch(self, key: str, namespace: str | None, matches: Callable[[dict], bool],
              since_rv: int | None, initial_events: bool | None = None, end_bookmark: bool = False) -> Watcher:
        """Start a watch, with no gap and no duplicate between what it replays and the live events:
        - initial_events (or since_rv None, the legacy default): the current objects as ADDED events, then, with
          end_bookmark, a BOOKMARK at the current resourceVersion marked as the end of the initial events;
        - initial_events False without since_rv: from now;
        - since_rv: the history after it (LookupError when it is older than the history), or, when it is newer
          than the store, the events after it."""
        with self.lock:
            watcher = Watcher(key, namespace, matches)
            if initial_events or (since_rv is None and initial_events is None):
                for entry in self.entries(key, namespace):
                    if matches(entry.obj):
                        meta = entry.obj["metadata"]
                        watcher.events.put(Event(int(meta["resourceVersion"]), key, meta.get("namespace", ""),
                                                 ADDED, entry.obj))
                if end_bookmark:
                    watcher.events.put(self._bookmark(key, {INITIAL_EVENTS_END: "true"}))
                watcher.after_rv = self.rv
            elif since_rv is None:
                watcher.after_rv = self.rv
            else:
                if since_rv < self.compacted_rv:
                    raise LookupError(since_rv)
                for event in self._history:
                    if event.rv > since_rv:
                        watcher.offer(event)
                watcher.after_rv = since_rv
            self._watchers.append(watcher)
            return watcher

    def bookmark(self, watcher: Watcher) -> None:
        """Queue a BOOKMARK at the current resourceVersion behind the events the watcher was already given."""
        with self.lock:
            if self.rv >= watcher.after_rv and not watcher.closed:
                watcher.events.put(self._bookmark(watcher.key, {}))

    def _bookmark(self, key: str, annotations: dict[str, str]) -> Event:
        meta: dict = {"resourceVersion": str(self.rv)}
        if annotations:
            meta["annotations"] = annotations
        return Event(self.rv, key, "", BOOKMARK, {"metadata": meta})

    def stop_watch(self, watcher: Watcher) -> None:
        with self.lock:
            watcher.closed = True
            if watcher in self._watchers:
                self._watchers.remove(watcher)
            watcher.events.put(None)

    def stop_all_watches(self) -> None:
        with self.lock:
            for watcher in list(self._watchers):
                self.stop_watch(watcher)
