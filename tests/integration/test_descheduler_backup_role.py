"""The `descheduler_backup` role run by ansible-playbook against the simulator: the policy ConfigMap and the
CronJob (or Deployment) are written as YAML equal to the live objects, and the ConfigMap backup is accepted by
descheduler_policy state=restored; a second backup in the same run writes nothing and keeps the first (also
when the live policy changed in between, which it reports); a new run makes a new backup; check mode writes
nothing (on a Deployment-mode installation)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from .ansible_run import run_tasks

pytestmark = pytest.mark.simulator

BACKUP = {"name": "Back up the Descheduler", "ansible.builtin.include_role": {"name": "kubevirt_ops.rebalance.descheduler_backup"}}
CHANGE_POLICY = {"name": "Change the policy in between", "kubernetes.core.k8s": {
    "state": "patched", "kind": "ConfigMap", "namespace": "descheduler", "name": "descheduler",
    "definition": {"data": {"policy.yaml": "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n"}}}}


def live(sim, kind: str) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", kind, "descheduler")


def backup_vars(tmp_path: Path) -> dict:
    return {"descheduler_backup_dir": str(tmp_path / "backups"), "descheduler_backup_cluster_name": "workload-1"}


def test_backup_files_equal_the_live_objects_and_restore_accepts_them(kubesim_factory, tmp_path):
    sim = kubesim_factory("rebalance-two-workers")
    restore_check = {"name": "The ConfigMap backup is a restore file", "check_mode": True, "kubevirt_ops.rebalance.descheduler_policy": {
        "state": "restored", "backup_file": "{{ descheduler_backup_result.path }}", "backup_dir": str(tmp_path / "module-backups")}}
    run = run_tasks(sim, [BACKUP, restore_check], extra_vars=backup_vars(tmp_path))
    result = run.fact("descheduler_backup_result")
    directory = tmp_path / "backups" / "workload-1"
    assert sorted(p.name for p in directory.iterdir()) == sorted([Path(result["path"]).name, Path(result["workload_path"]).name])
    assert result["cluster"] == "workload-1" and result["written"] and result["matches_live"] and result["workload_kind"] == "CronJob"
    assert Path(result["path"]).name == f"{result['run_id']}_configmap_descheduler_descheduler.yaml"
    configmap = yaml.safe_load(Path(result["path"]).read_text())
    assert configmap == live(sim, "configmap")
    cronjob = yaml.safe_load(Path(result["workload_path"]).read_text())
    current = live(sim, "cronjob")
    assert (cronjob["kind"], cronjob["metadata"]["name"], cronjob["spec"]) == ("CronJob", "descheduler", current["spec"])
    assert "--feature-gates=EvictionsInBackground=true" in cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert oct(Path(result["path"]).stat().st_mode & 0o777) == "0o600"
    restored = run.result("The ConfigMap backup is a restore file")
    assert restored["restored_from"] == result["path"] and not restored["changed"]


def test_second_backup_in_a_run_writes_nothing_and_a_new_run_makes_a_new_one(kubesim_factory, tmp_path):
    sim = kubesim_factory("rebalance-two-workers")
    before = live(sim, "configmap")
    run = run_tasks(sim, [BACKUP, CHANGE_POLICY, BACKUP], extra_vars=backup_vars(tmp_path))
    first, second = [r["ansible_facts"]["descheduler_backup_result"] for r in run.results("Record the backup")]
    assert first["run_id"] == second["run_id"] and first["path"] == second["path"]
    assert first["written"] and not second["written"] and second["kept_earlier"] == [second["path"], second["workload_path"]]
    writes = run.results("Write the backups (never over an existing file)")
    assert [r["changed"] for r in writes] == [True, False]
    # the kept backup is the state before the change, and the role says the live policy moved on
    assert yaml.safe_load(Path(second["path"]).read_text())["data"] == before["data"]
    assert not second["matches_live"] and second["stale"] == [second["path"]]
    directory = tmp_path / "backups" / "workload-1"
    assert len(list(directory.iterdir())) == 2
    again = run_tasks(sim, [BACKUP], extra_vars=backup_vars(tmp_path))
    new = again.fact("descheduler_backup_result")
    assert new["run_id"] != first["run_id"] and new["written"] and len(list(directory.iterdir())) == 4
    assert yaml.safe_load(Path(new["path"]).read_text())["data"] == live(sim, "configmap")["data"]


def test_check_mode_reads_but_writes_nothing(kubesim_factory, tmp_path):
    sim = kubesim_factory("deployment-mode")
    run = run_tasks(sim, [BACKUP], extra_vars=backup_vars(tmp_path), check=True)
    result = run.fact("descheduler_backup_result")
    assert result["check_mode"] and not result["written"] and result["workload_kind"] == "Deployment"
    assert result["workload_path"].endswith("_deployment_descheduler_descheduler.yaml")
    assert not (tmp_path / "backups").exists()
    # the copy in the cluster is a server-side dry run: named, not stored
    assert result["cluster_object"].startswith("descheduler/kubevirt-ops-backup-") and result["cluster_object_created"]
    assert sim.kubectl_json("-n", "descheduler", "get", "configmaps", "-l", "app.kubernetes.io/component=run-backup")["items"] == []


PROMETHEUS_POLICY = """apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders:
- source: Prometheus
  prometheus:
    url: https://prometheus-k8s.monitoring.svc:9091
    authToken:
      secretReference:
        namespace: descheduler
        name: prometheus-auth
profiles: []
"""


def test_the_cluster_copy_is_the_files_byte_for_byte_and_keeps_only_the_reference_to_a_secret(kubesim_factory, tmp_path):
    """The policy names the Secret that holds Prometheus' token (actual-load-hot-worker: descheduler/prometheus-auth holds
    kubesim-prometheus-token): the backups, file and cluster copy, keep the reference and never the token."""
    sim = kubesim_factory("actual-load-hot-worker")
    name_secret = dict(CHANGE_POLICY, name="Name the token Secret in the policy")
    name_secret["kubernetes.core.k8s"] = dict(CHANGE_POLICY["kubernetes.core.k8s"], definition={"data": {"policy.yaml": PROMETHEUS_POLICY}})
    run = run_tasks(sim, [name_secret, BACKUP], extra_vars=backup_vars(tmp_path))
    result = run.fact("descheduler_backup_result")
    namespace, name = result["cluster_object"].split("/")
    stored = sim.kubectl_json("-n", namespace, "get", "configmap", name)
    assert stored["immutable"] is True and result["cluster_object_created"]
    files = {Path(path).name: Path(path).read_text() for path in (result["path"], result["workload_path"])}
    assert {"{0}_{1}".format(result["run_id"], key): text for key, text in stored["data"].items()} == files
    assert yaml.safe_load(stored["data"]["configmap_descheduler_descheduler.yaml"])["data"]["policy.yaml"] == PROMETHEUS_POLICY
    record = yaml.safe_load(stored["metadata"]["annotations"]["kubevirt-ops.io/run"])
    assert record["secret_references"] == [{"path": "data.policy.yaml.metricsProviders[0].prometheus.authToken.secretReference",
                                            "namespace": "descheduler", "name": "prometheus-auth"}]
    (encoded,) = sim.kubectl_json("-n", "descheduler", "get", "secret", "prometheus-auth")["data"].values()
    token = base64.b64decode(encoded).decode()
    assert token == "kubesim-prometheus-token"
    for secret in (token, encoded):
        assert secret not in json.dumps(stored) and not any(secret in text for text in files.values())
