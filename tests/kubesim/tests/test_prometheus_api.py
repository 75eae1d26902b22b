"""The simulated Prometheus (metrics/prometheus.py): the HTTP API's answers and errors as Prometheus writes them, the
token check, the API server's service proxy (which drops the caller's Authorization header, as upstream), and the
in-cluster client the simulated descheduler uses, failing as Go's HTTP client does."""
import json
import threading
from contextlib import contextmanager
from urllib.parse import quote

import pytest

from descheduler_cluster import node, pod
from https_client import call
from kubesim import kubeconfig
from kubesim.metrics import prometheus
from kubesim.rbac import Authorizer
from kubesim.server import KubeSimServer
from metrics_cluster import metrics_cluster

CPU = "instance:node_cpu_utilisation:rate1m"
MEMORY = "instance:node_memory_utilisation:ratio"
PROXY = "/api/v1/namespaces/monitoring/services/prometheus-k8s:9091/proxy"


def prometheus_cluster(token: str | None = None, series: dict | None = None):
    config = {"namespace": "monitoring", "service": "prometheus-k8s", "port": 9091}
    if token:
        config.update(token=token, tokenSecret={"namespace": "descheduler", "name": "prometheus-auth"})
    if series:
        config["series"] = series
    cluster = metrics_cluster({"nodeOverhead": {"cpu": "1", "memory": "1Gi"}, "pods": "requests",
                               "prometheus": config})
    node(cluster, "n1", cpu="10", memory="10Gi")
    node(cluster, "n2", cpu="10", memory="10Gi")
    pod(cluster, "busy", "n1", cpu="6", memory="4Gi")
    return cluster


@contextmanager
def serving(cluster, users: list | None = None):
    server = KubeSimServer(("127.0.0.1", 0), {"workload": cluster}, {"gitVersion": "v1.35.0"},
                           authorizer=Authorizer(users is not None, users or [], kubeconfig.TOKEN))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown_all()


def ask(cluster, query: str = CPU, method: str = "GET", token: str | None = None, time: str | None = None,
        path: str = "/api/v1/query"):
    args = f"query={quote(query, safe='')}" + (f"&time={quote(time)}" if time is not None else "")
    if method == "GET":
        return prometheus.serve(cluster.metrics, "GET", path, args, b"", "", f"Bearer {token}" if token else None)
    return prometheus.serve(cluster.metrics, "POST", path, "", args.encode(), "application/x-www-form-urlencoded",
                            f"Bearer {token}" if token else None)


def answer(result) -> dict:
    code, content_type, body = result
    assert content_type == "application/json"
    return {"code": code, **json.loads(body)}


def test_an_instant_vector_per_node_for_the_known_queries():
    cluster = prometheus_cluster()
    got = answer(ask(cluster, CPU, time="1700000000.5"))
    assert got == {"code": 200, "status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": CPU, "instance": "n1", "job": "node-exporter"}, "value": [1700000000.5, "0.7"]},
        {"metric": {"__name__": CPU, "instance": "n2", "job": "node-exporter"}, "value": [1700000000.5, "0.1"]}]}}
    memory = answer(ask(cluster, MEMORY, method="POST", time="2023-11-14T22:13:20Z"))["data"]["result"]
    assert [(s["metric"]["instance"], s["value"]) for s in memory] == [
        ("n1", [1700000000.0, "0.5"]), ("n2", [1700000000.0, "0.1"])]
    matched = answer(ask(cluster, f'{CPU}{{instance="n2"}}'))["data"]["result"]
    assert [s["metric"]["instance"] for s in matched] == ["n2"]
    other = answer(ask(cluster, f'{CPU}{{instance!="n2", job="node-exporter"}}'))["data"]["result"]
    assert [s["metric"]["instance"] for s in other] == ["n1"]


def test_the_kubevirt_relieve_and_migrate_query_amplifies_the_node_above_the_mean():
    cluster = prometheus_cluster()
    values = {s["metric"]["instance"]: float(s["value"][1])
              for s in answer(ask(cluster, prometheus.PROFILE_QUERY))["data"]["result"]}
    # cpu 0.7 / 0.1 (mean 0.4), memory 0.5 / 0.1 (mean 0.3): n1 = 0.6 + 3 * (0.3 + 0.2) / 2, clamped to 1
    assert values == {"n1": 1.0, "n2": pytest.approx(0.1)}


def test_unknown_expressions_answer_an_empty_vector_and_malformed_ones_bad_data():
    cluster = prometheus_cluster()
    assert answer(ask(cluster, "node_no_such_metric"))["data"] == {"resultType": "vector", "result": []}
    assert answer(ask(cluster, f"avg({CPU})"))["data"]["result"] == []
    for query, error in [("", '1:1: parse error: no expression found in input'),
                         (f"avg({CPU}", "1:4: parse error: unclosed left parenthesis"),
                         (f"{CPU})", f"1:{len(CPU) + 1}: parse error: unexpected right parenthesis ')'"),
                         ("up{job=\"x\"", "1:3: parse error: unexpected end of input inside braces"),
                         ("up # x", "1:4: parse error: unexpected character: '#'")]:
        assert answer(ask(cluster, query)) == {"code": 400, "status": "error", "errorType": "bad_data",
                                               "error": f'invalid parameter "query": {error}'}
    bad_time = answer(ask(cluster, CPU, time="yesterday"))
    assert bad_time["code"] == 400 and bad_time["error"] == \
        'invalid parameter "time": cannot parse "yesterday" to a valid timestamp'


