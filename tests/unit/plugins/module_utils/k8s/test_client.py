"""The connection layer with a fake client: retries on 429 (honouring Retry-After), 5xx and dropped
connections, bounded by api_timeout; no retry on 403 or TLS errors; pagination with limit/continue and a
restart on 410; discovery by kind and group with one refresh; errors that carry the API reason."""
from __future__ import annotations

from http.client import RemoteDisconnected

import pytest
import urllib3

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s import client as conn
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, KindNotServed

from ..fake_api import NODE, RP, VMI, FakeApi, FakeResources, Response, connect, resource, status_error


# ------------------------------------------------------------------------------------------ arg spec
def test_argument_spec_reuses_kubernetes_core_auth_options_with_secrets_hidden():
    spec = conn.connection_argument_spec()
    assert set(AUTH_ARG_SPEC) <= set(spec)
    assert spec["api_key"]["no_log"] and spec["password"]["no_log"]
    assert spec["api_retries"] == {"type": "int", "default": 5} and spec["api_timeout"] == {"type": "int", "default": 120}
    spec["kubeconfig"]["type"] = "changed"
    assert AUTH_ARG_SPEC["kubeconfig"]["type"] == "raw"    # a deep copy


def test_auth_params_pick_only_auth_options():
    params = {"kubeconfig": "/k", "context": "workload", "api_retries": 3, "namespaces": ["a"]}
    auth = conn.auth_params(params)
    assert auth["kubeconfig"] == "/k" and auth["context"] == "workload" and "api_retries" not in auth and set(auth) == set(AUTH_ARG_SPEC)


@pytest.mark.parametrize("retries, timeout, option", [(-1, 10, "api_retries"), (3, 0, "api_timeout")])
def test_bad_retry_options_name_the_option(retries, timeout, option):
    with pytest.raises(InvalidOption) as caught:
        conn.Client({}, retries=retries, timeout=timeout)
    assert caught.value.path == option and caught.value.message.startswith(option + ": must be")


def test_client_creation_errors_name_the_connection_option():
    def factory(**auth):
        raise CoreException("Could not create API client: Invalid kube-config file. No configuration found.")
    connection = conn.Client({}, client_factory=factory)
    with pytest.raises(InvalidOption) as caught:
        connection.server_version()
    assert caught.value.path == "kubeconfig" and "No configuration found" in caught.value.message and "K8S_AUTH_" in caught.value.message


# ------------------------------------------------------------------------------------------ retries
def test_429_with_retry_after_is_honoured():
    api = FakeApi(script=[status_error(429, "TooManyRequests", "slow down", retry_after=3), {"gitVersion": "v1.35.0"}])
    connection, clock = connect(api)
    assert connection.server_version() == {"gitVersion": "v1.35.0"}
    assert clock.sleeps == [3.0]
    assert connection.retried == [{"request": "get /version", "status": 429, "reason": "TooManyRequests", "wait": 3.0}]


def test_retry_after_seconds_in_the_status_details():
    api = FakeApi(script=[status_error(429, "TooManyRequests", details={"retryAfterSeconds": 2}), {}])
    connection, clock = connect(api)
    connection.server_version()
    assert clock.sleeps == [2.0]


def test_5xx_and_dropped_connections_back_off_exponentially():
    dropped = urllib3.exceptions.ProtocolError("Connection aborted.", RemoteDisconnected("Remote end closed connection without response"))
    refused = urllib3.exceptions.MaxRetryError(None, "/version", urllib3.exceptions.NewConnectionError(None, "Connection refused"))
    api = FakeApi(script=[status_error(503, "ServiceUnavailable"), status_error(500, "InternalError"), dropped, refused,
                          status_error(504, "Timeout"), {"gitVersion": "v1.35.0"}])
    connection, clock = connect(api)
    assert connection.server_version()["gitVersion"] == "v1.35.0"
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert [r["status"] for r in connection.retried] == [503, 500, 0, 0, 504]


