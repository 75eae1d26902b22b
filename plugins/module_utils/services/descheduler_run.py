# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`descheduler_run`: one Descheduler run, observed and parsed.

A run is the next Job the CronJob schedules after the start (`wait`), a Job created from the CronJob's jobTemplate as
`kubectl create job --from=cronjob/<name>` does (`create`), or, for a Descheduler that runs as a Deployment, the next
complete descheduling cycle in its Pod's log. Jobs and Pods are waited for by list + watch (k8s.watch); the log is
read when the Job's Pod has finished. A Job Pod that ends Failed decides the run at once: the descheduler exits 1 on a
policy it rejects, and the Job's retries read the same ConfigMap, so waiting for `backoffLimit` tells nothing new.
A Deployment's log has no watch (pods/log without follow), so that one case reads the log every few seconds; a Pod
gone since it was listed (replaced: a restart, an eviction, a node drain) is left for the Pods of the next listing.
The installation (workload, Pods, logs) is read through `cluster.descheduler.DeschedulerInstallation`. In check mode
the Job is sent with server-side dry run (validated and admitted, not stored) and nothing is waited for.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import string
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import DeschedulerInstallation
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import klog
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.cron import Schedule
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, RunFailed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import PROGRESS_SPEC, Progress, check_every

ARG_SPEC = {
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "trigger": {"type": "str", "choices": ["auto", "create", "wait"], "default": "auto"},
    "job_name": {"type": "str"},
    "timeout": {"type": "int", "default": 600},
    "previous_run": {"type": "raw"},
    **PROGRESS_SPEC,
}
MANUAL_ANNOTATION = "cronjob.kubernetes.io/instantiate"
SUFFIX_CHARS = string.ascii_lowercase + string.digits
DEPLOYMENT_LOG_INTERVAL = 2.0
PROCESS_FAILED = ("failed to run descheduler server", "command failed")


