"""Actual usage as LowNodeUtilization reads it, through a fake API and a fake HTTP pool: the metrics server's quantities
in millicores and bytes in two list calls, upstream's Prometheus errors word for word, the service proxy path of an
in-cluster URL (where no token is sent), the token only in a direct query's Authorization header, the Secret that holds
it, and the source a profile's metricsUtilization picks."""
from __future__ import annotations

import base64
import json

import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster import metrics
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, RebalanceError

from ..fake_api import FakeApi, connect, resource, status_error

NODE_METRICS = resource("NodeMetrics", "nodes", "metrics.k8s.io", "v1beta1", namespaced=False)
POD_METRICS = resource("PodMetrics", "pods", "metrics.k8s.io", "v1beta1")
SECRET = resource("Secret", "secrets")
TOKEN = "s3cr3t-prometheus-token"
IN_CLUSTER = "https://prometheus-k8s.monitoring.svc:9091"
PROXY_PATH = "/api/v1/namespaces/monitoring/services/https:prometheus-k8s:9091/proxy/api/v1/query"
CPU_QUERY = "instance:node_cpu_utilisation:rate1m"


def node_metrics(name, cpu, memory):
    return {"metadata": {"name": name}, "timestamp": "2026-11-30T10:00:00Z", "window": "20s", "usage": {"cpu": cpu, "memory": memory}}


def pod_metrics(namespace, name, *containers):
    return {"metadata": {"name": name, "namespace": namespace},
            "containers": [{"name": "c{0}".format(i), "usage": usage} for i, usage in enumerate(containers)]}


def vector(*samples, result_type="vector"):
    return {"status": "success", "data": {"resultType": result_type,
                                          "result": [{"metric": labels, "value": [1700000000.5, value]} for labels, value in samples]}}


def secret(token=TOKEN, key=metrics.PROMETHEUS_TOKEN_KEY):
    return {"metadata": {"name": "prom-token", "namespace": "descheduler"},
            "data": {key: base64.b64encode(token.encode()).decode()} if token is not None else {}}


class Cluster:
    """Answers by path: metrics lists, Secrets, the service proxy; records each request."""

    def __init__(self, nodes=(), pods=(), answers=None, served=(NODE_METRICS, POD_METRICS, SECRET)):
        self.answers = {"/apis/metrics.k8s.io/v1beta1/nodes": {"items": list(nodes), "metadata": {}},
                        "/apis/metrics.k8s.io/v1beta1/pods": {"items": list(pods), "metadata": {}}}
        self.answers.update(answers or {})
        self.api = FakeApi(default=self.answer, cached=served, served=served)

    def answer(self, path, params):
        outcome = self.answers.get(path)
        if outcome is None:
            raise status_error(404, "NotFound", "{0} not found".format(path))
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class Answer:
    def __init__(self, status, body, reason=""):
        self.status, self.reason, self.headers = status, reason, {"Content-Type": "application/json"}
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode()


class Pool:
    """A urllib3-like pool: answers in order, records (method, url, headers, redirect)."""

    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []

    def request(self, method, url, headers=None, redirect=True, retries=None, timeout=None, preload_content=True):
        self.requests.append((method, url, dict(headers or {}), redirect))
        return self.answers.pop(0)


def client_for(cluster, pool=None, retries=0):
    client, _clock = connect(cluster.api, retries=retries)
    if pool is not None:
        client._http_pool_factory = lambda url: pool   # pylint: disable=protected-access
    return client


def never_resolves(host):
    return False


# ------------------------------------------------------------------------------------------ metrics server
def test_quantities_become_millicores_and_bytes_rounded_up():
    assert metrics.usage_of({"cpu": "123456789n", "memory": "1234Ki"}) == {"cpu": 124, "memory": 1234 * 1024}
    assert metrics.usage_of({"cpu": "2", "memory": "1.5Gi"}) == {"cpu": 2000, "memory": 3 * 2 ** 29}
    assert metrics.usage_of({"cpu": "250u"}) == {"cpu": 1, "memory": 0}        # 0.25 millicores round up; memory missing is 0
    assert metrics.usage_of(None) == {"cpu": 0, "memory": 0}


