"""Scenarios: YAML files that describe the clusters to simulate. See scenarios/README.md for the format."""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from . import generate
from .api import Cluster
from .clock import Clock
from .errors import ApiError
from .metrics import usage as metrics_usage
from .rbac import check_user
from .resources import DEFAULT_BUNDLES, KUBERNETES_BUNDLES, Registry, resolve_bundles

SCENARIO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_TOP_KEYS = {"name", "description", "timeScale", "kubernetes", "clusters", "extends", "rbac", "users"}
_CLUSTER_KEYS = {"bundles", "namespaces", "objects", "logs", "generate", "history", "remove", "metrics"}


class ScenarioError(ValueError):
    pass


@dataclass
class Scenario:
    name: str
    description: str = ""
    time_scale: float = 1.0
    kubernetes: dict = field(default_factory=lambda: {"gitVersion": "v1.35.0"})
    clusters: dict[str, dict] = field(default_factory=dict)
    path: str = ""
    rbac: bool = False
    users: list[dict] = field(default_factory=list)


def available() -> list[str]:
    return sorted(f[:-5] for f in os.listdir(SCENARIO_DIR) if f.endswith(".yaml"))


def resolve_path(name_or_path: str) -> str:
    if os.path.isfile(name_or_path):
        return name_or_path
    candidate = os.path.join(SCENARIO_DIR, name_or_path if name_or_path.endswith(".yaml") else f"{name_or_path}.yaml")
    if os.path.isfile(candidate):
        return candidate
    raise ScenarioError(f"scenario {name_or_path!r} not found: give a path to a YAML file or one of "
                        f"{', '.join(available())}")


