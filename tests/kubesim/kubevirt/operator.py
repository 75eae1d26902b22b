"""virt-operator's report on the KubeVirt CR: once a KubeVirt CR exists it is Deployed.

Status written: `phase: Deployed`, `observedKubeVirtVersion`/`targetKubeVirtVersion`/`operatorVersion`
(v1.8.4 unless the scenario already set `observedKubeVirtVersion`), `observedKubeVirtRegistry`/
`targetKubeVirtRegistry`, `observedGeneration`, `defaultArchitecture: amd64`,
`outdatedVirtualMachineInstanceWorkloads: 0`, conditions Available=True, Progressing=False and
Degraded=False (reason AllComponentsReady, "All components are ready.").

Upstream source: kubevirt/kubevirt `pkg/virt-operator/kubevirt.go` (status and conditions).
Simplified: no install strategy, component Deployments/DaemonSets or upgrades; the virt-handler DaemonSet
is a scenario object (`handler.py`)."""
from __future__ import annotations

import copy

from ..controllers import Controller
from ..store import DELETED, Event
from .common import KUBEVIRT, meta, mutate, serves, set_condition
from .defaults import KUBEVIRT_REGISTRY, KUBEVIRT_VERSION


class VirtOperator(Controller):
    keys = (KUBEVIRT,)

    def on_event(self, event: Event) -> None:
        if event.type == DELETED or meta(event.obj).get("deletionTimestamp"):
            return

        def change(obj: dict):
            st = obj.setdefault("status", {})
            before = copy.deepcopy(st)
            version = st.get("observedKubeVirtVersion") or KUBEVIRT_VERSION
            registry = st.get("observedKubeVirtRegistry") or KUBEVIRT_REGISTRY
            st.update({"phase": "Deployed", "observedKubeVirtVersion": version, "targetKubeVirtVersion": version,
                       "operatorVersion": version, "observedKubeVirtRegistry": registry,
                       "targetKubeVirtRegistry": registry, "observedGeneration": meta(obj).get("generation", 1),
                       "defaultArchitecture": "amd64", "outdatedVirtualMachineInstanceWorkloads": 0})
            set_condition(obj, "Available", "True", "AllComponentsReady", "All components are ready.", probe=False)
            set_condition(obj, "Progressing", "False", "AllComponentsReady", "All components are ready.")
            set_condition(obj, "Degraded", "False", "AllComponentsReady", "All components are ready.")
            return st != before
        mutate(self.cluster, KUBEVIRT, event.namespace, meta(event.obj)["name"], change, uid=meta(event.obj)["uid"])


def register(cluster, manager) -> None:
    if serves(cluster, KUBEVIRT):
        manager.add(VirtOperator(cluster))
