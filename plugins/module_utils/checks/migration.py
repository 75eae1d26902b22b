# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The five pass criteria of a live migration and the classification of its trigger, from plain dicts.

The rebalance procedure (Validate Rebalancing, step 5): pass only when the VMI runs on a different node, a VirtualMachineInstanceMigration
reached Succeeded with the expected source and target nodes, the VMI UID is unchanged, the VM remains
Running/Ready, and the old launcher has terminated. "A Descheduler log line, an Eviction API response, or a
changed Pod name alone is not a migration result."

Each check answers `pass`, `fail` (decided: nothing later can make it pass) or `open` (not yet), with a reason.
The trigger is `descheduler` (an evacuation migration while the VMI carried `kubevirt.io/eviction-source:
descheduler`, or, after completion, created within a few seconds of the `Eviction in background assumed`
line for the VMI's launcher in the descheduler log), `drain` (an evacuation from a node seen cordoned, as `kubectl
drain` and this collection's drain leave it, or carrying KubeVirt's drain taint), `manual` (a migration created by a
person or a tool), `unknown` (an evacuation with none of that evidence left: the descheduler's Job may have been deleted
by its history limit while the watch was cut, and the node is not cordoned; `trigger_reason` says what was looked at)
or null (no migration). An evacuation alone is never taken for a drain: the descheduler's evictions are evacuations too.
"""

from __future__ import annotations

import datetime
from typing import Dict, Iterable, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import EVICTION_ASSUMED, parse_time

PASS = "pass"
FAIL = "fail"
OPEN = "open"
CHECKS = ("node_changed", "migration_succeeded", "uid_unchanged", "running_ready", "old_launcher_gone")
TRIGGER_CHECK = "trigger"
TRIGGERS = ("descheduler", "drain", "manual", "unknown")
UNKNOWN = "unknown"
# KubeVirt's default nodeDrainTaintKey (virt-controller's evacuation controller migrates every VMI off a node with it), and
# the taint the node lifecycle controller puts on a cordoned node (kubernetes/kubernetes pkg/controller/nodelifecycle).
DRAIN_TAINTS = ("kubevirt.io/drain", "node.kubernetes.io/unschedulable")
EVACUATION_PREFIX = "kubevirt-evacuation-"
DESCHEDULER_SOURCE = "descheduler"
CORRELATION_SECONDS = 5.0
RECORD_SLACK = datetime.timedelta(seconds=2)  # creationTimestamp has whole seconds
FINISHED_VMI_PHASES = ("Succeeded", "Failed")


def _check(state: str, reason: str) -> dict:
    return {"result": state, "reason": reason}


# ------------------------------------------------------------------------------------------ baseline
def baseline_entry(vmi: dict, launcher: Optional[str] = None, recorded_at: Optional[str] = None) -> dict:
    """What `record` keeps of a VMI: namespace, name, UID, node, the launcher Pod it runs in and when (migrations
    created before that are not about this change)."""
    return {"namespace": kv.meta(vmi).get("namespace"), "name": kv.meta(vmi).get("name"), "uid": kv.meta(vmi).get("uid"),
            "node": (vmi.get("status") or {}).get("nodeName"), "launcher": launcher, "recorded_at": recorded_at}


def normalize_baseline(baseline) -> Dict[str, dict]:
    """A baseline keyed `namespace/name`, from `record`'s dict (keyed by name or `namespace/name`), a list of
    entries, or the output of `kubevirt_eviction_facts` (its `vmis` list, launcher as a dict)."""
    if isinstance(baseline, dict) and isinstance(baseline.get("vmis"), list):
        baseline = baseline["vmis"]
    entries = list(baseline.values()) if isinstance(baseline, dict) else list(baseline or [])
    result: Dict[str, dict] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("name"):
            continue
        launcher = entry.get("launcher")
        if isinstance(launcher, dict):
            launcher = launcher.get("name")
        item = {"namespace": entry.get("namespace"), "name": entry["name"], "uid": entry.get("uid"),
                "node": entry.get("node"), "launcher": launcher, "recorded_at": entry.get("recorded_at")}
        result["{0}/{1}".format(item["namespace"], item["name"])] = item
    return result


# ------------------------------------------------------------------------------------------ migrations
def migration_record(vmim: dict) -> dict:
    """A migration as evidence: name, phase, nodes, timestamps per phase, duration, failure reason."""
    status = vmim.get("status") or {}
    state = status.get("migrationState") or {}
    phases = {}
    for item in status.get("phaseTransitionTimestamps") or []:
        if item.get("phase"):
            phases[item["phase"]] = item.get("phaseTransitionTimestamp")
    created = kv.meta(vmim).get("creationTimestamp")
    start = parse_time(state.get("startTimestamp") or phases.get("Scheduling") or phases.get("Pending") or created)
    end = parse_time(state.get("endTimestamp") or phases.get("Succeeded") or phases.get("Failed"))
    facts = kv.migration_facts(vmim)
    return {
        "name": facts["name"], "phase": facts["phase"], "source_node": facts["source_node"], "target_node": facts["target_node"],
        "evacuation": facts["evacuation"] or (facts["name"] or "").startswith(EVACUATION_PREFIX),
        "created": created, "phase_timestamps": phases, "start": state.get("startTimestamp"), "end": state.get("endTimestamp"),
        "duration_seconds": (end - start).total_seconds() if start and end else None,
        "failure_reason": state.get("failureReason") or _failed_condition(vmim),
    }


def _failed_condition(vmim: dict) -> Optional[str]:
    for cond in (vmim.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Failed", "MigrationRejectedByResourceQuota"):
            return cond.get("message") or cond.get("reason")
    return None


def _brought_it_there(entry: dict, vmim: dict) -> bool:
    """Whether the migration is the one that moved the VMI into the launcher the baseline found it in: it ended before
    the record, whatever its whole-second creationTimestamp says (a baseline recorded right after a migration)."""
    target_pod = ((vmim.get("status") or {}).get("migrationState") or {}).get("targetPod")
    return bool(entry.get("launcher")) and target_pod == entry["launcher"]


def relevant_migrations(entry: dict, vmims: Iterable[dict]) -> List[dict]:
    """The migrations of the baseline VMI (same namespace and vmiName; same UID when the label says), oldest first;
    not those created before the record, nor the one that brought the VMI into its recorded launcher."""
    since = parse_time(entry.get("recorded_at"))
    found = [m for m in vmims if kv.meta(m).get("namespace") == entry["namespace"] and (m.get("spec") or {}).get("vmiName") == entry["name"]
             and not (since and (parse_time(kv.meta(m).get("creationTimestamp")) or since) < since - RECORD_SLACK)
             and not _brought_it_there(entry, m)]
    found.sort(key=lambda m: (kv.meta(m).get("creationTimestamp") or "", kv.meta(m).get("name") or ""))
    return found


def pick_migration(entry: dict, vmi: Optional[dict], vmims: Iterable[dict]) -> Optional[dict]:
    """The migration that decides: one Succeeded from the baseline node to where the VMI runs, else the newest."""
    found = relevant_migrations(entry, vmims)
    node = ((vmi or {}).get("status") or {}).get("nodeName")
    for vmim in reversed(found):
        record = kv.migration_facts(vmim)
        if record["phase"] == "Succeeded" and record["source_node"] == entry["node"] and record["target_node"] == node:
            return vmim
    for vmim in reversed(found):  # a failure decides at once, even when KubeVirt already retries the evacuation
        record = kv.migration_facts(vmim)
        if record["phase"] == "Failed" and record["source_node"] in (None, entry["node"]):
            return vmim
    return found[-1] if found else None


# ------------------------------------------------------------------------------------------ the five checks
def check_node_changed(entry: dict, vmi: Optional[dict]) -> dict:
    node = ((vmi or {}).get("status") or {}).get("nodeName")
    if vmi is None:
        return _check(OPEN, "the VMI does not exist (now)")
    if not node:
        return _check(OPEN, "the VMI is not on a node")
    if node == entry["node"]:
        return _check(OPEN, "the VMI still runs on its baseline node {0}".format(entry["node"]))
    return _check(PASS, "the VMI runs on {0}, not on its baseline node {1}".format(node, entry["node"]))


def check_migration_succeeded(entry: dict, vmi: Optional[dict], vmim: Optional[dict]) -> dict:
    if vmim is None:
        return _check(OPEN, "no VirtualMachineInstanceMigration for the VMI")
    record = migration_record(vmim)
    node = ((vmi or {}).get("status") or {}).get("nodeName")
    if record["phase"] == "Failed":
        return _check(FAIL, "migration {0} failed: {1}".format(record["name"], record["failure_reason"] or "no reason given"))
    if record["phase"] != "Succeeded":
        return _check(OPEN, "migration {0} is {1}".format(record["name"], record["phase"] or "not started"))
    if record["source_node"] != entry["node"]:
        return _check(FAIL, "migration {0} succeeded from {1}, not from the baseline node {2}".format(
            record["name"], record["source_node"], entry["node"]))
    if record["target_node"] != node and node in (None, entry["node"]):  # the VMI's own update may come after the migration's
        return _check(OPEN, "migration {0} succeeded to {1}; the VMI does not show it yet".format(record["name"], record["target_node"]))
    if record["target_node"] != node:
        return _check(FAIL, "migration {0} succeeded to {1}, but the VMI runs on {2}".format(record["name"], record["target_node"], node))
    return _check(PASS, "migration {0} succeeded from {1} to {2}".format(record["name"], record["source_node"], record["target_node"]))


def check_uid_unchanged(entry: dict, vmi: Optional[dict]) -> dict:
    if vmi is None:
        return _check(OPEN, "the VMI does not exist (now): it may be restarting")
    uid = kv.meta(vmi).get("uid")
    if entry.get("uid") and uid != entry["uid"]:
        return _check(FAIL, "the VMI was restarted, not migrated: its UID changed from {0} to {1}".format(entry["uid"], uid))
    phase = (vmi.get("status") or {}).get("phase")
    if phase in FINISHED_VMI_PHASES:
        return _check(FAIL, "the VMI stopped (phase {0}) instead of migrating".format(phase))
    return _check(PASS, "the VMI UID is unchanged ({0})".format(uid))


def check_running_ready(vm: Optional[dict], vmi: Optional[dict]) -> dict:
    if vmi is None:
        return _check(OPEN, "the VMI does not exist (now)")
    phase = (vmi.get("status") or {}).get("phase")
    if vm is not None:
        status = vm.get("status") or {}
        printable, ready = status.get("printableStatus"), bool(status.get("ready"))
        if printable == "Running" and ready and kv.condition_true(vmi, "Ready"):
            return _check(PASS, "the VM is Running and Ready")
        return _check(OPEN, "the VM is {0}, ready={1}".format(printable or "without status", str(ready).lower()))
    if phase == "Running" and kv.condition_true(vmi, "Ready"):
        return _check(PASS, "the VMI is Running and Ready")
    return _check(OPEN, "the VMI is {0}, Ready={1}".format(phase or "without phase", str(kv.condition_true(vmi, "Ready")).lower()))


def old_launchers(entry: dict, pods: Iterable[dict]) -> List[dict]:
    """Pods that are the baseline launcher and still exist unfinished: by name when recorded, else by the
    VMI UID label on the baseline node."""
    found = []
    for pod in pods:
        if kv.meta(pod).get("namespace") != entry["namespace"] or ((pod.get("status") or {}).get("phase") in kv.TERMINAL_POD_PHASES):
            continue
        if entry.get("launcher"):
            if kv.meta(pod).get("name") == entry["launcher"]:
                found.append(pod)
        elif kv.is_launcher(pod) and kv.labels(pod).get(kv.CREATED_BY_LABEL) == entry.get("uid") \
                and (pod.get("spec") or {}).get("nodeName") == entry["node"]:
            found.append(pod)
    return found


def check_old_launcher_gone(entry: dict, pods: Iterable[dict]) -> dict:
    left = old_launchers(entry, pods)
    if left:
        pod = left[0]
        state = "terminating" if kv.meta(pod).get("deletionTimestamp") else (pod.get("status") or {}).get("phase") or "present"
        return _check(OPEN, "the old launcher {0} is still {1}".format(kv.meta(pod).get("name"), state))
    return _check(PASS, "the old launcher {0} has terminated".format(entry.get("launcher") or "on {0}".format(entry["node"])))


# ------------------------------------------------------------------------------------------ trigger
def correlated_log_lines(entry: dict, vmim: Optional[dict], records: Iterable[dict], window: float = CORRELATION_SECONDS) -> List[dict]:
    """`Eviction in background assumed` lines for the baseline launcher, within `window` seconds of the
    migration's creation (all of them when there is no migration or no launcher name)."""
    pod = "{0}/{1}".format(entry["namespace"], entry.get("launcher")) if entry.get("launcher") else None
    prefix = "{0}/virt-launcher-{1}-".format(entry["namespace"], entry["name"])
    created = parse_time(kv.meta(vmim).get("creationTimestamp")) if vmim else None
    found = []
    for record in records:
        if record.get("message") != EVICTION_ASSUMED:
            continue
        target = str((record.get("fields") or {}).get("pod") or "")
        if not (target == pod if pod else target.startswith(prefix)):
            continue
        when = parse_time(record.get("time"))
        if created is not None and when is not None and abs((created - when).total_seconds()) > window + 1:
            continue
        found.append(record)
    return found


def drain_evidence(node: Optional[dict]) -> Optional[str]:
    """Why `node` is being drained, read from the Node: cordoned (`spec.unschedulable`, the first step of `kubectl drain`
    and of this collection's drain) or one of DRAIN_TAINTS; None when it shows neither (or is gone)."""
    if not node:
        return None
    name = kv.meta(node).get("name")
    if (node.get("spec") or {}).get("unschedulable"):
        return "node {0} is cordoned (spec.unschedulable)".format(name)
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") in DRAIN_TAINTS:
            return "node {0} has the taint {1}:{2}".format(name, taint.get("key"), taint.get("effect") or "")
    return None


def _evacuation(vmim: dict) -> bool:
    record = kv.migration_facts(vmim)
    return bool(record["evacuation"] or (record["name"] or "").startswith(EVACUATION_PREFIX))


def classify_trigger(vmim: Optional[dict], saw_descheduler_source: bool, log_lines: List[dict],
                     drain_seen: Optional[str] = None) -> Optional[str]:
    """`descheduler`, `drain` (only with `drain_seen`, the drain_evidence of the evacuated node), `manual`, `unknown`
    (an evacuation without evidence of either), or None without a migration."""
    if vmim is None:
        return None
    if not _evacuation(vmim):
        return "manual"
    if saw_descheduler_source or log_lines:
        return "descheduler"
    if drain_seen:
        return "drain"
    return UNKNOWN


def trigger_reason(trigger: Optional[str], node: str, saw_descheduler_source: bool, log_lines: List[dict],
                   drain_seen: Optional[str], log_read: bool) -> Optional[str]:
    """The evidence behind a trigger, as a person reads it; for `unknown`, what was looked for and not found."""
    if trigger is None:
        return None
    if trigger == "manual":
        return "a migration that is not an evacuation: created by a person or a tool"
    if trigger == "descheduler":
        return ("the VMI carried {0}: {1}".format(kv.EVICTION_SOURCE_ANNOTATION, DESCHEDULER_SOURCE) if saw_descheduler_source
                else "the descheduler log has {0} for its launcher".format(EVICTION_ASSUMED))
    if trigger == "drain":
        return "an evacuation while {0}".format(drain_seen)
    return ("an evacuation from {0} with no evidence left of who asked for it: the VMI was not seen with {1}: {2}, {3}, and {0} "
            "was not seen cordoned or with a drain taint; not taken for a drain").format(
                node, kv.EVICTION_SOURCE_ANNOTATION, DESCHEDULER_SOURCE,
                "the descheduler log (its Pods may be gone to the Jobs' history limit) has no eviction line for its launcher" if log_read
                else "the descheduler log could not be read")


def descheduler_source(vmi: Optional[dict]) -> bool:
    return kv.annotations(vmi).get(kv.EVICTION_SOURCE_ANNOTATION) == DESCHEDULER_SOURCE


def check_trigger(required: str, trigger: Optional[str], decided: bool, reason: Optional[str] = None) -> dict:
    if required == "any":
        return _check(PASS, "any trigger is accepted")
    if trigger == required:
        return _check(PASS, "triggered by the {0}".format(required))
    if trigger is None or not decided:
        return _check(OPEN, "the trigger is not known yet (required: {0})".format(required))
    if trigger == UNKNOWN:
        return _check(FAIL, "the trigger is unknown, not proven to be the {0}: {1}".format(required, reason or "no evidence left"))
    return _check(FAIL, "triggered by {0}, not by the {1}".format(trigger, required))


# ------------------------------------------------------------------------------------------ verdict
def evaluate(entry: dict, vmi: Optional[dict], vm: Optional[dict], vmims: Iterable[dict], pods: Iterable[dict],
             saw_descheduler_source: bool = False, log_records: Iterable[dict] = (), require_trigger: str = "any",
             log_read: bool = True, drain_seen: Optional[Dict[str, str]] = None) -> dict:
    """Every check for one baseline VMI; `verdict` is pass, fail or open; `moving` says that something started
    (a migration, another node or UID, a stopped VMI), so that an untouched VM can be told from one in flight.
    `log_read` False (the last read of the log failed): no line is no evidence, so the trigger stays open.
    `drain_seen`: node name -> drain_evidence seen on that node while verifying (the evidence of a drain)."""
    vmims = list(vmims)
    vmim = pick_migration(entry, vmi, vmims)
    checks = {
        "node_changed": check_node_changed(entry, vmi),
        "migration_succeeded": check_migration_succeeded(entry, vmi, vmim),
        "uid_unchanged": check_uid_unchanged(entry, vmi),
        "running_ready": check_running_ready(vm, vmi),
        "old_launcher_gone": check_old_launcher_gone(entry, pods),
    }
    lines = correlated_log_lines(entry, vmim, log_records) if vmim is not None else []
    source = saw_descheduler_source or descheduler_source(vmi)
    evacuated = (kv.migration_facts(vmim).get("source_node") if vmim is not None else None) or entry["node"]
    seen = (drain_seen or {}).get(evacuated)
    trigger = classify_trigger(vmim, source, lines, seen)
    reason = trigger_reason(trigger, evacuated, source, lines, seen, log_read)
    finished = vmim is not None and kv.migration_facts(vmim)["finished"]
    if require_trigger != "any":
        checks[TRIGGER_CHECK] = check_trigger(require_trigger, trigger, finished and log_read, reason)
    results = [c["result"] for c in checks.values()]
    verdict = FAIL if FAIL in results else (PASS if all(r == PASS for r in results) else OPEN)
    moving = vmim is not None or vmi is None or checks["node_changed"]["result"] == PASS or checks["uid_unchanged"]["result"] == FAIL
    return {"namespace": entry["namespace"], "name": entry["name"], "verdict": verdict, "checks": checks,
            "open_checks": [name for name, c in checks.items() if c["result"] == OPEN],
            "failed_checks": [name for name, c in checks.items() if c["result"] == FAIL],
            "reason": "; ".join(c["reason"] for c in checks.values() if c["result"] == FAIL) or None,
            "moving": moving, "uid_before": entry.get("uid"), "uid_after": kv.meta(vmi).get("uid") if vmi else None,
            "source_node": entry["node"], "node": ((vmi or {}).get("status") or {}).get("nodeName"),
            "migration": migration_record(vmim) if vmim else None,
            "migrations": [kv.meta(m).get("name") for m in relevant_migrations(entry, vmims)],
            "trigger": trigger, "trigger_reason": reason, "descheduler_log": [r.get("line") for r in lines]}


def decided(results: List[dict], min_moved: int) -> bool:
    """Whether waiting can stop: every VM passed or failed, or enough passed and the others were never touched
    (the bounded policy of the rebalance procedure moves one VM per cycle, so the rest may wait for later cycles)."""
    passed = sum(1 for r in results if r["verdict"] == PASS)
    for result in results:
        if result["verdict"] != OPEN:
            continue
        if result["moving"] or passed < min_moved:
            return False
    return True


def finish(results: List[dict], min_moved: int, timed_out: bool) -> dict:
    """Final verdicts and the overall outcome. An open VM that never moved is `not_moved` (a failure only when
    fewer than `min_moved` VMs passed); an open VM in flight at the deadline is `timeout`, naming its open checks."""
    passed = sum(1 for r in results if r["verdict"] == PASS)
    for result in results:
        if result["verdict"] != OPEN:
            continue
        if result["moving"]:
            result["verdict"] = "timeout"
            result["reason"] = "timed out with {0} open: {1}".format(", ".join(result["open_checks"]), "; ".join(
                result["checks"][name]["reason"] for name in result["open_checks"]))
        else:
            result["verdict"] = "not_moved"
            result["reason"] = "not moved{0}: {1}".format(" before the timeout" if timed_out else "", result["checks"]["node_changed"]["reason"])
    short = passed < min_moved
    failed = [r for r in results if r["verdict"] in (FAIL, "timeout") or (short and r["verdict"] == "not_moved")]
    counts = {key: sum(1 for r in results if r["verdict"] == key) for key in (PASS, FAIL, "timeout", "not_moved")}
    return {"passed": not failed and not short, "failed_vms": ["{0}/{1}".format(r["namespace"], r["name"]) for r in failed],
            "counts": dict(counts, vms=len(results), moved=passed, min_moved=min_moved, failed=len(failed))}