def test_pod_usage_is_the_sum_of_its_containers():
    pods = metrics.pod_usage([pod_metrics("ns", "virt-launcher-vm-1", {"cpu": "1500m", "memory": "2Gi"}, {"cpu": "10m", "memory": "30Mi"}),
                              pod_metrics("ns", "empty")])
    assert pods == {"ns/virt-launcher-vm-1": {"cpu": 1510, "memory": 2 * 2 ** 30 + 30 * 2 ** 20}, "ns/empty": {"cpu": 0, "memory": 0}}


@pytest.mark.parametrize("pod_count", [2, 200])
def test_read_metrics_server_makes_two_list_calls_whatever_the_number_of_pods(pod_count):
    cluster = Cluster(nodes=[node_metrics("worker-a", "3500m", "12Gi"), node_metrics("worker-b", "250m", "2Gi")],
                      pods=[pod_metrics("desched-test", "pod-{0}".format(i), {"cpu": "100m", "memory": "1Mi"}) for i in range(pod_count)])
    usage = metrics.read_metrics_server(client_for(cluster))
    assert usage["source"] == "KubernetesMetrics"
    assert usage["nodes"] == {"worker-a": {"cpu": 3500, "memory": 12 * 2 ** 30}, "worker-b": {"cpu": 250, "memory": 2 * 2 ** 30}}
    assert len(usage["pods"]) == pod_count and usage["pods"]["desched-test/pod-1"] == {"cpu": 100, "memory": 2 ** 20}
    assert [path for path, _params in cluster.api.calls] == ["/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods"]


def test_a_cluster_without_metrics_server_names_the_fix():
    cluster = Cluster(served=(SECRET,))
    with pytest.raises(RebalanceError) as caught:
        metrics.read_metrics_server(client_for(cluster), path="profiles[0].pluginConfig[1].args.metricsUtilization.source")
    assert caught.value.path == "profiles[0].pluginConfig[1].args.metricsUtilization.source"
    assert "does not serve metrics.k8s.io" in caught.value.problem
    assert "Install metrics-server" in caught.value.fix and "leave metricsUtilization out" in caught.value.fix
    assert cluster.api.calls == []


@pytest.mark.parametrize("status, reason", [(503, "ServiceUnavailable"), (404, "NotFound")])
def test_a_metrics_server_that_does_not_answer_names_the_fix(status, reason):
    cluster = Cluster(answers={"/apis/metrics.k8s.io/v1beta1/nodes": status_error(status, reason, "the server is currently unable to handle the request")})
    with pytest.raises(RebalanceError) as caught:
        metrics.read_metrics_server(client_for(cluster))
    assert "Install metrics-server" in caught.value.fix
    assert caught.value.problem == ("the metrics server did not answer: {0} {1}: the server is currently unable to handle the request "
                                    "(list nodes.metrics.k8s.io)".format(status, reason))


def test_forbidden_metrics_keep_the_rbac_fix():
    cluster = Cluster(answers={"/apis/metrics.k8s.io/v1beta1/nodes": status_error(
        403, "Forbidden", 'nodes.metrics.k8s.io is forbidden: User "u" cannot list resource "nodes" in API group "metrics.k8s.io" at the cluster scope')})
    with pytest.raises(ApiFailure) as caught:
        metrics.read_metrics_server(client_for(cluster))
    assert 'Grant the user verb "list" on resource "nodes" in API group "metrics.k8s.io"' in caught.value.fix


