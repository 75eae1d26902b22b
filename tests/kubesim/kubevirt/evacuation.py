"""The evacuation controller: turns VMIs marked for eviction into VirtualMachineInstanceMigrations.

A VMI is a candidate when `status.evacuationNodeName` equals its `status.nodeName` (set by the eviction
interceptor), or when its node carries the (deprecated) drain taint `kubevirt.io/drain:NoSchedule`, and it
is not final or deleting, wants to migrate on eviction (LiveMigrate or LiveMigrateIfPossible; External is only marked),
is `LiveMigratable=True`, has no unfinished migration, no migration in flight in its status and at most
one live launcher Pod. Per source node it creates up to
`min(parallelMigrationsPerCluster - running migrations in the cluster,
     parallelOutboundMigrationsPerNode - running migrations from this node)` migrations (running = phases
Scheduling to Running; Pending ones do not count, so more may be created and then wait in Pending: the
migration controller applies the same limits before it creates a target Pod). Each migration:
`generateName: kubevirt-evacuation-`, annotation `kubevirt.io/evacuationMigration: <source node>`, label
`kubevirt.io/vmi-name: <vmi>`, `spec.vmiName`; VMI event `SuccessfulCreate` "Created Migration <name>".
A marked VMI that cannot migrate gets the event `FailedCreate` "VirtualMachineInstance is not
migrateable". When a migration fails the VMI stays marked, so a new migration is created at once and the
migration controller holds it in Pending for the backoff (20 s after the failure, doubling).

A VMI whose mark is removed (virt-api's `evacuate/cancel`, `subresources.py`) leaves the index: no further migration is
created for it; migrations already created are not this controller's to remove (the migration controller runs them).

Upstream source: kubevirt/kubevirt `pkg/virt-controller/watch/drain/evacuation/evacuation.go`.
Simplified: the label is set at creation (upstream the migration controller adds it moments later); the
controller keeps an index of marked VMIs and unfinished migrations built from watch events."""
from __future__ import annotations

from .. import events
from ..controllers import Controller
from ..errors import ApiError
from ..store import DELETED, Event
from .common import (CONTROLLER_COMPONENT, EVACUATION_MIGRATION_ANNOTATION, FINAL_MIGRATION_PHASES, FINAL_VMI_PHASES,
                     RUNNING_MIGRATION_PHASES, VMI, VMI_NAME_LABEL, VMIM, condition_true, find, launcher_pods, meta,
                     pod_terminal, rt, serves, status, unmanaged)
from .defaults import migratable_on_eviction, migration_config

NODES = "nodes"
RECHECK_SECONDS = 5


def _in_flight(vmi: dict) -> bool:
    state = status(vmi).get("migrationState") or {}
    return bool(state.get("startTimestamp")) and not state.get("endTimestamp")


