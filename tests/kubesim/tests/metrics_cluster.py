"""Helpers for the actual-usage tests (not a test module): an in-process cluster whose usage model is set from a
`metrics:` section, with VMs made of a Running VMI and its launcher Pod placed directly (no controllers)."""
from __future__ import annotations

from descheduler_cluster import add, make_cluster, pod
from kubesim.metrics import usage

VMI_KEY = "virtualmachineinstances.kubevirt.io"


def metrics_cluster(metrics: dict, time_scale: float = 1000):
    """A bare workload cluster (namespaces descheduler, apps) with the usage model of `metrics`."""
    cluster = make_cluster(time_scale)
    usage.install(cluster, usage.parse_config("metrics", metrics))
    return cluster


def vm_on(cluster, name: str, node: str, cpu: str = "1", memory: str = "1Gi", namespace: str = "apps",
          labels: dict | None = None, vmi_node: str | None = None, **extra) -> dict:
    """A Running VMI `name` on `vmi_node` (default `node`) and a launcher Pod for it on `node`."""
    if cluster.store.get(VMI_KEY, namespace, name) is None:
        add(cluster, VMI_KEY, namespace, {
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": namespace, "annotations": {"kubesim.io/unmanaged": "true"}},
            "spec": {"domain": {"devices": {}}},
            "status": {"phase": "Running", "nodeName": vmi_node or node}})
    launcher_labels = {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": name, **(labels or {})}
    return pod(cluster, f"virt-launcher-{name}-{node}", node, cpu=cpu, memory=memory, namespace=namespace,
               labels=launcher_labels, owner="VirtualMachineInstance", **extra)


def move_vmi(cluster, name: str, node: str, namespace: str = "apps") -> None:
    """The switch-over of a migration: the VMI's status.nodeName becomes `node`."""
    rt = cluster.registry.by_key(VMI_KEY)
    cluster.patch(rt, namespace, name, "merge", {"status": {"nodeName": node}}, subresource="status")
