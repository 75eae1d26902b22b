"""The virt-launcher Pod of a VMI, as virt-controller's template service renders it (and the migration
target Pod, which is the same Pod plus a node anti-affinity to the source node).

Shape:
- `generateName: virt-launcher-<vmi>-`, owned by the VMI (controller reference).
- Labels: the VMI's labels (so `spec.template.metadata.labels` of a VM reach its launcher), then
  `kubevirt.io=virt-launcher`, `kubevirt.io/created-by=<VMI UID>`, `vm.kubevirt.io/name=<vmi>`.
- Annotations: the VMI's annotations except `kubevirt.io/*` and `kubectl.kubernetes.io/*`, then
  `kubevirt.io/domain: <vmi>`, `kubectl.kubernetes.io/default-container: compute`,
  `descheduler.alpha.kubernetes.io/request-evict-only: ""` (on every launcher, whatever the strategy),
  `kubevirt.io/migrationTransportUnix: "true"`.
- Volumes: emptyDirs private, public, sockets, ephemeral-disks, container-disks, hotplug-disks,
  libvirt-runtime; one persistentVolumeClaim volume per VMI `persistentVolumeClaim`/`dataVolume` volume
  (a DataVolume's PVC has the DataVolume's name).
- One container `compute` requesting the guest memory (`spec.domain.resources.requests.memory`, else
  `spec.domain.memory.guest`) plus the overhead below, and `spec.domain.resources.requests.cpu`, else
  100m per vCPU (KubeVirt's default cpuAllocationRatio of 10); limits only when the VMI sets limits.
- Scheduling: nodeSelector `kubevirt.io/schedulable: "true"` plus the VMI's nodeSelector; the VMI's
  affinity (so a preferred node affinity in a VM template steers placement), tolerations,
  priorityClassName and schedulerName; terminationGracePeriodSeconds = the VMI's (default 30) + 15;
  restartPolicy Never.

Memory overhead model (upstream `pkg/virt-controller/services/renderresources.go` GetMemoryOverhead sums
fixed costs of virt-launcher, its monitor, virtqemud, virtlogd and QEMU, page tables, per-vCPU and
device costs): 245Mi fixed + guest memory / 512 (page tables) + 8Mi per vCPU + 16Mi for the graphics
device (unless `spec.domain.devices.autoattachGraphicsDevice: false`). For a 512Mi, 1-vCPU guest that is
245 + 1 + 8 + 16 = 270Mi, the "about 270Mi" of the rebalance page.

Upstream source: kubevirt/kubevirt `pkg/virt-controller/services/template.go`, `renderresources.go`,
`pkg/virt-controller/watch/migration/migration.go` (createTargetPod).
Simplified: no init containers, container-disk or hotplug containers, guest-console-log sidecar,
extended resources (devices.kubevirt.io/kvm, tun, vhost-net), probes or SELinux/security details beyond
the pod securityContext."""
from __future__ import annotations

import copy

from ..quantity import cpu_millis, format_cpu, format_memory, memory_bytes
from .common import (APP_LABEL, CREATED_BY_LABEL, DOMAIN_ANNOTATION, EVICT_ONLY_ANNOTATION, MIGRATION_JOB_LABEL,
                     MIGRATION_JOB_NAME_ANNOTATION, MIGRATION_TARGET_NODE_LABEL, NODE_NAME_LABEL, SCHEDULABLE_LABEL,
                     VM_NAME_LABEL, annotations, labels, meta, owner_ref)
from .defaults import LAUNCHER_IMAGE

EMPTY_DIRS = ("private", "public", "sockets", "ephemeral-disks", "container-disks", "hotplug-disks",
              "libvirt-runtime")
MI = 2 ** 20
STATIC_OVERHEAD = 245 * MI
PER_VCPU_OVERHEAD = 8 * MI
GRAPHICS_OVERHEAD = 16 * MI
DEFAULT_GRACE_SECONDS = 30
_NOT_COPIED_LABELS = (NODE_NAME_LABEL, MIGRATION_TARGET_NODE_LABEL)


def vcpus(vmi: dict) -> int:
    cpu = ((vmi.get("spec") or {}).get("domain") or {}).get("cpu") or {}
    return max(int(cpu.get("cores") or 1) * int(cpu.get("sockets") or 1) * int(cpu.get("threads") or 1), 1)


def guest_memory(vmi: dict) -> int:
    """Guest memory in bytes: resources.requests.memory, else memory.guest."""
    domain = (vmi.get("spec") or {}).get("domain") or {}
    requests = (domain.get("resources") or {}).get("requests") or {}
    return memory_bytes(requests.get("memory") or (domain.get("memory") or {}).get("guest") or 0)


