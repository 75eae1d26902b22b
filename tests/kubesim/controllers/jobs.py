"""The Job controller: runs `spec.template` Pods to completion.

Pods are named `<job>-<5 random chars>` (generateName), carry the labels `batch.kubernetes.io/job-name`,
`job-name`, `batch.kubernetes.io/controller-uid`, `controller-uid` (put on the template by the API
server's Job defaults) and a controller ownerReference (blockOwnerDeletion). The scheduler binds them, the
kubelet runs them, and a program (`cluster.programs`) or the kubelet's default ends them.

Behaviour (upstream pkg/controller/job, v1.31+ condition flow):
- up to `parallelism` active Pods while fewer than `completions` have succeeded (NonIndexed; without
  `completions` the first success completes the Job);
- a failed Pod, or one deleted before it succeeded (eviction), counts in `failed` and is replaced after an
  exponential backoff of 10 s, 20 s, 40 s ... capped at 6 min (simulated time);
- more failures than `backoffLimit` (default 6): condition `FailureTarget`, active Pods deleted, then
  `Failed`, both with reason `BackoffLimitExceeded` and message `Job has reached the specified backoff
  limit`, and a Warning event of that reason and message; `activeDeadlineSeconds` the same with
  `DeadlineExceeded` / `Job was active longer than specified deadline`;
- enough successes: `SuccessCriteriaMet` then `Complete` (reason `CompletionsReached`, message `Reached
  expected number of succeeded pods`), `completionTime`, event `Completed` "Job completed";
- `suspend: true` deletes the active Pods and sets `Suspended` (JobSuspended / "Job suspended"); resuming
  sets it False (JobResumed / "Job resumed") and restarts `startTime`;
- `ttlSecondsAfterFinished` deletes the finished Job (foreground, as the TTL-after-finished controller);
- status `startTime`, `active`, `ready`, `terminating`, `succeeded`, `failed`, `uncountedTerminatedPods`;
  events `SuccessfulCreate` "Created pod: <name>", `SuccessfulDelete` "Deleted pod: <name>".

Simplified: finished Pods are counted by watching them (no `batch.kubernetes.io/job-tracking` finalizer);
no Indexed completion mode, podFailurePolicy, successPolicy, backoffLimitPerIndex or managedBy;
restartPolicy OnFailure behaves like Never (the kubelet does not restart containers in place)."""
from __future__ import annotations

import time

from .. import events
from ..api import now_iso
from ..errors import ApiError
from ..printers import parse_time
from ..store import DELETED, Event
from .workloads import (OwnerController, condition, create_pod, delete_pod, is_active, is_ready, is_terminal, owned,
                        pod_from_template, set_condition, write_status)

COMPONENT = "job-controller"
_KEY = "jobs.batch"
BACKOFF_BASE = 10.0      # simulated seconds
BACKOFF_CAP = 360.0
_COMPLETE = ("CompletionsReached", "Reached expected number of succeeded pods")
_BACKOFF = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
_DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")


def finished_condition(job: dict) -> str | None:
    """`Complete` or `Failed` when the Job is finished (upstream IsJobFinished), else None."""
    for kind in ("Complete", "Failed"):
        found = condition((job.get("status") or {}).get("conditions"), kind)
        if found is not None and found.get("status") == "True":
            return kind
    return None


class _JobState:
    """What the controller remembers about one Job: the outcome of each Pod it counted."""

    def __init__(self, status: dict):
        self.outcomes: dict[str, str] = {}
        self.released: set[str] = set()    # Pods this controller deleted (suspend, surplus): not failures
        self.base = {"Succeeded": int(status.get("succeeded", 0)), "Failed": int(status.get("failed", 0))}
        self.last_failure = 0.0            # monotonic time of the last counted failure
        self.retry_at = 0.0                # a backoff timer is set for this monotonic time
        self.started_at: tuple[str, float] | None = None   # (startTime, monotonic) set by this controller
        self.deadline_armed = ""           # startTime the deadline timer was armed for
        self.deadline_hit = False
        self.ttl_armed = False

    def count(self, outcome: str) -> int:
        return self.base[outcome] + sum(1 for value in self.outcomes.values() if value == outcome)


