"""Helpers shared by the workload controllers (Job, CronJob, Deployment, ReplicaSet, DaemonSet): controller
ownerReferences, Pods from templates, Pod states, conditions, the pod-template hash and status writes.

Upstream: k8s.io/kubernetes pkg/controller (controller_utils.go, controller_ref_manager.go) and
apimachinery's rand.SafeEncodeString for the hash alphabet. Simplified: the template hash is FNV-32a over
the template's canonical JSON (upstream hashes a `spew` dump), so its value differs from a real cluster's
but has the same form and stays stable for one template."""
from __future__ import annotations

import copy
import json

from .. import events
from ..api import now_iso
from ..errors import ApiError
from ..selectors import match_label_selector_object
from ..store import ADDED, DELETED, MODIFIED, Event
from . import Controller

_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def controller_ref(obj: dict) -> dict | None:
    """The ownerReference with `controller: true`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def controlled_by(obj: dict, kind: str, group: str) -> dict | None:
    """The controller ownerReference when it names a `kind` of API group `group`."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind:
        return None
    api_group = (ref.get("apiVersion") or "").rpartition("/")[0]
    return ref if api_group == group else None


def owner_reference(owner: dict) -> dict:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def owned(cluster, owner_uid: str, key: str) -> list[dict]:
    """The stored objects of resource `key` whose controller is the owner with this uid."""
    result = []
    for dep_key, namespace, name in cluster.store.dependents(owner_uid):
        if dep_key != key:
            continue
        entry = cluster.store.get(key, namespace, name)
        if entry is not None and (controller_ref(entry.obj) or {}).get("uid") == owner_uid:
            result.append(entry.obj)
    return result


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_active(pod: dict) -> bool:
    """Upstream IsPodActive: not finished and not being deleted."""
    return not is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def is_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def pod_from_template(template: dict, namespace: str, owner: dict, generate_name: str,
                      extra_labels: dict | None = None) -> dict:
    """A Pod body from a PodTemplateSpec, controlled by `owner` (upstream GetPodFromTemplate)."""
    template_meta = template.get("metadata") or {}
    meta = {"generateName": generate_name, "namespace": namespace, "ownerReferences": [owner_reference(owner)]}
    labels = {**(template_meta.get("labels") or {}), **(extra_labels or {})}
    if labels:
        meta["labels"] = labels
    for field in ("annotations", "finalizers"):
        if template_meta.get(field):
            meta[field] = copy.deepcopy(template_meta[field])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}


def create_pod(cluster, owner: dict, body: dict, component: str) -> dict | None:
    """Create a Pod for `owner` and record SuccessfulCreate (or FailedCreate) on the owner."""
    pods = cluster.registry.by_key("pods")
    try:
        pod = cluster.create(pods, body["metadata"]["namespace"], body)
    except ApiError as err:
        events.record(cluster, owner, "Warning", "FailedCreate", f"Error creating: {err.message}", component)
        return None
    events.record(cluster, owner, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}", component)
    return pod


def delete_pod(cluster, owner: dict, pod: dict, component: str) -> bool:
    """Delete a Pod of `owner` (default grace period) and record SuccessfulDelete on the owner."""
    pods = cluster.registry.by_key("pods")
    meta = pod["metadata"]
    try:
        cluster.delete(pods, meta["namespace"], meta["name"], {"preconditions": {"uid": meta["uid"]}})
    except ApiError:
        return False
    events.record(cluster, owner, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}", component)
    return True


def condition(conditions: list[dict], kind: str) -> dict | None:
    return next((c for c in conditions or [] if c.get("type") == kind), None)


def set_condition(conditions: list[dict] | None, kind: str, status: str, reason: str, message: str,
                  probe: bool = False, update_time: bool = False) -> list[dict]:
    """A new condition list with `kind` set; lastTransitionTime moves only when the status changes.
    `probe` adds lastProbeTime (Jobs), `update_time` lastUpdateTime (Deployments)."""
    now = now_iso()
    result = [copy.deepcopy(c) for c in conditions or []]
    current = condition(result, kind)
    if current is not None and current.get("status") == status and current.get("reason") == reason and \
            current.get("message") == message:
        return result
    new = {"type": kind, "status": status}
    if probe:
        new["lastProbeTime"] = now
    if update_time:
        new["lastUpdateTime"] = now
    new["lastTransitionTime"] = current["lastTransitionTime"] if current is not None and \
        current.get("status") == status and current.get("lastTransitionTime") else now
    new.update(reason=reason, message=message)
    if current is None:
        result.append(new)
    else:
        result[result.index(current)] = new
    return result


