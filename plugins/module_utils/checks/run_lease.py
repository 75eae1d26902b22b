# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure decisions of the collection's run lease: one run at a time per cluster, and a record of its progress.

The lease is a `coordination.k8s.io/v1` Lease, used as client-go's leader election uses one: `spec.holderIdentity`
names the run that holds it, `spec.renewTime + spec.leaseDurationSeconds` is when it expires unless renewed, a release
clears the holder (as client-go's ReleaseOnCancel does) and `spec.leaseTransitions` counts the changes of holder. Beside
the spec, the annotation `kubevirt-ops.io/run` (JSON) is the run's record: playbook, run id, who started it and when,
the step it is at, the backup it made, and its status; it stays on the Lease after the release, so that the next run
knows how the last one ended.

A run may take the lease when nobody holds it, when it holds it already (a renewal: same run id), when the holder's
lease expired, or when the holder ran on this same controller host and its ansible-playbook process has ended (a
killed run; its pid and the process's start time tell it from a new process with the same pid). Everything else is
refused with the holder named.

While a step works (a drain, a validation cycle, a wait, a maintenance hook), the run renews the lease as client-go's
leader election does: every `renew_interval` (a third of the duration), and it gives the lease up for lost when it
could not renew for `renew_deadline` (two thirds of the duration: client-go's RenewDeadline of 10 s for a
LeaseDuration of 15 s), or at once when another run holds it (`renewal`). A renewal never takes a lease: only the step
that starts a run does.

A record whose status is still `in_progress` when its run no longer holds the lease is an unfinished run: it died
between two steps. A run that changes the policy refuses to start over it (`unfinished: refuse`) until a rollback (or
a resumption, for the maintenance playbooks that continue where they stopped) takes it over (`unfinished: take`).
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Callable, Dict, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import format_time, parse_time

RECORD = "kubevirt-ops.io/run"
IN_PROGRESS = "in_progress"
FINAL_STATUSES = ("complete", "failed", "rolled_back")
# The steps after which a dead run may have changed the cluster: anything past them needs a rollback or a resumption.
READ_ONLY_STEPS = ("start", "preflight")
# The shortest lease the module takes: client-go's default LeaseDuration (15 s), short enough for tests.
MIN_DURATION = 15
# How often a run that works renews, and how long it may fail to before it stops, as fractions of the duration
# (client-go's leader election, k8s.io/client-go/tools/leaderelection/leaderelection.go, with the defaults of
# k8s.io/component-base's LeaderElectionConfiguration: LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s).
RENEW_EVERY = 1.0 / 3
RENEW_DEADLINE = 2.0 / 3
# How often a keepalive looks at the Lease and at the run's process (client-go's RetryPeriod).
KEEPALIVE_POLL_SECONDS = 2.0


def micro_time(when: datetime.datetime) -> str:
    """A Lease's MicroTime (RFC 3339 with microseconds, UTC), as client-go writes acquireTime and renewTime."""
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def holder_text(holder: dict) -> str:
    """The holder as a person reads it: the AWX job where there is one, else user@host and the process."""
    where = "{0}@{1}".format(holder.get("user") or "?", holder.get("host") or "?")
    if holder.get("awx_job_id"):
        return "AWX job {0}{1} ({2}, pid {3})".format(holder["awx_job_id"], " on " + holder["awx_host"] if holder.get("awx_host") else "",
                                                      where, holder.get("pid"))
    return "{0} pid {1}".format(where, holder.get("pid"))


def holder_identity(holder: dict, run_id: str) -> str:
    """`spec.holderIdentity`: unique per run (the run id) and per process, readable in `kubectl get lease`."""
    prefix = "awx-job-{0}".format(holder["awx_job_id"]) if holder.get("awx_job_id") else "{0}@{1}".format(holder.get("user") or "?",
                                                                                                          holder.get("host") or "?")
    return "{0}/pid-{1}/{2}".format(prefix, holder.get("pid"), run_id)


def read_record(lease: Optional[dict]) -> Optional[dict]:
    """The run record on the Lease, or None (none, or not JSON: a record we cannot read is treated as absent)."""
    return kv.json_annotation(lease, RECORD)


def expires_at(lease: dict) -> Optional[datetime.datetime]:
    """renewTime (or acquireTime) + leaseDurationSeconds; None when the Lease does not say."""
    spec = lease.get("spec") or {}
    renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int):
        return None
    return renewed + datetime.timedelta(seconds=duration)


def decide(lease: Optional[dict], run_id: str, me: dict, now: datetime.datetime,
           process_alive: Callable[[int, Optional[str]], bool]) -> dict:
    """Whether this run may take the lease: `action` create | acquire | renew | take_over | refuse, with `why` for a
    take-over or a refusal and the lease's current `holder` record (None when free)."""
    if lease is None:
        return {"action": "create", "why": "", "holder": None}
    spec = lease.get("spec") or {}
    record = read_record(lease) or {}
    if not spec.get("holderIdentity"):
        return {"action": "acquire", "why": "", "holder": None}
    holder = record.get("holder") or {}
    if record.get("run_id") == run_id and holder.get("host") == me.get("host") and holder.get("pid") == me.get("pid"):
        return {"action": "renew", "why": "", "holder": holder}
    expiry = expires_at(lease)
    if expiry is None or now >= expiry:
        why = "its lease expired at {0}".format(format_time(expiry)) if expiry else "its lease has no renewTime"
        return {"action": "take_over", "why": why, "holder": holder}
    pid = holder.get("pid")
    if holder.get("host") == me.get("host") and isinstance(pid, int) and not process_alive(pid, holder.get("process_started")):
        return {"action": "take_over", "why": "its process (pid {0} on {1}) has ended".format(pid, holder["host"]), "holder": holder}
    return {"action": "refuse", "why": "held until {0}".format(format_time(expiry)), "holder": holder}


def unfinished_run(record: Optional[dict], holder_gone: bool) -> Optional[dict]:
    """The run a new holder has to undo or continue: the last run when it stopped without ending (still in progress,
    its holder gone, past the read-only steps), or the run that one had taken over unfinished (a rollback that died
    too); None otherwise."""
    if not record or not holder_gone or record.get("status") != IN_PROGRESS:
        return None
    if record.get("unfinished_run"):
        return record["unfinished_run"]
    return None if record.get("step") in READ_ONLY_STEPS else {key: value for key, value in record.items() if key != "unfinished_run"}


def may_take_unfinished(policy: str, unfinished: dict, playbook: Optional[str]) -> bool:
    """`take` takes any unfinished run over (a rollback undoes it); `resume` only one of the same playbook (a rerun of a
    maintenance continues it, but never starts over a half-finished rebalance); `refuse` none."""
    return policy == "take" or (policy == "resume" and unfinished.get("playbook") == playbook)


def refusal_message(record: dict, decision: dict, now: datetime.datetime) -> str:
    """A second run's message: who holds the lease, since when (and at which step), until when."""
    return ("cluster is busy: {0} run {1} by {2} holds it since {3} (step {4}), {5}; now {6}".format(
        record.get("playbook") or "a", record.get("run_id") or "?", holder_text(record.get("holder") or {}),
        record.get("started") or "?", record.get("step") or "?", decision["why"], format_time(now)))


def unfinished_message(record: dict) -> str:
    """What a run refused over an unfinished one says: which run, where it stopped, what it saved."""
    backup = record.get("backup") or {}
    saved = ", ".join("{0} {1}".format(key, value) for key, value in sorted(backup.items()) if value) or "no backup recorded"
    return ("the last {0} run {1} by {2} stopped at step {3} without finishing ({4})".format(
        record.get("playbook") or "", record.get("run_id") or "?", holder_text(record.get("holder") or {}), record.get("step") or "?", saved))


def lease_body(name: str, namespace: str, identity: str, duration: int, now: datetime.datetime, record: dict,
               current: Optional[dict], new_holder: bool) -> dict:
    """The Lease to write: held by `identity` from now for `duration` seconds, with `record`; the current Lease's
    resourceVersion (an update conflicts if someone else wrote in between) and transitions (+1 on a new holder)."""
    spec = dict((current or {}).get("spec") or {})
    transitions = int(spec.get("leaseTransitions") or 0)
    if current is not None and new_holder:
        transitions += 1
    spec.update(holderIdentity=identity, leaseDurationSeconds=duration, renewTime=micro_time(now), leaseTransitions=transitions)
    if new_holder or not spec.get("acquireTime"):
        spec["acquireTime"] = micro_time(now)
    metadata: Dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": {"app.kubernetes.io/managed-by": "kubevirt_ops.rebalance"},
                                "annotations": {RECORD: json.dumps(record, sort_keys=True)}}
    if current is not None:
        metadata["resourceVersion"] = kv.meta(current).get("resourceVersion")
        metadata["labels"] = dict(kv.meta(current).get("labels") or {}, **metadata["labels"])
        metadata["annotations"] = dict(kv.annotations(current), **metadata["annotations"])
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def released_body(current: dict, record: dict, now: datetime.datetime) -> dict:
    """The Lease after a release: no holder, the record with its final status (client-go's release leaves the Lease
    in place with an empty holderIdentity)."""
    body = json.loads(json.dumps(current))
    spec = body.setdefault("spec", {})
    spec.pop("holderIdentity", None)
    spec["renewTime"] = micro_time(now)
    spec["leaseDurationSeconds"] = 1
    body.setdefault("metadata", {}).setdefault("annotations", {})[RECORD] = json.dumps(record, sort_keys=True)
    body["metadata"].pop("managedFields", None)
    return body


