"""Validation of actual-usage policies: upstream's cases and words (descheduler v0.36 pkg/descheduler policyconfig_test.go for
metricsProviders, nodeutilization validation_test.go for metricsUtilization, and the errors LowNodeUtilization or its metrics
client fail with when the descheduler starts), the schema of the new fields, and ours: a Prometheus token is a Secret reference,
never inline (and never echoed), a query of the wrong shape, a VM profile with a cooldown."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import validate as pv

from .. import k8s_objects as k8s

VM = ("vm-rebalance",)
EVICTOR = "profiles[0].pluginConfig[0].args"
LNU = "profiles[0].pluginConfig[1].args"
UTILIZATION = LNU + ".metricsUtilization"
QUERY = "instance:node_cpu_utilisation:rate1m"
URL = "https://prometheus-k8s.monitoring.svc:9091"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.s3cr3t-t0k3n"


def lnu(policy):
    return policy["profiles"][0]["pluginConfig"][1]["args"]


def prometheus_policy(query=QUERY, provider=None):
    """The page's VM policy balancing by a Prometheus query: one MetricResource threshold, the provider with a token Secret."""
    policy = copy.deepcopy(k8s.VM_POLICY)
    lnu(policy).update(thresholds={"MetricResource": 20}, targetThresholds={"MetricResource": 40},
                       metricsUtilization={"source": "Prometheus", "prometheus": {"query": query}})
    policy["metricsProviders"] = [provider if provider is not None else {
        "source": "Prometheus", "prometheus": {"url": URL, "authToken": {"secretReference": {"namespace": "descheduler", "name": "prom-token"}}}}]
    return policy


def metrics_server_policy(**utilization):
    policy = copy.deepcopy(k8s.VM_POLICY)
    lnu(policy)["metricsUtilization"] = utilization or {"source": "KubernetesMetrics"}
    policy["metricsProviders"] = [{"source": "KubernetesMetrics"}]
    return policy


def errors_of(policy, vm_profiles=VM):
    return pv.validate_policy(policy, vm_profiles=vm_profiles)[0]


def problems(policy, vm_profiles=VM):
    return {(e["path"], e["problem"]) for e in errors_of(policy, vm_profiles)}


def test_actual_usage_policies_pass():
    assert pv.validate_policy(prometheus_policy(), vm_profiles=VM) == ([], [])
    assert pv.validate_policy(metrics_server_policy(), vm_profiles=VM) == ([], [])
    deviation = prometheus_policy()
    lnu(deviation).update(useDeviationThresholds=True, thresholds={"MetricResource": 10}, targetThresholds={"MetricResource": 10})
    assert errors_of(deviation) == []
    no_token = prometheus_policy(provider={"source": "Prometheus", "prometheus": {"url": "http://prometheus.monitoring.svc:9090"}})
    assert errors_of(no_token) == []  # without authToken the descheduler uses its service account's token


def test_a_vm_profile_with_a_cooldown_is_fine():
    policy = prometheus_policy()
    policy["profiles"][0]["pluginConfig"][0]["args"]["noEvictionPolicy"] = "Mandatory"
    assert errors_of(policy) == []


