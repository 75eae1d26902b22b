"""The simulator's admin endpoint: request counters by verb and resource, and fault injection (error
statuses, Retry-After, latency, dropped connections, rates with a seed, scoping) as the `kubernetes` Python
client and plain HTTP see them.

One simulator per module; every test starts from no fault rules and zeroed counters."""
from __future__ import annotations

import http.client
import json
import time
import urllib.error
from urllib.parse import urlsplit

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import retry
from support.simulator import ADMIN_TOKEN

pytestmark = pytest.mark.simulator


# ------------------------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def sim(two_workers):
    return two_workers


def make_api(sim, context: str = "workload", **options) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=sim.kubeconfig, context=context, client_configuration=configuration)
    for key, value in options.items():
        setattr(configuration, key, value)
    return client.ApiClient(configuration)


@pytest.fixture(scope="module")
def core(sim):
    return client.CoreV1Api(make_api(sim))


@pytest.fixture(scope="module")
def global_core(sim):
    return client.CoreV1Api(make_api(sim, "global"))


@pytest.fixture(autouse=True)
def clean(sim):
    sim.clear_faults()
    sim.reset_counters()
    yield
    sim.clear_faults()


@pytest.fixture(scope="module")
def ns(sim, core):
    core.create_namespace({"metadata": {"name": "faults"}})
    core.create_namespace({"metadata": {"name": "faults-other"}})
    core.create_namespaced_config_map("faults", {"metadata": {"name": "cm"}, "data": {"v": "1"}})
    core.create_namespaced_config_map("faults-other", {"metadata": {"name": "cm"}})
    sim.settle()
    return "faults"


def admin_raw(sim, method: str, path: str, body=None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    try:
        with sim.request(method, f"/_kubesim/{path}", data, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def raw_get(sim, path: str) -> tuple[int, dict, dict]:
    """A GET on a fresh connection, as the admin: status, headers, JSON body."""
    parts = urlsplit(sim.url)
    conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=10, context=sim.ssl_context)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read() or b"null")
    finally:
        conn.close()


def fails_with(call, status: int) -> ApiException:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == status, caught.value
    return caught.value


# ------------------------------------------------------------------------------------------ counters
def test_counters_by_verb_and_resource(sim, core, ns):
    core.list_namespaced_pod("default")
    core.list_pod_for_all_namespaces()
    core.read_namespaced_config_map("cm", ns)
    core.patch_namespaced_config_map("cm", ns, {"data": {"v": "2"}})
    core.list_node()
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("missing", ns)
    counters = sim.counters()
    assert counters["list pods"] == 2
    assert counters["get configmaps"] == 2          # failed requests count too
    assert counters["patch configmaps"] == 1
    assert counters["list nodes"] == 1
    assert "get pods" not in counters
    report = sim.admin("GET", "counters?cluster=workload")["workload"]
    assert report["total"] == sum(report["requests"].values()) == 6
    # The admin endpoint itself is not counted.
    assert sim.counters() == counters


def test_counters_for_eviction_watch_deletecollection_and_nonresource(sim, core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "evictee"},
                                    "spec": {"nodeName": "worker-a", "terminationGracePeriodSeconds": 0,
                                             "containers": [{"name": "c", "image": "i"}]}})
    core.create_namespaced_pod_eviction("evictee", ns, {"apiVersion": "policy/v1", "kind": "Eviction",
                                                        "metadata": {"name": "evictee", "namespace": ns}})
    list(watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1))
    core.delete_collection_namespaced_config_map("faults-other", label_selector="nothing=here")
    client.VersionApi(core.api_client).get_code()
    counters = sim.counters()
    assert counters["create pods"] == 1
    assert counters["create pods/eviction"] == 1
    assert counters["watch configmaps"] == 1
    assert counters["deletecollection configmaps"] == 1
    assert counters["get /version"] == 1


def test_counters_are_per_cluster_and_reset(sim, core, global_core):
    global_core.list_namespace()
    global_core.list_namespace()
    core.list_namespace()
    assert sim.counters("global") == {"list namespaces": 2}
    assert sim.counters("workload") == {"list namespaces": 1}
    everything = sim.admin("GET", "counters")
    assert set(everything) >= {"workload", "global"}
    sim.reset_counters()
    assert sim.counters("global") == {} and sim.counters("workload") == {}
    assert sim.admin("GET", "counters?cluster=global")["global"]["total"] == 0


# ----------------------------------------------------------------------------------- error statuses
@pytest.mark.parametrize("status, reason", [(500, "InternalError"), (503, "ServiceUnavailable")])
def test_server_errors_for_the_next_n_requests(sim, core, ns, status, reason):
    sim.add_fault(verb="get", resource="configmaps", status=status, count=2)
    for _attempt in range(2):
        err = fails_with(lambda: core.read_namespaced_config_map("cm", ns), status)
        body = json.loads(err.body)
        assert body["kind"] == "Status" and body["code"] == status and body["reason"] == reason
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    assert sim.admin("GET", "faults")["faults"] == [], "a rule with a count goes once used up"
    report = sim.admin("GET", "counters?cluster=workload")["workload"]
    assert report["faulted"] == {"get configmaps": 2}
    assert report["requests"]["get configmaps"] == 3


