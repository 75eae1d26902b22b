"""descheduler_run: the options, the trigger choice, the manual Job as kubectl builds it (and sent with dry run in check
mode), when a Job is decided, the next cycle of a long-running Descheduler, and a Deployment's cycle read from its log
through a fake client."""
from __future__ import annotations

import datetime
import random

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_run as dr
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import klog
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, RunFailed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params

from ..k8s_objects import cronjob, deployment, job

NOW = datetime.datetime(2026, 11, 30, 10, 3, 30, tzinfo=datetime.timezone.utc)


def line(second, message, fields="", level="I"):
    return '{0}1130 10:05:{1:02d}.000000       1 x.go:1] "{2}"{3}'.format(level, second, message, " " + fields if fields else "")


def records(*lines):
    return klog.parse_lines(lines, year=2026)


def options(**given):
    return dr.DeschedulerRunOptions.from_params(spec_params(dr.ARG_SPEC, **given))


# ------------------------------------------------------------------------------------------ options
def test_options_from_the_spec_defaults():
    checked = dr.settings(options())
    assert (checked.namespace, checked.name, checked.trigger, checked.job_name, checked.timeout, checked.previous) == \
        ("descheduler", "descheduler", "auto", None, 600, None)
    assert dr.settings(options(previous_run={"classification": [{"node": "a"}]})).previous == [{"node": "a"}]


def test_a_bad_namespace_is_refused_with_the_fix():
    with pytest.raises(InvalidOption) as error:
        dr.settings(options(descheduler_namespace="Not_A_Namespace"))
    assert error.value.path == "descheduler_namespace" and "Use the namespace of the Descheduler" in error.value.message


# ------------------------------------------------------------------------------------------ trigger
def test_auto_waits_for_a_run_within_the_timeout_and_creates_otherwise():
    assert dr.choose_trigger("auto", "CronJob", cronjob(), 600, NOW)[0] == "wait"
    daily = cronjob()
    daily["spec"]["schedule"] = "0 3 * * *"
    trigger, reason = dr.choose_trigger("auto", "CronJob", daily, 600, NOW)
    assert trigger == "create" and "no scheduled run within timeout (600s)" in reason


def test_suspended_cronjob_is_created_under_auto_and_refused_under_wait():
    assert dr.choose_trigger("auto", "CronJob", cronjob(suspend=True), 600, NOW) == ("create", "the CronJob is suspended")
    with pytest.raises(RunFailed) as error:
        dr.choose_trigger("wait", "CronJob", cronjob(suspend=True), 600, NOW)
    assert "is suspended" in error.value.message and "trigger=create" in error.value.message


def test_deployment_is_waited_for_and_cannot_be_created():
    assert dr.choose_trigger("auto", "Deployment", deployment(), 600, NOW)[0] == "wait"
    with pytest.raises(InvalidOption) as error:
        dr.choose_trigger("create", "Deployment", deployment(), 600, NOW)
    assert error.value.path == "trigger"


def test_unreadable_schedule_waits_for_the_controller():
    odd = cronjob()
    odd["spec"]["schedule"] = "every two minutes"
    trigger, reason = dr.choose_trigger("auto", "CronJob", odd, 600, NOW)
    assert trigger == "wait" and "not understood" in reason


# ------------------------------------------------------------------------------------------ manual job
def test_manual_job_is_what_kubectl_create_job_from_cronjob_builds():
    source = cronjob()
    source["spec"]["jobTemplate"]["metadata"] = {"labels": {"app.kubernetes.io/name": "descheduler"}, "annotations": {"a": "b"}}
    built = dr.manual_job(source, "descheduler-manual-abcde")
    assert built["metadata"]["annotations"] == {"a": "b", "cronjob.kubernetes.io/instantiate": "manual"}
    assert built["metadata"]["labels"] == {"app.kubernetes.io/name": "descheduler"}
    assert built["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "descheduler",
                                                     "uid": "uid-cronjob", "controller": True, "blockOwnerDeletion": True}]
    assert built["spec"] == source["spec"]["jobTemplate"]["spec"]
    assert built["metadata"]["namespace"] == "descheduler"


