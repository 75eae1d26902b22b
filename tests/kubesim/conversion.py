"""Kinds served in more than one version from one storage, as the apiserver converts them on the way in and out
(events.k8s.io/v1 Event over core/v1 Event's storage). `served` and `stored` are identities for every other kind.

Event fields (kubernetes `pkg/apis/events/v1/conversion.go`, through the internal core Event):

| core/v1 | events.k8s.io/v1 |
| --- | --- |
| `involvedObject` | `regarding` |
| `message` | `note` |
| `source` | `deprecatedSource` |
| `firstTimestamp`, `lastTimestamp`, `count` | `deprecatedFirstTimestamp`, `...LastTimestamp`, `...Count` |
| `reportingComponent` | `reportingController` |
| `reason`, `type`, `eventTime`, `series`, `action`, `related`, `reportingInstance` | the same |

A converted object is written as Go's encoder writes that version's struct: fields without `omitempty` or of
struct type are always present (an unset time is `null`, an unset reference or source `{}`, the core
`reportingComponent`/`reportingInstance` `""`), empty `omitempty` strings and counts are left out, and fields the
version does not have are dropped."""
from __future__ import annotations

from typing import Any, Callable

from .resources import ResourceType

# (core/v1 name, events.k8s.io/v1 name, how Go writes the field when unset: "null", "{}", "" or omit (None))
_EVENT_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("involvedObject", "regarding", "{}"),
    ("reason", "reason", None),
    ("message", "note", None),
    ("source", "deprecatedSource", "{}"),
    ("firstTimestamp", "deprecatedFirstTimestamp", "null"),
    ("lastTimestamp", "deprecatedLastTimestamp", "null"),
    ("count", "deprecatedCount", None),
    ("type", "type", None),
    ("eventTime", "eventTime", "null"),
    ("series", "series", None),
    ("action", "action", None),
    ("related", "related", None),
    ("reportingComponent", "reportingController", None),
    ("reportingInstance", "reportingInstance", None),
)
# Where the two structs' tags differ: core/v1 has no omitempty on these two.
_CORE_UNSET = {"reportingComponent": "", "reportingInstance": ""}
_UNSET_VALUE: dict[str, Callable[[], Any]] = {"null": lambda: None, "{}": dict, "": str}


def _convert(obj: dict, api_version: str, pairs: list[tuple[str, str, Any]], unset_overrides: dict) -> dict:
    # Shallow: stored objects are never mutated in place, and writers convert a copy of their body.
    out: dict = {"apiVersion": api_version, "kind": "Event", "metadata": dict(obj.get("metadata") or {})}
    for source, target, unset in pairs:
        value = obj.get(source)
        if value not in (None, "", 0, {}):
            out[target] = value
            continue
        unset = unset_overrides.get(target, unset)
        if unset is not None:
            out[target] = _UNSET_VALUE[unset]()
    return out


def event_to_v1(obj: dict) -> dict:
    """A core/v1 Event as events.k8s.io/v1 serves it."""
    return _convert(obj, "events.k8s.io/v1", list(_EVENT_FIELDS), {})


def event_to_core(obj: dict) -> dict:
    """An events.k8s.io/v1 Event in core/v1 (storage) form."""
    return _convert(obj, "v1", [(v1, core, unset) for core, v1, unset in _EVENT_FIELDS], _CORE_UNSET)


# served API version -> (storage form -> served form, served form -> storage form)
_CONVERTERS: dict[tuple[str, str], tuple[Callable[[dict], dict], Callable[[dict], dict]]] = {
    ("events.k8s.io/v1", "Event"): (event_to_v1, event_to_core),
}


def converts(rt: ResourceType) -> bool:
    """Whether objects of `rt` are stored in another version's form (a read must convert them)."""
    return (rt.api_version, rt.kind) in _CONVERTERS


def served(rt: ResourceType, obj: dict) -> dict:
    """A stored object as `rt`'s version shows it."""
    converter = _CONVERTERS.get((rt.api_version, rt.kind))
    return converter[0](obj) if converter else obj


def stored(rt: ResourceType, obj: dict) -> dict:
    """An object of `rt`'s version in its storage form."""
    converter = _CONVERTERS.get((rt.api_version, rt.kind))
    return converter[1](obj) if converter else obj