# ------------------------------------------------------------------------------------------ metricsProviders (policyconfig_test.go)
@pytest.mark.parametrize("top, path, problem", [
    ({"metricsProviders": [{"source": "KubernetesMetrics"}, {"source": "KubernetesMetrics"}]}, "metricsProviders[1].source",
     'metric provider "KubernetesMetrics" is already configured, each source can be configured only once'),
    ({"metricsCollector": {"enabled": True}, "metricsProviders": [{"source": "KubernetesMetrics"}]}, "metricsCollector.enabled",
     "it is not allowed to combine metrics provider when metrics collector is enabled"),
    ({"metricsProviders": [{"source": "Prometheus", "prometheus": {}}]}, "metricsProviders[0].prometheus.url",
     "prometheus URL is required when prometheus is enabled"),
    ({"metricsProviders": [{"source": "Prometheus"}]}, "metricsProviders[0].prometheus.url",
     "prometheus URL is required when prometheus is enabled"),
    ({"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "http://example.com:-80"}}]}, "metricsProviders[0].prometheus.url",
     'error parsing prometheus URL: parse "http://example.com:-80": invalid port ":-80" after host'),
    ({"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "https://example.com:80", "authToken": {}}}]},
     "metricsProviders[0].prometheus.authToken.secretReference", "prometheus authToken secret is expected to be set when authToken field is"),
    ({"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "https://example.com:80", "authToken": {"secretReference": {}}}}]},
     "metricsProviders[0].prometheus.authToken.secretReference", "prometheus authToken secret reference does not set both namespace and name"),
    ({"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "https://example.com:80",
                                                                   "authToken": {"secretReference": {"name": "secretname"}}}}]},
     "metricsProviders[0].prometheus.authToken.secretReference", "prometheus authToken secret reference does not set both namespace and name"),
    ({"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "https://example.com:80",
                                                                   "authToken": {"secretReference": {"namespace": "secretnamespace"}}}}]},
     "metricsProviders[0].prometheus.authToken.secretReference", "prometheus authToken secret reference does not set both namespace and name"),
])
def test_metrics_providers_upstream_cases(top, path, problem):
    policy = copy.deepcopy(k8s.VM_POLICY)
    policy.update(top)
    errors = errors_of(policy)
    assert [(e["path"], e["problem"]) for e in errors] == [(path, problem)], errors
    assert errors[0]["fix"]


def test_the_valid_upstream_secret_reference_passes():
    provider = {"source": "Prometheus", "prometheus": {"url": "https://example.com:80",
                                                       "authToken": {"secretReference": {"name": "secretname", "namespace": "secretnamespace"}}}}
    assert errors_of(prometheus_policy(provider=provider)) == []


@pytest.mark.parametrize("url, why", [
    ("://prometheus:9090", "missing protocol scheme"),
    ("prometheus:9090:x/api", None),  # an opaque URL parses in Go; our rule refuses it below
    ("1http://prometheus:9090", "first path segment in URL cannot contain colon"),
    ("https://prometheus:90a", 'invalid port ":90a" after host'),
    ("https://[::1:9090", "missing ']' in host"),
    ("https://prom etheus:9090", 'invalid character " " in host name'),
    ("https://prometheus:9090/api%zz", 'invalid URL escape "%zz"'),
    ("https://prometheus\x7f:9090", "net/url: invalid control character in URL"),
])
def test_go_url_parse_errors(url, why):
    error = pv.go_url_error(url)
    if why is None:
        assert error is None
    else:
        assert error == "parse {0}: {1}".format(pv.go_quote(url), why)


@pytest.mark.parametrize("url", ["prometheus-k8s.monitoring.svc:9091", "prometheus:9090:x/api", "/api/v1"])
def test_a_url_without_scheme_and_host_is_refused(url):
    policy = prometheus_policy(provider={"source": "Prometheus", "prometheus": {"url": url}})
    error, = errors_of(policy)
    assert error["path"] == "metricsProviders[0].prometheus.url" and "not an absolute http(s) URL with a host" in error["problem"]
    assert URL in error["fix"]


@pytest.mark.parametrize("top, paths, words", [
    ({"metricsProviders": {"source": "Prometheus"}}, ["metricsProviders"], "must be a list"),
    ({"metricsProviders": [{"source": "prometheus"}]}, ["metricsProviders[0].source"], "must be KubernetesMetrics or Prometheus"),
    # a misspelt key leaves the real one unset, which is said too
    ({"metricsProviders": [{"sources": "KubernetesMetrics"}]}, ["metricsProviders[0].sources", "metricsProviders[0].source"],
     "unknown field in a metrics provider"),
    ({"metricsProviders": [{"source": "Prometheus", "prometheus": {"URL": URL}}]},
     ["metricsProviders[0].prometheus.URL", "metricsProviders[0].prometheus.url"], "keys are case-sensitive"),
    ({"metricsCollector": {"enabled": "yes"}}, ["metricsCollector.enabled"], "must be true or false"),
    ({"prometheus": {"url": URL}}, ["prometheus"], "v0.36 reads Prometheus from metricsProviders"),
])
def test_metrics_fields_schema(top, paths, words):
    policy = copy.deepcopy(k8s.VM_POLICY)
    policy.update(top)
    errors = errors_of(policy)
    assert [e["path"] for e in errors] == paths and words in errors[0]["problem"], errors


