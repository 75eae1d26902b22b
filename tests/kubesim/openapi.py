"""A minimal OpenAPI v3 for kubectl: the root lists each group-version, and each group-version document
has the resource paths with a `patch` operation that carries `x-kubernetes-group-version-kind` and the
`fieldValidation` parameter. That tells kubectl to use server-side field validation; no schemas are served,
so `kubectl explain` is not supported (documented simplification)."""
from __future__ import annotations

import hashlib

from .resources import Registry


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def root(registry: Registry) -> dict:
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            path = _gv_path(group, version)
            digest = hashlib.sha256(repr([(t.kind, t.plural) for t in registry.in_group_version(group, version)])
                                    .encode()).hexdigest()[:16].upper()
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def group_version_document(registry: Registry, gv_path: str) -> dict | None:
    parts = gv_path.strip("/").split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths = {}
    for rt in types:
        prefix = "/" + _gv_path(group, version)
        item = (f"{prefix}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced
                else f"{prefix}/{rt.plural}/{{name}}")
        gvk = {"group": group, "version": version, "kind": rt.kind}
        params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                  {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                  {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
        operation = {"operationId": f"patch{rt.kind}", "x-kubernetes-action": "patch",
                     "x-kubernetes-group-version-kind": gvk, "parameters": params,
                     "responses": {"200": {"description": "OK"}}}
        paths[item] = {"patch": operation,
                       "put": {**operation, "operationId": f"replace{rt.kind}", "x-kubernetes-action": "put"}}
        collection = item.rsplit("/", 1)[0]
        paths[collection] = {"post": {**operation, "operationId": f"create{rt.kind}", "x-kubernetes-action": "post"}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "unversioned"}, "paths": paths,
            "components": {"schemas": {}}}
