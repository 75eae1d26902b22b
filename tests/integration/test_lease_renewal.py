"""The run's lease lives as long as the run does (issue 28, point 1), with ansible-playbook on the simulator and a lease of
20 s: a drain whose migrations take longer than the lease (maintenance.yml, the migrations slowed by a time scale of 1)
and a rolling maintenance whose per-node hook sleeps longer than the lease (cluster_maintenance.yml). In both, the lease
is renewed while the step works (the drain's action plugin between its calls, a keepalive around the hook), so a second
run started mid-step is refused naming the holder; once the first run is SIGKILLed with its process group (as a kill
point does), nothing renews the lease any more (the keepalive ends with its run), and another controller is refused
until the lease expired and takes it over after. And a drain whose lease another controller took over stops before its
next eviction, naming the holder; a rolling maintenance whose lease was taken over during the hook writes nothing
after it (no uncordon, no lifting of the taints by its rescue)."""
from __future__ import annotations

import datetime
import os
import signal
from pathlib import Path

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_lease as rl
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import parse_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import run_lease as svc

from support.waiting import wait_for

from .ansible_run import playbook_command, playbook_in_background, run_playbook
from .conftest import ROOT
from .drain_scenario import write_scenario
from .run_record import lease, record

pytestmark = pytest.mark.simulator

PLAYBOOKS = ROOT / "playbooks"
SLEEP_HOOK = ROOT / "tests" / "integration" / "playbooks" / "tasks" / "sleep_hook.yml"
DURATION = 20
# Another controller (an AWX job in another execution environment): it cannot see the first run's process, so only the
# lease's expiry frees the cluster for it.
OTHER = {"user": "erin", "host": "other-controller", "pid": 4242, "process_started": "1"}


def renewed(sim) -> datetime.datetime:
    return parse_time(lease(sim)["spec"]["renewTime"])


def expiry(sim) -> datetime.datetime:
    return rl.expires_at(lease(sim))


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def other_controller_takes(sim, playbook: str) -> dict:
    """The run_lease module as another controller's run calls it first: its result, or its failure's message."""
    params = spec_params(svc.ARG_SPEC, kubeconfig=sim.kubeconfig, run_id="other-run", playbook=playbook, step="preflight",
                         unfinished="resume", duration=DURATION)
    try:
        return svc.run(svc.RunLeaseOptions.from_params(params), False, me=OTHER)
    except svc.LeaseHeld as refused:
        return {"refused": refused.message}


def assert_kept_alive_past_its_duration(sim, since: datetime.datetime, step: str) -> None:
    """The lease, renewed since `since`, is still held by the run at `step` more than one duration later."""
    wait_for(lambda: now() > since + datetime.timedelta(seconds=DURATION + 5), timeout=DURATION + 10, what="one lease duration")
    assert record(sim)["step"] == step and lease(sim)["spec"]["holderIdentity"], (record(sim), lease(sim))
    assert renewed(sim) > since + datetime.timedelta(seconds=DURATION / 3) and expiry(sim) > now(), lease(sim)["spec"]


def assert_dead_run_expires_then_is_taken_over(sim, process, playbook: str, tmp_path: Path, command: str = "") -> None:
    """SIGKILL of the first run's process group; its processes whose command line has `command` end by themselves,
    nothing renews its lease after; another controller is refused naming it until the lease expired, and takes it over
    after."""
    holder = record(sim)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    # what the run left behind ends by itself: ansible-core's worker (a process group of its own) before its next module
    # call, a keepalive at its next look (every KEEPALIVE_POLL_SECONDS); a few seconds more under load
    wait_for(lambda: not left_by(tmp_path, command), timeout=20, what="the processes of the killed run to end")
    last = lease(sim)["spec"]["renewTime"]
    refused = other_controller_takes(sim, playbook)
    assert now() < expiry(sim) and "refused" in refused, refused
    assert f"cluster is busy: {playbook} run {holder['run_id']} by " in refused["refused"], refused
    assert "pid {0}".format(holder["holder"]["pid"]) in refused["refused"] and "held until" in refused["refused"]
    wait_for(lambda: now() > expiry(sim) + datetime.timedelta(seconds=1), timeout=DURATION + 5, what="the dead run's lease to expire")
    assert lease(sim)["spec"]["renewTime"] == last   # nothing renewed the dead run's lease
    taken = other_controller_takes(sim, playbook)
    assert taken.get("action") == "take_over" and taken["took_over"]["run_id"] == holder["run_id"], taken
    assert "expired at" in taken["took_over"]["why"]