def memory_overhead(vmi: dict) -> int:
    """The launcher's memory overhead in bytes (see the module docstring for the model)."""
    domain = (vmi.get("spec") or {}).get("domain") or {}
    graphics = (domain.get("devices") or {}).get("autoattachGraphicsDevice", True) is not False
    return STATIC_OVERHEAD + -(-guest_memory(vmi) // 512) + PER_VCPU_OVERHEAD * vcpus(vmi) + \
        (GRAPHICS_OVERHEAD if graphics else 0)


def compute_resources(vmi: dict) -> dict:
    domain = (vmi.get("spec") or {}).get("domain") or {}
    resources = domain.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    overhead = memory_overhead(vmi)
    result = {"requests": {
        "cpu": str(requests["cpu"]) if requests.get("cpu") else format_cpu(100 * vcpus(vmi)),
        "memory": format_memory(guest_memory(vmi) + overhead)}}
    if limits:
        result["limits"] = {}
        if limits.get("cpu"):
            result["limits"]["cpu"] = format_cpu(cpu_millis(limits["cpu"]))
        if limits.get("memory"):
            result["limits"]["memory"] = format_memory(memory_bytes(limits["memory"]) + overhead)
    return result


def pvc_volumes(vmi: dict) -> list[dict]:
    """Pod volumes for the VMI's persistentVolumeClaim and dataVolume volumes."""
    volumes = []
    for volume in (vmi.get("spec") or {}).get("volumes") or []:
        claim = None
        if volume.get("persistentVolumeClaim"):
            claim = dict(volume["persistentVolumeClaim"])
            claim.pop("hotpluggable", None)
        elif volume.get("dataVolume"):
            claim = {"claimName": volume["dataVolume"].get("name")}
        if claim and claim.get("claimName"):
            volumes.append({"name": volume.get("name"), "persistentVolumeClaim": claim})
    return volumes


def build_pod(vmi: dict) -> dict:
    """The launcher Pod manifest for a VMI (to be created with generateName)."""
    vmi_meta, spec = meta(vmi), vmi.get("spec") or {}
    name = vmi_meta["name"]
    pod_labels = {k: v for k, v in labels(vmi).items() if k not in _NOT_COPIED_LABELS}
    pod_labels.update({APP_LABEL: "virt-launcher", CREATED_BY_LABEL: vmi_meta["uid"], VM_NAME_LABEL: name})
    pod_annotations = {k: v for k, v in annotations(vmi).items()
                       if not k.startswith(("kubevirt.io/", "kubectl.kubernetes.io/"))}
    pod_annotations.update({DOMAIN_ANNOTATION: name, "kubectl.kubernetes.io/default-container": "compute",
                            EVICT_ONLY_ANNOTATION: "", "kubevirt.io/migrationTransportUnix": "true"})
    volumes = [{"name": d, "emptyDir": {}} for d in EMPTY_DIRS] + pvc_volumes(vmi)
    mounts = [{"name": d, "mountPath": f"/var/run/kubevirt-{d}" if d != "libvirt-runtime" else "/var/run/libvirt"}
              for d in EMPTY_DIRS]
    mounts += [{"name": v["name"], "mountPath": f"/var/run/kubevirt-private/vmi-disks/{v['name']}"}
               for v in volumes[len(EMPTY_DIRS):]]
    grace = spec.get("terminationGracePeriodSeconds")
    grace = DEFAULT_GRACE_SECONDS if grace is None else int(grace)
    pod_spec = {
        "containers": [{
            "name": "compute", "image": LAUNCHER_IMAGE,
            "command": ["/usr/bin/virt-launcher-monitor", "--qemu-timeout", "240s", "--name", name, "--uid",
                        vmi_meta["uid"], "--namespace", vmi_meta.get("namespace", ""), "--kubevirt-share-dir",
                        "/var/run/kubevirt", "--ephemeral-disk-dir", "/var/run/kubevirt-ephemeral-disks",
                        "--container-disk-dir", "/var/run/kubevirt/container-disks", "--grace-period-seconds",
                        str(grace + 15), "--hook-sidecars", "0"],
            "resources": compute_resources(vmi),
            "volumeMounts": mounts,
            "securityContext": {"runAsUser": 107, "runAsGroup": 107, "runAsNonRoot": True,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
        }],
        "volumes": volumes,
        "nodeSelector": {SCHEDULABLE_LABEL: "true", **(spec.get("nodeSelector") or {})},
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace + 15,
        "automountServiceAccountToken": False,
        "hostname": spec.get("hostname") or name,
        "securityContext": {"runAsUser": 107, "runAsGroup": 107, "runAsNonRoot": True, "fsGroup": 107},
    }
    for key in ("affinity", "tolerations", "priorityClassName", "schedulerName", "subdomain",
                "topologySpreadConstraints", "dnsPolicy", "dnsConfig"):
        if spec.get(key):
            pod_spec[key] = copy.deepcopy(spec[key])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"virt-launcher-{name}-", "namespace": vmi_meta.get("namespace"),
                         "labels": pod_labels, "annotations": pod_annotations, "ownerReferences": [owner_ref(vmi)]},
            "spec": pod_spec}


def build_target_pod(vmi: dict, migration: dict, source_node: str) -> dict:
    """The migration target Pod: the launcher Pod with a required node affinity that excludes the source
    node (added to every node selector term), the migration's UID label and name annotation."""
    pod = build_pod(vmi)
    not_source = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [source_node]}
    node_affinity = pod["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        term.setdefault("matchExpressions", []).append(copy.deepcopy(not_source))
    pod["metadata"]["labels"][MIGRATION_JOB_LABEL] = meta(migration)["uid"]
    pod["metadata"]["annotations"][MIGRATION_JOB_NAME_ANNOTATION] = meta(migration)["name"]
    return pod