# ------------------------------------------------------------------------------------------ Prometheus answers
def test_vector_samples_become_metric_resource_as_upstream_truncates():
    usage = metrics.prometheus_usage(vector(({"instance": "worker-a"}, "0.29"), ({"instance": "worker-b"}, "1"),
                                            ({"instance": "worker-c"}, "0")), CPU_QUERY)
    # 0.29 * 100 is 28.999999999999996 in IEEE doubles: Go's int64() and Python's int() both give 28
    assert usage == {"source": "Prometheus", "query": CPU_QUERY,
                     "nodes": {"worker-a": {"MetricResource": 28}, "worker-b": {"MetricResource": 100}, "worker-c": {"MetricResource": 0}},
                     "values": {"worker-a": 0.29, "worker-b": 1.0, "worker-c": 0.0}}


@pytest.mark.parametrize("answer, problem", [
    (vector(({"instance": "worker-a"}, "0.5"), result_type="matrix"), 'expected query results to be of type "vector", got "matrix" instead'),
    ({"status": "success", "data": {"resultType": "scalar", "result": [1, "0.5"]}}, 'expected query results to be of type "vector", got "scalar" instead'),
    (vector(({"node": "worker-a"}, "0.5")), "The collected metrics sample is missing 'instance' key"),
    (vector(({"instance": "worker-a"}, "1.5")), 'The collected metrics sample for "worker-a" has value 1.5 outside of <0; 1> interval'),
    (vector(({"instance": "worker-a"}, "-0.25")), 'The collected metrics sample for "worker-a" has value -0.25 outside of <0; 1> interval'),
    (vector(({"instance": "worker-a"}, "2")), 'The collected metrics sample for "worker-a" has value 2 outside of <0; 1> interval'),
    (vector(({"instance": "worker-a"}, "+Inf")), 'The collected metrics sample for "worker-a" has value +Inf outside of <0; 1> interval'),
    (vector(({"instance": "worker-a"}, "NaN")), 'The collected metrics sample for "worker-a" has value NaN outside of <0; 1> interval'),
])
def test_answers_upstream_refuses_with_its_words(answer, problem):
    with pytest.raises(RebalanceError) as caught:
        metrics.prometheus_usage(answer, CPU_QUERY, path="profiles[0].pluginConfig[0].args.metricsUtilization.prometheus.query")
    assert caught.value.problem == problem
    assert caught.value.path == "profiles[0].pluginConfig[0].args.metricsUtilization.prometheus.query"
    assert "instance=<node name>" in caught.value.fix


def test_a_node_without_a_sample_is_upstreams_missing_metric_entry():
    usage = metrics.prometheus_usage(vector(({"instance": "worker-a"}, "0.5")), CPU_QUERY)
    metrics.require_node_entries(usage, ["worker-a"])
    with pytest.raises(RebalanceError) as caught:
        metrics.require_node_entries(usage, ["worker-a", "worker-b", "worker-c"], path="prometheus_query")
    assert caught.value.problem == "unable to find metric entry for worker-b (1 more node without one: worker-c)"
    assert caught.value.path == "prometheus_query" and "Samples came for: worker-a." in caught.value.fix
    with pytest.raises(RebalanceError) as caught:
        metrics.require_node_entries({"source": "KubernetesMetrics", "nodes": {}}, ["worker-a"])
    assert caught.value.problem == 'unable to find node "worker-a" in the collected metrics'


@pytest.mark.parametrize("value, text", [(0.5, "0.5"), (2.0, "2"), (1e21, "1000000000000000000000"), (-1.5e-7, "-0.00000015"),
                                         (float("inf"), "+Inf"), (float("-inf"), "-Inf"), (float("nan"), "NaN")])
def test_values_print_as_go_prints_a_sample_value(value, text):
    assert metrics.go_float(value) == text


# ------------------------------------------------------------------------------------------ URLs
@pytest.mark.parametrize("url, path", [
    (IN_CLUSTER, PROXY_PATH),
    ("http://prometheus.monitoring.svc.cluster.local", "/api/v1/namespaces/monitoring/services/prometheus:80/proxy/api/v1/query"),
    ("https://thanos-querier.openshift-monitoring.svc:9091/prometheus/",
     "/api/v1/namespaces/openshift-monitoring/services/https:thanos-querier:9091/proxy/prometheus/api/v1/query"),
    ("https://prometheus.example.com:9091", None),
    ("https://monitoring.svc.example.com", None),
])
def test_the_service_proxy_path_of_an_in_cluster_url(url, path):
    assert metrics.service_proxy_path(url) == path


