"""What list, get and watch answers carry, per the negotiated Target (negotiation.py): the resource's objects
(through conversion.served for kinds stored in another version), a Table, or PartialObjectMetadata[List]; and the
timing of a watch's bookmarks (the cache watcher's nextBookmarkTime)."""
from __future__ import annotations

from typing import Any, Iterable

from . import conversion, negotiation, tables
from .negotiation import PARTIAL, PARTIAL_LIST, TABLE, Target
from .resources import ResourceType
from .store import BOOKMARK, DELETED, Entry, Event, encode

BOOKMARK_FREQUENCY = 60.0   # the cacher's bookmarkFrequency: a bookmark about every minute
PRE_TIMEOUT = 2.0           # and one 2 s before the watch's timeout


def served_objects(rt: ResourceType, entries: Iterable[Entry]) -> Iterable[dict]:
    if conversion.converts(rt):
        return (conversion.served(rt, entry.obj) for entry in entries)
    return (entry.obj for entry in entries)


def object_answer(rt: ResourceType, obj: dict, target: Target, include: str) -> dict:
    """A single object (get and the writes) as the target asks."""
    if target.kind == TABLE:
        return _versioned(tables.table(rt, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                                       include), target)
    if target.kind == PARTIAL:
        return negotiation.partial(obj, target)
    if target.kind == PARTIAL_LIST:
        raise negotiation.wrong_shape(target, rt, is_list=False)
    return obj


def list_answer(rt: ResourceType, entries: list[Entry], metadata: dict, target: Target, include: str) -> bytes:
    """A list as the target asks; the plain list of a kind stored as served joins the cached encodings."""
    if target.kind == PARTIAL:
        raise negotiation.wrong_shape(target, rt, is_list=True)
    if target.kind == TABLE:
        return encode(_versioned(tables.table(rt, served_objects(rt, entries), metadata, include), target))
    if target.kind == PARTIAL_LIST:
        return encode(negotiation.partial_list(served_objects(rt, entries), metadata, target))
    head = encode({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": metadata})[:-1]
    if conversion.converts(rt):
        items = b",".join(encode(obj) for obj in served_objects(rt, entries))
    else:
        items = b",".join(entry.raw for entry in entries)
    return head + b',"items":[' + items + b"]}"


def _versioned(doc: dict, target: Target) -> dict:
    doc["apiVersion"] = target.api_version
    return doc


class EventEncoder:
    """Watch events as the target asks: each object transformed as a get answer would be (a Table watch sends
    its column definitions once, with the first event); PartialObjectMetadataList, which no single object can
    be, leaves the objects as they are, as the watch handler does when a transform fails."""

    def __init__(self, rt: ResourceType, target: Target, include: str):
        self.rt, self.target, self.include = rt, target, include
        self.columns_sent = False

    def encode(self, event: Event) -> bytes:
        return encode({"type": event.type, "object": self._object(event)}) + b"\n"

    def _object(self, event: Event) -> Any:
        rt, target = self.rt, self.target
        if event.type == BOOKMARK:
            mark = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": event.obj["metadata"]}
            if target.kind == PARTIAL:
                return negotiation.partial(mark, target)
            if target.kind == TABLE:   # simplified: an empty Table carrying the bookmark's metadata
                return _versioned(tables.table(rt, [], event.obj["metadata"], self.include, with_columns=False),
                                  target)
            return mark
        obj = conversion.served(rt, event.obj) if conversion.converts(rt) else event.obj
        if event.type == DELETED or obj["metadata"].get("resourceVersion") != str(event.rv):
            obj = dict(obj, metadata=dict(obj["metadata"], resourceVersion=str(event.rv)))
        if target.kind == TABLE:
            table = tables.table(rt, [obj], {"resourceVersion": str(event.rv)}, self.include,
                                 with_columns=not self.columns_sent)
            self.columns_sent = True
            return _versioned(table, target)
        if target.kind == PARTIAL:
            return negotiation.partial(obj, target)
        return obj


def next_bookmark(now: float, deadline: float | None, interval: float) -> float | None:
    """When the next periodic bookmark is due: `interval` from now, but 2 s before the deadline when that comes
    first; none once that moment has passed."""
    due = now + interval
    if deadline is not None and deadline - PRE_TIMEOUT < due:
        due = deadline - PRE_TIMEOUT
    return due if due >= now else None
