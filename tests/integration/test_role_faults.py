"""Faults on the roles, on the rebalance page's setting: a migration fails during `rebalance_validate` (the role fails
naming the migration's error and sets its result), then `descheduler_rollback` runs through a 503 burst and a 429 with
Retry-After on the API and still restores the chart's policy and resumes the CronJob only after the migrations are
final."""
from __future__ import annotations

import threading

import pytest

from support.policy import PAGE_OPTIONS
from support.simulator import kubectl_available, running_kubesim, suspend_descheduler
from support.waiting import wait_for

from .ansible_run import run_role
from .test_descheduler_policy import policy_text, resource_patches, run_module
from .test_descheduler_rollback_role import Timeline, cronjob, set_fault
from .test_rebalance_validate_role import validate, vmis

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]


@pytest.fixture
def sim(tmp_path):
    with running_kubesim("rebalance-two-workers", tmp_path / "sim") as started:
        yield started


def test_failed_migration_in_validation_then_rollback_through_api_faults(sim, tmp_path):
    chart_policy = policy_text(sim)
    suspend_descheduler(sim)
    applied = run_module(sim, **PAGE_OPTIONS)
    set_fault(sim, "fail")
    # the verification waits out its timeout for vm-2 (never evicted) even after vm-1's failure decided the verdict
    process = validate(sim, expect_failure=True, rebalance_validate_cycles=2, rebalance_validate_timeout=15)
    result = process.result
    assert process.rc != 0, process.stdout[-3000:]
    assert result["passed"] is False and result["stopped_because"] == "migration_failed", result
    assert "simulated failure (kubesim.io/migration=fail)" in result["failure"] and result["failure"].startswith("cycle 1: ")
    assert "simulated failure" in process.stdout  # the play's failure names it too
    assert {v["status"]["nodeName"] for v in vmis(sim).values()} == {"worker-a"} and result["moved"] == []

    # the Descheduler back on its schedule; KubeVirt retries the evacuation, now with success
    sim.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    set_fault(sim, "hang")
    faults = [sim.add_fault(verb="list", resource="resourcepatches", status=503, count=2),
              sim.add_fault(verb="get", resource="configmaps", name="descheduler", status=429, retryAfter=1, count=1)]
    with Timeline(sim) as timeline:
        wait_for(lambda: timeline.unfinished, timeout=30, what="a migration in flight")
        runs = {}
        role = threading.Thread(target=lambda: runs.setdefault("rollback", run_role(sim, "descheduler_rollback", {
            "descheduler_rollback_backup_dir": str(tmp_path / "backups"), "descheduler_rollback_timeout": 60})))
        role.start()
        wait_for(lambda: timeline.suspend and timeline.suspend[-1][1], timeout=60, what="the CronJob suspended")
        set_fault(sim, "")
        sim.kubectl("delete", "vmim", "--all", "-n", "desched-test", "--wait=false")
        role.join(90)
    listed = {rule["id"]: rule for rule in sim.admin("GET", "faults")["faults"]}  # a rule whose count is used up may be gone
    rollback = runs["rollback"].result
    assert rollback["resource_patches_deleted"] == [applied["resource_patch"]["name"]] and rollback["policy_restored"] is True
    assert rollback["suspended"] is True and rollback["resumed"] is True
    assert policy_text(sim) == chart_policy and resource_patches(sim) == [] and cronjob(sim)["spec"]["suspend"] is False
    suspended_at, resumed_at = timeline.suspend[-2][0], timeline.suspend[-1][0]
    in_flight = [name for name, at in timeline.seen.items() if at < suspended_at and timeline.final.get(name, float("inf")) > suspended_at]
    assert in_flight and all(timeline.final.get(name, float("inf")) <= resumed_at for name in in_flight), (timeline.final, resumed_at)
    assert all(rule["id"] not in listed or listed[rule["id"]]["fired"] >= 1 for rule in faults), listed