def test_refused_connections_are_retried_until_the_deadline_whatever_api_retries_says():
    refused = urllib3.exceptions.MaxRetryError(None, "/version", urllib3.exceptions.NewConnectionError(None, "Connection refused"))
    api = FakeApi(script=[refused] * 6 + [{"gitVersion": "v1.35.0"}])   # an API server restarting for about 25 s
    connection, clock = connect(api, retries=2, timeout=120)
    assert connection.server_version()["gitVersion"] == "v1.35.0"
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0]
    gone = FakeApi(script=[refused] * 40)   # gone for longer than api_timeout: the last answer, with the fix
    connection, clock = connect(gone, retries=2, timeout=30)
    with pytest.raises(ApiFailure) as caught:
        connection.server_version()
    assert caught.value.status == 0 and sum(clock.sleeps) < 30 and "api_timeout" in caught.value.message


def test_gives_up_after_api_retries_with_the_api_reason():
    api = FakeApi(script=[status_error(503, "ServiceUnavailable", "etcd is down")] * 3)
    connection, _clock = connect(api, retries=2)
    with pytest.raises(ApiFailure) as caught:
        connection.server_version()
    error = caught.value
    assert error.status == 503 and error.reason == "ServiceUnavailable" and error.attempts == 3
    assert error.message.startswith("get /version: 503 ServiceUnavailable: etcd is down (gave up after 3 attempts).")
    assert "api_retries" in error.message


def test_no_retry_on_forbidden():
    api = FakeApi(script=[status_error(403, "Forbidden", 'virtualmachineinstances.kubevirt.io is forbidden: User "dev" cannot list')])
    connection, clock = connect(api)
    with pytest.raises(ApiFailure) as caught:
        connection.list(VMI)
    assert caught.value.status == 403 and clock.sleeps == []
    assert caught.value.message.startswith("list virtualmachineinstances.kubevirt.io: 403 Forbidden: virtualmachineinstances")
    assert "RBAC" in caught.value.message


def test_no_retry_on_tls_errors():
    tls = urllib3.exceptions.MaxRetryError(None, "/version", urllib3.exceptions.SSLError("certificate verify failed"))
    connection, clock = connect(FakeApi(script=[tls]))
    with pytest.raises(ApiFailure) as caught:
        connection.server_version()
    assert caught.value.reason == "TLSError" and clock.sleeps == []


def test_retries_stop_at_the_deadline():
    api = FakeApi(script=[status_error(429, "TooManyRequests", retry_after=30)] * 2)
    connection, clock = connect(api, timeout=20)
    with pytest.raises(ApiFailure) as caught:
        connection.server_version()
    assert clock.sleeps == [] and "would pass api_timeout (20s)" in caught.value.message


def test_deadline_used_up_by_earlier_waits():
    api = FakeApi(script=[status_error(429, "TooManyRequests", retry_after=9)] * 10)
    connection, clock = connect(api, retries=10, timeout=20)
    with pytest.raises(ApiFailure):
        connection.server_version()
    assert clock.sleeps == [9.0, 9.0]


def test_other_exceptions_are_not_swallowed():
    api = FakeApi(script=[KeyError("bug")])
    connection, _clock = connect(api)
    with pytest.raises(KeyError):
        connection.server_version()


@pytest.mark.parametrize("value, expected", [("5", 5.0), ("0.5", 0.5), ("-3", 0.0), (None, None), ("soon", None),
                                             ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0)])
def test_parse_retry_after(value, expected):
    now = 1445412480.0   # 2015-10-21T07:28:00Z
    assert conn.parse_retry_after(value, now=now) == expected


# ------------------------------------------------------------------------------------------ lists
def paged(items, page_size_seen):
    def answer(path, params):
        page_size_seen.append(params["limit"])
        start = int(params.get("_continue") or 0)
        end = start + params["limit"]
        return {"items": items[start:end], "metadata": {"continue": str(end) if end < len(items) else ""}}
    return answer


