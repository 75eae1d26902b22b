"""The VirtualMachineInstanceMigration controller (virt-controller's migration controller together with
what the source and target virt-handlers do), driving a live migration through its phases.

Phases (each recorded in `status.phaseTransitionTimestamps`):
- Pending: the migration gets the finalizer `kubevirt.io/migrationJobFinalize` and label
  `kubevirt.io/vmi-name`. It waits while the VMI is not Running, while an evacuation migration is in its
  backoff (the previous migration of the VMI failed: 20 s after that failure, doubling for each further
  consecutive failure until a success; VMI event Warning `MigrationBackoff` "backoff migrating vmi
  <ns>/<name>"), and while `parallelMigrationsPerCluster` (default 5) migrations are running in the cluster
  or `parallelOutboundMigrationsPerNode` (default 2) from the VMI's node (KubeVirt CR
  `spec.configuration.migrations`). A migration for a VMI that does not exist is deleted; one for a VMI
  already migrating fails.
- Scheduling: for an evacuation the source Pod gets `descheduler.alpha.kubernetes.io/eviction-in-progress:
  "true"`; the target launcher Pod is created without a node, with a required node affinity excluding the
  source node, label `kubevirt.io/migrationJobUID` and annotation `kubevirt.io/migrationJobName`
  (migration event `SuccessfulCreate` "Created migration target pod <pod>"), and placed by the simulated
  scheduler. If it stays unschedulable: event Warning `migrationTargetPodUnschedulable` "Migration target
  pod for VMI [<ns>/<name>] is currently unschedulable."; after 300 simulated seconds (upstream's
  unschedulable pending timeout) the target Pod is deleted ("unschedulable pod <ns>/<pod> timeout period
  exceeded") and the migration fails ("Migration target pod was removed during active migration.").
- Scheduled -> PreparingTarget: the target Pod runs; the VMI gets `status.migrationState` (migrationUid,
  sourceNode, targetNode, sourcePod, targetPod, migrationConfiguration) and label
  `kubevirt.io/migrationTargetNodeName`; virt-handler events `PreparingTarget`.
- TargetReady (1 simulated second later, `targetNodeAddress` set) -> Running (`startTimestamp`, mode
  PreCopy; VMI event `Migrating` "VirtualMachineInstance is migrating.").
- Succeeded after 9 simulated seconds per 512Mi of guest memory (about ten seconds in all for a 512Mi
  guest): the VMI's `status.nodeName` and label `kubevirt.io/nodeName` become the target,
  `migrationState` is completed with `endTimestamp`, `status.evacuationNodeName` and the annotation
  `kubevirt.io/eviction-source` are removed (the UID never changes); VMI event `Migrated` "The
  VirtualMachineInstance migrated to node <node>."; migration event `SuccessfulMigration` "Source node
  reported migration succeeded" and `status.migrationState` copied from the VMI; the source Pod completes
  (Succeeded) and is deleted 2 simulated seconds later (its eviction-in-progress annotation goes with it).
- Failed: `migrationState.failed` and `failureReason` on the VMI and the migration, event FailedMigration,
  the target Pod ends and is deleted, the source Pod loses its eviction-in-progress annotation, and the
  VMI stays where it was (still marked, so the evacuation controller retries after the backoff).
  Deleting an unfinished migration cancels it (Failed, condition AbortRequested).
Finalized migrations beyond the five newest of a VMI are deleted (upstream's garbage collection buffer).

Per-VM faults (simulator only): annotation `kubesim.io/migration` on the VMI or its VM
(`metadata.annotations`, or the VM template's annotations, which the VMI inherits):
- `fail`: the migration reaches Running and fails halfway through with a failureReason;
- `hang`: it stays Running forever (until the migration is deleted, which cancels it);
- `slow`: it takes ten times as long.
The same faults come from a fault rule of component `virt-handler` (faults.py, `POST /_kubesim/faults`), which
hits the next matching migrations whatever their VM (one migration per match, decided when its transfer starts;
the annotation wins when both are set); a `fail` then names the rule's match in its failureReason.

Upstream source: kubevirt/kubevirt `pkg/virt-controller/watch/migration/migration.go` (phases, limits,
backoff, pending timeout, garbage collection), `pkg/virt-controller/watch/descheduler` (the
eviction-in-progress annotation), `pkg/virt-handler/vm.go` (events, migrationState, nodeName switch).
Simplified: no real data transfer, progress or completion timeouts, post-copy, migration policies,
network services, PDB expansion or decentralized migrations; the migration's `migrationState` gets the
source and target at hand-off and is completed from the VMI at the end (`sourcePod` is set when the target
Pod is created)."""
from __future__ import annotations

