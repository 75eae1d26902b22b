"""The storm breaker's pure decisions: the window (never past a reset), the counts, the limits and their reasons, the
record it writes on the CronJob or Deployment and what a reset writes back, the ACP ResourcePatches that hold a pause."""
from __future__ import annotations

import datetime
import json

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import storm_breaker as sb

from ..k8s_objects import cronjob, deployment, resource_patch
from .test_cooldown import NOW, at, migration

HOUR = 3600


def counted(vmims, window=HOUR, workload=None):
    return sb.counts(vmims, sb.window_start(NOW, window, workload))


def test_the_window_starts_an_hour_ago_or_at_the_last_reset():
    assert sb.window_start(NOW, HOUR, cronjob()) == NOW - datetime.timedelta(hours=1)
    reset = cronjob()
    reset["metadata"]["annotations"] = {sb.BREAKER_RESET: at(20)}
    assert sb.window_start(NOW, HOUR, reset) == NOW - datetime.timedelta(minutes=20)
    long_ago = cronjob()
    long_ago["metadata"]["annotations"] = {sb.BREAKER_RESET: at(120)}
    assert sb.window_start(NOW, HOUR, long_ago) == NOW - datetime.timedelta(hours=1)


def test_three_failures_within_the_hour_trip_it_and_are_named():
    vmims = [migration("f-{0}".format(i), vm="vm-{0}".format(i), phase="Failed", ended_minutes_ago=10 * i, migrationState={"failureReason": "boom"})
             for i in (1, 2, 3)] + [migration("f-old", phase="Failed", ended_minutes_ago=90)]
    verdict = sb.evaluate(counted(vmims), max_failed=3, max_per_vm=3, window=HOUR)
    assert verdict["trips"] and [f["name"] for f in verdict["failed_migrations"]] == ["f-3", "f-2", "f-1"]
    assert verdict["failed_migrations"][0]["failure_reason"] == "boom" and verdict["frequent_movers"] == []
    assert verdict["reasons"] == ["3 failed migrations within 1h (max_failed_migrations 3): desched-test/f-3, desched-test/f-2, desched-test/f-1"]


def test_two_failures_do_not_trip_it():
    vmims = [migration("f-1", phase="Failed", ended_minutes_ago=5), migration("f-2", phase="Failed", ended_minutes_ago=6)]
    verdict = sb.evaluate(counted(vmims), max_failed=3, max_per_vm=3, window=HOUR)
    assert not verdict["trips"] and len(verdict["failed_migrations"]) == 2 and verdict["reasons"] == []


def test_a_vm_that_migrated_more_than_the_limit_trips_it():
    vmims = [migration("m-{0}".format(i), vm="vm-a", ended_minutes_ago=5 * i) for i in (1, 2, 3, 4)]
    vmims += [migration("n-{0}".format(i), vm="vm-b", ended_minutes_ago=5 * i) for i in (1, 2, 3)]
    verdict = sb.evaluate(counted(vmims), max_failed=3, max_per_vm=3, window=HOUR)
    assert verdict["trips"] and verdict["most_migrations_of_one_vm"] == 4
    assert verdict["frequent_movers"] == [{"namespace": "desched-test", "vm": "vm-a", "migrations": 4, "names": ["m-4", "m-3", "m-2", "m-1"]}]
    assert verdict["reasons"] == ["desched-test/vm-a migrated 4 times within 1h (max_migrations_per_vm 3)"]


def test_migrations_before_a_reset_do_not_count_again():
    vmims = [migration("f-{0}".format(i), phase="Failed", ended_minutes_ago=30 + i) for i in (1, 2, 3)]
    reset = cronjob()
    reset["metadata"]["annotations"] = {sb.BREAKER_RESET: at(25)}
    assert sb.evaluate(counted(vmims, workload=reset), 3, 3, HOUR)["trips"] is False
    assert sb.evaluate(counted(vmims), 3, 3, HOUR)["trips"] is True


def test_many_failures_are_named_up_to_five():
    vmims = [migration("f-{0}".format(i), phase="Failed", ended_minutes_ago=i) for i in range(1, 9)]
    reason = sb.evaluate(counted(vmims), 3, 3, HOUR)["reasons"][0]
    assert reason.startswith("8 failed migrations within 1h") and reason.endswith("desched-test/f-1 and 3 more")


