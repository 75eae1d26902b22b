"""Whether a VMI is live-migratable: the `LiveMigratable` condition virt-handler computes when the VMI
starts, with the upstream reasons and messages.

- A `persistentVolumeClaim` or `dataVolume` volume whose PVC is not ReadWriteMany: reason
  `DisksNotLiveMigratable`, message `cannot migrate VMI: PVC <claim> is not shared, live migration requires
  that all PVCs must be shared (using ReadWriteMany access mode)` (a missing PVC counts as not shared).
- A `hostDisk` volume not marked `shared: true`: `DisksNotLiveMigratable`, `cannot migrate VMI with
  non-shared HostDisk`.
- A `bridge` interface on the pod network (without the VM annotation
  `kubevirt.io/allow-pod-bridge-network-live-migration`): reason `InterfaceNotLiveMigratable`.
- Otherwise `True` (container disks, cloud-init, masquerade networking and RWX PVCs migrate).

Upstream source: kubevirt/kubevirt `pkg/virt-handler/vm.go` (calculateLiveMigrationCondition,
checkVolumesForMigration) and `pkg/network/migration`. Simplified: host devices, SR-IOV, SEV, virtiofs,
persistent reservations, hotplugged volumes and host-model CPUs are not checked."""
from __future__ import annotations

from .common import annotations, find, meta

DISKS_REASON = "DisksNotLiveMigratable"
INTERFACE_REASON = "InterfaceNotLiveMigratable"
BRIDGE_MESSAGE = ("cannot migrate VMI which does not use masquerade, bridge with "
                  "kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable plugin to "
                  "connect to the pod network")


def claim_name(volume: dict) -> str | None:
    if volume.get("persistentVolumeClaim"):
        return volume["persistentVolumeClaim"].get("claimName")
    if volume.get("dataVolume"):
        return volume["dataVolume"].get("name")
    return None


def check(cluster, vmi: dict) -> tuple[bool, str, str]:
    """(migratable, reason, message) for the VMI as it is stored now."""
    namespace = meta(vmi).get("namespace", "")
    spec = vmi.get("spec") or {}
    for volume in spec.get("volumes") or []:
        claim = claim_name(volume)
        if claim:
            pvc = find(cluster, "persistentvolumeclaims", namespace, claim)
            modes = []
            if pvc is not None:
                modes = list((pvc.get("spec") or {}).get("accessModes") or []) + \
                    list((pvc.get("status") or {}).get("accessModes") or [])
            if "ReadWriteMany" not in modes:
                return False, DISKS_REASON, (f"cannot migrate VMI: PVC {claim} is not shared, live migration requires "
                                             "that all PVCs must be shared (using ReadWriteMany access mode)")
        elif volume.get("hostDisk") and not volume["hostDisk"].get("shared"):
            return False, DISKS_REASON, "cannot migrate VMI with non-shared HostDisk"
    pod_networks = {n.get("name") for n in spec.get("networks") or [] if "pod" in n}
    allowed = "kubevirt.io/allow-pod-bridge-network-live-migration" in annotations(vmi)
    for interface in ((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or []:
        if "bridge" in interface and interface.get("name") in pod_networks and not allowed:
            return False, INTERFACE_REASON, BRIDGE_MESSAGE
    return True, "", ""
