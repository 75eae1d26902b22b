# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure decisions of the migration cooldown, from objects as the API returns them, and the migration history and
clock that the storm breaker (`checks.storm_breaker`) shares.

Cooldown: a VM whose last migration succeeded less than its cooldown ago, or that is migrating now, is kept out of
the Descheduler's next runs by upstream's own mechanism: the annotation `descheduler.alpha.kubernetes.io/prefer-no-eviction`
on its current virt-launcher Pod, which DefaultEvictor's Filter refuses when the profile's `noEvictionPolicy` is
`Mandatory` (descheduler v0.36 `defaultevictor.go`; with `Preferred`, the default, the filter ignores it and plugins
may only sort such Pods last). The collection's own `kubevirt-ops.io/cooldown-until` beside it says the mark is ours
and until when; a Pod that carries prefer-no-eviction without it was marked by someone else and is left alone. The
cooldown is `cooldown` for one succeeded migration within the history window, doubled for each further one, capped
at `max_cooldown` (OpenShift's KubeVirtRelieveAndMigrate: 15 min doubling, 6 h at most). An annotation
`descheduler.alpha.kubernetes.io/evict` makes DefaultEvictor let a Pod through before any other check, so a mark there
would not hold.

Which clock: the timestamps come from KubeVirt's controllers (phaseTransitionTimestamps) and the API server
(creationTimestamp, managedFields); `now` is the clock of the host that runs the module, unless an object read carries a
later timestamp (that host's clock is behind the cluster's), then the newest such timestamp (`reference_now`). A mark's
`until` is computed from the migration's own timestamp, never from `now`, so a second run writes the same value.
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import profile_facts
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.findings import finding
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import format_time, parse_time

PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
COOLDOWN_UNTIL = "kubevirt-ops.io/cooldown-until"
MANDATORY = "Mandatory"

DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
DURATION_RE = re.compile(r"^(?:(\d+(?:\.\d+)?)(d|h|m|s))+$")
DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")


# ------------------------------------------------------------------------------------------ durations and time
def parse_duration(value: Any) -> int:
    """Seconds from a number of seconds or a duration such as `15m`, `1h30m`, `90s`, `6h`, `1d`; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("{0!r} is not a duration".format(value))
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value or "").strip().lower()
        if re.match(r"^\d+(\.\d+)?$", text):
            seconds = float(text)
        elif DURATION_RE.match(text):
            seconds = sum(float(number) * DURATION_UNITS[unit] for number, unit in DURATION_PART_RE.findall(text))
        else:
            raise ValueError("{0!r} is not a duration".format(value))
    if seconds < 0:
        raise ValueError("{0!r} is negative".format(value))
    return int(round(seconds))


def object_timestamps(obj: dict) -> Iterable[datetime.datetime]:
    """The timestamps an object carries: creation, managedFields (the API server's time of each write), a migration's
    phase transitions and start and end."""
    metadata = kv.meta(obj)
    values = [metadata.get("creationTimestamp")] + [entry.get("time") for entry in metadata.get("managedFields") or [] if isinstance(entry, dict)]
    status = obj.get("status") or {}
    values += [item.get("phaseTransitionTimestamp") for item in status.get("phaseTransitionTimestamps") or [] if isinstance(item, dict)]
    state = status.get("migrationState") or {}
    values += [state.get("startTimestamp"), state.get("endTimestamp")]
    for value in values:
        parsed = parse_time(value) if isinstance(value, str) else None
        if parsed is not None:
            yield parsed


def newest_timestamp(objects: Iterable[dict]) -> Optional[datetime.datetime]:
    newest = None
    for obj in objects:
        for when in object_timestamps(obj):
            if newest is None or when > newest:
                newest = when
    return newest


def reference_now(local: datetime.datetime, objects: Iterable[dict]) -> Tuple[datetime.datetime, dict]:
    """`now` for the decisions and how it was chosen: the local clock, or the newest timestamp of the objects read when
    that is later (the local clock is behind the cluster's; time only moves forward)."""
    newest = newest_timestamp(objects)
    clock = {"local": format_time(local), "newest_seen": format_time(newest) if newest else None}
    if newest is not None and newest > local:
        return newest, dict(clock, source="newest_timestamp", now=format_time(newest),
                            behind_seconds=round((newest - local).total_seconds(), 3))
    return local, dict(clock, source="local_clock", now=format_time(local), behind_seconds=0.0)


# ------------------------------------------------------------------------------------------ migrations
def migration_phase_time(vmim: dict, phase: str) -> Optional[datetime.datetime]:
    for item in (vmim.get("status") or {}).get("phaseTransitionTimestamps") or []:
        if isinstance(item, dict) and item.get("phase") == phase:
            return parse_time(item.get("phaseTransitionTimestamp"))
    return None


def migration_end(vmim: dict) -> Optional[datetime.datetime]:
    """When a final migration ended: its Succeeded or Failed phase transition, else migrationState.endTimestamp, else
    its creation (a final migration without timestamps)."""
    phase = (vmim.get("status") or {}).get("phase")
    state = (vmim.get("status") or {}).get("migrationState") or {}
    return (migration_phase_time(vmim, phase) if phase else None) or parse_time(state.get("endTimestamp")) \
        or parse_time(kv.meta(vmim).get("creationTimestamp"))


def migration_start(vmim: dict) -> Optional[datetime.datetime]:
    return parse_time(kv.meta(vmim).get("creationTimestamp"))


def in_flight(vmim: dict) -> bool:
    return (vmim.get("status") or {}).get("phase") not in kv.FINISHED_MIGRATION_PHASES


def vm_key(vmim: dict) -> Tuple[str, str]:
    return kv.meta(vmim).get("namespace") or "", (vmim.get("spec") or {}).get("vmiName") or ""


def migration_entry(vmim: dict) -> dict:
    """A migration as the modules report it."""
    facts = kv.migration_facts(vmim)
    state = (vmim.get("status") or {}).get("migrationState") or {}
    end = migration_end(vmim) if not in_flight(vmim) else None
    namespace, vmi = vm_key(vmim)
    return {"namespace": namespace, "name": facts["name"], "vm": vmi, "phase": facts["phase"], "source": facts["source_node"],
            "target": facts["target_node"], "finished": format_time(end) if end else None,
            "failure_reason": state.get("failureReason")}


def history(vmims: Iterable[dict], since: datetime.datetime) -> Dict[Tuple[str, str], dict]:
    """Per VM (namespace, VMI name): the ends of the migrations that succeeded since `since` (oldest first), the ones
    that failed since then, and the migrations not final yet (oldest first)."""
    result: Dict[Tuple[str, str], dict] = {}
    for vmim in vmims:
        key = vm_key(vmim)
        entry = result.setdefault(key, {"succeeded": [], "failed": [], "in_flight": []})
        phase = (vmim.get("status") or {}).get("phase")
        if in_flight(vmim):
            entry["in_flight"].append(vmim)
            continue
        end = migration_end(vmim)
        if end is None or end < since:
            continue
        entry["succeeded" if phase == "Succeeded" else "failed"].append((end, vmim))
    for entry in result.values():  # timestamps have whole seconds: ties go by creation, then name
        entry["succeeded"].sort(key=lambda item: (item[0], kv.meta(item[1]).get("creationTimestamp") or "", kv.meta(item[1]).get("name") or ""))
        entry["failed"].sort(key=lambda item: (item[0], kv.meta(item[1]).get("creationTimestamp") or "", kv.meta(item[1]).get("name") or ""))
        entry["in_flight"].sort(key=lambda m: (kv.meta(m).get("creationTimestamp") or "", kv.meta(m).get("name") or ""))
    return result


# ------------------------------------------------------------------------------------------ the cooldown
def cooldown_seconds(migrations: int, base: int, cap: int) -> int:
    """`base` for one migration, doubled for each further one, at most `cap`; 0 without a migration."""
    if migrations <= 0:
        return 0
    seconds = base
    for _more in range(migrations - 1):
        if seconds >= cap:
            break
        seconds *= 2
    return min(seconds, cap)


def decide(namespace: str, vm: str, entry: Optional[dict], now: datetime.datetime, base: int, cap: int) -> dict:
    """Whether the VM is in its cooldown now, and until when. A migration in flight counts as one more that
    succeeds when it started, and keeps the VM marked whatever `until` says."""
    entry = entry or {"succeeded": [], "in_flight": []}
    succeeded = entry["succeeded"]
    migrating = bool(entry["in_flight"])
    count = len(succeeded) + (1 if migrating else 0)
    seconds = cooldown_seconds(count, base, cap)
    if migrating:
        since = migration_start(entry["in_flight"][-1]) or now
    else:
        since = succeeded[-1][0] if succeeded else None
    until = since + datetime.timedelta(seconds=seconds) if since is not None and seconds else None
    return {"namespace": namespace, "vm": vm, "last_migration": format_time(succeeded[-1][0]) if succeeded else None,
            "migrations_in_window": len(succeeded), "migrating": migrating, "cooldown_seconds": seconds,
            "until": format_time(until) if until else None,
            "due": migrating or (until is not None and until > now)}


def mark_state(pod: dict) -> dict:
    """What the launcher carries: the prefer-no-eviction annotation, ours (and its value), the evict annotation."""
    notes = kv.annotations(pod)
    return {"prefer_no_eviction": PREFER_NO_EVICTION in notes, "ours": COOLDOWN_UNTIL in notes, "until": notes.get(COOLDOWN_UNTIL),
            "evict": EVICT_ANNOTATION in notes}


def mark_patch(until: str) -> dict:
    return {"metadata": {"annotations": {PREFER_NO_EVICTION: "", COOLDOWN_UNTIL: until}}}


def lift_patch() -> dict:
    return {"metadata": {"annotations": {PREFER_NO_EVICTION: None, COOLDOWN_UNTIL: None}}}


def pod_action(pod: dict, decision: Optional[dict]) -> Tuple[str, Optional[str]]:
    """(`mark`, `keep`, `lift`, `skip` or `none`, the reason of a skip) for a launcher and its VM's decision (None: the
    Pod's VM is not decided here, so only a mark of ours is lifted)."""
    state = mark_state(pod)
    if decision is None or not decision["due"]:
        return ("lift", None) if state["ours"] else ("none", None)
    if state["prefer_no_eviction"] and not state["ours"]:
        return "skip", "already has {0} without {1}: set by someone else, left alone".format(PREFER_NO_EVICTION, COOLDOWN_UNTIL)
    if state["evict"]:
        return "skip", ("has {0}, which DefaultEvictor lets through before any no-eviction check: a cooldown mark would not hold; "
                        "remove that annotation to keep the VM in its cooldown".format(EVICT_ANNOTATION))
    if state["ours"] and state["prefer_no_eviction"] and state["until"] == decision["until"]:
        return "keep", None
    return "mark", None


def annotations_shown(pod: dict) -> dict:
    """The annotations of a launcher the cooldown reads or writes, for the diff."""
    notes = kv.annotations(pod)
    return {key: notes[key] for key in (PREFER_NO_EVICTION, COOLDOWN_UNTIL) if key in notes}


# ------------------------------------------------------------------------------------------ the live policy
def cooldown_finding(code: str, message: str, namespace: Optional[str] = None, name: Optional[str] = None) -> dict:
    """A finding (`kube.findings`) about the policy ConfigMap `namespace/name`."""
    return finding(code, message, kind="ConfigMap" if name else None, name=name, namespace=namespace)


def policy_findings(policy: Optional[dict], error: Optional[str], namespace: str, configmap: Optional[str], key: Optional[str]) -> List[dict]:
    """Whether the live policy makes the marks hold: every profile that evicts (balance or deschedule plugins) needs
    DefaultEvictor `noEvictionPolicy: Mandatory`."""
    where = "ConfigMap {0}/{1} key {2}".format(namespace, configmap, key)
    if policy is None:
        return [cooldown_finding("cooldown_policy_unknown", "{0}: {1}; whether the Descheduler honours the cooldown marks is not known "
                                 "(it needs DefaultEvictor noEvictionPolicy: Mandatory in the profile that moves VMs).".format(where, error),
                                 namespace, configmap)]
    findings = []
    for index, profile in enumerate(p for p in policy.get("profiles") or [] if isinstance(p, dict)):
        facts = profile_facts(profile)
        if not facts["evicts"]:
            continue
        value = (facts["default_evictor"] or {}).get("noEvictionPolicy")
        if value == MANDATORY:
            continue
        findings.append(cooldown_finding(
            "cooldown_not_enforced",
            "{0}: profiles[{1}] ({2}): DefaultEvictor noEvictionPolicy is {3}: DefaultEvictor then ignores {4} (Preferred lets "
            "plugins only sort such Pods last), so the cooldown marks do not keep VMs from being evicted. Set noEvictionPolicy: "
            "Mandatory in the profile's DefaultEvictor args (descheduler_policy option no_eviction_policy).".format(
                where, index, facts["name"], value or "unset (Preferred)", PREFER_NO_EVICTION), namespace, configmap))
    return findings
