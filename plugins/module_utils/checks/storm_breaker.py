# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure decisions of the storm breaker, from objects as the API returns them.

Within a window it counts the failed migrations (VirtualMachineInstanceMigration phase Failed) and, per VM, the
succeeded ones; it trips at `max_failed_migrations` failures or when one VM migrated more than `max_migrations_per_vm`
times. Tripped, it pauses the Descheduler (CronJob `spec.suspend: true`, or a Deployment scaled to 0) and, in the same
write, records on the object what it was (annotation `kubevirt-ops.io/storm-breaker`, JSON; a Deployment's replicas also
in `kubevirt-ops.io/rollback-replicas`, where the descheduler_rollback role looks for them). A reset restores the record,
removes it and notes the time in `kubevirt-ops.io/storm-breaker-reset`: the window never reaches back past a reset, so
the failures that tripped the breaker do not trip it again. The window's times follow `checks.cooldown.reference_now`.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import history, migration_entry
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import parse_time

BREAKER_RECORD = "kubevirt-ops.io/storm-breaker"
BREAKER_RESET = "kubevirt-ops.io/storm-breaker-reset"
ROLLBACK_REPLICAS = "kubevirt-ops.io/rollback-replicas"  # descheduler_rollback resumes a Deployment to these replicas
SHOWN = 5


def window_start(now: datetime.datetime, window: int, workload: Optional[dict]) -> datetime.datetime:
    """`window` seconds before now, or the last reset when that is later."""
    start = now - datetime.timedelta(seconds=window)
    reset = parse_time(kv.annotations(workload).get(BREAKER_RESET))
    return max(start, reset) if reset is not None else start


def counts(vmims: Iterable[dict], since: datetime.datetime) -> dict:
    """The failed migrations since `since` (oldest first) and the succeeded ones per VM (namespace, VMI name)."""
    failed: List[Tuple[datetime.datetime, dict]] = []
    per_vm: Dict[Tuple[str, str], List[dict]] = {}
    for key, entry in history(vmims, since).items():
        failed.extend(entry["failed"])
        if entry["succeeded"]:
            per_vm[key] = [vmim for _end, vmim in entry["succeeded"]]
    failed.sort(key=lambda item: (item[0], kv.meta(item[1]).get("name") or ""))
    return {"failed": [vmim for _end, vmim in failed], "per_vm": per_vm}


def describe_seconds(seconds: int) -> str:
    """`1h`, `15m`, `1h30m`, `45s`."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, rest = divmod(rest, 60)
    parts = ["{0}h".format(hours)] if hours else []
    parts += ["{0}m".format(minutes)] if minutes else []
    parts += ["{0}s".format(rest)] if rest or not parts else []
    return "".join(parts)


def evaluate(found: dict, max_failed: int, max_per_vm: int, window: int) -> dict:
    """Whether the counts trip the breaker: the failed migrations in the window, the VMs that migrated more than
    `max_per_vm` times, the most migrations of one VM, and the reasons, one short line each."""
    failed = [migration_entry(vmim) for vmim in found["failed"]]
    reasons = []
    if len(failed) >= max_failed:
        names = ["{0}/{1}".format(f["namespace"], f["name"]) for f in failed[-SHOWN:]]
        more = " and {0} more".format(len(failed) - SHOWN) if len(failed) > SHOWN else ""
        reasons.append("{0} failed migrations within {1} (max_failed_migrations {2}): {3}{4}".format(
            len(failed), describe_seconds(window), max_failed, ", ".join(names), more))
    movers = [{"namespace": namespace, "vm": vm, "migrations": len(vmims), "names": [kv.meta(m).get("name") for m in vmims]}
              for (namespace, vm), vmims in sorted(found["per_vm"].items()) if len(vmims) > max_per_vm]
    for mover in movers:
        reasons.append("{0}/{1} migrated {2} times within {3} (max_migrations_per_vm {4})".format(
            mover["namespace"], mover["vm"], mover["migrations"], describe_seconds(window), max_per_vm))
    return {"trips": bool(reasons), "failed_migrations": failed, "frequent_movers": movers,
            "most_migrations_of_one_vm": max([len(vmims) for vmims in found["per_vm"].values()] or [0]), "reasons": reasons}


# ------------------------------------------------------------------------------------------ the record on the workload
def read_record(workload: Optional[dict]) -> Optional[dict]:
    """The breaker's record on the workload (what it changed and why); None without one, or when it is not a JSON object."""
    return kv.json_annotation(workload, BREAKER_RECORD)


def paused(kind: str, workload: dict) -> bool:
    """A suspended CronJob, or a Deployment at 0 replicas (unset replicas are 1)."""
    spec = workload.get("spec") or {}
    if kind == "CronJob":
        return bool(spec.get("suspend"))
    return spec.get("replicas", 1) == 0


def trip_patch(kind: str, workload: dict, tripped_at: str, reason: str) -> dict:
    """The merge patch that pauses the workload and records, in the same write, what it was."""
    spec = workload.get("spec") or {}
    record: Dict[str, Any] = {"tripped_at": tripped_at, "kind": kind, "reason": reason}
    notes: Dict[str, Any] = {}
    if kind == "CronJob":
        record["suspend"] = bool(spec.get("suspend"))
        change: Dict[str, Any] = {"suspend": True}
    else:
        record["replicas"] = spec.get("replicas", 1)
        notes[ROLLBACK_REPLICAS] = str(record["replicas"])
        change = {"replicas": 0}
    notes[BREAKER_RECORD] = json.dumps(record, sort_keys=True)
    return {"metadata": {"annotations": notes}, "spec": change}


def reset_patch(kind: str, record: dict, reset_at: str) -> dict:
    """The merge patch that restores what the record says, drops the record and notes the reset."""
    notes: Dict[str, Any] = {BREAKER_RECORD: None, BREAKER_RESET: reset_at}
    if kind == "CronJob":
        change: Dict[str, Any] = {"suspend": bool(record.get("suspend", False))}
    else:
        notes[ROLLBACK_REPLICAS] = None
        change = {"replicas": int(record.get("replicas", 1))}
    return {"metadata": {"annotations": notes}, "spec": change}


def pause_path(kind: str) -> str:
    return "/spec/suspend" if kind == "CronJob" else "/spec/replicas"


def pausing_patches(resource_patches: Iterable[dict], kind: str, namespace: str, name: str) -> List[str]:
    """ACP ResourcePatches of the workload that only pause it (every operation on /spec/suspend, or /spec/replicas): ACP
    records the breaker's pause as one, which would hold the pause against a reset."""
    names = []
    for patch in resource_patches:
        target = (patch.get("spec") or {}).get("target") or {}
        if (target.get("kind"), target.get("namespace") or kv.meta(patch).get("namespace"), target.get("name")) != (kind, namespace, name):
            continue
        operations = (patch.get("spec") or {}).get("jsonPatch") or []
        if operations and all(isinstance(op, dict) and op.get("path") == pause_path(kind) for op in operations):
            names.append(kv.meta(patch).get("name"))
    return sorted(name for name in names if name)


def workload_state(kind: str, workload: dict) -> dict:
    """What the breaker reads or writes on the workload, for the diff."""
    spec = workload.get("spec") or {}
    notes = kv.annotations(workload)
    state: Dict[str, Any] = {"suspend": bool(spec.get("suspend"))} if kind == "CronJob" else {"replicas": spec.get("replicas", 1)}
    state["annotations"] = {key: notes[key] for key in (BREAKER_RECORD, BREAKER_RESET, ROLLBACK_REPLICAS) if key in notes}
    return state
