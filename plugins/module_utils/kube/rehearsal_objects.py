# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rehearsal's disposable objects as data: its namespace, the test VirtualMachines and their PVCs, and the
virt-launcher memory a test VM will request (to size the imbalance before anything exists).

A test VM boots from a containerDisk and, when a storage class is given, carries a blank RWX PVC as a second disk,
so that its launcher mounts a PVC like a production VM's does (the case the PodsWithPVC protection is about).
Placement is the procedure's reversible imbalance: a preferred node affinity to the source worker, and a required
one to the two workers of the rehearsal so that a migration can only land on the destination.

The launcher's memory request is the guest memory plus KubeVirt's overhead (virt-controller's GetMemoryOverhead:
fixed costs of virt-launcher, virtqemud, virtlogd and QEMU, the page tables at 1/512 of the guest, a per-vCPU cost,
the graphics device): "about 270Mi for a 512Mi guest" on the rebalance page. The estimate here rounds the fixed part
up; the rehearsal checks its prediction again against the launchers' real requests once the VMs run.
"""

from __future__ import annotations

from typing import Dict, List, Optional

MI = 2 ** 20
GI = 2 ** 30
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubevirt_ops.rebalance"
REHEARSAL_LABEL = "kubevirt-ops.io/rehearsal"
RUN_ANNOTATION = "kubevirt-ops.io/rehearsal-run"
HOSTNAME_LABEL = "kubernetes.io/hostname"
FIXED_OVERHEAD = 260 * MI      # above upstream's fixed costs, so that the estimate errs on the large side
PER_VCPU_OVERHEAD = 8 * MI
GRAPHICS_OVERHEAD = 16 * MI
CPU_MILLIS_PER_VCPU = 100      # KubeVirt's default cpuAllocationRatio of 10
DISK_NAME = "rootdisk"
DATA_DISK_NAME = "datadisk"


def namespace_labels() -> Dict[str, str]:
    """The labels that mark a namespace as the rehearsal's own (and so as one the rehearsal may delete)."""
    return {MANAGED_BY_LABEL: MANAGED_BY, REHEARSAL_LABEL: "true"}


def is_rehearsal_namespace(namespace: Optional[dict]) -> bool:
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in namespace_labels().items())


def foreign_namespace_problem(name: str) -> str:
    """Why a namespace of the rehearsal's name that lacks its labels is refused (by the plan and by the module)."""
    return "namespace {0} exists and is not the rehearsal's (it lacks the labels {1})".format(
        name, ", ".join("{0}={1}".format(k, v) for k, v in namespace_labels().items()))


def namespace_object(name: str, run_id: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": namespace_labels(), "annotations": {RUN_ANNOTATION: run_id}}}


def launcher_memory(guest_bytes: int, vcpus: int = 1) -> int:
    """The memory a test VM's virt-launcher Pod is expected to request, in bytes."""
    return guest_bytes + FIXED_OVERHEAD + -(-guest_bytes // 512) + PER_VCPU_OVERHEAD * vcpus + GRAPHICS_OVERHEAD


def launcher_cpu_millis(vcpus: int = 1) -> int:
    return CPU_MILLIS_PER_VCPU * vcpus


def memory_quantity(amount: int) -> str:
    """Bytes as the largest binary unit that states them exactly (`2816Mi`, `3Gi`)."""
    for unit, size in (("Gi", GI), ("Mi", MI), ("Ki", 2 ** 10)):
        if amount % size == 0:
            return "{0}{1}".format(amount // size, unit)
    return str(amount)


def vm_names(count: int, prefix: str = "rehearsal-vm") -> List[str]:
    return ["{0}-{1}".format(prefix, index) for index in range(1, count + 1)]


def placement(source: str, destination: str) -> dict:
    """Preferred on the source worker (the imbalance), required on the two rehearsal workers."""
    return {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [source, destination]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [source]}]}}]}}


def pvc_name(vm: str) -> str:
    return "{0}-data".format(vm)


def pvc_object(vm: str, namespace: str, storage_class: str, size: str, volume_mode: Optional[str], labels: Dict[str, str]) -> dict:
    spec = {"accessModes": ["ReadWriteMany"], "storageClassName": storage_class, "resources": {"requests": {"storage": size}}}
    if volume_mode:
        spec["volumeMode"] = volume_mode
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc_name(vm), "namespace": namespace, "labels": dict(labels)}, "spec": spec}


def vm_object(name: str, namespace: str, guest_bytes: int, labels: Dict[str, str], source: str, destination: str,
              image: str, storage_class: Optional[str] = None) -> dict:
    """A test VM: LiveMigrate, the scoping labels on the VM and its template (so on the launcher), one vCPU."""
    disks = [{"name": DISK_NAME, "disk": {"bus": "virtio"}}]
    volumes: List[dict] = [{"name": DISK_NAME, "containerDisk": {"image": image}}]
    if storage_class:
        disks.append({"name": DATA_DISK_NAME, "disk": {"bus": "virtio"}})
        volumes.append({"name": DATA_DISK_NAME, "persistentVolumeClaim": {"claimName": pvc_name(name)}})
    template_labels = dict(labels)
    template_labels["kubevirt.io/vm"] = name
    return {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels, **{MANAGED_BY_LABEL: MANAGED_BY})},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {
                    "evictionStrategy": "LiveMigrate",
                    "domain": {"cpu": {"cores": 1},
                               "devices": {"disks": disks, "interfaces": [{"name": "default", "masquerade": {}}]},
                               "resources": {"requests": {"memory": memory_quantity(guest_bytes)}}},
                    "networks": [{"name": "default", "pod": {}}],
                    "volumes": volumes,
                    "affinity": placement(source, destination),
                    "terminationGracePeriodSeconds": 30,
                },
            },
        },
    }


def launcher_stand_in(name: str, namespace: str, source: str, destination: str, guest_bytes: int, labels: Dict[str, str],
                      storage_class: Optional[str]) -> dict:
    """The launcher Pod a test VM will get, as the planner reads Pods (requests, labels, annotations, volumes):
    what the prediction plans with before the VMs exist."""
    volumes: List[dict] = [{"name": "container-disks", "emptyDir": {}}]
    if storage_class:
        volumes.append({"name": DATA_DISK_NAME, "persistentVolumeClaim": {"claimName": pvc_name(name)}})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "virt-launcher-{0}-planned".format(name), "namespace": namespace,
                     "labels": dict(labels, **{"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": name}),
                     "annotations": {"kubevirt.io/domain": name, "descheduler.alpha.kubernetes.io/request-evict-only": ""},
                     "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": name,
                                          "uid": "planned-" + name, "controller": True}]},
        "spec": {"nodeName": source, "affinity": placement(source, destination), "nodeSelector": {"kubevirt.io/schedulable": "true"},
                 "containers": [{"name": "compute", "resources": {"requests": {
                     "cpu": "{0}m".format(launcher_cpu_millis()), "memory": str(launcher_memory(guest_bytes))}}}],
                 "volumes": volumes},
        "status": {"phase": "Running"},
    }
