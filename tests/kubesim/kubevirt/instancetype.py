"""Instance types and preferences (`instancetype.kubevirt.io/v1beta1`): what a VM that references
`spec.instancetype {kind, name}` (and `spec.preference`) gets in its VMI, as the VM controller applies them when
it creates the VMI.

- Kinds: VirtualMachineInstancetype (namespaced, short names vminstancetype(s), vmf(s)),
  VirtualMachineClusterInstancetype (cluster, vmclusterinstancetype(s), vmcf(s)), VirtualMachinePreference
  (namespaced, vmpref(s), vmp(s)), VirtualMachineClusterPreference (cluster, vmcp(s)). A matcher's `kind` is
  matched case-insensitively against the singular and plural names; an empty kind is the cluster kind.
- CPU: `spec.cpu.guest` vCPUs become the VMI's `domain.cpu` topology, by the preference's
  `cpu.preferredCPUTopology` (default `sockets`; `cores`, `threads`, `any` = sockets; the deprecated
  `prefer*` names too): sockets = guest (or cores/threads = guest), the other two 1; `model`,
  `dedicatedCPUPlacement` copied. Memory: `spec.memory.guest` -> `domain.memory.guest`; `overcommitPercent` sets
  `domain.resources.requests.memory` that much lower.
- Conflicts: a template that sets what the instance type sets (`domain.cpu.sockets|cores|threads`, cpu
  requests/limits, `domain.memory.guest`, memory requests/limits) is refused: the VM controller records
  `FailedCreate` with `VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type`
  and creates no VMI.
- The VMI is annotated `kubevirt.io/instancetype-name` or `kubevirt.io/cluster-instancetype-name` (and
  `kubevirt.io/preference-name` / `kubevirt.io/cluster-preference-name`) with the referenced name.

Upstream source: kubevirt/kubevirt `staging/src/kubevirt.io/api/instancetype/v1beta1/types.go`,
`pkg/virt-operator/resource/generate/components/crds.go` (names, scope), `pkg/instancetype/apply/{cpu,memory,
annotations}.go`, `pkg/instancetype/preference/apply` (GetPreferredTopology), `pkg/instancetype` name
annotations. Simplified: no ControllerRevisions (the VMI follows the current instance type), no `spread`
topology, no preference defaults other than the CPU topology, no admission check of the VM at create time (a
missing instance type is reported by the controller as `FailedCreate` instead)."""
from __future__ import annotations

import copy

from ..quantity import format_memory, memory_bytes
from .common import find

GROUP = "instancetype.kubevirt.io"
INSTANCETYPE = f"virtualmachineinstancetypes.{GROUP}"
CLUSTER_INSTANCETYPE = f"virtualmachineclusterinstancetypes.{GROUP}"
PREFERENCE = f"virtualmachinepreferences.{GROUP}"
CLUSTER_PREFERENCE = f"virtualmachineclusterpreferences.{GROUP}"
_NAMESPACED_NAMES = {"instancetype": ("virtualmachineinstancetype", "virtualmachineinstancetypes"),
                     "preference": ("virtualmachinepreference", "virtualmachinepreferences")}
_CLUSTER_NAMES = {"instancetype": ("", "virtualmachineclusterinstancetype", "virtualmachineclusterinstancetypes"),
                  "preference": ("", "virtualmachineclusterpreference", "virtualmachineclusterpreferences")}
_KEYS = {("instancetype", False): CLUSTER_INSTANCETYPE, ("instancetype", True): INSTANCETYPE,
         ("preference", False): CLUSTER_PREFERENCE, ("preference", True): PREFERENCE}
_ANNOTATIONS = {("instancetype", True): "kubevirt.io/instancetype-name",
                ("instancetype", False): "kubevirt.io/cluster-instancetype-name",
                ("preference", True): "kubevirt.io/preference-name",
                ("preference", False): "kubevirt.io/cluster-preference-name"}
_TOPOLOGY = {"preferSockets": "sockets", "preferCores": "cores", "preferThreads": "threads", "preferAny": "sockets",
             "any": "sockets"}


class InstancetypeError(Exception):
    """Why the VMI cannot be made from the VM (the VM controller's FailedCreate message)."""


