# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`run_lease`: one run at a time per cluster, and the run's progress recorded in the cluster.

`state: present` takes the collection's Lease for this run (or renews it, moving the record to `step` and adding what
`backup` names), `state: absent` releases it with the run's final status. While a step works, `state: renewed` renews
the lease this run holds and never takes one (the progress action plugins call it between their module calls), and
`state: keepalive` renews it on a timer while the step lasts (a task run with `async` around a maintenance hook): it
ends by itself when the run moves on to another step, releases the lease, or when the ansible-playbook process that
holds it is gone, so a killed run's lease still expires. The decisions are `checks.run_lease`'s; this
file reads the Lease, writes it with its resourceVersion (a 409 from a run that wrote in between is read again and
decided once more, so of two runs started together exactly one gets the lease) and finds out who this run is: the
user, the controller host, the ansible-playbook process (its pid and start time, so that a later run on the same host
can tell that a holder was killed) and AWX's job id and host where AWX runs it.
"""

from __future__ import annotations

import dataclasses
import datetime
import getpass
import os
import socket
import time
from typing import Any, Callable, Dict, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_lease as rl
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client, ConnectionOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import format_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label

ARG_SPEC = {
    "state": {"type": "str", "choices": ["present", "absent", "renewed", "keepalive"], "default": "present"},
    "lease_namespace": {"type": "str", "default": "kube-system"},
    "lease_name": {"type": "str", "default": "kubevirt-ops-run"},
    "run_id": {"type": "str", "required": True},
    "playbook": {"type": "str"},
    "step": {"type": "str"},
    "backup": {"type": "dict"},
    "duration": {"type": "int", "default": 1800},
    "unfinished": {"type": "str", "choices": ["refuse", "resume", "take"], "default": "refuse"},
    "outcome": {"type": "str", "choices": list(rl.FINAL_STATUSES), "default": "complete"},
    "launched_by": {"type": "str"},
}
REQUIRED_IF = [("state", "present", ["playbook"]), ("state", "keepalive", ["step"])]
# A new run's first step when `step` is not given.
FIRST_STEP = "start"


class LeaseHeld(RebalanceError):
    """Another run holds the cluster's lease."""


class UnfinishedRun(RebalanceError):
    """The last run stopped without finishing: this one must not start over it."""


class LeaseLost(RebalanceError):
    """The lease this run renews is no longer its own (another run holds it, it was released or deleted), or the
    renewals failed past the renew deadline: the run must stop before its next write."""


LOST_FIX = ("This run stopped before its next write, so two runs do not change the cluster at once. Let the run that holds the "
            "lease finish (or, if it died, roll it back with playbooks/rollback.yml), look at what this run left (a node may "
            "stay cordoned), then run it again.")


@dataclasses.dataclass(frozen=True)
class RunLeaseOptions(ModuleOptions):
    """The options of run_lease, as ARG_SPEC parses them."""
    state: str
    lease_namespace: str
    lease_name: str
    run_id: str
    playbook: Optional[str]
    step: str
    backup: Optional[Dict[str, Any]]
    duration: int
    unfinished: str
    outcome: str
    launched_by: Optional[str]


def check_options(options: RunLeaseOptions) -> None:
    """Refuse options that cannot name or bound a lease, before any request."""
    if not is_dns_label(options.lease_namespace):
        raise InvalidOption("{0!r} is not a namespace name".format(options.lease_namespace), "Give an existing namespace, e.g. kube-system.",
                            path="lease_namespace")
    if not options.lease_name or len(options.lease_name) > 253 or not all(is_dns_label(p) for p in options.lease_name.split(".")):
        raise InvalidOption("{0!r} is not a valid object name".format(options.lease_name),
                            "Give a lowercase DNS name, e.g. kubevirt-ops-run.", path="lease_name")
    if not options.run_id.strip():
        raise InvalidOption("must not be empty", "Give the run's id (the playbooks use the start time).", path="run_id")
    if options.duration < rl.MIN_DURATION:
        raise InvalidOption("must be {0} seconds or more, got {1}".format(rl.MIN_DURATION, options.duration),
                            "Give how long the lease holds without a renewal (the run renews it every third of it while it works; "
                            "default 1800).", path="duration")


