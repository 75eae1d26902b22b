"""descheduler_storm_breaker's service on an in-memory cluster: it trips on failures and on a VM that moves too often,
pauses the CronJob (or the Deployment) with its record in one write, waits by watching for the migrations in flight,
is no change once tripped, leaves a workload paused by someone else alone, runs as dry runs in check mode, and a reset
restores the record (deleting ACP's pausing ResourcePatches first), after which the old failures do not count."""
from __future__ import annotations

import datetime
import json

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import storm_breaker as sb
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_storm_breaker as svc

from .. import k8s_objects as k8s
from ..checks.test_cooldown import NOW, at, migration
from ..checks.test_storm_breaker import pause_patch
from .memory_cluster import MemoryCluster


def options(**given) -> svc.DeschedulerStormBreakerOptions:
    return svc.DeschedulerStormBreakerOptions.from_params(spec_params(svc.ARG_SPEC, **given))


def failures(count=3, minutes=5):
    return [migration("f-{0}".format(i), vm="vm-{0}".format(i), phase="Failed", ended_minutes_ago=minutes + i,
                      migrationState={"failureReason": "simulated failure"}) for i in range(1, count + 1)]


def run(api, check_mode=False, now=NOW, **given):
    return svc.run(options(**dict({"wait_timeout": 5}, **given)), check_mode, client=api, now=lambda: now, watch=api.watch)


def cronjob(api) -> dict:
    return api.find("CronJob", "descheduler", "descheduler")


@pytest.mark.parametrize("given, path", [
    ({"window": "an hour"}, "window"), ({"window": 0}, "window"), ({"max_failed_migrations": 0}, "max_failed_migrations"),
    ({"max_migrations_per_vm": -1}, "max_migrations_per_vm"), ({"wait_timeout": 0}, "wait_timeout"), ({"namespaces": ["A"]}, "namespaces"),
    ({"descheduler_name": "a b"}, "descheduler_name"),
])
def test_bad_options_are_refused_before_any_request(given, path):
    api = MemoryCluster([k8s.cronjob()])
    with pytest.raises(InvalidOption) as caught:
        run(api, **given)
    assert caught.value.path == path and api.requests == []


def test_below_the_limits_nothing_changes_and_the_counts_are_said():
    api = MemoryCluster([k8s.cronjob()] + failures(2) + [migration("m-{0}".format(i), ended_minutes_ago=i) for i in (1, 2, 3)])
    result = run(api)
    assert result["changed"] is False and result["tripped"] is False and api.writes() == []
    assert result["message"] == ("Storm breaker not tripped: 2 failed migrations (trips at 3), at most 3 migrations of one VM (trips above 3) "
                                 "within 1h.")


def test_three_failures_suspend_the_cronjob_with_the_record_in_the_same_write():
    api = MemoryCluster([k8s.cronjob()] + failures(3))
    result = run(api)
    assert result["changed"] and result["tripped"] and result["tripped_now"]
    patches = [w for w in api.writes() if w[0] == "patch"]
    assert len(patches) == 1 and patches[0][4]["spec"] == {"suspend": True} and sb.BREAKER_RECORD in patches[0][4]["metadata"]["annotations"]
    assert cronjob(api)["spec"]["suspend"] is True
    record = json.loads(cronjob(api)["metadata"]["annotations"][sb.BREAKER_RECORD])
    assert record["suspend"] is False and record["tripped_at"] == at(0) and "3 failed migrations within 1h" in record["reason"]
    assert result["message"].startswith("Storm breaker tripped: 3 failed migrations within 1h (max_failed_migrations 3): desched-test/f-3")
    assert "CronJob descheduler/descheduler is paused" in result["message"]
    assert [f["failure_reason"] for f in result["failed_migrations"]] == ["simulated failure"] * 3
    assert result["diff"]["before"] == {"suspend": False, "annotations": {}} and result["diff"]["after"]["suspend"] is True
    assert result["descheduler"] == {"kind": "CronJob", "namespace": "descheduler", "name": "descheduler", "paused": True, "paused_by_breaker": True}


