"""Least privilege: each module run as a user bound only to the ClusterRole/Role set documented for it in
docs/rbac/<module>.yaml succeeds against the simulator with RBAC on; with one permission taken out of that set the
module fails with a message that names the verb, the resource and what to grant, and the cluster is as before.
vm_migration_cooldown marks and lifts on the VM that migrated; descheduler_storm_breaker trips and resets on an
unsuspended probe CronJob (the scenario's own stays suspended)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import COOLDOWN_UNTIL, PREFER_NO_EVICTION
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.storm_breaker import BREAKER_RECORD

from support.policy import PAGE_OPTIONS, PAGE_POLICY
from support.rbac import RBAC_DIR, api, as_user, assert_denied, grant, manifests, rbac_kubesim, snapshot, without
from support.simulator import evict, suspended_cronjob
from support.waiting import wait_for

from .ansible_run import run_ansible_module, run_role
from .module_call import call_module
from .test_vm_migration_cooldown import NAMESPACE, migrate

pytestmark = pytest.mark.simulator

USERS = ["facts", "policy", "verify", "cooldown", "breaker", "cooldown-role", "backup", "reduced"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    grants = {"facts": manifests("kubevirt_eviction_facts"), "policy": manifests("descheduler_policy"),
              "verify": manifests("vm_migration_verify"), "cooldown": manifests("vm_migration_cooldown"),
              "breaker": manifests("descheduler_storm_breaker"), "cooldown-role": manifests("roles/rebalance_cooldown"),
              "backup": manifests("run_backup")}
    # no scheduled Descheduler run: a VM moving between the snapshots of the "changes nothing" tests would fail them
    with rbac_kubesim(tmp_path_factory.mktemp("least-privilege"), "rebalance-two-workers", "rebalance-rbac", USERS, grants,
                      objects=[suspended_cronjob("rebalance-two-workers")]) as started:
        assert api(started, "GET", "/apis/batch/v1/namespaces/descheduler/cronjobs/descheduler")["spec"]["suspend"] is True
        yield started


# -------------------------------------------------------------------------------------------- facts
def test_facts_module_runs_as_a_user_bound_only_to_its_documented_roles(sim):
    result = run_ansible_module(sim, "kubevirt_ops.rebalance.kubevirt_eviction_facts", {"context": "facts@workload"})
    assert {v["name"] for v in result["vmis"]} == {"vm-1", "vm-2"}
    assert result["descheduler"]["found"] and {n["name"] for n in result["nodes"]} >= {"worker-a", "worker-b"}
    denied = call_module("kubevirt_eviction_facts", as_user(sim, "reduced"))
    assert denied["failed"] and 'User "reduced" cannot list resource' in denied["msg"]


@pytest.mark.parametrize("kind,resource,verb", [
    ("ClusterRole", "pods", "list"),
    ("ClusterRole", "virtualmachineinstances", "list"),
    ("ClusterRole", "hyperconvergeds", "list"),
    ("Role", "configmaps", "list"),
    ("Role", "resourcepatches", "list"),
])
def test_facts_without_one_permission_names_it(sim, kind, resource, verb):
    grant(sim, "reduced", without(manifests("kubevirt_eviction_facts"), kind, resource, verb))
    assert_denied(call_module("kubevirt_eviction_facts", as_user(sim, "reduced")), verb, resource)


# ------------------------------------------------------------------------------------------- verify
def test_verify_module_records_and_verifies_a_migration_as_its_user(sim):
    selection = {"namespace": "desched-test", "label_selector": "app=desched-test"}

    def recorded_running():
        before = call_module("vm_migration_verify", as_user(sim, "verify", mode="record", **selection))
        assert not before["failed"], before
        return before if all(entry["launcher"] for entry in before["baseline"].values()) else None
    before = wait_for(recorded_running, timeout=30, what="every recorded VM's launcher running")
    launcher = before["baseline"]["vm-1"]["launcher"]
    evict(sim, "desched-test", launcher)
    result = call_module("vm_migration_verify", as_user(sim, "verify", baseline=before["baseline"], timeout=60, **selection))
    assert not result["failed"], result
    assert result["passed"] and result["descheduler_log"]["error"] is None, result
    assert [vm["name"] for vm in result["vms"] if vm["verdict"] == "pass"] == ["vm-1"], [(v["name"], v["verdict"]) for v in result["vms"]]


@pytest.mark.parametrize("mode,kind,resource,verb", [
    ("record", "ClusterRole", "virtualmachineinstances", "list"),
    ("record", "ClusterRole", "pods", "list"),
    ("verify", "ClusterRole", "virtualmachineinstancemigrations", "watch"),
])
def test_verify_without_one_permission_names_it(sim, mode, kind, resource, verb):
    grant(sim, "reduced", without(manifests("vm_migration_verify"), kind, resource, verb))
    args = {"namespace": "desched-test", "names": ["vm-2"], "mode": mode, "timeout": 5}
    if mode == "verify":
        args["baseline"] = call_module("vm_migration_verify", as_user(sim, "verify", mode="record", names=["vm-2"],
                                                                      namespace="desched-test"))["baseline"]
    started = time.monotonic()
    assert_denied(call_module("vm_migration_verify", as_user(sim, "reduced", **args)), verb, resource)
    assert time.monotonic() - started < 3  # a refused watch is not retried until the timeout


# ------------------------------------------------------------------------------------------- policy
def test_policy_module_applies_restores_and_removes_as_its_user(sim, tmp_path):
    options = dict(PAGE_OPTIONS, backup_dir=str(tmp_path / "backups"), cluster_name="workload")
    applied = call_module("descheduler_policy", as_user(sim, "policy", **options))
    assert not applied["failed"] and applied["changed"], applied
    live = api(sim, "GET", "/api/v1/namespaces/descheduler/configmaps/descheduler")
    assert live["data"]["policy.yaml"] == PAGE_POLICY
    restored = call_module("descheduler_policy", as_user(sim, "policy", state="restored", backup_file=applied["backup_path"],
                                                         backup_dir=str(tmp_path / "backups"), cluster_name="workload"))
    assert not restored["failed"] and restored["changed"], restored
    removed = call_module("descheduler_policy", as_user(sim, "policy", state="absent", backup_dir=str(tmp_path / "backups"),
                                                        cluster_name="workload", wait_timeout=30))
    assert not removed["failed"], removed
    assert api(sim, "GET", "/apis/operator.alauda.io/v1alpha1/namespaces/descheduler/resourcepatches")["items"] == []


@pytest.mark.parametrize("kind,resource,verb", [
    ("Role", "configmaps", "update"),
    ("Role", "configmaps", "get"),
    ("Role", "cronjobs", "list"),
    ("Role", "resourcepatches", "list"),
    ("ClusterRole", "nodes", "list"),
    ("ClusterRole", "kubevirts", "list"),
])
def test_policy_without_one_permission_names_it_and_changes_nothing(sim, tmp_path, kind, resource, verb):
    grant(sim, "reduced", without(manifests("descheduler_policy"), kind, resource, verb))
    before = snapshot(sim)
    result = call_module("descheduler_policy", as_user(sim, "reduced", backup_dir=str(tmp_path / "b"), cluster_name="workload",
                                                       **PAGE_OPTIONS))
    assert_denied(result, verb, resource)
    assert snapshot(sim) == before


def test_policy_absent_without_delete_on_resource_patches_deletes_none(sim, tmp_path):
    applied = call_module("descheduler_policy", as_user(sim, "policy", backup_dir=str(tmp_path / "b"), cluster_name="workload",
                                                        **PAGE_OPTIONS))
    assert not applied["failed"], applied
    grant(sim, "reduced", without(manifests("descheduler_policy"), "Role", "resourcepatches", "delete"))
    before = snapshot(sim)
    result = call_module("descheduler_policy", as_user(sim, "reduced", state="absent", backup_dir=str(tmp_path / "b"),
                                                       cluster_name="workload"))
    assert_denied(result, "delete", "resourcepatches")
    assert snapshot(sim) == before


# ----------------------------------------------------------------------------------- cooldown, breaker
@pytest.fixture(scope="module")
def migrated(sim):
    """vm-1 live-migrated twice (as the admin): a VM in its cooldown, and one that moved more than once."""
    names = [migrate(sim, "vm-1") for _move in range(2)]
    assert [api(sim, "GET", "/apis/kubevirt.io/v1/namespaces/{0}/virtualmachineinstancemigrations/{1}".format(NAMESPACE, name))
            ["status"]["phase"] for name in names] == ["Succeeded"] * 2
    return names


def launcher_marks(sim) -> dict:
    """Live launcher Pod name -> the cooldown annotations it carries."""
    pods = api(sim, "GET", "/api/v1/namespaces/{0}/pods?labelSelector=kubevirt.io%3Dvirt-launcher".format(NAMESPACE))["items"]
    return {pod["metadata"]["name"]: {k: v for k, v in (pod["metadata"].get("annotations") or {}).items() if k in (PREFER_NO_EVICTION, COOLDOWN_UNTIL)}
            for pod in pods if pod["status"].get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")}


def test_cooldown_module_marks_and_lifts_as_its_user(sim, migrated):
    marked = call_module("vm_migration_cooldown", as_user(sim, "cooldown", namespaces=[NAMESPACE]))
    assert not marked["failed"] and marked["changed"], marked
    entry = next(m for m in marked["marked"] if m["vm"] == "vm-1")
    assert entry["migrations_in_window"] >= 2 and launcher_marks(sim)[entry["pod"]] == {PREFER_NO_EVICTION: "", COOLDOWN_UNTIL: entry["until"]}
    # check_policy read the live policy (the Role's get on the ConfigMap): it has no noEvictionPolicy Mandatory
    assert [f["code"] for f in marked["findings"]] == ["cooldown_not_enforced"], marked["findings"]
    lifted = call_module("vm_migration_cooldown", as_user(sim, "cooldown", state="absent"))  # every namespace, as the rollback does
    assert not lifted["failed"] and entry["pod"] in [m["pod"] for m in lifted["lifted"]], lifted
    assert all(marks == {} for marks in launcher_marks(sim).values())


@pytest.mark.parametrize("kind,resource,verb", [
    ("ClusterRole", "virtualmachineinstancemigrations", "list"),
    ("ClusterRole", "pods", "patch"),
    ("Role", "configmaps", "get"),
])
def test_cooldown_without_one_permission_names_it_and_marks_nothing(sim, migrated, kind, resource, verb):
    grant(sim, "reduced", without(manifests("vm_migration_cooldown"), kind, resource, verb))
    before = launcher_marks(sim)
    assert_denied(call_module("vm_migration_cooldown", as_user(sim, "reduced", namespaces=[NAMESPACE])), verb, resource)
    assert launcher_marks(sim) == before


def test_cooldown_role_runs_as_a_user_bound_only_to_its_role_set(sim, migrated):
    """docs/rbac/roles/rebalance_cooldown.yaml: the cooldown marks vm-1, the breaker reads the migrations and the
    (suspended) CronJob and does not trip; the marks are lifted afterwards."""
    run = run_role(sim, "rebalance_cooldown", {"context": "cooldown-role@workload", "rebalance_cooldown_namespaces": [NAMESPACE],
                                               "rebalance_cooldown_max_migrations_per_vm": 10}, name="cooldown-role")
    result = run.result
    assert "vm-1" in [m["vm"] for m in result["marked"] + result["kept"]], result
    assert result["breaker"]["tripped"] is False and [f["code"] for f in result["findings"]] == ["cooldown_not_enforced"]
    assert any(marks for marks in launcher_marks(sim).values())
    assert not call_module("vm_migration_cooldown", as_user(sim, "cooldown", state="absent"))["failed"]
    assert all(marks == {} for marks in launcher_marks(sim).values())


PROBE = "storm-breaker-probe"


@pytest.fixture
def probe_cronjob(sim):
    """A CronJob that is not suspended and never runs in a test (@yearly), for the breaker to pause: the scenario's own
    stays suspended so that no Descheduler run moves VMs between the other tests' snapshots."""
    path = "/apis/batch/v1/namespaces/descheduler/cronjobs"
    api(sim, "POST", path, {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": PROBE, "namespace": "descheduler"},
                            "spec": {"schedule": "@yearly", "suspend": False, "jobTemplate": {"spec": {"template": {"spec": {
                                "restartPolicy": "Never", "containers": [{"name": "probe", "image": "busybox"}]}}}}}})
    yield PROBE
    api(sim, "DELETE", "{0}/{1}".format(path, PROBE))


