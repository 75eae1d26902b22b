"""`kubevirt_ops.rebalance.descheduler_storm_breaker` against the simulator (rebalance-two-workers, the ACP package, whose
default policy moves no VM): three failed migrations (the simulator's `kubesim.io/migration: fail`) trip it through the
module, which suspends the CronJob with its record (ACP keeps the suspend as a ResourcePatch) and returns once the
migration in flight is final; a second run changes nothing; check mode and the reset (the pausing ResourcePatch deleted,
the CronJob running again) follow; then a VM that migrated four times trips it again; last, playbooks/cooldown.yml marks
the VM that moved, trips the breaker on failures and fails with the reasons, and the rollback lifts the marks and resets
the breaker."""
from __future__ import annotations

import json

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import COOLDOWN_UNTIL, PREFER_NO_EVICTION
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.storm_breaker import BREAKER_RECORD, BREAKER_RESET
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_storm_breaker import (
    ARG_SPEC,
    DeschedulerStormBreakerOptions,
    run,
)

from support.simulator import ROOT

from .ansible_run import run_ansible_module, run_playbook, run_role
from .test_vm_migration_cooldown import NAMESPACE, migrate
from .test_vm_migration_wait import phase_of, start_migration

pytestmark = pytest.mark.simulator

MODULE = "kubevirt_ops.rebalance.descheduler_storm_breaker"


def breaker(sim, check_mode=False, **given) -> dict:
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, **dict({"namespaces": [NAMESPACE], "wait_timeout": 60}, **given))
    return run(DeschedulerStormBreakerOptions.from_params(params), check_mode)


def cronjob(sim) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")


def pausing_patches(sim) -> list:
    return [p["metadata"]["name"] for p in sim.kubectl_json("-n", "descheduler", "get", "resourcepatches")["items"]
            if p["spec"]["target"]["kind"] == "CronJob" and [op["path"] for op in p["spec"]["jsonPatch"]] == ["/spec/suspend"]]


@pytest.fixture(scope="module")
def sim(rebalance_two_workers):
    return rebalance_two_workers


def test_failed_migrations_trip_it_it_waits_for_the_one_in_flight_and_a_reset_restores_the_cronjob(sim):
    try:
        failed = [migrate(sim, "vm-1", "fail") for _attempt in range(3)]
    finally:
        sim.kubectl("annotate", "vmi", "vm-1", "-n", NAMESPACE, "kubesim.io/migration-")
    assert [phase_of(sim, name) for name in failed] == ["Failed"] * 3
    in_flight = start_migration(sim, "vm-2", "slow")
    try:  # in this process, so that the module starts while the slow migration (about 4.5 s) runs
        result = breaker(sim)
    finally:
        sim.kubectl("annotate", "vmi", "vm-2", "-n", NAMESPACE, "kubesim.io/migration-")
    assert result["changed"] and result["tripped"] and result["tripped_now"]
    assert result["message"].startswith("Storm breaker tripped: 3 failed migrations within 1h (max_failed_migrations 3): ")
    assert sorted(f["name"] for f in result["failed_migrations"]) == sorted(failed)
    assert "simulated failure" in result["failed_migrations"][0]["failure_reason"]
    # it returned once the migration in flight was final, not before
    assert [m["name"] for m in result["in_flight"]] == [in_flight] and result["unfinished"] == [] and phase_of(sim, in_flight) == "Succeeded"
    assert result["waited_seconds"] > 0.5 and result["watch"]["lists"] == 1
    paused = cronjob(sim)
    record = json.loads(paused["metadata"]["annotations"][BREAKER_RECORD])
    assert paused["spec"]["suspend"] is True and record["suspend"] is False and "3 failed migrations" in record["reason"]
    assert len(pausing_patches(sim)) == 1  # ACP recorded the suspend, so the chart keeps it

    again = run_ansible_module(sim, MODULE, {"namespaces": [NAMESPACE]})
    assert again["changed"] is False and again["tripped"] and not again["tripped_now"] and "is paused" in again["message"]

    planned = breaker(sim, check_mode=True, state="reset")
    assert planned["changed"] and planned["restored"] == {"suspend": False} and planned["resource_patches_deleted"] == pausing_patches(sim)
    assert cronjob(sim)["spec"]["suspend"] is True and BREAKER_RECORD in cronjob(sim)["metadata"]["annotations"]

    reset = breaker(sim, state="reset")
    assert reset["changed"] and reset["restored"] == {"suspend": False}
    resumed = cronjob(sim)
    assert resumed["spec"]["suspend"] is False and BREAKER_RECORD not in resumed["metadata"]["annotations"]
    assert resumed["metadata"]["annotations"][BREAKER_RESET] and pausing_patches(sim) == []
    # the failures are before the reset: they do not trip it again, and another reset changes nothing
    after = breaker(sim)
    assert after["tripped"] is False and after["changed"] is False and after["failed_migrations"] == []
    assert breaker(sim, state="reset")["changed"] is False