def test_a_vm_that_moved_four_times_trips_it():
    api = MemoryCluster([k8s.cronjob()] + [migration("m-{0}".format(i), vm="vm-a", ended_minutes_ago=i) for i in (1, 2, 3, 4)])
    result = run(api)
    assert result["tripped_now"] and result["frequent_movers"][0]["vm"] == "vm-a" and result["frequent_movers"][0]["migrations"] == 4
    assert "desched-test/vm-a migrated 4 times within 1h (max_migrations_per_vm 3)" in result["message"]


def test_once_tripped_a_second_run_changes_nothing():
    api = MemoryCluster([k8s.cronjob()] + failures(3))
    run(api)
    again = run(api, now=NOW + datetime.timedelta(minutes=1))
    assert again["changed"] is False and again["tripped"] is True and again["tripped_now"] is False
    assert len(api.writes()) == 1 and "is paused" in again["message"]


def test_a_cronjob_suspended_by_someone_else_is_left_alone():
    api = MemoryCluster([k8s.cronjob(suspend=True)] + failures(3))
    result = run(api)
    assert result["tripped"] and result["changed"] is False and api.writes() == []
    assert "already paused (not by the breaker)" in result["message"] and result["record"] is None


def test_check_mode_pauses_as_a_dry_run_and_waits_for_nothing():
    api = MemoryCluster([k8s.cronjob()] + failures(3) + [migration("hang", vm="vm-9", phase="Running")])
    result = run(api, check_mode=True)
    assert result["changed"] and result["dry_run"] and [w[5] for w in api.writes()] == [True]
    assert cronjob(api)["spec"]["suspend"] is False and "would be paused (check mode)" in result["message"]
    assert [m["name"] for m in result["in_flight"]] == ["hang"] and result["waited_seconds"] == 0.0
    assert not [r for r in api.requests if r[0] == "watch"]


def test_tripped_it_watches_until_the_migrations_in_flight_are_final():
    running = migration("run", vm="vm-9", phase="Running")
    done = migration("run", vm="vm-9", phase="Succeeded", ended_minutes_ago=0)
    done["metadata"]["resourceVersion"] = "101"
    api = MemoryCluster([k8s.cronjob(), running] + failures(3), watches=[[{"type": "MODIFIED", "object": done}]])
    result = run(api)
    assert result["tripped_now"] and [m["name"] for m in result["in_flight"]] == ["run"] and result["unfinished"] == []
    assert [r[0] for r in api.requests].count("watch") >= 1 and result["waited_seconds"] < 5


def test_a_migration_still_in_flight_at_the_timeout_fails_with_the_pause_kept():
    api = MemoryCluster([k8s.cronjob(), migration("hang", vm="vm-9", phase="Running")] + failures(3))
    with pytest.raises(svc.MigrationsStillRunning) as caught:
        run(api, wait_timeout=1)
    assert "1 migrations were still in flight after 1s: desched-test/hang (Running)" in caught.value.message
    assert caught.value.details["result"]["tripped_now"] and cronjob(api)["spec"]["suspend"] is True


def test_without_wait_nothing_is_watched():
    api = MemoryCluster([k8s.cronjob(), migration("hang", vm="vm-9", phase="Running")] + failures(3))
    assert run(api, wait=False)["tripped_now"] and not [r for r in api.requests if r[0] == "watch"]


def test_a_deployment_is_scaled_to_zero_and_back_to_its_replicas():
    workload = k8s.deployment()
    workload["spec"]["replicas"] = 2
    api = MemoryCluster([workload] + failures(3), served=["Deployment", "CronJob", "Job", "Pod", "VirtualMachineInstanceMigration"])
    tripped = run(api)
    stored = api.find("Deployment", "descheduler", "descheduler")
    assert tripped["descheduler"]["kind"] == "Deployment" and stored["spec"]["replicas"] == 0
    assert stored["metadata"]["annotations"][sb.ROLLBACK_REPLICAS] == "2"
    reset = run(api, state="reset")
    stored = api.find("Deployment", "descheduler", "descheduler")
    assert reset["restored"] == {"replicas": 2} and stored["spec"]["replicas"] == 2
    assert sb.ROLLBACK_REPLICAS not in stored["metadata"]["annotations"] and reset["resource_patches_deleted"] == []