def test_429_with_retry_after_header_and_details(sim, core, ns):
    sim.add_fault(verb="list", resource="pods", status=429, retryAfter=7, count=1)
    status, headers, body = raw_get(sim, f"/api/v1/namespaces/{ns}/pods")
    assert status == 429
    assert headers["Retry-After"] == "7"
    assert body["reason"] == "TooManyRequests" and body["code"] == 429
    assert body["details"]["retryAfterSeconds"] == 7
    assert core.list_namespaced_pod(ns).kind == "PodList"


def test_409_fault_and_custom_message(sim, core, ns):
    sim.add_fault(verb="patch", resource="configmaps", status=409, message="injected conflict", count=1)
    err = fails_with(lambda: core.patch_namespaced_config_map("cm", ns, {"data": {"v": "x"}}), 409)
    body = json.loads(err.body)
    assert body["reason"] == "Conflict" and body["message"] == "injected conflict"
    assert core.read_namespaced_config_map("cm", ns).data["v"] != "x", "a faulted write changes nothing"


def test_latency(sim, core, ns):
    core.read_namespaced_config_map("cm", ns)               # warm the connection
    started = time.monotonic()
    core.read_namespaced_config_map("cm", ns)
    baseline = time.monotonic() - started
    sim.add_fault(verb="get", resource="configmaps", latency=0.6, count=1)
    started = time.monotonic()
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    delayed = time.monotonic() - started
    assert delayed >= 0.6 and delayed > baseline
    started = time.monotonic()
    core.read_namespaced_config_map("cm", ns)
    assert time.monotonic() - started < 0.5


def test_latency_with_status(sim, core, ns):
    sim.add_fault(verb="list", resource="configmaps", latency=0.3, status=500, count=1)
    started = time.monotonic()
    fails_with(lambda: core.list_namespaced_config_map(ns), 500)
    assert time.monotonic() - started >= 0.3


def test_dropped_connection(sim, ns):
    # Without retries the client sees the connection error.
    no_retries = client.CoreV1Api(make_api(sim, retries=False))
    sim.add_fault(verb="get", resource="configmaps", drop=True, count=1)
    with pytest.raises((urllib3.exceptions.ProtocolError, urllib3.exceptions.MaxRetryError,
                        http.client.RemoteDisconnected)):
        no_retries.read_namespaced_config_map("cm", ns)
    assert no_retries.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    # Plain HTTP: the server closes without answering.
    sim.add_fault(verb="get", resource="configmaps", drop=True, count=1)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        raw_get(sim, f"/api/v1/namespaces/{ns}/configmaps/cm")


def test_dropped_connection_is_retried_by_urllib3_for_reads(sim, core, ns):
    # The client's urllib3 pool retries idempotent requests after a connection error (3 times by default).
    sim.add_fault(verb="get", resource="configmaps", drop=True, count=2)
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    assert sim.counters()["get configmaps"] == 3


def test_rate_with_seed_is_deterministic(sim, core, ns):
    def run() -> list[int]:
        rule = sim.add_fault(verb="get", resource="configmaps", namespace=ns, status=500, rate=0.3, seed=42)
        failed = []
        for i in range(50):
            try:
                core.read_namespaced_config_map("cm", ns)
            except ApiException as err:
                assert err.status == 500
                failed.append(i)
        fired = {r["id"]: r["fired"] for r in sim.admin("GET", "faults")["faults"]}[rule["id"]]
        assert fired == len(failed)
        sim.clear_faults()
        return failed

    first, second = run(), run()
    assert first == second
    assert 5 <= len(first) <= 25, len(first)       # about 30 % of 50
    assert sim.admin("GET", "counters?cluster=workload")["workload"]["faulted"]["get configmaps"] == 2 * len(first)
    sim.add_fault(verb="get", resource="configmaps", status=500, rate=0.0)
    assert all(core.read_namespaced_config_map("cm", ns) for _attempt in range(10))


def test_faults_scoped_by_cluster_verb_resource_and_namespace(sim, core, global_core, ns):
    sim.add_fault(cluster="global", verb="list", resource="configmaps", status=500)
    fails_with(lambda: global_core.list_namespaced_config_map("default"), 500)
    assert global_core.list_namespace().items                                   # other resource
    assert core.list_namespaced_config_map(ns).items                            # other cluster
    sim.clear_faults()

    sim.add_fault(verb="patch", resource="configmaps", status=503)
    core.read_namespaced_config_map("cm", ns)                                   # other verb
    fails_with(lambda: core.patch_namespaced_config_map("cm", ns, {"data": {"v": "p"}}), 503)
    sim.clear_faults()

    sim.add_fault(namespace="faults-other", status=500)
    fails_with(lambda: core.read_namespaced_config_map("cm", "faults-other"), 500)
    fails_with(lambda: core.list_namespaced_config_map("faults-other"), 500)
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    assert core.list_config_map_for_all_namespaces().items                     # no namespace in the path
    sim.clear_faults()

    sim.add_fault(resource="pods/eviction", status=429, retryAfter=1)
    core.list_namespaced_pod(ns)                                                # pods itself unaffected
    err = fails_with(lambda: core.create_namespaced_pod_eviction("nope", ns, {"metadata": {"name": "nope"}}), 429)
    assert err.headers["Retry-After"] == "1"
    sim.clear_faults()

    sim.add_fault(verb="get", resource="configmaps", name="other-name", status=500)
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"     # other name


