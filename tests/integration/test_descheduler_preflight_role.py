"""The `descheduler_preflight` role run by ansible-playbook against the simulator: the page's setting
(rebalance-two-workers) passes with the nodes and VMs in its summary; the old package (no EvictionsInBackground)
fails with the feature-gate problem and the upgrade fix and changes nothing; VMs with strategy None or on
ReadWriteOnce storage are named in the problems, all in one failure."""
from __future__ import annotations

import pytest
import yaml

from support.waiting import wait_for

from .ansible_run import run_tasks

pytestmark = pytest.mark.simulator

SCOPE = {"descheduler_preflight_namespace": "desched-test", "descheduler_preflight_label_selector": "app=desched-test"}
ROLE = [{"name": "Run the preflight", "ansible.builtin.include_role": {"name": "kubevirt_ops.rebalance.descheduler_preflight"}}]


def vm_with_disk(name: str, access_mode: str, strategy: str | None = None) -> list:
    """A labelled test VM on its own PVC; `strategy` goes into the VM template."""
    template_spec = {"domain": {"devices": {}, "resources": {"requests": {"memory": "512Mi"}}},
                     "volumes": [{"name": "rootdisk", "persistentVolumeClaim": {"claimName": name + "-disk"}}]}
    if strategy:
        template_spec["evictionStrategy"] = strategy
    return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name + "-disk", "namespace": "desched-test"},
             "spec": {"accessModes": [access_mode], "storageClassName": "ceph-rbd", "volumeMode": "Block",
                      "resources": {"requests": {"storage": "10Gi"}}}},
            {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": name, "namespace": "desched-test"},
             "spec": {"runStrategy": "Always", "template": {"metadata": {"labels": {"app": "desched-test", "kubevirt.io/vm": name}},
                                                            "spec": template_spec}}}]


BAD_VMS = yaml.safe_dump_all(vm_with_disk("vm-none", "ReadWriteMany", "None") + vm_with_disk("vm-rwo", "ReadWriteOnce"))


def workload_state(sim) -> dict:
    """What the preflight must never change: the policy ConfigMap and the CronJob's spec."""
    configmap = sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")
    cronjob = sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")
    return {"configmap": configmap["metadata"]["resourceVersion"], "cronjob": cronjob["spec"],
            "resourcepatches": sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"]}


def test_preflight_passes_on_the_page_setting(kubesim_factory):
    sim = kubesim_factory("rebalance-two-workers")
    run = run_tasks(sim, ROLE, extra_vars=dict(SCOPE, descheduler_preflight_nodes=["worker-a", "worker-b"]), check=True)
    result = run.fact("descheduler_preflight_result")
    assert result["passed"] and result["problems"] == []
    nodes = {node["name"]: node for node in result["summary"]["nodes"]}
    assert set(nodes) == {"worker-a", "worker-b"} and nodes["worker-a"]["usage_percent"]["memory"] == 72.0
    vmis = {vm["metadata"]["name"]: vm for vm in sim.kubectl_json("-n", "desched-test", "get", "vmi")["items"]}
    assert {(vm["name"], vm["node"], vm["uid"], vm["strategy"], vm["verdict"]) for vm in result["summary"]["vms"]} == {
        (name, vmi["status"]["nodeName"], vmi["metadata"]["uid"], "LiveMigrateIfPossible", "migrate") for name, vmi in vmis.items()}
    # the package's default policy protects PVC Pods: printed as a warning, not a failure
    assert [w["code"] for w in result["warnings"]] == ["policy_protects_pvc_pods"]
    assert run.changed() == 0


def test_old_package_fails_on_the_feature_gate_and_changes_nothing(kubesim_factory):
    sim = kubesim_factory("old-package")
    before = workload_state(sim)
    run = run_tasks(sim, ROLE, extra_vars=SCOPE, expect_failure=True)
    result = run.fact("descheduler_preflight_result")
    assert not result["passed"] and [p["code"] for p in result["problems"]] == ["feature_gate_missing"]
    assert [t["task"].split(" : ")[-1] for t in run.failed()] == ["Stop when a prerequisite is missing"]
    message = run.result("Stop when a prerequisite is missing")["msg"]
    assert "CronJob descheduler/descheduler: --feature-gates=EvictionsInBackground=true is not rendered" in message
    assert "upgrade the Alauda Container Platform Descheduler plugin" in message and "Do not hand-edit" in message
    assert run.changed() == 0
    assert workload_state(sim) == before


def wait_for_vmis(sim, names, timeout=30.0):
    """The VMIs of desched-test by name, once each of `names` reports its LiveMigratable condition."""
    def reported():
        vmis = {vmi["metadata"]["name"]: vmi for vmi in sim.kubectl_json("-n", "desched-test", "get", "vmi")["items"]}
        return vmis if all(any(c["type"] == "LiveMigratable" for c in (vmis.get(n, {}).get("status") or {}).get("conditions") or [])
                           for n in names) else None
    return wait_for(reported, timeout=timeout, what=f"VMIs {names} to report LiveMigratable")


def test_strategy_none_and_rwo_vms_are_named_in_one_failure(kubesim_factory):
    sim = kubesim_factory("rebalance-two-workers")
    sim.kubectl("apply", "-f", "-", input=BAD_VMS)
    vmis = wait_for_vmis(sim, ["vm-none", "vm-rwo"])
    assert vmis["vm-none"]["spec"]["evictionStrategy"] == "None"
    run = run_tasks(sim, ROLE, extra_vars=SCOPE, expect_failure=True)
    problems = {(p["code"], p["name"]): p for p in run.fact("descheduler_preflight_result")["problems"]}
    assert set(problems) == {("vmi_strategy_not_migrating", "vm-none"), ("vmi_not_live_migratable", "vm-rwo"),
                             ("vmi_storage_not_shared", "vm-rwo-disk")}
    assert problems[("vmi_strategy_not_migrating", "vm-none")]["observed"].startswith("effective None")
    # the VM template sets None: the fix is in the template, then a restart
    assert "spec.template.spec.evictionStrategy of VM vm-none" in problems[("vmi_strategy_not_migrating", "vm-none")]["fix"]
    message = run.result("Stop when a prerequisite is missing")["msg"]
    assert "3 prerequisite(s)" in message and "VirtualMachineInstance desched-test/vm-none" in message
    assert "PersistentVolumeClaim desched-test/vm-rwo-disk" in message