def test_list_follows_continue_tokens_with_selectors():
    items = [{"metadata": {"name": "vm-{0}".format(i)}} for i in range(7)]
    limits = []
    api = FakeApi(default=paged(items, limits))
    connection, _clock = connect(api, page_size=3)
    assert connection.list(VMI, namespace="prod", label_selector="app=db", field_selector="status.phase=Running") == items
    assert len(api.calls) == 3 and limits == [3, 3, 3]
    path, params = api.calls[1]
    assert path == "/apis/kubevirt.io/v1/namespaces/prod/virtualmachineinstances"
    assert params == {"limit": 3, "label_selector": "app=db", "field_selector": "status.phase=Running", "_continue": "3"}


def test_a_failed_page_is_retried_alone():
    items = [{"metadata": {"name": str(i)}} for i in range(4)]
    api = FakeApi(default=paged(items, []))
    connection, _clock = connect(api, page_size=2)
    api.script = [{"items": items[:2], "metadata": {"continue": "2"}}, status_error(503, "ServiceUnavailable")]
    assert connection.list(VMI) == items
    assert [c[1].get("_continue") for c in api.calls] == [None, "2", "2"]


def test_expired_continue_token_restarts_the_list_once():
    items = [{"metadata": {"name": str(i)}} for i in range(4)]
    api = FakeApi(default=paged(items, []))
    connection, _clock = connect(api, page_size=2)
    api.script = [{"items": items[:2], "metadata": {"continue": "2"}},
                  status_error(410, "Expired", "The provided continue parameter is too old")]
    assert connection.list(VMI) == items
    assert [c[1].get("_continue") for c in api.calls] == [None, "2", None, "2"]


def test_cluster_scoped_list_ignores_namespace():
    api = FakeApi()
    connection, _clock = connect(api)
    connection.list(NODE, namespace="prod")
    assert api.calls[0][0] == "/api/v1/nodes"


def test_404_on_a_collection_is_empty_when_the_kind_is_still_served():
    api = FakeApi(script=[status_error(404, "NotFound", 'namespaces "gone" not found')])
    connection, _clock = connect(api)
    assert connection.list(VMI, namespace="gone") == []
    assert api.resources.invalidations == 1


def test_404_on_a_collection_of_a_kind_gone_since_discovery():
    api = FakeApi(script=[status_error(404, "NotFound")], cached=(VMI, NODE, RP), served=(VMI, NODE))
    connection, _clock = connect(api)
    assert connection.list_kind("ResourcePatch") is None


# ------------------------------------------------------------------------------------------ discovery
def test_find_kinds_by_kind_in_any_group_and_refresh_once():
    api = FakeApi(cached=(VMI, NODE), served=(VMI, NODE, RP))
    connection, _clock = connect(api)
    found = connection.find_kinds([("VirtualMachineInstance", "kubevirt.io"), ("ResourcePatch", None), ("ModuleInfo", None)])
    assert found[("VirtualMachineInstance", "kubevirt.io")] is VMI
    assert found[("ResourcePatch", None)] is RP          # installed since the cache was written
    assert found[("ModuleInfo", None)] is None
    assert connection.find_kind("ModuleInfo") is None
    assert api.resources.invalidations == 1


def test_no_refresh_when_every_kind_is_cached():
    api = FakeApi()
    connection, _clock = connect(api)
    assert connection.find_kind("Node", "") is NODE
    assert api.resources.invalidations == 0


def test_kind_in_the_wrong_group_is_not_found_and_preferred_version_wins():
    old = resource("VirtualMachineInstance", "virtualmachineinstances", "kubevirt.io", "v1alpha3", preferred=False)
    api = FakeApi(cached=(old, VMI), served=(old, VMI))
    connection, _clock = connect(api)
    assert connection.find_kind("VirtualMachineInstance") is VMI
    assert connection.find_kind("VirtualMachineInstance", "example.com") is None


