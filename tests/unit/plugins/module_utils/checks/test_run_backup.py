"""The runs' backups in the cluster, pure parts: the object's name and labels from the run id, the data keys from the
file names, Secret data dropped (only a Secret's reference kept, the policy text unchanged when it held none), the
retention (newest N kept, never one a Lease record names, the run's own always), the record's patch (metadata only),
and the history merged from the objects and the Lease record, newest first."""
from __future__ import annotations

import json

import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_backup as rb
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_subdomain

POLICY_WITH_SECRET = """apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders:
- source: Prometheus
  prometheus:
    url: https://prometheus-k8s.monitoring.svc:9091
    authToken:
      secretReference:
        namespace: descheduler
        name: prometheus-auth
"""


def backup(run_id, created, namespace="descheduler", **record):
    body = rb.backup_body(rb.object_name(run_id), namespace, run_id, "workload", "rebalance", {"configmap_x.yaml": "kind: ConfigMap\n"},
                          dict({"run_id": run_id, "playbook": "rebalance", "created": created}, **record))
    body["metadata"].update(uid="uid-" + run_id, resourceVersion="7")
    return body


def test_the_object_name_is_the_run_id_as_a_dns_name_and_ids_that_clean_alike_stay_apart():
    assert rb.object_name("20261207t152652z") == "kubevirt-ops-backup-20261207t152652z"
    upper, lower = rb.object_name("20261207T152652Z"), rb.object_name("20261207t152652z")
    assert upper != lower and upper.startswith("kubevirt-ops-backup-20261207t152652z-")
    for run_id in ("20261207T152652.123456Z_awx-1234", "a" * 300, "___"):
        name = rb.object_name(run_id)
        assert is_dns_subdomain(name) and len(name) <= 253, name


def test_labels_are_valid_label_values_and_select_the_collections_backups():
    labels = rb.labels("20261207T152652Z", "my cluster/east", "rebalance")
    assert labels[rb.MANAGED_BY[0]] == "kubevirt_ops.rebalance" and labels[rb.COMPONENT[0]] == "run-backup"
    assert labels[rb.CLUSTER_LABEL] == "my-cluster-east" and labels[rb.RUN_ID_LABEL] == "20261207T152652Z"
    assert rb.label_value("-" + "x" * 80 + "-") == "x" * 63
    assert rb.SELECTOR == "app.kubernetes.io/managed-by=kubevirt_ops.rebalance,app.kubernetes.io/component=run-backup"


def test_data_keys_are_the_file_names_without_the_run_id():
    assert rb.data_key("/b/w/R1_configmap_descheduler_descheduler.yaml", "R1") == "configmap_descheduler_descheduler.yaml"
    assert rb.data_key("R1_cronjob_kube-system_descheduler.yaml", "R1") == "cronjob_kube-system_descheduler.yaml"
    assert rb.data_key("other file.yaml", "R1") == "other-file.yaml"


def test_the_body_is_an_immutable_configmap_with_the_record():
    body = backup("R1", "2026-12-07T15:00:00.000001Z")
    assert body["immutable"] is True and body["kind"] == "ConfigMap" and body["data"] == {"configmap_x.yaml": "kind: ConfigMap\n"}
    assert rb.read_record(body)["run_id"] == "R1"


def test_a_secret_reference_is_kept_and_the_policy_text_is_unchanged():
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "descheduler"}, "data": {"policy.yaml": POLICY_WITH_SECRET}}
    clean, references, removed = rb.scrub(configmap)
    assert clean == configmap and removed == []
    assert references == [{"path": "data.policy.yaml.metricsProviders[0].prometheus.authToken.secretReference",
                           "namespace": "descheduler", "name": "prometheus-auth"}]


def test_a_token_beside_the_reference_and_a_secrets_data_are_dropped():
    inline = POLICY_WITH_SECRET.replace("      secretReference:", "      token: s3cr3t\n      secretReference:")
    configmap = {"kind": "ConfigMap", "metadata": {"name": "descheduler"}, "data": {"policy.yaml": inline}}
    clean, references, removed = rb.scrub(configmap)
    assert "s3cr3t" not in json.dumps(clean) and removed == ["data.policy.yaml.metricsProviders[0].prometheus.authToken.token"]
    policy = yaml.safe_load(clean["data"]["policy.yaml"])
    assert policy["metricsProviders"][0]["prometheus"]["authToken"] == {"secretReference": {"namespace": "descheduler", "name": "prometheus-auth"}}
    assert len(references) == 1 and configmap["data"]["policy.yaml"] == inline   # the input is not changed
    embedded = {"kind": "List", "items": [{"kind": "Secret", "metadata": {"name": "t"}, "data": {"token": "czNjcjN0"}, "stringData": {"a": "b"}}]}
    clean, _references, removed = rb.scrub(embedded)
    assert clean["items"][0] == {"kind": "Secret", "metadata": {"name": "t"}} and removed == ["items[0].data", "items[0].stringData"]
    assert rb.secret_data_paths(embedded) == removed and rb.secret_data_paths(clean) == []


