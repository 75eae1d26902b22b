# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`descheduler_restart`: make a Descheduler Deployment's process read the policy it has now.

The descheduler reads its policy file once, at process start (`checks.descheduler_restart`), so after a change of the
policy ConfigMap a Deployment keeps running the old policy. This service deletes the Deployment's Pods that were not
created after the ConfigMap's last write (each with its own grace period, by UID precondition), so that the ReplicaSet
starts new ones that mount the new data, and waits by list + watch (k8s.watch) until those Pods are gone and a new one
is Ready. The Deployment itself is not written: a `rollout restart` edits its template, which ACP records as a
ResourcePatch on the chart-managed object. A CronJob (every run is a new process) and a Deployment scaled to 0 (no
process; a scale-up starts Pods that read the policy as it is then) need nothing: the result says so, unchanged.
Check mode sends the deletes as server-side dry runs and waits for nothing. With `progress_every` the wait is cut into
calls (module_utils/progress), the Pods to replace carried from the first call.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import descheduler_restart as rs
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import DeschedulerInstallation, check_location
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, RunFailed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import format_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import selector_to_string
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import PROGRESS_SPEC, Progress, check_every

ARG_SPEC = {
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "timeout": {"type": "int", "default": 300},
    **PROGRESS_SPEC,
}

SKIPPED = {
    rs.CRONJOB: "{where}: every run of a CronJob is a new process that reads the policy; nothing to restart",
    rs.SCALED_TO_ZERO: "{where} is scaled to 0 (suspended): no process runs; the Pods of its scale-up read the policy then",
}


@dataclasses.dataclass(frozen=True)
class DeschedulerRestartOptions(ModuleOptions):
    """The options of descheduler_restart, as ARG_SPEC parses them."""
    descheduler_namespace: str
    descheduler_name: str
    timeout: int
    progress_every: int
    resume: Optional[dict]


def check_options(options: DeschedulerRestartOptions) -> None:
    """What the spec cannot say, checked before any request."""
    check_location(options.descheduler_namespace, options.descheduler_name)
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long the old Pods may take to go and a new one to be Ready, e.g. 300.",
                            path="timeout")
    check_every(options.progress_every)


