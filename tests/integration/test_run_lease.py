"""One run at a time per cluster, and the record a dead run leaves (issue 19), with ansible-playbook on the simulator:
two rebalance runs started together, of which exactly one proceeds and the other fails before any write naming the
holder; a rebalance killed (SIGKILL) after its apply, over which the next rebalance refuses to start, and after which
rollback.yml without any variable takes over its lease, restores the chart's policy byte for byte, resumes the
CronJob, leaves no ResourcePatch and no migration pending, restarts no VM, and frees the cluster for the next run;
an expired lease of another controller taken over, saying from whom."""
from __future__ import annotations

import datetime
import json
import os
import signal

import pytest

from support.waiting import wait_for

from .ansible_run import playbook_command, playbook_in_background, run_ansible_module, run_playbook
from .conftest import ROOT
from .run_record import lease, rebalance_state, rebalance_variables, record

pytestmark = pytest.mark.simulator

PLAYBOOKS = ROOT / "playbooks"


def test_two_runs_at_once_one_proceeds_and_the_other_fails_before_any_write_naming_the_holder(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("rebalance-two-workers")
    chart = rebalance_state(sim)
    runs = {}
    both = rebalance_variables(tmp_path, rebalance_rollback_at_end=True)
    with playbook_in_background(playbook_command(sim, PLAYBOOKS / "rebalance.yml", both, tmp_path / "a"), tmp_path, tmp_path / "a.log") as first, \
            playbook_in_background(playbook_command(sim, PLAYBOOKS / "rebalance.yml", both, tmp_path / "b"), tmp_path, tmp_path / "b.log") as second:
        runs["a"], runs["b"] = first.wait(timeout=300), second.wait(timeout=300)
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in runs}
    assert sorted(runs.values())[0] == 0 and sorted(runs.values())[1] != 0, (runs, logs)
    refused = logs["b" if runs["a"] == 0 else "a"]
    assert "lease kube-system/kubevirt-ops-run: cluster is busy: rebalance run" in refused and " holds it since " in refused, refused
    assert "@" in refused.split("cluster is busy", 1)[1].split("\n", 1)[0] and "Nothing was changed by this run" in refused
    assert "TASK [Configure a bounded VM rebalance policy]" not in refused   # stopped before the backup and the apply
    assert record(sim)["status"] == "complete" and "holderIdentity" not in lease(sim)["spec"]
    assert rebalance_state(sim)["policy"] == chart["policy"]

    # after the first run ended, a new run takes the lease (a module call is enough to prove it)
    taken = run_ansible_module(sim, "kubevirt_ops.rebalance.run_lease", {"run_id": "next", "playbook": "rebalance", "kubeconfig": sim.kubeconfig})
    assert taken["action"] == "acquire" and taken["unfinished_run"] is None


def test_a_killed_rebalance_blocks_the_next_until_rollback_restores_the_cluster_from_its_record(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("rebalance-two-workers")
    before = rebalance_state(sim)
    command = playbook_command(sim, PLAYBOOKS / "rebalance.yml", rebalance_variables(tmp_path), tmp_path / "killed")
    with playbook_in_background(command, tmp_path, tmp_path / "killed.log") as process:
        wait_for(lambda: record(sim).get("step") == "validate", timeout=180, what="the rebalance past its apply")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    killed = record(sim)
    assert killed["status"] == "in_progress" and killed["backup"]["policy_file"] and rebalance_state(sim)["policy"] != before["policy"]

    refused = run_playbook(sim, PLAYBOOKS / "rebalance.yml", rebalance_variables(tmp_path), name="refused", expect_failure=True)
    assert f"the last rebalance run {killed['run_id']}" in refused.stdout and "stopped at step validate" in refused.stdout
    assert "playbooks/rollback.yml" in refused.stdout and record(sim)["run_id"] == killed["run_id"]

    rolled = run_playbook(sim, PLAYBOOKS / "rollback.yml", {"reports_dir": str(tmp_path / "reports"), "backup_dir": str(tmp_path / "backups")},
                          name="rollback")
    assert "Took over lease kube-system/kubevirt-ops-run" in rolled.stdout and "has ended" in rolled.stdout
    after = rebalance_state(sim)
    assert after["policy"] == before["policy"] and after["suspend"] is False and after["resourcepatches"] == []
    assert after["pending"] == [] and after["uids"] == before["uids"]
    ended = record(sim)
    assert ended["playbook"] == "rollback" and ended["status"] == "rolled_back" and ended["unfinished_run"]["run_id"] == killed["run_id"]

    taken = run_ansible_module(sim, "kubevirt_ops.rebalance.run_lease", {"run_id": "next", "playbook": "rebalance", "kubeconfig": sim.kubeconfig})
    assert taken["action"] == "acquire" and taken["unfinished_run"] is None


def test_an_expired_lease_of_another_controller_is_taken_over_and_says_from_whom(fresh_kubesim):
    sim = fresh_kubesim("rebalance-two-workers")
    long_ago = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    holder = {"user": "erin", "host": "old-controller", "pid": 4242, "process_started": "1"}
    stale = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "kubevirt-ops-run", "namespace": "kube-system",
                          "annotations": {"kubevirt-ops.io/run": json.dumps({"run_id": "old", "playbook": "maintenance", "holder": holder,
                                                                             "step": "preflight", "status": "in_progress"})}},
             "spec": {"holderIdentity": "erin@old-controller/pid-4242/old", "leaseDurationSeconds": 1800,
                      "acquireTime": long_ago, "renewTime": long_ago}}
    sim.kubectl("apply", "-f", "-", input=json.dumps(stale))
    taken = run_ansible_module(sim, "kubevirt_ops.rebalance.run_lease", {"run_id": "new", "playbook": "rebalance", "kubeconfig": sim.kubeconfig})
    assert taken["action"] == "take_over" and taken["took_over"]["run_id"] == "old" and "expired at" in taken["took_over"]["why"]
    assert "from maintenance run old by erin@old-controller pid 4242" in taken["message"]
    assert lease(sim)["spec"]["leaseTransitions"] == 1 and record(sim)["took_over"]["holder"]["host"] == "old-controller"


def test_check_mode_takes_no_lease(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("rebalance-two-workers")
    run_playbook(sim, PLAYBOOKS / "rebalance.yml", rebalance_variables(tmp_path), check=True, name="check")
    assert lease(sim) == {}