class EvacuationController(Controller):
    keys = (VMI, VMIM, NODES)

    def __init__(self, cluster):
        super().__init__(cluster)
        self._marked: dict[tuple[str, str], str] = {}          # (ns, vmi) -> evacuation node
        self._unfinished: dict[tuple[str, str], tuple[str, str]] = {}   # (ns, vmim) -> (vmi, phase)
        self._drained: set[str] = set()                          # nodes with the drain taint
        self._not_migratable_said: set[str] = set()
        self._recheck_pending = False

    def on_event(self, event: Event) -> None:
        obj = event.obj
        name = meta(obj).get("name", "")
        if event.key == VMI:
            ident = (event.namespace, name)
            node = status(obj).get("evacuationNodeName")
            if event.type != DELETED and node:
                self._marked[ident] = node
            else:
                self._marked.pop(ident, None)
                if event.type == DELETED:
                    self._not_migratable_said.discard(meta(obj).get("uid"))
            if not node and not self._drained:
                return
        elif event.key == VMIM:
            ident = (event.namespace, name)
            phase = status(obj).get("phase", "")
            if event.type == DELETED or phase in FINAL_MIGRATION_PHASES:
                self._unfinished.pop(ident, None)
            else:
                self._unfinished[ident] = ((obj.get("spec") or {}).get("vmiName", ""), phase)
        else:
            taint = migration_config(self.cluster).get("nodeDrainTaintKey")
            tainted = any(t.get("key") == taint and t.get("effect") == "NoSchedule"
                          for t in (obj.get("spec") or {}).get("taints") or [])
            if tainted and event.type != DELETED:
                self._drained.add(name)
            elif name in self._drained:
                self._drained.discard(name)
            else:
                return
        if self._marked or self._drained:
            self.reconcile()

    # ------------------------------------------------------------------------------------- reconcile
    def _candidates_by_node(self) -> dict[str, list[dict]]:
        by_node: dict[str, list[dict]] = {}
        for (namespace, name) in sorted(self._marked):
            vmi = find(self.cluster, VMI, namespace, name)
            if vmi is not None and status(vmi).get("nodeName") == status(vmi).get("evacuationNodeName"):
                by_node.setdefault(status(vmi)["nodeName"], []).append(vmi)
        for node in sorted(self._drained):
            for entry in list(self.cluster.store.entries(VMI)):
                vmi = entry.obj
                if status(vmi).get("nodeName") == node and vmi not in by_node.get(node, []):
                    by_node.setdefault(node, []).append(vmi)
        return by_node

    def reconcile(self) -> None:
        cluster = self.cluster
        config = migration_config(cluster)
        per_cluster = int(config["parallelMigrationsPerCluster"])
        per_node = int(config["parallelOutboundMigrationsPerNode"])
        with_migration = {(ns, vmi_name) for (ns, _name), (vmi_name, _phase) in self._unfinished.items()}
        running = [(ns, vmi_name) for (ns, _name), (vmi_name, phase) in self._unfinished.items()
                   if phase in RUNNING_MIGRATION_PHASES]
        waiting = False
        for node, vmis in sorted(self._candidates_by_node().items()):
            candidates, not_migratable = [], []
            for vmi in vmis:
                ns, name = meta(vmi).get("namespace", ""), meta(vmi)["name"]
                if status(vmi).get("phase") in FINAL_VMI_PHASES or meta(vmi).get("deletionTimestamp") or unmanaged(vmi):
                    continue
                if not migratable_on_eviction(cluster, vmi):
                    continue
                if not condition_true(vmi, "LiveMigratable"):
                    not_migratable.append(vmi)
                    continue
                if (ns, name) in with_migration or _in_flight(vmi):
                    continue
                if sum(1 for p in launcher_pods(cluster, vmi) if not pod_terminal(p)) > 1:
                    continue
                candidates.append(vmi)
            if not candidates and not not_migratable:
                continue
            from_node = 0
            for ns, vmi_name in running:
                source = find(cluster, VMI, ns, vmi_name)
                if source is not None and status(source).get("nodeName") == node:
                    from_node += 1
            free = min(per_cluster - len(running), per_node - from_node)
            if free <= 0:
                waiting = True
                continue
            for vmi in not_migratable[:max(free - len(candidates), 0)]:
                if meta(vmi)["uid"] not in self._not_migratable_said:
                    self._not_migratable_said.add(meta(vmi)["uid"])
                    events.record(cluster, vmi, "Normal", "FailedCreate", "VirtualMachineInstance is not migrateable",
                                  CONTROLLER_COMPONENT)
            for vmi in candidates[:free]:
                self._create_migration(vmi, node)
                with_migration.add((meta(vmi).get("namespace", ""), meta(vmi)["name"]))
        if waiting and not self._recheck_pending:
            self._recheck_pending = True
            self.manager.after_simulated(RECHECK_SECONDS, self._recheck)

    def _recheck(self) -> None:
        self._recheck_pending = False
        if self._marked or self._drained:
            self.reconcile()

    def _create_migration(self, vmi: dict, node: str) -> None:
        namespace, name = meta(vmi).get("namespace"), meta(vmi)["name"]
        body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
                "metadata": {"generateName": "kubevirt-evacuation-", "namespace": namespace,
                             "annotations": {EVACUATION_MIGRATION_ANNOTATION: node},
                             "labels": {VMI_NAME_LABEL: name}},
                "spec": {"vmiName": name}}
        try:
            created = self.cluster.create(rt(self.cluster, VMIM), namespace, body)
        except ApiError as err:
            events.record(self.cluster, vmi, "Warning", "FailedCreate", f"Error creating a Migration: {err.message}",
                          CONTROLLER_COMPONENT)
            return
        self._unfinished[(namespace, created["metadata"]["name"])] = (name, "")
        events.record(self.cluster, vmi, "Normal", "SuccessfulCreate", f"Created Migration {created['metadata']['name']}",
                      CONTROLLER_COMPONENT)


def register(cluster, manager) -> None:
    if serves(cluster, VMI, VMIM):
        manager.add(EvacuationController(cluster))