def probe(sim) -> dict:
    return api(sim, "GET", "/apis/batch/v1/namespaces/descheduler/cronjobs/" + PROBE)


BREAKER_ARGS = {"namespaces": [NAMESPACE], "descheduler_name": PROBE, "max_migrations_per_vm": 1, "wait_timeout": 30}


def test_storm_breaker_trips_and_resets_as_its_user(sim, migrated, probe_cronjob):
    tripped = call_module("descheduler_storm_breaker", as_user(sim, "breaker", **BREAKER_ARGS))
    assert not tripped["failed"] and tripped["changed"] and tripped["tripped_now"], tripped
    assert "{0}/vm-1 migrated".format(NAMESPACE) in tripped["message"]
    assert probe(sim)["spec"]["suspend"] is True and BREAKER_RECORD in probe(sim)["metadata"]["annotations"]
    reset = call_module("descheduler_storm_breaker", as_user(sim, "breaker", state="reset", descheduler_name=PROBE))
    assert not reset["failed"] and reset["reset"] and reset["restored"] == {"suspend": False}, reset
    assert probe(sim)["spec"]["suspend"] is False and BREAKER_RECORD not in probe(sim)["metadata"]["annotations"]


@pytest.mark.parametrize("state,kind,resource,verb", [
    ("present", "ClusterRole", "virtualmachineinstancemigrations", "list"),
    ("present", "Role", "cronjobs", "patch"),
    ("reset", "Role", "resourcepatches", "list"),
])
def test_storm_breaker_without_one_permission_names_it_and_pauses_nothing(sim, migrated, probe_cronjob, state, kind, resource, verb):
    if state == "reset":  # something to reset: tripped by its own user
        assert call_module("descheduler_storm_breaker", as_user(sim, "breaker", **BREAKER_ARGS))["tripped_now"]
    grant(sim, "reduced", without(manifests("descheduler_storm_breaker"), kind, resource, verb))
    before = probe(sim)["metadata"]["resourceVersion"]
    assert_denied(call_module("descheduler_storm_breaker", as_user(sim, "reduced", **dict(BREAKER_ARGS, state=state))), verb, resource)
    assert probe(sim)["metadata"]["resourceVersion"] == before


