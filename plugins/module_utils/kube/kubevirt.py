# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KubeVirt readers and derivations, from plain dicts as the API returns them (no cluster needed).

What an eviction of a virt-launcher Pod does follows the request path of the API server (KubeVirt v1.8):
1. the validating webhook `virt-launcher-eviction-interceptor.kubevirt.io` sees it first. It passes Pods
   that are not launchers, finished Pods and launchers without the `kubevirt.io/domain` annotation. It
   reads the VMI's effective eviction strategy (`spec.evictionStrategy`, else the KubeVirt CR's
   `spec.configuration.evictionStrategy`, else None): `LiveMigrate` on a VMI that is not live-migratable is
   refused with 429; `LiveMigrate`/`LiveMigrateIfPossible` on a migratable VMI, and `External`, mark the VMI
   (`status.evacuationNodeName`) and answer 429 (KubeVirt then migrates; for External another controller
   acts); everything else passes;
2. the eviction REST then checks PodDisruptionBudgets (more than one selecting the Pod: 500; no disruption
   allowed: 429);
3. the Pod is deleted: the VM shuts down, and what brings it back is its owner (a VM by run strategy, a
   VMI replica set by a replacement VMI, nothing for a bare VMI).
"""

from __future__ import annotations

import json
from typing import Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.findings import finding
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import match_label_selector

LIVE_MIGRATE = "LiveMigrate"
LIVE_MIGRATE_IF_POSSIBLE = "LiveMigrateIfPossible"
EXTERNAL = "External"
NONE = "None"
MIGRATING_STRATEGIES = (LIVE_MIGRATE, LIVE_MIGRATE_IF_POSSIBLE)

LAUNCHER_LABEL = "kubevirt.io"
LAUNCHER_VALUE = "virt-launcher"
LAUNCHER_SELECTOR = "{0}={1}".format(LAUNCHER_LABEL, LAUNCHER_VALUE)  # the label selector of virt-launcher Pods
CREATED_BY_LABEL = "kubevirt.io/created-by"
DOMAIN_ANNOTATION = "kubevirt.io/domain"
POOL_LABEL = "kubevirt.io/vmpool"
EVICTION_SOURCE_ANNOTATION = "kubevirt.io/eviction-source"
REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
EVICTION_IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
EVACUATION_MIGRATION_ANNOTATION = "kubevirt.io/evacuationMigration"

WEBHOOK = "virt-launcher-eviction-interceptor.kubevirt.io"
WEBHOOK_DENIED = 'admission webhook "{0}" denied the request: '.format(WEBHOOK)
NOT_MIGRATABLE = "VMI {name} is configured with an eviction strategy but is not live-migratable"
EVACUATION_TRIGGERED = 'Eviction triggered evacuation of VMI "{namespace}/{name}"'
EVACUATION_IN_PROGRESS = "Evacuation in progress: " + EVACUATION_TRIGGERED
PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
PDB_ISSUE = "kubevirt/kubevirt#18063"

VERDICTS = ("migrate", "in_progress", "blocked", "external", "shutdown_restart", "shutdown_replace",
            "shutdown_lost", "not_running")

# KubeVirt CR spec.configuration.migrations: (field, result key, upstream default in v1.8)
MIGRATION_DEFAULTS = (
    ("parallelMigrationsPerCluster", "parallel_migrations_per_cluster", 5),
    ("parallelOutboundMigrationsPerNode", "parallel_outbound_migrations_per_node", 2),
    ("bandwidthPerMigration", "bandwidth_per_migration", None),  # unlimited
    ("completionTimeoutPerGiB", "completion_timeout_per_gib", 150),
    ("progressTimeout", "progress_timeout", 150),
    ("allowPostCopy", "allow_post_copy", False),
)
FINISHED_MIGRATION_PHASES = ("Succeeded", "Failed")
TERMINAL_POD_PHASES = ("Succeeded", "Failed")
RESTARTING_RUN_STRATEGIES = ("Always",)


# ------------------------------------------------------------------------------------------ small readers
def meta(obj: Optional[dict]) -> dict:
    return (obj or {}).get("metadata") or {}


def as_kubectl_shows(obj: dict) -> dict:
    """`obj` without `metadata.managedFields`, as `kubectl get` shows it: the field managers are the server's record of
    who wrote what, not the object's state, and a restore that sent them back would misstate who owns the fields."""
    if "managedFields" not in meta(obj):
        return obj
    shown = dict(obj)
    shown["metadata"] = {key: value for key, value in obj["metadata"].items() if key != "managedFields"}
    return shown


