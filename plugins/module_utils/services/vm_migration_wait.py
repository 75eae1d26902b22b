# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waiting until every VirtualMachineInstanceMigration in scope is final (Succeeded or Failed).

The rebalance procedure, Stop and Roll Back: "Wait for all VirtualMachineInstanceMigration objects to reach
Succeeded or Failed before re-enabling the CronJob." The migrations are listed once and then watched from the
list's resourceVersion (`k8s.watch.WatchSet`); the wait ends at the first batch of events after which nothing in
scope is unfinished, or at the deadline. A migration deleted while waiting no longer holds anything up. A wait
writes nothing, so check mode waits as well.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, KindNotServed, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.migration import migration_record
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label, parse_label_selector
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import PROGRESS_SPEC, Progress, named

ARG_SPEC = {
    "namespaces": {"type": "list", "elements": "str", "aliases": ["namespace"]},
    "label_selector": {"type": "str"},
    "vmi_names": {"type": "list", "elements": "str"},
    "timeout": {"type": "int", "default": 600},
    "fail_on_failed": {"type": "bool", "default": False},
    **PROGRESS_SPEC,
}
SHOWN_IN_MESSAGE = 10


class MigrationsUnfinished(RebalanceError):
    """The deadline passed with migrations in scope that are neither Succeeded nor Failed."""


class MigrationsFailed(RebalanceError):
    """`fail_on_failed` and a migration in scope ended Failed."""


# ------------------------------------------------------------------------------------------ options
@dataclasses.dataclass(frozen=True)
class VmMigrationWaitOptions(ModuleOptions):
    """The options of vm_migration_wait, as ARG_SPEC parses them."""
    namespaces: Optional[List[str]]
    label_selector: Optional[str]
    vmi_names: Optional[List[str]]
    timeout: int
    fail_on_failed: bool
    progress_every: int
    resume: Optional[dict]


@dataclasses.dataclass(frozen=True)
class Scope:
    """The migrations waited for: namespaces (None = all), label selector, VMI names as (namespace or None, name)."""
    namespaces: Optional[List[str]]
    label_selector: Optional[str]
    vmi_names: List[Tuple[Optional[str], str]]


def scope(options: VmMigrationWaitOptions) -> Scope:
    """The options checked (namespaces, label selector, timeout) and the scope they select."""
    namespaces = sorted(set(options.namespaces or [])) or None
    for namespace in namespaces or []:
        if not is_dns_label(namespace):
            raise InvalidOption("{0!r} is not a valid namespace name".format(namespace), "Give the namespaces of the VMs, or none for all.",
                                path="namespaces")
    try:
        parse_label_selector(options.label_selector)
    except ValueError as error:
        raise InvalidOption(str(error), "Write a Kubernetes label selector such as 'kubevirt.io/vmi-name=vm-1'.", path="label_selector") from error
    names: List[Tuple[Optional[str], str]] = []
    for name in options.vmi_names or []:
        namespace, _sep, short = name.rpartition("/")
        names.append((namespace or None, short))
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long to wait for the migrations, e.g. 600.", path="timeout")
    return Scope(namespaces=namespaces, label_selector=options.label_selector or None, vmi_names=names)


# ------------------------------------------------------------------------------------------ derivations
def in_scope(vmim: dict, names: List[Tuple[Optional[str], str]]) -> bool:
    """A migration of one of the VMIs named (any VMI when no names are given)."""
    if not names:
        return True
    namespace, vmi = kv.meta(vmim).get("namespace"), (vmim.get("spec") or {}).get("vmiName")
    return any(vmi == name and (want is None or want == namespace) for want, name in names)


def migration_entry(vmim: dict) -> dict:
    """A migration as the module returns it."""
    record = migration_record(vmim)
    return {"namespace": kv.meta(vmim).get("namespace"), "name": record["name"], "vmi": (vmim.get("spec") or {}).get("vmiName"),
            "phase": record["phase"], "source": record["source_node"], "target": record["target_node"],
            "started": record["start"] or record["created"], "finished": record["end"], "evacuation": record["evacuation"],
            "final": record["phase"] in kv.FINISHED_MIGRATION_PHASES, "failure_reason": record["failure_reason"]}


def summarize(vmims: List[dict], names: List[Tuple[Optional[str], str]]) -> dict:
    """The migrations in scope (sorted by namespace, then name), how many are unfinished and which failed."""
    entries = sorted((migration_entry(m) for m in vmims if in_scope(m, names)), key=lambda e: (e["namespace"] or "", e["name"] or ""))
    return {"migrations": entries, "unfinished": [e for e in entries if not e["final"]],
            "failed": [e for e in entries if e["phase"] == "Failed"]}


def _label(entry: dict) -> str:
    return "{0}/{1}".format(entry["namespace"], entry["name"])


