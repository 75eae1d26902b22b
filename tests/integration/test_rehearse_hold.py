"""The rehearsal holds the Descheduler while it sets the stage (issue 28): on the `acp-default` scenario (the package's
default policy, whose scheduled runs move containerDisk test VMs, which PodsWithPVC does not protect) with a time scale
at which the CronJob runs every two real seconds, ten rehearsals in a row each move exactly the predicted VM, by a Job
the rehearsal created with its own policy, and leave the CronJob as it was (running again between the rehearsals). Before
the hold, the same rehearsal failed with "0 VM(s) moved, 1 predicted" or a prediction that no longer held. The hold is
recorded on the run's Lease: a rehearsal killed while it holds a CronJob that was suspended before leaves it suspended
after rollback.yml (no variables) and -e rehearse_cleanup=only (one that was running is resumed:
test_kill_points_rehearsal.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .ansible_run import run_playbook
from .conftest import ROOT
from .kill_points import killed_run
from .rehearsal_run import NAMESPACE, REHEARSE, assert_as_before, cluster_state, rehearse
from .run_record import record

pytestmark = [pytest.mark.simulator, pytest.mark.kubectl]

RUNS = 10
TIME_SCALE = 60   # the CronJob's */2 * * * * every 2 s of real time


def fast_acp_default(tmp_path: Path) -> str:
    path = tmp_path / "acp-default-fast.yaml"
    path.write_text(yaml.safe_dump({"extends": "acp-default", "name": "acp-default-fast", "timeScale": TIME_SCALE}))
    return str(path)


def last_schedule(sim) -> str:
    return (sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler").get("status") or {}).get("lastScheduleTime") or ""


def test_ten_rehearsals_in_a_row_each_move_exactly_the_predicted_vm_by_their_own_run_while_the_cronjob_runs_often(fresh_kubesim, tmp_path):
    sim = fresh_kubesim(fast_acp_default(tmp_path), settle=True)
    before = cluster_state(sim)
    assert before["suspended"] is False
    scheduled = [last_schedule(sim)]
    for run in range(1, RUNS + 1):
        rehearsal = rehearse(sim, "run-{0}".format(run))
        report = rehearsal.report
        assert report["status"] == "passed", (run, report["error"], rehearsal.output[-3000:])
        section = report["rehearsal"]
        prediction = section["prediction"]
        assert section["hold"]["kind"] == "CronJob" and section["hold"]["suspended_before"] is False, run
        moved = [m for m in report["moved"] if m["namespace"] == NAMESPACE]
        assert len(moved) == prediction["moves"] == 1 and section["comparison"]["matches"], (run, moved, prediction)
        assert (moved[0]["from"], moved[0]["to"]) == (prediction["from"], prediction["to"]) and moved[0]["vm"] in prediction["candidates"]
        # by the rehearsal's own run: a Job it created from the held CronJob, the move proven and triggered by the descheduler
        jobs = [(cycle or {}).get("job") or {} for cycle in report["validation"]["cycles"]]
        assert jobs and all(job.get("created") and job.get("manual") for job in jobs), (run, jobs)
        check = next(c for c in report["checks"] if c["name"] == moved[0]["vm"])
        assert check["verdict"] == "pass" and check["trigger"] == "descheduler", (run, check)
        assert_as_before(sim, before)   # the CronJob's suspend state, the policy, no ResourcePatch, the other VMs
        scheduled.append(last_schedule(sim))
    # the installed policy did run, often, between the rehearsals: the hold is what kept it off the test VMs
    assert len(set(scheduled)) > RUNS // 2, scheduled


def test_a_rehearsal_killed_while_holding_a_cronjob_suspended_before_leaves_it_suspended_after_rollback_and_cleanup(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("rehearsal", suspend=True, settle=True)
    before = cluster_state(sim)
    assert before["suspended"] is True
    places = {"reports_dir": str(tmp_path / "reports"), "backup_dir": str(tmp_path / "backups")}
    killed_run(sim, REHEARSE, places, tmp_path, "Run the rebalance procedure on the test VMs", 0)
    hold = record(sim)["backup"]["descheduler_hold"]
    assert (hold["kind"], hold["name"], hold["suspended_before"]) == ("CronJob", "descheduler", True), hold

    rolled = run_playbook(sim, ROOT / "playbooks" / "rollback.yml", places, name="rollback")
    assert cluster_state(sim)["suspended"] is True, rolled.stdout[-3000:]
    cleanup = rehearse(sim, "cleanup-only", {"rehearse_cleanup": "only", **places})
    assert cleanup.report["status"] == "passed", cleanup.output[-3000:]
    assert_as_before(sim, before)