def test_fixed_series_the_token_check_and_other_paths():
    cluster = prometheus_cluster(token="s3cret", series={"odd_query": [{"metric": {"node": "n1"}, "value": 1.5}]})
    assert ask(cluster, CPU) == (401, "text/plain; charset=utf-8", b"Unauthorized\n")
    assert ask(cluster, CPU, token="wrong")[0] == 401
    odd = answer(ask(cluster, "odd_query", token="s3cret"))["data"]["result"]
    assert [(s["metric"], s["value"][1]) for s in odd] == [({"node": "n1"}, "1.5")]
    ready = (200, "text/plain; charset=utf-8", b"Prometheus Server is Ready.\n")
    assert ask(cluster, path="/-/ready", token="s3cret") == ready
    assert ask(cluster, path="/api/v1/query_range", token="s3cret")[:2] == (404, "text/plain; charset=utf-8")
    assert prometheus.serve(cluster.metrics, "DELETE", "/api/v1/query", "", b"", "", "Bearer s3cret")[0] == 405


@pytest.mark.parametrize("value, shown", [(0.75, "0.75"), (1.0, "1"), (0.0, "0"), (1e-05, "0.00001"),
                                          (0.7333333333333333, "0.7333333333333333")])
def test_values_are_printed_as_go_formats_them(value, shown):
    assert prometheus.format_value(value) == shown


# ---------------------------------------------------------------------------------------- service proxy
def test_the_service_proxy_answers_get_and_post_and_drops_the_authorization_header():
    open_cluster = prometheus_cluster()
    with serving(open_cluster) as server:
        code, got = call(server, "GET", f"{PROXY}/api/v1/query?query={CPU}")
        assert code == 200 and [s["metric"]["instance"] for s in got["data"]["result"]] == ["n1", "n2"]
        code, got = call(server, "GET", f"/api/v1/namespaces/monitoring/services/https:prometheus-k8s:web/proxy"
                                        f"/api/v1/query?query={MEMORY}")
        assert code == 200 and got["data"]["result"][0]["value"][1] == "0.5"
        code, status = call(server, "GET", "/api/v1/namespaces/monitoring/services/nope:9091/proxy/api/v1/query")
        assert code == 404 and status["message"] == 'services "nope" not found'
        code, status = call(server, "GET", "/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy/-/ready")
        assert code == 503 and status["message"] == 'no endpoints available for service "prometheus-k8s:9090"'
    with serving(prometheus_cluster(token="s3cret")) as server:
        code, body = call(server, "GET", f"{PROXY}/api/v1/query?query={CPU}", token=kubeconfig.TOKEN)
        assert code == 401 and body == "Unauthorized\n"     # the apiserver removed the Authorization header


def test_the_service_proxy_is_authorized_as_services_proxy():
    cluster = prometheus_cluster()
    with serving(cluster, users=[{"name": "alice", "token": "alice-token"}]) as server:
        code, status = call(server, "GET", f"{PROXY}/api/v1/query?query={CPU}", token="alice-token")
        assert code == 403 and status["message"] == (
            'services "prometheus-k8s:9091" is forbidden: User "alice" cannot get resource "services/proxy" in API '
            'group "" in the namespace "monitoring"')


# ------------------------------------------------------------------------------------- in-cluster client
@pytest.mark.parametrize("url", ["https://prometheus-k8s.monitoring.svc:9091",
                                 "http://prometheus-k8s.monitoring.svc.cluster.local:9091/",
                                 "https://prometheus-k8s.monitoring:9091"])
def test_the_in_cluster_client_reaches_the_service_by_its_names(url):
    cluster = prometheus_cluster(token="s3cret")
    client = prometheus.InClusterClient(cluster, url, "s3cret", "descheduler")
    kind, samples = client.query(CPU)
    assert kind == "vector" and samples == [({"__name__": CPU, "instance": "n1", "job": "node-exporter"}, 0.7),
                                            ({"__name__": CPU, "instance": "n2", "job": "node-exporter"}, 0.1)]


@pytest.mark.parametrize("url, token, error", [
    ("https://prometheus-k8s.monitoring.svc:9091", "wrong", "client_error: client error: 401"),
    ("https://prometheus.example.com:9091", "s3cret", 'Post "https://prometheus.example.com:9091/api/v1/query": dial '
                                                      "tcp: lookup prometheus.example.com on 10.96.0.10:53: no such host"),
    ("https://prometheus-k8s.monitoring.svc:9090", "s3cret", 'Post "https://prometheus-k8s.monitoring.svc:9090/api/v1/'
                                                             'query": dial tcp prometheus-k8s.monitoring.svc:9090: '
                                                             "connect: connection refused"),
    ("https://prometheus-k8s.monitoring.svc:9091/prom", "s3cret", "client_error: client error: 404"),
    ("ftp://prometheus-k8s.monitoring.svc:9091", "s3cret", 'Post "ftp://prometheus-k8s.monitoring.svc:9091/api/v1/'
                                                           'query": unsupported protocol scheme "ftp"'),
])
def test_the_in_cluster_client_fails_as_the_go_client_does(url, token, error):
    cluster = prometheus_cluster(token="s3cret")
    with pytest.raises(prometheus.ClientError) as err:
        prometheus.InClusterClient(cluster, url, token, "descheduler").query(CPU)
    assert str(err.value) == error


def test_a_bad_query_through_the_client_is_its_bad_data_error():
    cluster = prometheus_cluster()
    with pytest.raises(prometheus.ClientError, match='^bad_data: invalid parameter "query": 1:4: parse error'):
        prometheus.InClusterClient(cluster, "http://prometheus-k8s.monitoring:9091", None, "x").query(f"avg({CPU}")
