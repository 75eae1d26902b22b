"""The VirtualMachine controller: keeps a VM's VirtualMachineInstance in line with its run strategy and
reports the VM status.

- Run strategy: `spec.runStrategy` (Always, RerunOnFailure, Once, Manual, Halted), else `spec.running`
  (true = Always, false = Halted), else Halted.
- VM -> VMI: name = VM name, controller ownerReference to the VM, labels and annotations from
  `spec.template.metadata` (plus `kubevirt.io/vm-generation`), spec from `spec.template.spec` with a
  stable firmware UUID. The VMI's eviction strategy is defaulted when it is created (see `mutator.py`).
  VM event `SuccessfulCreate` "Started the virtual machine by creating the new virtual machine instance
  <name>".
- Always starts a missing VMI and restarts a finished one (Failed or Succeeded); RerunOnFailure restarts
  only a Failed one; Once starts it a single time; Manual never acts; Halted stops it. A restart deletes
  the finished VMI (event `SuccessfulDelete` "Stopped the virtual machine by deleting the virtual machine
  instance <uid>") and creates a new one (a new UID) once the old one is gone, which the scheduler may
  place elsewhere (e.g. when the old node is cordoned by a drain).
- State change requests (`status.stateChangeRequests`, written by virt-api's start/stop/restart, see
  `subresources.py`), first one first: Stop (with a VMI UID: only that VMI) deletes the VMI and is dropped once
  it is gone; Start creates the VMI whatever the run strategy (Manual included) and is dropped. A restart (Stop +
  Start) so gives a new VMI (a new UID).
- Instance types (`instancetype.py`): a VM with `spec.instancetype`/`spec.preference` gets their CPU topology,
  memory and name annotations in its VMI; a conflict or a missing instance type is a `FailedCreate` event.
- Status: `printableStatus` (Stopped, Starting, Running, Migrating while the VMI has a migration in
  flight, Stopping, Terminating, ErrorUnschedulable, Unknown), `created`, `ready`, `runStrategy`,
  `desiredGeneration`/`observedGeneration`, conditions `Ready` (from the VMI, or False with reason
  VMINotExists) and `LiveMigratable` (copied from the VMI).

Upstream source: kubevirt/kubevirt `pkg/virt-controller/watch/vm/vm.go` (sync, setPrintableStatus,
startStop, handleStateChangeRequests). Simplified: no crash-loop backoff between restarts, no DataVolume templates,
revisions or snapshots."""
from __future__ import annotations

import copy
import uuid

from .. import events
from ..api import now_iso
from ..controllers import Controller
from ..errors import ApiError
from ..store import DELETED, Event
from . import instancetype
from .common import (CONTROLLER_COMPONENT, FINAL_VMI_PHASES, VM, VMI, condition_true, controller_ref, find,
                     get_condition, meta, mutate, owner_ref, rt, serves, status, unmanaged)

_FIRMWARE_NS = uuid.UUID("6a1a24a1-4061-4607-8bf4-a3963d0c5895")


def run_strategy(vm: dict) -> str:
    spec = vm.get("spec") or {}
    if spec.get("runStrategy"):
        return spec["runStrategy"]
    if "running" in spec and spec["running"] is not None:
        return "Always" if spec["running"] else "Halted"
    return "Halted"


def migration_in_flight(vmi: dict) -> bool:
    state = status(vmi).get("migrationState") or {}
    return bool(state) and not state.get("completed") and bool(state.get("targetNode"))


def printable_status(vm: dict, vmi: dict | None, strategy: str) -> str:
    if meta(vm).get("deletionTimestamp"):
        return "Terminating"
    if vmi is None:
        return "Starting" if strategy in ("Always", "RerunOnFailure") else "Stopped"
    phase = status(vmi).get("phase")
    if meta(vmi).get("deletionTimestamp"):
        return "Stopping"
    if phase in FINAL_VMI_PHASES:
        return "Stopped"
    scheduled = get_condition(vmi, "PodScheduled")
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return "ErrorUnschedulable"
    if phase in (None, "", "Pending", "Scheduling", "Scheduled"):
        return "Starting"
    if phase == "Running":
        if migration_in_flight(vmi):
            return "Migrating"
        if condition_true(vmi, "Paused"):
            return "Paused"
        return "Running"
    return "Unknown"