import copy
import itertools
import time

from .. import events
from ..api import now_iso
from ..controllers import Controller
from ..controllers.kubelet import finish_pod
from ..errors import ApiError
from ..faults import migration_fault
from ..store import DELETED, Event
from .common import (CONTROLLER_COMPONENT, EVACUATION_MIGRATION_ANNOTATION, EVICTION_IN_PROGRESS_ANNOTATION,
                     EVICTION_SOURCE_ANNOTATION, FAULT_ANNOTATION, FINAL_MIGRATION_PHASES, FINAL_VMI_PHASES,
                     HANDLER_COMPONENT, MIGRATION_JOB_LABEL, MIGRATION_TARGET_NODE_LABEL, NODE_NAME_LABEL, PODS,
                     RUNNING_MIGRATION_PHASES, VM, VMI, VMI_NAME_LABEL, VMIM, VMIM_FINALIZER, annotations,
                     controller_ref, current_pod, find, labels, launcher_pods, meta, mutate, pod_active, pod_ready,
                     pod_terminal, pod_unschedulable, remove_condition, rt, serves, set_condition, set_phase, status,
                     unmanaged)
from .defaults import migration_config
from .launcher import build_target_pod, guest_memory

BACKOFF_SECONDS = 20
UNSCHEDULABLE_TIMEOUT_SECONDS = 300
PREPARE_SECONDS = 1
SECONDS_PER_512MI = 9
SOURCE_POD_LINGER_SECONDS = 2
GC_BUFFER = 5
MI512 = 512 * 2 ** 20


def failure_reason(cause: str) -> str:
    """The failureReason virt-handler reports for a migration that libvirt aborted, naming the simulated cause."""
    return ("Live migration failed error encountered during MigrateToURI3 libvirt api call: "
            f"virError(Code=1, Domain=10, Message='operation failed: migration out job: simulated failure ({cause})')")


FAILURE_REASON = failure_reason("kubesim.io/migration=fail")


def fault_of(cluster, vmi: dict) -> str:
    """The `kubesim.io/migration` fault of a VMI: its own annotation, else its VM's."""
    value = annotations(vmi).get(FAULT_ANNOTATION)
    ref = controller_ref(vmi)
    if not value and ref and ref.get("kind") == "VirtualMachine":
        vm = find(cluster, VM, meta(vmi).get("namespace"), ref.get("name", ""))
        if vm is not None:
            template = ((vm.get("spec") or {}).get("template") or {}).get("metadata") or {}
            value = annotations(vm).get(FAULT_ANNOTATION) or (template.get("annotations") or {}).get(FAULT_ANNOTATION)
    return (value or "").strip().lower()


def _phase(obj: dict) -> str:
    return status(obj).get("phase") or ""