def test_require_kind_raises_kind_not_served():
    connection, _clock = connect(FakeApi())
    with pytest.raises(KindNotServed) as caught:
        connection.require_kind("ModuleInfo", fix="Point context at the ACP global cluster.")
    assert caught.value.message == ("the server doesn't serve the kind ModuleInfo. Point context at the ACP global cluster.")


def test_discovery_failures_are_retried():
    api = FakeApi()
    calls = []
    original = api.resources.__class__.__iter__

    def flaky(self):
        calls.append(1)
        if len(calls) == 1:
            raise status_error(503, "ServiceUnavailable")
        return original(self)
    api.resources.__class__ = type("Flaky", (FakeResources,), {"__iter__": flaky})
    connection, clock = connect(api)
    assert connection.find_kind("Node") is NODE and clock.sleeps == [0.5]


class DiscoveryTree(FakeResources):
    """FakeResources with the LazyDiscoverer's cached tree: group versions whose resources were not read yet."""

    def __init__(self, cached, served, fetched):
        super().__init__(cached, served)
        group_version = type("ResourceGroup", (), {})
        empty, read = group_version(), group_version()
        empty.resources, read.resources = {}, {"Node": [NODE]}
        self.tree = {"api": {"": {"v1": read if fetched else empty}},
                     "apis": {"": {"v1": type("ResourceGroup", (), {"resources": {"List": []}})()}, "kubevirt.io": {"v1": empty}}}

    def parse_api_groups(self, request_resources=False, update=False):
        assert request_resources is False and update is False
        return self.tree


def test_a_run_without_a_discovery_cache_reads_discovery_once_and_caches_the_negative_lookup():
    api = FakeApi()
    api.resources = DiscoveryTree(cached=(VMI, NODE), served=(VMI, NODE), fetched=False)
    connection, _clock = connect(api)
    assert connection.find_kinds([("VirtualMachineInstance", "kubevirt.io"), ("ModuleInfo", None)])[("ModuleInfo", None)] is None
    assert connection.find_kind("KubeDescheduler") is None and connection.list_kind("ModuleInfo") is None
    assert api.resources.invalidations == 0     # every group version was read in this run: nothing to refresh


def test_a_run_from_a_discovery_cache_refreshes_once_for_missing_kinds():
    api = FakeApi()
    api.resources = DiscoveryTree(cached=(VMI, NODE), served=(VMI, NODE, RP), fetched=True)
    connection, _clock = connect(api)
    assert connection.find_kind("ModuleInfo") is None and connection.find_kind("ResourcePatch") is RP
    assert connection.find_kind("KubeDescheduler") is None
    assert api.resources.invalidations == 1


class WritingApi(FakeApi):
    """FakeApi that also takes writes: each answers `answer` (a body, or an exception) and is recorded."""

    def __init__(self, answer):
        super().__init__()
        self.answer, self.writes = answer, []

    def request(self, method, path, serialize=True, _request_timeout=None, **params):
        if method == "get":
            return super().request(method, path, serialize=serialize, _request_timeout=_request_timeout, **params)
        self.writes.append((method, path, params.get("dry_run")))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return Response(self.answer)


CONFIGMAP = resource("ConfigMap", "configmaps")


def test_replace_and_delete_name_the_request_as_the_caller_says_in_errors():
    api = WritingApi(status_error(422, "Invalid", 'ConfigMap "cm" is invalid: []: Too long: must have at most 1048576 bytes'))
    connection, _clock = connect(api)
    body = {"metadata": {"name": "cm", "namespace": "ns", "resourceVersion": "42"}, "data": {}}
    with pytest.raises(ApiFailure) as default:
        connection.replace(CONFIGMAP, body, "ns", dry_run=True)
    assert default.value.path == "update configmaps ns/cm" and default.value.status == 422
    with pytest.raises(ApiFailure) as named:
        connection.replace(CONFIGMAP, body, "ns", dry_run=True, request="update configmap ns/cm")
    assert named.value.path == "update configmap ns/cm" and "Too long" in named.value.message
    api.answer = status_error(500, "InternalError", "boom")
    with pytest.raises(ApiFailure) as deleted:
        connect(api, retries=0)[0].delete(RP, "rp-a", "ns", request="delete resourcepatch ns/rp-a")
    assert deleted.value.path == "delete resourcepatch ns/rp-a"
    assert [(method, dry_run) for method, _path, dry_run in api.writes] == [("put", "All"), ("put", "All"), ("delete", None)]