def test_manual_job_name_fits_a_label_value():
    name = dr.manual_job_name("d" * 60, random.Random(1))
    assert len(name) <= 63 and "-manual-" in name
    assert dr.manual_job_name("descheduler", random.Random(1)).startswith("descheduler-manual-")


def test_job_name_is_validated():
    with pytest.raises(InvalidOption):
        dr.settings(options(job_name="Not_A_Name"))
    with pytest.raises(InvalidOption):
        dr.settings(options(job_name="ok", trigger="wait"))
    with pytest.raises(InvalidOption):
        dr.settings(options(timeout=0))


# ------------------------------------------------------------------------------------------ job outcome
def pod(name, phase, job_name):
    return {"metadata": {"name": name, "creationTimestamp": "2026-11-30T10:0{0}:00Z".format(len(name) % 10),
                         "labels": {"batch.kubernetes.io/job-name": job_name}}, "status": {"phase": phase}}


def test_complete_job_waits_for_its_succeeded_pod():
    finished = job("descheduler-1", "2026-11-30T10:04:00Z")
    assert dr.job_outcome(finished, []) is None
    done = pod("descheduler-1-abcde", "Succeeded", "descheduler-1")
    assert dr.job_outcome(finished, [done]) == ("Complete", done)


def test_first_failed_pod_decides_before_the_backoff_limit():
    running = job("descheduler-1", "2026-11-30T10:04:00Z", result="Running")
    failed = pod("descheduler-1-abcde", "Failed", "descheduler-1")
    assert dr.job_outcome(running, [pod("descheduler-1-x", "Running", "descheduler-1")]) is None
    assert dr.job_outcome(running, [failed]) == ("Failed", failed)
    assert dr.job_outcome(job("descheduler-1", "t", result="Failed"), []) == ("Failed", None)


# ------------------------------------------------------------------------------------------ deployment cycles
CYCLE_1 = [line(1, klog.CYCLE_START), line(2, "Node has been classified", 'category="underutilized" node="b" usagePercentage={"cpu":1}'),
           line(3, "Number of evictions/requests", "totalEvicted=0 evictionRequests=0")]
CYCLE_2 = [line(10, klog.CYCLE_START), line(11, "Eviction in background assumed", 'pod="ns/virt-launcher-vm-1-abcde"'),
           line(12, "Number of evictions/requests", "totalEvicted=0 evictionRequests=1")]


def test_new_cycle_is_the_first_complete_one_after_the_baseline():
    cycle, _fresh = dr.new_cycle(CYCLE_1[-1], records(*CYCLE_1, *CYCLE_2))
    assert [r["line"] for r in cycle] == CYCLE_2
    assert dr.new_cycle(CYCLE_2[-1], records(*CYCLE_1, *CYCLE_2))[0] is None


def test_cycle_in_progress_at_the_start_does_not_count():
    cycle, _fresh = dr.new_cycle(CYCLE_1[1], records(*CYCLE_1, *CYCLE_2))
    assert [r["line"] for r in cycle] == CYCLE_2
    assert dr.new_cycle(CYCLE_1[1], records(*CYCLE_1))[0] is None


def test_without_a_baseline_every_line_is_new():
    cycle, fresh = dr.new_cycle(None, records(*CYCLE_1))
    assert len(cycle) == 3 and len(fresh) == 3


