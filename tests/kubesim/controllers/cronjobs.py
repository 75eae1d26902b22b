"""The CronJob controller: creates a Job at each time of `spec.schedule` (in `spec.timeZone`, UTC by
default), measured on a simulated clock.

The simulated clock starts at the wall time when the controller starts and runs `timeScale` times faster,
so a `*/2 * * * *` CronJob in a timeScale-10 scenario runs every 12 real seconds (`SimulatedClock`).

Behaviour (upstream pkg/controller/cronjob, controller v2):
- the Job is named `<cronjob>-<scheduled time in minutes since the epoch>`, carries the jobTemplate's labels
  and annotations plus `batch.kubernetes.io/cronjob-scheduled-timestamp`, and a controller ownerReference
  to the CronJob; its spec is the jobTemplate's; event `SuccessfulCreate` "Created job <name>";
- `concurrencyPolicy`: Allow; Forbid skips a run while a Job is active (event `JobAlreadyActive`); Replace
  deletes the active Jobs first (event `SuccessfulDelete` "Deleted job <name>");
- status `active` (ObjectReferences of the Jobs it started and that are not finished), `lastScheduleTime`,
  `lastSuccessfulTime` (the latest completionTime of its succeeded Jobs); a finished Job leaves `active`
  with event `SawCompletedJob` "Saw completed job: <name>, condition: Complete|Failed"; a vanished one with
  `MissingJob` "Active job went missing: <name>";
- Jobs it owns but did not start (`kubectl create job --from=cronjob/x`, annotation
  `cronjob.kubernetes.io/instantiate: manual`) run like any Job, are not put in `active` (Warning
  `UnexpectedJob` "Saw a job that the controller did not create or forgot: <name>") but count for
  `lastSuccessfulTime` and the history limits, as upstream;
- `successfulJobsHistoryLimit` (3) and `failedJobsHistoryLimit` (1) delete the oldest finished Jobs
  (Background propagation, so their Pods go too), event `SuccessfulDelete` "Deleted job <name>";
- `suspend: true` stops runs; an invalid schedule or time zone gets a Warning event (`InvalidSchedule`,
  `UnknownTimeZone`) and no runs.

Simplified: runs are never missed (timers fire on time), so `startingDeadlineSeconds` has nothing to do and
resuming a suspended CronJob does not start the run it missed (upstream may start the most recent missed
run); timestamps written to objects (`lastScheduleTime`, Job startTime) are wall-clock, as everywhere in
the simulator, so `kubectl get` ages stay right, while the Job name and the scheduled-timestamp annotation
carry the simulated schedule time. `trigger(cluster, namespace, name)` starts a manual run now (a hook for
tests and the simulator's admin work)."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .. import cron, events
from ..api import now_iso
from ..errors import ApiError
from .jobs import finished_condition
from .workloads import OwnerController, owned, owner_reference, write_status

COMPONENT = "cronjob-controller"
_KEY = "cronjobs.batch"
_JOB_KEY = "jobs.batch"
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


class SimulatedClock:
    """Wall time at start, advancing timeScale times faster than real time."""

    def __init__(self, time_scale: float):
        self.time_scale = time_scale
        self.reset()

    def reset(self) -> None:
        self._wall = time.time()
        self._mono = time.monotonic()

    def now(self) -> datetime:
        seconds = self._wall + (time.monotonic() - self._mono) * self.time_scale
        return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _time_zone(cronjob: dict):
    name = (cronjob.get("spec") or {}).get("timeZone")
    if not name:
        return timezone.utc
    return ZoneInfo(name)


def job_from_template(cronjob: dict, name: str, annotations: dict | None = None, generate: bool = False) -> dict:
    """The Job a CronJob starts (upstream getJobFromTemplate2); `generate` makes `name` a generateName."""
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    meta = {"generateName" if generate else "name": name, "namespace": cronjob["metadata"]["namespace"],
            "ownerReferences": [owner_reference(cronjob)]}
    if template_meta.get("labels"):
        meta["labels"] = dict(template_meta["labels"])
    merged = {**(template_meta.get("annotations") or {}), **(annotations or {})}
    if merged:
        meta["annotations"] = merged
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": dict(template.get("spec") or {})}


def trigger(cluster, namespace: str, name: str) -> dict:
    """Start a run now, as `kubectl create job --from=cronjob/<name>` does (a manual Job)."""
    cronjobs = cluster.registry.by_key(_KEY)
    cronjob = cluster.get(cronjobs, namespace, name)
    body = job_from_template(cronjob, f"{name}-manual-", {"cronjob.kubernetes.io/instantiate": "manual"}, generate=True)
    return cluster.create(cluster.registry.by_key(_JOB_KEY), namespace, body)


def _reference(job: dict) -> dict:
    meta = job["metadata"]
    return {"kind": "Job", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
            "apiVersion": "batch/v1", "resourceVersion": meta.get("resourceVersion", "")}


def _start_key(job: dict) -> tuple:
    status = job.get("status") or {}
    return (status.get("startTime") or job["metadata"].get("creationTimestamp", ""), job["metadata"]["name"])


class CronJobController(OwnerController):
    resource_key = _KEY
    owner_kind = "CronJob"
    owner_group = "batch"
    keys = (_KEY, _JOB_KEY)

    def __init__(self, cluster):
        super().__init__(cluster)
        self.clock = SimulatedClock(cluster.clock.time_scale)
        self._armed: dict[str, tuple] = {}       # cronjob uid -> (schedule, timeZone, next run)
        self._warned: set[tuple[str, str]] = set()

    # ----------------------------------------------------------------------------------------- sync
    def start(self) -> None:
        self.clock.reset()
        super().start()

    def forget(self, owner: dict) -> None:
        self._armed.pop(owner["metadata"]["uid"], None)

    def reconcile(self, owner: dict) -> None:
        cronjob = owner
        namespace, name = cronjob["metadata"]["namespace"], cronjob["metadata"]["name"]
        self._sync_status(cronjob)
        self._cleanup(cronjob)
        self._arm(namespace, name)

    def _sync_status(self, cronjob: dict) -> dict:
        """Reconcile `active` and `lastSuccessfulTime` with the Jobs the CronJob owns."""
        cluster = self.cluster
        meta = cronjob["metadata"]
        status = dict(cronjob.get("status") or {})
        active = list(status.get("active") or [])
        active_uids = {ref.get("uid") for ref in active}
        children = set()
        for job in owned(cluster, meta["uid"], _JOB_KEY):
            job_meta = job["metadata"]
            children.add(job_meta["uid"])
            finished = finished_condition(job)
            if not finished:
                if job_meta["uid"] not in active_uids and (meta["uid"], job_meta["uid"]) not in self._warned:
                    self._warned.add((meta["uid"], job_meta["uid"]))
                    events.record(cluster, cronjob, "Warning", "UnexpectedJob",
                                  f"Saw a job that the controller did not create or forgot: {job_meta['name']}",
                                  COMPONENT)
                continue
            if job_meta["uid"] in active_uids:
                active = [ref for ref in active if ref.get("uid") != job_meta["uid"]]
                events.record(cluster, cronjob, "Normal", "SawCompletedJob",
                              f"Saw completed job: {job_meta['name']}, condition: {finished}", COMPONENT)
            completed_at = (job.get("status") or {}).get("completionTime")
            if finished == "Complete" and completed_at and completed_at > status.get("lastSuccessfulTime", ""):
                status["lastSuccessfulTime"] = completed_at
        for ref in list(active):
            if ref.get("uid") in children:
                continue
            stored = cluster.store.get(_JOB_KEY, ref.get("namespace", meta["namespace"]), ref.get("name", ""))
            if stored is None or stored.obj["metadata"]["uid"] != ref.get("uid"):
                active.remove(ref)
                events.record(cluster, cronjob, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}",
                              COMPONENT)
        if active:
            status["active"] = active
        else:
            status.pop("active", None)
        return write_status(cluster, cluster.registry.by_key(_KEY), cronjob, status) or cronjob

    def _cleanup(self, cronjob: dict) -> None:
        """Delete the oldest finished Jobs beyond the history limits."""
        spec = cronjob.get("spec") or {}
        jobs = owned(self.cluster, cronjob["metadata"]["uid"], _JOB_KEY)
        for kind, field, default in (("Complete", "successfulJobsHistoryLimit", 3),
                                     ("Failed", "failedJobsHistoryLimit", 1)):
            limit = spec.get(field, default)
            if limit is None:
                continue
            done = sorted((j for j in jobs if finished_condition(j) == kind and not j["metadata"].get("deletionTimestamp")),
                          key=_start_key)
            for job in done[:max(len(done) - int(limit), 0)]:
                self._delete_job(cronjob, job)

    def _delete_job(self, cronjob: dict, job: dict) -> bool:
        meta = job["metadata"]
        try:
            self.cluster.delete(self.cluster.registry.by_key(_JOB_KEY), meta["namespace"], meta["name"],
                                {"propagationPolicy": "Background", "preconditions": {"uid": meta["uid"]}})
        except ApiError:
            return False
        events.record(self.cluster, cronjob, "Normal", "SuccessfulDelete", f"Deleted job {meta['name']}", COMPONENT)
        return True

    # --------------------------------------------------------------------------------------- timers
    def _arm(self, namespace: str, name: str) -> None:
        """Set a timer for the next run unless one is set for the current schedule."""
        entry = self.cluster.store.get(_KEY, namespace, name)
        if entry is None:
            return
        cronjob = entry.obj
        uid = cronjob["metadata"]["uid"]
        spec = cronjob.get("spec") or {}
        if spec.get("suspend"):
            self._armed.pop(uid, None)
            return
        key = (spec.get("schedule", ""), spec.get("timeZone") or "")
        armed = self._armed.get(uid)
        if armed is not None and armed[:2] == key:
            return
        try:
            zone = _time_zone(cronjob)
        except (ZoneInfoNotFoundError, ValueError) as err:
            self._warn_once(cronjob, "UnknownTimeZone", f"invalid timeZone: {spec.get('timeZone')!r}: {err}")
            return
        try:
            schedule = cron.parse(spec.get("schedule", ""))
            now = self.clock.now()
            when = cron.next_after(schedule, now.astimezone(zone))
        except ValueError as err:
            self._warn_once(cronjob, "InvalidSchedule", f"invalid schedule: {spec.get('schedule', '')} : {err}")
            return
        self._armed[uid] = key + (when,)
        delay = (when - now).total_seconds()
        self.manager.after_simulated(delay, lambda: self._fire(namespace, name, uid, key + (when,)))

    def _warn_once(self, cronjob: dict, reason: str, message: str) -> None:
        marker = (cronjob["metadata"]["uid"], f"{reason}:{message}")
        if marker not in self._warned:
            self._warned.add(marker)
            events.record(self.cluster, cronjob, "Warning", reason, message, COMPONENT)

    def _fire(self, namespace: str, name: str, uid: str, armed: tuple) -> None:
        if self._armed.get(uid) != armed:
            return          # superseded (schedule changed, suspended, deleted)
        del self._armed[uid]
        cluster = self.cluster
        with cluster.lock:
            entry = cluster.store.get(_KEY, namespace, name)
            if entry is None or entry.obj["metadata"]["uid"] != uid or entry.obj["metadata"].get("deletionTimestamp"):
                return
            if not (entry.obj.get("spec") or {}).get("suspend"):
                self._run(self._sync_status(entry.obj), armed[2])
            self._arm(namespace, name)

    def _run(self, cronjob: dict, scheduled: datetime) -> None:
        cluster = self.cluster
        spec = cronjob.get("spec") or {}
        status = dict(cronjob.get("status") or {})
        active = list(status.get("active") or [])
        policy = spec.get("concurrencyPolicy", "Allow")
        if policy == "Forbid" and active:
            events.record(cluster, cronjob, "Normal", "JobAlreadyActive",
                          "Not starting job because prior execution is running and concurrency policy is Forbid",
                          COMPONENT)
            return
        if policy == "Replace":
            for ref in list(active):
                stored = cluster.store.get(_JOB_KEY, ref.get("namespace", ""), ref.get("name", ""))
                if stored is None or self._delete_job(cronjob, stored.obj):
                    active.remove(ref)
        job_name = f"{cronjob['metadata']['name']}-{int(scheduled.timestamp()) // 60}"
        body = job_from_template(cronjob, job_name, {SCHEDULED_ANNOTATION: cron.rfc3339(scheduled)})
        try:
            job = cluster.create(cluster.registry.by_key(_JOB_KEY), cronjob["metadata"]["namespace"], body)
        except ApiError as err:
            if err.code != 409:
                events.record(cluster, cronjob, "Warning", "FailedCreate", f"Error creating job: {err.message}",
                              COMPONENT)
            return
        events.record(cluster, cronjob, "Normal", "SuccessfulCreate", f"Created job {job_name}", COMPONENT)
        active.append(_reference(job))
        status["active"] = active
        status["lastScheduleTime"] = now_iso()
        current = cluster.store.get(_KEY, cronjob["metadata"]["namespace"], cronjob["metadata"]["name"])
        if current is not None:
            write_status(cluster, cluster.registry.by_key(_KEY), current.obj, status)


def register(cluster, manager) -> None:
    if cluster.registry.by_key(_KEY) is not None and cluster.registry.by_key(_JOB_KEY) is not None:
        manager.add(CronJobController(cluster))
