"""Rendering a policy that balances by actual usage (the metrics server or a Prometheus query), with deviation thresholds
and the cooldown's noEvictionPolicy: the fields and their place, that the rendered policy passes validation, merging the
providers into a current policy, and every option error naming its option (a token never written into the policy)."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import model
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import render
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import validate

from .. import k8s_objects as k8s

URL = "https://prometheus-k8s.monitoring.svc:9091"
QUERY = "instance:node_cpu_utilisation:rate1m"
SECRET = {"namespace": "descheduler", "name": "prometheus-token"}
OPTIONS = {"profile_name": "vm-rebalance", "nodes": ["worker-a", "worker-b"], "max_pods_to_evict_per_node": 1,
           "max_pods_to_evict_per_namespace": 1, "max_pods_to_evict_total": 1, "node_fit": True, "vm_labels": {"app": "desched-test"},
           "thresholds": {"cpu": 70, "memory": 60, "pods": 20}, "target_thresholds": {"cpu": 75, "memory": 68, "pods": 30}}
PROMETHEUS = {"metrics_source": "Prometheus", "prometheus_query": QUERY, "prometheus_url": URL, "prometheus_auth_secret": SECRET,
              "thresholds": {"MetricResource": 20}, "target_thresholds": {"MetricResource": 40}}


def prometheus(**changes):
    """PROMETHEUS with some changed (by update: pylint reads prometheus(x=...) as x given twice)."""
    options = dict(PROMETHEUS)
    options.update(changes)
    return options


def rendered(**changes):
    options = dict(OPTIONS)
    options.update(changes)
    return render.render_policy(**options)


def lnu_args(policy):
    return policy["profiles"][0]["pluginConfig"][1]["args"]


def evictor_args(policy):
    return policy["profiles"][0]["pluginConfig"][0]["args"]


@pytest.mark.parametrize("source", [None, "requests"])
def test_requests_render_nothing_new(source):
    assert rendered(metrics_source=source, use_deviation_thresholds=False) == k8s.VM_POLICY


def test_metrics_server_source_and_its_provider():
    policy = rendered(metrics_source="KubernetesMetrics")
    assert lnu_args(policy)["metricsUtilization"] == {"source": "KubernetesMetrics"}
    assert policy["metricsProviders"] == [{"source": "KubernetesMetrics"}]
    assert list(policy)[-2:] == ["metricsProviders", "profiles"]
    assert validate.validate_policy(policy, vm_profiles=["vm-rebalance"])[0] == []


def test_prometheus_query_provider_and_token_secret():
    policy = rendered(**PROMETHEUS)
    assert lnu_args(policy) == {"thresholds": {"MetricResource": 20}, "targetThresholds": {"MetricResource": 40},
                                "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": QUERY}}}
    assert policy["metricsProviders"] == [{"source": "Prometheus", "prometheus": {
        "url": URL, "authToken": {"secretReference": {"namespace": "descheduler", "name": "prometheus-token"}}}}]
    assert validate.validate_policy(policy, vm_profiles=["vm-rebalance"]) == ([], [])
    text = model.dump_policy(policy)
    assert "metricsProviders:\n- source: Prometheus\n  prometheus:\n    url: " + URL in text


def test_prometheus_without_a_secret_uses_the_service_account_token():
    options = prometheus(prometheus_auth_secret=None)
    assert rendered(**options)["metricsProviders"] == [{"source": "Prometheus", "prometheus": {"url": URL}}]


def test_deviation_thresholds_and_the_cooldowns_no_eviction_policy_take_their_place():
    policy = rendered(use_deviation_thresholds=True, no_eviction_policy="Mandatory", eviction_limit_node=1, metrics_source="KubernetesMetrics")
    assert list(lnu_args(policy)) == ["thresholds", "targetThresholds", "useDeviationThresholds", "evictionLimits", "metricsUtilization"]
    assert lnu_args(policy)["useDeviationThresholds"] is True
    assert list(evictor_args(policy)) == ["nodeFit", "labelSelector", "podProtections", "noEvictionPolicy"]
    assert evictor_args(policy)["noEvictionPolicy"] == "Mandatory"
    assert validate.validate_policy(policy, vm_profiles=["vm-rebalance"])[0] == []


def test_merge_replaces_the_provider_of_the_source_and_keeps_the_others():
    current = copy.deepcopy(k8s.DEFAULT_POLICY)
    current["metricsProviders"] = [{"source": "KubernetesMetrics"}, {"source": "Prometheus", "prometheus": {"url": "https://old:9091"}}]
    merged = rendered(merge_into=current, **PROMETHEUS)
    assert merged["metricsProviders"][0] == {"source": "KubernetesMetrics"}
    assert merged["metricsProviders"][1]["prometheus"]["url"] == URL and len(merged["metricsProviders"]) == 2
    assert current["metricsProviders"][1]["prometheus"]["url"] == "https://old:9091"  # the current policy is left as it was
    plain = rendered(merge_into=copy.deepcopy(k8s.DEFAULT_POLICY), metrics_source="KubernetesMetrics")
    assert plain["metricsProviders"] == [{"source": "KubernetesMetrics"}]


@pytest.mark.parametrize("changes, path, words", [
    ({"metrics_source": "prometheus"}, "metrics_source", "must be one of requests, KubernetesMetrics, Prometheus"),
    ({"no_eviction_policy": "mandatory"}, "no_eviction_policy", "must be Preferred or Mandatory"),
    ({"prometheus_query": QUERY}, "prometheus_query", "only used with metrics_source Prometheus"),
    ({"metrics_source": "KubernetesMetrics", "prometheus_url": URL}, "prometheus_url", "only used with metrics_source Prometheus"),
    ({"prometheus_auth_secret": SECRET}, "prometheus_auth_secret", "only used with metrics_source Prometheus"),
    ({"thresholds": {"MetricResource": 20}, "target_thresholds": {"MetricResource": 40}}, "thresholds", "measured only by a Prometheus query"),
    (prometheus(prometheus_query=" "), "prometheus_query", "not set"),
    (prometheus(prometheus_query="node_load1[5m]"), "prometheus_query", "returns a matrix"),
    (prometheus(prometheus_url=None), "prometheus_url", "not set"),
    (prometheus(prometheus_url="http://example.com:-80"), "prometheus_url",
     'the descheduler cannot parse it: parse "http://example.com:-80": invalid port ":-80" after host'),
    (prometheus(prometheus_url="prometheus-k8s.monitoring.svc:9091"), "prometheus_url", "not an absolute http(s) URL"),
    (prometheus(prometheus_auth_secret={"namespace": "descheduler"}), "prometheus_auth_secret", "needs a namespace"),
    (prometheus(prometheus_auth_secret=dict(SECRET, key="token")), "prometheus_auth_secret", "unknown key key"),
    (prometheus(thresholds={"cpu": 20}), "thresholds", "names the one resource MetricResource"),
    (prometheus(target_thresholds={"MetricResource": 40, "cpu": 50}), "target_thresholds", "got MetricResource, cpu"),
])
def test_option_errors_name_the_option(changes, path, words):
    with pytest.raises(InvalidOption) as error:
        rendered(**changes)
    assert error.value.path == path and words in error.value.problem, error.value.message
    assert error.value.fix


@pytest.mark.parametrize("changes", [
    prometheus(prometheus_auth_secret=dict(SECRET, token="s3cr3t-t0k3n")),
    prometheus(prometheus_url="https://ops:s3cr3t-t0k3n@prometheus.monitoring.svc:9091"),
])
def test_a_token_in_the_options_is_refused_and_never_echoed(changes):
    with pytest.raises(InvalidOption) as error:
        rendered(**changes)
    assert error.value.path in ("prometheus_auth_secret", "prometheus_url")
    assert "s3cr3t-t0k3n" not in error.value.message and "Secret" in error.value.fix and "prometheusAuthToken" in error.value.fix
