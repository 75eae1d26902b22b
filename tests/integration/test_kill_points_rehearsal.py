"""Nothing lost when the controller dies during a rehearsal (issue 19): rehearse.yml SIGKILLed with everything it
started (tests/integration/kill_points.py), then rollback.yml with no extra variable, which takes the dead run's lease
over: the policy byte for byte, the Descheduler resumed, no ResourcePatch, no migration pending, every other VM with
its UID on its node; then the rehearsal's own cleanup (`-e rehearse_cleanup=only`) deletes its test VMs and
namespace, and the lease is free. Every kill point is one entry of KILL_POINTS."""
from __future__ import annotations

import pytest

from .ansible_run import run_playbook
from .conftest import ROOT
from .kill_points import killed_run
from .rehearsal_run import REHEARSE, assert_as_before, cluster_state, rehearse
from .run_record import lease, record

pytestmark = pytest.mark.simulator

RESTORED = ("policy", "suspended", "replicas", "resource_patches", "vms")   # what rollback.yml restores (cluster_state's keys)

# (kill point, the task at whose start the controller dies, seconds after that start)
KILL_POINTS = [
    ("after the test VMs are created", "Run the rebalance procedure on the test VMs", 0),
    ("during the rehearsal's validation", "Wait for or trigger runs and prove each migration", 8),
]


@pytest.mark.parametrize("point,task,after", KILL_POINTS, ids=[point[0] for point in KILL_POINTS])
def test_a_rehearsal_killed_is_cleaned_up_by_cleanup_only(fresh_kubesim, tmp_path, point, task, after):
    sim = fresh_kubesim("rehearsal", settle=True)
    before = cluster_state(sim)
    places = {"reports_dir": str(tmp_path / "reports"), "backup_dir": str(tmp_path / "backups")}
    killed_run(sim, REHEARSE, places, tmp_path, task, after)
    assert record(sim)["playbook"] == "rehearse" and record(sim)["status"] == "in_progress"

    rolled = run_playbook(sim, ROOT / "playbooks" / "rollback.yml", places, name="rollback")
    assert "Took over lease kube-system/kubevirt-ops-run" in rolled.stdout, (point, rolled.stdout[-5000:])
    after = cluster_state(sim)
    assert {key: after[key] for key in RESTORED} == {key: before[key] for key in RESTORED} and after["unfinished_migrations"] == [], point

    cleanup = rehearse(sim, "cleanup-only", {"rehearse_cleanup": "only", **places})
    assert cleanup.report["status"] == "passed", point
    assert_as_before(sim, before)
    assert record(sim)["status"] == "rolled_back" and "holderIdentity" not in lease(sim)["spec"]