def labels(obj: Optional[dict]) -> Dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations(obj: Optional[dict]) -> Dict[str, str]:
    return meta(obj).get("annotations") or {}


def json_annotation(obj: Optional[dict], key: str) -> Optional[dict]:
    """A record the collection keeps in an annotation as a JSON object; None without one, or when it is not one (a
    record nobody can read is treated as absent)."""
    text = annotations(obj).get(key)
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def ref(obj: Optional[dict]) -> Tuple[str, str]:
    return (meta(obj).get("namespace") or "", meta(obj).get("name") or "")


def condition(obj: Optional[dict], kind: str) -> Optional[dict]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def condition_true(obj: Optional[dict], kind: str) -> bool:
    cond = condition(obj, kind)
    return bool(cond) and str(cond.get("status")) == "True"


# ------------------------------------------------------------------------------------------ cluster
def pick_kubevirt(kubevirts: List[dict]) -> Optional[dict]:
    """The KubeVirt CR that is in charge (one per cluster; the first that is not being deleted)."""
    live = [kv for kv in kubevirts if not meta(kv).get("deletionTimestamp")]
    return (live or kubevirts or [None])[0]


def cluster_strategy(kubevirt: Optional[dict]) -> Optional[str]:
    """`spec.configuration.evictionStrategy` of the KubeVirt CR; None when unset (KubeVirt then uses None)."""
    return (((kubevirt or {}).get("spec") or {}).get("configuration") or {}).get("evictionStrategy")


def migration_limits(kubevirt: Optional[dict]) -> dict:
    """The KubeVirt CR's migration configuration with the upstream defaults filled in, snake_case keys."""
    configured = (((kubevirt or {}).get("spec") or {}).get("configuration") or {}).get("migrations") or {}
    result = {key: configured.get(field, default) for field, key, default in MIGRATION_DEFAULTS}
    result["configured"] = sorted(configured)
    return result


def kubevirt_facts(kubevirt: Optional[dict]) -> dict:
    status = (kubevirt or {}).get("status") or {}
    configuration = ((kubevirt or {}).get("spec") or {}).get("configuration") or {}
    return {
        "found": kubevirt is not None,
        "name": meta(kubevirt).get("name"),
        "namespace": meta(kubevirt).get("namespace"),
        "version": status.get("observedKubeVirtVersion"),
        "phase": status.get("phase"),
        "eviction_strategy": cluster_strategy(kubevirt),
        "feature_gates": list((configuration.get("developerConfiguration") or {}).get("featureGates") or []),
        "migrations": migration_limits(kubevirt),
    }


def hyperconverged_facts(hyperconverged: Optional[dict]) -> dict:
    status = (hyperconverged or {}).get("status") or {}
    spec = (hyperconverged or {}).get("spec") or {}
    version = None
    for entry in status.get("versions") or []:
        if entry.get("name") == "operator":
            version = entry.get("version")
    return {
        "found": hyperconverged is not None,
        "name": meta(hyperconverged).get("name"),
        "namespace": meta(hyperconverged).get("namespace"),
        "version": version,
        "eviction_strategy": spec.get("evictionStrategy"),
        "live_migration_config": spec.get("liveMigrationConfig"),
    }


# ------------------------------------------------------------------------------------------ strategy
def recorded_strategy(vmi: dict) -> Optional[str]:
    return (vmi.get("spec") or {}).get("evictionStrategy")


