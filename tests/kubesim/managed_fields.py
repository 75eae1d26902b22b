"""Field management (`metadata.managedFields`) and server-side apply conflicts, as structured-merge-diff's
`fieldpath`/`merge` packages and apimachinery's `util/managedfields` keep them.

A field set is a set of paths; a path is a tuple of FieldsV1 tokens: `f:<field>` for a struct field or map
key, `k:{"name":"web"}` for an item of an associative list by its merge key, `v:<json>` for an item of a set
(a list of primitives that merges). An applied configuration owns its leaves (scalars, atomic lists and maps,
nulls, empty maps) and list items; an Update also owns the maps of data (labels, annotations, ConfigMap data,
...) and the merging lists it adds, which FieldsV1 marks with `.` (`f:data: {".": {}, "f:k": {}}`).

Simplified (no OpenAPI schemas here): which maps hold data, which are atomic and which lists merge come from
field names (`GRANULAR_MAPS`, `ATOMIC_MAPS`, `patching.merge_key`), with one merge key per list (upstream
container ports are keyed by `containerPort` and `protocol`); an Update owns an added struct (such as
`securityContext`) only through its fields (upstream also marks it when its Go field is a pointer); every list
of a custom kind is atomic; one apiVersion per kind, so no conversion between versions; no `ancient-changes` cap
on Update managers, and the client-side apply annotation is neither upgraded nor kept in step
(`kubectl.kubernetes.io/last-applied-configuration`).
"""
from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import patching
from .errors import ApiError, bad_request

Path = tuple[str, ...]
ManagerKey = tuple[str, str, str]   # (manager, operation, subresource): one entry each, as BuildManagerIdentifier
APPLY, UPDATE = "Apply", "Update"
BEFORE_FIRST_APPLY = "before-first-apply"
# Maps whose keys are data rather than fields of a struct: an Update that adds one owns the map (`.`) too.
GRANULAR_MAPS = frozenset({"labels", "annotations", "data", "binaryData", "stringData", "nodeSelector",
                           "matchLabels", "limits", "requests", "capacity", "allocatable", "hard", "used",
                           "parameters"})
# Maps that are one value (LabelSelector and NodeSelector are atomic structs, a Service selector an atomic map).
ATOMIC_MAPS = frozenset({"selector", "namespaceSelector", "labelSelector", "podSelector",
                         "requiredDuringSchedulingIgnoredDuringExecution"})
# Lists that the zero value of their Go struct already has (no omitempty), so creating one adds no `.`.
_ZERO_VALUE_LISTS = frozenset({"containers", "rules"})
# What the stripMeta manager keeps out of every field set: identity and server-owned metadata.
_STRIPPED = {"f:apiVersion", "f:kind"}
_STRIPPED_META = {"f:name", "f:namespace", "f:creationTimestamp", "f:selfLink", "f:uid", "f:generation",
                  "f:managedFields", "f:resourceVersion"}
_EMPTY_MAP: dict = {}


class _Node:
    """The value of a member that holds other members (an item, a data map): it compares equal to every
    other _Node, as such a member changes only through its children."""
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Node)

    __hash__ = object.__hash__


NODE = _Node()


# ------------------------------------------------------------------------------------------ field sets
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)   # one encoder: json.dumps builds one a call


def _token_json(value: Any) -> str:
    return _COMPACT.encode(value)


