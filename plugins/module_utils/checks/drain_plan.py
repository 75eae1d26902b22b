# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure half of `kubevirt_node_drain`: what draining a node would do, decided before anything changes,
and what each VM's outcome is, read from objects as the API returns them (no cluster needed).

- The VMs come from the eviction facts (`kubevirt_eviction_facts.read_facts`): each VMI on the node has a verdict
  (kubevirt.eviction_verdict), which maps to a drain action: `live_migrate`, `restart` (strategy None, a VM
  that starts again elsewhere with a new UID), `replace` (a VMI replica set creates another VMI), `lost` (a
  bare VMI, or a VM that does not start again), `blocked` (KubeVirt or a PDB refuses the eviction),
  `external` (another controller acts), `not_running` (nothing to evict).
- The other Pods follow kubectl drain's filters: DaemonSet Pods need `ignore_daemonsets` (and stay), Pods
  with emptyDir need `delete_emptydir_data`, Pods without a controller need `force`; mirror and finished
  Pods are skipped.
- Capacity: the VMs that must run elsewhere are placed by their launcher's requests (cpu, memory, pods) on
  the other Ready, schedulable, untainted nodes (KubeVirt-schedulable when any node is labelled so), largest
  memory first. Simplified: node selectors, affinity and tolerations of the VMs are not evaluated.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES, pod_requests

ACTIONS = ("live_migrate", "restart", "replace", "lost", "blocked", "external", "not_running")
VERDICT_ACTIONS = {
    "migrate": "live_migrate", "in_progress": "live_migrate", "shutdown_restart": "restart", "shutdown_replace": "replace",
    "shutdown_lost": "lost", "blocked": "blocked", "external": "external", "not_running": "not_running",
}
# the actions whose VM must run on another node afterwards
RELOCATED = ("live_migrate", "restart", "replace", "external")
FINAL_VMI_PHASES = ("Succeeded", "Failed")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NODE_TAINT_EFFECTS = ("NoSchedule", "NoExecute")

# kubectl drain's refusals (k8s.io/kubectl/pkg/drain/filters.go), with this module's option names
DAEMONSET_REFUSED = "cannot delete DaemonSet-managed Pods (use ignore_daemonsets, kubectl's --ignore-daemonsets)"
LOCAL_STORAGE_REFUSED = "cannot delete Pods with local storage (use delete_emptydir_data, kubectl's --delete-emptydir-data)"
UNMANAGED_REFUSED = "cannot delete Pods that declare no controller (use force, kubectl's --force)"


# ------------------------------------------------------------------------------------------ pods
def on_node(obj: dict, node: str) -> bool:
    return (obj.get("spec") or {}).get("nodeName") == node


def vmi_on_node(vmi_fact: dict, node: str) -> bool:
    """A VMI that runs (or is placed) on the node; finished VMIs do not count (nothing runs)."""
    return vmi_fact.get("node") == node and vmi_fact.get("phase") not in FINAL_VMI_PHASES


def pod_key(pod: dict) -> str:
    namespace, name = kv.ref(pod)
    return "{0}/{1}".format(namespace, name)


def daemonset_pod(pod: dict) -> bool:
    owner = kv.controller_ref(pod)
    return bool(owner) and owner.get("kind") == "DaemonSet"


def has_emptydir(pod: dict) -> bool:
    return any("emptyDir" in volume for volume in (pod.get("spec") or {}).get("volumes") or [])