class MigrationController(Controller):
    keys = (VMIM, VMI, PODS)

    def __init__(self, cluster):
        super().__init__(cluster)
        self._seq = itertools.count()
        self._order: dict[str, int] = {}                       # migration uid -> creation order
        self._active: dict[tuple[str, str], str] = {}          # (ns, name) of unfinished migrations -> uid
        self._by_uid: dict[str, tuple[str, str]] = {}
        self._failed_at: dict[str, float] = {}                 # migration uid -> monotonic time of failure
        self._said: set[tuple[str, str]] = set()               # (migration uid, what) done once
        self._timers: set[tuple[str, str]] = set()
        self._failure_causes: dict[str, str] = {}              # migration uid -> failureReason of its `fail` fault

    # ------------------------------------------------------------------------------------------ events
    def on_event(self, event: Event) -> None:
        obj = event.obj
        if event.key == VMIM:
            ident = (event.namespace, meta(obj)["name"])
            uid = meta(obj)["uid"]
            if event.type == DELETED:
                self._active.pop(ident, None)
                self._by_uid.pop(uid, None)
                self._kick_pending()
                return
            self._order.setdefault(uid, next(self._seq))
            self._by_uid[uid] = ident
            if _phase(obj) in FINAL_MIGRATION_PHASES:
                self._active.pop(ident, None)
            else:
                self._active[ident] = uid
            self.sync(*ident)
        elif event.key == VMI:
            name = meta(obj)["name"]
            for (namespace, mig_name), _uid in list(self._active.items()):
                if namespace == event.namespace:
                    migration = find(self.cluster, VMIM, namespace, mig_name)
                    if migration is not None and (migration.get("spec") or {}).get("vmiName") == name:
                        self.sync(namespace, mig_name)
        else:
            job = labels(obj).get(MIGRATION_JOB_LABEL)
            if job and job in self._by_uid:
                self.sync(*self._by_uid[job])

    def _once(self, uid: str, what: str) -> bool:
        if (uid, what) in self._said:
            return False
        self._said.add((uid, what))
        return True

    def _timer(self, seconds: float, namespace: str, name: str, uid: str, step: str) -> None:
        """Run sync (with a step) after simulated seconds, once per (uid, step)."""
        if (uid, step) in self._timers:
            return
        self._timers.add((uid, step))

        def fire() -> None:
            self._timers.discard((uid, step))
            migration = find(self.cluster, VMIM, namespace, name)
            if migration is not None and meta(migration)["uid"] == uid:
                self.sync(namespace, name, step)
        self.manager.after_simulated(seconds, fire)

    def _kick_pending(self) -> None:
        pending = []
        for (namespace, name), uid in list(self._active.items()):
            migration = find(self.cluster, VMIM, namespace, name)
            if migration is not None and _phase(migration) == "Pending":
                pending.append((self._order.get(uid, 0), namespace, name))
        for _order, namespace, name in sorted(pending):
            self.sync(namespace, name)

    # -------------------------------------------------------------------------------------------- sync
    def sync(self, namespace: str, name: str, step: str = "") -> None:
        cluster = self.cluster
        migration = find(cluster, VMIM, namespace, name)
        if migration is None or unmanaged(migration):
            return
        uid = meta(migration)["uid"]
        vmi_name = (migration.get("spec") or {}).get("vmiName", "")
        vmi = find(cluster, VMI, namespace, vmi_name)
        phase = _phase(migration)
        if meta(migration).get("deletionTimestamp"):
            if phase not in FINAL_MIGRATION_PHASES:
                self._fail(migration, vmi, "Migration failed due to being canceled", abort=True)
            self._drop_finalizer(namespace, name, uid)
            return
        if phase in FINAL_MIGRATION_PHASES:
            self._drop_finalizer(namespace, name, uid)
            return
        if vmi is None:
            try:
                cluster.delete(rt(cluster, VMIM), namespace, name, {"preconditions": {"uid": uid}})
            except ApiError:
                pass
            return
        if not phase:
            self._accept(migration, vmi)
            return
        if status(vmi).get("phase") in FINAL_VMI_PHASES or meta(vmi).get("deletionTimestamp"):
            self._fail(migration, vmi, "Migration failed vmi shutdown during migration.")
            return
        target = self._target_pod(vmi, uid)
        if phase == "Pending":
            self._try_start(migration, vmi)
        elif phase == "Scheduling":
            self._scheduling(migration, vmi, target, step)
        elif phase in ("Scheduled", "PreparingTarget", "TargetReady", "Running"):
            if target is None:
                self._fail(migration, vmi, "Migration target pod was removed during active migration.")
            elif pod_terminal(target) or meta(target).get("deletionTimestamp"):
                self._fail(migration, vmi, "Migration failed because target pod shutdown during migration")
            elif phase == "PreparingTarget" and step == "target-ready":
                self._start_transfer(migration, vmi, target)
            elif phase == "Running" and step in ("complete", "fail"):
                if step == "complete":
                    self._succeed(migration, vmi, target)
                else:
                    self._fail(migration, vmi, "source node reported migration failed",
                               reason=self._failure_causes.pop(uid, FAILURE_REASON))

    def _target_pod(self, vmi: dict, uid: str) -> dict | None:
        pods = [p for p in launcher_pods(self.cluster, vmi) if labels(p).get(MIGRATION_JOB_LABEL) == uid]
        return pods[-1] if pods else None

    # ---------------------------------------------------------------------------------------- phases
    def _accept(self, migration: dict, vmi: dict) -> None:
        namespace, name, uid = meta(migration)["namespace"], meta(migration)["name"], meta(migration)["uid"]
        busy = self._other_active(migration)

        def accept(obj: dict) -> None:
            finalizers = obj["metadata"].setdefault("finalizers", [])
            if VMIM_FINALIZER not in finalizers:
                finalizers.append(VMIM_FINALIZER)
            obj["metadata"].setdefault("labels", {}).setdefault(VMI_NAME_LABEL, meta(vmi)["name"])
            obj["metadata"].setdefault("annotations", {}).setdefault("kubevirt.io/latest-observed-api-version", "v1")
            obj["metadata"]["annotations"].setdefault("kubevirt.io/storage-observed-api-version", "v1")
            set_phase(obj, "Failed" if busy else "Pending")
        updated = mutate(self.cluster, VMIM, namespace, name, accept, uid=uid)
        if updated is not None and busy:
            self._failed_at[uid] = time.monotonic()
            events.record(self.cluster, updated, "Warning", "FailedMigration",
                          "VMI is not eligible for migration because another migration job is in progress.",
                          CONTROLLER_COMPONENT)

    def _other_active(self, migration: dict) -> bool:
        """Another migration of the same VMI is past Pending (upstream canMigrateVMI)."""
        vmi_name = (migration.get("spec") or {}).get("vmiName")
        for (namespace, name), uid in self._active.items():
            if namespace != meta(migration)["namespace"] or uid == meta(migration)["uid"]:
                continue
            other = find(self.cluster, VMIM, namespace, name)
            if other is not None and (other.get("spec") or {}).get("vmiName") == vmi_name and \
                    _phase(other) in RUNNING_MIGRATION_PHASES:
                return True
        return False

    def _backoff_remaining(self, migration: dict, vmi: dict) -> float:
        """Real seconds left in the evacuation backoff of this migration (0 when none)."""
        notes = annotations(migration)
        if EVACUATION_MIGRATION_ANNOTATION not in notes and "kubevirt.io/workloadUpdateMigration" not in notes:
            return 0.0
        namespace, vmi_name = meta(migration)["namespace"], meta(vmi)["name"]
        history = []
        for entry in self.cluster.store.entries(VMIM, namespace):
            other = entry.obj
            other_notes = annotations(other)
            if (other.get("spec") or {}).get("vmiName") != vmi_name:
                continue
            if EVACUATION_MIGRATION_ANNOTATION in other_notes or "kubevirt.io/workloadUpdateMigration" in other_notes:
                history.append((self._order.get(meta(other)["uid"], -1), other))
        if len(history) < 2:
            return 0.0
        history.sort(key=lambda item: item[0], reverse=True)
        if meta(history[0][1])["uid"] != meta(migration)["uid"]:
            return 0.0
        backoff = 0
        for _order, other in history[1:]:
            if _phase(other) == "Succeeded":
                break
            if meta(other).get("deletionTimestamp"):
                continue
            if _phase(other) == "Failed":
                backoff = BACKOFF_SECONDS if backoff == 0 else backoff * 2
        if backoff == 0:
            return 0.0
        failed_at = self._failed_at.get(meta(history[1][1])["uid"])
        if failed_at is None:
            return 0.0
        return failed_at + self.cluster.clock.real_seconds(backoff) - time.monotonic()

    def _running_counts(self, source_node: str, exclude: str) -> tuple[int, int]:
        total = from_node = 0
        for (namespace, name), uid in list(self._active.items()):
            if uid == exclude:
                continue
            other = find(self.cluster, VMIM, namespace, name)
            if other is None or _phase(other) not in RUNNING_MIGRATION_PHASES:
                continue
            total += 1
            other_vmi = find(self.cluster, VMI, namespace, (other.get("spec") or {}).get("vmiName", ""))
            node = ((status(other).get("migrationState") or {}).get("sourceNode") or
                    (status(other_vmi).get("nodeName") if other_vmi else None))
            if node == source_node:
                from_node += 1
        return total, from_node

    def _try_start(self, migration: dict, vmi: dict) -> None:
        cluster = self.cluster
        namespace, name, uid = meta(migration)["namespace"], meta(migration)["name"], meta(migration)["uid"]
        if status(vmi).get("phase") != "Running":
            return
        remaining = self._backoff_remaining(migration, vmi)
        if remaining > 0:
            if self._once(uid, "backoff"):
                events.record(cluster, vmi, "Warning", "MigrationBackoff",
                              f"backoff migrating vmi {namespace}/{meta(vmi)['name']}", CONTROLLER_COMPONENT)
            self._timer(remaining * cluster.clock.time_scale + 0.01, namespace, name, uid, "backoff")
            return
        source_node = status(vmi).get("nodeName", "")
        config = migration_config(cluster)
        total, from_node = self._running_counts(source_node, uid)
        if total >= int(config["parallelMigrationsPerCluster"]) or \
                from_node >= int(config["parallelOutboundMigrationsPerNode"]):
            return
        source = current_pod(cluster, vmi)
        if source is None or not pod_active(source):
            return
        if EVACUATION_MIGRATION_ANNOTATION in annotations(migration) and \
                EVICTION_IN_PROGRESS_ANNOTATION not in annotations(source):
            mutate(cluster, PODS, namespace, meta(source)["name"], lambda o: o["metadata"].setdefault(
                "annotations", {}).__setitem__(EVICTION_IN_PROGRESS_ANNOTATION, "true"), uid=meta(source)["uid"])
        try:
            pod = cluster.create(rt(cluster, PODS), namespace, build_target_pod(vmi, migration, source_node))
        except ApiError as err:
            events.record(cluster, vmi, "Warning", "FailedCreate", f"Error creating pod: {err.message}",
                          CONTROLLER_COMPONENT)
            return
        events.record(cluster, migration, "Normal", "SuccessfulCreate",
                      f"Created migration target pod {pod['metadata']['name']}", CONTROLLER_COMPONENT)

        def scheduling(obj: dict) -> None:
            set_phase(obj, "Scheduling")
            obj["status"]["migrationState"] = {"sourcePod": meta(source)["name"]}
        mutate(cluster, VMIM, namespace, name, scheduling, uid=uid)

    def _scheduling(self, migration: dict, vmi: dict, target: dict | None, step: str) -> None:
        cluster = self.cluster
        namespace, name, uid = meta(migration)["namespace"], meta(migration)["name"], meta(migration)["uid"]
        if target is None:
            self._fail(migration, vmi, "Migration target pod was removed during active migration.")
            return
        if pod_terminal(target) or meta(target).get("deletionTimestamp"):
            self._fail(migration, vmi, "Migration failed because target pod shutdown during migration")
            return
        if pod_unschedulable(target):
            if self._once(uid, "unschedulable"):
                events.record(cluster, migration, "Warning", "migrationTargetPodUnschedulable",
                              f"Migration target pod for VMI [{namespace}/{meta(vmi)['name']}] is currently "
                              "unschedulable.", CONTROLLER_COMPONENT)
            if step == "unschedulable-timeout":
                try:
                    cluster.delete(rt(cluster, PODS), namespace, meta(target)["name"],
                                   {"preconditions": {"uid": meta(target)["uid"]}})
                except ApiError:
                    return
                events.record(cluster, migration, "Normal", "SuccessfulDelete",
                              f"unschedulable pod {namespace}/{meta(target)['name']} timeout period exceeded",
                              CONTROLLER_COMPONENT)
            else:
                self._timer(UNSCHEDULABLE_TIMEOUT_SECONDS, namespace, name, uid, "unschedulable-timeout")
            return
        if not pod_ready(target):
            return
        self._handoff(migration, vmi, target)

    def _handoff(self, migration: dict, vmi: dict, target: dict) -> None:
        """Scheduled -> PreparingTarget: the VMI learns about the target."""
        cluster = self.cluster
        namespace, name, uid = meta(migration)["namespace"], meta(migration)["name"], meta(migration)["uid"]
        source_node = status(vmi).get("nodeName", "")
        target_node = (target.get("spec") or {}).get("nodeName", "")
        source_pod = (status(migration).get("migrationState") or {}).get("sourcePod") or \
            meta(current_pod(cluster, vmi) or {"metadata": {"name": ""}})["name"]
        config = {k: v for k, v in migration_config(cluster).items() if k != "nodeDrainTaintKey"}

        def handoff(obj: dict) -> None:
            obj["metadata"].setdefault("labels", {})[MIGRATION_TARGET_NODE_LABEL] = target_node
            obj.setdefault("status", {})["migrationState"] = {
                "migrationUid": uid, "sourceNode": source_node, "targetNode": target_node,
                "sourcePod": source_pod, "targetPod": meta(target)["name"], "migrationConfiguration": config}
        if mutate(cluster, VMI, namespace, meta(vmi)["name"], handoff, uid=meta(vmi)["uid"]) is None:
            return

        def prepared(obj: dict) -> None:
            set_phase(obj, "Scheduled")
            set_phase(obj, "PreparingTarget")
            # The migration mirrors the VMI's migrationState while in flight, so its SOURCE/TARGET show early.
            obj["status"]["migrationState"] = {
                **(status(obj).get("migrationState") or {}), "migrationUid": uid, "sourceNode": source_node,
                "targetNode": target_node, "sourcePod": source_pod, "targetPod": meta(target)["name"]}
        mutate(cluster, VMIM, namespace, name, prepared, uid=uid)
        events.record(cluster, migration, "Normal", "SuccessfulHandOver",
                      "Migration target pod is ready for preparation by virt-handler.", CONTROLLER_COMPONENT)
        events.record(cluster, vmi, "Normal", "PreparingTarget", "VirtualMachineInstance Migration Target Prepared.",
                      HANDLER_COMPONENT, target_node)
        events.record(cluster, vmi, "Normal", "PreparingTarget",
                      f"Migration Target is listening at {status(target).get('podIP', '')}, on ports: 49152,49153",
                      HANDLER_COMPONENT, target_node)
        self._timer(PREPARE_SECONDS, namespace, name, uid, "target-ready")

    def _start_transfer(self, migration: dict, vmi: dict, target: dict) -> None:
        """PreparingTarget -> TargetReady -> Running, and the timer for the end."""
        cluster = self.cluster
        namespace, name, uid = meta(migration)["namespace"], meta(migration)["name"], meta(migration)["uid"]
        now = now_iso()

        def started(obj: dict) -> None:
            state = obj.setdefault("status", {}).setdefault("migrationState", {})
            state.update({"targetNodeAddress": status(target).get("podIP", ""), "startTimestamp": now,
                          "mode": "PreCopy"})
        if mutate(cluster, VMI, namespace, meta(vmi)["name"], started, uid=meta(vmi)["uid"]) is None:
            return

        def running(obj: dict) -> None:
            set_phase(obj, "TargetReady")
            set_phase(obj, "Running")
        mutate(cluster, VMIM, namespace, name, running, uid=uid)
        events.record(cluster, vmi, "Normal", "Migrating", "VirtualMachineInstance is migrating.", HANDLER_COMPONENT,
                      status(vmi).get("nodeName", ""))
        fault = fault_of(cluster, vmi)
        if not fault:
            fault = migration_fault(cluster, namespace, meta(vmi)["name"]) or ""
            if fault == "fail":
                self._failure_causes[uid] = failure_reason(f"kubesim fault: virt-handler migration=fail on {namespace}/"
                                                           f"{meta(vmi)['name']}")
        duration = max(SECONDS_PER_512MI * guest_memory(vmi) / MI512, 1.0)
        if fault == "slow":
            duration *= 10
        if fault == "hang":
            return
        if fault == "fail":
            self._timer(duration / 2, namespace, name, uid, "fail")
        else:
            self._timer(duration, namespace, name, uid, "complete")

    # ------------------------------------------------------------------------------------------- ends
    def _succeed(self, migration: dict, vmi: dict, target: dict) -> None:
        cluster = self.cluster
        namespace, name, uid = meta(migration)["namespace"], meta(migration)["name"], meta(migration)["uid"]
        target_node = (target.get("spec") or {}).get("nodeName", "")
        source = next((p for p in launcher_pods(cluster, vmi)
                       if meta(p)["name"] == (status(vmi).get("migrationState") or {}).get("sourcePod")), None)
        now = now_iso()

        def migrated(obj: dict) -> None:
            obj_labels = obj["metadata"].setdefault("labels", {})
            obj_labels[NODE_NAME_LABEL] = target_node
            obj_labels.pop(MIGRATION_TARGET_NODE_LABEL, None)
            notes = obj["metadata"].get("annotations") or {}
            notes.pop(EVICTION_SOURCE_ANNOTATION, None)
            if "annotations" in obj["metadata"] and not notes:
                del obj["metadata"]["annotations"]
            st = obj.setdefault("status", {})
            st["nodeName"] = target_node
            st.pop("evacuationNodeName", None)
            remove_condition(obj, "EvictionRequested")
            state = st.setdefault("migrationState", {})
            state.update({"completed": True, "endTimestamp": now, "targetNodeDomainDetected": True,
                          "targetNodeDomainReadyTimestamp": now})
            state.setdefault("startTimestamp", now)
            pod_ip = status(target).get("podIP")
            for interface in st.get("interfaces") or []:
                if pod_ip:
                    interface["ipAddress"] = pod_ip
                    interface["ipAddresses"] = [pod_ip]
            st["activePods"] = {meta(target)["uid"]: target_node}
        updated_vmi = mutate(cluster, VMI, namespace, meta(vmi)["name"], migrated, uid=meta(vmi)["uid"])
        if updated_vmi is None:
            return
        events.record(cluster, updated_vmi, "Normal", "Migrated",
                      f"The VirtualMachineInstance migrated to node {target_node}.", HANDLER_COMPONENT, target_node)
        self._finish(migration, updated_vmi, "Succeeded")
        events.record(cluster, migration, "Normal", "SuccessfulMigration", "Source node reported migration succeeded",
                      CONTROLLER_COMPONENT)
        if source is not None:
            finish_pod(cluster, namespace, meta(source)["name"], 0, uid=meta(source)["uid"])
            source_name, source_uid = meta(source)["name"], meta(source)["uid"]
            self.manager.after_simulated(SOURCE_POD_LINGER_SECONDS,
                                         lambda: self._delete_pod(namespace, source_name, source_uid))
        self._collect(namespace, meta(vmi)["name"])

    def _fail(self, migration: dict, vmi: dict | None, message: str, reason: str = "", abort: bool = False) -> None:
        cluster = self.cluster
        namespace, uid = meta(migration)["namespace"], meta(migration)["uid"]
        updated_vmi = vmi
        if vmi is not None:
            state = status(vmi).get("migrationState") or {}
            if state.get("migrationUid") == uid and not state.get("completed"):
                now = now_iso()
                failure = reason or message

                def failed(obj: dict) -> None:
                    obj["metadata"].setdefault("labels", {}).pop(MIGRATION_TARGET_NODE_LABEL, None)
                    current = obj.setdefault("status", {}).setdefault("migrationState", {})
                    current.update({"completed": True, "failed": True, "endTimestamp": now,
                                    "failureReason": failure})
                    current.setdefault("startTimestamp", now)
                    if abort:
                        current["abortRequested"] = True
                        current["abortStatus"] = "Succeeded"
                updated_vmi = mutate(cluster, VMI, namespace, meta(vmi)["name"], failed, uid=meta(vmi)["uid"]) or vmi
                events.record(cluster, updated_vmi, "Warning", "FailedMigration",
                              f"VirtualMachineInstance migration uid {uid} failed. reason: {failure}", CONTROLLER_COMPONENT)
            for pod in launcher_pods(cluster, vmi):
                if labels(pod).get(MIGRATION_JOB_LABEL) == uid:
                    if not pod_terminal(pod) and (pod.get("spec") or {}).get("nodeName"):
                        finish_pod(cluster, namespace, meta(pod)["name"], 1, uid=meta(pod)["uid"])
                    self._delete_pod(namespace, meta(pod)["name"], meta(pod)["uid"])
                elif EVICTION_IN_PROGRESS_ANNOTATION in annotations(pod):
                    mutate(cluster, PODS, namespace, meta(pod)["name"],
                           lambda o: o["metadata"]["annotations"].pop(EVICTION_IN_PROGRESS_ANNOTATION, None),
                           uid=meta(pod)["uid"])
        self._failed_at[uid] = time.monotonic()
        self._finish(migration, updated_vmi, "Failed", abort=abort)
        events.record(cluster, migration, "Warning", "FailedMigration", message, CONTROLLER_COMPONENT)
        if vmi is not None:
            self._collect(namespace, meta(vmi)["name"])

    def _finish(self, migration: dict, vmi: dict | None, phase: str, abort: bool = False) -> None:
        namespace, name, uid = meta(migration)["namespace"], meta(migration)["name"], meta(migration)["uid"]
        state = (status(vmi).get("migrationState") or {}) if vmi is not None else {}

        def final(obj: dict) -> None:
            set_phase(obj, phase)
            if state.get("migrationUid") == uid:
                copied = copy.deepcopy(state)
                copied.pop("migrationConfiguration", None)
                obj["status"]["migrationState"] = {**(status(obj).get("migrationState") or {}), **copied}
            if abort:
                set_condition(obj, "AbortRequested", "True", probe=True)
        mutate(self.cluster, VMIM, namespace, name, final, uid=uid)
        self._active.pop((namespace, name), None)
        self._drop_finalizer(namespace, name, uid)
        self._kick_pending()

    def _drop_finalizer(self, namespace: str, name: str, uid: str) -> None:
        current = find(self.cluster, VMIM, namespace, name)
        if current is None or VMIM_FINALIZER not in (meta(current).get("finalizers") or []):
            return

        def drop(obj: dict) -> None:
            obj["metadata"]["finalizers"] = [f for f in obj["metadata"]["finalizers"] if f != VMIM_FINALIZER]
        mutate(self.cluster, VMIM, namespace, name, drop, uid=uid)

    def _delete_pod(self, namespace: str, name: str, uid: str) -> None:
        try:
            self.cluster.delete(rt(self.cluster, PODS), namespace, name, {"preconditions": {"uid": uid}})
        except ApiError:
            pass

    def _collect(self, namespace: str, vmi_name: str) -> None:
        """Keep the GC_BUFFER newest finalized migrations of a VMI, delete older ones."""
        finalized = []
        for entry in list(self.cluster.store.entries(VMIM, namespace)):
            other = entry.obj
            if (other.get("spec") or {}).get("vmiName") == vmi_name and _phase(other) in FINAL_MIGRATION_PHASES \
                    and not meta(other).get("deletionTimestamp"):
                finalized.append((self._order.get(meta(other)["uid"], -1), other))
        finalized.sort(key=lambda item: item[0], reverse=True)
        for _order, other in finalized[GC_BUFFER:]:
            try:
                self.cluster.delete(rt(self.cluster, VMIM), namespace, meta(other)["name"],
                                    {"preconditions": {"uid": meta(other)["uid"]}})
            except ApiError:
                pass


def register(cluster, manager) -> None:
    if serves(cluster, VMIM, VMI, PODS):
        manager.add(MigrationController(cluster))
