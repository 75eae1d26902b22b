"""The VirtualMachinePool controller (`pool.kubevirt.io`, kind VirtualMachinePool): keeps
`spec.replicas` VirtualMachines named `<pool>-<n>` (lowest free index first) from
`spec.virtualMachineTemplate`.

- Each VM gets the template's labels and annotations, a controller ownerReference to the pool and the
  template's VM spec, with label `kubevirt.io/vmpool: <pool>` added to the VM's
  `spec.template.metadata.labels`, so its VMI and virt-launcher Pod carry it (what a PodDisruptionBudget
  over a pool selects). Pool events `SuccessfulCreate` "Created VM <ns>/<name>" and `SuccessfulDelete`
  "Deleted VM <ns>/<name>"; scale-down removes the highest indexes.
- `spec.paused` stops scaling. Status: `replicas`, `readyReplicas` (VMs with `status.ready`),
  `labelSelector`.

Upstream source: kubevirt/kubevirt `pkg/virt-controller/watch/pool/pool.go`. Simplified: no
`maxUnavailable` rolling updates, no revisions or per-VM name/volume customisation."""
from __future__ import annotations

import copy
import re

from .. import events
from ..errors import ApiError
from .common import CONTROLLER_COMPONENT, POOL, POOL_LABEL, VM, meta, mutate, owned, owner_ref, rt, selector_string, serves, status
from .owner import ReplicaOwnerController


class PoolController(ReplicaOwnerController):
    keys = (POOL, VM)
    owner_key = POOL
    owner_kind = "VirtualMachinePool"

    def reconcile(self, owner: dict) -> None:
        cluster, pool = self.cluster, owner
        name, namespace = meta(pool)["name"], meta(pool).get("namespace")
        spec = pool.get("spec") or {}
        pattern = re.compile(rf"^{re.escape(name)}-(\d+)$")
        vms = [v for v in owned(cluster, pool, VM) if not meta(v).get("deletionTimestamp")]
        indexes = {}
        for vm in vms:
            match = pattern.match(meta(vm)["name"])
            indexes[meta(vm)["name"]] = int(match.group(1)) if match else -1
        replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        if not spec.get("paused"):
            used = set(indexes.values())
            index = 0
            for _count in range(replicas - len(vms)):
                while index in used:
                    index += 1
                used.add(index)
                self._create(pool, f"{name}-{index}")
            for vm in sorted(vms, key=lambda v: indexes[meta(v)["name"]], reverse=True)[:max(len(vms) - replicas, 0)]:
                self._delete(pool, vm)
        vms = [v for v in owned(cluster, pool, VM) if not meta(v).get("deletionTimestamp")]

        def change(obj: dict):
            st = obj.setdefault("status", {})
            wanted = {"replicas": len(vms), "readyReplicas": sum(1 for v in vms if status(v).get("ready")),
                      "labelSelector": selector_string(spec.get("selector"))}
            if all(st.get(k) == v for k, v in wanted.items()):
                return False
            st.update(wanted)
            return True
        mutate(cluster, POOL, namespace, name, change, uid=meta(pool)["uid"])

    def _create(self, pool: dict, vm_name: str) -> None:
        template = copy.deepcopy((pool.get("spec") or {}).get("virtualMachineTemplate") or {})
        tmeta = template.get("metadata") or {}
        vm_spec = template.get("spec") or {}
        vm_spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})[POOL_LABEL] = \
            meta(pool)["name"]
        body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "metadata": {**{k: v for k, v in tmeta.items() if k in ("labels", "annotations")},
                             "name": vm_name, "ownerReferences": [owner_ref(pool)]},
                "spec": vm_spec}
        namespace = meta(pool).get("namespace")
        try:
            self.cluster.create(rt(self.cluster, VM), namespace, body)
        except ApiError as err:
            events.record(self.cluster, pool, "Warning", "FailedCreate", f"Error creating VM {vm_name}: {err.message}",
                          CONTROLLER_COMPONENT)
            return
        events.record(self.cluster, pool, "Normal", "SuccessfulCreate", f"Created VM {namespace}/{vm_name}",
                      CONTROLLER_COMPONENT)

    def _delete(self, pool: dict, vm: dict) -> None:
        try:
            self.cluster.delete(rt(self.cluster, VM), meta(vm).get("namespace"), meta(vm)["name"],
                                {"preconditions": {"uid": meta(vm)["uid"]}})
        except ApiError:
            return
        events.record(self.cluster, pool, "Normal", "SuccessfulDelete",
                      f"Deleted VM {meta(vm).get('namespace')}/{meta(vm)['name']}", CONTROLLER_COMPONENT)


def register(cluster, manager) -> None:
    if serves(cluster, POOL, VM):
        manager.add(PoolController(cluster))