def classify_pods(pods: List[dict], all_pods: bool, ignore_daemonsets: bool, delete_emptydir_data: bool, force: bool) -> dict:
    """kubectl drain's filters over the node's Pods: `evict` (launchers and, with `all_pods` (pods=all), the others),
    `ignored` (DaemonSet Pods), `skipped` (mirror, finished, not selected), `refused` (what stops the drain
    without the matching option), each Pod as `namespace/name`."""
    result: Dict[str, List] = {"evict": [], "ignored": [], "skipped": [], "refused": []}
    for pod in sorted(pods, key=pod_key):
        key = pod_key(pod)
        if (pod.get("status") or {}).get("phase") in kv.TERMINAL_POD_PHASES or kv.meta(pod).get("deletionTimestamp"):
            result["skipped"].append(key)
            continue
        if not kv.is_launcher(pod) and not all_pods:
            result["skipped"].append(key)
            continue
        if MIRROR_ANNOTATION in kv.annotations(pod):
            result["skipped"].append(key)
            continue
        if daemonset_pod(pod):
            if ignore_daemonsets:
                result["ignored"].append(key)
            else:
                result["refused"].append({"pod": key, "reason": DAEMONSET_REFUSED})
            continue
        if kv.controller_ref(pod) is None and not force:
            result["refused"].append({"pod": key, "reason": UNMANAGED_REFUSED})
            continue
        if has_emptydir(pod) and not delete_emptydir_data:
            result["refused"].append({"pod": key, "reason": LOCAL_STORAGE_REFUSED})
            continue
        result["evict"].append(key)
    return result


# ------------------------------------------------------------------------------------------ VMs
def vm_plan(fact: dict, launcher: Optional[dict]) -> dict:
    """One VMI of the node as the preflight reports it."""
    action = VERDICT_ACTIONS.get(fact.get("verdict") or "", "blocked")
    response = fact.get("eviction_response") or {}
    return {
        "namespace": fact["namespace"], "name": fact["name"], "uid": fact.get("uid"), "node": fact.get("node"),
        "action": action, "verdict": fact.get("verdict"), "reason": fact.get("verdict_reason"),
        "eviction_response": fact.get("eviction_response"),
        "blocked_message": response.get("message") if action == "blocked" else None,
        "effective_strategy": fact.get("effective_strategy"), "live_migratable": fact.get("live_migratable"),
        "owner_kind": fact.get("owner_kind"), "owner_name": fact.get("owner_name"), "vm_name": fact.get("vm_name"),
        "run_strategy": fact.get("run_strategy"), "launcher": (fact.get("launcher") or {}).get("name"),
        "in_progress": fact.get("verdict") == "in_progress", "pdbs": fact.get("pdbs") or [],
        "requests": pod_requests(launcher) if launcher else {},
    }


# ------------------------------------------------------------------------------------------ capacity
def _free(node_fact: dict) -> Dict[str, int]:
    allocatable, requested = node_fact.get("allocatable") or {}, node_fact.get("requested") or {}
    return {r: (allocatable.get(r) or 0) - (requested.get(r) or 0) for r in RESOURCES if allocatable.get(r) is not None}


def target_nodes(node_facts: List[dict], node: str) -> List[dict]:
    """Nodes a VM can go to: not the drained one, Ready and schedulable, without NoSchedule/NoExecute taints,
    labelled `kubevirt.io/schedulable=true` when any node is."""
    kubevirt_labelled = any(n.get("kubevirt_schedulable") for n in node_facts)
    result = []
    for fact in node_facts:
        if fact["name"] == node or not fact.get("schedulable"):
            continue
        if any(t.get("effect") in NODE_TAINT_EFFECTS for t in fact.get("taints") or []):
            continue
        if kubevirt_labelled and not fact.get("kubevirt_schedulable"):
            continue
        result.append(fact)
    return result


def capacity(node_facts: List[dict], node: str, vms: List[dict]) -> dict:
    """Whether the VMs that must run elsewhere fit on the other nodes by requests (first fit, largest memory first)."""
    targets = target_nodes(node_facts, node)
    free = {fact["name"]: _free(fact) for fact in targets}
    movers = [vm for vm in vms if vm["action"] in RELOCATED]
    movers.sort(key=lambda vm: (-(vm["requests"].get("memory") or 0), vm["namespace"], vm["name"]))
    placements: Dict[str, str] = {}
    unplaced: List[str] = []
    for vm in movers:
        key = "{0}/{1}".format(vm["namespace"], vm["name"])
        for name in sorted(free):
            room = free[name]
            if all(value <= room.get(resource, 0) for resource, value in vm["requests"].items() if resource in room):
                for resource, value in vm["requests"].items():
                    if resource in room:
                        room[resource] -= value
                placements[key] = name
                break
        else:
            unplaced.append(key)
    return {"fits": not unplaced, "nodes": sorted(free), "placements": placements, "unplaced": unplaced,
            "free_after": {name: dict(room) for name, room in sorted(free.items())}}