def template_hash(template: dict, collision_count: int = 0) -> str:
    """A short stable hash of a Pod template, in the alphabet of upstream's pod-template-hash."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    value = 0x811C9DC5
    for byte in data + (str(collision_count).encode() if collision_count else b""):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHANUMS[ord(char) % len(_SAFE_ALPHANUMS)] for char in str(value))


def write_status(cluster, rt, obj: dict, status: dict) -> dict | None:
    """Write `status` through the status subresource when it differs from the stored one."""
    if (obj.get("status") or {}) == status:
        return obj
    body = copy.deepcopy(obj)
    body["status"] = status
    try:
        return cluster.update(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"], body,
                              subresource="status")
    except ApiError:
        return None


def pods_in(cluster, namespace: str) -> list[dict]:
    return [entry.obj for entry in cluster.store.entries("pods", namespace)]


def adopt_orphans(cluster, owner: dict, selector: dict | None) -> list[dict]:
    """Active Pods of the owner's namespace without a controller that match the selector become the owner's
    (upstream ControllerRefManager adoption); returns the adopted Pods."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return []
    adopted = []
    pods_rt = cluster.registry.by_key("pods")
    for pod in pods_in(cluster, owner["metadata"]["namespace"]):
        meta = pod["metadata"]
        if controller_ref(pod) is not None or not is_active(pod) or \
                not match_label_selector_object(selector, meta.get("labels") or {}):
            continue
        body = copy.deepcopy(pod)
        body["metadata"]["ownerReferences"] = list(meta.get("ownerReferences") or []) + [owner_reference(owner)]
        try:
            adopted.append(cluster.update(pods_rt, meta["namespace"], meta["name"], body))
        except ApiError:
            continue
    return adopted


class OwnerController(Controller):
    """A controller of one owner kind (Deployment, ReplicaSet, DaemonSet, Job, CronJob): it reconciles every
    owner at start, an owner when it changes, and the owner of a dependent (found by the dependent's
    controller reference) when the dependent changes. Subclasses set `resource_key`, `owner_kind`,
    `owner_group` and `keys`, and implement `reconcile`; `forget`, `on_other_event`, `on_dependent_event`
    and `on_unowned_event` are optional hooks."""
    resource_key = ""
    owner_kind = ""
    owner_group = ""

    def start(self) -> None:
        self.sync_all()

    def sync_all(self) -> None:
        for entry in list(self.cluster.store.entries(self.resource_key)):
            meta = entry.obj["metadata"]
            self.sync(meta["namespace"], meta["name"])

    def on_event(self, event: Event) -> None:
        if event.key == self.resource_key:
            if event.type == DELETED:
                self.forget(event.obj)
            elif event.type in (ADDED, MODIFIED):
                self.sync(event.namespace, event.obj["metadata"]["name"])
            return
        if self.on_other_event(event):
            return
        ref = controlled_by(event.obj, self.owner_kind, self.owner_group)
        if ref is not None:
            self.on_dependent_event(event, ref)
            self.sync(event.namespace, ref.get("name", ""))
        else:
            self.on_unowned_event(event)

    def sync(self, namespace: str, name: str) -> None:
        """Reconcile one owner, unless it is gone or being deleted."""
        with self.cluster.lock:
            entry = self.cluster.store.get(self.resource_key, namespace, name)
            if entry is None or entry.obj["metadata"].get("deletionTimestamp"):
                return
            self.reconcile(entry.obj)

    def reconcile(self, owner: dict) -> None:
        raise NotImplementedError

    def forget(self, owner: dict) -> None:
        """The owner was deleted."""

    def on_other_event(self, event: Event) -> bool:
        """An event of another watched kind, before the dependent check; True when handled."""
        return False

    def on_dependent_event(self, event: Event, ref: dict) -> None:
        """A dependent of an owner of this kind changed (before the owner is reconciled)."""

    def on_unowned_event(self, event: Event) -> None:
        """A dependent-kind event for an object no owner of this kind controls."""
