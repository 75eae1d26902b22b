"""`kubevirt_ops.rebalance.descheduler_policy` run by the venv's `ansible` against the simulator
(`rebalance-two-workers`): the rebalance procedure's policy rendered from options lands exactly as its YAML, with
a verified backup and the ResourcePatch reported; a second apply is no change; check mode changes nothing but
asks the API server (a server-side dry run, whose refusal fails the check); a bad policy is refused with the
ConfigMap untouched; backup and restore round-trip byte for byte; removing the override brings the chart's
policy back; a concurrent edit between read and write is a conflict; and the first descheduler run moves the
VM the plan names."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml

from support.policy import PAGE_OPTIONS, PAGE_POLICY
from support.waiting import wait_for

from .ansible_run import run_ansible_module, run_tasks
from .conftest import ROOT, start_kubesim, stop_kubesim

pytestmark = pytest.mark.simulator

MODULE = "kubevirt_ops.rebalance.descheduler_policy"
PAGE = ROOT.parent / "shared" / "reference" / "descheduler-vm-rebalance.md"
PAGE_YAML = PAGE_POLICY  # the page's verification policy with the scenario's worker names


def run_module(sim, check: bool = False, diff: bool = False, expect_failure: bool = False, **args) -> dict:
    workdir = Path(sim.kubeconfig).parent
    args.setdefault("backup_dir", str(workdir / "backups"))
    args.setdefault("cluster_name", "workload")
    return run_ansible_module(sim, MODULE, args, check=check, diff=diff, expect_failure=expect_failure)


def configmap(sim) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")


def policy_text(sim) -> str:
    return configmap(sim)["data"]["policy.yaml"]


def resource_patches(sim) -> list:
    return [item["metadata"]["name"] for item in sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"]]


@pytest.fixture
def sim(tmp_path):
    started = start_kubesim("rebalance-two-workers", tmp_path / "sim")
    yield started
    stop_kubesim(started)


def test_page_policy_applied_from_options_is_the_page_yaml(sim):
    original = configmap(sim)
    result = run_module(sim, **PAGE_OPTIONS)
    assert result["changed"] and result["policy_yaml"] == PAGE_YAML
    assert policy_text(sim) == PAGE_YAML
    if PAGE.is_file():
        page = PAGE.read_text().replace("<worker-a>", "worker-a").replace("<worker-b>", "worker-b")
        assert PAGE_YAML in page
    # the ResourcePatch ACP created, named by the API warning, exists
    assert result["resource_patch"]["source"] == "warning"
    assert result["resource_patch"]["name"] in resource_patches(sim)
    assert any("ResourcePatch {0} is created".format(result["resource_patch"]["name"]) in w for w in result["warnings_from_api"])
    # the backup is the whole object as it was before the change
    backup = Path(result["backup_path"])
    assert backup.name.startswith("workload_descheduler_descheduler_") and backup.suffix == ".yaml"
    assert yaml.safe_load(backup.read_text()) == original
    assert result["resource_version"] == configmap(sim)["metadata"]["resourceVersion"]


def test_second_apply_reports_no_change(sim):
    run_module(sim, **PAGE_OPTIONS)
    version = configmap(sim)["metadata"]["resourceVersion"]
    again = run_module(sim, **PAGE_OPTIONS)
    assert not again["changed"] and again["backup_path"] is None
    assert configmap(sim)["metadata"]["resourceVersion"] == version


def test_equal_policy_in_other_text_is_no_change(sim):
    run_module(sim, **PAGE_OPTIONS)
    reordered = yaml.safe_dump(yaml.safe_load(PAGE_YAML), sort_keys=True)
    again = run_module(sim, policy=reordered)
    assert not again["changed"] and policy_text(sim) == PAGE_YAML


def test_check_mode_changes_nothing_and_shows_the_diff(sim):
    before = configmap(sim)
    result = run_module(sim, check=True, diff=True, **PAGE_OPTIONS)
    assert result["changed"] and result["backup_path"] is None
    # the callback prints the diff before the result: the policy text, before and after
    assert "+maxNoOfPodsToEvictTotal: 1" in result["_output"] and "-  - name: RemoveDuplicates" in result["_output"]
    assert configmap(sim) == before and resource_patches(sim) == []
    assert not (Path(sim.kubeconfig).parent / "backups").exists()
    assert result["plan"]["evictions"], result["plan"]


def test_check_mode_sends_a_dry_run_that_stores_nothing(sim):
    before = configmap(sim)
    updates = sim.counters().get("update configmaps", 0)
    result = run_module(sim, check=True, diff=True, **PAGE_OPTIONS)
    assert result["changed"] and result["dry_run"] is True
    assert "+maxNoOfPodsToEvictTotal: 1" in result["_output"] and "-  - name: RemoveDuplicates" in result["_output"]
    # the API server was asked (one update, as a dry run) and kept nothing: no ResourcePatch, no new resourceVersion
    assert sim.counters().get("update configmaps", 0) == updates + 1
    after = configmap(sim)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"] and after == before
    assert resource_patches(sim) == [] and result["resource_patch"] is None and result["warnings_from_api"] == []
    assert result["backup_path"] is None and "resource_version" not in result
    assert not (Path(sim.kubeconfig).parent / "backups").exists()


def test_check_mode_fails_with_the_servers_message_when_it_refuses_the_update(sim):
    """A policy that passes every offline rule but makes the ConfigMap's data larger than the API server takes
    (1 MiB): only the server can refuse it, and check mode must say so before a real run tries."""
    before = sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", "json").stdout
    namespaces = ["ns-{0:05d}-".format(index).ljust(63, "x") for index in range(15000)]  # ~74 bytes a line in the YAML
    backups = Path(sim.kubeconfig).parent / "backups"
    task = {"name": "Check a policy too large for a ConfigMap", "kubevirt_ops.rebalance.descheduler_policy": dict(
        PAGE_OPTIONS, exclude_namespaces=namespaces, backup_dir=str(backups), cluster_name="workload", plan=False)}
    run = run_tasks(sim, [task], check=True, expect_failure=True)
    result = run.result("Check a policy too large for a ConfigMap")
    assert [t["task"] for t in run.failed()] == ["Check a policy too large for a ConfigMap"]
    assert result["error"]["status"] == 422 and result["error"]["reason"] == "Invalid"
    assert result["msg"].startswith("update configmap descheduler/descheduler (server-side dry run): 422 Invalid: "
                                    'ConfigMap "descheduler" is invalid: []: Too long: ')
    assert "1048576 bytes" in result["msg"] and "nothing was changed" in result["msg"]
    after = sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", "json").stdout
    assert after == before and resource_patches(sim) == [] and not backups.exists()


def test_bad_policy_is_refused_and_the_configmap_is_unchanged(sim):
    before = sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", "json").stdout
    bad = yaml.safe_load(PAGE_YAML)
    bad["profiles"][0]["pluginConfig"][1]["args"]["evictableNamespaces"] = {"include": ["desched-test"]}
    result = run_module(sim, expect_failure=True, policy=bad)
    assert result["msg"].startswith("profiles[0].pluginConfig[1].args.evictableNamespaces.include: only Exclude namespaces can be set, "
                                    "inclusion is not supported. Use exclude")
    assert result["error"]["type"] == "PolicyInvalid"
    miscased = yaml.safe_load(PAGE_YAML)
    miscased["maxNoOfPodsToEvictPernode"] = miscased.pop("maxNoOfPodsToEvictPerNode")
    result = run_module(sim, expect_failure=True, policy=yaml.safe_dump(miscased))
    assert "maxNoOfPodsToEvictPernode: unknown field" in result["msg"]
    options = {k: v for k, v in PAGE_OPTIONS.items() if k != "nodes"}
    control = run_module(sim, expect_failure=True, node_selector="kubernetes.io/hostname", **options)
    assert control["msg"].startswith("nodeSelector: selects control-plane node control-plane-1")
    after = sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", "json").stdout
    assert after == before and resource_patches(sim) == []
    assert not (Path(sim.kubeconfig).parent / "backups").exists()


def test_backup_and_restore_round_trip_byte_for_byte(sim):
    original_text = policy_text(sim)
    applied = run_module(sim, **PAGE_OPTIONS)
    backup_text = Path(applied["backup_path"]).read_text()
    restored = run_module(sim, state="restored", backup_file=applied["backup_path"])
    assert restored["changed"] and restored["backup_path"] and restored["backup_path"] != applied["backup_path"]
    assert policy_text(sim) == original_text
    assert Path(applied["backup_path"]).read_text() == backup_text
    assert yaml.safe_load(Path(restored["backup_path"]).read_text())["data"]["policy.yaml"] == PAGE_YAML
    assert not run_module(sim, state="restored", backup_file=applied["backup_path"])["changed"]


def test_absent_removes_the_resource_patch_and_the_chart_policy_returns(sim):
    original_text = policy_text(sim)
    applied = run_module(sim, **PAGE_OPTIONS)
    assert policy_text(sim) == PAGE_YAML
    checked = run_module(sim, check=True, state="absent")
    assert checked["changed"] and checked["resource_patches_removed"] == [applied["resource_patch"]["name"]]
    assert resource_patches(sim) == [applied["resource_patch"]["name"]]
    removed = run_module(sim, state="absent")
    assert removed["changed"] and removed["resource_patches_removed"] == [applied["resource_patch"]["name"]]
    assert resource_patches(sim) == [] and yaml.safe_load(policy_text(sim)) == yaml.safe_load(original_text)
    assert not run_module(sim, state="absent")["changed"]


def test_restoring_the_chart_backup_over_its_resource_patch_deletes_the_patch(sim):
    """As rollback.yml does after a run killed between its write and its record: no second ResourcePatch pins the chart's text."""
    original = configmap(sim)
    applied = run_module(sim, **PAGE_OPTIONS)
    restored = run_module(sim, state="restored", backup_file=applied["backup_path"])
    assert restored["changed"] and restored["resource_patches_removed"] == [applied["resource_patch"]["name"]]
    assert restored["chart_policy_from"] == applied["backup_path"]
    assert resource_patches(sim) == [] and policy_text(sim) == original["data"]["policy.yaml"]
    assert not run_module(sim, state="restored", backup_file=applied["backup_path"])["changed"]