class VMController(Controller):
    keys = (VM, VMI)

    def __init__(self, cluster):
        super().__init__(cluster)
        self._started_once: set[str] = set()

    def on_event(self, event: Event) -> None:
        obj = event.obj
        if event.key == VM:
            if event.type != DELETED:
                self.sync(event.namespace, meta(obj)["name"])
            return
        ref = controller_ref(obj)
        if ref and ref.get("kind") == "VirtualMachine":
            self.sync(event.namespace, ref.get("name", ""))

    def sync(self, namespace: str, name: str) -> None:
        cluster = self.cluster
        vm = find(cluster, VM, namespace, name)
        if vm is None or unmanaged(vm):
            return
        strategy = run_strategy(vm)
        vmi = find(cluster, VMI, namespace, name)
        if vmi is not None and (controller_ref(vmi) or {}).get("uid") != meta(vm)["uid"]:
            vmi = None          # a VMI of the same name that this VM does not own is left alone
            foreign = True
        else:
            foreign = False
        if not meta(vm).get("deletionTimestamp") and not foreign:
            vmi = self._start_stop(vm, vmi, strategy)
        self._update_status(vm, vmi, strategy)

    def _start_stop(self, vm: dict, vmi: dict | None, strategy: str) -> dict | None:
        uid = meta(vm)["uid"]
        requests = status(vm).get("stateChangeRequests") or []
        if requests:
            return self._change_request(vm, vmi, requests)
        if vmi is None:
            wanted = strategy in ("Always", "RerunOnFailure") or (strategy == "Once" and uid not in self._started_once)
            if wanted:
                self._started_once.add(uid)
                return self._create_vmi(vm)
            return None
        if meta(vmi).get("deletionTimestamp"):
            return vmi
        phase = status(vmi).get("phase")
        restart = (strategy == "Always" and phase in FINAL_VMI_PHASES) or \
            (strategy == "RerunOnFailure" and phase == "Failed")
        if restart or strategy == "Halted":
            self._started_once.add(uid)
            self._delete_vmi(vm, vmi)
            return find(self.cluster, VMI, meta(vmi).get("namespace"), meta(vmi)["name"])
        self._started_once.add(uid)
        return vmi

    def _change_request(self, vm: dict, vmi: dict | None, requests: list[dict]) -> dict | None:
        """The first pending state change request: Stop deletes the VMI (of its UID), Start creates one."""
        first = requests[0]
        if first.get("action") == "Stop":
            if vmi is not None and first.get("uid") in (None, "", meta(vmi)["uid"]):
                if not meta(vmi).get("deletionTimestamp"):
                    self._delete_vmi(vm, vmi)
                return find(self.cluster, VMI, meta(vmi).get("namespace"), meta(vmi)["name"])
        elif first.get("action") == "Start":
            if vmi is not None:
                return vmi          # the old VMI is still going
            self._started_once.add(meta(vm)["uid"])
            vmi = self._create_vmi(vm)
            if vmi is None:
                return None
        self._drop_request(vm, first)
        return vmi

    def _drop_request(self, vm: dict, request: dict) -> None:
        def drop(obj: dict):
            pending = status(obj).get("stateChangeRequests") or []
            if not pending or pending[0] != request:
                return False
            obj["status"]["stateChangeRequests"] = pending[1:]
            if not obj["status"]["stateChangeRequests"]:
                del obj["status"]["stateChangeRequests"]
            return True
        mutate(self.cluster, VM, meta(vm).get("namespace"), meta(vm)["name"], drop, uid=meta(vm)["uid"])

    def _create_vmi(self, vm: dict) -> dict | None:
        vm_meta = meta(vm)
        template = (vm.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        spec = copy.deepcopy(template.get("spec") or {})
        firmware = spec.setdefault("domain", {}).setdefault("firmware", {})
        firmware.setdefault("uuid", str(uuid.uuid5(_FIRMWARE_NS, vm_meta["name"])))
        vmi_annotations = {**copy.deepcopy(tmeta.get("annotations") or {}),
                           "kubevirt.io/vm-generation": str(vm_meta.get("generation", 1))}
        try:
            instancetype.apply(self.cluster, vm, spec, vmi_annotations)
        except instancetype.InstancetypeError as err:
            events.record(self.cluster, vm, "Warning", "FailedCreate",
                          f"Error creating virtual machine instance: {err}", CONTROLLER_COMPONENT)
            return None
        body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {"name": vm_meta["name"], "namespace": vm_meta.get("namespace"),
                             "labels": copy.deepcopy(tmeta.get("labels") or {}),
                             "annotations": vmi_annotations,
                             "ownerReferences": [owner_ref(vm)]},
                "spec": spec}
        if not body["metadata"]["labels"]:
            del body["metadata"]["labels"]
        try:
            created = self.cluster.create(rt(self.cluster, VMI), vm_meta.get("namespace"), body)
        except ApiError as err:
            events.record(self.cluster, vm, "Warning", "FailedCreate",
                          f"Error creating virtual machine instance: {err.message}", CONTROLLER_COMPONENT)
            return None
        events.record(self.cluster, vm, "Normal", "SuccessfulCreate",
                      f"Started the virtual machine by creating the new virtual machine instance {vm_meta['name']}",
                      CONTROLLER_COMPONENT)
        return created

    def _delete_vmi(self, vm: dict, vmi: dict) -> None:
        try:
            self.cluster.delete(rt(self.cluster, VMI), meta(vmi).get("namespace"), meta(vmi)["name"],
                                {"preconditions": {"uid": meta(vmi)["uid"]}})
        except ApiError:
            return
        events.record(self.cluster, vm, "Normal", "SuccessfulDelete",
                      f"Stopped the virtual machine by deleting the virtual machine instance {meta(vmi)['uid']}",
                      CONTROLLER_COMPONENT)

    def _update_status(self, vm: dict, vmi: dict | None, strategy: str) -> None:
        def change(obj: dict):
            st = obj.setdefault("status", {})
            before = copy.deepcopy(st)
            st["printableStatus"] = printable_status(obj, vmi, strategy)
            st["created"] = vmi is not None
            st["ready"] = vmi is not None and condition_true(vmi, "Ready") and \
                status(vmi).get("phase") == "Running" and not meta(vmi).get("deletionTimestamp")
            st["runStrategy"] = strategy
            generation = meta(obj).get("generation", 1)
            st["desiredGeneration"] = generation
            st["observedGeneration"] = generation
            conditions = []
            old = {c.get("type"): c for c in before.get("conditions") or []}
            if vmi is None:
                ready = {"type": "Ready", "status": "False", "reason": "VMINotExists", "message": "VMI does not exist"}
            else:
                source = get_condition(vmi, "Ready") or {"status": "False"}
                ready = {"type": "Ready", "status": "True" if st["ready"] else "False"}
                for key in ("reason", "message"):
                    if source.get(key) and not st["ready"]:
                        ready[key] = source[key]
            conditions.append(ready)
            migratable = get_condition(vmi, "LiveMigratable") if vmi is not None else None
            if migratable is not None:
                conditions.append({k: v for k, v in migratable.items() if k != "lastProbeTime"})
            for cond in conditions:
                previous = old.get(cond["type"])
                same = previous is not None and previous.get("status") == cond["status"]
                cond.setdefault("lastProbeTime", None)
                cond["lastTransitionTime"] = previous.get("lastTransitionTime") if same else \
                    cond.get("lastTransitionTime") or now_iso()
            st["conditions"] = conditions
            if _comparable(before) == _comparable(st):
                return False
            return True
        mutate(self.cluster, VM, meta(vm).get("namespace"), meta(vm)["name"], change, uid=meta(vm)["uid"])


def _comparable(st: dict) -> dict:
    result = {k: v for k, v in st.items() if k != "conditions"}
    result["conditions"] = [{k: v for k, v in c.items() if k not in ("lastProbeTime", "lastTransitionTime")}
                            for c in st.get("conditions") or []]
    return result


def register(cluster, manager) -> None:
    if serves(cluster, VM, VMI):
        manager.add(VMController(cluster))