def test_list_and_delete_fault_rules(sim, core, ns):
    first = sim.add_fault(verb="get", resource="configmaps", status=500)
    second = sim.add_fault(verb="list", resource="pods", status=503, count=5, reason="ServiceUnavailable")
    assert first["id"] != second["id"]
    rules = sim.admin("GET", "faults")["faults"]
    assert [r["id"] for r in rules] == [first["id"], second["id"]]
    assert rules[1]["status"] == 503 and rules[1]["count"] == 5 and rules[1]["resource"] == "pods"
    fails_with(lambda: core.read_namespaced_config_map("cm", ns), 500)
    assert sim.admin("GET", "faults")["faults"][0]["fired"] == 1
    assert sim.admin("DELETE", f"faults/{first['id']}") == {"removed": 1}
    assert [r["id"] for r in sim.admin("GET", "faults")["faults"]] == [second["id"]]
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    assert sim.admin("DELETE", "faults/99999") == {"removed": 0}
    assert sim.admin("DELETE", "faults") == {"removed": 1}
    assert sim.admin("GET", "faults")["faults"] == []
    assert core.list_namespaced_pod(ns).kind == "PodList"


@pytest.mark.parametrize("spec", [
    {"verb": "get"},                                        # no action
    {"status": 500, "bogus": 1},                            # unknown field
    {"status": 500, "rate": 1.5},
    {"status": 500, "rate": "often"},
    {"status": "boom"},
    {"status": 999},
    {"status": 500, "count": 0},
    {"status": 429, "retryAfter": "soon"},
    {"latency": -1},
], ids=",".join)
def test_invalid_fault_specs_are_rejected_with_400(sim, core, ns, spec):
    code, body = admin_raw(sim, "POST", "faults", spec)
    assert code == 400, body
    assert body["kind"] == "Status" and body["reason"] == "BadRequest" and body["message"]
    assert sim.admin("GET", "faults")["faults"] == []
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"


def test_invalid_admin_body_is_rejected(sim):
    with pytest.raises(urllib.error.HTTPError) as err:
        sim.request("POST", "/_kubesim/faults", b"{not json", timeout=10)
    assert err.value.code == 400


# ------------------------------------------------------------------------------------------ recovery
def test_plain_client_retries_reads_that_carry_retry_after(sim, core, ns):
    # urllib3's default Retry (3 retries) honours Retry-After on 503 (and 429) for idempotent methods.
    sim.add_fault(verb="get", resource="configmaps", status=503, retryAfter=1, count=1)
    started = time.monotonic()
    assert core.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    assert time.monotonic() - started >= 1.0, "the client waits Retry-After before retrying"
    assert sim.counters()["get configmaps"] == 2
    # Without Retry-After the 503 reaches the caller.
    sim.add_fault(verb="get", resource="configmaps", status=503, count=1)
    fails_with(lambda: core.read_namespaced_config_map("cm", ns), 503)


def test_client_go_retries_recover_reads_after_a_503_burst(sim, ns):
    # client_go_retries: up to 10 retries of GETs answered 429/5xx with Retry-After (more than urllib3's 3).
    retrying = client.CoreV1Api(make_api(sim, client_go_retries=True))
    sim.add_fault(verb="get", resource="configmaps", status=503, retryAfter=0, count=5)
    assert retrying.read_namespaced_config_map("cm", ns).metadata.name == "cm"
    assert sim.counters()["get configmaps"] == 6
    assert sim.admin("GET", "faults")["faults"] == []


def test_retry_loop_recovers_writes_after_a_503_burst(sim, core, ns):
    sim.add_fault(verb="create", resource="configmaps", status=503, count=3)
    attempts = []

    def create():
        attempts.append(time.monotonic())
        return core.create_namespaced_config_map(ns, {"metadata": {"name": "after-burst"}})

    created = retry.on_error(retry.DEFAULT_BACKOFF, lambda err: getattr(err, "status", None) == 503, create)
    assert created.metadata.name == "after-burst" and len(attempts) == 4
    assert sim.counters()["create configmaps"] == 4
    assert sim.admin("GET", "counters?cluster=workload")["workload"]["faulted"] == {"create configmaps": 3}
    core.delete_namespaced_config_map("after-burst", ns)