@dataclass(frozen=True)
class _Walk:
    """How an object's members are read. lists_merge: lists with merge keys (built-in kinds) hold items,
    others are one value. marks: the members a comparison (an Update) reports for a map or list that appears
    or goes: the node itself too (`f:data: {".": {}}`), as the compare walker adds every new non-leaf path;
    a field set from a configuration (toFieldSet, Apply) has only the leaves and items."""
    lists_merge: bool
    marks: bool

    def map(self, value: dict, path: Path, names: tuple[str, ...], out: dict) -> None:
        for key, child in value.items():
            self.field(child, key, path + ("f:" + key,), names + (key,), out)

    def field(self, value: Any, key: str, path: Path, names: tuple[str, ...], out: dict) -> None:
        """Add the members under one field (named key, at path) with their values to out."""
        if isinstance(value, dict) and key not in ATOMIC_MAPS:
            if self.marks and key in GRANULAR_MAPS:
                out[path] = NODE
            elif not value:
                out[path] = _EMPTY_MAP
            self.map(value, path, names, out)
        elif isinstance(value, list):
            self.list(value, path, names, out)
        else:
            out[path] = value

    def item_tokens(self, items: list, names: tuple[str, ...]) -> list[str] | None:
        """The tokens of a merging list's items (`k:` by merge key, `v:` for a set); None for an atomic list."""
        merging, merge_key = patching.merge_key(names) if self.lists_merge else (False, None)
        if merging and merge_key is None and all(not isinstance(item, (dict, list)) for item in items):
            return ["v:" + _token_json(item) for item in items]
        if merging and merge_key and all(isinstance(item, dict) and merge_key in item for item in items):
            return ["k:" + _token_json({merge_key: item[merge_key]}) for item in items]
        return None

    def list(self, items: list, path: Path, names: tuple[str, ...], out: dict) -> None:
        tokens = self.item_tokens(items, names)
        if tokens is None:
            out[path] = items   # atomic: the list is one value
            return
        if self.marks and names[-1] not in _ZERO_VALUE_LISTS:
            out[path] = NODE
        for token, item in zip(tokens, items):
            out[path + (token,)] = NODE
            if isinstance(item, dict):
                self.map(item, path + (token,), names + ("[]",), out)

    # The same members written straight as FieldsV1 (what encode_fields makes of them), without building paths:
    # the cheap way to record a create, which owns everything.
    def fields_v1(self, value: dict, names: tuple[str, ...] = ()) -> dict:
        return {"f:" + key: self._field_v1(value[key], key, names + (key,)) for key in _sorted_fields(tuple(value))}

    def _field_v1(self, value: Any, key: str, names: tuple[str, ...]) -> dict:
        if isinstance(value, dict) and key not in ATOMIC_MAPS:
            children = self.fields_v1(value, names)
            return {".": {}, **children} if children and self.marks and key in GRANULAR_MAPS else children
        tokens = self.item_tokens(value, names) if isinstance(value, list) else None
        if tokens is None:
            return {}
        items = {}
        for token, item in zip(tokens, value):
            children = self.fields_v1(item, names + ("[]",)) if isinstance(item, dict) else {}
            items[token] = {".": {}, **children} if children else {}
        ordered = {token: items[token] for token in sorted(items, key=_order)}
        return {".": {}, **ordered} if ordered and self.marks and names[-1] not in _ZERO_VALUE_LISTS else ordered


def _strip(obj: dict) -> dict:
    """The top level without the fields no manager owns."""
    top = {k: v for k, v in obj.items() if "f:" + k not in _STRIPPED}
    meta = top.get("metadata")
    if isinstance(meta, dict):
        owned = {k: v for k, v in meta.items() if "f:" + k not in _STRIPPED_META}
        if owned:
            top["metadata"] = owned
        else:
            del top["metadata"]   # metadata itself is never a member
    return top


@dataclass(frozen=True)
class Scope:
    """What a write may own: builtin kinds merge lists by key; the main resource of a kind with a status
    subresource never owns status (its reset fields), a /status write owns only status."""
    builtin: bool
    status_subresource: bool
    subresource: str = ""

    def sections(self, obj: dict) -> dict:
        top = _strip(obj)
        if self.subresource == "status":
            return {"status": top["status"]} if "status" in top else {}
        if self.status_subresource:
            top.pop("status", None)
        return top


def field_values(obj: dict, scope: Scope) -> dict[Path, Any]:
    """Every member of obj's field set, with its value."""
    out: dict[Path, Any] = {}
    _Walk(scope.builtin, marks=False).map(scope.sections(obj), (), (), out)
    return out


def _diff(walk: _Walk, old: dict, new: dict, path: Path, names: tuple[str, ...], old_out: dict,
          new_out: dict) -> None:
    """The members of the parts of two maps that differ (equal subtrees are skipped: cheap on big objects)."""
    for key in old.keys() | new.keys():
        in_old, in_new = key in old, key in new
        if in_old and in_new and old[key] == new[key]:
            continue
        before, after = old.get(key), new.get(key)
        child_path, child_names = path + ("f:" + key,), names + (key,)
        if isinstance(before, dict) and isinstance(after, dict) and before and after and key not in ATOMIC_MAPS:
            _diff(walk, before, after, child_path, child_names, old_out, new_out)
            continue
        if in_old:
            walk.field(before, key, child_path, child_names, old_out)
        if in_new:
            walk.field(after, key, child_path, child_names, new_out)