def test_replace_answers_the_stored_object():
    api = WritingApi({"metadata": {"name": "cm", "resourceVersion": "43"}})
    connection, _clock = connect(api)
    stored = connection.replace(CONFIGMAP, {"metadata": {"name": "cm", "resourceVersion": "42"}}, "ns", request="update configmap ns/cm")
    assert stored["metadata"]["resourceVersion"] == "43" and api.writes == [("put", "/api/v1/namespaces/ns/configmaps/cm", None)]


# ------------------------------------------------------------------------------------------ GETs outside the resource verbs
def test_get_path_sends_its_query_parameters_and_decodes_the_answer():
    api = FakeApi(script=[{"status": "success"}])
    connection, _clock = connect(api)
    answer = connection.get_path("/api/v1/namespaces/m/services/p:9090/proxy/api/v1/query", "query p", query_params=[("query", "up")])
    assert answer == {"status": "success"}
    assert api.calls == [("/api/v1/namespaces/m/services/p:9090/proxy/api/v1/query", {"query_params": [("query", "up")]})]


class Answer:
    def __init__(self, status, data, reason="", headers=None):
        self.status, self.data, self.reason, self.headers = status, data, reason, headers or {}


class Pool:
    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []

    def request(self, method, url, headers=None, redirect=True, retries=None, timeout=None, preload_content=True):
        self.requests.append({"method": method, "url": url, "headers": headers, "redirect": redirect, "retries": retries, "timeout": timeout})
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def pool_client(pool, retries=5):
    connection, clock = connect(FakeApi(), retries=retries)
    connection._http_pool_factory = lambda url: pool   # pylint: disable=protected-access
    return connection, clock


def test_http_get_json_does_not_follow_redirects_and_keeps_headers_out_of_errors():
    pool = Pool(Answer(200, b'{"ok": true}'))
    connection, _clock = pool_client(pool)
    assert connection.http_get_json("https://p.example/api/v1/query", "query p", [("query", "a b")], {"Authorization": "Bearer t0k"}) == {"ok": True}
    sent = pool.requests[0]
    assert sent["url"] == "https://p.example/api/v1/query?query=a+b" and sent["redirect"] is False and sent["retries"] is False
    assert sent["headers"] == {"Authorization": "Bearer t0k"} and 0 < sent["timeout"] <= 120
    pool = Pool(Answer(403, b'{"error": "denied"}', "Forbidden"))
    connection, _clock = pool_client(pool)
    with pytest.raises(ApiFailure) as caught:
        connection.http_get_json("https://p.example/api/v1/query", "query p", headers={"Authorization": "Bearer t0k"})
    assert caught.value.status == 403 and caught.value.path == "query p" and "t0k" not in caught.value.message
    assert conn.failure_body(caught.value) == {"error": "denied"} and len(pool.requests) == 1


def test_http_get_json_retries_5xx_with_retry_after_and_dropped_connections():
    pool = Pool(Answer(503, b"busy", "Service Unavailable", {"Retry-After": "2"}), urllib3.exceptions.ProtocolError("reset"), Answer(200, b"[1]"))
    connection, clock = pool_client(pool)
    assert connection.http_get_json("http://p.example/x", "get x") == [1]
    assert clock.sleeps == [2.0, 1.0] and [r["status"] for r in connection.retried] == [503, 0]


def test_http_get_json_that_is_not_json_says_so():
    connection, _clock = pool_client(Pool(Answer(200, b"<html>login</html>")))
    with pytest.raises(ApiFailure) as caught:
        connection.http_get_json("http://p.example/x", "get x")
    assert caught.value.reason == "NotJSON" and "<html>login" in caught.value.message