class FakeClient:
    """Serves the descheduler Deployment and one Pod whose log grows by one cycle per read."""

    def __init__(self, logs):
        self.logs = list(logs)
        self.reads = 0
        self.retried = []

    def find_kinds(self, wanted):
        return {pair: pair for pair in wanted}

    def list(self, resource, namespace=None, **_kwargs):
        if resource == ("Deployment", "apps"):
            found = deployment()
            found["spec"]["selector"] = {"matchLabels": {"app": "descheduler"}}
            return [found]
        if resource == ("Pod", ""):
            return [{"metadata": {"name": "descheduler-abc", "namespace": namespace, "labels": {"app": "descheduler"}},
                     "status": {"phase": "Running", "startTime": "2026-11-30T10:00:00Z"}}]
        return []

    def pod_log(self, _namespace, _name, container=None, tail_lines=None):
        assert container == "descheduler" and tail_lines
        text = self.logs[min(self.reads, len(self.logs) - 1)]
        self.reads += 1
        return text


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_deployment_run_reads_the_next_complete_cycle():
    connection = FakeClient(["\n".join(CYCLE_1), "\n".join(CYCLE_1 + CYCLE_2[:2]), "\n".join(CYCLE_1 + CYCLE_2)])
    clock = FakeClock()
    result = dr.run(options(trigger="auto", timeout=60), False, client=connection, clock=clock, now=lambda: NOW, sleep=clock.sleep)
    assert result["trigger"] == "wait" and result["descheduler"]["kind"] == "Deployment" and result["job"] is None
    assert result["log_lines"] == CYCLE_2 and result["pod"] == "descheduler-abc"
    assert result["background_evictions"][0]["name"] == "virt-launcher-vm-1-abcde"
    assert result["totals"] == {"total_evicted": 0, "eviction_requests": 1}
    assert connection.reads == 3 and clock.now == pytest.approx(2 * dr.DEPLOYMENT_LOG_INTERVAL)


def test_deployment_run_fails_on_a_rejected_policy_and_times_out_without_a_cycle():
    failing = line(20, "command failed", 'err="only Exclude namespaces can be set, inclusion is not supported"', level="E")
    connection = FakeClient(["\n".join(CYCLE_1), "\n".join(CYCLE_1 + [failing])])
    clock = FakeClock()
    with pytest.raises(RunFailed) as error:
        dr.run(options(timeout=60), False, client=connection, clock=clock, now=lambda: NOW, sleep=clock.sleep)
    assert "only Exclude namespaces can be set, inclusion is not supported" in error.value.message
    assert "Fix the policy in ConfigMap descheduler/descheduler" in error.value.message   # the one behind --policy-config-file
    clock = FakeClock()
    with pytest.raises(RunFailed) as error:
        dr.run(options(timeout=5), False, client=FakeClient(["\n".join(CYCLE_1)]), clock=clock, now=lambda: NOW, sleep=clock.sleep)
    assert error.value.path == "timeout" and "no complete descheduling cycle" in error.value.message


class ReplacedPodClient(FakeClient):
    """A Deployment whose Pod `descheduler-old` is replaced by `descheduler-new` after the first listing: the old one is
    listed once more but gone (404) when its log is read, as after a restart, an eviction or a node drain."""

    def __init__(self, new_log, gone_status=404):
        super().__init__([])
        self.new_log = new_log
        self.gone_status = gone_status
        self.listings = 0
        self.read = []

    def list(self, resource, namespace=None, **_kwargs):
        if resource != ("Pod", ""):
            return super().list(resource, namespace)
        self.listings += 1
        names = ["descheduler-old"] + (["descheduler-new"] if self.listings > 1 else [])
        return [{"metadata": {"name": name, "namespace": namespace, "labels": {"app": "descheduler"},
                              "creationTimestamp": "2026-11-30T10:0{0}:00Z".format(index)},
                 "status": {"phase": "Running"}} for index, name in enumerate(names)]

    def pod_log(self, _namespace, name, container=None, tail_lines=None):
        self.read.append(name)
        if name == "descheduler-new":
            return self.new_log
        if self.listings == 1:
            return "\n".join(CYCLE_1)
        raise ApiFailure("read the log of pod descheduler/" + name, self.gone_status, "NotFound", 'pods "{0}" not found'.format(name))


