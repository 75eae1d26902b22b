"""The way back kept in the cluster (issue 28, part B).

The AWX case as AWX runs it: `rebalance.yml` through ansible-runner in one private data directory (AWX's job), that
directory and its backup_dir deleted (the execution environment is gone), then `rollback.yml` through ansible-runner in a
fresh one, on plain Kubernetes (the upstream chart in kube-system, no ResourcePatch kind): the policy ConfigMap and the
CronJob come back byte for byte from the run's copy in the cluster, the rollback says it used that copy, and
`history.yml` lists both runs. Then the module's own behaviour, called directly: retention keeps the newest N runs and
never deletes one a Lease record names; check mode stores and deletes nothing; a file with Secret data is refused."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import ansible_runner
import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_backup as rb
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import run_lease

from .ansible_run import ansible_env, connection_vars, localhost_inventory, run_ansible_module, short_temp_dir
from .conftest import ROOT
from .module_call import call_module, run_service

pytestmark = pytest.mark.simulator

NAMESPACE = "kube-system"   # the upstream chart's release namespace
SELECTOR = "app.kubernetes.io/component=run-backup"


def runner(sim, home: Path, playbook: str, variables: dict, job_id: str, check: bool = False) -> dict:
    """One AWX job: the playbook through ansible-runner in a private data directory of its own, with AWX's JOB_ID
    (`check`: a job template's job type *check*)."""
    data = home / "data"
    data.mkdir(parents=True)
    env = ansible_env(home / "work", short_temp_dir(home))
    envvars = {k: env[k] for k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_HOME", "ANSIBLE_NOCOLOR", "TMPDIR", "PATH")}
    envvars["JOB_ID"] = job_id
    run = ansible_runner.run(private_data_dir=str(data), playbook=str(ROOT / "playbooks" / playbook),
                             inventory=str(localhost_inventory(home / "work")), quiet=True, envvars=envvars,
                             cmdline="--check" if check else None,
                             extravars=connection_vars(sim, dict(variables, awx_user_name="alice",
                                                                 backup_dir=str(data / "backups"), reports_dir=str(data / "reports"))))
    return {"rc": run.rc, "stdout": run.stdout.read(), "events": list(run.events), "data": data}


def task_result(job: dict, task: str) -> dict:
    found = [e["event_data"]["res"] for e in job["events"]
             if e.get("event") == "runner_on_ok" and e.get("event_data", {}).get("task") == task]
    assert found, "no result of task {0!r}".format(task)
    return found[-1]


def policy_objects(sim) -> dict:
    configmap = sim.kubectl_json("-n", NAMESPACE, "get", "configmap", "descheduler")
    cronjob = sim.kubectl_json("-n", NAMESPACE, "get", "cronjob", "descheduler")
    return {"data": configmap["data"], "cronjob_spec": cronjob["spec"]}


def backups(sim, namespace: str = NAMESPACE) -> list:
    return sim.kubectl_json("-n", namespace, "get", "configmaps", "-l", SELECTOR)["items"]


@pytest.fixture(scope="module")
def awx_jobs(kubesim_factory, tmp_path_factory):
    """A rebalance job, its directory deleted, then a rollback job and a history job, each in a fresh directory."""
    sim = kubesim_factory("rehearsal-upstream-chart", settle=True)
    # two test VMs on worker-a, as the rehearsal creates them (containerDisk, labelled app=desched-test)
    run_ansible_module(sim, "kubevirt_ops.rebalance.rehearsal_vms", {
        "namespace": "desched-test", "vms": ["vm-1", "vm-2"], "vm_labels": {"app": "desched-test"},
        "source": "worker-a", "destination": "worker-b", "timeout": 300})
    before = policy_objects(sim)
    rebalance = runner(sim, tmp_path_factory.mktemp("awx-job-101"), "rebalance.yml", {
        "rebalance_descheduler_namespace": NAMESPACE, "rebalance_namespace": "desched-test", "rebalance_label_selector": "app=desched-test",
        "rebalance_nodes": ["worker-a", "worker-b"], "rebalance_cycles": 1, "rebalance_min_moved": 0, "rebalance_forecast": False}, "101")
    applied = policy_objects(sim)
    stored = backups(sim)
    backup_files = ({p.name: p.read_text() for p in (rebalance["data"] / "backups" / "localhost").iterdir()}
                    if rebalance["rc"] == 0 else {})
    shutil.rmtree(rebalance["data"])   # AWX's private data directory, backup_dir inside it, gone with the job
    rollback_vars = {"rollback_descheduler_namespace": NAMESPACE, "rollback_descheduler_name": "descheduler"}
    planned = runner(sim, tmp_path_factory.mktemp("awx-job-check"), "rollback.yml", rollback_vars, "110", check=True)
    after_check = policy_objects(sim)
    rollback = runner(sim, tmp_path_factory.mktemp("awx-job-102"), "rollback.yml", rollback_vars, "102")
    history = runner(sim, tmp_path_factory.mktemp("awx-job-103"), "history.yml", {"history_descheduler_namespace": NAMESPACE}, "103")
    return {"sim": sim, "before": before, "applied": applied, "stored": stored, "backup_files": backup_files,
            "rebalance": rebalance, "planned": planned, "after_check": after_check, "rollback": rollback, "history": history,
            "after": policy_objects(sim)}


def test_the_rebalance_job_stores_its_backup_in_the_cluster_before_the_change(awx_jobs):
    rebalance = awx_jobs["rebalance"]
    assert rebalance["rc"] == 0, rebalance["stdout"][-6000:]
    assert awx_jobs["applied"]["data"] != awx_jobs["before"]["data"], "the rebalance applied its policy"
    (stored,) = awx_jobs["stored"]
    labels = stored["metadata"]["labels"]
    assert stored["immutable"] is True and labels["app.kubernetes.io/managed-by"] == "kubevirt_ops.rebalance"
    assert labels["kubevirt-ops.io/playbook"] == "rebalance" and labels["kubevirt-ops.io/cluster"] == "localhost"
    record = json.loads(stored["metadata"]["annotations"][rb.RECORD])
    assert stored["metadata"]["name"] == rb.object_name(record["run_id"]) and labels["kubevirt-ops.io/run-id"] == record["run_id"]
    assert record["holder"]["awx_job_id"] == "101" and record["holder"]["user"] == "alice"
    # the copy holds the objects as they were before the apply: the same text as the files, under the files' names
    assert sorted(stored["data"]) == ["configmap_kube-system_descheduler.yaml", "cronjob_kube-system_descheduler.yaml"]
    # (beside them, descheduler_policy's own save of the ConfigMap just before its update: the same state)
    run_files = {name: text for name, text in awx_jobs["backup_files"].items() if name.startswith(record["run_id"] + "_")}
    assert run_files == {"{0}_{1}".format(record["run_id"], key): text for key, text in stored["data"].items()}
    assert yaml.safe_load(stored["data"]["configmap_kube-system_descheduler.yaml"])["data"] == awx_jobs["before"]["data"]
    assert yaml.safe_load(stored["data"]["cronjob_kube-system_descheduler.yaml"])["spec"] == awx_jobs["before"]["cronjob_spec"]


def test_a_rollback_job_in_check_mode_plans_from_the_cluster_copy_and_changes_nothing(awx_jobs):
    planned = awx_jobs["planned"]
    assert planned["rc"] == 0, planned["stdout"][-6000:]
    assert awx_jobs["after_check"] == awx_jobs["applied"], "check mode left the applied policy and the CronJob as they were"
    name = "{0}/{1}".format(NAMESPACE, awx_jobs["stored"][0]["metadata"]["name"])
    assert "Restoring from the cluster copy {0} (run ".format(name) in planned["stdout"]
    assert len(awx_jobs["stored"]) == 1 and task_result(planned, "Read the cluster's run record (check mode)")["lease_record"]["playbook"] == "rebalance"


def test_a_rollback_job_in_a_fresh_directory_restores_the_policy_and_cronjob_byte_for_byte_from_the_cluster_copy(awx_jobs):
    rollback = awx_jobs["rollback"]
    assert rollback["rc"] == 0, rollback["stdout"][-6000:]
    assert awx_jobs["after"] == awx_jobs["before"], "the policy text and the CronJob spec are the ones before the rebalance"
    (stored,) = awx_jobs["stored"]
    copy = yaml.safe_load(stored["data"]["configmap_kube-system_descheduler.yaml"])
    assert awx_jobs["after"]["data"] == copy["data"]
    name = "{0}/{1}".format(NAMESPACE, stored["metadata"]["name"])
    assert "Restoring from the cluster copy {0} (run ".format(name) in rollback["stdout"]
    (report,) = (rollback["data"] / "reports" / "localhost").glob("rollback-*.json")
    document = json.loads(report.read_text())
    assert document["status"] == "passed" and document["rollback"]["method"] == "backup"
    assert document["rollback"]["backup_copy"] == name and document["rollback"]["policy_restored"]
    assert "| backup_copy | {0} |".format(name) in report.with_suffix(".md").read_text()


def test_the_history_lists_both_jobs_newest_first(awx_jobs):
    history = awx_jobs["history"]
    assert history["rc"] == 0, history["stdout"][-6000:]
    runs = task_result(history, "Read the cluster's runs")["runs"]
    assert [(r["playbook"], r["outcome"]) for r in runs] == [("rollback", "rolled_back"), ("rebalance", "rolled_back")]
    rollback, rebalance = runs
    assert rebalance["who"] == "AWX job 101 (alice)" and rollback["who"] == "AWX job 102 (alice)"
    assert rebalance["backup"] == "{0}/{1}".format(NAMESPACE, awx_jobs["stored"][0]["metadata"]["name"])
    assert rollback["restored_from"] == rebalance["backup"] and rebalance["rolled_back_by"]["run_id"] == rollback["run_id"]
    lines = task_result(history, "Show the runs, newest first")["msg"]
    assert lines[0].startswith("RUN ID | PLAYBOOK | WHO | STARTED | OUTCOME | BACKUP")
    assert lines[1].startswith(rollback["run_id"] + " | rollback | AWX job 102 (alice)")
    assert lines[2].startswith(rebalance["run_id"] + " | rebalance | AWX job 101 (alice)") and lines[2].endswith(rebalance["backup"])


# ------------------------------------------------------------------------------------------ the module, called directly
def store(sim, run_id: str, check_mode: bool = False, **args) -> dict:
    files = {"{0}_configmap_default_x.yaml".format(run_id): "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n"}
    params = dict({"kubeconfig": sim.kubeconfig, "namespace": "default", "run_id": run_id, "playbook": "rebalance",
                   "cluster_name": "c1", "files": files, "retention": 2}, **args)
    return call_module("run_backup", params, check_mode=check_mode)


def names(sim) -> list:
    return sorted(o["metadata"]["name"] for o in backups(sim, "default"))


def test_retention_keeps_the_newest_runs_and_never_one_a_lease_record_names(fresh_kubesim):
    sim = fresh_kubesim("api-basics")
    first = store(sim, "r1")
    assert first["created"] and first["pruned"] == [], first
    # the Lease record of an unfinished run names r1's backup: it stays whatever its age
    lease = run_service(run_lease.run, run_lease.RunLeaseOptions, spec_params(
        run_lease.ARG_SPEC, kubeconfig=sim.kubeconfig, run_id="r1", playbook="rebalance", step="apply",
        backup={"cluster_object": "default/" + rb.object_name("r1")}))
    assert lease["record"]["backup"]["cluster_object"] == "default/" + rb.object_name("r1")
    for run_id in ("r2", "r3"):
        assert store(sim, run_id)["created"]
    assert names(sim) == [rb.object_name(r) for r in ("r1", "r2", "r3")]
    fourth = store(sim, "r4")
    assert fourth["pruned"] == [rb.object_name("r2")] and fourth["protected_by_lease"] == ["default/" + rb.object_name("r1")]
    assert names(sim) == [rb.object_name(r) for r in ("r1", "r3", "r4")]
    # check mode: the create and the deletion are dry runs; the cluster keeps what it has
    planned = store(sim, "r5", check_mode=True)
    assert planned["created"] and planned["dry_run"] and planned["pruned"] == [rb.object_name("r3")]
    assert names(sim) == [rb.object_name(r) for r in ("r1", "r3", "r4")]
    # a second store of a run keeps its first backup and changes nothing
    again = store(sim, "r4")
    assert not again["changed"] and again["kept_earlier"] and again["matches"]
    # the outcome goes on the record, the backup's data never changes (immutable)
    finished = call_module("run_backup", {"kubeconfig": sim.kubeconfig, "namespace": "default", "state": "finished", "run_id": "r4",
                                          "outcome": "complete"})
    assert finished["changed"] and finished["marked"] == ["default/" + rb.object_name("r4")]
    history = call_module("run_backup", {"kubeconfig": sim.kubeconfig, "namespace": "default", "state": "history", "run_id": "r4"})
    assert [r["run_id"] for r in history["runs"]] == ["r4", "r3", "r1"] and history["runs"][0]["outcome"] == "complete"
    assert history["runs"][2]["outcome"] == "in_progress"   # r1: from the Lease record
    assert history["backup"]["contents"] == {"configmap_default_x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n"}


def test_a_backup_file_with_secret_data_is_refused_naming_the_file(fresh_kubesim):
    sim = fresh_kubesim("api-basics")
    policy = ("kind: DeschedulerPolicy\nmetricsProviders:\n- source: Prometheus\n  prometheus:\n    authToken:\n"
              "      token: s3cr3t\n      secretReference: {namespace: descheduler, name: prometheus-auth}\n")
    configmap = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "descheduler"}, "data": {"policy.yaml": policy}})
    result = call_module("run_backup", {"kubeconfig": sim.kubeconfig, "namespace": "default", "run_id": "r1", "playbook": "rebalance",
                                        "cluster_name": "c1", "files": {"r1_configmap_default_descheduler.yaml": configmap}})
    assert result["failed"] and result["msg"].startswith(
        "files.r1_configmap_default_descheduler.yaml: holds Secret data (data.policy.yaml.metricsProviders[0].prometheus.authToken.token)")
    assert "without_secret_data" in result["msg"] and names(sim) == []
