# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waiting on the cluster with list + watch, not with fixed-interval polling.

Each stream lists a resource once (its resourceVersion is where the watch starts) and then watches from the
last resourceVersion seen (objects and BOOKMARKs), in a thread of its own, with the server-side
`timeoutSeconds` set to what is left of the deadline, so that an idle wait costs one watch request per stream
whatever its length. A watch that ends early or fails (connection errors, 5xx) is reopened from the last
resourceVersion after a short backoff; a 410 Gone (the resourceVersion is too old) lists again and watches from
the new list. The threads only read and queue; the caller's thread applies events to the cache and asks its
predicate after each batch, so it returns as soon as the outcome is decided, or at the deadline.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client, classify
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure

GONE = 410
REFUSED = frozenset((401, 403))  # credentials or RBAC: reconnecting cannot help, so the wait ends with the API's answer
MIN_BACKOFF = 0.2
MAX_BACKOFF = 5.0


def _key(obj: dict) -> Tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace") or "", metadata.get("name") or ""


class Stream:
    """One resource (in one namespace, with one label selector) kept current by list + watch."""

    def __init__(self, name: str, resource: Any, namespace: Optional[str] = None, label_selector: Optional[str] = None,
                 field_selector: Optional[str] = None) -> None:
        self.name = name
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.resource_version: Optional[str] = None


class WatchSet:
    """A cache of several streams, and `wait(predicate)` until it holds or the deadline passes.

    `watch(resource, namespace=, label_selector=, resource_version=, timeout=, field_selector=)` returns an iterator of
    raw events (`{"type", "object"}`); by default the client's `watch`.
    """

    def __init__(self, connection: Client, streams: List[Stream], deadline: float, clock: Callable[[], float] = time.monotonic,
                 watch: Optional[Callable[..., Any]] = None, observe: Optional[Callable[[str, str, dict], Any]] = None) -> None:
        self.connection = connection
        self._observe = observe
        self.streams = streams
        self.deadline = deadline
        self._clock = clock
        self._watch = watch or connection.watch
        self._events: "queue.Queue[tuple]" = queue.Queue()
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self.cache: Dict[str, Dict[Tuple[str, str], dict]] = {s.name: {} for s in streams}
        self.stats = {"lists": 0, "watches": 0, "reconnects": 0, "relists_after_410": 0, "events": 0}
        self.errors: List[str] = []

    # ------------------------------------------------------------------------------------ reading
    def remaining(self) -> float:
        return self.deadline - self._clock()

    def _list(self, stream: Stream) -> List[dict]:
        extra = {"field_selector": stream.field_selector} if stream.field_selector else {}
        items = self.connection.list(stream.resource, namespace=stream.namespace, label_selector=stream.label_selector, **extra)
        stream.resource_version = self.connection.last_resource_version
        self.stats["lists"] += 1
        return items

    def start(self) -> None:
        """List every stream now (in the caller's thread, so that list errors surface), then start watching."""
        for stream in self.streams:
            self.cache[stream.name] = {_key(obj): obj for obj in self._list(stream)}
            if self._observe is not None:
                for obj in self.cache[stream.name].values():
                    self._observe(stream.name, "ADDED", obj)
        for stream in self.streams:
            thread = threading.Thread(target=self._run, args=(stream,), name="watch-{0}".format(stream.name), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()

    def _run(self, stream: Stream) -> None:
        backoff = MIN_BACKOFF
        while not self._stop.is_set() and self.remaining() > 0:
            try:
                self.stats["watches"] += 1
                extra = {"field_selector": stream.field_selector} if stream.field_selector else {}
                for event in self._watch(stream.resource, namespace=stream.namespace, label_selector=stream.label_selector,
                                         resource_version=stream.resource_version, timeout=max(1, int(self.remaining() + 0.999)), **extra):
                    obj = event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if event.get("type") == "ERROR":
                        if obj.get("code") == GONE:
                            raise ApiFailure("watch {0}".format(stream.name), GONE, "Expired", obj.get("message") or "")
                        raise ApiFailure("watch {0}".format(stream.name), obj.get("code") or 0, obj.get("reason") or "Error", obj.get("message") or "")
                    if version:
                        stream.resource_version = version
                    if event.get("type") != "BOOKMARK":
                        self._events.put(("event", stream.name, event.get("type"), obj))
                    backoff = MIN_BACKOFF
                    if self._stop.is_set():
                        return
                # the server closed the watch (timeoutSeconds or a restart): open it again from where it was
            except Exception as error:  # pylint: disable=broad-exception-caught  # any failure of a watch is reconnected
                if self._stop.is_set():
                    return
                failure = classify(error) if not isinstance(error, ApiFailure) else None
                status = error.status if isinstance(error, ApiFailure) else getattr(failure, "status", None)
                self.errors.append("{0}: {1}".format(stream.name, error))
                if status in REFUSED:
                    refused = error if isinstance(error, ApiFailure) else ApiFailure(
                        "watch {0}".format(stream.name), status, failure.reason, failure.message)
                    self._events.put(("refused", stream.name, None, refused))
                    return
                self.stats["reconnects"] += 1
                if status == GONE:
                    self.stats["relists_after_410"] += 1
                    try:
                        items = self._list(stream)
                    except Exception as list_error:  # pylint: disable=broad-exception-caught
                        self.errors.append("{0}: {1}".format(stream.name, list_error))
                        self._stop.wait(min(backoff, max(0.0, self.remaining())))
                        backoff = min(MAX_BACKOFF, backoff * 2)
                        continue
                    self._events.put(("replace", stream.name, None, items))
                    continue
                self._stop.wait(min(backoff, max(0.0, self.remaining())))
                backoff = min(MAX_BACKOFF, backoff * 2)

    # ------------------------------------------------------------------------------------ the cache
    def _apply(self, item: tuple) -> None:
        kind, name, event_type, payload = item
        if kind == "refused":
            self.stop()
            raise payload
        self.stats["events"] += 1
        if kind == "replace":
            self.cache[name] = {_key(obj): obj for obj in payload}
        elif event_type == "DELETED":
            self.cache[name].pop(_key(payload), None)
        elif event_type in ("ADDED", "MODIFIED"):
            self.cache[name][_key(payload)] = payload
        if self._observe is not None and kind == "event":
            self._observe(name, event_type, payload)

    def objects(self, name: str) -> List[dict]:
        return list(self.cache.get(name, {}).values())

    def wait(self, predicate: Callable[["WatchSet"], bool], wake_every: Optional[float] = None) -> bool:
        """Apply events until `predicate(self)` is true (True) or the deadline passes (False). The predicate is
        asked once at the start, after each batch of events that arrived together, and, with `wake_every`, after
        that many seconds without events (for a caller that retries on a timer). A watch refused with 401 or 403
        stops every stream and raises its ApiFailure."""
        if predicate(self):
            return True
        while True:
            remaining = self.remaining()
            if remaining <= 0:
                return False
            try:
                item = self._events.get(timeout=min(remaining, wake_every) if wake_every else remaining)
            except queue.Empty:   # woken up, or the deadline: ask once more (the loop's top ends at the deadline)
                if predicate(self):
                    return True
                continue
            self._apply(item)
            while True:
                try:
                    self._apply(self._events.get_nowait())
                except queue.Empty:
                    break
            if predicate(self):
                return True