def _lookup(cluster, vm: dict, field: str) -> tuple[dict | None, str, bool]:
    """The referenced object's spec (None when the VM references none), its name and whether it is namespaced."""
    matcher = (vm.get("spec") or {}).get(field)
    if not matcher or not matcher.get("name"):
        return None, "", False
    kind = (matcher.get("kind") or "").lower()
    if kind in _NAMESPACED_NAMES[field]:
        namespaced = True
    elif kind in _CLUSTER_NAMES[field]:
        namespaced = False
    else:
        raise InstancetypeError(f"got unexpected kind in {field.capitalize()}Matcher: {matcher.get('kind')}")
    key, name = _KEYS[(field, namespaced)], matcher["name"]
    if cluster.registry.by_key(key) is None:
        raise InstancetypeError(f'{key} "{name}" not found')
    obj = find(cluster, key, (vm.get("metadata") or {}).get("namespace") if namespaced else None, name)
    if obj is None:
        raise InstancetypeError(f'{key} "{name}" not found')
    return obj.get("spec") or {}, name, namespaced


def apply(cluster, vm: dict, vmi_spec: dict, annotations: dict) -> None:
    """Apply the VM's instance type and preference to a new VMI's spec and annotations (in place)."""
    instancetype, it_name, it_namespaced = _lookup(cluster, vm, "instancetype")
    preference, pref_name, pref_namespaced = _lookup(cluster, vm, "preference")
    if preference is not None:
        annotations[_ANNOTATIONS[("preference", pref_namespaced)]] = pref_name
    if instancetype is None:
        return
    annotations[_ANNOTATIONS[("instancetype", it_namespaced)]] = it_name
    domain = vmi_spec.setdefault("domain", {})
    conflicts = _conflicts(domain)
    if conflicts:
        paths = ", ".join(f"spec.template.spec.{path}" for path in conflicts)
        raise InstancetypeError(f"VM field(s) {paths} conflicts with selected instance type")
    cpu_spec, memory_spec = instancetype.get("cpu") or {}, instancetype.get("memory") or {}
    cpu = domain.setdefault("cpu", {})
    for key in ("model", "dedicatedCPUPlacement", "isolateEmulatorThread", "maxSockets"):
        if cpu_spec.get(key) is not None:
            cpu[key] = copy.deepcopy(cpu_spec[key])
    cpu.update(topology(int(cpu_spec.get("guest") or 1), preference))
    guest = memory_spec.get("guest")
    if guest is not None:
        domain.setdefault("memory", {})["guest"] = str(guest)
        overcommit = int(memory_spec.get("overcommitPercent") or 0)
        if overcommit > 0:
            requested = int(memory_bytes(guest) * (1 - overcommit / 100))
            domain.setdefault("resources", {}).setdefault("requests", {})["memory"] = format_memory(requested)


def topology(vcpus: int, preference: dict | None) -> dict:
    """applyGuestCPUTopology: all vCPUs on the preferred axis, 1 on the others."""
    result = {"cores": 1, "sockets": 1, "threads": 1}
    if vcpus == 1:
        return result
    preferred = ((preference or {}).get("cpu") or {}).get("preferredCPUTopology") or "sockets"
    preferred = _TOPOLOGY.get(preferred, preferred)
    result[preferred if preferred in result else "sockets"] = vcpus
    return result


def _conflicts(domain: dict) -> list[str]:
    """validateCPU and applyMemory: template fields that the instance type owns."""
    found = []
    resources = domain.get("resources") or {}
    for kind in ("requests", "limits"):
        if "cpu" in (resources.get(kind) or {}):
            found.append(f"domain.resources.{kind}.cpu")
    for axis in ("sockets", "cores", "threads"):
        if (domain.get("cpu") or {}).get(axis):
            found.append(f"domain.cpu.{axis}")
    memory = ["domain.memory.guest"] if (domain.get("memory") or {}).get("guest") is not None else []
    memory += [f"domain.resources.{kind}.memory" for kind in ("requests", "limits")
               if "memory" in (resources.get(kind) or {})]
    return found + memory[:1]      # applyMemory stops at its first conflict
