"""PersistentVolumeClaims get volumes: the DefaultStorageClass admission plugin, kube-controller-manager's
PersistentVolume controller (binding) and a CSI external-provisioner for every StorageClass's provisioner.

- Admission (create): a claim without `spec.storageClassName` gets the default StorageClass (annotation
  `storageclass.kubernetes.io/is-default-class: "true"`; the newest when several are), as DefaultStorageClass does.
- Binding: an unbound claim (no `spec.volumeName`) binds to the PV whose `claimRef` names it (pre-bound or
  provisioned for it), else to the smallest Available PV of its class (`""` matches `""`) with its volumeMode,
  every requested access mode and at least the requested size. The PV gets `claimRef` (and
  `pv.kubernetes.io/bound-by-controller: "yes"` when the controller chose it) and phase Bound; the claim
  `spec.volumeName`, annotations `pv.kubernetes.io/bind-completed: "yes"` and `pv.kubernetes.io/bound-by-controller:
  "yes"`, phase Bound with the PV's `accessModes` and `capacity`. A new PV without claimRef turns Available.
- Provisioning, when no PV matches and the class exists: the claim is annotated
  `volume.kubernetes.io/storage-provisioner` (and the `volume.beta.kubernetes.io/` one) with the class's
  provisioner, event Normal `ExternalProvisioning` "Waiting for a volume to be created either by the external
  provisioner '<p>' or manually by the system administrator. If volume creation is delayed, please verify that the
  provisioner is running and correctly registered."; the provisioner records `Provisioning` "External provisioner is
  provisioning volume for claim \"<ns>/<name>\"", creates PV `pvc-<claim uid>` (the claim's size, access modes and
  volumeMode, the class's reclaimPolicy (default Delete) and mountOptions, `csi.driver` = the provisioner,
  annotation `pv.kubernetes.io/provisioned-by`, claimRef to the claim) and records `ProvisioningSucceeded`
  "Successfully provisioned volume pvc-<uid>". The class's `volumeBindingMode: WaitForFirstConsumer` waits (event
  `WaitForFirstConsumer` "waiting for first consumer to be created before binding") until a Pod using the claim is
  on a node, annotates `volume.kubernetes.io/selected-node` and gives the PV a required node affinity to it.
  `kubernetes.io/no-provisioner` provisions nothing (the claim waits for a matching PV).
- Failures: a class that does not exist: Warning `ProvisioningFailed` `storageclass.storage.k8s.io "<name>" not
  found`; no class at all and no matching PV: Normal `FailedBinding` "no persistent volumes available for this claim
  and no storage class is set". The claim stays Pending (each event once per claim).
- A claim's deletion releases its PV: Retain -> phase Released (claimRef kept); Delete -> a provisioned PV is
  deleted by its provisioner, a PV without one turns Failed (`no deletable volume plugin matched`, as for a
  static PV). A bound claim whose PV is deleted turns Lost (Warning `ClaimLost` "Bound claim has lost its
  PersistentVolume. Data on the volume is lost!").
- Claims that a scenario creates already Bound (status set, no volumeName) are left as they are.

Upstream source: kubernetes `pkg/controller/volume/persistentvolume/pv_controller.go` (syncUnboundClaim,
bind, provisionClaim, reclaimVolume), `plugin/pkg/admission/storage/storageclass/setdefault`,
kubernetes-csi external-provisioner and sig-storage-lib-external-provisioner (events, PV shape).
Simplified: no `kubernetes.io/pvc-protection`/`pv-protection` or provisioner finalizers (a claim in use by a Pod
is deleted at once), no label selectors, volume expansion, data sources or topology beyond the selected node;
the scheduler does not wait for a WaitForFirstConsumer claim (the Pod is bound first, then the claim); a
provisioner never fails; every PV has `csi.volumeHandle` = the claim's UID."""
from __future__ import annotations

import copy

from .. import events
from ..api import AdmissionRequest
from ..errors import ApiError
from ..quantity import memory_bytes
from ..store import ADDED, DELETED, Event
from . import Controller
from .workloads import write_status

