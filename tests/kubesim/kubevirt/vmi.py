"""The VirtualMachineInstance controller (virt-controller's VMI controller plus the status virt-handler
reports): it creates the virt-launcher Pod of a VMI and derives the VMI status from that Pod.

- A new VMI (no status yet) gets the finalizer `kubevirt.io/virtualMachineControllerFinalize`, phase
  Pending, then its
  launcher Pod (`launcher.build_pod`; VMI event `SuccessfulCreate` "Created virtual machine pod <pod>")
  and phase Scheduling.
- Pod unschedulable: the Pod's `PodScheduled=False` (reason Unschedulable) condition is copied to the VMI,
  which stays Scheduling. Pod bound: phase Scheduled, `status.nodeName` and label `kubevirt.io/nodeName`.
  Pod running and ready: phase Running (virt-handler events `Created` "VirtualMachineInstance defined."
  and `Started` "VirtualMachineInstance started."), conditions `Ready` (copied from the Pod) and
  `LiveMigratable` (`migratable.check`), `interfaces` (`interface_status`: one per declared interface),
  `activePods`, `qosClass`, `migrationMethod` (LiveMigration, or BlockMigration for non-shared disks),
  `migrationTransport: Unix`, guest memory and CPU topology.
- While `status.evacuationNodeName` is set the VMI carries the condition `EvictionRequested=True`
  (reason EvictionRequested); it goes when the marker is cleared.
- The launcher Pod terminating (eviction with strategy None, deletion): `Ready=False` reason
  PodTerminating and virt-handler's `ShuttingDown` "Signaled Graceful Shutdown"; once the Pod is gone or
  finished the VMI is `Failed` (`Ready=False`, reason PodNotExists). A final VMI is never restarted by
  this controller (the VM or replica set controllers replace it); its remaining Pods are deleted.
- Deleting the VMI deletes its launcher Pods; the finalizer is removed when none is left.

Upstream source: kubevirt/kubevirt `pkg/virt-controller/watch/vmi` (sync, updateStatus,
syncReadyConditionFromPod) and `pkg/virt-handler/vm.go`. Simplified: no domain, guest agent, hotplug,
volume status or crash handling; Running means "the launcher Pod is running and ready"; a VMI whose Pod
disappears becomes Failed (upstream may report Succeeded after a clean guest shutdown); VMIs loaded from a
scenario with a status already set get no finalizer (so large generated scenarios start without writes)."""
from __future__ import annotations

import copy
import hashlib
import json

from .. import events
from ..controllers import Controller
from ..errors import ApiError
from ..quantity import format_memory
from ..store import DELETED, Event
from . import migratable
from .common import (APP_LABEL, annotations, CONTROLLER_COMPONENT, FINAL_VMI_PHASES, HANDLER_COMPONENT, MIGRATION_JOB_LABEL,
                     NODE_NAME_LABEL, PODS, VMI, VMI_FINALIZER, controller_ref, current_pod, find, get_condition,
                     labels, launcher_pods, meta, mutate, pod_active, pod_ready, pod_terminal, pod_unschedulable,
                     remove_condition, rt, serves, set_condition, set_phase, status, unmanaged)
from .launcher import build_pod, guest_memory

PVCS = "persistentvolumeclaims"


NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"


def _mac(uid: str) -> str:
    digest = hashlib.sha1(uid.encode()).hexdigest()
    return "02:" + ":".join(digest[i:i + 2] for i in range(0, 10, 2))


def pod_interface_name(network: dict) -> str:
    """The launcher Pod's interface of a network: eth0 for the pod network (or a default multus network), else
    virt-controller's hashed name `pod` + the first 11 hex digits of sha256(network name)."""
    if "pod" in network or (network.get("multus") or {}).get("default"):
        return "eth0"
    return "pod" + hashlib.sha256(network.get("name", "").encode()).hexdigest()[:11]