def _identity(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name")


def _merge(base: dict, extra: dict) -> dict:
    """`extends`: scalars and bundles are overridden; namespaces and logs are appended; an object replaces
    the base's object of the same apiVersion, kind, namespace and name (others are appended); `remove`
    lists base objects to drop (by kind, namespace and name)."""
    result = copy.deepcopy(base)
    for key, value in extra.items():
        if key == "clusters":
            clusters = result.setdefault("clusters", {})
            for cname, cdata in (value or {}).items():
                target = clusters.setdefault(cname, {})
                for ckey, cvalue in (cdata or {}).items():
                    if ckey == "objects":
                        target["objects"] = _merge_objects(target.get("objects") or [], cvalue or [])
                    elif ckey == "remove":
                        drop = {(r.get("kind"), r.get("namespace"), r.get("name")) for r in cvalue or []}
                        target["objects"] = [o for o in target.get("objects") or []
                                             if _identity(o)[1:] not in drop]
                    elif ckey in ("namespaces", "logs") and isinstance(target.get(ckey), list):
                        target[ckey] = target[ckey] + list(cvalue or [])
                    else:
                        target[ckey] = copy.deepcopy(cvalue)
        elif key != "extends":
            result[key] = copy.deepcopy(value)
    return result


def _merge_objects(base: list[dict], extra: list[dict]) -> list[dict]:
    replacements = {_identity(o): o for o in extra}
    merged = [copy.deepcopy(replacements.pop(_identity(o), o)) for o in base]
    return merged + [copy.deepcopy(o) for o in extra if _identity(o) in replacements]


def load(name_or_path: str, _seen: tuple[str, ...] = ()) -> Scenario:
    path = resolve_path(name_or_path)
    if path in _seen:
        raise ScenarioError(f"scenario {path}: 'extends' loops through {' -> '.join(_seen)}")
    with open(path, encoding="utf-8") as handle:
        try:
            data = yaml.safe_load(handle) or {}
        except yaml.YAMLError as exc:
            raise ScenarioError(f"scenario {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario {path}: the top level must be a mapping")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ScenarioError(f"scenario {path}: unknown key(s) {sorted(unknown)}; known: {sorted(_TOP_KEYS)}")
    if data.get("extends"):
        base = load(data["extends"], _seen + (path,))
        data = _merge({"name": base.name, "description": base.description, "timeScale": base.time_scale,
                       "kubernetes": base.kubernetes, "clusters": base.clusters, "rbac": base.rbac,
                       "users": base.users}, data)
    clusters = data.get("clusters") or {"workload": {}}
    for cname, cdata in clusters.items():
        unknown = set(cdata or {}) - _CLUSTER_KEYS
        if unknown:
            raise ScenarioError(f"scenario {path}: clusters.{cname}: unknown key(s) {sorted(unknown)}; known: "
                                f"{sorted(_CLUSTER_KEYS)}")
        if (cdata or {}).get("metrics") is not None:
            _metrics_config(f"scenario {path}: clusters.{cname}.metrics", cdata["metrics"])
    return Scenario(name=data.get("name") or os.path.basename(path)[:-5], description=data.get("description", ""),
                    time_scale=float(data.get("timeScale", 1.0)),
                    kubernetes=data.get("kubernetes") or {"gitVersion": "v1.35.0"},
                    clusters=clusters, path=path, rbac=bool(data.get("rbac")), users=_users(path, data.get("users")))


def _users(path: str, users: Any) -> list[dict]:
    """`users: [{name, token, groups, certificate}]`: the users the simulator knows, by bearer token or by a client
    certificate made for the run (see rbac.py)."""
    if users in (None, []):
        return []
    if not isinstance(users, list):
        raise ScenarioError(f"scenario {path}: users must be a list of {{name, token, groups, certificate}}")
    for index, user in enumerate(users):
        try:
            check_user(user)
        except ValueError as exc:
            raise ScenarioError(f"scenario {path}: users[{index}]: {exc}") from None
    return [dict(user) for user in users]


def _metrics_config(where: str, data: Any) -> metrics_usage.Config:
    try:
        return metrics_usage.parse_config(where, data)
    except metrics_usage.ConfigError as exc:
        raise ScenarioError(str(exc)) from None


def build_cluster(name: str, spec: dict, clock: Clock) -> Cluster:
    bundles = spec.get("bundles") or DEFAULT_BUNDLES.get(name, KUBERNETES_BUNDLES)
    try:
        registry = Registry(resolve_bundles(bundles))
    except ValueError as exc:
        raise ScenarioError(f"clusters.{name}.bundles: {exc}") from None
    return Cluster(name, registry, clock, history=int(spec.get("history", 50_000)))


def populate(cluster: Cluster, spec: dict) -> None:
    """Create the scenario's namespaces, objects and logs in the cluster."""
    namespaces = list(SYSTEM_NAMESPACES) + list(spec.get("namespaces") or [])
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                                     for n in dict.fromkeys(namespaces)]
    objects += list(spec.get("objects") or [])
    if spec.get("generate"):
        objects += generate.objects(spec["generate"])
    for index, obj in _population_order(objects):
        where = f"clusters.{cluster.name}.objects[{index}]"
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
            raise ScenarioError(f"{where}: every object needs apiVersion and kind")
        rt = cluster.registry.by_kind(obj["apiVersion"], obj["kind"])
        if rt is None:
            raise ScenarioError(f"{where}: kind {obj['kind']} ({obj['apiVersion']}) is not served by this cluster; "
                                "add its bundle to the cluster's bundles")
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if rt.key == "namespaces" and cluster.store.get("namespaces", "", meta.get("name", "")) is not None:
            continue
        _resolve_owner_uids(cluster, meta, where)
        try:
            cluster.create(rt, meta.get("namespace", "default") if rt.namespaced else None, obj, keep_status=True)
        except ApiError as exc:
            raise ScenarioError(f"{where} ({obj['kind']} {meta.get('name')}): {exc.message}") from None
    for entry in spec.get("logs") or []:
        cluster.append_log(entry["namespace"], entry["pod"], entry.get("container", ""), entry.get("lines", []))
    if spec.get("metrics") is not None:   # the usage model, and the Prometheus Service and token Secret it needs
        metrics_usage.install(cluster, _metrics_config(f"clusters.{cluster.name}.metrics", spec["metrics"]))


def _population_order(objects: list) -> list[tuple[int, Any]]:
    """(index, object) in creation order: Namespaces, then ServiceAccounts, then the rest as listed, so that
    the ServiceAccount admission finds a Pod's account whatever the list order (and `extends` appends)."""
    def rank(obj: Any) -> int:
        kind = obj.get("kind") if isinstance(obj, dict) and obj.get("apiVersion") == "v1" else None
        return {"Namespace": 0, "ServiceAccount": 1}.get(kind, 2)
    return sorted(enumerate(objects), key=lambda item: rank(item[1]))


def _resolve_owner_uids(cluster: Cluster, meta: dict, where: str) -> None:
    """Scenario ownerReferences may name their owner without a uid; fill it in from the created owner."""
    for ref in meta.get("ownerReferences") or []:
        if ref.get("uid"):
            continue
        rt = cluster.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        owner = rt and cluster.store.get(rt.key, meta.get("namespace", "default") if rt.namespaced else "",
                                         ref.get("name", ""))
        if not owner:
            raise ScenarioError(f"{where}: ownerReference to {ref.get('kind')} {ref.get('name')} which is not "
                                "defined earlier in the scenario")
        ref["uid"] = owner.obj["metadata"]["uid"]
