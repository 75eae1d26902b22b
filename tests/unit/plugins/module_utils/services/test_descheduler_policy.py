"""The pure parts of applying a policy: which policy is wanted from the options, the VM profiles, the
ResourcePatch name from the API warning, and the backup file (name, content, read back, never overwritten)."""
from __future__ import annotations

import datetime

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_policy as apply
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption

from .. import k8s_objects as k8s

NOW = datetime.datetime(2026, 11, 30, 10, 15, 0, tzinfo=datetime.timezone.utc)
OPTIONS = {"nodes": ["worker-a", "worker-b"], "vm_labels": {"app": "desched-test"}, "thresholds": {"cpu": 70, "memory": 60, "pods": 20},
           "target_thresholds": {"cpu": 75, "memory": 68, "pods": 30}, "max_pods_to_evict_per_node": 1,
           "max_pods_to_evict_per_namespace": 1, "max_pods_to_evict_total": 1, "node_fit": True}


def test_wanted_policy_rendered_or_given():
    assert apply.wanted_policy(OPTIONS, None) == k8s.VM_POLICY
    assert apply.wanted_policy({"policy": yaml.safe_dump(k8s.VM_POLICY), "node_fit": True}, None) == k8s.VM_POLICY


def test_wanted_policy_refuses_both_and_neither():
    with pytest.raises(InvalidOption) as both:
        apply.wanted_policy(dict(OPTIONS, policy=k8s.VM_POLICY), None)
    assert both.value.path == "policy" and "mutually exclusive" in both.value.problem
    with pytest.raises(InvalidOption) as neither:
        apply.wanted_policy({"nodes": ["a"]}, None)
    assert neither.value.path == "thresholds"


def test_vm_profiles_default_to_profile_name():
    assert apply.vm_profiles({"profile_name": "vms"}) == ["vms"]
    assert apply.vm_profiles({"profile_name": "vms", "vm_profiles": []}) == []


class Headers(dict):
    def getlist(self, name):
        return [v for k, v in self.items() if k.lower() == name.lower()]


class Response:
    def __init__(self, headers):
        self.headers = headers


def test_resource_patch_name_from_the_warning_header():
    warnings = apply.warnings_of(Response(Headers({"Warning": '299 - "The operation is allowed, and ResourcePatch rp-x7k2q is created"'})))
    assert warnings == ["The operation is allowed, and ResourcePatch rp-x7k2q is created"]
    assert apply.resource_patch_from(warnings) == "rp-x7k2q"
    assert apply.resource_patch_from(["something else"]) is None
    assert apply.warnings_of(Response(None)) == []


def test_backup_written_verified_and_never_overwritten(tmp_path):
    configmap = k8s.configmap()
    configmap["metadata"]["resourceVersion"] = "42"
    first = apply.backup_configmap(configmap, str(tmp_path / "b"), "https://10.0.0.1:6443", now=NOW)
    assert first.endswith("/10.0.0.1-6443_descheduler_descheduler_20261130T101500.000000Z.yaml")
    assert yaml.safe_load(open(first, encoding="utf-8")) == configmap
    second = apply.backup_configmap(configmap, str(tmp_path / "b"), "https://10.0.0.1:6443", now=NOW)
    assert second != first and second.endswith("-1.yaml")
    assert apply.read_backup(first) == configmap


