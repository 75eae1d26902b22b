"""Shared helpers of the simulated KubeVirt: resource keys, well-known labels and annotations (the names
KubeVirt v1.8 uses), read-modify-write of objects through the cluster API, conditions and lookups of the
virt-launcher Pods of a VMI.

Upstream source: kubevirt/kubevirt `staging/src/kubevirt.io/api/core/v1` (label and annotation names) and
`pkg/controller` (condition handling). Nothing here is a controller; it only keeps the others short."""
from __future__ import annotations

import copy
from typing import Callable

from ..api import now_iso
from ..errors import ApiError

VMI = "virtualmachineinstances.kubevirt.io"
VM = "virtualmachines.kubevirt.io"
VMIM = "virtualmachineinstancemigrations.kubevirt.io"
VMIRS = "virtualmachineinstancereplicasets.kubevirt.io"
POOL = "virtualmachinepools.pool.kubevirt.io"
KUBEVIRT = "kubevirts.kubevirt.io"
HCO = "hyperconvergeds.hco.kubevirt.io"
PODS = "pods"

# labels
APP_LABEL = "kubevirt.io"                                   # kubevirt.io=virt-launcher
CREATED_BY_LABEL = "kubevirt.io/created-by"                 # VMI UID on its launcher Pods
NODE_NAME_LABEL = "kubevirt.io/nodeName"                    # on the VMI: the node it runs on
VM_NAME_LABEL = "vm.kubevirt.io/name"                       # on launcher Pods: the VMI name
MIGRATION_JOB_LABEL = "kubevirt.io/migrationJobUID"         # on migration target Pods
MIGRATION_TARGET_NODE_LABEL = "kubevirt.io/migrationTargetNodeName"   # on the VMI while migrating
VMI_NAME_LABEL = "kubevirt.io/vmi-name"                     # on migrations (the migration selector label)
POOL_LABEL = "kubevirt.io/vmpool"                           # on VMs of a VirtualMachinePool (template)
SCHEDULABLE_LABEL = "kubevirt.io/schedulable"               # nodes able to run VMs (set by virt-handler)

# annotations
DOMAIN_ANNOTATION = "kubevirt.io/domain"
EVICT_ONLY_ANNOTATION = "descheduler.alpha.kubernetes.io/request-evict-only"
EVICTION_IN_PROGRESS_ANNOTATION = "descheduler.alpha.kubernetes.io/eviction-in-progress"
EVICTION_SOURCE_ANNOTATION = "kubevirt.io/eviction-source"
EVACUATION_MIGRATION_ANNOTATION = "kubevirt.io/evacuationMigration"
MIGRATION_JOB_NAME_ANNOTATION = "kubevirt.io/migrationJobName"
FAULT_ANNOTATION = "kubesim.io/migration"                   # simulator-only: fail | hang | slow
UNMANAGED_ANNOTATION = "kubesim.io/unmanaged"               # simulator-only: the controllers leave it alone

# finalizers
VMI_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
VMIM_FINALIZER = "kubevirt.io/migrationJobFinalize"

CONTROLLER_COMPONENT = "virtualmachine-controller"          # virt-controller's event source
HANDLER_COMPONENT = "virt-handler"

FINAL_VMI_PHASES = ("Succeeded", "Failed")
FINAL_MIGRATION_PHASES = ("Succeeded", "Failed")
# Migrations holding a target Pod (what the parallel-migration limits count).
RUNNING_MIGRATION_PHASES = ("Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running")


def rt(cluster, key: str):
    return cluster.registry.by_key(key)


def serves(cluster, *keys: str) -> bool:
    return all(cluster.registry.by_key(k) is not None for k in keys)


def meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def labels(obj: dict) -> dict:
    return meta(obj).get("labels") or {}


def annotations(obj: dict) -> dict:
    return meta(obj).get("annotations") or {}


def status(obj: dict) -> dict:
    return obj.get("status") or {}


def unmanaged(obj: dict | None) -> bool:
    """Simulator-only opt-out: an object annotated `kubesim.io/unmanaged: "true"` is a plain stored object
    for the KubeVirt controllers (no launcher, status, restarts or migration), for tests that use these
    kinds as generic custom objects."""
    return obj is not None and annotations(obj).get(UNMANAGED_ANNOTATION) == "true"


def find(cluster, key: str, namespace: str | None, name: str) -> dict | None:
    """The stored object (not a copy: never modify it) or None."""
    entry = cluster.store.get(key, namespace or "", name)
    return entry.obj if entry else None


def mutate(cluster, key: str, namespace: str | None, name: str, change: Callable[[dict], object],
           uid: str | None = None) -> dict | None:
    """Read-modify-write under the store lock: `change` edits a copy in place (returning False skips the
    write). Metadata/spec changes go to the main resource, status changes to `/status`. Returns the stored
    object after the writes, or None when it is gone (or has another UID) or the write failed."""
    resource = cluster.registry.by_key(key)
    with cluster.lock:
        current = find(cluster, key, namespace, name)
        if current is None or (uid and meta(current).get("uid") != uid):
            return None
        wanted = copy.deepcopy(current)
        if change(wanted) is False:
            return current
        result = current
        try:
            if "status" in resource.subresources:
                main = {k: v for k, v in wanted.items() if k != "status"}
                if {k: v for k, v in current.items() if k != "status"} != main:
                    result = cluster.update(resource, namespace, name, wanted)
                    wanted["metadata"]["resourceVersion"] = meta(result).get("resourceVersion")
                if status(current) != status(wanted) and find(cluster, key, namespace, name) is not None:
                    result = cluster.update(resource, namespace, name, wanted, subresource="status")
            elif wanted != current:
                result = cluster.update(resource, namespace, name, wanted)
        except ApiError:
            return None
        return result


