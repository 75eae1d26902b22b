"""The chart reconciler of ACP cluster plugins (what ACP's ModulePlugin/Helm controller does for a plugin's
rendered objects, seen from the API): it keeps every chart-rendered object at "chart rendering + the
ResourcePatches that target it, applied in creation order".

Which objects are chart-rendered (the simulator's rule, documented in the README):
- objects carrying Helm's release markers: annotation `meta.helm.sh/release-name` (and
  `meta.helm.sh/release-namespace`, default the object's namespace) and no controller ownerReference,
  whenever they appear; the release is `<release-namespace>/<release-name>`, as in a ResourcePatch's
  `spec.release`;
- the ACP Descheduler package's objects as a scenario creates them without those markers: ConfigMaps,
  CronJobs and Deployments in namespace `descheduler` labelled `app.kubernetes.io/name=descheduler` and
  without ownerReferences that exist when the controller starts (release `descheduler/descheduler`).
The chart rendering of an object is the object as first seen (at start, when created, or when a user first
edits it). The reconciler owns every top-level field except `apiVersion`, `kind`, `metadata` and `status`
(`data` of a ConfigMap, `spec` of a CronJob): labels, annotations and status are left to others.

It re-renders every 2 simulated seconds (at least 0.2 s of real time apart), and at once when a
chart-rendered object or a ResourcePatch changes, so a direct edit without a ResourcePatch is undone and
deleting a ResourcePatch restores the chart-managed content within seconds.

A ResourcePatch (`operator.alauda.io/v1alpha1`, as in ACP's documentation) has `spec.release`,
`spec.target {apiVersion, kind, namespace, name}` and `spec.jsonPatch` (RFC 6902 operations on the target
object). Simplified: each operation is applied on its own and one that does not apply is skipped (nothing
reports it); operations on `/metadata` are ignored; a deleted chart object is not re-created; ties in
`creationTimestamp` are ordered by resourceVersion; there is no `resourcepatch` finalizer, no status and no
upgrade of the rendering.
"""
from __future__ import annotations

import copy
import weakref

from .. import patching
from ..api import RequestContext
from ..errors import ApiError
from ..store import ADDED, DELETED, MODIFIED, Event
from ..controllers import Controller

RP_KEY = "resourcepatches.operator.alauda.io"
RELEASE_NAME = "meta.helm.sh/release-name"
RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
PACKAGE_NAMESPACE = "descheduler"
PACKAGE_LABEL = ("app.kubernetes.io/name", "descheduler")
PACKAGE_KEYS = ("configmaps", "cronjobs.batch", "deployments.apps")
RESYNC_SECONDS = 2.0
MIN_REAL_RESYNC = 0.2
CONTROLLER_USER = "system:serviceaccount:cpaas-system:chart-reconciler"
_MANAGED_OUT = ("apiVersion", "kind", "metadata", "status")

_CONTROLLERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

Target = tuple  # (resource key, namespace, name)


def controller_for(cluster) -> "ChartController | None":
    return _CONTROLLERS.get(cluster)


def content(obj: dict) -> dict:
    """The part of an object the chart reconciler owns."""
    return {k: copy.deepcopy(v) for k, v in obj.items() if k not in _MANAGED_OUT}


def helm_release(obj: dict) -> str | None:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if not annotations.get(RELEASE_NAME):
        return None
    if any(ref.get("controller") for ref in meta.get("ownerReferences") or []):
        return None   # made by a controller from a rendered object (a ReplicaSet copies its Deployment's annotations)
    return f"{annotations.get(RELEASE_NAMESPACE) or meta.get('namespace', '')}/{annotations[RELEASE_NAME]}"


def package_release(key: str, obj: dict) -> str | None:
    meta = obj.get("metadata") or {}
    if key in PACKAGE_KEYS and meta.get("namespace") == PACKAGE_NAMESPACE and not meta.get("ownerReferences") \
            and (meta.get("labels") or {}).get(PACKAGE_LABEL[0]) == PACKAGE_LABEL[1]:
        return f"{PACKAGE_NAMESPACE}/{PACKAGE_NAMESPACE}"
    return None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_diff(base: dict, new: dict, path: str = "") -> list[dict]:
    """RFC 6902 operations that turn `base` into `new`: objects are compared member by member, anything
    else (lists, strings, numbers) is set whole. Changed or new members use `add`, which also replaces,
    so a patch still applies when an earlier patch that created the member is gone."""
    ops: list[dict] = []
    for key in base:
        if key not in new:
            ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
    for key, value in new.items():
        where = f"{path}/{_escape(key)}"
        if key not in base:
            ops.append({"op": "add", "path": where, "value": copy.deepcopy(value)})
        elif isinstance(value, dict) and isinstance(base[key], dict):
            ops.extend(json_diff(base[key], value, where))
        elif value != base[key]:
            ops.append({"op": "add", "path": where, "value": copy.deepcopy(value)})
    return ops


def apply_patch(doc: dict, operations) -> dict:
    """Apply a ResourcePatch's operations to an object's content, one by one, skipping those that fail."""
    for operation in operations or []:
        if not isinstance(operation, dict) or str(operation.get("path", "")).startswith("/metadata"):
            continue
        try:
            patched = patching.json_patch(doc, [operation])
        except ApiError:
            continue
        if isinstance(patched, dict):
            doc = content(patched)
    return doc