# -------------------------------------------------------------------------------------------- run backups in the cluster
BACKUPS = "/api/v1/namespaces/descheduler/configmaps?labelSelector=app.kubernetes.io/component%3Drun-backup"


def run_backup_as(sim, user: str, **args) -> dict:
    files = {"configmap_descheduler_descheduler.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: descheduler\n"}
    params = dict({"namespace": "descheduler", "playbook": "rebalance", "cluster_name": "workload", "files": files, "retention": 1}, **args)
    return call_module("run_backup", as_user(sim, user, **params))


def backup_names(sim) -> list:
    return sorted(item["metadata"]["name"] for item in api(sim, "GET", BACKUPS)["items"])


def test_run_backup_stores_prunes_records_and_lists_as_its_user(sim):
    try:
        assert run_backup_as(sim, "backup", run_id="lp-1")["created"]
        second = run_backup_as(sim, "backup", run_id="lp-2")
        assert second["created"] and second["pruned"] == ["kubevirt-ops-backup-lp-1"]
        assert backup_names(sim) == ["kubevirt-ops-backup-lp-2"]
        finished = run_backup_as(sim, "backup", state="finished", run_id="lp-2", outcome="complete")
        assert finished["marked"] == ["descheduler/kubevirt-ops-backup-lp-2"]
        history = run_backup_as(sim, "backup", state="history", run_id="lp-2")
        assert history["runs"][0]["outcome"] == "complete" and history["backup"]["object"] == "descheduler/kubevirt-ops-backup-lp-2"
    finally:
        for name in backup_names(sim):
            api(sim, "DELETE", "/api/v1/namespaces/descheduler/configmaps/" + name)


