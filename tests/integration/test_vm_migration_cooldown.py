"""`kubevirt_ops.rebalance.vm_migration_cooldown` against the simulator (rebalance-two-workers): a VM that migrated is
marked on the launcher that runs it now (check mode first, as a dry run), a second run changes nothing, the mark is
lifted once the cooldown is over, a VM migrating now is marked on its source launcher, someone else's
prefer-no-eviction is left alone, state=absent lifts every mark through the module, the simulator's descheduler
with noEvictionPolicy Mandatory leaves the marked VMs where they are and moves one once its mark is lifted, and
rebalance_validate with rebalance_validate_cooldown keeps the VMs that just moved out of its run and stops on a
tripped storm breaker."""
from __future__ import annotations

import datetime

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import COOLDOWN_UNTIL, PREFER_NO_EVICTION
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_cooldown import ARG_SPEC, VmMigrationCooldownOptions, run

from support.policy import page_policy_data
from support.simulator import suspend_descheduler
from support.waiting import wait_for

from .ansible_run import run_ansible_module, run_role
from .module_call import call_module
from .test_vm_migration_wait import phase_of, start_migration

pytestmark = pytest.mark.simulator

NAMESPACE = "desched-test"
MODULE = "kubevirt_ops.rebalance.vm_migration_cooldown"


def cooldown(sim, check_mode=False, later=0, **given) -> dict:
    """The module's service in this process with a 60 s cooldown; `later` seconds after now on this host's clock."""
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, **dict({"cooldown": "60s", "namespaces": [NAMESPACE]}, **given))
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=later)
    return run(VmMigrationCooldownOptions.from_params(params), check_mode, now=lambda: moment)


def migrate(sim, vmi: str, fault: str | None = None) -> str:
    name = start_migration(sim, vmi, fault)
    wait_for(lambda: phase_of(sim, name) in ("Succeeded", "Failed"), timeout=30, what=f"migration {name} of {vmi} to end")
    return name


def current_launcher(sim, vmi: str) -> dict:
    """The launcher Pod that runs the VMI now: created by its UID, on its node, not finished."""
    obj = sim.kubectl_json("get", "vmi", vmi, "-n", NAMESPACE)
    pods = sim.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", "kubevirt.io/created-by=" + obj["metadata"]["uid"])["items"]
    running = [p for p in pods if p["spec"].get("nodeName") == obj["status"]["nodeName"] and p["status"].get("phase") not in ("Succeeded", "Failed")
               and not p["metadata"].get("deletionTimestamp")]
    assert len(running) == 1, [p["metadata"]["name"] for p in pods]
    return running[0]


def marks(pod: dict) -> dict:
    notes = pod["metadata"].get("annotations") or {}
    return {key: notes[key] for key in (PREFER_NO_EVICTION, COOLDOWN_UNTIL) if key in notes}


@pytest.fixture(scope="module")
def sim(rebalance_two_workers):
    """The scenario as it starts (its ACP default policy moves no VM), every mark of ours lifted after each test."""
    return rebalance_two_workers


@pytest.fixture(autouse=True)
def lifted_afterwards(sim):
    yield
    cooldown(sim, state="absent")


