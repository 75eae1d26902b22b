"""The VirtualMachineInstanceReplicaSet controller: keeps `spec.replicas` running VMIs from
`spec.template`.

- VMIs are created with `generateName: <replicaset name>` (no separator, as upstream), the template's
  labels and annotations, the template spec and a controller ownerReference; replica set events
  `SuccessfulCreate` "Started the virtual machine by creating the new virtual machine instance <name>" and
  `SuccessfulDelete` "Stopped the virtual machine by deleting the virtual machine instance <uid>".
- Finished VMIs (Failed or Succeeded) are deleted; VMIs whose launcher is terminating (Ready=False,
  reason PodTerminating) no longer count as active. So an evicted VMI of a replica set (eviction strategy
  None) is replaced at once, on another node if the old one is cordoned.
- `spec.paused` stops scaling. Status: `replicas`, `readyReplicas`, `labelSelector`.

Upstream source: kubevirt/kubevirt `pkg/virt-controller/watch/replicaset/replicaset.go`.
Simplified: no adoption of orphan VMIs, no burst limit, no ReplicaFailure/ReplicaPaused conditions."""
from __future__ import annotations

import copy

from .. import events
from ..errors import ApiError
from .common import (CONTROLLER_COMPONENT, FINAL_VMI_PHASES, VMI, VMIRS, condition_true, get_condition, meta, mutate, owned,
                     owner_ref, rt, selector_string, serves, status)
from .owner import ReplicaOwnerController


def _terminating(vmi: dict) -> bool:
    ready = get_condition(vmi, "Ready")
    return bool(ready) and ready.get("status") == "False" and ready.get("reason") == "PodTerminating"


class ReplicaSetController(ReplicaOwnerController):
    keys = (VMIRS, VMI)
    owner_key = VMIRS
    owner_kind = "VirtualMachineInstanceReplicaSet"

    def reconcile(self, owner: dict) -> None:
        cluster, rs = self.cluster, owner
        name, namespace = meta(rs)["name"], meta(rs).get("namespace")
        spec = rs.get("spec") or {}
        vmis = owned(cluster, rs, VMI)
        for vmi in vmis:
            if status(vmi).get("phase") in FINAL_VMI_PHASES and not meta(vmi).get("deletionTimestamp"):
                self._delete(rs, vmi, event=False)
        active = [v for v in vmis if status(v).get("phase") not in FINAL_VMI_PHASES
                  and not meta(v).get("deletionTimestamp") and not _terminating(v)]
        replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        if not spec.get("paused"):
            diff = len(active) - replicas
            for _index in range(-diff):
                self._create(rs)
            for vmi in active[:max(diff, 0)]:
                self._delete(rs, vmi)
        vmis = [v for v in owned(cluster, rs, VMI) if status(v).get("phase") not in FINAL_VMI_PHASES
                and not meta(v).get("deletionTimestamp") and not _terminating(v)]

        def change(obj: dict):
            st = obj.setdefault("status", {})
            wanted = {"replicas": len(vmis),
                      "readyReplicas": sum(1 for v in vmis if condition_true(v, "Ready")),
                      "labelSelector": selector_string(spec.get("selector"))}
            if all(st.get(k) == v for k, v in wanted.items()):
                return False
            st.update(wanted)
            return True
        mutate(cluster, VMIRS, namespace, name, change, uid=meta(rs)["uid"])

    def _create(self, rs: dict) -> None:
        template = (rs.get("spec") or {}).get("template") or {}
        tmeta = copy.deepcopy(template.get("metadata") or {})
        body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {**{k: v for k, v in tmeta.items() if k in ("labels", "annotations")},
                             "generateName": meta(rs)["name"], "ownerReferences": [owner_ref(rs)]},
                "spec": copy.deepcopy(template.get("spec") or {})}
        try:
            vmi = self.cluster.create(rt(self.cluster, VMI), meta(rs).get("namespace"), body)
        except ApiError as err:
            events.record(self.cluster, rs, "Warning", "FailedCreate",
                          f"Error creating virtual machine instance: {err.message}", CONTROLLER_COMPONENT)
            return
        events.record(self.cluster, rs, "Normal", "SuccessfulCreate",
                      f"Started the virtual machine by creating the new virtual machine instance {meta(vmi)['name']}",
                      CONTROLLER_COMPONENT)

    def _delete(self, rs: dict, vmi: dict, event: bool = True) -> None:
        try:
            self.cluster.delete(rt(self.cluster, VMI), meta(vmi).get("namespace"), meta(vmi)["name"],
                                {"preconditions": {"uid": meta(vmi)["uid"]}})
        except ApiError:
            return
        if event:
            events.record(self.cluster, rs, "Normal", "SuccessfulDelete",
                          f"Stopped the virtual machine by deleting the virtual machine instance {meta(vmi)['uid']}",
                          CONTROLLER_COMPONENT)


def register(cluster, manager) -> None:
    if serves(cluster, VMIRS, VMI):
        manager.add(ReplicaSetController(cluster))