# ------------------------------------------------------------------------------------------ renewal while a step works
def renew_interval(duration: int) -> float:
    """Seconds between two renewals of a lease of `duration` seconds."""
    return max(1.0, duration * RENEW_EVERY)


def renew_deadline(duration: int) -> float:
    """Seconds after the last good renewal at which the run gives its lease up for lost (before it expires)."""
    return duration * RENEW_DEADLINE


def renew_due(last_renewed: Optional[float], now: float, duration: int) -> bool:
    """Whether to renew now: never renewed in this step (None), or the last renewal is `renew_interval` old."""
    return last_renewed is None or now - last_renewed >= renew_interval(duration)


def renew_deadline_past(last_renewed: float, now: float, duration: int) -> bool:
    """Whether the renewals failed for so long that the lease may expire before the next try: the run must stop."""
    return now - last_renewed >= renew_deadline(duration)


def call_every(progress_every: Optional[int], duration: int) -> int:
    """The `progress_every` a progress module gets while a lease of `duration` is held: the module returns at least
    every renew interval, so that the action plugin can renew between its calls (0, one call, would never return)."""
    interval = int(renew_interval(duration))
    return interval if not progress_every or progress_every <= 0 else min(progress_every, interval)


def renewal(lease: Optional[dict], run_id: str, me: Optional[dict] = None) -> dict:
    """Whether the run `run_id` still holds the lease it renews: `action` renew, or lost with `why` and the `holder`
    record (the run that holds it now, when one does). A lease that expired unrenewed but that nobody took is still
    this run's: nobody else wrote in between. With `me` (the renewing process), a holder on the same host must be the
    same ansible-playbook process: a leftover of a killed run renews nothing."""
    record = read_record(lease) or {}
    spec = (lease or {}).get("spec") or {}
    if lease is None:
        return {"action": "lost", "why": "the Lease was deleted", "holder": None, "record": None}
    if record.get("run_id") != run_id:
        took = record.get("took_over") or {}
        why = "taken over ({0})".format(took["why"]) if took.get("run_id") == run_id and took.get("why") else "held by another run"
        return {"action": "lost", "why": why, "holder": record, "record": record}
    if not spec.get("holderIdentity"):
        return {"action": "lost", "why": "released ({0})".format(record.get("status") or "no holder"), "holder": None, "record": record}
    holder = record.get("holder") or {}
    if me and holder.get("host") == me.get("host") and holder.get("pid") != me.get("pid"):
        return {"action": "lost", "why": "held by its ansible-playbook process pid {0}, not by pid {1}".format(holder.get("pid"), me.get("pid")),
                "holder": None, "record": record}
    return {"action": "renew", "why": "", "holder": record, "record": record}