@pytest.mark.parametrize("seconds, text", [(3600, "1h"), (900, "15m"), (5400, "1h30m"), (45, "45s"), (0, "0s"), (3661, "1h1m1s")])
def test_windows_read_as_durations(seconds, text):
    assert sb.describe_seconds(seconds) == text


def test_tripping_a_cronjob_suspends_it_and_records_that_it_ran():
    body = sb.trip_patch("CronJob", cronjob(), at(0), "3 failed migrations")
    assert body["spec"] == {"suspend": True}
    record = json.loads(body["metadata"]["annotations"][sb.BREAKER_RECORD])
    assert record == {"tripped_at": at(0), "kind": "CronJob", "reason": "3 failed migrations", "suspend": False}
    assert sb.ROLLBACK_REPLICAS not in body["metadata"]["annotations"]


def test_tripping_a_deployment_scales_it_to_zero_and_keeps_its_replicas_where_the_rollback_looks():
    workload = deployment()
    workload["spec"]["replicas"] = 2
    body = sb.trip_patch("Deployment", workload, at(0), "why")
    assert body["spec"] == {"replicas": 0} and body["metadata"]["annotations"][sb.ROLLBACK_REPLICAS] == "2"
    assert json.loads(body["metadata"]["annotations"][sb.BREAKER_RECORD])["replicas"] == 2


def test_the_record_is_read_back_and_a_broken_one_is_none():
    workload = cronjob()
    workload["metadata"]["annotations"] = sb.trip_patch("CronJob", cronjob(), at(0), "why")["metadata"]["annotations"]
    assert sb.read_record(workload)["reason"] == "why"
    workload["metadata"]["annotations"][sb.BREAKER_RECORD] = "not json"
    assert sb.read_record(workload) is None and sb.read_record(cronjob()) is None
    workload["metadata"]["annotations"][sb.BREAKER_RECORD] = "[1]"
    assert sb.read_record(workload) is None


def test_a_reset_restores_the_record_and_notes_the_time():
    assert sb.reset_patch("CronJob", {"suspend": False}, at(0)) == {
        "metadata": {"annotations": {sb.BREAKER_RECORD: None, sb.BREAKER_RESET: at(0)}}, "spec": {"suspend": False}}
    assert sb.reset_patch("Deployment", {"replicas": 2}, at(0)) == {
        "metadata": {"annotations": {sb.BREAKER_RECORD: None, sb.BREAKER_RESET: at(0), sb.ROLLBACK_REPLICAS: None}}, "spec": {"replicas": 2}}


def test_paused_is_suspend_or_zero_replicas():
    assert sb.paused("CronJob", cronjob(suspend=True)) and not sb.paused("CronJob", cronjob())
    scaled = deployment()
    scaled["spec"]["replicas"] = 0
    assert sb.paused("Deployment", scaled) and not sb.paused("Deployment", deployment())
    unset = deployment()
    del unset["spec"]["replicas"]
    assert not sb.paused("Deployment", unset)


def pause_patch(name, kind="CronJob", paths=("/spec/suspend",)):
    patch = resource_patch(name, target_kind=kind)
    patch["spec"]["jsonPatch"] = [{"op": "replace", "path": path, "value": True} for path in paths]
    return patch


def test_only_the_resource_patches_that_only_pause_the_workload_are_found():
    patches = [pause_patch("rp-pause"), pause_patch("rp-more", paths=("/spec/suspend", "/spec/schedule")),
               resource_patch("rp-policy"), pause_patch("rp-other", kind="Deployment", paths=("/spec/replicas",))]
    assert sb.pausing_patches(patches, "CronJob", "descheduler", "descheduler") == ["rp-pause"]
    assert sb.pausing_patches(patches, "Deployment", "descheduler", "descheduler") == ["rp-other"]
    assert sb.pausing_patches(patches, "CronJob", "descheduler", "another") == []


def test_the_diff_shows_the_pause_and_the_breakers_annotations():
    workload = cronjob(suspend=True)
    workload["metadata"]["annotations"] = {sb.BREAKER_RECORD: "{}", "unrelated": "x"}
    assert sb.workload_state("CronJob", workload) == {"suspend": True, "annotations": {sb.BREAKER_RECORD: "{}"}}
    assert sb.workload_state("Deployment", deployment()) == {"replicas": 1, "annotations": {}}