def test_a_vm_that_migrated_four_times_trips_it_check_mode_first(sim):
    moves = [migrate(sim, "vm-2") for _move in range(4)]
    assert [phase_of(sim, name) for name in moves] == ["Succeeded"] * 4
    planned = breaker(sim, check_mode=True, max_failed_migrations=100)
    assert planned["changed"] and planned["tripped_now"] and cronjob(sim)["spec"]["suspend"] is False
    tripped = breaker(sim, max_failed_migrations=100)
    assert tripped["changed"] and tripped["reasons"] == ["desched-test/vm-2 migrated 4 times within 1h (max_migrations_per_vm 3)"]
    assert sorted(tripped["frequent_movers"][0]["names"]) == sorted(moves) and cronjob(sim)["spec"]["suspend"] is True
    assert breaker(sim, state="reset")["changed"] and cronjob(sim)["spec"]["suspend"] is False and pausing_patches(sim) == []


def launcher_marks(sim) -> dict:
    """VM name -> the cooldown annotations of its live launcher Pods."""
    pods = sim.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", "kubevirt.io=virt-launcher")["items"]
    return {pod["metadata"]["labels"]["kubevirt.io/vm"]: {k: v for k, v in (pod["metadata"].get("annotations") or {}).items()
                                                          if k in (PREFER_NO_EVICTION, COOLDOWN_UNTIL)}
            for pod in pods if pod["status"].get("phase") not in ("Succeeded", "Failed")}


def test_the_cooldown_playbook_marks_trips_and_fails_with_the_reasons_then_the_rollback_undoes_both(sim, tmp_path):
    moved = migrate(sim, "vm-1")
    try:
        failed = [migrate(sim, "vm-2", "fail") for _attempt in range(3)]
    finally:
        sim.kubectl("annotate", "vmi", "vm-2", "-n", NAMESPACE, "kubesim.io/migration-")
    reports = tmp_path / "reports"
    run = run_playbook(sim, ROOT / "playbooks" / "cooldown.yml", {"cooldown_namespaces": [NAMESPACE], "cooldown_period": "10m",
                                                                  "reports_dir": str(reports)}, expect_failure=True, name="cooldown")
    assert "Storm breaker tripped: 3 failed migrations within 1h (max_failed_migrations 3)" in run.stdout and failed[0] in run.stdout, run.stdout
    assert "descheduler_storm_breaker state=reset" in run.stdout
    written = json.loads(next((reports / "localhost").glob("cooldown-*.json")).read_text())
    assert written["outcome"]["status"] == "failed" and written["result"]["breaker"]["tripped_now"] is True
    assert "vm-1" in [m["vm"] for m in written["result"]["marked"] + written["result"]["kept"]]
    assert launcher_marks(sim)["vm-1"][PREFER_NO_EVICTION] == "" and cronjob(sim)["spec"]["suspend"] is True
    assert phase_of(sim, moved) == "Succeeded"

    rolled_back = run_role(sim, "descheduler_rollback", {"descheduler_rollback_backup_dir": str(tmp_path / "backups"),
                                                         "descheduler_rollback_timeout": 60}, name="rollback").result
    assert rolled_back["storm_breaker_reset"] is True and "{0}/vm-1".format(NAMESPACE) in rolled_back["cooldown_marks_lifted"]
    assert rolled_back["resumed"] is True and rolled_back["changed"] is True
    resumed = cronjob(sim)
    assert resumed["spec"]["suspend"] is False and BREAKER_RECORD not in resumed["metadata"]["annotations"] and pausing_patches(sim) == []
    assert all(marks == {} for marks in launcher_marks(sim).values())