def left_by(tmp_path: Path, command: str) -> list:
    """The processes of the run killed in this test (playbook_in_background's ANSIBLE_HOME in their environment) whose
    command line has `command`."""
    home = "ANSIBLE_HOME={0}\0".format(tmp_path / "ansible").encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if home in Path(f"/proc/{pid}/environ").read_bytes() and command.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def test_a_drain_longer_than_the_lease_keeps_it_and_a_killed_one_frees_it_only_when_it_expires(fresh_kubesim, tmp_path):
    # 6 VMs of 512Mi at time scale 1, 2 at once from one node, each migration slowed ten times (about 100 s): the drain
    # outlasts the checks below and is killed mid-step however busy the machine is (at 10 s a migration it took about
    # 30 s, and could end within a few seconds of the kept-alive check)
    sim = fresh_kubesim(str(write_scenario(tmp_path / "slow-drain.yaml", count=6, time_scale=1)), settle=True)
    sim.kubectl("annotate", "vm", "--all", "-n", "vms", "kubesim.io/migration=slow")
    variables = {"maintenance_nodes": ["worker-1"], "run_lease_duration": DURATION}
    command = playbook_command(sim, PLAYBOOKS / "maintenance.yml", variables, tmp_path / "first")
    with playbook_in_background(command, tmp_path, tmp_path / "first.log") as first:
        wait_for(lambda: record(sim).get("step") == "maintain worker-1" and sim.kubectl_json("get", "vmim", "-A")["items"], timeout=120,
                 what="the drain's first migration")
        assert_kept_alive_past_its_duration(sim, renewed(sim), "maintain worker-1")
        log = (tmp_path / "first.log").read_text()
        assert first.poll() is None and "TASK [kubevirt_ops.rebalance.node_maintenance : Verify" not in log, log[-3000:]   # still draining

        second = run_playbook(sim, PLAYBOOKS / "maintenance.yml", variables, name="second", expect_failure=True)
        holder = record(sim)
        assert f"cluster is busy: maintenance run {holder['run_id']} by " in second.stdout, second.stdout[-3000:]
        assert "pid {0}".format(holder["holder"]["pid"]) in second.stdout and "Nothing was changed by this run" in second.stdout
        assert record(sim)["run_id"] == holder["run_id"]

        # every process of the run ends, the drain's worker too (before its next call): no drain goes on alone
        assert_dead_run_expires_then_is_taken_over(sim, first, "maintenance", tmp_path)