# ------------------------------------------------------------------------------------------ who runs
def _process_started(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None off Linux."""
    try:
        with open("/proc/{0}/stat".format(pid), encoding="utf-8") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


def _command_line(pid: int) -> str:
    try:
        with open("/proc/{0}/cmdline".format(pid), "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _parent(pid: int) -> Optional[int]:
    try:
        with open("/proc/{0}/stat".format(pid), encoding="utf-8") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def playbook_process() -> int:
    """The ansible-playbook process this module runs under: the topmost of the ancestors whose command line is
    ansible-playbook's (the task's worker is a fork of it with the same command line, and lives one task only); the
    parent when there is none (ansible-runner, a test calling the module directly)."""
    found: Optional[int] = None
    pid: Optional[int] = os.getppid()
    for _step in range(32):   # a bounded walk up the process tree
        if not pid or pid <= 1:
            break
        if "ansible-playbook" in _command_line(pid):
            found = pid
        elif found is not None:
            break
        pid = _parent(pid)
    return found or os.getppid()


def process_alive(pid: int, started: Optional[str]) -> bool:
    """The process still runs, and is the same one (not a new process with a reused pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return started is None or _process_started(pid) in (None, started)


def this_run(launched_by: Optional[str], environ: Optional[Dict[str, str]] = None) -> dict:
    """Who this run is: user, controller host, ansible-playbook process, and AWX's job id and host (AWX sets JOB_ID and
    AWX_HOST in a job's environment)."""
    env = os.environ if environ is None else environ
    pid = playbook_process()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    holder = {"user": launched_by or user, "host": socket.gethostname(), "pid": pid, "process_started": _process_started(pid)}
    if env.get("JOB_ID"):
        holder.update(awx_job_id=env["JOB_ID"], awx_host=env.get("AWX_HOST") or "")
    return holder


# ------------------------------------------------------------------------------------------ the lease
class RunLease:
    """One module run against the cluster's Lease."""

    def __init__(self, options: RunLeaseOptions, client: Client, check_mode: bool, me: dict,
                 now: Callable[[], datetime.datetime], alive: Callable[[int, Optional[str]], bool]) -> None:
        self.options = options
        self.client = client
        self.check_mode = check_mode
        self.me = me
        self.now = now
        self.alive = alive
        self.resource = client.require_kind("Lease", "coordination.k8s.io",
                                            fix="The API server serves Leases from Kubernetes 1.14 on: point the connection at the cluster.")

    def where(self) -> str:
        return "lease {0}/{1}".format(self.options.lease_namespace, self.options.lease_name)

    def read(self) -> Optional[dict]:
        return self.client.get(self.resource, self.options.lease_name, self.options.lease_namespace)

    def write(self, body: dict, exists: bool) -> dict:
        if exists:
            return self.client.replace(self.resource, body, self.options.lease_namespace, dry_run=self.check_mode, request="update " + self.where())
        return self.client.create(self.resource, body, self.options.lease_namespace, dry_run=self.check_mode)

    def summary(self, lease: Optional[dict]) -> dict:
        spec = (lease or {}).get("spec") or {}
        expiry = rl.expires_at(lease) if lease and spec.get("holderIdentity") else None
        return {"namespace": self.options.lease_namespace, "name": self.options.lease_name, "holder": spec.get("holderIdentity"),
                "expires": format_time(expiry) if expiry else None, "transitions": spec.get("leaseTransitions", 0),
                "duration": spec.get("leaseDurationSeconds")}

    # ---------------------------------------------------------------------------------- take
    def take(self) -> dict:
        """Acquire or renew; one more try after a conflict (another run wrote the Lease between our read and write)."""
        for attempt in (1, 2):
            lease = self.read()
            try:
                return self.take_from(lease)
            except ApiFailure as failure:
                if failure.status != 409 or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def take_from(self, lease: Optional[dict]) -> dict:
        now = self.now()
        decision = rl.decide(lease, self.options.run_id, self.me, now, self.alive)
        current = rl.read_record(lease) or {}
        if decision["action"] == "refuse":
            raise LeaseHeld(rl.refusal_message(current, decision, now),
                            "Wait until that run ends (it releases the lease) or its lease expires; a run that was killed on "
                            "another controller holds it until then. Nothing was changed by this run.", path=self.where(),
                            holder=current.get("holder"), lease=self.summary(lease))
        if decision["action"] == "renew":
            record, answer = self.renew_from(lease, current, now)
            return self.result(answer, record, decision, changed=True, previous=None)
        unfinished = rl.unfinished_run(current, holder_gone=decision["action"] in ("acquire", "take_over"))
        if unfinished and not rl.may_take_unfinished(self.options.unfinished, unfinished, self.options.playbook):
            raise UnfinishedRun(rl.unfinished_message(current),
                                "Roll it back first: run playbooks/rollback.yml on this cluster (it finds that run's backup in the "
                                "record on {0}), then run again. Nothing was changed by this run.".format(self.where()),
                                path=self.where(), unfinished_run=unfinished, lease=self.summary(lease))
        record: Dict[str, Any] = {"run_id": self.options.run_id, "playbook": self.options.playbook, "holder": self.me,
                                  "started": format_time(now), "updated": format_time(now), "step": self.options.step or FIRST_STEP,
                                  "status": rl.IN_PROGRESS, "backup": dict(self.options.backup or {})}
        if decision["action"] == "take_over":
            record["took_over"] = {"run_id": current.get("run_id"), "playbook": current.get("playbook"), "step": current.get("step"),
                                   "holder": current.get("holder"), "why": decision["why"]}
        if unfinished:
            record["unfinished_run"] = unfinished
        identity = rl.holder_identity(self.me, self.options.run_id)
        answer = self.write(rl.lease_body(self.options.lease_name, self.options.lease_namespace, identity, self.options.duration, now,
                                          record, lease, new_holder=True), exists=lease is not None)
        return self.result(answer, record, decision, changed=True, previous=current or None)

    def renew_from(self, lease: dict, current: dict, now: datetime.datetime) -> tuple:
        """Write the renewal of the lease this run holds: renewTime now, the record at `step` (kept when not given) with
        what `backup` adds; the record and the Lease written."""
        record = dict(current, step=self.options.step or current.get("step") or FIRST_STEP, updated=format_time(now))
        record["backup"] = dict(current.get("backup") or {}, **(self.options.backup or {}))
        body = rl.lease_body(self.options.lease_name, self.options.lease_namespace, lease["spec"]["holderIdentity"],
                             self.options.duration, now, record, lease, new_holder=False)
        return record, self.write(body, exists=True)

    def lost(self, decision: dict, lease: Optional[dict]) -> LeaseLost:
        return LeaseLost(rl.lost_message(self.options.run_id, decision), LOST_FIX, path=self.where(),
                         holder=(decision.get("holder") or {}).get("holder"), lease=self.summary(lease))

    # ---------------------------------------------------------------------------------- renewed
    def renew(self) -> dict:
        """Renew the lease this run holds, or fail naming who holds it now; one more try after a conflict (a keepalive
        of this run wrote in between)."""
        for attempt in (1, 2):
            lease = self.read()
            decision = rl.renewal(lease, self.options.run_id, self.me)
            if decision["action"] == "lost":
                raise self.lost(decision, lease)
            try:
                record, answer = self.renew_from(lease or {}, decision["record"], self.now())
            except ApiFailure as failure:
                if failure.status != 409 or attempt == 2:
                    raise
                continue
            return {"changed": True, "action": "renew", "lease": self.summary(answer), "record": record, "dry_run": self.check_mode,
                    "message": "Renewed {0} for {1} run {2} at step {3}".format(self.where(), record.get("playbook"), record.get("run_id"),
                                                                                record.get("step"))}
        raise AssertionError("unreachable")

    def result(self, lease: dict, record: dict, decision: dict, changed: bool, previous: Optional[dict]) -> dict:
        took_over = record.get("took_over") if decision["action"] == "take_over" else None
        message = "{0} {1} for {2} run {3} at step {4}".format(
            {"create": "Took", "acquire": "Took", "renew": "Renewed", "take_over": "Took over"}[decision["action"]], self.where(),
            record.get("playbook"), record.get("run_id"), record.get("step"))
        if took_over:
            message += " from {0} run {1} by {2}: {3}".format(took_over.get("playbook"), took_over.get("run_id"),
                                                              rl.holder_text(took_over.get("holder") or {}), took_over["why"])
        return {"changed": changed, "action": decision["action"], "lease": self.summary(lease), "record": record,
                "took_over": took_over, "unfinished_run": record.get("unfinished_run"), "previous": previous,
                "message": message, "dry_run": self.check_mode}

    # ---------------------------------------------------------------------------------- release
    def release(self) -> dict:
        lease = self.read()
        current = rl.read_record(lease) or {}
        held = bool(lease and (lease.get("spec") or {}).get("holderIdentity"))
        base = {"changed": False, "action": "none", "lease": self.summary(lease), "record": current or None, "dry_run": self.check_mode}
        if lease is None or current.get("run_id") != self.options.run_id or not held and current.get("status") == self.options.outcome:
            base["message"] = ("{0}: not held by run {1}, nothing to release".format(self.where(), self.options.run_id)
                               if lease is not None and current.get("run_id") != self.options.run_id else
                               "{0}: already released".format(self.where()))
            return base
        now = self.now()
        record = dict(current, status=self.options.outcome, step="end", updated=format_time(now), ended=format_time(now))
        answer = self.write(rl.released_body(lease, record, now), exists=True)
        return dict(base, changed=True, action="release", lease=self.summary(answer), record=record,
                    message="Released {0}: {1} run {2} {3}".format(self.where(), record.get("playbook"), record.get("run_id"), self.options.outcome))


# ------------------------------------------------------------------------------------------ keepalive
def keep_alive(options: RunLeaseOptions, connect: Callable[[], RunLease], me: dict, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> dict:
    """Renew the lease every renew interval while the run stays at `step`, looking at the Lease and at the run's
    ansible-playbook process every KEEPALIVE_POLL_SECONDS; return when the run moved on or released the lease, or when
    its process ended (the lease then expires as it would without a keepalive). Raise LeaseLost when another run holds
    it or the renewals failed past the renew deadline. `connect` gives a RunLease on a fresh client (a client's
    deadline is api_timeout from its creation, so a long keepalive takes a new one every renew interval)."""
    started = clock()
    last_good: Optional[float] = None
    renewals, failures = 0, []
    api: Optional[RunLease] = None
    connected = started
    where = "lease {0}/{1}".format(options.lease_namespace, options.lease_name)

    def ended(why: str) -> dict:
        return {"changed": False, "action": "keepalive", "renewals": renewals, "seconds": round(clock() - started, 1), "stopped": why,
                "failures": failures[-5:], "lease": api.summary(lease) if api else None, "dry_run": False,
                "message": "Kept {0} for run {1} at step {2}: {3} renewals in {4:.0f} s; stopped: {5}".format(
                    where, options.run_id, options.step, renewals, clock() - started, why)}

    lease: Optional[dict] = None
    while True:
        try:
            if api is None or clock() - connected >= rl.renew_interval(options.duration):
                api, connected = connect(), clock()
            lease = api.read()
            decision = rl.keepalive_action(lease, options.run_id, options.step or "")
            if decision["action"] == "lost":
                raise api.lost(decision, lease)
            if decision["action"] == "stop":
                return ended(decision["why"])
            holder = (decision.get("record") or {}).get("holder") or {}
            pid = holder.get("pid")
            if holder.get("host") == me.get("host") and isinstance(pid, int) and not api.alive(pid, holder.get("process_started")):
                return ended("the run's ansible-playbook process (pid {0}) has ended; the lease expires {1}".format(
                    pid, api.summary(lease).get("expires")))
            if rl.renew_due(last_good, clock(), options.duration):
                api.renew_from(lease or {}, decision["record"], api.now())
                renewals += 1
                last_good = clock()
        except ApiFailure as failure:
            failures.append(failure.message)
            api = None   # a new client (and a new deadline) for the next try
            if failure.status != 409 and rl.renew_deadline_past(last_good if last_good is not None else started, clock(), options.duration):
                raise LeaseLost("could not renew the lease for {0:.0f} s, past the renew deadline of {1:.0f} s: {2}".format(
                    clock() - (last_good if last_good is not None else started), rl.renew_deadline(options.duration), failure.problem),
                    LOST_FIX, path=where, failures=failures[-5:]) from failure
            if failure.status == 409:
                continue   # the run wrote the Lease in between (a new step): look again at once
        sleep(rl.KEEPALIVE_POLL_SECONDS)


def limited(connection: ConnectionOptions, duration: int) -> ConnectionOptions:
    """The connection of a renewal: no request may wait past the next renewal (api_timeout at most the renew interval)."""
    return dataclasses.replace(connection, api_timeout=max(5, min(connection.api_timeout, int(rl.renew_interval(duration)))))


def run(options: RunLeaseOptions, check_mode: bool, client: Optional[Client] = None, me: Optional[dict] = None,
        now: Optional[Callable[[], datetime.datetime]] = None, alive: Callable[[int, Optional[str]], bool] = process_alive,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> dict:
    """The module's entry: options checked, then the lease taken (or renewed) or released, or kept alive."""
    check_options(options)
    me = me or this_run(options.launched_by)
    now = now or (lambda: datetime.datetime.now(datetime.timezone.utc))
    renewing = options.state in ("renewed", "keepalive")
    connection = limited(options.connection, options.duration) if renewing else options.connection

    def connect() -> RunLease:
        return RunLease(options, client or Client.from_options(connection), check_mode, me, now, alive)

    if options.state == "keepalive":
        if check_mode:
            return {"changed": False, "action": "none", "renewals": 0, "lease": None, "dry_run": True,
                    "message": "check mode: no lease is kept alive"}
        return keep_alive(options, connect, me, clock, sleep)
    lease = connect()
    if options.state == "renewed":
        return lease.renew()
    return lease.take() if options.state == "present" else lease.release()