PVCS, PVS, CLASSES, PODS = "persistentvolumeclaims", "persistentvolumes", "storageclasses.storage.k8s.io", "pods"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
PROVISIONER_ANNOTATIONS = ("volume.kubernetes.io/storage-provisioner", "volume.beta.kubernetes.io/storage-provisioner")
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
CONTROLLER_COMPONENT = "persistentvolume-controller"


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _size(obj: dict, path: tuple[str, ...]) -> int:
    value = obj
    for key in path:
        value = (value or {}).get(key) or {}
    return memory_bytes(value or 0)


def default_class(cluster) -> str | None:
    """The default StorageClass's name (the newest default wins, then the name), or None."""
    defaults = [e.obj for e in cluster.store.entries(CLASSES)
                if (_meta(e.obj).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
    if not defaults:
        return None
    return max(defaults, key=lambda sc: (_meta(sc).get("creationTimestamp", ""), _meta(sc)["name"]))["metadata"]["name"]


def default_class_hook(cluster):
    def set_default(request: AdmissionRequest) -> None:
        if request.resource.key != PVCS or request.operation != "CREATE" or request.subresource:
            return
        spec = request.obj.setdefault("spec", {})
        if spec.get("storageClassName") is None:
            name = default_class(cluster)
            if name:
                spec["storageClassName"] = name
    return set_default


def claim_pods(cluster, namespace: str, claim: str) -> list[dict]:
    return [e.obj for e in cluster.store.entries(PODS, namespace)
            if any((v.get("persistentVolumeClaim") or {}).get("claimName") == claim
                   for v in (e.obj.get("spec") or {}).get("volumes") or [])]


class VolumeController(Controller):
    keys = (PVCS, PVS, CLASSES, PODS)

    def __init__(self, cluster):
        super().__init__(cluster)
        self._said: set[tuple[str, str]] = set()      # (claim uid, event reason) recorded once

    def _rt(self, key: str):
        return self.cluster.registry.by_key(key)

    # ------------------------------------------------------------------------------------------ events
    def on_event(self, event: Event) -> None:
        obj = event.obj
        if event.key == PVCS:
            if event.type == DELETED:
                self._released(obj)
            else:
                self.sync_claim(event.namespace, _meta(obj)["name"])
        elif event.key == PVS:
            self._volume_changed(event)
        elif event.key == CLASSES:
            if event.type == ADDED:
                for entry in list(self.cluster.store.entries(PVCS)):
                    if (entry.obj.get("spec") or {}).get("storageClassName") == _meta(obj)["name"]:
                        self.sync_claim(_meta(entry.obj)["namespace"], _meta(entry.obj)["name"])
        elif event.type != DELETED and (obj.get("spec") or {}).get("nodeName"):
            for volume in (obj.get("spec") or {}).get("volumes") or []:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    self.sync_claim(event.namespace, claim)

    def _once(self, claim: dict, event_type: str, reason: str, message: str) -> None:
        key = (_meta(claim).get("uid"), reason)
        if key not in self._said:
            self._said.add(key)
            events.record(self.cluster, claim, event_type, reason, message, CONTROLLER_COMPONENT)

    def _volume_changed(self, event: Event) -> None:
        volume = event.obj
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if event.type == DELETED:
            for entry in list(self.cluster.store.entries(PVCS)):
                claim = entry.obj
                if (claim.get("spec") or {}).get("volumeName") == _meta(volume)["name"] and \
                        (claim.get("status") or {}).get("phase") == "Bound":
                    self._lost(claim)
            return
        if not ref and (volume.get("status") or {}).get("phase") in (None, "", "Pending"):
            self._write_status(PVS, volume, {**(volume.get("status") or {}), "phase": "Available"})
        elif ref.get("name") and ref.get("namespace"):
            self.sync_claim(ref["namespace"], ref["name"])

    # -------------------------------------------------------------------------------------------- sync
    def sync_claim(self, namespace: str, name: str) -> None:
        claim = self.cluster.find(self._rt(PVCS), namespace, name)
        if claim is None or _meta(claim).get("deletionTimestamp"):
            return
        spec, phase = claim.get("spec") or {}, (claim.get("status") or {}).get("phase")
        if spec.get("volumeName"):
            volume = self.cluster.find(self._rt(PVS), None, spec["volumeName"])
            if volume is not None and phase != "Bound":
                self._bind(claim, volume)
            return
        if phase == "Bound":
            return       # bound by the scenario, without a PV
        volume = self._matching_volume(claim)
        if volume is not None:
            self._bind(claim, volume)
            return
        class_name = spec.get("storageClassName") or ""
        if not class_name:
            self._once(claim, "Normal", "FailedBinding",
                       "no persistent volumes available for this claim and no storage class is set")
            return
        storage_class = self.cluster.find(self._rt(CLASSES), None, class_name)
        if storage_class is None:
            self._once(claim, "Warning", "ProvisioningFailed", f'storageclass.storage.k8s.io "{class_name}" not found')
            return
        node = (_meta(claim).get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not node:
            node = next(((p.get("spec") or {}).get("nodeName") for p in claim_pods(self.cluster, namespace, name)
                         if (p.get("spec") or {}).get("nodeName")), None)
            if not node:
                self._once(claim, "Normal", "WaitForFirstConsumer",
                           "waiting for first consumer to be created before binding")
                return
        self._provision(claim, storage_class, node)

    def _matching_volume(self, claim: dict) -> dict | None:
        spec, uid = claim.get("spec") or {}, _meta(claim)["uid"]
        wanted_modes = set(spec.get("accessModes") or [])
        wanted_size = _size(spec, ("resources", "requests", "storage"))
        candidates = []
        for entry in self.cluster.store.entries(PVS):
            volume = entry.obj
            vspec = volume.get("spec") or {}
            ref = vspec.get("claimRef") or {}
            if ref.get("uid") == uid or (ref and not ref.get("uid") and ref.get("name") == _meta(claim)["name"]
                                         and ref.get("namespace") == _meta(claim)["namespace"]):
                return volume
            if ref or _meta(volume).get("deletionTimestamp") or \
                    (volume.get("status") or {}).get("phase") not in ("Available", "Pending", None, ""):
                continue
            if (vspec.get("storageClassName") or "") != (spec.get("storageClassName") or "") or \
                    vspec.get("volumeMode", "Filesystem") != spec.get("volumeMode", "Filesystem") or \
                    not wanted_modes <= set(vspec.get("accessModes") or []):
                continue
            size = _size(vspec, ("capacity", "storage"))
            if size >= wanted_size:
                candidates.append((size, _meta(volume)["name"], volume))
        return min(candidates, key=lambda c: c[:2])[2] if candidates else None

    def _provision(self, claim: dict, storage_class: dict, node: str | None) -> None:
        cluster, meta = self.cluster, _meta(claim)
        provisioner = storage_class.get("provisioner", "")
        wanted = {key: provisioner for key in PROVISIONER_ANNOTATIONS}
        if node:
            wanted[SELECTED_NODE_ANNOTATION] = node
        if any((meta.get("annotations") or {}).get(k) != v for k, v in wanted.items()):
            changed = copy.deepcopy(claim)
            changed["metadata"].setdefault("annotations", {}).update(wanted)
            try:
                claim = cluster.update(self._rt(PVCS), meta["namespace"], meta["name"], changed)
            except ApiError:
                return
        self._once(claim, "Normal", "ExternalProvisioning",
                   f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually "
                   "by the system administrator. If volume creation is delayed, please verify that the provisioner is "
                   "running and correctly registered.")
        if provisioner == NO_PROVISIONER:
            return
        name = f"pvc-{meta['uid']}"
        if cluster.find(self._rt(PVS), None, name) is not None:
            return
        self._once(claim, "Normal", "Provisioning",
                   f'External provisioner is provisioning volume for claim "{meta["namespace"]}/{meta["name"]}"')
        spec = claim.get("spec") or {}
        volume_spec = {
            "accessModes": list(spec.get("accessModes") or []),
            "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")},
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"],
                         "uid": meta["uid"], "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion", "")},
            "csi": {"driver": provisioner, "volumeHandle": meta["uid"],
                    "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": f"kubesim-{provisioner}"}},
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
        }
        if storage_class.get("mountOptions"):
            volume_spec["mountOptions"] = list(storage_class["mountOptions"])
        if node:
            volume_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        body = {"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "annotations": {PROVISIONED_BY: provisioner}}, "spec": volume_spec}
        try:
            cluster.create(self._rt(PVS), None, body)
        except ApiError:
            return
        self._once(claim, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {name}")

    def _bind(self, claim: dict, volume: dict) -> None:
        cluster, meta = self.cluster, _meta(claim)
        vspec = volume.get("spec") or {}
        if not vspec.get("claimRef") or (vspec["claimRef"].get("uid") or meta["uid"]) != meta["uid"] or \
                (volume.get("status") or {}).get("phase") != "Bound":
            changed = copy.deepcopy(volume)
            if not (vspec.get("claimRef") or {}).get("uid"):
                changed["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                                               "name": meta["name"], "uid": meta["uid"], "apiVersion": "v1",
                                               "resourceVersion": meta.get("resourceVersion", "")}
                if not vspec.get("claimRef"):
                    changed["metadata"].setdefault("annotations", {})[BOUND_BY_CONTROLLER] = "yes"
            try:
                if changed["spec"] != vspec or changed["metadata"] != _meta(volume):
                    volume = cluster.update(self._rt(PVS), None, _meta(volume)["name"], changed)
                volume = self._write_status(PVS, volume, {**(volume.get("status") or {}), "phase": "Bound"}) or volume
            except ApiError:
                return
        if (claim.get("spec") or {}).get("volumeName") != _meta(volume)["name"]:
            changed = copy.deepcopy(claim)
            changed["spec"]["volumeName"] = _meta(volume)["name"]
            changed["metadata"].setdefault("annotations", {}).update(
                {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"})
            try:
                claim = cluster.update(self._rt(PVCS), meta["namespace"], meta["name"], changed)
            except ApiError:
                return
        vspec = volume.get("spec") or {}
        self._write_status(PVCS, claim, {**(claim.get("status") or {}), "phase": "Bound",
                                         "accessModes": list(vspec.get("accessModes") or []),
                                         "capacity": dict(vspec.get("capacity") or {})})

    def _released(self, claim: dict) -> None:
        uid = _meta(claim).get("uid")
        for entry in list(self.cluster.store.entries(PVS)):
            volume = entry.obj
            if ((volume.get("spec") or {}).get("claimRef") or {}).get("uid") != uid:
                continue
            policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy", "Retain")
            if policy == "Delete" and (_meta(volume).get("annotations") or {}).get(PROVISIONED_BY):
                try:
                    self.cluster.delete(self._rt(PVS), None, _meta(volume)["name"],
                                        {"preconditions": {"uid": _meta(volume)["uid"]}})
                except ApiError:
                    pass
            elif policy == "Delete":
                self._write_status(PVS, volume, {"phase": "Failed", "message": (
                    f'error getting deleter volume plugin for volume "{_meta(volume)["name"]}": no deletable volume '
                    "plugin matched")})
            else:
                self._write_status(PVS, volume, {"phase": "Released"})

    def _lost(self, claim: dict) -> None:
        self._write_status(PVCS, claim, {**(claim.get("status") or {}), "phase": "Lost"})
        events.record(self.cluster, claim, "Warning", "ClaimLost",
                      "Bound claim has lost its PersistentVolume. Data on the volume is lost!", CONTROLLER_COMPONENT)

    def _write_status(self, key: str, obj: dict, status: dict) -> dict | None:
        return write_status(self.cluster, self._rt(key), obj, status)


def register(cluster, manager) -> None:
    if all(cluster.registry.by_key(key) is not None for key in (PVCS, PVS, CLASSES)):
        cluster.admission_hooks.append(default_class_hook(cluster))
        manager.add(VolumeController(cluster))
