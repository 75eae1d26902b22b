"""playbooks/cluster_maintenance.yml on the simulator: a rolling maintenance of four workers where each VM migrates
exactly once and the hook (a reboot with a new kubelet version) runs once per node in the plan's order; too little
spare room refused before any change and allowed with cluster_maintenance_allow_double_migrations, the measured second
migrations reported; SIGINT in the middle, then a rerun that continues without redoing finished nodes and leaves no
taint; a failed migration that stops the run with the node cordoned, the VM and the reason said, the taints lifted,
the VM KubeVirt keeps evacuating named, and giving the node back cancelling that evacuation;
the node maintenance page's non-migratable VMs refused exactly as kubevirt_node_drain refuses them."""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from support.simulator import ADMIN_TOKEN, kubectl_available
from support.waiting import wait_for

from .ansible_run import interrupt, playbook_command, playbook_in_background, run_ansible_module, run_playbook
from .conftest import ROOT

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

PLAYBOOK = ROOT / "playbooks" / "cluster_maintenance.yml"
HOOK = ROOT / "tests" / "integration" / "playbooks" / "tasks" / "reboot_node_hook.yml"
WORKERS = ["worker-1", "worker-2", "worker-3", "worker-4"]
TAINT = "kubevirt-ops.io/maintenance-pending"
NEW_KUBELET = "v1.35.1"


def variables(sim, tmp_path: Path, **more) -> dict:
    return {"cluster_maintenance_nodes": WORKERS, "cluster_maintenance_hook": str(HOOK), "hook_log": str(tmp_path / "hook.log"),
            "kubesim_url": sim.url, "kubesim_token": ADMIN_TOKEN, "hook_kubelet_version": NEW_KUBELET,
            "cluster_maintenance_report_dir": str(tmp_path / "reports"), **more}


def hook_log(tmp_path: Path) -> list:
    path = tmp_path / "hook.log"
    return path.read_text().split() if path.exists() else []


def report(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "reports" / "cluster-maintenance-localhost.json").read_text())


def nodes(sim) -> dict:
    return {n["metadata"]["name"]: n for n in sim.kubectl_json("get", "nodes")["items"]}


def tainted(sim) -> list:
    return sorted(name for name, n in nodes(sim).items() if any(t["key"] == TAINT for t in n["spec"].get("taints") or []))


def migrations_per_vmi(sim) -> Counter:
    items = sim.kubectl_json("get", "vmim", "-A")["items"]
    return Counter("{0}/{1}".format(m["metadata"]["namespace"], m["spec"]["vmiName"]) for m in items if m["status"].get("phase") == "Succeeded")


def record(sim) -> dict:
    found = sim.kubectl_json("get", "configmap", "-n", "kube-system", "kubevirt-ops-cluster-maintenance")
    return json.loads(found["data"]["run.json"])


def assert_all_back(sim) -> None:
    assert tainted(sim) == []
    assert all(not nodes(sim)[w]["spec"].get("unschedulable") for w in WORKERS)