def test_deployment_run_reads_the_current_pod_when_its_pod_was_replaced_meanwhile():
    connection = ReplacedPodClient("\n".join(CYCLE_2))
    clock = FakeClock()
    result = dr.run(options(trigger="wait", timeout=60), False, client=connection, clock=clock, now=lambda: NOW, sleep=clock.sleep)
    # the new Pod started after the module did: all of its log is new
    assert result["pod"] == "descheduler-new" and result["log_lines"] == CYCLE_2
    assert connection.read == ["descheduler-old", "descheduler-old", "descheduler-new"]


def test_deployment_run_with_its_pod_gone_is_still_bounded_by_the_timeout():
    connection = ReplacedPodClient("\n".join(CYCLE_1[:1]))    # the new Pod never completes a cycle
    clock = FakeClock()
    with pytest.raises(RunFailed) as error:
        dr.run(options(trigger="wait", timeout=5), False, client=connection, clock=clock, now=lambda: NOW, sleep=clock.sleep)
    assert error.value.path == "timeout" and "no complete descheduling cycle" in error.value.message
    assert clock.now == pytest.approx(5)


def test_deployment_run_fails_on_a_log_it_may_not_read():
    connection = ReplacedPodClient("\n".join(CYCLE_2), gone_status=403)
    clock = FakeClock()
    with pytest.raises(ApiFailure) as error:
        dr.run(options(trigger="wait", timeout=60), False, client=connection, clock=clock, now=lambda: NOW, sleep=clock.sleep)
    assert error.value.status == 403


def test_previous_run_yields_category_swaps():
    assert dr.previous_classification({"classification": [{"node": "a"}, "junk"]}) == [{"node": "a"}]
    assert dr.previous_classification(None) is None


# ------------------------------------------------------------------------------------------ check mode
class CronJobClient:
    """Serves the descheduler CronJob and answers a create as the API server does (with dry run: nothing stored);
    it cannot watch, so a check-mode run that waited would fail."""

    def __init__(self, status=None):
        self.status = status
        self.created = []
        self.retried = []

    def find_kinds(self, wanted):
        return {pair: pair for pair in wanted}

    def list(self, resource, namespace=None, **_kwargs):
        return [cronjob()] if resource == ("CronJob", "batch") else []

    def create(self, resource, body, namespace=None, dry_run=False):
        self.created.append((resource, namespace, body["metadata"]["name"], dry_run))
        if self.status:
            raise ApiFailure("create jobs.batch descheduler/" + body["metadata"]["name"], self.status, "AlreadyExists", "already exists")
        return dict(body, metadata=dict(body["metadata"], uid="uid-dry-run", creationTimestamp="2026-11-30T10:03:30Z"))


def test_check_mode_sends_the_job_with_dry_run_and_does_not_wait():
    client = CronJobClient()
    result = dr.run(options(trigger="create", job_name="checked"), True, client=client, now=lambda: NOW)
    assert client.created == [(("Job", "batch"), "descheduler", "checked", True)]
    assert result["changed"] is True and result["would_create"]["metadata"]["uid"] == "uid-dry-run"  # the server's answer
    assert result["would_create"]["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert result["job"] == {"name": "checked", "created": False, "manual": True, "result": None}
    assert result["msg"] == "check mode: would create Job descheduler/checked from CronJob descheduler/descheduler"
    assert result["log_lines"] == [] and result["waited_seconds"] == 0.0


def test_check_mode_reports_a_job_that_exists_as_a_real_run_does():
    with pytest.raises(RunFailed) as error:
        dr.run(options(trigger="create", job_name="taken"), True, client=CronJobClient(status=409), now=lambda: NOW)
    assert error.value.path == "job_name" and "Job descheduler/taken already exists" in error.value.message
