"""Least privilege for descheduler_run, vm_migration_wait and the rebalance roles: each runs as a user bound only to
its documented set (docs/rbac/<module>.yaml, docs/rbac/roles/<role>.yaml) on the rebalance scenario with RBAC on and
succeeds; with one permission taken out it fails naming the verb and the resource, the cluster as before."""
from __future__ import annotations

import pytest
import yaml

from support.policy import PAGE_OPTIONS, PAGE_POLICY
from support.rbac import RBAC_DIR, api, as_user, assert_denied, grant, manifests, rbac_kubesim, role_denied, snapshot, without
from support.simulator import ROOT

from .module_call import call_module
from .ansible_run import run_role

pytestmark = pytest.mark.simulator

USERS = ["run", "wait", "rollback", "compat", "rebalance", "reduced"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    grants = {"run": manifests("descheduler_run"), "wait": manifests("vm_migration_wait"),
              "rollback": manifests("roles/descheduler_rollback"), "compat": manifests("roles/descheduler_compat")[:2]}
    if (ROOT / "roles" / "descheduler_rebalance").is_dir():
        grants["rebalance"] = manifests("roles/descheduler_rebalance")
    with rbac_kubesim(tmp_path_factory.mktemp("least-privilege-roles"), "rebalance-two-workers", "rebalance-rbac-roles", USERS, grants) as started:
        yield started


def jobs(sim) -> list:
    return api(sim, "GET", "/apis/batch/v1/namespaces/descheduler/jobs")["items"]


def test_descheduler_run_creates_and_follows_a_job_as_its_user(sim):
    result = call_module("descheduler_run", as_user(sim, "run", trigger="create", timeout=60))
    assert not result["failed"], result
    assert result["job"]["name"] in {job["metadata"]["name"] for job in jobs(sim)}


def test_descheduler_run_without_create_jobs_names_it_and_creates_none(sim):
    grant(sim, "reduced", without(manifests("descheduler_run"), "Role", "jobs", "create"))
    before = {job["metadata"]["name"] for job in jobs(sim)}
    assert_denied(call_module("descheduler_run", as_user(sim, "reduced", trigger="create", timeout=20)), "create", "jobs")
    assert {job["metadata"]["name"] for job in jobs(sim)} == before


@pytest.mark.parametrize("verb", ["list"])  # watch is used only while a migration is in flight: the rollback test covers it
def test_vm_migration_wait_as_its_user_and_without_one_verb(sim, verb):
    result = call_module("vm_migration_wait", as_user(sim, "wait", timeout=30))
    assert not result["failed"], result
    grant(sim, "reduced", without(manifests("vm_migration_wait"), "ClusterRole", "virtualmachineinstancemigrations", verb))
    assert_denied(call_module("vm_migration_wait", as_user(sim, "reduced", timeout=5)), verb, "virtualmachineinstancemigrations")


def policy_objects(sim) -> dict:
    """The ConfigMaps and ResourcePatches (the CronJob's own runs keep moving the VMs meanwhile)."""
    return {key: version for key, version in snapshot(sim).items() if key[0] in ("ConfigMap", "ResourcePatch")}


def cronjob(sim) -> dict:
    return api(sim, "GET", "/apis/batch/v1/namespaces/descheduler/cronjobs/descheduler")


def test_rollback_role_runs_as_its_user_and_stops_naming_a_missing_patch(sim, tmp_path):
    applied = call_module("descheduler_policy", dict(PAGE_OPTIONS, kubeconfig=sim.kubeconfig, backup_dir=str(tmp_path / "b"),
                                                     cluster_name="workload"))
    assert not applied["failed"] and api(sim, "GET", "/api/v1/namespaces/descheduler/configmaps/descheduler")["data"]["policy.yaml"] == PAGE_POLICY
    grant(sim, "reduced", without(manifests("roles/descheduler_rollback"), "Role", "cronjobs", "patch"))
    before = policy_objects(sim)
    denied = run_role(sim, "descheduler_rollback", {"context": "reduced@workload", "descheduler_rollback_backup_dir": str(tmp_path / "b"),
                                                    "descheduler_rollback_timeout": 30}, expect_failure=True, name="denied")
    role_denied(denied, "patch", "cronjobs")
    assert policy_objects(sim) == before and cronjob(sim)["spec"].get("suspend") is not True
    result = run_role(sim, "descheduler_rollback", {"context": "rollback@workload", "descheduler_rollback_backup_dir": str(tmp_path / "b"),
                                                    "descheduler_rollback_timeout": 60}).result
    assert result["resource_patches_deleted"] == [applied["resource_patch"]["name"]] and result["policy_restored"] is True
    assert api(sim, "GET", "/apis/operator.alauda.io/v1alpha1/namespaces/descheduler/resourcepatches")["items"] == []
    assert cronjob(sim)["spec"].get("suspend") is False


def test_compat_role_runs_as_its_user_and_without_listing_configmaps_names_it(sim, tmp_path):
    result = run_role(sim, "descheduler_compat", {"context": "compat@workload", "descheduler_compat_report_dir": str(tmp_path)}).result
    assert not [c for c in result["checks"] if c["result"] == "fail"], result["checks"]
    grant(sim, "reduced", without(manifests("roles/descheduler_compat")[:2], "Role", "configmaps", "list"))
    denied = run_role(sim, "descheduler_compat", {"context": "reduced@workload", "descheduler_compat_report_dir": str(tmp_path / "r")},
                      expect_failure=True, name="denied")
    role_denied(denied, "list", "configmaps")


def test_rebalance_role_without_create_configmaps_stops_at_the_cluster_copy_of_its_backup_before_any_change(sim, tmp_path):
    """The backup is stored in the cluster (run_backup: a ConfigMap per run) before the policy changes: refused, nothing changes."""
    variables = {"descheduler_rebalance_namespace": "desched-test", "descheduler_rebalance_nodes": ["worker-a", "worker-b"],
                 "descheduler_rebalance_vm_labels": {"app": "desched-test"}, "descheduler_rebalance_cluster_name": "workload"}
    grant(sim, "reduced", without(manifests("roles/descheduler_rebalance"), "Role", "configmaps", "create"))
    before = policy_objects(sim)
    denied = run_role(sim, "descheduler_rebalance", {"context": "reduced@workload", "descheduler_rebalance_backup_dir": str(tmp_path / "d"),
                                                     **variables}, expect_failure=True, name="rebalance-no-copy")
    role_denied(denied, "create", "configmaps")
    assert policy_objects(sim) == before


def test_rebalance_role_applies_the_page_policy_as_its_user_and_without_update_changes_nothing(sim, tmp_path):
    """Last in this file: it leaves the page's policy applied (preflight, backup and plan are reads, update the one write)."""
    variables = {"descheduler_rebalance_namespace": "desched-test", "descheduler_rebalance_nodes": ["worker-a", "worker-b"],
                 "descheduler_rebalance_vm_labels": {"app": "desched-test"}, "descheduler_rebalance_cluster_name": "workload"}
    grant(sim, "reduced", without(manifests("roles/descheduler_rebalance"), "Role", "configmaps", "update"))
    before = policy_objects(sim)
    denied = run_role(sim, "descheduler_rebalance", {"context": "reduced@workload", "descheduler_rebalance_backup_dir": str(tmp_path / "d"),
                                                     **variables}, expect_failure=True, name="rebalance-denied")
    role_denied(denied, "update", "configmaps")
    assert policy_objects(sim) == before
    result = run_role(sim, "descheduler_rebalance", {"context": "rebalance@workload", "descheduler_rebalance_backup_dir": str(tmp_path / "b"),
                                                     **variables}, name="rebalance").result
    assert result["changed"] and api(sim, "GET", "/api/v1/namespaces/descheduler/configmaps/descheduler")["data"]["policy.yaml"] == PAGE_POLICY


def test_every_role_set_is_a_valid_rbac_object():
    roles = sorted((RBAC_DIR / "roles").glob("*.yaml"))
    assert {path.stem for path in roles} >= {"descheduler_preflight", "descheduler_backup", "descheduler_rebalance", "descheduler_rollback",
                                             "descheduler_compat", "rebalance_validate", "vm_pdb", "node_maintenance", "node_maintenance_finish"}
    for path in sorted(RBAC_DIR.glob("*.yaml")) + roles:
        for doc in yaml.safe_load(path.read_text())["items"]:
            assert doc["kind"] in ("ClusterRole", "Role") and doc["metadata"]["name"].startswith("kubevirt-ops-"), path
            for rule in doc["rules"]:
                assert rule["apiGroups"] and rule["resources"] and rule["verbs"], (path, rule)
                assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], (path, rule)