def test_a_migrated_vm_is_marked_on_its_new_launcher_check_mode_first_and_a_second_run_changes_nothing(sim):
    name = migrate(sim, "vm-1")
    end = sim.kubectl_json("get", "vmim", name, "-n", NAMESPACE)["status"]["migrationState"]["endTimestamp"]
    pod = current_launcher(sim, "vm-1")
    planned = cooldown(sim, check_mode=True)
    assert planned["changed"] and planned["dry_run"] and [(m["vm"], m["pod"]) for m in planned["marked"]] == [("vm-1", pod["metadata"]["name"])]
    assert marks(current_launcher(sim, "vm-1")) == {}  # a server-side dry run stored nothing
    done = cooldown(sim)
    until = (datetime.datetime.fromisoformat(end.replace("Z", "+00:00")) + datetime.timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = done["marked"][0]
    assert (entry["vm"], entry["node"], entry["migrations_in_window"], entry["cooldown_seconds"]) == ("vm-1", pod["spec"]["nodeName"], 1, 60)
    assert abs((datetime.datetime.fromisoformat(entry["until"].replace("Z", "+00:00"))
                - datetime.datetime.fromisoformat(until.replace("Z", "+00:00"))).total_seconds()) <= 1  # the end's second
    assert marks(current_launcher(sim, "vm-1")) == {PREFER_NO_EVICTION: "", COOLDOWN_UNTIL: entry["until"]}
    # the package's default policy has no noEvictionPolicy: the marks would not hold, and the module says so
    assert [f["code"] for f in done["findings"]] == ["cooldown_not_enforced"]
    again = cooldown(sim)
    assert again["changed"] is False and [k["vm"] for k in again["kept"]] == ["vm-1"] and again["marked"] == []


def test_the_mark_is_lifted_once_the_cooldown_is_over(sim):
    migrate(sim, "vm-1")
    assert cooldown(sim)["changed"]
    over = cooldown(sim, later=120)
    assert [e["vm"] for e in over["lifted"]] == ["vm-1"] and marks(current_launcher(sim, "vm-1")) == {}
    assert cooldown(sim, later=121)["changed"] is False


def test_a_vm_migrating_now_is_marked_on_the_launcher_it_runs_in(sim):
    source = current_launcher(sim, "vm-2")
    name = start_migration(sim, "vm-2", "hang")
    try:
        wait_for(lambda: phase_of(sim, name) == "Running", timeout=30, what="the hanging migration to run")
        result = cooldown(sim, label_selector="kubevirt.io/vm=vm-2")
        assert [(m["vm"], m["migrating"], m["pod"]) for m in result["marked"]] == [("vm-2", True, source["metadata"]["name"])]
        assert marks(current_launcher(sim, "vm-2"))[COOLDOWN_UNTIL] == result["marked"][0]["until"]
    finally:
        sim.kubectl("delete", "vmim", name, "-n", NAMESPACE, "--wait=false")
        sim.kubectl("annotate", "vmi", "vm-2", "-n", NAMESPACE, "kubesim.io/migration-")
    wait_for(lambda: not any(m["metadata"]["name"] == name for m in sim.kubectl_json("get", "vmim", "-n", NAMESPACE)["items"]),
             timeout=30, what="the cancelled migration to go")
    # cancelled: the VM stays where it is, with no succeeded migration, so the mark goes
    assert [e["vm"] for e in cooldown(sim, label_selector="kubevirt.io/vm=vm-2")["lifted"]] == ["vm-2"]


def test_someone_elses_prefer_no_eviction_is_left_alone(sim):
    migrate(sim, "vm-1")
    pod = current_launcher(sim, "vm-1")["metadata"]["name"]
    sim.kubectl("annotate", "pod", pod, "-n", NAMESPACE, PREFER_NO_EVICTION + "=true")
    try:
        result = cooldown(sim)
        assert result["changed"] is False and "set by someone else" in result["not_marked"][0]["reason"]
        assert cooldown(sim, state="absent")["changed"] is False
        assert marks(current_launcher(sim, "vm-1")) == {PREFER_NO_EVICTION: "true"}
    finally:
        sim.kubectl("annotate", "pod", pod, "-n", NAMESPACE, PREFER_NO_EVICTION + "-")


def test_state_absent_lifts_every_mark_through_the_module_with_its_diff(sim):
    migrate(sim, "vm-1")
    marked = cooldown(sim)["marked"]
    assert marked
    result = run_ansible_module(sim, MODULE, {"state": "absent"}, diff=True)
    assert result["changed"] and [e["vm"] for e in result["lifted"]] == ["vm-1"]
    # the callback prints the diff before the result: the Pod's two annotations removed
    removed = [line for line in result["_output"].splitlines() if line.startswith("-")]
    assert any(COOLDOWN_UNTIL in line and marked[0]["until"] in line for line in removed), result["_output"]
    assert any(PREFER_NO_EVICTION in line for line in removed) and marked[0]["pod"] in result["_output"]
    assert marks(current_launcher(sim, "vm-1")) == {}


def requested(run: dict) -> list:
    """The launcher Pods a Descheduler run asked to evict (in the background or at once)."""
    return [entry["name"] for entry in run["background_evictions"] + run["evicted"]]


def descheduler_once(sim) -> dict:
    run_result = call_module("descheduler_run", {"kubeconfig": sim.kubeconfig, "trigger": "create", "timeout": 60})
    assert not run_result["failed"], run_result.get("msg")
    wait_for(lambda: all((m.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                         for m in sim.kubectl_json("get", "vmim", "-n", NAMESPACE)["items"]), timeout=30, what="the requested migrations to end")
    return run_result


def test_the_descheduler_with_mandatory_leaves_the_marked_vms_and_moves_one_once_lifted(sim):
    """Last: it suspends the CronJob and leaves the page's policy, with noEvictionPolicy Mandatory, applied."""
    suspend_descheduler(sim)
    policy = page_policy_data()
    # without nodeFit: a launcher that came back from worker-b is a migration target Pod, whose required node affinity
    # excludes the node it came from, so nodeFit would find no other node for it (KubeVirt's target Pods, as upstream)
    policy["profiles"][0]["pluginConfig"][0]["args"].update(noEvictionPolicy="Mandatory", nodeFit=False)
    sim.kubectl("-n", "descheduler", "patch", "configmap", "descheduler", "--type=merge", "-p",
                yaml.safe_dump({"data": {"policy.yaml": yaml.safe_dump(policy, sort_keys=False)}}))
    # both VMs on worker-a (overutilized by memory), each just back from worker-b
    for vmi in ("vm-1", "vm-2"):
        for _move in range(2 if current_launcher(sim, vmi)["spec"]["nodeName"] == "worker-a" else 1):
            migrate(sim, vmi)
    assert {current_launcher(sim, vmi)["spec"]["nodeName"] for vmi in ("vm-1", "vm-2")} == {"worker-a"}
    marked = cooldown(sim, cooldown="10m")
    assert sorted(m["vm"] for m in marked["marked"]) == ["vm-1", "vm-2"] and marked["findings"] == []
    held = descheduler_once(sim)
    assert requested(held) == [] and held["totals"]["eviction_requests"] == 0, "\n".join(held["log_lines"])
    # the same run without vm-1's mark: the one eviction of the run goes to it
    vm_1 = current_launcher(sim, "vm-1")["metadata"]["name"]
    assert [e["vm"] for e in cooldown(sim, state="absent", label_selector="kubevirt.io/vm=vm-1")["lifted"]] == ["vm-1"]
    freed = descheduler_once(sim)
    assert requested(freed) == [vm_1], "\n".join(freed["log_lines"])
    assert current_launcher(sim, "vm-1")["spec"]["nodeName"] == "worker-b" and current_launcher(sim, "vm-2")["spec"]["nodeName"] == "worker-a"


def test_rebalance_validate_runs_the_cooldown_before_each_run_and_stops_on_a_tripped_breaker(sim):
    """After the test above (the page's policy with Mandatory, the CronJob suspended, both VMs just moved)."""
    variables = {"rebalance_validate_cooldown": True, "rebalance_validate_trigger": "create", "rebalance_validate_cycles": 2,
                 "rebalance_validate_timeout": 60, "rebalance_cooldown_namespaces": [NAMESPACE], "rebalance_cooldown_period": "10m"}
    held = run_role(sim, "rebalance_validate", dict(variables, rebalance_cooldown_storm_breaker=False), name="validate-held").result
    # both VMs in their cooldown before the run, so it requests nothing
    cycle = held["cycles"][0]
    assert sorted(cycle["cooldown"]["marked"] + cycle["cooldown"]["kept"]) == ["vm-1", "vm-2"], cycle
    assert held["stopped_because"] == "no_eviction_requested" and held["moved"] == [] and held["passed"] is True
    try:
        failed = [migrate(sim, "vm-2", "fail") for _attempt in range(3)]
    finally:
        sim.kubectl("annotate", "vmi", "vm-2", "-n", NAMESPACE, "kubesim.io/migration-")
    stopped = run_role(sim, "rebalance_validate", variables, expect_failure=True, name="validate-tripped")
    assert stopped.result["stopped_because"] == "storm_breaker" and stopped.result["cycles"][0]["run"] is None
    assert "the storm breaker paused the Descheduler" in stopped.stdout and "3 failed migrations within 1h" in stopped.stdout
    assert failed[-1] in stopped.stdout and "reset the breaker" in stopped.stdout
