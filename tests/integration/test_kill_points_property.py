"""Property (issue 19): whatever sequence of runs, kills and rollbacks a cluster goes through, its policy is only ever
the chart's or the one the rebalance asked for, and no backup a run recorded is lost; rollback.yml at the end brings
the chart's policy back with no ResourcePatch and frees the lease. Hypothesis draws the sequences: a rebalance killed
at one of test_kill_points_rebalance.KILL_POINTS, rollback.yml, or a rebalance run to its end (either rebalance is
refused while a dead run is unfinished). Each step is a real ansible-playbook run on the simulator, so the examples are few and derived
from the test's name (derandomize): the same sequences on every machine."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from support.simulator import running_kubesim

from .ansible_run import run_playbook
from .conftest import ROOT
from .kill_points import killed_run
from .run_record import lease, rebalance_state, rebalance_variables, record
from .test_kill_points_rebalance import KILL_POINTS

pytestmark = pytest.mark.simulator

PLAYBOOKS = ROOT / "playbooks"
STEPS = st.one_of(st.sampled_from([("kill", point) for point in KILL_POINTS]), st.just(("rollback", None)), st.just(("rebalance", None)))


def policy_backups_recorded(sim) -> set:
    """The policy ConfigMap backup the run on the lease recorded (the workload's is the CronJob, without policy)."""
    path = (record(sim).get("backup") or {}).get("policy_file")
    return {path} if path else set()


# no shrinking: each step takes tens of seconds, and a failing sequence of two steps is short enough as it is
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])
@given(steps=st.lists(STEPS, min_size=1, max_size=2))
def test_no_sequence_of_runs_kills_and_rollbacks_leaves_another_policy_or_loses_a_backup(steps):
    with tempfile.TemporaryDirectory(prefix="kill-property-") as temp, running_kubesim("rebalance-two-workers", Path(temp) / "sim") as sim:
        work = Path(temp)
        chart = rebalance_state(sim)["policy"]
        policies, backups = {chart}, set()
        for number, (action, point) in enumerate(steps):
            if action == "kill":
                _name, task, after, more = point
                killed_run(sim, PLAYBOOKS / "rebalance.yml", rebalance_variables(work, **more), work / f"step{number}", task, after,
                           may_be_refused=True)
            elif action == "rollback":
                run_playbook(sim, PLAYBOOKS / "rollback.yml", {"reports_dir": str(work / "reports"), "backup_dir": str(work / "backups")},
                             name=f"step{number}-rollback")
            else:   # refused while a killed run is unfinished; else it applies and validates, the policy stays
                run_playbook(sim, PLAYBOOKS / "rebalance.yml", rebalance_variables(work), name=f"step{number}-rebalance", expect_failure=None)
            policies.add(rebalance_state(sim)["policy"])
            backups |= policy_backups_recorded(sim)
            assert len(policies) <= 2, (steps[:number + 1], policies)   # the chart's and the requested one, nothing else
            for path in backups:   # every backup a run recorded is still there and is of one of those policies
                assert yaml.safe_load(Path(path).read_text())["data"]["policy.yaml"] in policies, (steps[:number + 1], path)
        run_playbook(sim, PLAYBOOKS / "rollback.yml", {"reports_dir": str(work / "reports"), "backup_dir": str(work / "backups")},
                     name="final-rollback")
        end = rebalance_state(sim)
        assert end["policy"] == chart and end["resourcepatches"] == [] and end["pending"] == [], (steps, end)
        assert "holderIdentity" not in lease(sim)["spec"], steps