# ------------------------------------------------------------------------------------------ metricsUtilization (validation_test.go)
@pytest.mark.parametrize("utilization, path, problem", [
    ({"metricsServer": True, "source": "KubernetesMetrics"}, UTILIZATION + ".metricsServer",
     'it is not allowed to set both "KubernetesMetrics" source and metricsServer'),
    ({"source": "KubernetesMetrics", "prometheus": {}}, UTILIZATION + ".prometheus",
     'prometheus configuration is not allowed to set when source is set to "KubernetesMetrics"'),
    ({"source": "Prometheus"}, UTILIZATION + ".prometheus.query", 'prometheus query is required when metrics source is set to "Prometheus"'),
    ({"source": "Prometheus", "prometheus": {"query": "  "}}, UTILIZATION + ".prometheus.query",
     'prometheus query is required when metrics source is set to "Prometheus"'),
    ({}, UTILIZATION, "metrics source is empty"),
    ({"source": "Kubernetes"}, UTILIZATION + ".source", "unrecognized metrics source"),
])
def test_metrics_utilization_upstream_cases(utilization, path, problem):
    policy = metrics_server_policy(**utilization) if utilization else metrics_server_policy()
    lnu(policy)["metricsUtilization"] = utilization
    assert (path, problem) in problems(policy), errors_of(policy)


def test_a_prometheus_source_wants_the_single_metric_resource_threshold():
    policy = prometheus_policy()
    lnu(policy).update(thresholds={"memory": 20, "cpu": 20}, targetThresholds={"cpu": 40, "memory": 40})
    assert problems(policy) == {
        (LNU + ".thresholds", 'thresholds are expected to specify a single instance of "MetricResource" resource, got [cpu memory] instead'),
        (LNU + ".targetThresholds", 'targetThresholds are expected to specify a single instance of "MetricResource" resource, got [cpu memory] '
                                    'instead')}


def test_metric_resource_is_measured_only_by_a_prometheus_query():
    policy = metrics_server_policy()
    lnu(policy).update(thresholds={"MetricResource": 20}, targetThresholds={"MetricResource": 40})
    paths = {e["path"] for e in errors_of(policy)}
    assert paths == {LNU + ".thresholds.MetricResource", LNU + ".targetThresholds.MetricResource"}
    requests = copy.deepcopy(k8s.VM_POLICY)
    lnu(requests).update(thresholds={"MetricResource": 20}, targetThresholds={"MetricResource": 40})
    assert "only a Prometheus query measures MetricResource" in {e["problem"] for e in errors_of(requests)}


def test_metrics_server_with_a_prometheus_source_is_refused():
    policy = prometheus_policy()
    lnu(policy)["metricsUtilization"]["metricsServer"] = True
    assert (UTILIZATION + ".metricsServer") in {e["path"] for e in errors_of(policy)}


@pytest.mark.parametrize("query, shape", [("node_cpu_seconds_total[5m]", "matrix"), ("rate(x[5m])[30m:1m]", "matrix"), ("0.5", "scalar"),
                                          ('"text"', "string")])
def test_a_query_the_descheduler_refuses_for_its_shape(query, shape):
    error, = errors_of(prometheus_policy(query=query))
    assert error["path"] == UTILIZATION + ".prometheus.query"
    assert error["problem"].endswith('expected query results to be of type "vector", got "{0}" instead'.format(shape))


@pytest.mark.parametrize("query", [QUERY, 'avg by (instance) (rate(node_pressure_cpu_waiting_seconds_total[1m]))', "1 - x"])
def test_instant_vector_queries_pass(query):
    assert errors_of(prometheus_policy(query=query)) == []