def interface_status(vmi: dict, pod: dict) -> list[dict]:
    """status.interfaces as virt-handler reports them with a guest agent: one entry per interface of
    `spec.domain.devices.interfaces` (those with `state: absent` left out; no interfaces: the `default` pod
    network), in order, with name, mac (the spec's macAddress, else a stable generated one), guest
    `interfaceName` eth<i>, `podInterfaceName`, queueCount 1, linkState (`down` for `state: down`), and the IPs:
    the Pod's for the pod network, for a multus network those of its entry (matched by Pod interface name) in the
    Pod's `k8s.v1.cni.cncf.io/network-status` annotation; infoSource `domain, guest-agent`, plus `multus-status`
    for networks listed in that annotation."""
    spec = vmi.get("spec") or {}
    networks = {n.get("name"): n for n in spec.get("networks") or []}
    declared = ((spec.get("domain") or {}).get("devices") or {}).get("interfaces")
    if declared is None:
        declared = [{"name": name} for name in networks] or [{"name": "default"}]
        networks = networks or {"default": {"name": "default", "pod": {}}}
    try:
        listed = json.loads(annotations(pod).get(NETWORK_STATUS_ANNOTATION) or "[]")
    except ValueError:
        listed = []
    by_pod_interface = {entry.get("interface"): entry for entry in listed if isinstance(entry, dict)}
    pod_ips = [i.get("ip") for i in status(pod).get("podIPs") or [] if i.get("ip")] or \
        ([status(pod)["podIP"]] if status(pod).get("podIP") else [])
    result = []
    for index, iface in enumerate(i for i in declared if i.get("state") != "absent"):
        name = iface.get("name", "")
        network = networks.get(name) or {"name": name, "pod": {}}
        pod_iface = pod_interface_name(network)
        entry = by_pod_interface.get(pod_iface)
        ips = pod_ips if pod_iface == "eth0" else list((entry or {}).get("ips") or [])
        item = {"infoSource": "domain, guest-agent" + (", multus-status" if entry else ""),
                "interfaceName": f"eth{index}", "linkState": "down" if iface.get("state") == "down" else "up",
                "mac": iface.get("macAddress") or _mac(meta(vmi)["uid"] + ("" if index == 0 else name)),
                "name": name, "podInterfaceName": pod_iface, "queueCount": 1}
        if ips:
            item["ipAddress"], item["ipAddresses"] = ips[0], list(ips)
        result.append(item)
    return result