def test_an_in_cluster_url_goes_through_the_proxy_only_when_its_host_does_not_resolve():
    assert metrics.prometheus_route(IN_CLUSTER, never_resolves) == {"via": "service_proxy", "url": IN_CLUSTER, "path": PROXY_PATH}
    assert metrics.prometheus_route(IN_CLUSTER, lambda host: True)["via"] == "direct"
    assert metrics.prometheus_route("https://user:pw@prom.example.com/?x=1", never_resolves) == {
        "via": "direct", "url": "https://prom.example.com/", "path": None}


@pytest.mark.parametrize("url", ["ftp://prom.example.com", "prometheus:9090", "https://", "https://prom.example.com:99999"])
def test_urls_that_are_not_http_are_refused(url):
    with pytest.raises(RebalanceError) as caught:
        metrics.check_prometheus_url(url, "prometheus_url")
    assert caught.value.path == "prometheus_url"


# ------------------------------------------------------------------------------------------ queries
def test_through_the_service_proxy_the_token_is_not_sent(monkeypatch):
    monkeypatch.setattr(metrics, "host_resolves", never_resolves)
    cluster = Cluster(answers={PROXY_PATH: vector(({"instance": "worker-a"}, "0.8"), ({"instance": "worker-b"}, "0.2"))})
    usage = metrics.query_prometheus(client_for(cluster), IN_CLUSTER, CPU_QUERY, TOKEN, nodes=["worker-a", "worker-b"])
    assert usage["nodes"] == {"worker-a": {"MetricResource": 80}, "worker-b": {"MetricResource": 20}}
    assert cluster.api.calls == [(PROXY_PATH, {"query_params": [("query", CPU_QUERY)]})]
    assert TOKEN not in json.dumps(cluster.api.calls) and TOKEN not in json.dumps(usage)


def test_a_direct_query_sends_the_token_only_in_the_authorization_header():
    pool = Pool(Answer(200, vector(({"instance": "worker-a"}, "0.4"))))
    usage = metrics.query_prometheus(client_for(Cluster(), pool), "https://prom.example.com:9091/", CPU_QUERY, TOKEN)
    (method, url, headers, redirect), = pool.requests
    assert method == "GET" and url == "https://prom.example.com:9091/api/v1/query?query=instance%3Anode_cpu_utilisation%3Arate1m"
    assert headers["Authorization"] == "Bearer " + TOKEN and redirect is False
    assert usage["values"] == {"worker-a": 0.4} and TOKEN not in json.dumps(usage)


def test_a_direct_query_without_a_token_sends_no_authorization():
    pool = Pool(Answer(200, vector(({"instance": "worker-a"}, "0.4"))))
    metrics.query_prometheus(client_for(Cluster(), pool), "http://prom.example.com", CPU_QUERY, None)
    assert "Authorization" not in pool.requests[0][2]


def test_prometheus_errors_keep_its_words_and_never_the_token():
    bad = {"status": "error", "errorType": "bad_data", "error": 'invalid parameter "query": 1:9: parse error: unexpected end of input'}
    pool = Pool(Answer(400, bad, "Bad Request"))
    with pytest.raises(RebalanceError) as caught:
        metrics.query_prometheus(client_for(Cluster(), pool), "https://prom.example.com", "sum(rate(", TOKEN, url_path="prometheus_url")
    message = caught.value.message
    assert message.startswith("prometheus_url: unable to capture prometheus metrics: 400 Bad Request: bad_data: invalid parameter")
    assert "instance=<node name>" in caught.value.fix and TOKEN not in message and TOKEN not in json.dumps(caught.value.as_dict())
    pool = Pool(Answer(401, b"Unauthorized\n", "Unauthorized"))
    with pytest.raises(RebalanceError) as caught:
        metrics.query_prometheus(client_for(Cluster(), pool), "https://prom.example.com", CPU_QUERY, TOKEN)
    assert "401 Unauthorized: Unauthorized" in caught.value.problem and "prometheusAuthToken" in caught.value.fix
    assert TOKEN not in caught.value.message