def test_failure_body_without_an_answer_is_none():
    assert conn.failure_body(ApiFailure("get x", 0, "ConnectionError", "refused")) is None


def test_tls_options_trust_the_system_and_the_cluster_ca_unless_verification_is_off(tmp_path, monkeypatch):
    loaded = []
    monkeypatch.setattr(conn.ssl.SSLContext, "load_verify_locations", lambda self, cafile=None, **kw: loaded.append(cafile))
    configuration = type("Configuration", (), {"verify_ssl": True, "ssl_ca_cert": str(tmp_path / "ca.crt")})()
    options = conn.tls_options(configuration)
    assert options["ssl_context"].verify_mode == conn.ssl.CERT_REQUIRED and loaded == [str(tmp_path / "ca.crt")]
    assert conn.tls_options(None)["ssl_context"].check_hostname is True
    configuration.verify_ssl = False
    assert conn.tls_options(configuration) == {"cert_reqs": "CERT_NONE", "assert_hostname": False}


# ------------------------------------------------------------------------------------------ PUT of an aggregated API's subresource
class NoBodyApi(WritingApi):
    """Answers writes as virt-api answers a subresource PUT: 200 with no body."""

    def request(self, method, path, serialize=True, _request_timeout=None, **params):
        if method == "get":
            return super().request(method, path, serialize=serialize, _request_timeout=_request_timeout, **params)
        self.writes.append((method, path, params.get("body")))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return type("Answer", (), {"data": b"", "headers": {}})()


def test_put_path_sends_the_body_and_answers_none_for_an_empty_answer_and_names_the_request_in_errors():
    path = "/apis/subresources.kubevirt.io/v1/namespaces/vms/virtualmachineinstances/vm-1/evacuate/cancel"
    api = NoBodyApi(None)
    connection, _clock = connect(api)
    assert connection.put_path(path, {"evacuationNodeName": "worker-1"}, "cancel the evacuation of vmi vms/vm-1") is None
    assert api.writes == [("put", path, {"evacuationNodeName": "worker-1"})]
    api.answer = status_error(400, "BadRequest", 'Node "worker-1" has NodeDrainTaintKey "kubevirt.io/drain:NoSchedule"')
    with pytest.raises(ApiFailure) as refused:
        connection.put_path(path, {}, "cancel the evacuation of vmi vms/vm-1")
    assert refused.value.path == "cancel the evacuation of vmi vms/vm-1" and refused.value.status == 400 and len(api.writes) == 2


# ------------------------------------------------------------------------------------------ native client or kubernetes.core's
def test_the_native_client_serves_the_options_it_reads_and_kubernetes_core_the_rest(monkeypatch):
    api = FakeApi(script=[{"gitVersion": "v1.35.0"}, {"gitVersion": "v1.35.0"}])
    native_client = type("NativeClient", (), {"client": api, "configuration": type("Connection", (), {"host": "https://native"})()})()
    core_client = type("K8SClient", (), {"client": api})()
    made = []

    def native_connect(auth, request_timeout):
        made.append(("native", auth["kubeconfig"]))
        if auth["kubeconfig"] == "/exec-plugin":
            raise conn.NotNative("credential plugins")
        assert request_timeout() > 0
        return native_client
    monkeypatch.setattr(conn.native, "connect", native_connect)
    monkeypatch.setattr(conn, "kubernetes_core_client", lambda **auth: made.append(("kubernetes.core", auth["kubeconfig"])) or core_client)
    native = conn.Client({"kubeconfig": "/plain"})
    assert native.server_version() == {"gitVersion": "v1.35.0"} and native.server_host() == "https://native"
    fallback = conn.Client({"kubeconfig": "/exec-plugin"})
    assert fallback.server_version() == {"gitVersion": "v1.35.0"} and fallback.client is core_client
    assert made == [("native", "/plain"), ("native", "/exec-plugin"), ("kubernetes.core", "/exec-plugin")]
