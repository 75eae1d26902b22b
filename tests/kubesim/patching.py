"""The three patch formats of the Kubernetes API: JSON merge (RFC 7386), JSON patch (RFC 6902) and
strategic merge (built-in kinds only, with the list merge keys kubectl relies on)."""
from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, bad_request

# Strategic merge metadata: list field name -> merge key (None = merge a list of primitives).
# Keyed by field name with the parent field where the same name means two things (ports).
MERGE_KEYS: dict[str, str | None] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath", "imagePullSecrets": "name",
    "hostAliases": "ip", "topologySpreadConstraints": "topologyKey", "conditions": "type", "taints": "key",
    "ownerReferences": "uid", "finalizers": None, "addresses": "type", "resourceClaims": "name",
    "podIPs": "ip", "hostIPs": "ip", "ephemeralContainerStatuses": "name",
}
_PORTS_KEYS = {"containers": "containerPort", "initContainers": "containerPort", "spec": "port"}


def merge_key(path: tuple[str, ...]) -> tuple[bool, str | None]:
    """(is a merging list, merge key) for the list at path."""
    name = path[-1]
    if name == "ports":
        parent = next((p for p in reversed(path[:-1]) if not p.startswith("[")), "")
        key = _PORTS_KEYS.get(parent)
        return (key is not None, key)
    if name in MERGE_KEYS:
        return True, MERGE_KEYS[name]
    return False, None


# ---------------------------------------------------------------------------------------- merge patch
def json_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


# ----------------------------------------------------------------------------------------- json patch
def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"the server rejected our request due to an error in our request: "
                          f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str], op: str) -> tuple[Any, str]:
    parent = doc
    for part in parts[:-1]:
        if isinstance(parent, dict) and part in parent:
            parent = parent[part]
        elif isinstance(parent, list) and part.isdigit() and int(part) < len(parent):
            parent = parent[int(part)]
        else:
            raise _json_patch_error(op, "/" + "/".join(parts), "missing path")
    return parent, parts[-1]


def _json_patch_error(op: str, path: str, why: str) -> ApiError:
    return ApiError(422, "Invalid", f'the server rejected our request due to an error in our request: '
                    f'jsonpatch {op} operation does not apply: doc is missing path: "{path}": {why}')


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for operation in operations:
        op, path = operation.get("op"), operation.get("path", "")
        parts = _pointer(path)
        if op in ("move", "copy"):
            from_parts = _pointer(operation.get("from", ""))
            src_parent, src_key = _resolve(doc, from_parts, op)
            value = _get(src_parent, src_key, op, operation.get("from"))
            if op == "move":
                _remove(src_parent, src_key, op, operation.get("from"))
            doc = _add(doc, parts, copy.deepcopy(value), op)
        elif op == "add":
            doc = _add(doc, parts, copy.deepcopy(operation.get("value")), op)
        elif op == "remove":
            parent, key = _resolve(doc, parts, op)
            _remove(parent, key, op, path)
        elif op == "replace":
            if not parts:
                doc = copy.deepcopy(operation.get("value"))
                continue
            parent, key = _resolve(doc, parts, op)
            _get(parent, key, op, path)
            if isinstance(parent, list):
                parent[int(key)] = copy.deepcopy(operation.get("value"))
            else:
                parent[key] = copy.deepcopy(operation.get("value"))
        elif op == "test":
            parent, key = _resolve(doc, parts, op) if parts else (None, None)
            actual = doc if not parts else _get(parent, key, op, path)
            if actual != operation.get("value"):
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                               f"request: testing value {path} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {op}")
    return doc


def _get(parent: Any, key: str, op: str, path: str) -> Any:
    if isinstance(parent, dict) and key in parent:
        return parent[key]
    if isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
        return parent[int(key)]
    raise _json_patch_error(op, path, "missing path")


def _remove(parent: Any, key: str, op: str, path: str) -> None:
    _get(parent, key, op, path)
    if isinstance(parent, list):
        del parent[int(key)]
    else:
        del parent[key]


def _add(doc: Any, parts: list[str], value: Any, op: str) -> Any:
    if not parts:
        return value
    parent, key = _resolve(doc, parts, op)
    if isinstance(parent, list):
        if key == "-":
            parent.append(value)
        elif key.isdigit() and int(key) <= len(parent):
            parent.insert(int(key), value)
        else:
            raise _json_patch_error(op, "/" + "/".join(parts), "invalid index")
    elif isinstance(parent, dict):
        parent[key] = value
    else:
        raise _json_patch_error(op, "/" + "/".join(parts), "missing path")
    return doc


# ------------------------------------------------------------------------------------ strategic merge
def strategic_merge_patch(target: Any, patch: Any) -> Any:
    return _smp_map(target if isinstance(target, dict) else {}, patch, ())


def _smp_map(target: dict, patch: dict, path: tuple[str, ...]) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = copy.deepcopy(target)
    retain = patch.get("$retainKeys")
    orders = {k.split("/", 1)[1]: v for k, v in patch.items() if k.startswith("$setElementOrder/")}
    deletions = {k.split("/", 1)[1]: v for k, v in patch.items() if k.startswith("$deleteFromPrimitiveList/")}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = _smp_map(current if isinstance(current, dict) else {}, value, path + (key,))
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _smp_list(current if isinstance(current, list) else [], value, path + (key,))
        else:
            result[key] = copy.deepcopy(value)
    for key, values in deletions.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _apply_order(result[key], order, path + (key,))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(target: list, patch: list, path: tuple[str, ...]) -> list:
    merging, key = merge_key(path)
    if not merging:
        return [copy.deepcopy(v) for v in patch if not (isinstance(v, dict) and "$patch" in v)]
    if key is None:  # list of primitives: union, keeping order
        result = list(target)
        for value in patch:
            if value not in result:
                result.append(value)
        return result
    result = [copy.deepcopy(v) for v in target]
    for item in patch:
        if not isinstance(item, dict):
            continue
        if item.get("$patch") == "replace":
            return [copy.deepcopy(v) for v in patch if v is not item]
        index = next((i for i, v in enumerate(result)
                      if isinstance(v, dict) and v.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append(_smp_map({}, item, path + ("[]",)))
        else:
            result[index] = _smp_map(result[index], item, path + ("[]",))
    return result


def _apply_order(items: list, order: list, path: tuple[str, ...]) -> list:
    key = merge_key(path)[1]

    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else (
            next(iter(item.values()), None) if isinstance(item, dict) else item)
    wanted = [ident(o) if isinstance(o, dict) else o for o in order]
    ranked = sorted(items, key=lambda it: wanted.index(ident(it)) if ident(it) in wanted else len(wanted))
    return ranked