def test_a_maintenance_hook_longer_than_the_lease_keeps_it_and_a_killed_one_frees_it_only_when_it_expires(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("cluster-maintenance", settle=True)
    variables = {"cluster_maintenance_nodes": ["worker-1"], "cluster_maintenance_hook": str(SLEEP_HOOK), "hook_seconds": 60,
                 "hook_log": str(tmp_path / "hook.log"), "run_lease_duration": DURATION}
    command = playbook_command(sim, PLAYBOOKS / "cluster_maintenance.yml", variables, tmp_path / "first")
    with playbook_in_background(command, tmp_path, tmp_path / "first.log") as first:
        wait_for((tmp_path / "hook.log").exists, timeout=120, what="the hook")
        assert record(sim)["step"] == "hook worker-1"
        assert_kept_alive_past_its_duration(sim, renewed(sim), "hook worker-1")
        assert first.poll() is None

        refused = other_controller_takes(sim, "cluster_maintenance")
        assert "cluster is busy: cluster_maintenance run" in refused.get("refused", ""), refused

        # the hook's own command goes on in the worker left behind (the user's work is not ours to stop); the keepalive ends
        assert_dead_run_expires_then_is_taken_over(sim, first, "cluster_maintenance", tmp_path, command="run_lease")


def test_a_drain_whose_lease_was_taken_over_stops_before_its_next_eviction_naming_the_holder(fresh_kubesim, tmp_path):
    # 12 VMs, 2 migrations of 10 s at once: a drain of 60 s and more, so VMs are left to evict when it notices the take-over
    # (its next call, a third of the lease later, slower on a busy machine), and every 10 s a finished migration frees a
    # slot that a drain that did not stop would fill
    sim = fresh_kubesim(str(write_scenario(tmp_path / "slow-drain.yaml", count=12, time_scale=1)), settle=True)
    variables = {"maintenance_nodes": ["worker-1"], "run_lease_duration": DURATION}
    command = playbook_command(sim, PLAYBOOKS / "maintenance.yml", variables, tmp_path / "first")
    with playbook_in_background(command, tmp_path, tmp_path / "first.log") as first:
        wait_for(lambda: record(sim).get("step") == "maintain worker-1" and sim.kubectl_json("get", "vmim", "-A")["items"], timeout=120,
                 what="the drain's first migration")
        holder = record(sim)
        # another controller takes the cluster over, as it would once this run's lease had expired (a network partition)
        taken = wait_for(lambda: steal(sim), timeout=30, what="the other controller's take-over")
        assert taken["took_over"]["run_id"] == holder["run_id"]
        first.wait(timeout=60)
    log = (tmp_path / "first.log").read_text()
    assert first.returncode != 0 and f"no longer held by run {holder['run_id']}: taken over (its lease expired at 2020-01-01T00:00:20Z); " \
        "maintenance run other-run by erin@other-controller pid 4242 holds it since" in log, log[-5000:]
    assert "Stopped before the next call" in log
    migrations = len(sim.kubectl_json("get", "vmim", "-A")["items"])
    left = [v["metadata"]["name"] for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"] if v["status"].get("nodeName") == "worker-1"]
    assert left, "the drain finished before the take-over: nothing proves it stopped"
    wait_for(lambda: now() > renewed(sim) + datetime.timedelta(seconds=10), timeout=20, what="10 s more")
    assert len(sim.kubectl_json("get", "vmim", "-A")["items"]) == migrations   # no eviction after the stop
    assert record(sim)["run_id"] == "other-run"


def steal(sim, playbook: str = "maintenance") -> dict:
    """Age the lease's renewTime past its expiry and take it as another controller; {} when the run renewed it first."""
    sim.kubectl("-n", "kube-system", "patch", "lease", "kubevirt-ops-run", "--type", "merge",
                "-p", '{"spec": {"renewTime": "2020-01-01T00:00:00.000000Z"}}')
    taken = other_controller_takes(sim, playbook)
    return taken if taken.get("action") == "take_over" else {}


def test_a_maintenance_whose_lease_was_taken_over_during_the_hook_writes_nothing_after_it(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("cluster-maintenance", settle=True)
    variables = {"cluster_maintenance_nodes": ["worker-1"], "cluster_maintenance_hook": str(SLEEP_HOOK), "hook_seconds": 15,
                 "hook_log": str(tmp_path / "hook.log"), "run_lease_duration": DURATION}
    command = playbook_command(sim, PLAYBOOKS / "cluster_maintenance.yml", variables, tmp_path / "first")
    with playbook_in_background(command, tmp_path, tmp_path / "first.log") as first:
        wait_for((tmp_path / "hook.log").exists, timeout=120, what="the hook")
        holder = record(sim)
        assert holder["step"] == "hook worker-1"
        taken = wait_for(lambda: steal(sim, "cluster_maintenance"), timeout=30, what="the other controller's take-over")
        assert taken["took_over"]["run_id"] == holder["run_id"]
        first.wait(timeout=120)
    log = (tmp_path / "first.log").read_text()
    assert first.returncode != 0 and f"no longer held by run {holder['run_id']}: taken over (its lease expired at 2020-01-01T00:00:20Z); " \
        "cluster_maintenance run other-run by erin@other-controller pid 4242" in log, log[-5000:]
    # neither the uncordon nor the rescue's lifting of the taints: the node is as the run that holds the cluster now found it
    node = sim.kubectl_json("get", "node", "worker-1")
    assert node["spec"].get("unschedulable") and any(t["key"] == "kubevirt-ops.io/maintenance-pending" for t in node["spec"].get("taints") or [])
    assert "TASK [Uncordon the node - worker-1]" not in log and record(sim)["run_id"] == "other-run"
