"""Properties over random input (hypothesis): a rendered policy validates; a valid policy written to a ConfigMap
goes through backup and restore byte for byte; the planner never plans more evictions than the policy's limits
(total, per node, per namespace, evictionLimits.node). Example counts are kept small so the file runs in seconds."""
from __future__ import annotations

import copy
from collections import Counter

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import plan as planner
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_policy as policy_apply
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import dump_policy, load_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.render import check_options, render_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.validate import validate_policy

from . import k8s_objects as k8s
from .policy.test_plan import node, pod, policy

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
RESOURCES = ("cpu", "memory", "pods")
MIN_GAP = 5
LIMITS = {"parallel_migrations_per_cluster": 5, "parallel_outbound_migrations_per_node": 2}

names = st.from_regex(r"[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,4})?", fullmatch=True)
label_values = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,8}[A-Za-z0-9])?", fullmatch=True)


@st.composite
def threshold_pairs(draw):
    """thresholds and targetThresholds over the same resources, each target at least MIN_GAP above."""
    resources = draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=3, unique=True))
    low, high = {}, {}
    for resource in resources:
        value = draw(st.integers(0, 100 - MIN_GAP))
        low[resource] = value
        high[resource] = draw(st.integers(value + MIN_GAP, 100))
    return low, high


@st.composite
def render_options(draw):
    low, high = draw(threshold_pairs())
    options = {"profile_name": draw(names), "thresholds": low, "target_thresholds": high,
               "vm_labels": draw(st.dictionaries(names, label_values, min_size=1, max_size=3)),
               "node_fit": draw(st.booleans())}
    if draw(st.booleans()):
        options["nodes"] = draw(st.lists(names, min_size=2, max_size=5, unique=True))
    else:
        options["node_selector"] = draw(st.sampled_from(["node-role.kubernetes.io/worker", "kubevirt.io/schedulable=true"]))
    # the rebalance procedure's rules for a VM profile: a per-node limit (either spelling) and a total within KubeVirt's limits
    options["max_pods_to_evict_total"] = draw(st.integers(0, 5))
    per_node = draw(st.sampled_from(["max_pods_to_evict_per_node", "eviction_limit_node", "both"]))
    for option in ("max_pods_to_evict_per_node", "eviction_limit_node"):
        if per_node in (option, "both"):
            options[option] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        options["max_pods_to_evict_per_namespace"] = draw(st.integers(0, 10))
    if draw(st.booleans()):
        options["exclude_namespaces"] = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    return options


@FAST
@given(render_options())
def test_render_then_validate_never_rejects_what_render_produced(options):
    check_options(nodes=options.get("nodes"), vm_labels=options["vm_labels"], exclude_namespaces=options.get("exclude_namespaces"))
    policy = render_policy(**options)
    errors, _findings = validate_policy(policy, vm_profiles=[options["profile_name"]], min_gap=MIN_GAP, migration_limits=LIMITS)
    assert errors == [], (options, errors)
    assert load_policy(dump_policy(policy)) == policy


@FAST
@given(render_options(), st.dictionaries(names, st.text(max_size=40), max_size=3), st.sampled_from(["workload", "https://api.x:6443"]))
def test_backup_and_restore_round_trip_byte_for_byte(tmp_path_factory, options, other_data, cluster):
    text = dump_policy(render_policy(**options))
    configmap = k8s.configmap(text=text)
    configmap["metadata"].update(namespace="descheduler", uid="uid-cm", resourceVersion="42")
    configmap["data"].update(other_data)
    folder = tmp_path_factory.mktemp("backups")
    path = policy_apply.backup_configmap(copy.deepcopy(configmap), str(folder), cluster)
    restored = policy_apply.read_backup(path)
    assert restored == configmap
    assert restored["data"]["policy.yaml"].encode() == text.encode()
    assert all(restored["data"][key].encode() == value.encode() for key, value in configmap["data"].items())


@st.composite
def clusters(draw):
    """Workers of 10 cores / 100 memory units / 100 Pods with VM Pods of random size in a few namespaces."""
    workers = ["worker-{0}".format(i) for i in range(draw(st.integers(2, 5)))]
    pods = []
    for index in range(draw(st.integers(0, 30))):
        pods.append(pod("vm-{0}".format(index), draw(st.sampled_from(workers)), memory=draw(st.integers(1, 25)),
                        namespace=draw(st.sampled_from(["vms", "db", "web"]))))
    return [node(w) for w in workers] + [node("cp", control_plane=True)], pods


def limited_policy(draw_limits):
    per_node, per_ns, total, lnu_node = draw_limits
    lnu = {"evictionLimits": {"node": lnu_node}} if lnu_node is not None else None
    return policy(thresholds={"memory": 30}, targets={"memory": 50}, per_node=per_node, per_ns=per_ns, total=total, lnu=lnu)


optional_limit = st.one_of(st.none(), st.integers(0, 4))


@settings(max_examples=60, deadline=None)
@given(clusters(), st.tuples(optional_limit, optional_limit, optional_limit, optional_limit))
def test_the_planner_never_plans_more_evictions_than_the_limits_allow(cluster, limits):
    nodes, pods = cluster
    per_node, per_ns, total, lnu_node = limits
    result = planner.plan_policy(limited_policy(limits), nodes, pods, ["vm-rebalance"])
    evictions = result["evictions"]
    if total is not None:
        assert len(evictions) <= total
    by_node = Counter(e["node"] for e in evictions)
    by_namespace = Counter(e["namespace"] for e in evictions)
    for bound in (per_node, lnu_node):
        if bound is not None:
            assert all(count <= bound for count in by_node.values()), (bound, by_node)
    if per_ns is not None:
        assert all(count <= per_ns for count in by_namespace.values()), (per_ns, by_namespace)
    assert len({(e["namespace"], e["pod"]) for e in evictions}) == len(evictions)
    assert all(e["node"] != "cp" for e in evictions)


def test_a_dumped_policy_is_stable_yaml():
    policy = render_policy(profile_name="vm-rebalance", node_fit=None, thresholds={"cpu": 10}, target_thresholds={"cpu": 20},
                           vm_labels={"app": "x"})
    assert yaml.safe_load(dump_policy(policy)) == policy
