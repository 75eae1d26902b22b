"""Discovery documents: /version, /api, /apis, and the resource list of each group-version. Served as the
plain (unaggregated) documents, which clients accept when they offer aggregated discovery."""
from __future__ import annotations

from .resources import Registry, ResourceType


def version_info(version: dict) -> dict:
    git = version.get("gitVersion", "v1.35.0")
    major, minor = git.lstrip("v").split(".")[:2]
    return {
        "major": version.get("major", major), "minor": version.get("minor", minor), "gitVersion": git,
        "gitCommit": "kubesim", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0", "compiler": "gc", "platform": "linux/amd64",
    }


def api_versions(address: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


def _group(name: str, versions: list[str]) -> dict:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry, aggregated: dict[str, list[str]] | None = None) -> dict:
    """The served groups, then those of aggregated API servers (virt-api's subresources.kubevirt.io)."""
    groups = [_group(g, v) for g, v in registry.group_versions().items() if g]
    groups += [_group(g, list(v)) for g, v in (aggregated or {}).items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def aggregated_group(name: str, versions) -> dict:
    """The APIGroup of a group served by an aggregated API server."""
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, list(versions))}


def api_group(registry: Registry, group: str) -> dict | None:
    versions = registry.group_versions().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _resource(rt: ResourceType) -> dict:
    entry = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced, "kind": rt.kind,
             "verbs": list(rt.verbs), "storageVersionHash": rt.kind[:11]}
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def _subresource(rt: ResourceType, sub: str) -> dict:
    kinds = {"eviction": ("policy", "v1", "Eviction", ["create"]), "log": ("", "", "Pod", ["get"]),
             "binding": ("", "", "Binding", ["create"]),
             "scale": ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
             "finalize": ("", "", rt.kind, ["update"])}
    group, version, kind, verbs = kinds.get(sub, ("", "", rt.kind, ["get", "patch", "update"]))
    entry = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced, "kind": kind,
             "verbs": verbs}
    if group:
        entry["group"], entry["version"] = group, version
    return entry


def resource_list(registry: Registry, group: str, version: str) -> dict | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources = []
    for rt in types:
        resources.append(_resource(rt))
        resources.extend(_subresource(rt, sub) for sub in rt.subresources)
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}