@dataclass
class Comparison:
    added: set[Path]
    removed: set[Path]
    modified: set[Path]

    @property
    def changed(self) -> set[Path]:
        return self.added | self.modified

    def is_same(self) -> bool:
        return not (self.added or self.removed or self.modified)


def compare(old: dict | None, new: dict, scope: Scope) -> Comparison:
    old_out: dict[Path, Any] = {}
    new_out: dict[Path, Any] = {}
    _diff(_Walk(scope.builtin, marks=True), scope.sections(old) if old else {}, scope.sections(new), (), (),
          old_out, new_out)
    both = old_out.keys() & new_out.keys()
    return Comparison(set(new_out.keys() - both), set(old_out.keys() - both),
                      {path for path in both if old_out[path] != new_out[path]})


# --------------------------------------------------------------------------------------- FieldsV1 form
_RANK = {"f": 0, "k": 1, "v": 2, "i": 3}   # PathElement order: field names, keys, values, indexes


@functools.lru_cache(maxsize=65536)
def _order(token: str) -> tuple:
    """A token's place among its siblings (memoised: the same tokens recur in every object of a kind)."""
    kind, text = token[0], token[2:]
    if kind in "kv":
        parsed = json.loads(text)
        items = sorted(parsed.items()) if isinstance(parsed, dict) else [("", parsed)]
        return (_RANK[kind], tuple((name, isinstance(v, str), v if not isinstance(v, (dict, list)) else str(v))
                                   for name, v in items))
    return (_RANK.get(kind, 4), ((text, True, text),))


@functools.lru_cache(maxsize=16384)
def _sorted_fields(keys: tuple[str, ...]) -> tuple[str, ...]:
    """A map's keys in FieldsV1 order (memoised: objects of a kind share their key sets)."""
    return tuple(sorted(keys, key=lambda key: _order("f:" + key)))


def _path_order(path: Path) -> tuple:
    return tuple(_order(token) for token in path)


def encode_fields(paths: Iterable[Path]) -> dict:
    """FieldsV1: a trie of tokens in order; `.` marks a member that also has children, `{}` a member leaf.
    Built in one pass over the sorted paths (a parent sorts before its children)."""
    root: dict = {}
    nodes: dict[Path, dict] = {(): root}
    members: set[Path] = set()

    def node_of(path: Path) -> dict:
        node = nodes.get(path)
        if node is None:
            parent = node_of(path[:-1])
            if path[:-1] in members and not parent:
                parent["."] = {}   # a member's own mark comes before its children
            node = nodes[path] = parent.setdefault(path[-1], {})
        return node

    for path in sorted(paths, key=_path_order):
        node_of(path)
        members.add(path)
    return root


