"""The native transport: the dynamic client's query names, JSON bodies, keep-alive, errors that `classify` reads as it
reads the kubernetes client's, Warning headers, and watch streams; against a small HTTP server in a thread."""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s import client as conn
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.kubeconfig import Connection
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.transport import (
    ApiError,
    Transport,
    TransportError,
    encode_body,
    encode_query,
    query_of,
)


# ------------------------------------------------------------------------------------------ pure
def test_dynamic_client_keywords_become_its_query_parameters():
    query = query_of({"label_selector": "app=a,tier!=db", "field_selector": "spec.nodeName=w1", "_continue": "tok", "limit": 500,
                      "dry_run": "All", "field_manager": "m", "force_conflicts": True, "resource_version": "7", "timeout_seconds": 30,
                      "allow_watch_bookmarks": True, "query_params": [("tailLines", 5)], "header_params": {"Accept": "text/plain"}})
    assert query == [("tailLines", 5), ("continue", "tok"), ("fieldSelector", "spec.nodeName=w1"), ("labelSelector", "app=a,tier!=db"),
                     ("limit", 500), ("resourceVersion", "7"), ("timeoutSeconds", 30), ("dryRun", "All"), ("fieldManager", "m"),
                     ("force", True), ("allowWatchBookmarks", True)]
    assert encode_query([("labelSelector", "app=a,tier!=db"), ("force", True)]) == "labelSelector=app%3Da%2Ctier%21%3Ddb&force=true"


def test_bodies_are_json_and_a_json_patch_that_is_not_a_list_is_a_strategic_merge_patch():
    assert encode_body("PATCH", {"a": 1}, "application/json-patch+json") == (b'{"a": 1}', "application/strategic-merge-patch+json")
    assert encode_body("PATCH", [{"op": "remove", "path": "/a"}], "application/json-patch+json")[1] == "application/json-patch+json"
    assert encode_body("PATCH", {"a": 1}, "application/apply-patch+yaml") == (b'{"a": 1}', "application/apply-patch+yaml")
    assert encode_body("GET", {"a": 1}, "application/json") == (None, "application/json")
    assert encode_body("POST", "raw", "text/plain") == (b"raw", "text/plain")


# ------------------------------------------------------------------------------------------ a server
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: list = []
    seen: list = []

    def log_message(self, *args):   # quiet
        pass

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append({"method": self.command, "path": self.path, "headers": self.headers, "body": self.rfile.read(length),
                          "port": self.client_address[1]})
        status, headers, body = self.answers.pop(0)
        if isinstance(body, list):   # a watch: JSON lines, chunked
            self.send_response(status)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in body:
                data = (json.dumps(line) + "\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
            return
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer


@pytest.fixture
def server():
    Handler.answers, Handler.seen = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, Handler
    httpd.shutdown()
    httpd.server_close()


def transport_for(httpd, **settings):
    return Transport(Connection(host="http://127.0.0.1:{0}".format(httpd.server_address[1]), **settings))


def test_requests_carry_credentials_impersonation_and_json_over_one_kept_alive_connection(server):
    httpd, handler = server
    handler.answers = [(200, [], {"kind": "ConfigMap"}), (200, [], {"items": []})]
    transport = transport_for(httpd, authorization="Bearer t", headers=[("Impersonate-Group", "a"), ("Impersonate-Group", "b")])
    created = transport.request("post", "/api/v1/namespaces/d/configmaps", body={"data": {"a": "1"}}, content_type="application/json",
                                _request_timeout=5, dry_run="All")
    listed = transport.request("get", "api/v1/configmaps", _request_timeout=5, label_selector="a=b", limit=500)
    assert json.loads(created.data) == {"kind": "ConfigMap"} and json.loads(listed.data) == {"items": []}
    first, second = handler.seen
    assert first["path"] == "/api/v1/namespaces/d/configmaps?dryRun=All" and json.loads(first["body"]) == {"data": {"a": "1"}}
    assert first["headers"]["Authorization"] == "Bearer t" and first["headers"].get_all("Impersonate-Group") == ["a", "b"]
    assert first["headers"]["Content-Type"] == "application/json" and first["headers"]["Accept"] == "application/json"
    assert second["path"] == "/api/v1/configmaps?labelSelector=a%3Db&limit=500"
    assert first["port"] == second["port"]   # the same connection


def test_an_error_answer_is_classified_as_the_kubernetes_clients_with_retry_after_and_warnings(server):
    httpd, handler = server
    status = {"kind": "Status", "reason": "TooManyRequests", "message": "slow down", "code": 429}
    handler.answers = [(429, [("Retry-After", "3")], status), (200, [("Warning", '299 - "deprecated api"'), ("Warning", '299 - "second"')], {})]
    transport = transport_for(httpd)
    with pytest.raises(ApiError) as caught:
        transport.request("get", "/api/v1/pods", _request_timeout=5)
    failure = conn.classify(caught.value)
    assert (failure.status, failure.reason, failure.message, failure.retryable, failure.retry_after) == (429, "TooManyRequests", "slow down", True, 3.0)
    assert conn.warnings_of(transport.request("get", "/api/v1/pods", _request_timeout=5)) == ["deprecated api", "second"]


def test_a_refused_connection_is_retryable_and_names_its_cause():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = Transport(Connection(host="http://127.0.0.1:{0}".format(port)))
    with pytest.raises(TransportError) as caught:
        transport.request("get", "/version", _request_timeout=5)
    failure = conn.classify(caught.value)
    assert failure.status == 0 and failure.reason == "ConnectionRefusedError" and failure.retryable


def test_a_tls_failure_is_not_retried(server):
    httpd, _handler = server
    transport = Transport(Connection(host="https://127.0.0.1:{0}".format(httpd.server_address[1])))   # TLS to a plain HTTP server
    with pytest.raises(Exception) as caught:
        transport.request("get", "/version", _request_timeout=5)
    failure = conn.classify(caught.value)
    assert failure.reason == "TLSError" and not failure.retryable


def test_watch_events_are_json_lines_and_an_error_event_raises_as_the_kubernetes_watch_does(server):
    httpd, handler = server
    added = {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "5"}}}
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}}
    handler.answers = [(200, [], [added, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "6"}}}]), (200, [], [added, gone])]
    transport = transport_for(httpd)
    events = list(transport.watch_events("/api/v1/pods", query_of({"resource_version": "4", "timeout_seconds": 3, "watch": True}), 3))
    assert [(e["type"], e["raw_object"]["metadata"]["resourceVersion"]) for e in events] == [("ADDED", "5"), ("BOOKMARK", "6")]
    assert handler.seen[0]["path"] == "/api/v1/pods?resourceVersion=4&timeoutSeconds=3&watch=true"
    with pytest.raises(ApiError) as caught:
        list(transport.watch_events("/api/v1/pods", [("watch", True)], 3))
    assert conn.classify(caught.value).status == 410 and caught.value.reason == "Expired: too old resource version"


def test_a_request_without_certificate_verification_warns_as_urllib3_does(server):
    from urllib3.exceptions import InsecureRequestWarning
    httpd, _handler = server
    transport = Transport(Connection(host="https://127.0.0.1:{0}".format(httpd.server_address[1]), verify_ssl=False))
    with pytest.warns(InsecureRequestWarning, match="Unverified HTTPS request"):
        with pytest.raises(Exception):   # a plain HTTP server: the handshake fails after the warning
            transport.request("get", "/version", _request_timeout=5)