class Restart:
    """One restart against the cluster; `execute()` returns the module result or raises a RebalanceError."""

    def __init__(self, options: DeschedulerRestartOptions, client: Client, check_mode: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.client = client
        self.check_mode = check_mode
        self.clock = clock
        self.namespace = options.descheduler_namespace
        self.installation = DeschedulerInstallation(client, options.descheduler_namespace, options.descheduler_name)
        self.progress = Progress(options.progress_every, None if check_mode else options.resume, clock=clock)
        self.progress.require_state("old", "deleted", "kept", "configmap", "written_at")

    def _where(self, kind: Optional[str], workload: dict) -> str:
        return "{0} {1}/{2}".format(kind, self.namespace, meta(workload).get("name"))

    def execute(self) -> dict:
        kind, workload = self.installation.workload()
        reason = rs.skip_reason(kind, workload)
        if reason == rs.NO_WORKLOAD:
            raise RunFailed("no CronJob or Deployment labelled {0}={1} or named {2} in namespace {3}".format(
                desched.APP_LABEL, desched.APP_NAME, self.options.descheduler_name, self.namespace),
                "Install the Descheduler plugin, or set descheduler_namespace and descheduler_name to where it runs.", path="descheduler_name")
        result: Dict[str, Any] = {"changed": False, "skipped": reason is not None, "skip_reason": reason,
                                  "descheduler": {"namespace": self.namespace, "name": meta(workload).get("name"), "kind": kind},
                                  "deleted_pods": [], "kept_pods": [], "new_pods": [], "ready_pod": None}
        if reason is not None:
            return dict(result, summary=SKIPPED[reason].format(where=self._where(kind, workload)))
        result["replicas"] = rs.replicas(workload)
        state = self.progress.state
        if self.progress.resumed:  # the first call chose and deleted the Pods
            old, deleted, kept = state["old"], state["deleted"], state["kept"]
            result.update(policy_configmap=state["configmap"], policy_written_at=state["written_at"])
        else:
            configmap_name, _key = self.installation.policy_source(kind, workload)
            configmap = self.client.get(self.client.require_kind("ConfigMap", ""), configmap_name, self.namespace)
            changed_at = rs.written_at(configmap)
            result.update(policy_configmap=configmap_name, policy_written_at=format_time(changed_at) if changed_at else None)
            pods = self.installation.pods(kind, workload)
            to_delete, going = rs.stale_pods(pods, changed_at)
            old = [meta(p).get("uid") for p in to_delete + going]
            kept = [meta(p).get("name") for p in pods if meta(p).get("uid") not in old]
            deleted = [meta(p).get("name") for p in to_delete]
            if self.check_mode:  # the deletes as server-side dry runs: RBAC and admission answer, nothing is deleted
                for pod in to_delete:
                    self._delete(pod, dry_run=True)
                return dict(result, changed=bool(deleted), deleted_pods=deleted, kept_pods=kept, dry_run=True,
                            summary=self._summary(kind, workload, deleted, kept, check=True))
            for pod in to_delete:
                self._delete(pod)
        result.update(changed=bool(deleted), deleted_pods=deleted, kept_pods=kept)
        carried = {"old": old, "deleted": deleted, "kept": kept, "configmap": result["policy_configmap"],
                   "written_at": result["policy_written_at"]}
        return self._wait(kind, workload, old, result, carried)

    def _delete(self, pod: dict, dry_run: bool = False) -> None:
        """DELETE the Pod with its own grace period, only the one listed (UID precondition); gone already is fine."""
        self.client.delete(self.installation.resource("Pod"), meta(pod).get("name"), namespace=self.namespace,
                           preconditions={"uid": meta(pod).get("uid")}, dry_run=dry_run)

    def _summary(self, kind: Optional[str], workload: dict, deleted: List[str], kept: List[str], check: bool = False,
                 ready: Optional[str] = None) -> str:
        where = self._where(kind, workload)
        if not deleted:
            return "{0}: Pod(s) {1} started after the policy was written; nothing to restart".format(where, ", ".join(kept) or "-")
        if check:
            return "check mode: would delete Pod(s) {0} of {1} so that new ones read the policy".format(", ".join(deleted), where)
        return "{0}: Pod(s) {1} deleted; Pod {2} reads the policy now".format(where, ", ".join(deleted), ready)

    def _wait(self, kind: Optional[str], workload: dict, old: List[str], result: dict, carried: dict) -> dict:
        """Watch the Deployment's Pods until the old ones are gone and a new one is Ready."""
        progress = self.progress
        selector = selector_to_string((workload.get("spec") or {}).get("selector")) or None
        watchset = WatchSet(self.client, [Stream("pods", self.installation.resource("Pod"), self.namespace, label_selector=selector)],
                            progress.call_deadline(self.options.timeout), clock=self.clock)
        found: Dict[str, rs.RestartProgress] = {}

        def decided(ws: WatchSet) -> bool:
            found["now"] = rs.restart_progress(ws.objects("pods"), old)
            return found["now"].done or progress.call_over()

        watchset.start()
        try:
            watchset.wait(decided)
        finally:
            watchset.stop()
        now = found["now"]
        result.update(new_pods=now.new, ready_pod=now.ready[0] if now.ready else None,
                      watch=dict(watchset.stats, errors=watchset.errors[-20:]))
        if now.done:
            progress.finished("{0}: Pod {1} Ready, the old Pods gone, after {2:.0f} s".format(self.namespace, now.ready[0], progress.elapsed()))
            return dict(result, waited_seconds=round(progress.elapsed(), 3), progress=progress.done(),
                        summary=self._summary(kind, workload, result["deleted_pods"], result["kept_pods"], ready=now.ready[0]))
        line = "{0}: {1:.0f} of {2} s; awaiting {3}".format(self.namespace, progress.elapsed(), self.options.timeout, rs.awaiting(now))
        if progress.every > 0 and not progress.out_of_time(self.options.timeout):
            return dict(result, progress=progress.unfinished(line, carried))
        raise RunFailed("{0}: after {1}s still awaiting {2}".format(self._where(kind, workload), self.options.timeout, rs.awaiting(now)),
                        "Check the ReplicaSet and the Pods (kubectl -n {0} get pods -l {1}; kubectl -n {0} describe replicaset), "
                        "or raise timeout.".format(self.namespace, selector or "<selector>"), path="timeout",
                        result=dict(result, waited_seconds=round(progress.elapsed(), 3)))


def run(options: DeschedulerRestartOptions, check_mode: bool, client: Optional[Client] = None,
        clock: Callable[[], float] = time.monotonic) -> dict:
    """The module's entry: the options checked before any request, then the restart (the client's deadline covers the
    wait's timeout on top of api_timeout)."""
    check_options(options)
    client = client or Client.from_options(options.connection, extra_timeout=options.timeout)
    return Restart(options, client, check_mode=check_mode, clock=clock).execute()