def _signature(vmi: dict, with_active: bool) -> tuple:
    """The status facts whose change is worth a write (keeps generated, already-running VMIs untouched:
    activePods only counts once the VMI has it)."""
    st = status(vmi)
    conditions = tuple(sorted((c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                              for c in st.get("conditions") or []))
    ips = tuple((i.get("name"), i.get("ipAddress")) for i in st.get("interfaces") or [])
    active = tuple(sorted((st.get("activePods") or {}).items())) if with_active else None
    return (st.get("phase"), st.get("nodeName"), labels(vmi).get(NODE_NAME_LABEL), conditions, ips, active,
            st.get("evacuationNodeName"))


class VMIController(Controller):
    keys = (VMI, PODS, PVCS)

    def __init__(self, cluster):
        super().__init__(cluster)
        self._said: set[tuple[str, str]] = set()     # (VMI uid, event reason) recorded once

    # ------------------------------------------------------------------------------------------ events
    def on_event(self, event: Event) -> None:
        obj = event.obj
        if event.key == VMI:
            if event.type == DELETED:
                uid = meta(obj).get("uid")
                self._said = {s for s in self._said if s[0] != uid}
            else:
                self.sync(event.namespace, meta(obj)["name"])
        elif event.key == PODS:
            if labels(obj).get(APP_LABEL) != "virt-launcher":
                return
            ref = controller_ref(obj)
            if ref and ref.get("kind") == "VirtualMachineInstance":
                self.sync(event.namespace, ref.get("name", ""), ref.get("uid"))
        else:
            claim = meta(obj).get("name")
            for entry in list(self.cluster.store.entries(VMI, event.namespace)):
                volumes = (entry.obj.get("spec") or {}).get("volumes") or []
                if any(migratable.claim_name(v) == claim for v in volumes):
                    self.sync(event.namespace, meta(entry.obj)["name"])

    def _once(self, vmi: dict, reason: str, event_type: str, message: str, component: str,
              host: str = "") -> None:
        key = (meta(vmi).get("uid"), reason)
        if key not in self._said:
            self._said.add(key)
            events.record(self.cluster, vmi, event_type, reason, message, component, host)

    # -------------------------------------------------------------------------------------------- sync
    def sync(self, namespace: str, name: str, uid: str | None = None) -> None:
        vmi = find(self.cluster, VMI, namespace, name)
        if vmi is None or (uid and meta(vmi).get("uid") != uid) or unmanaged(vmi):
            return
        if meta(vmi).get("deletionTimestamp"):
            self._finalize(vmi)
            return
        phase = status(vmi).get("phase")
        if phase in FINAL_VMI_PHASES:
            self._cleanup(vmi)
            return
        if not phase or phase == "Pending":
            self._start(vmi)
            return
        self._update_status(vmi)

    def _start(self, vmi: dict) -> None:
        """Phase Pending, create the launcher Pod, phase Scheduling."""
        namespace, name, uid = meta(vmi).get("namespace"), meta(vmi)["name"], meta(vmi)["uid"]
        if not status(vmi).get("phase"):
            def pending(obj: dict) -> None:
                finalizers = obj["metadata"].setdefault("finalizers", [])
                if VMI_FINALIZER not in finalizers:
                    finalizers.append(VMI_FINALIZER)
                set_phase(obj, "Pending")
            vmi = mutate(self.cluster, VMI, namespace, name, pending, uid=uid)
            if vmi is None:
                return
        pods = [p for p in launcher_pods(self.cluster, vmi) if MIGRATION_JOB_LABEL not in labels(p)]
        if not pods:
            try:
                pod = self.cluster.create(rt(self.cluster, PODS), namespace, build_pod(vmi))
            except ApiError as err:
                events.record(self.cluster, vmi, "Warning", "FailedCreate", f"Error creating pod: {err.message}",
                              CONTROLLER_COMPONENT)
                return
            events.record(self.cluster, vmi, "Normal", "SuccessfulCreate",
                          f"Created virtual machine pod {pod['metadata']['name']}", CONTROLLER_COMPONENT)
        mutate(self.cluster, VMI, namespace, name, lambda o: set_phase(o, "Scheduling"), uid=uid)

    def _update_status(self, vmi: dict) -> None:
        cluster = self.cluster
        pods = launcher_pods(cluster, vmi)
        cur = current_pod(cluster, vmi)
        ok, reason, message = migratable.check(cluster, vmi)

        with_active = "activePods" in status(vmi)

        def change(obj: dict):
            before = _signature(obj, with_active)
            st = obj.setdefault("status", {})
            phase = st.get("phase")
            if cur is None or pod_terminal(cur):
                set_phase(obj, "Failed")
                set_condition(obj, "Ready", "False", "PodNotExists", "virt-launcher pod has terminated")
            elif meta(cur).get("deletionTimestamp"):
                set_condition(obj, "Ready", "False", "PodTerminating", "virt-launcher pod is terminating")
            else:
                unschedulable = pod_unschedulable(cur)
                node = (cur.get("spec") or {}).get("nodeName")
                if unschedulable:
                    set_condition(obj, "PodScheduled", "False", "Unschedulable", unschedulable.get("message", ""))
                elif node:
                    remove_condition(obj, "PodScheduled")
                    st["nodeName"] = node
                    obj["metadata"].setdefault("labels", {})[NODE_NAME_LABEL] = node
                    if phase in ("Scheduling", "Scheduled"):
                        set_phase(obj, "Scheduled")
                        if pod_ready(cur):
                            set_phase(obj, "Running")
                ready = get_condition(cur, "Ready")
                if ready is None:
                    set_condition(obj, "Ready", "False", "PodConditionMissing",
                                  "virt-launcher pod is missing the Ready condition")
                else:
                    set_condition(obj, "Ready", ready.get("status", "False"), ready.get("reason", ""),
                                  ready.get("message", ""))
                if st.get("phase") == "Running":
                    self._running_fields(obj, cur, pods, ok, reason, message)
            if st.get("evacuationNodeName"):
                set_condition(obj, "EvictionRequested", "True", "EvictionRequested")
            else:
                remove_condition(obj, "EvictionRequested")
            if _signature(obj, with_active) == before:
                return False
            return True

        old_phase = status(vmi).get("phase")
        # a cheap dry run first (status and labels copied, spec shared read-only): most events change nothing
        probe = {"metadata": {**meta(vmi), "labels": dict(labels(vmi))}, "spec": vmi.get("spec") or {},
                 "status": copy.deepcopy(status(vmi))}
        if change(probe) is False:
            return
        updated = mutate(cluster, VMI, meta(vmi).get("namespace"), meta(vmi)["name"], change, uid=meta(vmi)["uid"])
        if updated is None:
            return
        new_phase = status(updated).get("phase")
        node = status(updated).get("nodeName", "")
        if new_phase == "Running" and old_phase != "Running":
            self._once(updated, "Created", "Normal", "VirtualMachineInstance defined.", HANDLER_COMPONENT, node)
            self._once(updated, "Started", "Normal", "VirtualMachineInstance started.", HANDLER_COMPONENT, node)
        if cur is not None and meta(cur).get("deletionTimestamp") and new_phase == "Running":
            self._once(updated, "ShuttingDown", "Normal", "Signaled Graceful Shutdown", HANDLER_COMPONENT, node)
        if new_phase in FINAL_VMI_PHASES:
            self._cleanup(updated)

    @staticmethod
    def _running_fields(obj: dict, cur: dict, pods: list[dict], ok: bool, reason: str, message: str) -> None:
        st = obj["status"]
        set_condition(obj, "LiveMigratable", "True" if ok else "False", reason, message)
        if status(cur).get("podIP"):
            st["interfaces"] = interface_status(obj, cur)
        st["activePods"] = {meta(p)["uid"]: (p.get("spec") or {}).get("nodeName") for p in pods
                            if not pod_terminal(p) and (p.get("spec") or {}).get("nodeName")}
        st["qosClass"] = status(cur).get("qosClass", "Burstable")
        st["guestOSInfo"] = st.get("guestOSInfo") or {}
        st["launcherContainerImageVersion"] = ((cur.get("spec") or {}).get("containers") or [{}])[0].get("image", "")
        st["migrationMethod"] = "BlockMigration" if reason == migratable.DISKS_REASON else "LiveMigration"
        st["migrationTransport"] = "Unix"
        st["runtimeUser"] = 107
        st["selinuxContext"] = "none"
        cpu = ((obj.get("spec") or {}).get("domain") or {}).get("cpu") or {}
        st["currentCPUTopology"] = {"cores": int(cpu.get("cores") or 1), "sockets": int(cpu.get("sockets") or 1),
                                    "threads": int(cpu.get("threads") or 1)}
        memory = format_memory(guest_memory(obj))
        st["memory"] = {"guestAtBoot": memory, "guestCurrent": memory, "guestRequested": memory}
        st["machine"] = {"type": (((obj.get("spec") or {}).get("domain") or {}).get("machine") or {}).get("type", "q35")}

    def _cleanup(self, vmi: dict) -> None:
        """A final VMI keeps no running launcher."""
        for pod in launcher_pods(self.cluster, vmi):
            if pod_active(pod):
                self._delete_pod(pod)

    def _finalize(self, vmi: dict) -> None:
        pods = launcher_pods(self.cluster, vmi)
        for pod in pods:
            if not meta(pod).get("deletionTimestamp"):
                self._delete_pod(pod)
        if not launcher_pods(self.cluster, vmi) and VMI_FINALIZER in (meta(vmi).get("finalizers") or []):
            def drop(obj: dict) -> None:
                obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f != VMI_FINALIZER]
            mutate(self.cluster, VMI, meta(vmi).get("namespace"), meta(vmi)["name"], drop, uid=meta(vmi)["uid"])

    def _delete_pod(self, pod: dict) -> None:
        try:
            self.cluster.delete(rt(self.cluster, PODS), meta(pod)["namespace"], meta(pod)["name"],
                                {"preconditions": {"uid": meta(pod)["uid"]}})
        except ApiError:
            pass


def runs_launcher(pod: dict) -> bool:
    """The kubelet program for virt-launcher Pods: they keep running (the VM runs in them) until deleted or
    finished by a migration, instead of ending like other restartPolicy=Never Pods."""
    return labels(pod).get(APP_LABEL) == "virt-launcher"


def register(cluster, manager) -> None:
    if serves(cluster, VMI, PODS):
        manager.add(VMIController(cluster))
        cluster.programs.append(runs_launcher)