def test_a_redirect_is_not_followed():
    pool = Pool(Answer(302, b"", "Found"))
    with pytest.raises(RebalanceError) as caught:
        metrics.query_prometheus(client_for(Cluster(), pool), "https://prom.example.com", CPU_QUERY, TOKEN)
    assert "302 Found" in caught.value.problem and len(pool.requests) == 1


def test_a_503_of_prometheus_is_retried():
    pool = Pool(Answer(503, {"status": "error", "errorType": "unavailable", "error": "starting"}, "Service Unavailable"),
                Answer(200, vector(({"instance": "worker-a"}, "0.1"))))
    usage = metrics.query_prometheus(client_for(Cluster(), pool, retries=2), "https://prom.example.com", CPU_QUERY, None)
    assert usage["nodes"] == {"worker-a": {"MetricResource": 10}} and len(pool.requests) == 2


def test_a_prometheus_that_wants_a_token_behind_the_proxy_says_to_reach_it_directly(monkeypatch):
    monkeypatch.setattr(metrics, "host_resolves", never_resolves)
    refused = ApiException(status=403, reason="Forbidden")     # kube-rbac-proxy's own answer, not a Status of the API server
    refused.body = "Forbidden (user=system:anonymous, verb=get, resource=, subresource=)"
    cluster = Cluster(answers={PROXY_PATH: refused})
    with pytest.raises(RebalanceError) as caught:
        metrics.query_prometheus(client_for(cluster), IN_CLUSTER, CPU_QUERY, TOKEN)
    assert "403 Forbidden: Forbidden (user=system:anonymous" in caught.value.problem
    assert caught.value.fix == metrics.FIX_PROMETHEUS_PROXY_AUTH.format(option="prometheus_url") and "removes it before proxying" in caught.value.fix


def test_the_proxy_fix_names_the_callers_url_option(monkeypatch):
    monkeypatch.setattr(metrics, "host_resolves", never_resolves)
    refused = ApiException(status=401, reason="Unauthorized")
    refused.body = "Unauthorized"
    cluster = Cluster(answers={PROXY_PATH: refused})
    policy = {"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": IN_CLUSTER}}]}
    profile = {"name": "vm", "pluginConfig": [{"name": "LowNodeUtilization", "args": {
        "thresholds": {"MetricResource": 20}, "targetThresholds": {"MetricResource": 60},
        "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": CPU_QUERY}}}}]}
    with pytest.raises(RebalanceError) as caught:
        metrics.read_actual_usage(client_for(cluster), policy, profile, url_option="prometheus_url_override")
    assert "give prometheus_url_override a URL reachable from here" in caught.value.fix


def test_the_api_servers_own_refusals_through_the_proxy_keep_their_fix(monkeypatch):
    monkeypatch.setattr(metrics, "host_resolves", never_resolves)
    cluster = Cluster(answers={PROXY_PATH: status_error(503, "ServiceUnavailable", 'no endpoints available for service "prometheus-k8s"')})
    with pytest.raises(RebalanceError) as caught:
        metrics.query_prometheus(client_for(cluster), IN_CLUSTER, CPU_QUERY, None)
    assert caught.value.problem.startswith('unable to capture prometheus metrics: 503 ServiceUnavailable: no endpoints available for service '
                                           '"prometheus-k8s" (query Prometheus through the API server\'s service proxy ' + PROXY_PATH + ")")
    assert "no ready endpoint" in caught.value.fix
    denied = 'services "https:prometheus-k8s:9091" is forbidden: User "u" cannot get resource "services/proxy" in API group "" in the namespace "monitoring"'
    cluster = Cluster(answers={PROXY_PATH: status_error(403, "Forbidden", denied)})
    with pytest.raises(RebalanceError) as caught:
        metrics.query_prometheus(client_for(cluster), IN_CLUSTER, CPU_QUERY, None)
    assert 'verb "get" on resource "services/proxy"' in caught.value.fix


