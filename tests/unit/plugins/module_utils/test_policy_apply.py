"""The pure parts of applying a policy: which policy is wanted from the options, the VM profiles, the
ResourcePatch name from the API warning, and the backup file (name, content, read back, never overwritten)."""
from __future__ import annotations

import datetime

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils import policy_apply as apply
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption

from . import k8s_objects as k8s

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