def lost_message(run_id: str, decision: dict) -> str:
    """What a run says when its lease is no longer its own: why, and who holds it now, since when, at which step."""
    text = "no longer held by run {0}: {1}".format(run_id, decision["why"])
    holder = decision.get("holder")
    if holder and holder.get("run_id") != run_id:
        text += "; {0} run {1} by {2} holds it since {3} (step {4})".format(
            holder.get("playbook") or "a", holder.get("run_id") or "?", holder_text(holder.get("holder") or {}),
            holder.get("started") or "?", holder.get("step") or "?")
    return text


def keepalive_action(lease: Optional[dict], run_id: str, step: str) -> dict:
    """What a keepalive does at one look at the Lease: `renew` (still this run's, still at `step`), `stop` (the run
    moved on to another step or released the lease: the step the keepalive covered is over) or `lost`."""
    decision = renewal(lease, run_id)
    record = decision.get("record") or {}
    if decision["action"] == "lost" and record.get("run_id") == run_id and record.get("status") != IN_PROGRESS:
        return dict(decision, action="stop", why="the run released the lease ({0})".format(record.get("status")))
    if decision["action"] == "renew" and record.get("step") != step:
        return dict(decision, action="stop", why="the run moved on to step {0}".format(record.get("step")))
    return decision
