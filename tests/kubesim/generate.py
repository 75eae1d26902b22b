"""Generated objects for large clusters (`generate:` in a scenario): nodes, and VMs as VMIs with their
virt-launcher Pods shaped as KubeVirt makes them. Deterministic for a given seed."""
from __future__ import annotations

import random
import uuid
from typing import Any

_LAUNCHER_EMPTY_DIRS = ("private", "public", "sockets", "ephemeral-disks", "container-disks", "hotplug-disks")
_KNOWN = {"nodes", "vms", "namespace", "namespaces", "seed", "nodeCpu", "nodeMemoryGi", "vmMemoryMi",
          "evictionStrategy", "labels"}


def objects(spec: dict[str, Any]) -> list[dict]:
    unknown = set(spec) - _KNOWN
    if unknown:
        raise ValueError(f"generate: unknown key(s) {sorted(unknown)}; known: {sorted(_KNOWN)}")
    rng = random.Random(spec.get("seed", 1))
    node_count, vm_count = int(spec.get("nodes", 10)), int(spec.get("vms", 100))
    namespace_count = int(spec.get("namespaces", 1))
    prefix = spec.get("namespace", "scale")
    namespaces = [prefix] if namespace_count == 1 else [f"{prefix}-{i:03d}" for i in range(namespace_count)]
    result: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces]
    nodes = [f"worker-{i:04d}" for i in range(node_count)]
    for index, name in enumerate(nodes):
        result.append(_node(name, index, spec))
    for i in range(vm_count):
        namespace = namespaces[i % len(namespaces)]
        node = nodes[rng.randrange(node_count)] if nodes else ""
        uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        name = f"vm-{i:05d}"
        result.append(_vmi(name, namespace, node, uid, spec))
        result.append(_launcher(name, namespace, node, uid, spec, rng))
    return result


def _node(name: str, index: int, spec: dict) -> dict:
    cpu, memory = spec.get("nodeCpu", 64), spec.get("nodeMemoryGi", 256)
    capacity = {"cpu": str(cpu), "memory": f"{memory}Gi", "pods": "250"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "node-role.kubernetes.io/worker": "",
                                                  "kubevirt.io/schedulable": "true"}},
            "spec": {},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                       "addresses": [{"type": "InternalIP", "address": f"172.16.{index // 250}.{index % 250 + 1}"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"kubeletVersion": "v1.35.0", "osImage": "kubesim", "kernelVersion": "6.1",
                                    "containerRuntimeVersion": "containerd://2.0"}}}


def _vmi(name: str, namespace: str, node: str, uid: str, spec: dict) -> dict:
    labels = {"kubevirt.io/nodeName": node, "kubevirt.io/vm": name, **(spec.get("labels") or {})}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels},
            "spec": {"evictionStrategy": spec.get("evictionStrategy", "LiveMigrate"),
                     "domain": {"resources": {"requests": {"memory": f"{spec.get('vmMemoryMi', 512)}Mi"}},
                                "devices": {}}},
            "status": {"phase": "Running", "nodeName": node,
                       "conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "LiveMigratable", "status": "True"}],
                       "interfaces": [{"ipAddress": "10.0.0.1", "name": "default"}]}}


def _launcher(name: str, namespace: str, node: str, uid: str, spec: dict, rng: random.Random) -> dict:
    suffix = "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _index in range(5))
    memory = int(spec.get("vmMemoryMi", 512)) + 270
    labels = {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": uid, "kubevirt.io/vm": name,
              **(spec.get("labels") or {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"virt-launcher-{name}-{suffix}", "namespace": namespace, "labels": labels,
                         "annotations": {"kubevirt.io/domain": name,
                                         "descheduler.alpha.kubernetes.io/request-evict-only": ""},
                         "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                              "name": name, "uid": uid, "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"nodeName": node,
                     "containers": [{"name": "compute", "image": "virt-launcher",
                                     "resources": {"requests": {"cpu": "100m", "memory": f"{memory}Mi"}}}],
                     "volumes": [{"name": v, "emptyDir": {}} for v in _LAUNCHER_EMPTY_DIRS]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "compute", "ready": True, "restartCount": 0,
                                              "state": {"running": {}}}]}}