def test_every_vm_migrates_once_and_the_hook_runs_once_per_node_in_order(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("cluster-maintenance", settle=True)
    vms_before = {v["metadata"]["name"]: v["status"]["nodeName"] for v in sim.kubectl_json("get", "vmi", "-A")["items"]}
    run = run_playbook(sim, PLAYBOOK, variables(sim, tmp_path), name="rolling")
    result = report(tmp_path)
    order = result["plan"]["order"]
    assert order[0] == "worker-4", order   # the empty spare first: the VMs of each next node land on a maintained one
    assert hook_log(tmp_path) == order and sorted(order) == WORKERS
    moved = migrations_per_vmi(sim)
    assert set(moved.values()) == {1} and len(moved) == len([n for n in vms_before.values() if n in WORKERS])
    assert result["totals"]["migrations_per_vm"] == 1.0 and result["totals"]["vms_migrated_twice_or_more"] == []
    assert result["status"] == "complete" and [n["state"] for n in result["nodes"]] == ["done"] * 4
    assert all(set(n["steps"]) == {"drain", "hook", "ready", "uncordon"} for n in result["nodes"])
    for vm in result["vms"]:
        assert [m["source_node"] for m in vm["migrations"]] == [vms_before[vm["vm"].split("/")[1]]]
    assert all(nodes(sim)[w]["status"]["nodeInfo"]["kubeletVersion"] == NEW_KUBELET for w in WORKERS)
    assert_all_back(sim)
    assert record(sim)["status"] == "complete"
    markdown = (tmp_path / "reports" / "cluster-maintenance-localhost.md").read_text()
    assert "| worker-4 | done |" in markdown and "Batches: worker-4" in run.stdout
    page = (tmp_path / "reports" / "cluster-maintenance-localhost.html").read_text()
    assert "<svg" in page and all(vm["migrations"][0]["name"] in page for vm in result["vms"])


def test_too_little_spare_is_refused_before_any_change_and_allowed_with_double_migrations(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("cluster-maintenance-tight", settle=True)
    refused = run_playbook(sim, PLAYBOOK, variables(sim, tmp_path), name="refused", expect_failure=True)
    assert "was refused, nothing was changed:" in refused.stdout and "VMs twice" in refused.stdout
    assert "cluster_maintenance_allow_double_migrations" in refused.stdout
    assert tainted(sim) == [] and migrations_per_vmi(sim) == Counter() and hook_log(tmp_path) == []
    assert all(not n["spec"].get("unschedulable") for n in nodes(sim).values())

    run_playbook(sim, PLAYBOOK, variables(sim, tmp_path, cluster_maintenance_allow_double_migrations=True), name="allowed")
    measured = migrations_per_vmi(sim)
    twice = sorted(vm for vm, count in measured.items() if count > 1)
    totals = report(tmp_path)["totals"]
    assert twice and totals["vms_migrated_twice_or_more"] == twice
    assert totals["migrations"] == sum(measured.values())
    assert_all_back(sim)


def test_sigint_in_the_middle_then_a_rerun_finishes_without_redoing_finished_nodes(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("cluster-maintenance", settle=True)
    command = playbook_command(sim, PLAYBOOK, variables(sim, tmp_path), tmp_path / "interrupted")
    with playbook_in_background(command, tmp_path, tmp_path / "ansible.log") as process:
        # after the spare and one loaded node are done, while the next one drains
        wait_for(lambda: len([n for n, s in record_or_empty(sim).get("node_states", {}).items() if s["state"] == "done"]) >= 2
                 and any(s["state"] == "started" for s in record_or_empty(sim).get("node_states", {}).values()), timeout=240,
                 what="two nodes done and the next one started")
        assert interrupt(process) != 0
    stopped = record(sim)
    done_before = [n for n, s in stopped["node_states"].items() if s["state"] == "done"]
    assert stopped["status"] == "in_progress" and len(done_before) >= 2
    assert tainted(sim), "SIGINT runs no cleanup: the rerun lifts the taints"

    rerun = run_playbook(sim, PLAYBOOK, variables(sim, tmp_path), name="rerun")
    assert "Continuing run " + stopped["run_id"] in rerun.stdout
    assert sorted(hook_log(tmp_path)) == WORKERS, hook_log(tmp_path)   # each node's hook once over both runs
    assert set(migrations_per_vmi(sim).values()) == {1}
    assert record(sim)["status"] == "complete" and record(sim)["run_id"] == stopped["run_id"]
    assert_all_back(sim)


def record_or_empty(sim) -> dict:
    """The run's record, or {} before the playbook wrote it."""
    found = sim.kubectl("get", "configmap", "-n", "kube-system", "kubevirt-ops-cluster-maintenance", "-o", "json", check=False)
    return json.loads(json.loads(found.stdout)["data"]["run.json"]) if found.returncode == 0 else {}


def test_a_failed_migration_stops_the_run_with_the_node_cordoned_and_the_taints_lifted(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("cluster-maintenance", settle=True)
    vmi = next(v for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"] if v["status"]["nodeName"] == "worker-1")
    name = vmi["metadata"]["name"]
    sim.kubectl("annotate", "vmi", name, "-n", "vms", "kubesim.io/migration=fail")
    failed = run_playbook(sim, PLAYBOOK, variables(sim, tmp_path, cluster_maintenance_timeout=60), name="failing", expect_failure=True)
    assert f"vms/{name}" in failed.stdout and "did not finish" in failed.stdout
    assert tainted(sim) == []
    assert nodes(sim)["worker-1"]["spec"].get("unschedulable") is True
    result = report(tmp_path)
    assert result["status"] == "stopped" and f"vms/{name}" in result["stopped"]["reason"]
    assert any(m["phase"] == "Failed" for vm in result["vms"] if vm["vm"] == f"vms/{name}" for m in vm["migrations"])
    assert "worker-1" not in hook_log(tmp_path)
    # KubeVirt keeps retrying the VM's evacuation while worker-1 stays cordoned: the report says so, and the way out
    assert [(e["vm"], e["node"], e["result"]) for e in result["still_evacuating"]] == [(f"vms/{name}", "worker-1", "evacuating")]
    assert "state=uncordon" in result["still_evacuating"][0]["reason"]
    assert "## Evacuations when a node was given back or the run stopped" in (tmp_path / "reports" / "cluster-maintenance-localhost.md").read_text()
    # giving worker-1 back cancels the evacuation: once a retry already under way has ended, no migration follows (while
    # the VMI is marked KubeVirt creates the next retry as soon as one fails, held Pending for the backoff)
    given_back = run_ansible_module(sim, "kubevirt_ops.rebalance.kubevirt_node_drain", {"node": "worker-1", "state": "uncordon"})
    evacuations = given_back["evacuations"]
    assert evacuations["served"] is True and evacuations["stayed"] + evacuations["moving"] == [f"vms/{name}"], evacuations
    assert "evacuationNodeName" not in sim.kubectl_json("get", "vmi", name, "-n", "vms")["status"]

    def unfinished():
        return [m for m in sim.kubectl_json("get", "vmim", "-n", "vms")["items"]
                if m["spec"]["vmiName"] == name and m["status"].get("phase") not in ("Succeeded", "Failed")]
    wait_for(lambda: not unfinished(), timeout=30, what="no unfinished migration of " + name)
    count = len([m for m in sim.kubectl_json("get", "vmim", "-n", "vms")["items"] if m["spec"]["vmiName"] == name])
    time.sleep(60 / 30)   # 60 simulated seconds (timeScale 30)
    assert len([m for m in sim.kubectl_json("get", "vmim", "-n", "vms")["items"] if m["spec"]["vmiName"] == name]) == count
    assert sim.kubectl_json("get", "vmi", name, "-n", "vms")["status"]["nodeName"] == "worker-1"


def test_the_pages_non_migratable_vms_are_refused_as_the_drain_refuses_them(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("maintenance", settle=True)
    drain = run_ansible_module(sim, "kubevirt_ops.rebalance.kubevirt_node_drain", {"node": "worker-1"}, check=True, expect_failure=True)
    refused = run_playbook(sim, PLAYBOOK, {"cluster_maintenance_nodes": ["worker-1"], "cluster_maintenance_allow_double_migrations": True},
                           name="refused", expect_failure=True)
    assert "Preflight refused to drain worker-1, nothing was changed:" in refused.stdout
    for problem in drain["preflight"]["problems"]:
        assert problem["option"] in refused.stdout.replace("cluster_maintenance_", ""), problem
    for vm in drain["preflight"]["vms"]:
        if vm["action"] in ("restart", "lost", "blocked"):
            assert "vms/" + vm["name"] in refused.stdout or vm["namespace"] + "/" + vm["name"] in refused.stdout, vm["name"]
    assert tainted(sim) == [] and not nodes(sim)["worker-1"]["spec"].get("unschedulable")

    before = {v["metadata"]["name"]: v for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"]}
    run_playbook(sim, PLAYBOOK, {"cluster_maintenance_nodes": ["worker-1"], "cluster_maintenance_allow_double_migrations": True,
                                 "cluster_maintenance_allow_shutdown": True, "cluster_maintenance_allow_loss": True,
                                 "cluster_maintenance_allow_blocked": True}, name="allowed")
    after = {v["metadata"]["name"]: v for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"]}
    assert after["vm-live"]["metadata"]["uid"] == before["vm-live"]["metadata"]["uid"] and after["vm-live"]["status"]["nodeName"] != "worker-1"
    assert after["vm-none"]["metadata"]["uid"] != before["vm-none"]["metadata"]["uid"]   # restarted elsewhere (strategy None)
    assert after["vm-none"]["status"]["nodeName"] != "worker-1"
    assert after["bare-vmi"]["status"]["phase"] in ("Failed", "Succeeded")             # lost, as allowed
    assert after["vm-rwo"]["status"]["nodeName"] == "worker-1"                          # blocked: stays, as allowed
    assert migrations_per_vmi(sim)["vms/vm-live"] == 1 and tainted(sim) == []


def test_a_batch_drains_as_many_nodes_at_once_as_the_limits_and_the_spare_room_allow(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("cluster-maintenance", settle=True)
    sim.kubectl("delete", "pdb", "pool-pdb", "-n", "vms")   # the PDB alone keeps the loaded workers apart
    sim.admin("POST", "counters/reset")
    run_playbook(sim, PLAYBOOK, variables(sim, tmp_path), name="batched")
    result = report(tmp_path)
    assert result["plan"]["batches"] == [["worker-4"], ["worker-1", "worker-2", "worker-3"]]
    assert sorted(hook_log(tmp_path)) == WORKERS and hook_log(tmp_path)[0] == "worker-4"
    assert set(migrations_per_vmi(sim).values()) == {1}
    assert {m["target_node"] for vm in result["vms"] for m in vm["migrations"]} == {"worker-4"}
    peaks = sim.admin("GET", "counters?cluster=workload")["workload"]["migrations"]
    assert 2 < peaks["peak"] <= 5, peaks   # more than one node's worth at once, never above the cluster limit
    assert max(peaks["peak_per_node"].values()) <= 2, peaks
    assert_all_back(sim)