# ------------------------------------------------------------------------------------------ options
@dataclasses.dataclass(frozen=True)
class DeschedulerRunOptions(ModuleOptions):
    """The options of descheduler_run, as ARG_SPEC parses them."""
    descheduler_namespace: str
    descheduler_name: str
    trigger: str
    job_name: Optional[str]
    timeout: int
    previous_run: Any
    progress_every: int
    resume: Optional[dict]


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What a run uses, from the options (`settings`)."""
    namespace: str
    name: str
    trigger: str
    job_name: Optional[str]
    timeout: int
    previous: Optional[List[dict]]
    progress_every: int = 0
    resume: Optional[dict] = None


def settings(options: DeschedulerRunOptions) -> RunSettings:
    """The options checked (names, timeout, job_name with the trigger), and the classification of the previous run."""
    namespace = options.descheduler_namespace
    if not is_dns_label(namespace):
        raise InvalidOption("{0!r} is not a valid namespace name".format(namespace), "Use the namespace of the Descheduler (descheduler).",
                            path="descheduler_namespace")
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long a run may take, from the start to its log, e.g. 600.", path="timeout")
    job_name = options.job_name
    if job_name and (not is_dns_label(job_name) or len(job_name) > 63):
        raise InvalidOption("{0!r} is not a valid Job name".format(job_name), "Use lower-case letters, digits and '-', at most 63 characters.",
                            path="job_name")
    if job_name and options.trigger == "wait":
        raise InvalidOption("job_name names a Job to create", "Use trigger=create (or auto), or leave job_name unset.", path="job_name")
    check_every(options.progress_every)
    return RunSettings(namespace=namespace, name=options.descheduler_name, trigger=options.trigger, job_name=job_name,
                       timeout=options.timeout, previous=previous_classification(options.previous_run),
                       progress_every=options.progress_every, resume=options.resume)


def previous_classification(previous: Any) -> Optional[List[dict]]:
    """The `classification` of an earlier result (the whole result, or the list itself); None without one."""
    if isinstance(previous, dict):
        previous = previous.get("classification")
    if isinstance(previous, list):
        return [item for item in previous if isinstance(item, dict)]
    return None


# ------------------------------------------------------------------------------------------ pure parts
def choose_trigger(wanted: str, kind: str, workload: dict, timeout: float, now: datetime.datetime) -> Tuple[str, str]:
    """`create` or `wait`, and why. `auto`: a Deployment is waited for; a suspended CronJob, or one whose schedule has no
    run within `timeout`, gets a Job created; otherwise the next scheduled run is waited for."""
    spec = workload.get("spec") or {}
    where = "{0} {1}/{2}".format(kind, meta(workload).get("namespace"), meta(workload).get("name"))
    if kind != "CronJob":
        if wanted == "create":
            raise InvalidOption("{0}: a Job can only be created from a CronJob".format(where),
                                "The Descheduler runs as a Deployment: use trigger=wait (or auto) to read its next cycle.", path="trigger")
        return "wait", "the Descheduler runs as a Deployment: its next descheduling cycle"
    if wanted == "create":
        return "create", "trigger=create"
    if spec.get("suspend"):
        if wanted == "wait":
            raise RunFailed("{0} is suspended (spec.suspend: true): no run is scheduled".format(where),
                            "Use trigger=create to run it once now, or resume the CronJob.", path="trigger")
        return "create", "the CronJob is suspended"
    if wanted == "wait":
        return "wait", "trigger=wait"
    try:
        upcoming = Schedule(spec.get("schedule") or "", spec.get("timeZone")).next_after(now, timeout)
    except ValueError as error:
        return "wait", "schedule {0!r} not understood here ({1}): waiting for the CronJob controller".format(spec.get("schedule"), error)
    if upcoming is None:
        return "create", "no scheduled run within timeout ({0}s) by schedule {1!r}".format(timeout, spec.get("schedule"))
    return "wait", "next scheduled run at {0} by schedule {1!r}".format(upcoming.isoformat().replace("+00:00", "Z"), spec.get("schedule"))


def manual_job(cronjob: dict, name: str) -> dict:
    """A Job from the CronJob's jobTemplate, as `kubectl create job --from=cronjob/<cronjob> <name>` builds it."""
    template = cronjob.get("spec", {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[MANUAL_ANNOTATION] = "manual"
    cron_meta = meta(cronjob)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": cron_meta.get("namespace"), "labels": dict(template_meta.get("labels") or {}),
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": cron_meta.get("name"),
                                          "uid": cron_meta.get("uid"), "controller": True, "blockOwnerDeletion": True}]},
        "spec": dict(template.get("spec") or {}),
    }


def manual_job_name(cronjob_name: str, rng: Optional[random.Random] = None) -> str:
    """`<cronjob>-manual-<5 characters>`, within the 63 characters of a Job name (its Pods' label value)."""
    chooser = rng or random.SystemRandom()
    suffix = "".join(chooser.choice(SUFFIX_CHARS) for _index in range(5))
    return "{0}-manual-{1}".format(cronjob_name[:63 - len("-manual-") - 5].rstrip("-"), suffix)


def job_outcome(job: dict, pods: List[dict]) -> Optional[Tuple[str, Optional[dict]]]:
    """(`Complete` or `Failed`, the Pod whose log tells) once decided, else None. A Complete Job is decided when its
    succeeded Pod is seen too (the Job's status may arrive before the Pod's); a Failed one also without Pods (a deadline)."""
    succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    result = desched.job_result(job)
    if succeeded and result != "Failed":
        return "Complete", succeeded[-1]
    if failed:
        return "Failed", failed[-1]
    if result == "Failed":
        return "Failed", None
    return None


def new_cycle(baseline_last: Optional[str], records: List[dict]) -> Tuple[Optional[List[dict]], List[dict]]:
    """The first complete cycle that started after the line `baseline_last` (the last line seen at the start), and the
    records after the baseline. A cycle in progress at the start does not count."""
    lines = [r.get("line") for r in records]
    start = 0
    in_progress = False
    if baseline_last is not None and baseline_last in lines:
        start = len(lines) - lines[::-1].index(baseline_last)
        in_progress = records[start - 1].get("message") != klog.EVICTIONS_COUNT
    fresh = records[start:]
    cycles = klog.split_cycles(fresh)
    if in_progress and cycles:
        cycles = cycles[1:]
    for cycle in cycles:
        if klog.cycle_complete(cycle):
            return cycle, fresh
    return None, fresh