def test_read_backup_refuses_what_is_not_a_configmap(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("kind: Secret\n")
    with pytest.raises(InvalidOption) as error:
        apply.read_backup(str(path))
    assert error.value.path == "backup_file"


class FakeCluster:
    """The two calls `_write` makes: the update (answering the given warnings) and the ResourcePatch list."""

    namespace = "descheduler"

    def __init__(self, warnings, patches):
        self.warnings = warnings
        self.patches = patches
        self.written = None

    def replace_configmap(self, body):
        self.written = body
        return dict(body, metadata=dict(body["metadata"], resourceVersion="43")), self.warnings

    def resource_patches(self):
        return self.patches


def test_write_names_the_resource_patch_from_the_warning_else_by_lookup():
    configmap = k8s.configmap()
    configmap["metadata"]["resourceVersion"] = "42"
    cluster = FakeCluster(["The operation is allowed, and ResourcePatch rp-abcde is created"], [])
    stored, written = apply._write(cluster, configmap, {"policy.yaml": "x"}, [])
    assert written["resource_patch"] == {"name": "rp-abcde", "namespace": "descheduler", "source": "warning"}
    assert cluster.written["metadata"]["resourceVersion"] == "42" and cluster.written["data"] == {"policy.yaml": "x"}
    assert stored["metadata"]["resourceVersion"] == "43"
    old, new = k8s.resource_patch("rp-old"), k8s.resource_patch("rp-new", created="2026-11-30T10:05:00Z")
    looked_up = apply._write(FakeCluster([], [old, new]), configmap, {"policy.yaml": "x"}, ["rp-old"])[1]["resource_patch"]
    assert looked_up["name"] == "rp-new" and looked_up["source"] == "lookup"
    assert apply._write(FakeCluster([], []), configmap, {"policy.yaml": "x"}, [])[1]["resource_patch"] is None


def test_a_backup_taken_with_no_resource_patch_is_marked_as_the_chart_rendering(tmp_path):
    configmap = k8s.configmap(text="chart\n")
    marked = apply.backup_configmap(configmap, str(tmp_path), "workload", now=NOW, chart_rendering=True)
    plain = apply.backup_configmap(configmap, str(tmp_path), "workload", now=NOW)
    assert open(marked, encoding="utf-8").readline() == apply.CHART_MARK
    assert apply.CHART_MARK not in open(plain, encoding="utf-8").read()
    assert apply.read_backup(marked) == configmap == apply.read_backup(plain)  # the mark is a comment


def test_chart_backup_is_the_newest_marked_backup_of_the_same_configmap(tmp_path):
    live = k8s.configmap(text="override\n")
    live["metadata"]["uid"] = "uid-1"
    older = dict(k8s.configmap(text="chart v1\n"), metadata=dict(live["metadata"]))
    newer = dict(k8s.configmap(text="chart v2\n"), metadata=dict(live["metadata"]))
    assert apply.chart_backup(str(tmp_path / "none"), "workload", live) is None
    apply.backup_configmap(older, str(tmp_path), "workload", now=NOW, chart_rendering=True)
    wanted = apply.backup_configmap(newer, str(tmp_path), "workload", now=NOW + datetime.timedelta(minutes=1), chart_rendering=True)
    # not the chart's: taken with a ResourcePatch in place, of another cluster, of a ConfigMap with another uid
    apply.backup_configmap(live, str(tmp_path), "workload", now=NOW + datetime.timedelta(minutes=2))
    apply.backup_configmap(newer, str(tmp_path), "other", now=NOW + datetime.timedelta(minutes=3), chart_rendering=True)
    recreated = dict(newer, metadata=dict(newer["metadata"], uid="uid-2"))
    apply.backup_configmap(recreated, str(tmp_path), "workload", now=NOW + datetime.timedelta(minutes=4), chart_rendering=True)
    path, backup = apply.chart_backup(str(tmp_path), "workload", live)
    assert path == wanted and backup["data"]["policy.yaml"] == "chart v2\n"


@pytest.mark.parametrize("text,before,chart,done", [
    ("override\n", "override\n", None, False),   # nothing known, nothing changed yet: wait
    ("chart\n", "override\n", None, True),       # the reconciler wrote
    ("chart\n", "chart\n", "chart\n", True),     # restored to the chart's text before: no write will come
    ("override\n", "override\n", "chart\n", False),
    ("chart v2\n", "override\n", "chart\n", True),  # a newer chart rendering than the backup's
])
def test_absent_is_done_when_the_text_changed_or_is_the_charts(text, before, chart, done):
    assert apply.absent_done(text, before, chart) is done


class AbsentCluster:
    """What `_absent` calls, with a ConfigMap that no reconciler will change."""

    namespace = "descheduler"

    def __init__(self, configmap, patches):
        self.configmap, self.patches, self.deleted, self.waited = configmap, patches, [], None

    def resource_patches(self):
        return [p for p in self.patches if p["metadata"]["name"] not in self.deleted]

    def delete_resource_patch(self, name):
        self.deleted.append(name)

    def cluster_name(self, params):
        return params["cluster_name"]

    def wait_for_change(self, name, resource_version, done, timeout):
        self.waited = timeout
        return self.configmap if done(self.configmap) else None


def test_absent_after_restoring_the_chart_text_returns_at_once(tmp_path):
    chart = k8s.configmap(text="chart\n")
    params = {"backup_dir": str(tmp_path), "cluster_name": "workload", "wait_timeout": 5}
    apply.backup_configmap(chart, str(tmp_path), "workload", now=NOW, chart_rendering=True)
    cluster = AbsentCluster(chart, [k8s.resource_patch("rp-override"), k8s.resource_patch("rp-restore")])
    result = apply._absent(params, False, cluster, chart, "policy.yaml", "chart\n", {})
    assert result["changed"] and cluster.deleted == ["rp-override", "rp-restore"]
    assert result["chart_policy_from"].startswith(str(tmp_path)) and result["diff"]["before"] == result["diff"]["after"] == "chart\n"
    # without a marked backup the same state cannot be told from an override the reconciler has not undone yet
    other = tmp_path / "empty"
    cluster = AbsentCluster(chart, [k8s.resource_patch("rp-override")])
    with pytest.raises(apply.RebalanceError) as error:
        apply._absent(dict(params, backup_dir=str(other)), False, cluster, chart, "policy.yaml", "chart\n", {})
    assert "no backup in backup_dir shows the chart's policy" in str(error.value) and error.value.path == "wait_timeout"