class ChartController(Controller):
    """Keeps chart-rendered objects at their rendering plus ResourcePatches."""

    def __init__(self, cluster):
        super().__init__(cluster)
        self.renderings: dict[Target, dict] = {}   # target -> {"release", "apiVersion", "kind", "content"}

    # ------------------------------------------------------------------------------- what is managed
    def adopt(self, key: str, obj: dict, release: str) -> None:
        meta = obj["metadata"]
        target = (key, meta.get("namespace", ""), meta["name"])
        with self.cluster.lock:
            self.renderings.setdefault(target, {"release": release, "apiVersion": obj.get("apiVersion"),
                                                "kind": obj.get("kind"), "content": content(obj)})

    def release(self, key: str, obj: dict) -> str | None:
        """The release of a chart-rendered object, adopting a Helm-marked one not seen before."""
        meta = obj["metadata"]
        rendering = self.renderings.get((key, meta.get("namespace", ""), meta["name"]))
        if rendering is not None:
            return rendering["release"]
        release = helm_release(obj)
        if release:
            self.adopt(key, obj, release)
        return release

    def rendering(self, target: Target) -> dict | None:
        rendering = self.renderings.get(target)
        return copy.deepcopy(rendering["content"]) if rendering else None

    def patches_for(self, target: Target) -> list[dict]:
        """The ResourcePatches that target an object, in creation order."""
        rendering = self.renderings.get(target)
        if rendering is None:
            return []
        _key, namespace, name = target
        found = []
        for entry in list(self.cluster.store.entries(RP_KEY)):
            rp = entry.obj
            wanted = (rp.get("spec") or {}).get("target") or {}
            if rp["metadata"].get("deletionTimestamp"):
                continue
            if wanted.get("kind") == rendering["kind"] and wanted.get("apiVersion") == rendering["apiVersion"] \
                    and wanted.get("name") == name and (wanted.get("namespace") or rp["metadata"].get("namespace")
                                                        or "") == namespace:
                found.append(rp)
        found.sort(key=lambda rp: (rp["metadata"].get("creationTimestamp", ""),
                                   int(rp["metadata"].get("resourceVersion", 0))))
        return found

    def desired(self, target: Target) -> dict | None:
        doc = self.rendering(target)
        if doc is None:
            return None
        for rp in self.patches_for(target):
            doc = apply_patch(doc, (rp.get("spec") or {}).get("jsonPatch"))
        return doc

    # ------------------------------------------------------------------------------------ reconcile
    def start(self) -> None:
        with self.cluster.lock:
            for rt in self.cluster.registry.types:
                for entry in list(self.cluster.store.entries(rt.key)):
                    release = helm_release(entry.obj) or package_release(rt.key, entry.obj)
                    if release:
                        self.adopt(rt.key, entry.obj, release)
        self._resync()

    def on_event(self, event: Event) -> None:
        if event.key == RP_KEY:
            for obj in (event.obj, event.old):
                target = self._rp_target(obj)
                if target is not None:
                    self.reconcile(target)
            return
        meta = event.obj["metadata"]
        target = (event.key, meta.get("namespace", ""), meta["name"])
        if event.type == DELETED:
            if target in self.renderings:
                with self.cluster.lock:
                    self.renderings.pop(target, None)
            return
        if target not in self.renderings:
            if event.type == ADDED and helm_release(event.obj):
                self.adopt(event.key, event.obj, helm_release(event.obj))
            return
        if event.type in (ADDED, MODIFIED):
            self.reconcile(target)

    def _rp_target(self, rp: dict | None) -> Target | None:
        if not rp:
            return None
        wanted = (rp.get("spec") or {}).get("target") or {}
        rt = self.cluster.registry.by_kind(wanted.get("apiVersion", ""), wanted.get("kind", ""))
        if rt is None:
            return None
        namespace = (wanted.get("namespace") or rp["metadata"].get("namespace") or "") if rt.namespaced else ""
        target = (rt.key, namespace, wanted.get("name", ""))
        return target if target in self.renderings else None

    def reconcile(self, target: Target) -> None:
        key, namespace, name = target
        rt = self.cluster.registry.by_key(key)
        with self.cluster.lock:
            entry = self.cluster.store.get(key, namespace, name)
            if rt is None or entry is None or entry.obj["metadata"].get("deletionTimestamp"):
                return
            wanted = self.desired(target)
            current = entry.obj
            if wanted is None or content(current) == wanted:
                return
            updated = {k: copy.deepcopy(v) for k, v in current.items() if k in _MANAGED_OUT}
            updated.update(wanted)
            try:
                self.cluster.update(rt, namespace or None, name, updated, RequestContext(user=CONTROLLER_USER))
            except ApiError:
                pass

    def _resync(self) -> None:
        for target in list(self.renderings):
            self.reconcile(target)
        interval = max(self.cluster.clock.real_seconds(RESYNC_SECONDS), MIN_REAL_RESYNC)
        self.manager.after(interval, self._resync)


def register(cluster, manager) -> None:
    if cluster.registry.by_key(RP_KEY) is None:
        return
    controller = ChartController(cluster)
    _CONTROLLERS[cluster] = controller
    manager.add(controller)