def test_retention_keeps_the_newest_n_and_every_object_a_lease_record_names():
    objects = [backup("R{0}".format(i), "2026-12-07T15:00:0{0}.000000Z".format(i)) for i in range(6)]
    names = [o["metadata"]["name"] for o in objects]
    pruned = [o["metadata"]["name"] for o in rb.to_prune(objects, 3, set())]
    assert pruned == [names[2], names[1], names[0]]
    protected = {"descheduler/" + names[1]}
    assert [o["metadata"]["name"] for o in rb.to_prune(objects, 3, protected)] == [names[2], names[0]]
    # the run's own object counts even when it is not stored yet (check mode): one fewer older object kept
    assert [o["metadata"]["name"] for o in rb.to_prune(objects, 3, set(), keep=["kubevirt-ops-backup-new"])] == [names[3], names[2], names[1], names[0]]
    # the run's own object is never pruned, also when it sorts older (a clock behind)
    assert names[0] not in [o["metadata"]["name"] for o in rb.to_prune(objects, 1, set(), keep=[names[0]])]


def test_lease_names_are_the_runs_own_and_the_unfinished_runs():
    record = {"backup": {"cluster_object": "descheduler/a", "policy_file": "/x"},
              "unfinished_run": {"backup": {"cluster_object": "descheduler/b"}}}
    assert rb.lease_names(record) == {"descheduler/a", "descheduler/b"}
    assert rb.lease_names(None) == set() and rb.lease_names({"backup": {"cluster_object": None}}) == set()


def test_the_record_patch_changes_only_metadata_and_nothing_when_already_said():
    obj = backup("R1", "2026-12-07T15:00:00.000000Z")
    patch = rb.record_patch(obj, {"outcome": "complete"})
    assert set(patch) == {"metadata"} and patch["metadata"]["resourceVersion"] == "7"
    assert json.loads(patch["metadata"]["annotations"][rb.RECORD])["outcome"] == "complete"
    obj["metadata"]["annotations"] = patch["metadata"]["annotations"]
    assert rb.record_patch(obj, {"outcome": "complete"}) is None


def test_history_lists_backups_and_the_last_run_newest_first_with_outcomes():
    first = backup("R1", "2026-12-07T15:00:00.000000Z", holder={"user": "alice", "host": "ctl"}, outcome="complete",
                   rolled_back_by={"run_id": "R3", "outcome": "rolled_back"})
    second = backup("R2", "2026-12-07T15:10:00.000000Z", holder={"awx_job_id": "77", "user": "bob"}, outcome="failed")
    lease = {"run_id": "R3", "playbook": "rollback", "started": "2026-12-07T15:20:00Z", "status": "rolled_back",
             "holder": {"user": "carol", "host": "awx-ee"}, "backup": {"cluster_object": "descheduler/" + first["metadata"]["name"]}}
    entries = rb.history([first, second], lease)
    assert [e["run_id"] for e in entries] == ["R3", "R2", "R1"]
    assert [e["outcome"] for e in entries] == ["rolled_back", "failed", "rolled_back"]
    assert entries[0]["backup"] is None and entries[0]["who"] == "carol@awx-ee" and entries[0]["playbook"] == "rollback"
    assert entries[1]["who"] == "AWX job 77 (bob)" and entries[1]["backup"] == "descheduler/" + second["metadata"]["name"]
    lines = rb.history_lines(entries)
    assert entries[0]["restored_from"] == "descheduler/" + first["metadata"]["name"]
    assert lines[0].startswith("RUN ID | PLAYBOOK") and lines[1].startswith("R3 | rollback | carol@awx-ee")
    assert lines[1].endswith("| rolled_back | restored descheduler/" + first["metadata"]["name"])


def test_history_takes_the_status_of_a_run_in_progress_from_the_lease():
    own = backup("R1", "2026-12-07T15:00:00.000000Z")
    lease = {"run_id": "R1", "playbook": "rebalance", "started": "2026-12-07T14:59:59Z", "status": "in_progress", "step": "validate",
             "backup": {"cluster_object": "descheduler/" + own["metadata"]["name"]}}
    (entry,) = rb.history([own], lease)
    assert entry["outcome"] == "in_progress" and entry["step"] == "validate" and entry["backup"].endswith(own["metadata"]["name"])
    assert rb.history([backup("R0", "2026-12-07T15:00:00.000000Z")], None)[0]["outcome"] == "unknown"
