# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`descheduler_storm_breaker`: pause the Descheduler when migrations fail, or one VM migrates too often.

`state: present` lists the VirtualMachineInstanceMigrations in scope once and the installation's workload
(`cluster.descheduler.DeschedulerInstallation`: a CronJob, or a Deployment), counts with `checks.storm_breaker`, and
when the limits are passed pauses the workload with one merge patch that also records what it was; then it waits for
the migrations in flight to be final (list + watch, `k8s.watch.WatchSet`), so that nothing moves once the module
returns. A workload already paused with the breaker's record is no change; one paused by someone else is left as it is.
`state: reset` restores the record (on ACP after deleting the ResourcePatches that only hold the pause), removes it and
notes the reset, from which the window then starts. Check mode sends the writes as server-side dry runs and waits for
nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import cooldown as cd
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import format_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import storm_breaker as sb
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import DeschedulerInstallation
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, KindNotServed, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import check_location
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label

ARG_SPEC = {
    "state": {"type": "str", "choices": ["present", "reset"], "default": "present"},
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "namespaces": {"type": "list", "elements": "str", "aliases": ["namespace"]},
    "window": {"type": "raw", "default": "1h"},
    "max_failed_migrations": {"type": "int", "default": 3},
    "max_migrations_per_vm": {"type": "int", "default": 3},
    "wait": {"type": "bool", "default": True},
    "wait_timeout": {"type": "int", "default": 600},
}


class MigrationsStillRunning(RebalanceError):
    """The breaker paused the Descheduler, and migrations were still in flight at the wait's timeout."""


# ------------------------------------------------------------------------------------------ options
@dataclasses.dataclass(frozen=True)
class DeschedulerStormBreakerOptions(ModuleOptions):
    """The options of descheduler_storm_breaker, as ARG_SPEC parses them."""
    state: str
    descheduler_namespace: str
    descheduler_name: str
    namespaces: Optional[List[str]]
    window: Any
    max_failed_migrations: int
    max_migrations_per_vm: int
    wait: bool
    wait_timeout: int


@dataclasses.dataclass(frozen=True)
class Settings:
    state: str
    descheduler_namespace: str
    descheduler_name: str
    namespaces: List[str]
    window: int
    max_failed: int
    max_per_vm: int
    wait: bool
    wait_timeout: int


def settings(options: DeschedulerStormBreakerOptions) -> Settings:
    """The options checked before any request; InvalidOption names the option."""
    check_location(options.descheduler_namespace, options.descheduler_name)
    namespaces = sorted({n.strip() for n in options.namespaces or [] if n and n.strip()})
    for namespace in namespaces:
        if not is_dns_label(namespace):
            raise InvalidOption("{0!r} is not a valid namespace name".format(namespace), "Give the namespaces of the VMs, or none for all.",
                                path="namespaces")
    try:
        window = cd.parse_duration(options.window)
    except ValueError as error:
        raise InvalidOption(str(error), "Give seconds or a duration such as 1h (units d, h, m, s).", path="window") from error
    if window <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give the window the migrations are counted in, e.g. 1h.", path="window")
    for name, value in (("max_failed_migrations", options.max_failed_migrations), ("max_migrations_per_vm", options.max_migrations_per_vm),
                        ("wait_timeout", options.wait_timeout)):
        if value < 1:
            raise InvalidOption("must be 1 or more, got {0}".format(value), "Give a positive number, e.g. 3 (wait_timeout: seconds, e.g. 600).",
                                path=name)
    return Settings(state=options.state, descheduler_namespace=options.descheduler_namespace, descheduler_name=options.descheduler_name,
                    namespaces=namespaces, window=window, max_failed=options.max_failed_migrations, max_per_vm=options.max_migrations_per_vm,
                    wait=options.wait, wait_timeout=options.wait_timeout)