# ------------------------------------------------------------------------------------------ preflight
def problems(vms: List[dict], pods: dict, room: dict, allow_loss: bool, allow_shutdown: bool, allow_blocked: bool,
             require_capacity: bool) -> List[dict]:
    """What stops the drain before anything changes, each with the option that allows it."""
    found = []

    def names(action: str) -> List[str]:
        return ["{0}/{1}".format(vm["namespace"], vm["name"]) for vm in vms if vm["action"] == action]

    if names("lost") and not allow_loss:
        found.append({"code": "vms_lost", "vms": names("lost"), "option": "allow_loss",
                      "message": "{0} would be shut down and never started again (no VirtualMachine or replica set brings them back, "
                                 "or the VM's runStrategy does not restart). Stop them yourself, or set allow_loss: true to accept "
                                 "it.".format(", ".join(names("lost")))})
    shutdowns = names("restart") + names("replace")
    if shutdowns and not allow_shutdown:
        found.append({"code": "vms_shut_down", "vms": shutdowns, "option": "allow_shutdown",
                      "message": "{0} would be shut down and started again elsewhere (evictionStrategy None: a restart, not a live "
                                 "migration). Set evictionStrategy LiveMigrate on them, or set allow_shutdown: true to accept "
                                 "it.".format(", ".join(shutdowns))})
    blocked = [vm for vm in vms if vm["action"] == "blocked"]
    if blocked and not allow_blocked:
        found.append({"code": "vms_blocked", "vms": names("blocked"), "option": "allow_blocked",
                      "message": "; ".join("{0}/{1}: {2}".format(vm["namespace"], vm["name"], vm["blocked_message"] or vm["reason"])
                                           for vm in blocked)
                      + ". Fix the cause (shared storage for live migration, a PDB that allows a disruption), or set allow_blocked: "
                        "true to drain the rest and leave these VMs on the cordoned node."})
    if pods["refused"]:
        found.append({"code": "pods_refused", "pods": [entry["pod"] for entry in pods["refused"]], "option": None,
                      "message": "; ".join("{0}: {1}".format(entry["pod"], entry["reason"]) for entry in pods["refused"])})
    if not room["fits"] and require_capacity:
        found.append({"code": "capacity", "vms": room["unplaced"], "option": "require_capacity",
                      "message": "the other schedulable nodes ({0}) cannot hold {1} by requests. Add or uncordon a node, or set "
                                 "require_capacity: false.".format(", ".join(room["nodes"]) or "none", ", ".join(room["unplaced"]))})
    return found


def pdbs_on_node(pdb_facts: List[dict], findings: List[dict], launchers: List[str]) -> List[dict]:
    """The PDBs over the node's launchers, with the findings about them (the maxUnavailable or percentage trap)."""
    mine = set(launchers)
    result = []
    for pdb in pdb_facts:
        if not mine.intersection(pdb.get("launchers") or []):
            continue
        notes = [f for f in findings if f.get("kind") == "PodDisruptionBudget" and f.get("name") == pdb["name"]
                 and f.get("namespace") == pdb["namespace"]]
        result.append(dict(pdb, blocks_evictions=pdb.get("disruptions_allowed", 0) <= 0, findings=notes))
    return result


def counts(vms: List[dict]) -> Dict[str, int]:
    result = {action: 0 for action in ACTIONS}
    for vm in vms:
        result[vm["action"]] = result.get(vm["action"], 0) + 1
    return result


