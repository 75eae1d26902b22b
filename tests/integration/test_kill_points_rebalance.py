"""Nothing lost when the controller dies during a rebalance (issue 19): rebalance.yml SIGKILLed with everything it
started at each step boundary (tests/integration/kill_points.py), then rollback.yml with no extra variable: the
policy byte for byte as before, the CronJob resumed, no ResourcePatch, no migration pending, no VM restarted (same
UID), the lease free, and the rollback's report naming the dead run it took over. Every kill point is one entry of KILL_POINTS."""
from __future__ import annotations

import json

import pytest

from .ansible_run import run_playbook
from .conftest import ROOT
from .kill_points import killed_run
from .run_record import lease, rebalance_state, rebalance_variables, record

pytestmark = pytest.mark.simulator

PLAYBOOKS = ROOT / "playbooks"

# (kill point, the task at whose start the controller dies, seconds after that start, more rebalance variables)
KILL_POINTS = [
    ("after preflight", "Back up the generated policy first", 0, {}),
    ("after backup", "Record where the test VMs run before the policy changes", 0, {}),
    ("between the write and the ResourcePatch record", "Record the override in the lease", 0, {}),
    ("during validation", "Wait for or trigger runs and prove each migration", 8, {}),
    ("during rollback", "Suspend, remove the override, wait for every migration to be final, resume", 3, {"rebalance_rollback_at_end": True}),
]


@pytest.mark.parametrize("point,task,after,more", KILL_POINTS, ids=[point[0] for point in KILL_POINTS])
def test_a_rebalance_killed_is_rolled_back_by_rollback_yml_without_variables(fresh_kubesim, tmp_path, point, task, after, more):
    sim = fresh_kubesim("rebalance-two-workers")
    before = rebalance_state(sim)
    killed_run(sim, PLAYBOOKS / "rebalance.yml", rebalance_variables(tmp_path, **more), tmp_path, task, after)
    dead = record(sim)
    assert dead["playbook"] == "rebalance" and dead["status"] == "in_progress", (point, dead)

    rolled = run_playbook(sim, PLAYBOOKS / "rollback.yml", {"reports_dir": str(tmp_path / "reports"), "backup_dir": str(tmp_path / "backups")},
                          name="rollback")
    assert "Took over lease kube-system/kubevirt-ops-run" in rolled.stdout, (point, rolled.stdout[-5000:])
    taken = json.loads(max((tmp_path / "reports" / "localhost").glob("rollback-*.json")).read_text())["lease"]
    assert dead["run_id"] in ((taken["unfinished_run"] or {}).get("run_id"), (taken["took_over"] or {}).get("run_id")), taken
    after_rollback = rebalance_state(sim)
    assert after_rollback == {**before, "pending": []}, (point, before, after_rollback)
    assert record(sim)["status"] == "rolled_back" and "holderIdentity" not in lease(sim)["spec"], (point, record(sim))