def decode_fields(fields: Any, path: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    if not isinstance(fields, dict):
        return paths
    for token, child in fields.items():
        if token == ".":
            paths.add(path)
        elif isinstance(child, dict) and child:
            paths |= decode_fields(child, path + (token,))
        else:
            paths.add(path + (token,))
    return paths


def path_string(path: Path) -> str:
    """fieldpath.Path.String(): `.spec.containers[name="web"].image`, `.metadata.finalizers[="x"]`."""
    parts = []
    for token in path:
        kind, text = token[0], token[2:]
        if kind == "f":
            parts.append("." + text)
        elif kind == "k":
            keys = json.loads(text)
            parts.append("[" + ",".join(f"{name}={_token_json(keys[name])}" for name in sorted(keys)) + "]")
        elif kind == "v":
            parts.append(f"[={text}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


# ------------------------------------------------------------------------------------------- managers
@dataclass
class Managers:
    """The decoded managedFields: one field set per manager identity, with its apiVersion and time."""
    sets: dict[ManagerKey, set[Path]] = field(default_factory=dict)
    versions: dict[ManagerKey, str] = field(default_factory=dict)
    times: dict[ManagerKey, str] = field(default_factory=dict)

    @classmethod
    def decode(cls, entries: Any) -> Managers:
        managers = cls()
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or not entry:
                continue
            key = (entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", ""))
            managers.sets[key] = managers.sets.get(key, set()) | decode_fields(entry.get("fieldsV1"))
            managers.versions[key] = entry.get("apiVersion", "")
            if entry.get("time"):
                managers.times[key] = entry["time"]
        return managers

    def encode(self) -> list[dict]:
        """The entries as EncodeObjectManagedFields sorts them: Apply first, then by time, manager, version,
        subresource."""
        rows = []
        for key, paths in self.sets.items():
            if not paths:
                continue
            manager, operation, subresource = key
            entry: dict[str, Any] = {"manager": manager, "operation": operation,
                                     "apiVersion": self.versions.get(key, "")}
            if key in self.times:
                entry["time"] = self.times[key]
            entry["fieldsType"] = "FieldsV1"
            entry["fieldsV1"] = encode_fields(paths)
            if subresource:
                entry["subresource"] = subresource
            rows.append(entry)
        rows.sort(key=lambda e: (e["operation"] != APPLY, e.get("time", ""), e["manager"], e["apiVersion"],
                                 e.get("subresource", "")))
        return rows

    def disown(self, paths: set[Path], keep: ManagerKey | None = None) -> None:
        """Others lose paths (taken over or removed); managers left with nothing go."""
        for key in list(self.sets):
            if key != keep:
                self.sets[key] -= paths
                if not self.sets[key]:
                    del self.sets[key]

    def owned(self) -> set[Path]:
        return set().union(*self.sets.values()) if self.sets else set()


def _is_reset(entries: Any) -> bool:
    """`managedFields: []` or `[{}]` in a request resets field management (isResetManagedFields)."""
    return isinstance(entries, list) and (not entries or (len(entries) == 1 and entries[0] == {}))


def _base_managers(old: dict | None, new: dict, subresource: str) -> Managers:
    """decodeLiveOrNew: a main-resource write may set managedFields; none given (or none decodable) keeps
    the live ones; a subresource write always keeps the live ones."""
    live = (old or {}).get("metadata", {}).get("managedFields")
    given = new.get("metadata", {}).get("managedFields")
    if subresource:
        return Managers.decode(live)
    if _is_reset(given):
        return Managers()
    if given is not None and given is not live:
        managers = Managers.decode(given)
        if managers.sets:
            return managers
    return Managers.decode(live)


def _store(obj: dict, managers: Managers) -> None:
    entries = managers.encode()
    if entries:
        obj["metadata"]["managedFields"] = entries
    else:
        obj["metadata"].pop("managedFields", None)


def record_update(scope: Scope, api_version: str, old: dict | None, new: dict, manager: str, now: str) -> None:
    """An Update (create, PUT, non-apply patch) by manager: it owns what it changed, others lose it and what
    it removed. Sets new's managedFields. An existing object without managedFields stays untracked
    (skipNonAppliedManager); a create is always tracked."""
    managers = _base_managers(old, new, scope.subresource)
    if old is not None and not managers.sets:
        new["metadata"].pop("managedFields", None)
        return
    if old is None and not managers.sets:
        fields = _Walk(scope.builtin, marks=True).fields_v1(scope.sections(new))
        if fields:
            new["metadata"]["managedFields"] = [{"manager": manager, "operation": UPDATE, "apiVersion": api_version,
                                                 "time": now, "fieldsType": "FieldsV1", "fieldsV1": fields}]
        else:
            new["metadata"].pop("managedFields", None)
        return
    diff = compare(old, new, scope)
    changed = diff.changed
    managers.disown(changed | diff.removed)
    key = (manager, UPDATE, scope.subresource)
    mine = (managers.sets.get(key, set()) - diff.removed) | changed
    if mine:
        managers.sets[key] = mine
        managers.versions[key] = api_version
        if changed:
            managers.times[key] = now
    else:
        managers.sets.pop(key, None)
    _store(new, managers)


def record_apply(scope: Scope, api_version: str, live: dict | None, merged: dict, config: dict, manager: str,
                 force: bool, now: str) -> dict:
    """Server-side apply by manager: merged is live with config merged in. The manager now owns exactly
    config's fields; fields it owned before and dropped are removed unless another manager owns them; a
    change to a field another manager owns is a conflict (409) unless force, which takes it over. Returns
    merged with what the applier dropped pruned and managedFields set."""
    key = (manager, APPLY, scope.subresource)
    managers = Managers.decode((live or {}).get("metadata", {}).get("managedFields"))
    if live is not None and not managers.sets:
        # fields of an untracked object are owned by a stand-in Update manager before the first apply
        owner = (BEFORE_FIRST_APPLY, UPDATE, scope.subresource)
        managers.sets[owner] = compare(None, live, scope).added
        managers.versions[owner] = api_version
        managers.times[owner] = now
    last = managers.sets.get(key, set())
    managers.sets[key] = set(field_values(config, scope))
    managers.versions[key] = api_version
    owned = managers.owned()
    result = _prune(merged, last - owned, owned)
    diff = compare(live, result, scope)
    taken = {other: paths & diff.changed for other, paths in managers.sets.items() if other != key}
    taken = {other: paths for other, paths in taken.items() if paths}
    if taken and not force:
        raise conflict_error(taken, managers.versions)
    managers.disown(diff.changed | diff.removed, keep=key)
    if not diff.is_same():
        managers.times[key] = now
    if not managers.sets.get(key):
        managers.sets.pop(key, None)
    _store(result, managers)
    return result


def check_apply_config(config: Any) -> None:
    """An apply configuration may not carry managedFields (the fieldmanager refuses any, even `[]`)."""
    if isinstance(config, dict) and "managedFields" in (config.get("metadata") or {}):
        raise bad_request("metadata.managedFields must be nil")


def _prune(obj: dict, dropped: set[Path], owned: set[Path]) -> dict:
    """obj without the members in dropped (with whatever nobody owns under them); a member that still has
    owned members under it stays, as addBackOwnedItems puts the owners' parents back."""
    if not dropped:
        return obj
    result = copy.deepcopy(obj)
    keep_parents = {path[:depth] for path in owned for depth in range(1, len(path))}
    for path in sorted(dropped, key=len):   # a dropped item goes with everything under it
        if path not in keep_parents:
            _remove(result, path)
    return result


def _remove(obj: dict, path: Path) -> None:
    node: Any = obj
    for token in path[:-1]:
        node = _child(node, token)
        if node is None:
            return
    last = path[-1]
    if isinstance(node, dict) and last.startswith("f:"):
        node.pop(last[2:], None)
    elif isinstance(node, list):
        index = _item_index(node, last)
        if index is not None:
            del node[index]


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict) and token.startswith("f:"):
        return node.get(token[2:])
    if isinstance(node, list):
        index = _item_index(node, token)
        return node[index] if index is not None else None
    return None


def _item_index(items: list, token: str) -> int | None:
    wanted = json.loads(token[2:])
    for index, item in enumerate(items):
        if token.startswith("k:") and isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
            return index
        if token.startswith("v:") and item == wanted:
            return index
    return None


# ------------------------------------------------------------------------------------------- conflicts
def _print_manager(key: ManagerKey, versions: dict[ManagerKey, str]) -> str:
    """printManager: `"m"`, `"m" with subresource "status"`, and `using <apiVersion>` for Update managers."""
    manager, operation, subresource = key
    shown = _token_json(manager)
    if subresource:
        shown += f" with subresource {_token_json(subresource)}"
    if operation == UPDATE:
        shown += f" using {versions.get(key, '')}"
    return shown


def conflict_error(taken: dict[ManagerKey, set[Path]], versions: dict[ManagerKey, str]) -> ApiError:
    """409 Conflict as internal.NewConflictError builds it: one FieldManagerConflict cause per field; the
    message lists the fields per manager, managers in order."""
    conflicts = [(key, path_string(path)) for key in sorted(taken) for path in sorted(taken[key], key=_path_order)]
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {_print_manager(key, versions)}",
               "field": field_path} for key, field_path in conflicts]
    if len(conflicts) == 1:
        key, field_path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_print_manager(key, versions)}: {field_path}"
    else:
        lines = []
        for key in sorted(taken):
            lines.append(f"conflicts with {_print_manager(key, versions)}:")
            lines += [f"- {field_path}" for other, field_path in conflicts if other == key]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})