def get_condition(obj: dict, ctype: str) -> dict | None:
    return next((c for c in status(obj).get("conditions") or [] if c.get("type") == ctype), None)


def condition_true(obj: dict, ctype: str) -> bool:
    cond = get_condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def set_condition(obj: dict, ctype: str, cstatus: str, reason: str = "", message: str = "",
                  probe: bool = False) -> None:
    """Set a condition on obj (a writable copy), keeping lastTransitionTime when the status is unchanged."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    old = next((c for c in conditions if c.get("type") == ctype), None)
    cond = {"type": ctype, "status": cstatus, "lastProbeTime": now_iso() if probe else None,
            "lastTransitionTime": now_iso()}
    if old is not None and old.get("status") == cstatus:
        cond["lastTransitionTime"] = old.get("lastTransitionTime")
        if not probe:
            cond["lastProbeTime"] = old.get("lastProbeTime")
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    if old is not None:
        if {k: v for k, v in old.items() if k not in ("lastProbeTime", "lastTransitionTime")} == \
                {k: v for k, v in cond.items() if k not in ("lastProbeTime", "lastTransitionTime")}:
            return
        conditions[conditions.index(old)] = cond
    else:
        conditions.append(cond)


def remove_condition(obj: dict, ctype: str) -> None:
    conditions = status(obj).get("conditions")
    if conditions:
        obj["status"]["conditions"] = [c for c in conditions if c.get("type") != ctype]


def set_phase(obj: dict, phase: str) -> None:
    """Set status.phase and append to status.phaseTransitionTimestamps when it changes."""
    st = obj.setdefault("status", {})
    if st.get("phase") == phase:
        return
    st["phase"] = phase
    st.setdefault("phaseTransitionTimestamps", []).append({"phase": phase, "phaseTransitionTimestamp": now_iso()})


def controller_ref(obj: dict) -> dict | None:
    return next((r for r in meta(obj).get("ownerReferences") or [] if r.get("controller")), None)


def owner_ref(owner: dict, block: bool = True) -> dict:
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta(owner)["name"],
           "uid": meta(owner)["uid"], "controller": True}
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def launcher_pods(cluster, vmi: dict) -> list[dict]:
    """The virt-launcher Pods of a VMI (through the owner index: Pods owned by the VMI's UID)."""
    uid = meta(vmi).get("uid")
    return _dependents(cluster, uid, PODS, lambda pod: labels(pod).get(CREATED_BY_LABEL) == uid)


def pod_terminal(pod: dict) -> bool:
    return status(pod).get("phase") in ("Succeeded", "Failed")


def pod_active(pod: dict) -> bool:
    return not pod_terminal(pod) and not meta(pod).get("deletionTimestamp")


def pod_ready(pod: dict) -> bool:
    return status(pod).get("phase") == "Running" and condition_true(pod, "Ready")


def pod_unschedulable(pod: dict) -> dict | None:
    cond = get_condition(pod, "PodScheduled")
    if cond and cond.get("status") == "False" and cond.get("reason") == "Unschedulable" and \
            not (pod.get("spec") or {}).get("nodeName"):
        return cond
    return None


def current_pod(cluster, vmi: dict) -> dict | None:
    """The launcher Pod the VMI runs in: on status.nodeName (after a migration that is the former target
    Pod), preferring a live one; before scheduling, the newest Pod that is not a migration target."""
    node = status(vmi).get("nodeName")
    pods = sorted(launcher_pods(cluster, vmi), key=lambda p: meta(p).get("creationTimestamp", ""))
    if node:
        on_node = [p for p in pods if (p.get("spec") or {}).get("nodeName") == node]
        for wanted in (pod_active, lambda p: not pod_terminal(p), lambda p: True):
            chosen = [p for p in on_node if wanted(p)]
            if chosen:
                return chosen[-1]
        return None
    pods = [p for p in pods if MIGRATION_JOB_LABEL not in labels(p)]
    return pods[-1] if pods else None


def selector_string(selector: dict | None) -> str:
    """A metav1.LabelSelector as the label-selector string (status.labelSelector of scalable kinds)."""
    parts = [f"{k}={v}" for k, v in sorted(((selector or {}).get("matchLabels") or {}).items())]
    for expr in (selector or {}).get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), ",".join(sorted(expr.get("values") or []))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def owned(cluster, owner: dict, key: str) -> list[dict]:
    """Objects of resource `key` whose controller reference is the owner (through the owner index)."""
    uid = meta(owner).get("uid")
    return _dependents(cluster, uid, key, lambda obj: (controller_ref(obj) or {}).get("uid") == uid)


def _dependents(cluster, uid: str, key: str, keep) -> list[dict]:
    """The objects of resource `key` that list `uid` among their owners (the store's owner index) and that `keep`."""
    result = []
    for dep_key, namespace, name in cluster.store.dependents(uid):
        if dep_key != key:
            continue
        obj = find(cluster, key, namespace, name)
        if obj is not None and keep(obj):
            result.append(obj)
    return result