class JobController(OwnerController):
    resource_key = _KEY
    owner_kind = "Job"
    owner_group = "batch"
    keys = (_KEY, "pods")

    def __init__(self, cluster):
        super().__init__(cluster)
        self._jobs: dict[str, _JobState] = {}

    # ------------------------------------------------------------------------------------- counting
    def _state(self, job: dict, pods: list[dict]) -> _JobState:
        uid = job["metadata"]["uid"]
        state = self._jobs.get(uid)
        if state is None:
            state = self._jobs[uid] = _JobState(job.get("status") or {})
            for pod in pods:        # a Job loaded with a status has counted its finished Pods already
                if is_terminal(pod):
                    outcome = pod["status"]["phase"]
                    state.outcomes[pod["metadata"]["uid"]] = outcome
                    state.base[outcome] = max(state.base[outcome] - 1, 0)
        return state

    @staticmethod
    def _record(state: _JobState, pod: dict, deleted: bool = False) -> None:
        uid = pod["metadata"]["uid"]
        if uid in state.outcomes:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") or (deleted and uid not in state.released):
            outcome = "Succeeded" if phase == "Succeeded" else "Failed"
            state.outcomes[uid] = outcome
            if outcome == "Failed":
                state.last_failure = time.monotonic()

    # ----------------------------------------------------------------------------------------- sync
    def forget(self, owner: dict) -> None:
        self._jobs.pop(owner["metadata"]["uid"], None)

    def on_dependent_event(self, event: Event, ref: dict) -> None:
        state = self._jobs.get(ref.get("uid", ""))
        if event.type == DELETED and state is not None:
            self._record(state, event.obj, deleted=True)

    def reconcile(self, owner: dict) -> None:
        job = owner
        cluster = self.cluster
        pods = owned(cluster, job["metadata"]["uid"], "pods")
        state = self._state(job, pods)
        if finished_condition(job):
            self._finished(job, state)
            return
        for pod in pods:
            self._record(state, pod)
        self._reconcile(job, state, pods)

    def _reconcile(self, job: dict, state: _JobState, pods: list[dict]) -> None:
        spec = job.get("spec") or {}
        status = dict(job.get("status") or {})
        conditions = list(status.get("conditions") or [])
        active = [p for p in pods if is_active(p)]
        terminating = [p for p in pods if not is_terminal(p) and p["metadata"].get("deletionTimestamp")]
        succeeded, failed = state.count("Succeeded"), state.count("Failed")
        events_after: list[tuple[str, str, str]] = []

        if spec.get("suspend"):
            for pod in active:
                if self._release(state, job, pod):
                    terminating.append(pod)
            active = []
            if (condition(conditions, "Suspended") or {}).get("status") != "True":
                conditions = set_condition(conditions, "Suspended", "True", "JobSuspended", "Job suspended", probe=True)
                events_after.append(("Normal", "Suspended", "Job suspended"))
        else:
            if (condition(conditions, "Suspended") or {}).get("status") == "True":
                conditions = set_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed", probe=True)
                events_after.append(("Normal", "Resumed", "Job resumed"))
                status.pop("startTime", None)
            if not status.get("startTime"):
                status["startTime"] = now_iso()
                state.started_at = (status["startTime"], time.monotonic())
            self._arm_deadline(job, state, status["startTime"])
            failure = self._failure(job, state, failed, conditions)
            completions = spec.get("completions")
            complete = (succeeded >= int(completions)) if completions is not None else (succeeded > 0 and not active)
            if failure or complete:
                kind = "FailureTarget" if failure else "SuccessCriteriaMet"
                reason, message = failure or _COMPLETE
                if condition(conditions, kind) is None:
                    conditions = set_condition(conditions, kind, "True", reason, message, probe=True)
                for pod in active:
                    if self._release(state, job, pod):
                        terminating.append(pod)
                active = []
                if not terminating:
                    final = "Failed" if failure else "Complete"
                    conditions = set_condition(conditions, final, "True", reason, message, probe=True)
                    if not failure:
                        status["completionTime"] = now_iso()
                        events_after.append(("Normal", "Completed", "Job completed"))
                    else:
                        events_after.append(("Warning", reason, message))
            else:
                active = self._scale(job, state, active, succeeded, failed)
        status.update(ready=sum(1 for p in active if is_ready(p)), terminating=len(terminating),
                      uncountedTerminatedPods={})
        for field, value in (("active", len(active)), ("succeeded", succeeded), ("failed", failed)):
            if value:
                status[field] = value
            else:
                status.pop(field, None)
        if conditions:
            status["conditions"] = conditions
        current = self.cluster.store.get(_KEY, job["metadata"]["namespace"], job["metadata"]["name"])
        if current is not None and current.obj["metadata"]["uid"] == job["metadata"]["uid"]:
            write_status(self.cluster, self.cluster.registry.by_key(_KEY), current.obj, status)
        for event_type, reason, message in events_after:
            events.record(self.cluster, job, event_type, reason, message, COMPONENT)

    def _release(self, state: _JobState, job: dict, pod: dict) -> bool:
        """Delete a Pod the Job no longer wants; its end is not counted as a failure."""
        state.released.add(pod["metadata"]["uid"])
        return delete_pod(self.cluster, job, pod, COMPONENT)

    def _failure(self, job: dict, state: _JobState, failed: int, conditions: list[dict]
                 ) -> tuple[str, str] | None:
        target = condition(conditions, "FailureTarget")
        if target is not None and target.get("status") == "True":
            return target.get("reason", ""), target.get("message", "")
        if failed > int((job.get("spec") or {}).get("backoffLimit", 6)):
            return _BACKOFF
        if state.deadline_hit:
            return _DEADLINE
        return None

    def _scale(self, job: dict, state: _JobState, active: list[dict], succeeded: int, failed: int) -> list[dict]:
        spec = job.get("spec") or {}
        wanted = int(spec.get("parallelism", 1))
        if spec.get("completions") is not None:
            wanted = min(wanted, max(int(spec["completions"]) - succeeded, 0))
        if len(active) > wanted:
            surplus = sorted(active, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True)
            for pod in surplus[:len(active) - wanted]:
                if self._release(state, job, pod):
                    active.remove(pod)
            return active
        if len(active) == wanted:
            return active
        if failed and state.last_failure:
            delay = min(BACKOFF_BASE * 2 ** (failed - 1), BACKOFF_CAP)
            ready_at = state.last_failure + self.cluster.clock.real_seconds(delay)
            if time.monotonic() < ready_at:
                self._retry_at(job, state, ready_at)
                return active
        meta = job["metadata"]
        labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"],
                  "controller-uid": meta["uid"], "job-name": meta["name"]}
        for _index in range(wanted - len(active)):
            body = pod_from_template(spec.get("template") or {}, meta["namespace"], job, f"{meta['name']}-", labels)
            pod = create_pod(self.cluster, job, body, COMPONENT)
            if pod is None:
                break
            active.append(pod)
        return active

    # --------------------------------------------------------------------------------------- timers
    def _resync_later(self, job: dict, real_seconds: float) -> None:
        meta = job["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]

        def resync() -> None:
            entry = self.cluster.store.get(_KEY, namespace, name)
            if entry is not None and entry.obj["metadata"]["uid"] == uid:
                self.sync(namespace, name)
        self.manager.after(max(real_seconds, 0.0), resync)

    def _retry_at(self, job: dict, state: _JobState, ready_at: float) -> None:
        if state.retry_at == ready_at:
            return
        state.retry_at = ready_at
        self._resync_later(job, ready_at - time.monotonic())

    def _elapsed_simulated(self, state: _JobState, start_time: str) -> float:
        """Simulated seconds since `start_time`: measured by this controller when it set it, otherwise from
        the wall-clock timestamp scaled by the time scale."""
        if state.started_at and state.started_at[0] == start_time:
            return (time.monotonic() - state.started_at[1]) * self.cluster.clock.time_scale
        started = parse_time(start_time)
        if started is None:
            return 0.0
        return max(time.time() - started.timestamp(), 0.0) * self.cluster.clock.time_scale

    def _arm_deadline(self, job: dict, state: _JobState, start_time: str) -> None:
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        if deadline is None or state.deadline_armed == start_time:
            return
        state.deadline_armed = start_time
        state.deadline_hit = False
        remaining = float(deadline) - self._elapsed_simulated(state, start_time)
        if remaining <= 0:
            state.deadline_hit = True
            return
        meta = job["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]

        def expire() -> None:
            current = self._jobs.get(uid)
            entry = self.cluster.store.get(_KEY, namespace, name)
            if current is None or entry is None or entry.obj["metadata"]["uid"] != uid or \
                    current.deadline_armed != start_time:
                return
            if (entry.obj.get("status") or {}).get("startTime") == start_time:
                current.deadline_hit = True
                self.sync(namespace, name)
        self.manager.after_simulated(remaining, expire)

    def _finished(self, job: dict, state: _JobState) -> None:
        """A finished Job: nothing runs any more; `ttlSecondsAfterFinished` deletes it."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None or state.ttl_armed:
            return
        state.ttl_armed = True
        status = job.get("status") or {}
        finish = status.get("completionTime") or (condition(status.get("conditions"), "Failed") or {}).get(
            "lastTransitionTime")
        finished_at = parse_time(finish)
        elapsed = max(time.time() - finished_at.timestamp(), 0.0) * self.cluster.clock.time_scale if finished_at else 0
        meta = job["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]

        def expire() -> None:
            entry = self.cluster.store.get(_KEY, namespace, name)
            if entry is None or entry.obj["metadata"]["uid"] != uid or entry.obj["metadata"].get("deletionTimestamp"):
                return
            try:
                self.cluster.delete(self.cluster.registry.by_key(_KEY), namespace, name,
                                    {"propagationPolicy": "Foreground", "preconditions": {"uid": uid}})
            except ApiError:
                pass
        self.manager.after_simulated(max(float(ttl) - elapsed, 0.0), expire)


def register(cluster, manager) -> None:
    if cluster.registry.by_key(_KEY) is not None and cluster.registry.by_key("pods") is not None:
        manager.add(JobController(cluster))