def describe(entries: List[dict], with_reason: bool = False) -> str:
    """`ns/name (Phase, vmi vm-1)` for the first few, and how many more."""
    parts = []
    for entry in entries[:SHOWN_IN_MESSAGE]:
        detail = entry["phase"] or "no phase yet"
        if with_reason:
            detail = "{0}: {1}".format(detail, entry["failure_reason"] or "no reason given")
        parts.append("{0} ({1}, VMI {2})".format(_label(entry), detail, entry["vmi"]))
    if len(entries) > SHOWN_IN_MESSAGE:
        parts.append("and {0} more".format(len(entries) - SHOWN_IN_MESSAGE))
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------ the wait
def _streams(client: Client, selected: Scope) -> List[Stream]:
    resource = client.find_kind("VirtualMachineInstanceMigration", "kubevirt.io")
    if resource is None:
        raise KindNotServed("VirtualMachineInstanceMigration", "kubevirt.io",
                            fix="Install KubeVirt on this cluster, or point the connection at the cluster that runs the VMs.")
    return [Stream("vmims/" + (namespace or "*"), resource, namespace, selected.label_selector)
            for namespace in selected.namespaces or [None]]


def _all(watchset: WatchSet) -> List[dict]:
    return [obj for stream in watchset.streams for obj in watchset.objects(stream.name)]


def run(options: VmMigrationWaitOptions, check_mode: bool, client: Optional[Client] = None, clock: Callable[[], float] = time.monotonic,
        watch: Optional[Callable[..., Any]] = None, wall: Callable[[], float] = time.time) -> dict:
    """Wait until every migration in scope is final; the module result (the same in check mode: a wait writes
    nothing). Raises `MigrationsUnfinished` at the deadline and, with `fail_on_failed`, `MigrationsFailed` when one
    ended Failed. The client's deadline covers the wait's timeout on top of api_timeout. With `progress_every`, a call
    returns early with `progress` (the lines, and the state the next call resumes from)."""
    selected = scope(options)
    progress = Progress(options.progress_every, options.resume, clock=clock, wall=wall)
    progress.require_state("seen")
    client = client or Client.from_options(options.connection, extra_timeout=options.timeout)
    watchset = WatchSet(client, _streams(client, selected), progress.call_deadline(options.timeout), clock=clock, watch=watch)
    # every migration in scope seen while waiting, in this call or an earlier one, even if deleted later
    seen: Dict[Tuple[str, str], dict] = {(e["namespace"], e["name"]): e for e in progress.state.get("seen") or []}
    current: Dict[str, Any] = {}

    def done(ws: WatchSet) -> bool:
        current.update(summarize(_all(ws), selected.vmi_names))
        for entry in current["migrations"]:
            before = seen.get((entry["namespace"], entry["name"]))
            if entry["final"] and before is not None and not before["final"]:
                line = "{0} {1} (VMI {2}, {3} -> {4})".format(_label(entry), entry["phase"], entry["vmi"], entry["source"] or "?",
                                                              entry["target"] or "?")
                progress.finished(line)
            seen[(entry["namespace"], entry["name"])] = entry
        return not current["unfinished"] or progress.call_over()

    watchset.start()
    try:
        watchset.wait(done, wake_every=1.0 if progress.every > 0 else None)
    finally:
        watchset.stop()
    current = summarize(_all(watchset), selected.vmi_names)
    listed = {(m["namespace"], m["name"]) for m in current["migrations"]}
    result: Dict[str, Any] = {
        "changed": False, "migrations": current["migrations"], "unfinished": len(current["unfinished"]),
        "failed_migrations": current["failed"],
        "waited_seconds": round(progress.elapsed(), 3), "timeout": options.timeout,
        "deleted_while_waiting": sorted(_label(e) for key, e in seen.items() if key not in listed),
        "watch": dict(watchset.stats, errors=watchset.errors[-5:]),
    }
    if current["unfinished"] and progress.every > 0 and not progress.out_of_time(options.timeout):
        line = "{0:.0f} of {1} s; {2} migration(s) unfinished: {3}".format(
            progress.elapsed(), options.timeout, len(current["unfinished"]), named([_label(e) for e in current["unfinished"]]))
        return dict(result, progress=progress.unfinished(line, {"seen": list(seen.values())}))
    if progress.every > 0:
        result["progress"] = progress.done()
    if current["unfinished"]:
        raise MigrationsUnfinished(
            "{0} of {1} migrations still unfinished after {2}s: {3}".format(len(current["unfinished"]), len(current["migrations"]),
                                                                            options.timeout, describe(current["unfinished"])),
            "Wait longer (raise timeout), or look at them with `kubectl get vmim -A`; a migration that hangs can be aborted by "
            "deleting its VirtualMachineInstanceMigration.",
            path="timeout", result=result)
    if options.fail_on_failed and current["failed"]:
        raise MigrationsFailed(
            "{0} migrations ended Failed: {1}".format(len(current["failed"]), describe(current["failed"], with_reason=True)),
            "Read the failure reasons and the VMIs' events; set fail_on_failed=false to accept a Failed migration as final.",
            path="fail_on_failed", result=result)
    return result
