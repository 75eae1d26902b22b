"""The `descheduler_rebalance` role run by ansible-playbook against the simulator (rebalance-two-workers): with
only the nodes and the VM label it applies the page's policy text for text, ACP records a ResourcePatch, the
backup of the chart's policy is written before the change, and a second run changes nothing; check mode shows the
plan and the diff and changes nothing; a bad policy (evictableNamespaces.include) fails naming the field before
anything is written, and a whole policy with rendering options is refused up front."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from support.policy import PAGE_POLICY

from .ansible_run import run_tasks

pytestmark = pytest.mark.simulator

ROLE = [{"name": "Rebalance", "ansible.builtin.include_role": {"name": "kubevirt_ops.rebalance.descheduler_rebalance"}}]


def role_vars(tmp_path: Path, **extra) -> dict:
    return {"descheduler_rebalance_namespace": "desched-test", "descheduler_rebalance_nodes": ["worker-a", "worker-b"],
            "descheduler_rebalance_vm_labels": {"app": "desched-test"}, "descheduler_rebalance_backup_dir": str(tmp_path / "backups"),
            "descheduler_rebalance_cluster_name": "workload-1", **extra}


def state(sim) -> dict:
    configmap = sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")
    return {"resource_version": configmap["metadata"]["resourceVersion"], "policy": configmap["data"]["policy.yaml"],
            "resource_patches": [rp["metadata"]["name"] for rp in sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"]]}


def task_order(run) -> list:
    return [t["task"].split(" : ")[-1] for t in run.tasks]


def test_the_page_policy_is_applied_after_a_backup_and_a_second_run_changes_nothing(kubesim_factory, tmp_path):
    sim = kubesim_factory("rebalance-two-workers")
    before = state(sim)
    run = run_tasks(sim, ROLE, extra_vars=role_vars(tmp_path))
    result = run.fact("descheduler_rebalance_result")
    after = state(sim)
    assert result["changed"] and after["policy"] == PAGE_POLICY == result["policy_text"]
    # ACP recorded the edit; the role returns the ResourcePatch
    assert after["resource_patches"] == [result["resource_patch"]["name"]]
    # the role's backup holds the chart's policy and was written before the apply
    backup = yaml.safe_load(Path(result["backup_path"]).read_text())
    assert backup["data"]["policy.yaml"] == before["policy"] and backup["metadata"]["resourceVersion"] == before["resource_version"]
    order = task_order(run)
    assert order.index("Write the backups (never over an existing file)") < order.index("Apply the bounded policy")
    assert Path(result["workload_backup_path"]).is_file()
    # descheduler_policy's own backup went to the same cluster directory
    assert Path(result["module_backup_path"]).parent == Path(result["backup_path"]).parent
    assert yaml.safe_load(Path(result["module_backup_path"]).read_text())["data"] == backup["data"]
    # the plan: worker-a over, worker-b under, one of the test VMs requested
    categories = {node["name"]: node["category"] for node in result["plan"]["nodes"]}
    assert categories == {"worker-a": "overutilized", "worker-b": "underutilized"}
    assert [e["vm"] in ("vm-1", "vm-2") for e in result["plan"]["evictions"]] == [True]
    assert result["preflight"]["passed"]
    files = sorted(p.name for p in Path(result["backup_path"]).parent.iterdir())

    again = run_tasks(sim, ROLE, extra_vars=role_vars(tmp_path))
    assert again.changed() == 0 and not again.fact("descheduler_rebalance_result")["changed"]
    assert state(sim)["resource_version"] == after["resource_version"]
    assert sorted(p.name for p in Path(result["backup_path"]).parent.iterdir()) == files


def test_check_mode_shows_the_plan_and_diff_and_changes_nothing(kubesim_factory, tmp_path):
    sim = kubesim_factory("rebalance-two-workers")
    before = state(sim)
    run = run_tasks(sim, ROLE, extra_vars=role_vars(tmp_path), check=True)
    result = run.fact("descheduler_rebalance_result")
    # changed says what a real run would change; nothing is written
    assert result["check_mode"] and result["changed"] and result["plan"]["evictions"] and result["module_backup_path"] is None
    assert result["policy_text"] == PAGE_POLICY and result["resource_patch"] is None
    assert "+maxNoOfPodsToEvictTotal: 1" in run.stdout and "Show the plan" in run.stdout
    assert state(sim) == before
    assert not (tmp_path / "backups").exists()


def test_bad_policy_fails_naming_the_field_and_nothing_changes(kubesim_factory, tmp_path):
    sim = kubesim_factory("rebalance-two-workers")
    before = state(sim)
    bad = yaml.safe_load(PAGE_POLICY)
    bad["profiles"][0]["pluginConfig"][1]["args"]["evictableNamespaces"] = {"include": ["desched-test"]}
    options = role_vars(tmp_path)
    del options["descheduler_rebalance_nodes"], options["descheduler_rebalance_vm_labels"]
    run = run_tasks(sim, ROLE, extra_vars=dict(options, descheduler_rebalance_policy=bad, descheduler_rebalance_label_selector="app=desched-test"),
                    expect_failure=True)
    failed = run.failed()
    assert [t["task"].split(" : ")[-1] for t in failed] == ["Stop when the policy is refused (nothing is written)"]
    # the printed failure names the field, the problem and the fix, in a few lines; the registered result keeps it whole
    summary = failed[0]["result"]["msg"].splitlines()
    assert summary[0] == "The policy was refused, nothing was written (1 problem(s)):" and len(summary) <= 8
    # the field is in the whole policy given: the variable to fix is the policy's
    assert summary[1] == ("- profiles[0].pluginConfig[1].args.evictableNamespaces.include (from descheduler_rebalance_policy; playbook: "
                          "rebalance_policy): only Exclude namespaces can be set, inclusion is not supported. Fix: Use exclude, or scope "
                          "the VMs with DefaultEvictor.labelSelector.")
    assert run.result("Validate and plan the policy (nothing is written)")["msg"].startswith(
        "profiles[0].pluginConfig[1].args.evictableNamespaces.include: only Exclude namespaces can be set, inclusion is not supported")
    assert state(sim) == before and not (tmp_path / "backups").exists()

    both = run_tasks(sim, ROLE, extra_vars=dict(role_vars(tmp_path), descheduler_rebalance_policy=PAGE_POLICY), expect_failure=True)
    assert [t["task"].split(" : ")[-1] for t in both.failed()] == ["Refuse a whole policy together with rendering options"]
    assert "descheduler_rebalance_policy and descheduler_rebalance_nodes, descheduler_rebalance_vm_labels are mutually exclusive" in \
        both.failed()[0]["result"]["msg"]
    assert state(sim) == before
