"""Rendering the bounded VM rebalance policy from options: the rebalance procedure's verification policy, text for text,
merge of a named profile into an existing policy, and the YAML layout."""
from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import model
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import render
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption

from .. import k8s_objects as k8s

# The page's verification policy (shared/reference/descheduler-vm-rebalance.md, "Configure a Bounded VM
# Rebalance Policy"), character for character, placeholders included.
from support.policy import PAGE_POLICY_TEXT

PAGE_OPTIONS = {"profile_name": "vm-rebalance", "nodes": ["<worker-a>", "<worker-b>"], "max_pods_to_evict_per_node": 1,
                "max_pods_to_evict_per_namespace": 1, "max_pods_to_evict_total": 1, "node_fit": True, "vm_labels": {"app": "desched-test"},
                "thresholds": {"cpu": 70, "memory": 60, "pods": 20}, "target_thresholds": {"cpu": 75, "memory": 68, "pods": 30}}


def page_options(**changes):
    """PAGE_OPTIONS with some changed (built by update: pylint reads dict(PAGE_OPTIONS, x=...) as x given twice)."""
    options = dict(PAGE_OPTIONS)
    options.update(changes)
    return options


def test_page_policy_is_reproduced_text_for_text():
    rendered = model.dump_policy(render.render_policy(**PAGE_OPTIONS))
    assert rendered == PAGE_POLICY_TEXT
    assert yaml.safe_load(rendered) == yaml.safe_load(PAGE_POLICY_TEXT)


def test_page_policy_as_data_equals_the_fixture():
    options = page_options(nodes=["worker-a", "worker-b"])
    assert render.render_policy(**options) == k8s.VM_POLICY


def test_threshold_order_is_cpu_memory_pods_then_others():
    options = page_options(thresholds={"pods": 20, "ephemeral-storage": 5, "cpu": 70})
    args = render.render_policy(**options)["profiles"][0]["pluginConfig"][1]["args"]
    assert list(args["thresholds"]) == ["cpu", "pods", "ephemeral-storage"]


def test_optional_fields_rendered_after_the_page_fields():
    options = page_options(exclude_namespaces=["kube-system"], eviction_limit_node=1, profile_name="vms")
    policy = render.render_policy(**options)
    profile = policy["profiles"][0]
    assert profile["name"] == "vms"
    assert list(profile["pluginConfig"][1]["args"]) == ["thresholds", "targetThresholds", "evictableNamespaces", "evictionLimits"]
    assert profile["pluginConfig"][1]["args"]["evictableNamespaces"] == {"exclude": ["kube-system"]}
    assert profile["pluginConfig"][1]["args"]["evictionLimits"] == {"node": 1}


def test_node_selector_as_given():
    options = page_options(nodes=None, node_selector="node-role.kubernetes.io/worker")
    policy = render.render_policy(**options)
    assert policy["nodeSelector"] == "node-role.kubernetes.io/worker"


def test_vm_selector_whole():
    selector = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}
    options = page_options(vm_labels=None, vm_selector=selector)
    policy = render.render_policy(**options)
    assert policy["profiles"][0]["pluginConfig"][0]["args"]["labelSelector"] == selector


@pytest.mark.parametrize("extra, path", [({"node_selector": "a=b"}, "nodes"), ({"vm_selector": {"matchLabels": {"a": "b"}}}, "vm_labels")])
def test_mutually_exclusive_options(extra, path):
    with pytest.raises(InvalidOption) as error:
        options = page_options(**extra)
        render.render_policy(**options)
    assert error.value.path == path


def test_merge_keeps_other_profiles_and_replaces_the_named_one():
    existing = copy.deepcopy(k8s.DEFAULT_POLICY)
    existing["profiles"].append({"name": "vm-rebalance", "pluginConfig": [], "plugins": {}})
    options = page_options(nodes=["worker-a", "worker-b"])
    merged = render.render_policy(**options, merge_into=existing)
    assert [p["name"] for p in merged["profiles"]] == ["default", "vm-rebalance"]
    assert merged["profiles"][0] == k8s.DEFAULT_POLICY["profiles"][0]
    assert merged["profiles"][1] == k8s.VM_POLICY["profiles"][0]
    assert merged["maxNoOfPodsToEvictTotal"] == 1 and merged["nodeSelector"].startswith("kubernetes.io/hostname in")
    assert list(merged)[:2] == ["apiVersion", "kind"] and list(merged)[-1] == "profiles"


def test_merge_appends_when_absent_and_replace_drops_others():
    merged = render.render_policy(**PAGE_OPTIONS, merge_into=k8s.DEFAULT_POLICY)
    assert [p["name"] for p in merged["profiles"]] == ["default", "vm-rebalance"]
    replaced = render.render_policy(**PAGE_OPTIONS)  # merge false: the service passes no policy to merge into
    assert [p["name"] for p in replaced["profiles"]] == ["vm-rebalance"]


def test_load_policy_from_text_and_dict():
    text = yaml.safe_dump(k8s.VM_POLICY)
    assert model.load_policy(text) == k8s.VM_POLICY
    loaded = model.load_policy(k8s.VM_POLICY)
    assert loaded == k8s.VM_POLICY and loaded is not k8s.VM_POLICY


@pytest.mark.parametrize("value, words", [("a: [", "not YAML"), ("- 1\n- 2", "a mapping, got list"), (3, "a mapping, got int")])
def test_load_policy_refuses_what_is_not_a_mapping(value, words):
    with pytest.raises(model.PolicyInvalid) as error:
        model.load_policy(value)
    assert words in error.value.message and error.value.path == "policy"


def test_same_policy_compares_data_not_text():
    text = model.dump_policy(k8s.VM_POLICY)
    other = yaml.safe_dump(k8s.VM_POLICY, sort_keys=True, default_flow_style=True)
    assert text != other and model.same_policy(yaml.safe_load(text), yaml.safe_load(other))
    changed = copy.deepcopy(k8s.VM_POLICY)
    changed["maxNoOfPodsToEvictTotal"] = 2
    assert not model.same_policy(k8s.VM_POLICY, changed)


@pytest.mark.parametrize("options,path", [
    ({"nodes": ["worker-a", "Worker B"]}, "nodes[1]"),
    ({"vm_labels": {"app": "a b"}}, "vm_labels"),
    ({"vm_labels": {"bad key!": "x"}}, "vm_labels"),
    ({"exclude_namespaces": ["ok", "Not_OK"]}, "exclude_namespaces[1]"),
])
def test_malformed_render_options_name_the_option(options, path):
    with pytest.raises(InvalidOption) as error:
        render.check_options(**options)
    assert error.value.path == path