@pytest.mark.parametrize("kind,resource,verb", [
    ("Role", "configmaps", "list"),
    ("Role", "leases", "get"),
    ("Role", "configmaps", "create"),
])
def test_run_backup_without_one_permission_names_it_and_stores_nothing(sim, kind, resource, verb):
    grant(sim, "reduced", without(manifests("run_backup"), kind, resource, verb))
    assert_denied(run_backup_as(sim, "reduced", run_id="lp-denied"), verb, resource)
    assert backup_names(sim) == []


def test_run_backup_without_delete_keeps_the_older_backups_and_names_it(sim):
    grant(sim, "reduced", without(manifests("run_backup"), "Role", "configmaps", "delete"))
    try:
        assert run_backup_as(sim, "backup", run_id="lp-old")["created"]
        assert_denied(run_backup_as(sim, "reduced", run_id="lp-new"), "delete", "configmaps")
        assert backup_names(sim) == ["kubevirt-ops-backup-lp-new", "kubevirt-ops-backup-lp-old"]
    finally:
        for name in backup_names(sim):
            api(sim, "DELETE", "/api/v1/namespaces/descheduler/configmaps/" + name)


def test_every_documented_manifest_is_a_valid_rbac_object():
    for path in sorted(RBAC_DIR.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        # run_backup.yaml: a Role in the Descheduler's namespace (the backups) and one in the Lease's (kube-system)
        assert document["kind"] == "List" and [d["kind"] for d in document["items"]] in (
            ["ClusterRole", "Role"], ["ClusterRole"], ["Role"], ["Role", "Role"]), path
        for doc in document["items"]:
            assert doc["apiVersion"] == "rbac.authorization.k8s.io/v1" and doc["kind"] in ("ClusterRole", "Role"), path
            assert doc["metadata"]["name"].startswith("kubevirt-ops-"), path
            for rule in doc["rules"]:
                assert rule["apiGroups"] and rule["resources"] and rule["verbs"], (path, rule)
                assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], (path, rule)
    assert Path(RBAC_DIR.parent / "rbac.md").is_file()