# ------------------------------------------------------------------------------------------ the token's Secret
def test_the_token_comes_from_the_secrets_prometheus_auth_token_key():
    cluster = Cluster(answers={"/api/v1/namespaces/descheduler/secrets/prom-token": secret()})
    assert metrics.prometheus_token_from_secret(client_for(cluster), "descheduler", "prom-token") == TOKEN


@pytest.mark.parametrize("answers, namespace, problem", [
    ({}, "descheduler", "unable to get descheduler/prom-token secret"),
    ({"/api/v1/namespaces/descheduler/secrets/prom-token": secret(key="token")}, "descheduler",
     'prometheus authentication token secret missing "prometheusAuthToken" data or empty'),
    ({"/api/v1/namespaces/descheduler/secrets/prom-token": secret(token="")}, "descheduler",
     'prometheus authentication token secret missing "prometheusAuthToken" data or empty'),
    ({}, None, "prometheus metrics source configuration is missing authentication token secret"),
])
def test_a_token_that_cannot_be_had_is_upstreams_message(answers, namespace, problem):
    with pytest.raises(RebalanceError) as caught:
        metrics.prometheus_token_from_secret(client_for(Cluster(answers=answers)), namespace, "prom-token")
    assert caught.value.problem == problem


# ------------------------------------------------------------------------------------------ from a policy
def lnu_profile(metrics_utilization, name="vm-rebalance"):
    args = {"thresholds": {"MetricResource": 20}, "targetThresholds": {"MetricResource": 70}}
    if metrics_utilization is not None:
        args["metricsUtilization"] = metrics_utilization
    return {"name": name, "pluginConfig": [{"name": "DefaultEvictor", "args": {}}, {"name": "LowNodeUtilization", "args": args}],
            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}


def prometheus_policy(profile, url="https://prom.example.com", auth=True):
    provider = {"source": "Prometheus", "prometheus": {"url": url}}
    if auth:
        provider["prometheus"]["authToken"] = {"secretReference": {"namespace": "descheduler", "name": "prom-token"}}
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "metricsProviders": [{"source": "KubernetesMetrics"}, provider],
            "profiles": [profile]}


def test_a_profile_without_metrics_utilization_reads_nothing():
    cluster = Cluster()
    profile = lnu_profile(None)
    assert metrics.read_actual_usage(client_for(cluster), {"profiles": [profile]}, profile) is None
    assert cluster.api.calls == []


@pytest.mark.parametrize("metrics_utilization", [{"source": "KubernetesMetrics"}, {"metricsServer": True}])
def test_the_metrics_server_source_and_its_deprecated_switch(metrics_utilization):
    cluster = Cluster(nodes=[node_metrics("worker-a", "1", "1Gi")])
    profile = lnu_profile(metrics_utilization)
    usage = metrics.read_actual_usage(client_for(cluster), {"profiles": [profile]}, profile, nodes=["worker-a"])
    assert usage["source"] == "KubernetesMetrics" and usage["nodes"] == {"worker-a": {"cpu": 1000, "memory": 2 ** 30}}


@pytest.mark.parametrize("metrics_utilization, path, problem", [
    ({}, "profiles[0].pluginConfig[1].args.metricsUtilization.source", "metrics source is empty"),
    ({"source": "Graphite"}, "profiles[0].pluginConfig[1].args.metricsUtilization.source", "unrecognized metrics source"),
    ({"source": "Prometheus"}, "profiles[0].pluginConfig[1].args.metricsUtilization.prometheus", "prometheus property is missing"),
    ({"source": "Prometheus", "prometheus": {}}, "profiles[0].pluginConfig[1].args.metricsUtilization.prometheus.query",
     "prometheus query is missing"),
])
def test_metrics_utilization_upstream_cannot_use(metrics_utilization, path, problem):
    profile = lnu_profile(metrics_utilization)
    with pytest.raises(RebalanceError) as caught:
        metrics.read_actual_usage(client_for(Cluster()), {"profiles": [profile]}, profile)
    assert (caught.value.path, caught.value.problem) == (path, problem)