def test_absent_right_after_restoring_the_chart_text_returns_at_once(sim):
    """A restore of the chart's text from a copy that is not known as the chart's rendering (its mark removed, kept
    apart from the backups) is itself a ResourcePatch; deleting both changes nothing, so absent must not wait for a change."""
    original = configmap(sim)
    applied = run_module(sim, **PAGE_OPTIONS)
    marked = Path(applied["backup_path"]).read_text()
    assert marked.startswith("# kubevirt_ops.rebalance: no ResourcePatch")
    copy = Path(sim.kubeconfig).parent / "copied" / "policy.yaml"
    copy.parent.mkdir()
    copy.write_text(marked.split("\n", 1)[1])
    restored = run_module(sim, state="restored", backup_file=str(copy), backup_dir=str(copy.parent))
    assert restored["changed"] and len(resource_patches(sim)) == 2 and policy_text(sim) == original["data"]["policy.yaml"]
    version = configmap(sim)["metadata"]["resourceVersion"]
    started = time.monotonic()
    removed = run_module(sim, state="absent", wait_timeout=60)
    assert time.monotonic() - started < 20, "absent waited for a change that never comes"
    assert removed["changed"] and sorted(removed["resource_patches_removed"]) == sorted([applied["resource_patch"]["name"],
                                                                                        restored["resource_patch"]["name"]])
    assert removed["chart_policy_from"] == applied["backup_path"]
    assert resource_patches(sim) == [] and policy_text(sim) == original["data"]["policy.yaml"]
    assert configmap(sim)["metadata"]["resourceVersion"] == version  # nothing rewrote it