def test_reset_restores_the_cronjob_deletes_the_pausing_patches_first_and_notes_the_time():
    api = MemoryCluster([k8s.cronjob()] + failures(3))
    run(api)
    api.objects["ResourcePatch"] = [pause_patch("rp-pause"), k8s.resource_patch("rp-policy")]
    reset = run(api, state="reset", now=NOW + datetime.timedelta(minutes=1))
    assert reset["changed"] and reset["reset"] and reset["restored"] == {"suspend": False}
    assert reset["resource_patches_deleted"] == ["rp-pause"] and [p["metadata"]["name"] for p in api.objects["ResourcePatch"]] == ["rp-policy"]
    writes = api.writes()
    assert writes[-2][:2] == ("delete", "ResourcePatch") and writes[-1][:2] == ("patch", "CronJob")
    notes = cronjob(api)["metadata"]["annotations"]
    assert sb.BREAKER_RECORD not in notes and notes[sb.BREAKER_RESET] == at(-1) and cronjob(api)["spec"]["suspend"] is False
    # the failures that tripped it are before the reset: they do not trip it again
    after = run(api, now=NOW + datetime.timedelta(minutes=2))
    assert after["tripped"] is False and after["window"]["since"] == at(-1)


def test_reset_without_a_record_changes_nothing():
    api = MemoryCluster([k8s.cronjob(suspend=True)])
    result = run(api, state="reset")
    assert result["changed"] is False and result["reset"] is False and api.writes() == []
    assert "nothing to reset" in result["message"] and cronjob(api)["spec"]["suspend"] is True


def test_reset_in_check_mode_is_dry_runs():
    api = MemoryCluster([k8s.cronjob()] + failures(3))
    run(api)
    api.objects["ResourcePatch"] = [pause_patch("rp-pause")]
    result = run(api, state="reset", check_mode=True)
    assert result["changed"] and [w[-1] for w in api.writes()[1:]] == [True, True]
    assert cronjob(api)["spec"]["suspend"] is True and api.objects["ResourcePatch"]


def test_a_stale_record_on_a_running_cronjob_does_not_count_as_tripped():
    api = MemoryCluster([k8s.cronjob()] + failures(3))
    run(api)
    api.find("CronJob", "descheduler", "descheduler")["spec"]["suspend"] = False   # resumed by hand, record left
    result = run(api, max_failed_migrations=5)
    assert result["tripped"] is False and result["record"] is not None


def test_no_descheduler_is_said_with_the_fix():
    with pytest.raises(RebalanceError) as caught:
        run(MemoryCluster([]))
    assert caught.value.path == "descheduler_name" and "Install the Descheduler plugin" in caught.value.message


def test_migrations_are_listed_once_per_namespace_in_scope():
    api = MemoryCluster([k8s.cronjob()])
    run(api, namespaces=["a", "b"])
    assert [(r[1], r[2]) for r in api.requests if r[0] == "list" and r[1] == "VirtualMachineInstanceMigration"] == [
        ("VirtualMachineInstanceMigration", "a"), ("VirtualMachineInstanceMigration", "b")]


def test_paused_by_someone_else_it_still_waits_for_the_migrations_in_flight():
    done = migration("run", vm="vm-9", phase="Failed", ended_minutes_ago=0)
    api = MemoryCluster([k8s.cronjob(suspend=True), migration("run", vm="vm-9", phase="Running")] + failures(3),
                        watches=[[{"type": "MODIFIED", "object": done}]])
    result = run(api)
    assert result["tripped_now"] and api.writes() == [] and result["unfinished"] == []
    assert [r[0] for r in api.requests].count("watch") >= 1 and "left as it is." in result["message"]
