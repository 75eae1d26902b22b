"""The API server goes away for 20 s (the simulator's outage: connections refused, open ones cut) in the middle of a
module's work, as it does when it restarts during an upgrade. The policy update that the outage cuts is sent again once
the server is back and lands exactly once, within api_timeout, whatever api_retries says; a rebalance whose validation
loses the server while it watches the test VMs still proves its migrations and rolls back to the chart's policy; a drain
whose evictions and watches are cut resumes its watches and finishes with every VM live-migrated (same UID) and the
node cordoned."""
from __future__ import annotations

import json

import pytest

from support.policy import PAGE_OPTIONS, PAGE_POLICY

from .ansible_run import run_playbook
from .conftest import ROOT, kubectl_available, running_kubesim
from .drain_scenario import write_batch_scenario
from .module_call import call_module
from .run_record import rebalance_state, rebalance_variables

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

OUTAGE = 20


def outage_report(sim) -> dict:
    return sim.admin("GET", "outage")


def test_a_policy_update_cut_by_a_20s_outage_is_sent_again_and_lands_once(tmp_path):
    with running_kubesim("rebalance-two-workers", tmp_path / "sim") as sim:
        sim.admin("POST", "outage", {"seconds": OUTAGE, "armedBy": {"verb": "update", "resource": "configmaps", "namespace": "descheduler"}})
        result = call_module("descheduler_policy", {"kubeconfig": sim.kubeconfig, "backup_dir": str(tmp_path / "backups"),
                                                    "cluster_name": "workload", "api_retries": 2, **PAGE_OPTIONS})
        assert not result["failed"] and result["changed"], result
        assert outage_report(sim)["outages"] == 1 and not outage_report(sim)["active"]
        configmap = sim.request_json("GET", "/api/v1/namespaces/descheduler/configmaps/descheduler")
        assert configmap["data"]["policy.yaml"] == PAGE_POLICY
        assert sim.counters()["update configmaps"] == 2   # the cut one (not applied) and the one that landed


def test_a_rebalance_whose_validation_loses_the_api_for_20s_proves_its_moves_and_rolls_back(tmp_path):
    with running_kubesim("rebalance-two-workers", tmp_path / "sim") as sim:
        # only the validation's own runs evict: at the scenario's time scale the */2 CronJob runs every 6 s, so that its
        # history limit deletes a scheduled run's Job (and log) before the outage ends, which no real schedule does
        sim.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge", "-p", '{"spec": {"schedule": "0 0 1 1 *"}}')
        before = rebalance_state(sim)
        # the outage begins when the validation starts watching the test VMs (vm_migration_verify: its watch is cut)
        watch_of_the_vms = {"verb": "watch", "resource": "virtualmachineinstances", "namespace": "desched-test"}
        sim.admin("POST", "outage", {"seconds": OUTAGE, "armedBy": watch_of_the_vms})
        run = run_playbook(sim, ROOT / "playbooks" / "rebalance.yml", rebalance_variables(tmp_path, rebalance_rollback_at_end=True),
                           name="outage")
        assert outage_report(sim)["outages"] == 1 and not outage_report(sim)["active"] and outage_report(sim)["cut"] >= 1, outage_report(sim)
        report = json.loads(next((tmp_path / "reports" / "localhost").glob("rebalance-*.json")).read_text())
        assert report["status"] == "passed" and report["validation"]["passed"] and report["moved"], (report["status"], run.stdout[-5000:])
        after = rebalance_state(sim)
        assert after["policy"] == before["policy"] and after["resourcepatches"] == before["resourcepatches"] and after["suspend"] is False
        assert after["pending"] == [] and after["uids"] == before["uids"]


def test_a_drain_survives_a_20s_outage_and_every_vm_live_migrates(tmp_path):
    scenario = write_batch_scenario(tmp_path / "batch.yaml", drained=("worker-1",), spare="worker-3", per_cluster=3, time_scale=8)
    with running_kubesim(str(scenario), tmp_path / "sim", settle=True) as sim:
        before = {v["metadata"]["name"]: v["metadata"]["uid"] for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"]
                  if v["status"].get("nodeName") == "worker-1"}
        sim.admin("POST", "outage", {"seconds": OUTAGE, "armedBy": {"verb": "create", "resource": "pods/eviction"}})
        result = call_module("kubevirt_node_drain", {"kubeconfig": sim.kubeconfig, "node": "worker-1", "timeout": 300, "progress_every": 0})
        assert not result["failed"] and result["drained"], result
        assert outage_report(sim)["outages"] == 1 and outage_report(sim)["cut"] >= 1
        after = {v["metadata"]["name"]: v for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"] if v["metadata"]["name"] in before}
        assert {name: vmi["metadata"]["uid"] for name, vmi in after.items()} == before
        assert all(vmi["status"]["nodeName"] != "worker-1" for vmi in after.values())
        assert sim.kubectl("get", "node", "worker-1", "-o", "jsonpath={.spec.unschedulable}").stdout == "true"