def test_concurrent_edit_between_read_and_write_is_a_conflict(sim):
    sim.add_fault(verb="update", resource="configmaps", name="descheduler", latency=3, count=1)
    results = {}

    def apply():
        results["module"] = run_module(sim, expect_failure=True, **PAGE_OPTIONS)
    worker = threading.Thread(target=apply)
    worker.start()
    wait_for(lambda: list((Path(sim.kubeconfig).parent / "backups").glob("*.yaml")), timeout=60, what="the backup (the module is about to write)")
    sim.kubectl("-n", "descheduler", "annotate", "configmap", "descheduler", "edited-by=someone-else")
    edited = policy_text(sim)
    worker.join(120)
    result = results["module"]
    assert result["error"]["type"] == "Conflict" and "409 Conflict" in result["msg"] and "nothing was overwritten" in result["msg"]
    current = configmap(sim)
    assert current["metadata"]["annotations"]["edited-by"] == "someone-else" and current["data"]["policy.yaml"] == edited


def test_first_descheduler_run_moves_the_planned_vm(sim):
    result = run_module(sim, **PAGE_OPTIONS)
    plan = result["plan"]
    assert [n["category"] for n in plan["nodes"]] == ["overutilized", "underutilized"]
    assert len(plan["evictions"]) == 1
    planned = plan["evictions"][0]
    assert planned["node"] == "worker-a"
    allowed = {planned["vm"], *planned["alternative_vms"]}
    assert allowed == {"vm-1", "vm-2"}

    def first_migrations():
        items = sim.kubectl_json("-n", "desched-test", "get", "virtualmachineinstancemigrations")["items"]
        return sorted(items, key=lambda m: m["metadata"]["creationTimestamp"]) if items else None
    migrations = wait_for(first_migrations, timeout=90, what="the first evacuation migration")
    first_second = migrations[0]["metadata"]["creationTimestamp"]
    first_run = [m for m in migrations if m["metadata"]["creationTimestamp"] == first_second]
    assert len(first_run) == len(plan["evictions"])
    assert first_run[0]["spec"]["vmiName"] in allowed
    assert first_run[0]["metadata"]["annotations"]["kubevirt.io/evacuationMigration"] == planned["node"]


def test_merge_keeps_the_package_profile_and_adds_the_vm_profile(sim):
    original = yaml.safe_load(policy_text(sim))
    result = run_module(sim, merge=True, **PAGE_OPTIONS)
    merged = yaml.safe_load(policy_text(sim))
    assert [p["name"] for p in merged["profiles"]] == [p["name"] for p in original["profiles"]] + ["vm-rebalance"]
    assert merged["profiles"][0] == original["profiles"][0]
    assert merged["profiles"][-1] == yaml.safe_load(PAGE_YAML)["profiles"][0]
    assert [f["code"] for f in result["findings"]] == ["policy_protects_pvc_pods"]
    assert not run_module(sim, merge=True, **PAGE_OPTIONS)["changed"]