def test_prometheus_without_a_provider_names_metrics_providers():
    profile = lnu_profile({"source": "Prometheus", "prometheus": {"query": CPU_QUERY}})
    with pytest.raises(RebalanceError) as caught:
        metrics.read_actual_usage(client_for(Cluster()), {"profiles": [profile]}, profile)
    assert caught.value.path == "metricsProviders" and "prometheus client not initialized" in caught.value.problem
    assert "prometheus_url" in caught.value.fix


def test_prometheus_from_the_policy_with_the_token_of_its_secret():
    profile = lnu_profile({"source": "Prometheus", "prometheus": {"query": CPU_QUERY}})
    cluster = Cluster(answers={"/api/v1/namespaces/descheduler/secrets/prom-token": secret()})
    pool = Pool(Answer(200, vector(({"instance": "worker-a"}, "0.5"))))
    usage = metrics.read_actual_usage(client_for(cluster, pool), prometheus_policy(profile), profile, nodes=["worker-a"])
    assert usage == {"source": "Prometheus", "query": CPU_QUERY, "nodes": {"worker-a": {"MetricResource": 50}}, "values": {"worker-a": 0.5}}
    assert pool.requests[0][1].startswith("https://prom.example.com/api/v1/query?") and pool.requests[0][2]["Authorization"] == "Bearer " + TOKEN
    assert [path for path, _params in cluster.api.calls] == ["/api/v1/namespaces/descheduler/secrets/prom-token"]


def test_a_given_url_and_token_override_the_policys():
    profile = lnu_profile({"source": "Prometheus", "prometheus": {"query": CPU_QUERY}})
    cluster = Cluster()
    pool = Pool(Answer(200, vector(({"instance": "worker-a"}, "0.5"))))
    metrics.read_actual_usage(client_for(cluster, pool), prometheus_policy(profile), profile, prometheus_url="http://localhost:9090",
                              prometheus_token="other")
    assert pool.requests[0][1].startswith("http://localhost:9090/api/v1/query?") and pool.requests[0][2]["Authorization"] == "Bearer other"
    assert cluster.api.calls == []                                   # no Secret read when the token is given


def test_a_missing_node_sample_fails_as_upstream_fails_the_cycle():
    profile = lnu_profile({"source": "Prometheus", "prometheus": {"query": CPU_QUERY}})
    pool = Pool(Answer(200, vector(({"instance": "10.0.0.1:9100"}, "0.5"))))
    with pytest.raises(RebalanceError) as caught:
        metrics.read_actual_usage(client_for(Cluster(), pool), prometheus_policy(profile, auth=False), profile, nodes=["worker-a"])
    assert caught.value.problem == "unable to find metric entry for worker-a"
    assert caught.value.path == "profiles[0].pluginConfig[1].args.metricsUtilization.prometheus.query"
    assert "Samples came for: 10.0.0.1:9100." in caught.value.fix


def test_through_the_service_proxy_the_policys_secret_is_not_read(monkeypatch):
    monkeypatch.setattr(metrics, "host_resolves", never_resolves)
    profile = lnu_profile({"source": "Prometheus", "prometheus": {"query": CPU_QUERY}})
    cluster = Cluster(answers={PROXY_PATH: vector(({"instance": "worker-a"}, "0.5"))})
    usage = metrics.read_actual_usage(client_for(cluster), prometheus_policy(profile, url=IN_CLUSTER), profile)
    assert usage["nodes"] == {"worker-a": {"MetricResource": 50}}
    assert [path for path, _params in cluster.api.calls] == [PROXY_PATH]