def concurrency(limits: dict, max_parallel: Optional[int]) -> int:
    """How many live migrations this drain keeps in flight: KubeVirt's per-node outbound limit, never more
    than the cluster limit, and `max_parallel` when it is lower."""
    value = min(int(limits.get("parallel_outbound_migrations_per_node") or 2), int(limits.get("parallel_migrations_per_cluster") or 5))
    if max_parallel:
        value = min(value, max_parallel)
    return max(1, value)


# ------------------------------------------------------------------------------------------ outcomes
def migration_of(vmims: List[dict], namespace: str, name: str, source: str) -> Tuple[Optional[dict], Optional[dict]]:
    """The newest Succeeded migration of the VMI from `source`, and the newest Failed one."""
    own = [m for m in vmims if kv.meta(m).get("namespace") == namespace and (m.get("spec") or {}).get("vmiName") == name]
    own.sort(key=lambda m: (kv.meta(m).get("creationTimestamp") or "", kv.meta(m).get("name") or ""))
    succeeded = failed = None
    for migration in own:
        facts = kv.migration_facts(migration)
        if facts["phase"] == "Succeeded" and facts["source_node"] == source:
            succeeded = migration
        elif facts["phase"] == "Failed":
            failed = migration
    return succeeded, failed


def failure_reason(vmim: dict) -> str:
    state = (vmim.get("status") or {}).get("migrationState") or {}
    return state.get("failureReason") or "the migration failed"


def outcome(item: dict, vmi: Optional[dict], vmims: List[dict], seen_failures: set, node: str) -> Optional[dict]:
    """The result of one VM whose eviction was requested, or None while it is still open.

    `vmi` is the VMI with the item's namespace and name now (None when deleted); `seen_failures` the names of
    the Failed migrations that existed before this run (they do not count again)."""
    namespace, name, uid = item["namespace"], item["name"], item["uid"]
    same = vmi is not None and kv.meta(vmi).get("uid") == uid
    status = (vmi or {}).get("status") or {}
    action = item["action"]
    if action == "live_migrate":
        succeeded, failed = migration_of(vmims, namespace, name, node)
        # a live migration is the same VMI on another node and a Succeeded migration from this node (the VMI
        # and the migration are updated one after the other: wait for both)
        if same and succeeded is not None and status.get("nodeName") not in (None, node) and status.get("phase") == "Running":
            return {"result": "migrated", "target_node": status.get("nodeName"), "uid_after": uid,
                    "migration": kv.meta(succeeded).get("name"), "reason": None}
        if failed is not None and kv.meta(failed).get("name") not in seen_failures:
            return {"result": "failed", "migration": kv.meta(failed).get("name"), "reason": "migration {0} failed: {1}".format(
                kv.meta(failed).get("name"), failure_reason(failed))}
        if not same or status.get("phase") in FINAL_VMI_PHASES:
            return {"result": "failed", "reason": "the VMI stopped or was deleted while it was being migrated"}
        return None
    if action == "restart":
        if vmi is not None and not same and status.get("phase") == "Running" and status.get("nodeName") not in (None, node):
            return {"result": "restarted", "target_node": status.get("nodeName"), "uid_after": kv.meta(vmi).get("uid")}
        return None
    if action == "replace":
        if not same or status.get("phase") in FINAL_VMI_PHASES:
            return {"result": "replaced", "reason": "VirtualMachineInstanceReplicaSet {0} creates a new VMI".format(item.get("owner_name"))}
        return None
    if action == "lost":
        if not same or status.get("phase") in FINAL_VMI_PHASES:
            return {"result": "deleted", "reason": "shut down; nothing starts it again"}
        return None
    if action == "external":
        if not same or status.get("nodeName") != node or status.get("phase") in FINAL_VMI_PHASES:
            return {"result": "moved", "target_node": status.get("nodeName") if same else None}
        return None
    return None
