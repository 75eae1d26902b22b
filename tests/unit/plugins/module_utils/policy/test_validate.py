"""Every validation rule with its message: the schema (unknown and mis-cased keys), upstream's rules with
upstream's words, and the rebalance page's rules for a VM profile; each error names the path and the fix."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import validate as pv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import PolicyInvalid

from .. import k8s_objects as k8s

VM = ("vm-rebalance",)
EVICTOR = "profiles[0].pluginConfig[0].args"
LNU = "profiles[0].pluginConfig[1].args"


def vm_policy(**top):
    policy = copy.deepcopy(k8s.VM_POLICY)
    policy.update(top)
    return policy


def evictor(policy):
    return policy["profiles"][0]["pluginConfig"][0]["args"]


def lnu(policy):
    return policy["profiles"][0]["pluginConfig"][1]["args"]


def errors_of(policy, vm_profiles=VM, **kwargs):
    return pv.validate_policy(policy, vm_profiles=vm_profiles, **kwargs)[0]


def only(policy, vm_profiles=VM, **kwargs):
    errors = errors_of(policy, vm_profiles, **kwargs)
    assert len(errors) == 1, errors
    return errors[0]


def test_page_policy_passes():
    assert pv.validate_policy(k8s.VM_POLICY, vm_profiles=VM, nodes=[k8s.node("worker-a"), k8s.node("worker-b")]) == ([], [])


def test_default_policy_as_other_profile_is_a_finding_not_an_error():
    errors, findings = pv.validate_policy(k8s.DEFAULT_POLICY, vm_profiles=[])
    assert errors == []
    assert [f["code"] for f in findings] == ["policy_protects_pvc_pods"]
    assert findings[0]["path"] == EVICTOR + ".podProtections.extraEnabled"


# ------------------------------------------------------------------------------------------ schema
@pytest.mark.parametrize("mutate, path, words", [
    (lambda p: p.update(maxNoOfPodsToEvictPernode=1), "maxNoOfPodsToEvictPernode", "Write it as maxNoOfPodsToEvictPerNode."),
    (lambda p: p.update(profile=[]), "profile", "Remove it, or use one of"),
    (lambda p: p["profiles"][0].update(PluginConfig=[]), "profiles[0].PluginConfig", "Write it as pluginConfig."),
    (lambda p: evictor(p).update(labelselector={}), EVICTOR + ".labelselector", "Write it as labelSelector."),
    (lambda p: evictor(p)["podProtections"].update(defaultdisabled=[]), EVICTOR + ".podProtections.defaultdisabled", "defaultDisabled"),
    (lambda p: evictor(p)["labelSelector"].update(matchlabels={}), EVICTOR + ".labelSelector.matchlabels", "matchLabels"),
    (lambda p: lnu(p).update(targetthresholds={}), LNU + ".targetthresholds", "Write it as targetThresholds."),
    (lambda p: lnu(p).update(evictionLimits={"nodes": 1}), LNU + ".evictionLimits.nodes", "Remove it, or use one of: node."),
    (lambda p: p["profiles"][0]["plugins"].update(Balance={}), "profiles[0].plugins.Balance", "Write it as balance."),
    (lambda p: p["profiles"][0]["plugins"]["balance"].update(enable=[]), "profiles[0].plugins.balance.enable", "enabled"),
])
def test_unknown_and_miscased_keys(mutate, path, words):
    policy = vm_policy()
    mutate(policy)
    error = only(policy)
    assert error["path"] == path and "silently drops it" in error["problem"] and words in error["fix"]


@pytest.mark.parametrize("field, value, path, words", [
    ("apiVersion", "descheduler/v1alpha1", "apiVersion", 'must be "descheduler/v1alpha2"'),
    ("kind", "Policy", "kind", 'must be "DeschedulerPolicy"'),
    ("maxNoOfPodsToEvictPerNamespace", -1, "maxNoOfPodsToEvictPerNamespace", "whole number"),
    ("maxNoOfPodsToEvictPerNamespace", "1", "maxNoOfPodsToEvictPerNamespace", "whole number"),
    ("nodeSelector", "kubernetes.io/hostname in ()", "nodeSelector", "not a label selector"),
    ("nodeSelector", ["worker-a"], "nodeSelector", "must be a label selector string"),
])
def test_top_level_fields(field, value, path, words):
    error = only(vm_policy(**{field: value}))
    assert error["path"] == path and words in error["problem"]


def test_no_profiles():
    errors = errors_of(vm_policy(profiles=[]), vm_profiles=[])
    assert errors == [{"path": "profiles", "problem": "no profiles: the descheduler does nothing",
                       "fix": "Add a profile with a plugin enabled in balance or deschedule."}]


def test_profile_names_missing_and_duplicate():
    policy = vm_policy()
    policy["profiles"].append(copy.deepcopy(policy["profiles"][0]))
    policy["profiles"].append({"pluginConfig": []})
    errors = errors_of(policy, vm_profiles=[])
    assert [e["path"] for e in errors] == ["profiles[1].name", "profiles[2].name"]
    assert "used by profiles[0] too" in errors[0]["problem"] and "needs a name" in errors[1]["problem"]


# ------------------------------------------------------------------------------------------ upstream
def test_include_namespaces_upstream_message():
    policy = vm_policy()
    lnu(policy)["evictableNamespaces"] = {"include": ["desched-test"]}
    error = only(policy)
    assert pv.PolicyInvalid is PolicyInvalid
    with pytest.raises(PolicyInvalid) as raised:
        pv.check_policy(policy, vm_profiles=VM)
    assert raised.value.message == ("profiles[0].pluginConfig[1].args.evictableNamespaces.include: only Exclude namespaces can be set, "
                                    "inclusion is not supported. Use exclude, or scope the VMs with DefaultEvictor.labelSelector.")
    assert error["path"] == LNU + ".evictableNamespaces.include"


def test_exclude_namespaces_pass():
    policy = vm_policy()
    lnu(policy)["evictableNamespaces"] = {"exclude": ["kube-system"]}
    assert errors_of(policy) == []


@pytest.mark.parametrize("mutate, path, problem", [
    (lambda a: a.update(thresholds={}), LNU + ".thresholds", "thresholds config is not valid: no resource threshold is configured"),
    (lambda a: a.update(targetThresholds={}), LNU + ".targetThresholds",
     "targetThresholds config is not valid: no resource threshold is configured"),
    (lambda a: a["thresholds"].update(cpu=101), LNU + ".thresholds.cpu", "thresholds config is not valid: cpu threshold not in [0, 100] range"),
    (lambda a: a["targetThresholds"].update(memory=-1), LNU + ".targetThresholds.memory",
     "targetThresholds config is not valid: memory threshold not in [0, 100] range"),
    (lambda a: a["targetThresholds"].pop("pods"), LNU + ".targetThresholds", "thresholds and targetThresholds configured different resources"),
    (lambda a: a["thresholds"].update(memory=80), LNU + ".thresholds.memory", "thresholds' memory percentage is greater than targetThresholds'"),
])
def test_threshold_rules_upstream_messages(mutate, path, problem):
    policy = vm_policy()
    mutate(lnu(policy))
    error = only(policy, vm_profiles=[])
    assert (error["path"], error["problem"]) == (path, problem) and error["fix"]


def test_deviation_thresholds_skip_the_order_rule():
    policy = vm_policy()
    lnu(policy).update(useDeviationThresholds=True, thresholds={"cpu": 10, "memory": 10, "pods": 10},
                       targetThresholds={"cpu": 5, "memory": 5, "pods": 5})
    assert errors_of(policy) == []


def test_deprecated_fields_with_pod_protections():
    policy = vm_policy()
    evictor(policy)["evictLocalStoragePods"] = True
    error = only(policy)
    assert error["path"] == EVICTOR
    assert error["problem"] == "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or PodProtections.DefaultDisabled"
    assert "evictLocalStoragePods" in error["fix"]


@pytest.mark.parametrize("field, value, problem", [
    ("extraEnabled", ["PodsWithPvc"],
     'invalid pod protection policy in ExtraEnabled: "PodsWithPvc". Valid options are: [PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]'),
    ("defaultDisabled", ["PodsWithLocalStorage", "PodsWithPVC"],
     'invalid pod protection policy in DefaultDisabled: "PodsWithPVC". Valid options are: '
     '[PodsWithLocalStorage SystemCriticalPods FailedBarePods DaemonSetPods]'),
])
def test_invalid_protection_names(field, value, problem):
    policy = vm_policy()
    evictor(policy)["podProtections"][field] = value
    assert problem in [e["problem"] for e in errors_of(policy)]


@pytest.mark.parametrize("field, upstream", [("defaultDisabled", "DefaultDisabled"), ("extraEnabled", "ExtraEnabled")])
def test_duplicate_protections(field, upstream):
    policy = vm_policy()
    evictor(policy)["podProtections"]["defaultDisabled"] = ["PodsWithLocalStorage"]
    evictor(policy)["podProtections"][field] = evictor(policy)["podProtections"].get(field, []) + (
        ["PodsWithLocalStorage"] if field == "defaultDisabled" else ["PodsWithoutPDB", "PodsWithoutPDB"])
    error = only(policy)
    assert error["problem"] == "PodProtections.{0} contains duplicate entries".format(upstream)


def test_no_eviction_policy_values():
    policy = vm_policy()
    evictor(policy)["noEvictionPolicy"] = "preferred"
    assert only(policy)["path"] == EVICTOR + ".noEvictionPolicy"


def test_plugin_not_registered():
    policy = vm_policy()
    policy["profiles"][0]["pluginConfig"].append({"name": "LowNodeUtilisation"})
    error = only(policy)
    assert error["problem"] == "in profile vm-rebalance: plugin LowNodeUtilisation in pluginConfig not registered"
    assert error["path"] == "profiles[0].pluginConfig[2].name"


def test_balance_of_non_existing_plugins():
    policy = vm_policy()
    policy["profiles"][0]["plugins"]["balance"]["enabled"] = ["LowNodeUtilization", "PodLifeTime", "Nope"]
    error = only(policy)
    assert error["problem"] == 'profile "vm-rebalance" configures balance extension point of non-existing plugins: [PodLifeTime Nope]'
    assert error["path"] == "profiles[0].plugins.balance.enabled"


# ------------------------------------------------------------------------------------------ the page's rules
def test_local_storage_protection_refused_for_a_vm_profile():
    policy = vm_policy()
    evictor(policy)["podProtections"]["defaultDisabled"] = []
    error = only(policy)
    assert error["path"] == EVICTOR + ".podProtections.defaultDisabled" and "emptyDir" in error["problem"]


def test_local_storage_via_deprecated_boolean():
    policy = vm_policy()
    del evictor(policy)["podProtections"]
    evictor(policy)["evictLocalStoragePods"] = True
    assert errors_of(policy) == []


def test_pvc_protection_refused_for_a_vm_profile():
    policy = vm_policy()
    evictor(policy)["podProtections"]["extraEnabled"] = ["PodsWithPVC"]
    error = only(policy)
    assert error["path"] == EVICTOR + ".podProtections.extraEnabled" and "no VM will ever move" in error["problem"]


@pytest.mark.parametrize("selector", [None, {}, {"matchLabels": {}}])
def test_label_selector_required(selector):
    policy = vm_policy()
    if selector is None:
        del evictor(policy)["labelSelector"]
    else:
        evictor(policy)["labelSelector"] = selector
    error = only(policy)
    assert error["path"] == EVICTOR + ".labelSelector" and "vm_labels" in error["fix"]


def test_threshold_gap():
    policy = vm_policy()
    lnu(policy)["targetThresholds"]["cpu"] = 72
    error = only(policy)
    assert error["path"] == LNU + ".targetThresholds.cpu"
    assert "only 2 above thresholds.cpu (70)" in error["problem"] and "at least 5 points" in error["fix"]
    assert errors_of(policy, min_gap=2) == []
    lnu(policy)["targetThresholds"]["cpu"] = 70
    assert "only 0 above" in only(policy)["problem"]


@pytest.mark.parametrize("top, lnu_limits, path, words", [
    ({"maxNoOfPodsToEvictPerNode": None}, None, "maxNoOfPodsToEvictPerNode", "not set"),
    ({"maxNoOfPodsToEvictPerNode": 3}, None, "maxNoOfPodsToEvictPerNode", "above KubeVirt's parallelOutboundMigrationsPerNode (2)"),
    ({"maxNoOfPodsToEvictTotal": None}, None, "maxNoOfPodsToEvictTotal", "not set"),
    ({"maxNoOfPodsToEvictTotal": 6}, None, "maxNoOfPodsToEvictTotal", "above KubeVirt's parallelMigrationsPerCluster (5)"),
])
def test_limits(top, lnu_limits, path, words):
    policy = vm_policy(**top)
    for key, value in top.items():
        if value is None:
            del policy[key]
    error = only(policy)
    assert error["path"] == path and words in error["problem"]


def test_eviction_limits_node_counts_as_per_node_limit():
    policy = vm_policy()
    del policy["maxNoOfPodsToEvictPerNode"]
    lnu(policy)["evictionLimits"] = {"node": 1}
    assert errors_of(policy) == []


def test_limits_read_from_kubevirt():
    policy = vm_policy(maxNoOfPodsToEvictTotal=3)
    assert errors_of(policy) == []
    error = only(policy, migration_limits={"parallel_migrations_per_cluster": 2, "parallel_outbound_migrations_per_node": 2})
    assert "parallelMigrationsPerCluster (2)" in error["problem"]


def test_node_selector_required_and_control_plane_refused():
    policy = vm_policy()
    del policy["nodeSelector"]
    assert only(policy)["path"] == "nodeSelector"
    nodes = [k8s.node("control-plane-1", control_plane=True), k8s.node("worker-a"), k8s.node("worker-b")]
    error = only(vm_policy(nodeSelector="kubernetes.io/hostname"), nodes=nodes)
    assert error["path"] == "nodeSelector" and "control-plane-1" in error["problem"]
    assert errors_of(vm_policy(nodeSelector="!node-role.kubernetes.io/control-plane"), nodes=nodes) == []


def test_one_node_is_a_finding():
    errors, findings = pv.validate_policy(vm_policy(nodeSelector="kubernetes.io/hostname=worker-a"), vm_profiles=VM,
                                          nodes=[k8s.node("worker-a"), k8s.node("worker-b")])
    assert errors == [] and [f["code"] for f in findings] == ["too_few_nodes"]


def test_vm_profile_must_exist():
    error = only(k8s.VM_POLICY, vm_profiles=["vms"])
    assert error["path"] == "profiles" and "no profile named 'vms'" in error["problem"]


def test_policy_invalid_carries_every_error():
    policy = vm_policy()
    lnu(policy)["evictableNamespaces"] = {"include": ["x"]}
    evictor(policy)["podProtections"]["extraEnabled"] = ["PodsWithPVC"]
    with pytest.raises(PolicyInvalid) as raised:
        pv.check_policy(policy, vm_profiles=VM)
    assert len(raised.value.errors) == 2 and "1 more problem" in raised.value.message
    assert raised.value.as_dict()["errors"] == raised.value.errors


@pytest.mark.parametrize("profile, problem", [(None, "a profile must be a mapping, got null"), ("vm", "a profile must be a mapping, got str")])
def test_profile_that_is_not_a_mapping(profile, problem):
    error = only(vm_policy(profiles=[profile]), vm_profiles=[])
    assert error["path"] == "profiles[0]" and error["problem"] == problem