# ------------------------------------------------------------------------------------------ the clients the descheduler builds
def test_a_prometheus_source_needs_a_prometheus_provider():
    policy = prometheus_policy()
    del policy["metricsProviders"]
    error, = errors_of(policy)
    assert error["path"] == UTILIZATION + ".source" and error["problem"].startswith("prometheus client not initialized")
    assert "metricsProviders: [{source: Prometheus" in error["fix"]


@pytest.mark.parametrize("utilization, path", [({"source": "KubernetesMetrics"}, UTILIZATION + ".source"),
                                               ({"metricsServer": True}, UTILIZATION + ".metricsServer")])
def test_the_metrics_server_needs_its_provider_or_the_deprecated_collector(utilization, path):
    policy = metrics_server_policy(**utilization)
    del policy["metricsProviders"]
    error, = errors_of(policy)
    assert error["path"] == path and error["problem"].startswith("metrics client not initialized")
    policy["metricsCollector"] = {"enabled": True}
    errors, findings = pv.validate_policy(policy, vm_profiles=VM)
    assert errors == [] and "deprecated_metrics_collector" in {f["code"] for f in findings}


def test_the_client_check_covers_profiles_that_move_no_vm():
    policy = prometheus_policy()
    del policy["metricsProviders"]
    assert [e["problem"] for e in errors_of(policy, vm_profiles=())] == [
        "prometheus client not initialized (metricsProviders has no source Prometheus)"]


# ------------------------------------------------------------------------------------------ ours: never an inline token
@pytest.mark.parametrize("prometheus, path", [
    ({"url": URL, "bearerToken": TOKEN}, "metricsProviders[0].prometheus.bearerToken"),
    ({"url": URL, "authToken": TOKEN}, "metricsProviders[0].prometheus.authToken"),
    ({"url": URL, "authToken": {"token": TOKEN}}, "metricsProviders[0].prometheus.authToken.token"),
    ({"url": URL, "authToken": {"secretReference": {"namespace": "descheduler", "name": "prom-token", "prometheusAuthToken": TOKEN}}},
     "metricsProviders[0].prometheus.authToken.secretReference.prometheusAuthToken"),
    ({"url": URL, "password": TOKEN}, "metricsProviders[0].prometheus.password"),
    ({"url": "https://admin:{0}@prometheus.monitoring.svc:9091".format(TOKEN)}, "metricsProviders[0].prometheus.url"),
])
def test_an_inline_token_is_refused_with_the_secret_fix_and_never_echoed(prometheus, path):
    policy = prometheus_policy(provider={"source": "Prometheus", "prometheus": prometheus})
    errors = errors_of(policy)
    assert errors[0]["path"] == path and errors[0]["problem"].startswith(("a credential written into the policy", "a token written into",
                                                                          "the URL carries user information")), errors
    # what else is said is what the refused key leaves unset (authToken without its secretReference)
    assert [e["path"] for e in errors[1:]] in ([], ["metricsProviders[0].prometheus.authToken.secretReference"])
    assert "Secret" in errors[0]["fix"] and "prometheusAuthToken" in errors[0]["fix"] and "secretReference" in errors[0]["fix"]
    assert TOKEN not in repr(errors)


def test_a_misplaced_mapping_is_an_unknown_field_not_a_token():
    policy = prometheus_policy()
    policy["metricsProviders"][0]["authToken"] = {"secretReference": {"namespace": "descheduler", "name": "prom-token"}}
    error, = errors_of(policy)
    assert error["path"] == "metricsProviders[0].authToken" and "unknown field in a metrics provider" in error["problem"]


def test_an_invalid_secret_reference_name_is_refused():
    provider = {"source": "Prometheus", "prometheus": {"url": URL, "authToken": {"secretReference": {"namespace": "Desched", "name": "x"}}}}
    error, = errors_of(prometheus_policy(provider=provider))
    assert error["path"].endswith("secretReference") and "not a valid Secret reference" in error["problem"]


def test_a_profile_that_does_not_enable_low_node_utilization_builds_no_client():
    policy = prometheus_policy()
    del policy["metricsProviders"]
    policy["profiles"][0]["plugins"]["balance"]["enabled"] = []
    assert not [e for e in errors_of(policy, vm_profiles=()) if "client not initialized" in e["problem"]]
