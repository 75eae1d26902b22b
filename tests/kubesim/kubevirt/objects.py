"""Builders for the KubeVirt objects of scenarios and tests (plain manifests, nothing is created here):
the HyperConverged and KubeVirt CRs, worker nodes able to run VMs, VMs (optionally with a PVC disk, a
preferred node, labels, a fault annotation), bare VMIs, VMI replica sets, VM pools and PVCs. The
virt-handler DaemonSet is in `handler.py`.

These describe objects as a user or an installer would create them; the controllers of this package do
the rest (HCO renders the KubeVirt CR, VMs get VMIs and launcher Pods, ...)."""
from __future__ import annotations

import copy

from .handler import virt_handler_daemonset

__all__ = ["hyperconverged", "kubevirt_cr", "worker_node", "vm", "vmi", "vmi_replicaset", "vm_pool", "pvc",
           "virt_handler_daemonset"]


def hyperconverged(namespace: str = "kubevirt", eviction_strategy: str | None = "LiveMigrateIfPossible",
                   live_migration: dict | None = None) -> dict:
    """HyperConverged `kubevirt-hyperconverged` (the ACP example sets LiveMigrateIfPossible)."""
    spec: dict = {}
    if eviction_strategy:
        spec["evictionStrategy"] = eviction_strategy
    if live_migration:
        spec["liveMigrationConfig"] = copy.deepcopy(live_migration)
    return {"apiVersion": "hco.kubevirt.io/v1beta1", "kind": "HyperConverged",
            "metadata": {"name": "kubevirt-hyperconverged", "namespace": namespace}, "spec": spec}


def kubevirt_cr(namespace: str = "kubevirt", name: str = "kubevirt-kubevirt-hyperconverged",
                eviction_strategy: str | None = None, migrations: dict | None = None) -> dict:
    """A KubeVirt CR (for clusters without HyperConverged; with it, HCO creates and owns this one)."""
    configuration: dict = {}
    if eviction_strategy:
        configuration["evictionStrategy"] = eviction_strategy
    if migrations:
        configuration["migrations"] = copy.deepcopy(migrations)
    return {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": name, "namespace": namespace},
            "spec": {"configuration": configuration}}


def worker_node(name: str, cpu: str = "16", memory: str = "64Gi", pods: str = "110", labels: dict | None = None,
                unschedulable: bool = False) -> dict:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "node-role.kubernetes.io/worker": "",
                                                  "kubevirt.io/schedulable": "true", **(labels or {})}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}],
                       "addresses": [{"type": "Hostname", "address": name}]}}
    return node


def _vmi_spec(memory: str, eviction_strategy: str | None, pvc_name: str | None, cpu: str | None,
              preferred_node: str | None, node_selector: dict | None) -> dict:
    spec: dict = {
        "domain": {"devices": {"disks": [{"name": "rootdisk", "disk": {"bus": "virtio"}}],
                               "interfaces": [{"name": "default", "masquerade": {}}]},
                   "resources": {"requests": {"memory": memory, **({"cpu": cpu} if cpu else {})}}},
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [{"name": "rootdisk", "persistentVolumeClaim": {"claimName": pvc_name}} if pvc_name else
                    {"name": "rootdisk", "containerDisk": {"image": "quay.io/containerdisks/fedora:41"}}],
    }
    if eviction_strategy:
        spec["evictionStrategy"] = eviction_strategy
    if preferred_node:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [preferred_node]}]}}]}}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return spec


def vm(name: str, namespace: str = "default", memory: str = "512Mi", eviction_strategy: str | None = None,
       run_strategy: str | None = "Always", labels: dict | None = None, pvc_name: str | None = None,
       cpu: str | None = None, preferred_node: str | None = None, annotations: dict | None = None,
       node_selector: dict | None = None, running: bool | None = None) -> dict:
    """A VirtualMachine; `labels` go to spec.template.metadata.labels (and so to the launcher Pod),
    `annotations` (e.g. {"kubesim.io/migration": "fail"}) to the VM's metadata."""
    spec: dict = {"template": {"metadata": {"labels": {"kubevirt.io/vm": name, **(labels or {})}},
                               "spec": _vmi_spec(memory, eviction_strategy, pvc_name, cpu, preferred_node,
                                                 node_selector)}}
    if running is not None:
        spec["running"] = running
    elif run_strategy:
        spec["runStrategy"] = run_strategy
    metadata: dict = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": metadata, "spec": spec}


def vmi(name: str, namespace: str = "default", memory: str = "512Mi", eviction_strategy: str | None = None,
        labels: dict | None = None, pvc_name: str | None = None, annotations: dict | None = None) -> dict:
    """A bare VirtualMachineInstance (no VM or replica set behind it)."""
    metadata: dict = {"name": name, "namespace": namespace, "labels": {"kubevirt.io/vm": name, **(labels or {})}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": metadata,
            "spec": _vmi_spec(memory, eviction_strategy, pvc_name, None, None, None)}


def vmi_replicaset(name: str, namespace: str = "default", replicas: int = 2, memory: str = "512Mi",
                   eviction_strategy: str | None = None) -> dict:
    selector = {"matchLabels": {"kubevirt.io/vmReplicaSet": name}}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": selector,
                     "template": {"metadata": {"labels": dict(selector["matchLabels"])},
                                  "spec": _vmi_spec(memory, eviction_strategy, None, None, None, None)}}}


def vm_pool(name: str, namespace: str = "default", replicas: int = 3, memory: str = "512Mi",
            eviction_strategy: str | None = None) -> dict:
    selector = {"matchLabels": {"kubevirt.io/vmpool": name}}
    return {"apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": selector,
                     "virtualMachineTemplate": {
                         "metadata": {"labels": dict(selector["matchLabels"])},
                         "spec": {"runStrategy": "Always",
                                  "template": {"metadata": {"labels": dict(selector["matchLabels"])},
                                               "spec": _vmi_spec(memory, eviction_strategy, None, None, None,
                                                                 None)}}}}}


def pvc(name: str, namespace: str = "default", access_modes: tuple[str, ...] = ("ReadWriteMany",),
        size: str = "10Gi", storage_class: str = "ceph-rbd", volume_mode: str = "Block") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}},
                     "storageClassName": storage_class, "volumeMode": volume_mode},
            "status": {"phase": "Bound", "accessModes": list(access_modes), "capacity": {"storage": size}}}