def process_failed(records: List[dict]) -> bool:
    return any(r.get("message") in PROCESS_FAILED for r in records)


# ------------------------------------------------------------------------------------------ the run
class Run:
    """One run against the cluster; `execute()` returns the module result or raises a RebalanceError."""

    def __init__(self, run_settings: RunSettings, client: Client, check_mode: bool = False,
                 clock: Callable[[], float] = time.monotonic, now: Optional[Callable[[], datetime.datetime]] = None,
                 sleep: Callable[[float], Any] = time.sleep) -> None:
        self.settings = run_settings
        self.client = client
        self.installation = DeschedulerInstallation(client, run_settings.namespace, run_settings.name)
        self.check_mode = check_mode
        self.clock = clock
        self.now = now or (lambda: datetime.datetime.now(datetime.timezone.utc))
        self.sleep = sleep
        # with progress_every, one call of several: the run's deadline spans them all (module_utils/progress)
        self.progress = Progress(run_settings.progress_every, None if check_mode else run_settings.resume, clock=clock)
        self.progress.require_state("trigger", "trigger_reason", "started_at", "known", "job_name")
        self.deadline = self.progress.deadline(run_settings.timeout)
        client.retried[:0] = self.progress.state.get("retried") or []  # the retries of the calls before count in the result
        self.kinds: Dict[str, Any] = {}
        self.watch_stats: Optional[dict] = None

    def _where(self, kind: str, workload: dict) -> str:
        return "{0} {1}/{2}".format(kind, self.settings.namespace, meta(workload).get("name"))

    def _create(self, job: dict, dry_run: bool = False) -> dict:
        """POST the Job (with `dry_run`, validated and admitted by the API server, not stored); the server's answer."""
        try:
            return self.client.create(self.kinds["Job"], job, namespace=self.settings.namespace, dry_run=dry_run)
        except ApiFailure as failure:
            if failure.status == 409:
                raise RunFailed("Job {0}/{1} already exists".format(self.settings.namespace, meta(job).get("name")),
                                "Give another job_name, or leave it unset.", path="job_name") from failure
            raise

    # ---------------------------------------------------------------------------------- main
    def execute(self) -> dict:
        self.kinds = self.installation.kinds()
        kind, workload = self.installation.workload()
        if workload is None:
            raise RunFailed("no CronJob or Deployment labelled {0}={1} or named {2} in namespace {3}".format(
                desched.APP_LABEL, desched.APP_NAME, self.settings.name, self.settings.namespace),
                "Install the Descheduler plugin, or set descheduler_namespace and descheduler_name to where it runs.",
                path="descheduler_name")
        state = self.progress.state
        if self.progress.resumed:  # decided by the first call of this run
            trigger, reason = state["trigger"], state["trigger_reason"]
        else:
            trigger, reason = choose_trigger(self.settings.trigger, kind, workload, self.settings.timeout, self.now())
        container = desched.container_name(kind, workload)
        result: Dict[str, Any] = {"changed": False, "trigger": trigger, "trigger_reason": reason,
                                  "started_at": state.get("started_at") or klog.format_time(self.now()),
                                  "descheduler": {"namespace": self.settings.namespace, "name": meta(workload).get("name"), "kind": kind},
                                  "job": None, "pod": None}
        if trigger == "create":
            name = state.get("job_name") or self.settings.job_name or manual_job_name(meta(workload).get("name"))
            job = manual_job(workload, name)
            result["changed"] = True
            if self.check_mode:  # the API server validates the Job; nothing is stored, so there is no run to wait for
                result.update(would_create=self._create(job, dry_run=True),
                              job={"name": name, "created": False, "manual": True, "result": None},
                              msg="check mode: would create Job {0}/{1} from {2}".format(
                                  self.settings.namespace, name, self._where(kind, workload)))
                return dict(result, **klog.run_summary([]), log_lines=[], category_swaps=[], waited_seconds=0.0, finished_at=klog.format_time(self.now()))
            watched = self._watch_job(workload, container, create=job, result=result)
        elif kind == "CronJob":
            watched = self._watch_job(workload, container, result=result)
        else:
            watched = self._deployment_cycle(workload, container)
        if "progress" in watched:  # this call of several ends before the run did
            return watched
        records, job_info, pod = watched["records"], watched["job"], watched["pod"]
        summary = klog.run_summary(records)
        result.update(summary)
        result.update(job=job_info, pod=pod, log_lines=[r["line"] for r in records],
                      category_swaps=klog.category_swaps(self.settings.previous, summary["classification"])
                      if self.settings.previous is not None else [],
                      waited_seconds=round(self.progress.elapsed(), 3), finished_at=klog.format_time(self.now()),
                      api={"retries": len(self.client.retried), "retried": self.client.retried[-20:]}, progress=self.progress.done())
        if self.watch_stats is not None:
            result["watch"] = self.watch_stats
        if (job_info and job_info.get("result") == "Failed") or (job_info is None and process_failed(records)):
            what = "Job {0}/{1}".format(self.settings.namespace, job_info["name"]) if job_info else "the Descheduler in Pod {0}".format(pod)
            errors = summary["errors"] or ["(no error line in the log of Pod {0})".format(pod)]
            configmap, _key = self.installation.policy_source(kind, workload)
            raise RunFailed("{0} failed: {1}".format(what, " | ".join(errors)),
                            "Fix the policy in ConfigMap {0}/{1} (the CronJob keeps retrying the failed Job until the policy is fixed), "
                            "or restore the backup.".format(self.settings.namespace, configmap),
                            path="descheduler run", run=result)
        return result

    # ---------------------------------------------------------------------------------- CronJob
    def _watch_job(self, cronjob: dict, container: Optional[str], result: dict, create: Optional[dict] = None) -> Dict[str, Any]:
        """The run's records, Job and Pod; or, when this call of several ends first, the result that says so (`progress`)."""
        namespace = self.settings.namespace
        progress = self.progress
        watchset = WatchSet(self.client, [Stream("jobs", self.kinds["Job"], namespace), Stream("pods", self.kinds["Pod"], namespace)],
                            progress.call_deadline(self.settings.timeout), clock=self.clock)
        watchset.start()
        # the Jobs from before the run: the first call's list, kept for the calls after it
        known = set(progress.state["known"]) if progress.resumed else {name for _ns, name in watchset.cache["jobs"]}
        wanted = meta(create).get("name") if create is not None else None
        if create is not None and not progress.resumed:
            try:
                self._create(create)
            except Exception:
                watchset.stop()
                raise
        state: Dict[str, Any] = {"job": None, "outcome": None}

        def decided(ws: WatchSet) -> bool:
            jobs = [j for j in ws.objects("jobs") if (meta(j).get("name") == wanted if wanted else
                                                      desched.owned_by(j, "CronJob", cronjob) and meta(j).get("name") not in known)]
            jobs.sort(key=lambda j: (meta(j).get("creationTimestamp") or "", meta(j).get("name") or ""))
            if not jobs:
                return False
            state["job"] = jobs[0]
            state["outcome"] = job_outcome(jobs[0], desched.job_pods(jobs[0], ws.objects("pods")))
            return state["outcome"] is not None or progress.call_over()

        try:
            watchset.wait(decided)
        finally:
            watchset.stop()
            self.watch_stats = dict(watchset.stats, errors=watchset.errors[-20:])
        job = state["job"]
        finished = state["outcome"] is not None
        if not finished and progress.every > 0 and not progress.out_of_time(self.settings.timeout):
            carried = {"trigger": result["trigger"], "trigger_reason": result["trigger_reason"], "started_at": result["started_at"],
                       "known": sorted(known), "job_name": wanted, "retried": self.client.retried}
            return dict(result, changed=create is not None, progress=progress.unfinished(self._awaiting(cronjob, job, watchset), carried))
        if not finished:
            if job is None:
                raise RunFailed("no new Job of {0} within {1}s".format(self._where("CronJob", cronjob), self.settings.timeout),
                                "Raise timeout to more than the schedule's interval ({0!r}), or use trigger=create.".format(
                                    (cronjob.get("spec") or {}).get("schedule")), path="timeout")
            problem = "Job {0}/{1} still {2} after {3}s".format(namespace, meta(job).get("name"), desched.job_result(job), self.settings.timeout)
            raise RunFailed(problem, "Check the Job's Pod (kubectl -n {0} describe job {1}), or raise timeout.".format(namespace, meta(job).get("name")),
                            path="timeout")
        outcome, pod = state["outcome"][0], state["outcome"][1]
        status = job.get("status") or {}
        info = {"name": meta(job).get("name"), "created": create is not None,
                "manual": (meta(job).get("annotations") or {}).get(MANUAL_ANNOTATION) == "manual", "result": outcome,
                "created_at": meta(job).get("creationTimestamp"), "start_time": status.get("startTime"),
                "completion_time": status.get("completionTime"), "failed_pods": status.get("failed") or 0}
        records = self.installation.log(pod, container) if pod is not None else []
        progress.finished("{0}: Job {1} {2} after {3:.0f} s".format(namespace, info["name"], outcome, progress.elapsed()))
        return {"records": records, "job": info, "pod": meta(pod).get("name") if pod else None}

    def _awaiting(self, cronjob: dict, job: Optional[dict], watchset: WatchSet) -> str:
        """What the run still waits for, in a status line."""
        head = "{0}: {1:.0f} of {2} s; awaiting ".format(self.settings.namespace, self.progress.elapsed(), self.settings.timeout)
        if job is None:
            return head + "the next Job of {0} (schedule {1!r})".format(self._where("CronJob", cronjob), (cronjob.get("spec") or {}).get("schedule"))
        pods = desched.job_pods(job, watchset.objects("pods"))
        phases = ", ".join("Pod {0} {1}".format(meta(p).get("name"), (p.get("status") or {}).get("phase") or "Pending") for p in pods)
        return head + "Job {0} to finish ({1})".format(meta(job).get("name"), phases or "no Pod yet")

    # ---------------------------------------------------------------------------------- Deployment
    def _deployment_cycle(self, deployment: dict, container: Optional[str]) -> Dict[str, Any]:
        """The next complete cycle of a Descheduler Deployment, read in one call (its log positions are not carried)."""
        records, _job, pod = self._deployment_log(deployment, container)
        return {"records": records, "job": None, "pod": pod}

    def _deployment_log(self, deployment: dict, container: Optional[str]) -> Tuple[List[dict], None, Optional[str]]:
        baseline: Dict[str, Optional[str]] = {}
        first = True
        pod_name = None
        while True:
            pods = [p for p in self.installation.pods("Deployment", deployment)
                    if (p.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")]
            for pod in pods:
                name = meta(pod).get("name")
                records = self.installation.log_unless_gone(pod, container)
                if records is None:  # replaced since the listing: the next listing has the Deployment's current Pod
                    baseline.pop(name, None)
                    continue
                if first or name not in baseline:
                    if first:
                        baseline[name] = records[-1]["line"] if records else None
                        continue
                    baseline[name] = None  # a Pod that appeared since the start: all of its log is new
                cycle, fresh = new_cycle(baseline[name], records)
                pod_name = name
                if cycle is not None:
                    return cycle, None, name
                if process_failed(fresh):
                    return fresh, None, name
            first = False
            if self.clock() >= self.deadline:
                problem = "no complete descheduling cycle of {0} within {1}s".format(self._where("Deployment", deployment), self.settings.timeout)
                raise RunFailed(problem, "Raise timeout to more than --descheduling-interval, and check the Pod{0}.".format(
                    " " + pod_name if pod_name else "s"), path="timeout")
            self.sleep(min(DEPLOYMENT_LOG_INTERVAL, max(0.0, self.deadline - self.clock())))


def run(options: DeschedulerRunOptions, check_mode: bool, client: Optional[Client] = None, clock: Callable[[], float] = time.monotonic,
        now: Optional[Callable[[], datetime.datetime]] = None, sleep: Callable[[float], Any] = time.sleep) -> dict:
    """The module's entry: the options checked before any request, then one run observed (the client's deadline covers
    the run's timeout on top of api_timeout)."""
    run_settings = settings(options)
    client = client or Client.from_options(options.connection, extra_timeout=run_settings.timeout)
    return Run(run_settings, client, check_mode=check_mode, clock=clock, now=now, sleep=sleep).execute()