def vm_template_strategy(vm: Optional[dict]) -> Optional[str]:
    """`spec.template.spec.evictionStrategy` of a VM: what its next VMI starts with (None: the cluster default then)."""
    return ((((vm or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("evictionStrategy")


def effective_strategy(vmi: dict, cluster_default: Optional[str]) -> str:
    """The VMI's own strategy, else the cluster default, else KubeVirt's internal default `None`."""
    return recorded_strategy(vmi) or cluster_default or NONE


def live_migratable(vmi: dict) -> dict:
    """The LiveMigratable condition: migratable only when it is True (absent counts as not migratable)."""
    cond = condition(vmi, "LiveMigratable")
    return {
        "migratable": bool(cond) and str(cond.get("status")) == "True",
        "status": cond.get("status") if cond else None,
        "reason": cond.get("reason") if cond else None,
        "message": cond.get("message") if cond else None,
    }


# ------------------------------------------------------------------------------------------ owners
def controller_ref(obj: Optional[dict]) -> Optional[dict]:
    refs = meta(obj).get("ownerReferences") or []
    for owner in refs:
        if owner.get("controller"):
            return owner
    return refs[0] if refs else None


def run_strategy(vm: Optional[dict]) -> Optional[str]:
    """`spec.runStrategy`, or the deprecated `spec.running` (true: Always, false: Halted); None when neither."""
    spec = (vm or {}).get("spec") or {}
    if spec.get("runStrategy"):
        return spec["runStrategy"]
    if spec.get("running") is not None:
        return "Always" if spec["running"] else "Halted"
    return None


def owner(vmi: dict, vms: Dict[Tuple[str, str], dict]) -> dict:
    """Who owns the VMI: a VirtualMachine (or a VirtualMachinePool through its VM), a
    VirtualMachineInstanceReplicaSet, or nothing; with the VM's run strategy."""
    namespace = meta(vmi).get("namespace") or ""
    owner_ref = controller_ref(vmi)
    result = {"owner_kind": None, "owner_name": None, "vm_name": None, "run_strategy": None}
    if owner_ref is None:
        return result
    if owner_ref.get("kind") == "VirtualMachineInstanceReplicaSet":
        result.update(owner_kind="VirtualMachineInstanceReplicaSet", owner_name=owner_ref.get("name"))
        return result
    if owner_ref.get("kind") != "VirtualMachine":
        result.update(owner_kind=owner_ref.get("kind"), owner_name=owner_ref.get("name"))
        return result
    vm = vms.get((namespace, owner_ref.get("name") or ""))
    result.update(owner_kind="VirtualMachine", owner_name=owner_ref.get("name"), vm_name=owner_ref.get("name"),
                  run_strategy=run_strategy(vm))
    pool_ref = controller_ref(vm)
    if pool_ref and pool_ref.get("kind") == "VirtualMachinePool":
        result.update(owner_kind="VirtualMachinePool", owner_name=pool_ref.get("name"))
    elif labels(vm).get(POOL_LABEL) or labels(vmi).get(POOL_LABEL):
        result.update(owner_kind="VirtualMachinePool", owner_name=labels(vm).get(POOL_LABEL) or labels(vmi).get(POOL_LABEL))
    return result


# ------------------------------------------------------------------------------------------ launchers
def is_launcher(pod: dict) -> bool:
    return labels(pod).get(LAUNCHER_LABEL) == LAUNCHER_VALUE


def index_launchers(pods: List[dict]) -> Dict[str, List[dict]]:
    """Live virt-launcher Pods by the VMI UID in their `kubevirt.io/created-by` label."""
    index: Dict[str, List[dict]] = {}
    for pod in pods:
        if not is_launcher(pod) or ((pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES):
            continue
        uid = labels(pod).get(CREATED_BY_LABEL)
        if uid:
            index.setdefault(uid, []).append(pod)
    return index


def find_launcher(vmi: dict, candidates: List[dict]) -> Optional[dict]:
    """The VMI's source launcher: created by its UID, on its node, not finished, not being deleted (a
    migration target Pod runs on another node and is not the one an eviction of this VMI is about)."""
    node = (vmi.get("status") or {}).get("nodeName")
    matches = [pod for pod in candidates
               if node and (pod.get("spec") or {}).get("nodeName") == node
               and (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES
               and not meta(pod).get("deletionTimestamp")]
    matches.sort(key=lambda pod: meta(pod).get("creationTimestamp") or "")
    return matches[0] if matches else None


def launcher_facts(pod: Optional[dict]) -> Optional[dict]:
    if pod is None:
        return None
    notes = annotations(pod)
    return {
        "name": meta(pod).get("name"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "phase": (pod.get("status") or {}).get("phase"),
        "request_evict_only": REQUEST_EVICT_ONLY in notes,
        "eviction_in_progress": str(notes.get(EVICTION_IN_PROGRESS, "")).lower() == "true",
        "domain_annotation": DOMAIN_ANNOTATION in notes,
    }


# ------------------------------------------------------------------------------------------ storage
def claim_names(vmi: dict) -> List[str]:
    """PVCs the VMI mounts: `persistentVolumeClaim.claimName` and DataVolumes (their PVC has the same name)."""
    names = []
    for volume in (vmi.get("spec") or {}).get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName") or (volume.get("dataVolume") or {}).get("name")
        if claim and claim not in names:
            names.append(claim)
    return names


def pvc_facts(vmi: dict, pvcs: Dict[Tuple[str, str], dict]) -> List[dict]:
    namespace = meta(vmi).get("namespace") or ""
    result = []
    for name in claim_names(vmi):
        pvc = pvcs.get((namespace, name))
        spec = (pvc or {}).get("spec") or {}
        modes = list(((pvc or {}).get("status") or {}).get("accessModes") or spec.get("accessModes") or [])
        result.append({
            "name": name,
            "found": pvc is not None,
            "access_modes": modes,
            "read_write_many": "ReadWriteMany" in modes,
            "storage_class": spec.get("storageClassName"),
            "volume_mode": spec.get("volumeMode") or ("Filesystem" if pvc else None),
            "phase": ((pvc or {}).get("status") or {}).get("phase"),
        })
    return result


# ------------------------------------------------------------------------------------------ PDBs
def pdbs_selecting(pod: Optional[dict], pdbs: List[dict]) -> List[dict]:
    """PodDisruptionBudgets in the Pod's namespace whose selector matches its labels."""
    if pod is None:
        return []
    namespace = meta(pod).get("namespace")
    return [pdb for pdb in pdbs if meta(pdb).get("namespace") == namespace
            and match_label_selector((pdb.get("spec") or {}).get("selector"), labels(pod))]


def pdb_needs_scale(pdb: dict) -> bool:
    """maxUnavailable, or a percentage minAvailable, makes the disruption controller read `/scale` of each
    Pod's controller; a VMI has none, so over virt-launcher Pods it never allows a disruption (#18063)."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        return True
    return isinstance(spec.get("minAvailable"), str) and spec["minAvailable"].strip().endswith("%")


def _healthy(pods: List[dict]) -> int:
    return sum(1 for pod in pods if condition_true(pod, "Ready") and not meta(pod).get("deletionTimestamp"))


def disruptions_allowed(pdb: dict, selects_launcher: bool, namespace_pods: List[dict]) -> int:
    """What the eviction REST reads: `status.disruptionsAllowed` when the controller has caught up with the
    spec; 0 when the PDB needs `/scale` over launchers; else counted from healthy Pods for an integer
    minAvailable (the controller's own formula, used when it has not written status yet)."""
    status = pdb.get("status") or {}
    if selects_launcher and pdb_needs_scale(pdb):
        return 0
    generation = meta(pdb).get("generation")
    observed = status.get("observedGeneration")
    if "disruptionsAllowed" in status and (generation is None or observed is None or observed >= generation):
        return int(status.get("disruptionsAllowed") or 0)
    selector = (pdb.get("spec") or {}).get("selector")
    healthy = _healthy([pod for pod in namespace_pods if match_label_selector(selector, labels(pod))])
    min_available = (pdb.get("spec") or {}).get("minAvailable")
    if isinstance(min_available, int):
        return max(0, healthy - min_available)
    return 0


def pdb_facts(pdb: dict, allowed: int, selects_launcher: bool) -> dict:
    spec = pdb.get("spec") or {}
    return {
        "name": meta(pdb).get("name"),
        "namespace": meta(pdb).get("namespace"),
        "min_available": spec.get("minAvailable"),
        "max_unavailable": spec.get("maxUnavailable"),
        "disruptions_allowed": allowed,
        "needs_scale_subresource": pdb_needs_scale(pdb),
        "selects_launchers": selects_launcher,
    }


# ------------------------------------------------------------------------------------------ migrations
def migrations_of(vmi: dict, migrations: List[dict]) -> List[dict]:
    namespace, name = ref(vmi)
    return [m for m in migrations if meta(m).get("namespace") == namespace and (m.get("spec") or {}).get("vmiName") == name]


def migration_facts(vmim: dict) -> dict:
    status = vmim.get("status") or {}
    state = status.get("migrationState") or {}
    return {
        "name": meta(vmim).get("name"),
        "phase": status.get("phase"),
        "evacuation": EVACUATION_MIGRATION_ANNOTATION in annotations(vmim),
        "source_node": state.get("sourceNode") or annotations(vmim).get(EVACUATION_MIGRATION_ANNOTATION),
        "target_node": state.get("targetNode"),
        "created": meta(vmim).get("creationTimestamp"),
        "finished": status.get("phase") in FINISHED_MIGRATION_PHASES,
    }


# ------------------------------------------------------------------------------------------ verdict
def _verdict(verdict: str, reason: str, code: Optional[int] = None, message: Optional[str] = None) -> dict:
    response = None if code is None else {"code": code, "message": message}
    return {"verdict": verdict, "verdict_reason": reason, "eviction_response": response}


def _shutdown(vmi: dict, owner_info: dict) -> dict:
    kind, strategy = owner_info.get("owner_kind"), owner_info.get("run_strategy")
    if kind == "VirtualMachineInstanceReplicaSet":
        return _verdict("shutdown_replace", "the launcher Pod is deleted and the VM shuts down; VirtualMachineInstanceReplicaSet {0} "
                        "creates a new VMI (new name and UID) elsewhere".format(owner_info.get("owner_name")), 201, "Success")
    if owner_info.get("vm_name"):
        via = "" if kind == "VirtualMachine" else " (in VirtualMachinePool {0})".format(owner_info.get("owner_name"))
        if strategy in RESTARTING_RUN_STRATEGIES:
            return _verdict("shutdown_restart", "the launcher Pod is deleted and the VM shuts down; VirtualMachine {0}{1} with runStrategy "
                            "{2} starts it again on another node (a restart, not a live migration)".format(owner_info["vm_name"], via, strategy),
                            201, "Success")
        return _verdict("shutdown_lost", "the launcher Pod is deleted and the VM shuts down; VirtualMachine {0}{1} has runStrategy {2}, "
                        "which does not start it again after a shutdown".format(owner_info["vm_name"], via, strategy or "unset"), 201, "Success")
    if kind:
        return _verdict("shutdown_lost", "the launcher Pod is deleted and the VM shuts down; its owner {0} {1} is not a "
                        "KubeVirt workload controller".format(kind, owner_info.get("owner_name")), 201, "Success")
    return _verdict("shutdown_lost", "the launcher Pod is deleted and the VM shuts down; the VMI has no VirtualMachine or "
                    "replica set, so nothing starts it again", 201, "Success")


def eviction_verdict(vmi: dict, launcher: Optional[dict], strategy: str, migratable: bool, owner_info: dict,
                     pdbs: List[Tuple[dict, int]], unfinished: List[dict]) -> dict:
    """What `POST pods/<launcher>/eviction` would do now: verdict, a sentence why, and the API answer
    (code and message) a client such as the descheduler or kubectl drain would get.

    `pdbs` are the PodDisruptionBudgets selecting the launcher with their disruptions allowed; `unfinished`
    the VMI's migrations that have not reached Succeeded or Failed.
    """
    namespace, name = ref(vmi)
    if launcher is None:
        return _verdict("not_running", "no live virt-launcher Pod on the VMI's node ({0}): an eviction has nothing to act on".format(
            (vmi.get("status") or {}).get("nodeName") or "not scheduled"))
    if DOMAIN_ANNOTATION in annotations(launcher):
        if strategy == LIVE_MIGRATE and not migratable:
            return _verdict("blocked", "evictionStrategy LiveMigrate on a VMI that is not live-migratable: KubeVirt refuses the eviction "
                            "and the launcher stays", 429, WEBHOOK_DENIED + NOT_MIGRATABLE.format(name=name))
        if strategy == EXTERNAL or (strategy in MIGRATING_STRATEGIES and migratable):
            marked = (vmi.get("status") or {}).get("evacuationNodeName")
            if marked:
                return _verdict("in_progress", "the VMI is already marked for evacuation from {0}".format(marked), 429,
                                WEBHOOK_DENIED + EVACUATION_IN_PROGRESS.format(namespace=namespace, name=name))
            triggered = WEBHOOK_DENIED + EVACUATION_TRIGGERED.format(namespace=namespace, name=name)
            if unfinished:
                return _verdict("in_progress", "migration {0} is {1}; an eviction marks the VMI and its evacuation waits for it".format(
                    meta(unfinished[0]).get("name"), (unfinished[0].get("status") or {}).get("phase") or "Pending"), 429, triggered)
            if strategy == EXTERNAL:
                return _verdict("external", "evictionStrategy External: KubeVirt marks the VMI and refuses the eviction; an external "
                                "controller is expected to move or stop the VM", 429, triggered)
            return _verdict("migrate", "evictionStrategy {0} on a live-migratable VMI: KubeVirt marks it for evacuation, refuses the "
                            "eviction with 429 and live-migrates the VM (same VMI UID, new node)".format(strategy), 429, triggered)
    if (launcher.get("status") or {}).get("phase") == "Pending":
        pdbs = []  # the eviction REST deletes a Pending Pod without looking at PDBs
    if len(pdbs) > 1:
        return _verdict("blocked", "more than one PodDisruptionBudget ({0}) selects the launcher".format(
            ", ".join(sorted(meta(pdb).get("name") or "" for pdb, _allowed in pdbs))), 500, MULTIPLE_PDBS)
    if pdbs and pdbs[0][1] <= 0:
        pdb = pdbs[0][0]
        why = " (it uses {0}, see {1})".format("maxUnavailable" if (pdb.get("spec") or {}).get("maxUnavailable") is not None
                                               else "a percentage minAvailable", PDB_ISSUE) if pdb_needs_scale(pdb) else ""
        return _verdict("blocked", "PodDisruptionBudget {0} allows no disruption{1}".format(meta(pdb).get("name"), why), 429, PDB_VIOLATION)
    return _shutdown(vmi, owner_info)


# ------------------------------------------------------------------------------------------ findings
def vmi_findings(fact: dict) -> List[dict]:
    """Findings about one VMI from its assembled facts (see `vmi_facts`)."""
    result = []
    namespace, name = fact["namespace"], fact["name"]
    recorded, cluster = fact["recorded_strategy"], fact["cluster_strategy"]
    if recorded and recorded != (cluster or NONE):
        if fact.get("vm_strategy") == recorded:
            text = ("VMI {0}/{1} has evictionStrategy {2} from its VirtualMachine's template; the cluster default is {3}. A restart "
                    "keeps {2}: change spec.template.spec.evictionStrategy of the VM if the cluster default is wanted.")
        else:
            text = ("VMI {0}/{1} recorded evictionStrategy {2} when it was created; the cluster default is now {3}. The VMI keeps {2} "
                    "until the VM is restarted.")
        result.append(finding("strategy_differs_from_cluster", text.format(namespace, name, recorded, cluster or "unset (None)"),
                              "VirtualMachineInstance", name, namespace))
    if fact["effective_strategy"] in MIGRATING_STRATEGIES and not fact["live_migratable"]:
        why = fact.get("live_migratable_message") or fact.get("live_migratable_reason") or "the LiveMigratable condition is not True"
        result.append(finding(
            "not_migratable_with_migrating_strategy",
            "VMI {0}/{1} has evictionStrategy {2} but is not live-migratable ({3}); an eviction {4}. Use shared storage usable from the "
            "target node (for example RWX) or change the strategy.".format(
                namespace, name, fact["effective_strategy"], why,
                "is refused" if fact["effective_strategy"] == LIVE_MIGRATE else "shuts the VM down"),
            "VirtualMachineInstance", name, namespace))
    for migration in fact["migrations"]:
        if not migration["finished"]:
            result.append(finding(
                "migration_unfinished",
                "VirtualMachineInstanceMigration {0}/{1} of VMI {2} is {3}; wait for Succeeded or Failed before starting more "
                "moves.".format(namespace, migration["name"], name, migration["phase"] or "Pending"),
                "VirtualMachineInstanceMigration", migration["name"], namespace))
    return result


def pdb_findings(pdb: dict, allowed: int, launcher_names: List[str]) -> List[dict]:
    """Findings about a PDB that selects virt-launcher Pods."""
    namespace, name = ref(pdb)
    result = []
    count = len(launcher_names)
    if pdb_needs_scale(pdb):
        field = "maxUnavailable" if (pdb.get("spec") or {}).get("maxUnavailable") is not None else "a percentage minAvailable"
        result.append(finding(
            "pdb_needs_scale_subresource",
            "PodDisruptionBudget {0}/{1} uses {2} over {3} virt-launcher Pod(s): the disruption controller needs the scale subresource "
            "of the VMI, which does not exist ({4}), so disruptionsAllowed stays 0 and every eviction that KubeVirt does not turn into "
            "a live migration (evictionStrategy None, or LiveMigrateIfPossible on a VM that is not live-migratable) is refused with "
            "\"{5}\". Use an integer minAvailable.".format(namespace, name, field, count, PDB_ISSUE, PDB_VIOLATION),
            "PodDisruptionBudget", name, namespace))
    elif allowed <= 0:
        result.append(finding(
            "pdb_blocks_eviction",
            "PodDisruptionBudget {0}/{1} allows no disruption now over {2} virt-launcher Pod(s); evictions that reach the PDB are "
            "refused with \"{3}\"".format(namespace, name, count, PDB_VIOLATION),
            "PodDisruptionBudget", name, namespace))
    return result


# ------------------------------------------------------------------------------------------ per VMI
def vmi_facts(vmi: dict, cluster_default: Optional[str], launcher_index: Dict[str, List[dict]],
              vms: Dict[Tuple[str, str], dict], pvcs: Dict[Tuple[str, str], dict], pdbs: List[Tuple[dict, int]],
              migrations: List[dict]) -> dict:
    """Everything about one VMI and the verdict for its launcher. `pdbs` pairs each PDB of the namespace
    with its disruptions allowed; `migrations` are all VMIMs (filtered here by namespace and vmiName)."""
    namespace, name = ref(vmi)
    status = vmi.get("status") or {}
    launcher = find_launcher(vmi, launcher_index.get(meta(vmi).get("uid") or "", []))
    migratable = live_migratable(vmi)
    strategy = effective_strategy(vmi, cluster_default)
    owner_info = owner(vmi, vms)
    selecting = [(pdb, allowed) for pdb, allowed in pdbs if pdbs_selecting(launcher, [pdb])]
    own_migrations = migrations_of(vmi, migrations)
    unfinished = [m for m in own_migrations if (m.get("status") or {}).get("phase") not in FINISHED_MIGRATION_PHASES]
    unfinished.sort(key=lambda m: meta(m).get("creationTimestamp") or "")
    fact = {
        "name": name,
        "namespace": namespace,
        "uid": meta(vmi).get("uid"),
        "node": status.get("nodeName"),
        "phase": status.get("phase"),
        "ready": condition_true(vmi, "Ready"),
        "labels": labels(vmi),
        "recorded_strategy": recorded_strategy(vmi),
        "vm_strategy": vm_template_strategy(vms.get((namespace, owner_info.get("vm_name") or ""))),
        "cluster_strategy": cluster_default,
        "effective_strategy": strategy,
        "live_migratable": migratable["migratable"],
        "live_migratable_reason": migratable["reason"],
        "live_migratable_message": migratable["message"],
        "launcher": launcher_facts(launcher),
        "pvcs": pvc_facts(vmi, pvcs),
        "evacuation_node_name": status.get("evacuationNodeName"),
        "eviction_source": annotations(vmi).get(EVICTION_SOURCE_ANNOTATION),
        "migrations": [migration_facts(m) for m in sorted(own_migrations, key=lambda m: meta(m).get("creationTimestamp") or "")],
        "unfinished_migrations": [meta(m).get("name") for m in unfinished],
        "pdbs": sorted(meta(pdb).get("name") for pdb, _allowed in selecting),
    }
    fact.update(owner_info)
    fact.update(eviction_verdict(vmi, launcher, strategy, migratable["migratable"], owner_info, selecting, unfinished))
    return fact