# ------------------------------------------------------------------------------------------ the breaker
class Breaker:
    """One run against the cluster; `present()` and `reset()` return the module result or raise a RebalanceError."""

    def __init__(self, scope: Settings, client: Client, check_mode: bool, now: Callable[[], datetime.datetime],
                 clock: Callable[[], float], watch: Optional[Callable[..., Any]]) -> None:
        self.scope = scope
        self.client = client
        self.check_mode = check_mode
        self.now = now
        self.clock = clock
        self.watch = watch
        self.installation = DeschedulerInstallation(client, scope.descheduler_namespace, scope.descheduler_name)
        kind, workload = self.installation.workload()
        if workload is None:
            raise RebalanceError("no CronJob or Deployment labelled {0}={1} or named {2} in namespace {3}".format(
                desched.APP_LABEL, desched.APP_NAME, scope.descheduler_name, scope.descheduler_namespace),
                "Install the Descheduler plugin, or set descheduler_namespace and descheduler_name to where it runs.", path="descheduler_name")
        self.kind: str = kind or ""
        self.workload: dict = workload
        self.record = sb.read_record(workload)

    def where(self) -> str:
        return "{0} {1}/{2}".format(self.kind, self.scope.descheduler_namespace, kv.meta(self.workload).get("name"))

    def descheduler(self) -> dict:
        paused = sb.paused(self.kind, self.workload)
        return {"kind": self.kind, "namespace": self.scope.descheduler_namespace, "name": kv.meta(self.workload).get("name"),
                "paused": paused, "paused_by_breaker": paused and self.record is not None}

    def patch(self, body: dict, request: str) -> dict:
        return self.client.patch(self.installation.resource(self.kind), kv.meta(self.workload).get("name"), body,
                                 namespace=self.scope.descheduler_namespace, dry_run=self.check_mode, request=request)

    def diff(self, after: dict) -> dict:
        return {"before": sb.workload_state(self.kind, self.workload), "after": sb.workload_state(self.kind, after),
                "before_header": "{0} (before)".format(self.where()), "after_header": "{0} (after)".format(self.where())}

    # ---------------------------------------------------------------------------------- present
    def migrations(self) -> List[dict]:
        resource = self.client.require_kind("VirtualMachineInstanceMigration", "kubevirt.io",
                                            fix="Install KubeVirt on this cluster, or point the connection at the cluster that runs the VMs.")
        items: List[dict] = []
        for namespace in self.scope.namespaces or [None]:
            items.extend(self.client.list(resource, namespace=namespace))
        return items

    def present(self) -> dict:
        vmims = self.migrations()
        now, clock = cd.reference_now(self.now(), vmims + [self.workload])
        since = sb.window_start(now, self.scope.window, self.workload)
        verdict = sb.evaluate(sb.counts(vmims, since), self.scope.max_failed, self.scope.max_per_vm, self.scope.window)
        was_tripped = self.record is not None and sb.paused(self.kind, self.workload)
        result: Dict[str, Any] = {
            "changed": False, "state": "present", "tripped": was_tripped, "tripped_now": False, "dry_run": self.check_mode,
            "reasons": verdict["reasons"], "failed_migrations": verdict["failed_migrations"], "frequent_movers": verdict["frequent_movers"],
            "record": self.record, "descheduler": self.descheduler(), "clock": clock,
            "window": {"seconds": self.scope.window, "since": format_time(since)},
            "limits": {"max_failed_migrations": self.scope.max_failed, "max_migrations_per_vm": self.scope.max_per_vm},
            "in_flight": [cd.migration_entry(m) for m in vmims if cd.in_flight(m)], "unfinished": [], "waited_seconds": 0.0,
        }
        after = "is paused; reset with state=reset (or roll back) once the cause is fixed"
        if verdict["trips"] and not was_tripped:
            result.update(tripped=True, tripped_now=True)
            if sb.paused(self.kind, self.workload):
                after = "is already paused (not by the breaker): left as it is"
            else:
                answer = self.patch(sb.trip_patch(self.kind, self.workload, format_time(now), "; ".join(verdict["reasons"])),
                                    "pause " + self.where())
                result.update(changed=True, diff=self.diff(answer), record=sb.read_record(answer),
                              descheduler=dict(self.descheduler(), paused=True, paused_by_breaker=True))
                if self.check_mode:
                    after = "would be paused (check mode)"
        if not result["tripped"]:
            result["message"] = ("Storm breaker not tripped: {0} failed migrations (trips at {1}), at most {2} migrations of one VM "
                                 "(trips above {3}) within {4}.".format(len(verdict["failed_migrations"]), self.scope.max_failed,
                                                                        verdict["most_migrations_of_one_vm"], self.scope.max_per_vm,
                                                                        sb.describe_seconds(self.scope.window)))
            return result
        reasons = verdict["reasons"] or [str((self.record or {}).get("reason") or "tripped earlier")]
        result["message"] = "Storm breaker tripped: {0}. {1} {2}.".format("; ".join(reasons), self.where(), after)
        if self.scope.wait and not self.check_mode and result["in_flight"]:
            self.wait_for_migrations(result)
        return result

    def wait_for_migrations(self, result: dict) -> None:
        """Watch the migrations in scope until none is in flight; at the timeout raise with the result (the pause holds)."""
        started = self.clock()
        resource = self.client.require_kind("VirtualMachineInstanceMigration", "kubevirt.io")
        streams = [Stream("vmims/" + (namespace or "*"), resource, namespace) for namespace in self.scope.namespaces or [None]]
        watchset = WatchSet(self.client, streams, started + self.scope.wait_timeout, clock=self.clock, watch=self.watch)

        def unfinished(ws: WatchSet) -> List[dict]:
            return [m for stream in ws.streams for m in ws.objects(stream.name) if cd.in_flight(m)]

        watchset.start()
        try:
            done = watchset.wait(lambda ws: not unfinished(ws))
        finally:
            watchset.stop()
        left = [cd.migration_entry(m) for m in unfinished(watchset)]
        result.update(waited_seconds=round(self.clock() - started, 3), unfinished=left, watch=dict(watchset.stats, errors=watchset.errors[-5:]))
        if not done and left:
            named = ", ".join("{0}/{1} ({2})".format(m["namespace"], m["name"], m["phase"] or "no phase") for m in left[:sb.SHOWN])
            raise MigrationsStillRunning(
                "{0} paused, but {1} migrations were still in flight after {2}s: {3}".format(self.where(), len(left), self.scope.wait_timeout, named),
                "Wait longer (raise wait_timeout), or look at them with `kubectl get vmim -A`; the Descheduler stays paused.",
                path="wait_timeout", result=result)

    # ---------------------------------------------------------------------------------- reset
    def reset(self) -> dict:
        result: Dict[str, Any] = {"changed": False, "state": "reset", "reset": False, "dry_run": self.check_mode, "record": self.record,
                                  "descheduler": self.descheduler(), "resource_patches_deleted": []}
        if self.record is None:
            result["message"] = "Storm breaker not tripped: no record on {0}, nothing to reset.".format(self.where())
            return result
        now, clock = cd.reference_now(self.now(), [self.workload])
        deleted = self.delete_pausing_patches()
        answer = self.patch(sb.reset_patch(self.kind, self.record, format_time(now)), "reset the storm breaker on " + self.where())
        restored = {key: value for key, value in sb.workload_state(self.kind, answer).items() if key != "annotations"}
        result.update(changed=True, reset=True, restored=restored, resource_patches_deleted=deleted, clock=clock, diff=self.diff(answer),
                      descheduler=dict(self.descheduler(), paused=sb.paused(self.kind, answer), paused_by_breaker=False),
                      message="Storm breaker reset: {0} {1}.".format(self.where(), ", ".join("{0}={1}".format(k, v) for k, v in restored.items())))
        return result

    def delete_pausing_patches(self) -> List[str]:
        """Delete (dry run in check mode) the ACP ResourcePatches that only hold the workload's pause; none where not served."""
        resource = self.client.find_kind("ResourcePatch")
        if resource is None:
            return []
        try:
            patches = self.client.list(resource, namespace=self.scope.descheduler_namespace)
        except KindNotServed:
            return []
        names = sb.pausing_patches(patches, self.kind, self.scope.descheduler_namespace, kv.meta(self.workload).get("name"))
        for name in names:
            self.client.delete(resource, name, self.scope.descheduler_namespace, dry_run=self.check_mode,
                               request="delete resourcepatch {0}/{1}".format(self.scope.descheduler_namespace, name))
        return names


def run(options: DeschedulerStormBreakerOptions, check_mode: bool, client: Optional[Client] = None,
        now: Optional[Callable[[], datetime.datetime]] = None, clock: Callable[[], float] = time.monotonic,
        watch: Optional[Callable[..., Any]] = None) -> dict:
    """The module's entry: the options checked, then the breaker evaluated (and tripped) or reset. The client's deadline
    covers the wait on top of api_timeout."""
    scope = settings(options)
    client = client or Client.from_options(options.connection, extra_timeout=scope.wait_timeout if scope.wait else 0)
    breaker = Breaker(scope, client, check_mode, now or (lambda: datetime.datetime.now(datetime.timezone.utc)), clock, watch)
    return breaker.reset() if scope.state == "reset" else breaker.present()
