# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure decisions of `descheduler_restart`: which Descheduler Pods still run a policy older than the ConfigMap, and
when their replacements are in place.

The descheduler reads its policy file once, when its process starts (sigs.k8s.io/descheduler
cmd/descheduler/app/server.go -> pkg/descheduler/descheduler.go `Run`: the policy is loaded before the loop, and
every cycle of `--descheduling-interval` runs with that one policy). A Deployment's Pod that started before the
ConfigMap was written therefore still runs the old policy; a Pod created after it mounted the new data.

When the ConfigMap was written is the newest `time` of its `managedFields` (set by the API server on every write that
changed a field, so on the same clock as the Pods' `creationTimestamp`; both are whole seconds). A Pod created in the
same second as that write may have read either, so it counts as stale: the rule errs towards one restart too many,
never towards a Pod that runs the old policy. Without managedFields (an API server that keeps none) every Pod is stale.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import parse_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import meta

CRONJOB = "cronjob"          # every run is a new Pod that reads the policy: nothing to restart
SCALED_TO_ZERO = "scaled_to_zero"  # no Pod runs; the Pods of a scale-up read the policy as it is then
NO_WORKLOAD = "no_workload"


def skip_reason(kind: Optional[str], workload: Optional[dict]) -> Optional[str]:
    """Why no Pod needs replacing for this installation (`CRONJOB`, `SCALED_TO_ZERO`), None for a running Deployment."""
    if workload is None:
        return NO_WORKLOAD
    if kind == "CronJob":
        return CRONJOB
    if replicas(workload) == 0:
        return SCALED_TO_ZERO
    return None


def replicas(deployment: dict) -> int:
    """`spec.replicas` of a Deployment (1 when unset, as the API server defaults it)."""
    value = (deployment.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def written_at(configmap: Optional[dict]) -> Optional[datetime.datetime]:
    """When the ConfigMap was last written: the newest `managedFields[].time`; None without one."""
    times = [parse_time(entry.get("time")) for entry in meta(configmap or {}).get("managedFields") or [] if isinstance(entry, dict)]
    times = [t for t in times if t is not None]
    return max(times) if times else None


def terminating(pod: dict) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def started_after(pod: dict, changed_at: Optional[datetime.datetime]) -> bool:
    """The Pod was created after `changed_at` (a later second): its process read the policy written then."""
    created = parse_time(meta(pod).get("creationTimestamp"))
    return changed_at is not None and created is not None and created > changed_at


def finished(pod: dict) -> bool:
    """Succeeded or Failed (an evicted Pod, say): no process runs in it."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def stale_pods(pods: List[dict], changed_at: Optional[datetime.datetime]) -> Tuple[List[dict], List[dict]]:
    """(to delete, terminating already): the Pods not created after `changed_at` whose process may run; a Pod being
    deleted is not deleted again but waited for, as the others are; a finished Pod runs nothing and is left alone."""
    old = [p for p in pods if not started_after(p, changed_at) and not finished(p)]
    return [p for p in old if not terminating(p)], [p for p in old if terminating(p)]


def pod_ready(pod: dict) -> bool:
    """Running, not being deleted, and its `Ready` condition True (the kubelet's readiness, probes included)."""
    status = pod.get("status") or {}
    if terminating(pod) or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


@dataclasses.dataclass(frozen=True)
class RestartProgress:
    """Where a restart stands: the old Pods still present, the new ones and which of them are Ready."""
    old_left: List[str]
    new: List[str]
    ready: List[str]

    @property
    def done(self) -> bool:
        """Every old Pod gone and at least one new Pod Ready (the descheduler runs one process at a time: leader
        election when there are several replicas)."""
        return not self.old_left and bool(self.ready)


def restart_progress(pods: List[dict], old_uids: List[str]) -> RestartProgress:
    """The state of a restart from the Deployment's Pods now and the UIDs of the Pods it replaces."""
    old = set(old_uids)
    mine = sorted(pods, key=lambda p: (meta(p).get("creationTimestamp") or "", meta(p).get("name") or ""))
    old_left = [meta(p).get("name") for p in mine if meta(p).get("uid") in old]
    new = [p for p in mine if meta(p).get("uid") not in old]
    return RestartProgress(old_left=old_left, new=[meta(p).get("name") for p in new], ready=[meta(p).get("name") for p in new if pod_ready(p)])


def awaiting(progress: RestartProgress) -> str:
    """What the restart still waits for, in words."""
    parts = []
    if progress.old_left:
        parts.append("Pod(s) {0} to be gone".format(", ".join(progress.old_left)))
    if not progress.ready:
        parts.append("a new Pod to be Ready ({0})".format(", ".join(progress.new) + " not Ready" if progress.new else "none created yet"))
    return " and ".join(parts) or "nothing"
