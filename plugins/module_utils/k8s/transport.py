# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP to the API server with the standard library, shaped as the kubernetes dynamic client's `request`.

- Keep-alive connections (a small pool, so that watches in threads and requests in the caller's thread do not
  share one), TLS as the kubernetes client sets it up (the connection's CA, or the system's; a client certificate;
  verification off with `insecure-skip-tls-verify`/`validate_certs: false`; tls-server-name for SNI and the
  certificate check).
- The dynamic client's keyword arguments become the same query parameters (`label_selector` -> `labelSelector`,
  `_continue` -> `continue`, `dry_run` -> `dryRun`, ...), bodies are JSON as the kubernetes client sends them.
- An answer other than 2xx raises `ApiError` (status, reason, body, headers: what the client's ApiException
  carries); a connection that fails before an answer raises `TransportError` (a ConnectionError, retried by the
  caller); TLS errors are `ssl.SSLError` as they are (never retried).
- `watch_events` reads a watch's JSON lines; an ERROR event raises `ApiError` as the kubernetes client's Watch does.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import shutil
import ssl
import tempfile
import threading
import urllib.parse
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.kubeconfig import Connection

# The dynamic client's keyword arguments and the query parameters they become, in its order.
QUERY_NAMES = (
    ("pretty", "pretty"), ("_continue", "continue"), ("include_uninitialized", "includeUninitialized"),
    ("field_selector", "fieldSelector"), ("label_selector", "labelSelector"), ("limit", "limit"),
    ("resource_version", "resourceVersion"), ("resource_version_match", "resourceVersionMatch"),
    ("timeout_seconds", "timeoutSeconds"), ("watch", "watch"), ("grace_period_seconds", "gracePeriodSeconds"),
    ("propagation_policy", "propagationPolicy"), ("orphan_dependents", "orphanDependents"), ("dry_run", "dryRun"),
    ("field_manager", "fieldManager"), ("force_conflicts", "force"), ("allow_watch_bookmarks", "allowWatchBookmarks"),
    ("send_initial_events", "sendInitialEvents"),
)
USER_AGENT = "kubevirt_ops.rebalance"
BODY_METHODS = frozenset(("POST", "PUT", "PATCH", "OPTIONS", "DELETE"))
WATCH_READ_MARGIN = 60   # seconds a watch may stay silent past its timeoutSeconds before the connection counts as lost


class ApiError(Exception):
    """An answer other than 2xx: what kubernetes.client's ApiException carries (status, reason, body, headers)."""

    def __init__(self, status: int = 0, reason: str = "", body: Any = None, headers: Any = None) -> None:
        super().__init__("({0}) Reason: {1}".format(status, reason))
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers


class TransportError(ConnectionError):
    """The connection failed before an answer (refused, reset, timed out, name not resolved); `kind` names the cause."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.kind = type(cause).__name__


class Response:
    """An answer: `status`, `reason`, `headers` (an http.client.HTTPMessage), `data` (the body's bytes)."""

    def __init__(self, status: int, reason: str, headers: Any, data: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.data = data

    def getheaders(self) -> Any:
        return self.headers


def query_of(params: Dict[str, Any]) -> List[Tuple[str, Any]]:
    """The query of a dynamic client call: `query_params` (a list of pairs) followed by the named parameters."""
    query = list(params.get("query_params") or [])
    query.extend((name, params[keyword]) for keyword, name in QUERY_NAMES if params.get(keyword) is not None)
    return query


def encode_query(query: Sequence[Tuple[str, Any]]) -> str:
    """As the kubernetes client encodes a query: booleans as true/false, values quoted."""
    return "&".join("{0}={1}".format(name, urllib.parse.quote(str(value).lower() if isinstance(value, bool) else str(value)))
                    for name, value in query)


def encode_body(method: str, body: Any, content_type: str) -> Tuple[Optional[bytes], str]:
    """The body and Content-Type as the kubernetes client sends them: JSON for structured bodies (also for
    apply-patch+yaml: JSON is YAML), strings as they are; a json-patch that is not a list is a strategic merge patch."""
    if method not in BODY_METHODS:
        return None, content_type
    if content_type == "application/json-patch+json" and not isinstance(body, list):
        content_type = "application/strategic-merge-patch+json"
    if isinstance(body, bytes):
        return body, content_type
    if isinstance(body, str):
        return body.encode("utf-8"), content_type
    return (None if body is None else json.dumps(body).encode("utf-8")), content_type


def ssl_context(connection: Connection) -> ssl.SSLContext:
    """TLS as the kubernetes client sets it up over urllib3: the connection's CA only when it has one, else the
    system's; no verification when it is turned off; the client certificate. Files that cannot be loaded are an
    ssl.SSLError, as urllib3 reports them (a TLS problem: not retried)."""
    try:
        return _context_of(connection)
    except ssl.SSLError:
        raise
    except (OSError, ValueError) as error:
        raise ssl.SSLError("cannot load the TLS certificates of the connection: {0}".format(error)) from error


def _context_of(connection: Connection) -> ssl.SSLContext:
    if connection.verify_ssl:
        context = ssl.create_default_context(cafile=connection.ssl_ca_cert,
                                             cadata=connection.ssl_ca_data.decode("ascii", "replace") if connection.ssl_ca_data else None)
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if connection.cert_file or connection.cert_data:
        _load_client_certificate(context, connection)
    return context


def _load_client_certificate(context: ssl.SSLContext, connection: Connection) -> None:
    """ssl loads a certificate only from files: -data fields go through a private temporary folder, removed at once."""
    folder = None
    try:
        cert_file, key_file = connection.cert_file, connection.key_file
        if connection.cert_data or connection.key_data:
            folder = tempfile.mkdtemp(prefix="kubevirt-ops-tls-")
            if connection.cert_data:
                cert_file = _write_private(folder, "cert.pem", connection.cert_data)
            if connection.key_data:
                key_file = _write_private(folder, "key.pem", connection.key_data)
        context.load_cert_chain(cert_file, key_file)
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def _write_private(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    return path


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS with a server name for SNI and the certificate check other than the host connected to (tls-server-name)."""

    def __init__(self, host: str, port: Optional[int], timeout: Optional[float], context: ssl.SSLContext, server_name: Optional[str]) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context = context
        self._server_name = server_name or host

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self._server_name)


class Transport:
    """Requests to one API server with the connection's credentials and headers, over kept-alive connections."""

    def __init__(self, connection: Connection) -> None:
        self.configuration = connection
        url = urllib.parse.urlsplit(connection.host)
        self._https = url.scheme == "https"
        self._hostname = url.hostname or ""
        self._port = url.port
        self._prefix = url.path.rstrip("/")
        self._context: Optional[ssl.SSLContext] = None
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._headers = [("User-Agent", USER_AGENT)] + list(connection.headers)
        if connection.authorization:
            self._headers.append(("Authorization", connection.authorization))

    # ------------------------------------------------------------------------------------ connections
    def _open(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if not self._https:
            return http.client.HTTPConnection(self._hostname, self._port, timeout=timeout)
        with self._lock:
            if self._context is None:
                self._context = ssl_context(self.configuration)
        return _HTTPSConnection(self._hostname, self._port, timeout, self._context, self.configuration.tls_server_name)

    def _take(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        """An idle connection the server has not closed meanwhile (as urllib3 checks), or a new one."""
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._open(timeout)
            if connection.sock is not None and not select.select([connection.sock], [], [], 0)[0]:
                connection.timeout = timeout
                connection.sock.settimeout(timeout)
                return connection
            connection.close()

    def _give_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(connection)

    # ------------------------------------------------------------------------------------ requests
    def _start(self, method: str, path: str, query: Sequence[Tuple[str, Any]], headers: Sequence[Tuple[str, str]],
               body: Optional[bytes], timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request and read the answer's head; the connection and the response."""
        target = self._prefix + (path if path.startswith("/") else "/" + path) + ("?" + encode_query(query) if query else "")
        if self._https and not self.configuration.verify_ssl:
            _warn_unverified(self._hostname)
        connection: Optional[http.client.HTTPConnection] = None
        try:
            connection = self._take(timeout)
            connection.putrequest(method, target, skip_accept_encoding=True)
            for name, value in list(self._headers) + list(headers):
                connection.putheader(name, value)
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            return connection, connection.getresponse()
        except ssl.SSLError:
            if connection is not None:
                connection.close()
            raise
        except (OSError, http.client.HTTPException) as error:
            if connection is not None:
                connection.close()
            raise TransportError(error) from error

    def request(self, method: str, path: str, body: Any = None, content_type: Optional[str] = None, serialize: bool = False,
                _request_timeout: Optional[float] = None, **params: Any) -> Response:
        """One round trip with the dynamic client's arguments (`serialize` is always off here: bodies are dicts); the
        answer, `ApiError` for one other than 2xx."""
        del serialize
        method = method.upper()
        header_params = dict(params.get("header_params") or {})
        if not any(name.lower() == "accept" for name in header_params):
            header_params["Accept"] = "application/json"
        payload, header_params["Content-Type"] = encode_body(method, body, content_type or "application/json")
        connection, response = self._start(method, path, query_of(params), list(header_params.items()), payload, _request_timeout)
        try:
            data = response.read()
        except ssl.SSLError:
            connection.close()
            raise
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            raise TransportError(error) from error
        if response.will_close:
            connection.close()
        else:
            self._give_back(connection)
        if not 200 <= response.status <= 299:
            raise ApiError(response.status, response.reason, data, response.headers)
        return Response(response.status, response.reason, response.headers, data)

    def watch_events(self, path: str, query: Sequence[Tuple[str, Any]], timeout: Optional[int]) -> Iterator[dict]:
        """The events of a watch (`{"type", "object", "raw_object"}`; `query` has watch=true and timeoutSeconds=`timeout`)
        until the server ends it, on a connection of its own; an ERROR event raises ApiError(code, "Reason: message") as
        the kubernetes client's Watch does."""
        read_timeout = timeout + WATCH_READ_MARGIN if timeout else None
        connection, response = self._start("GET", path, query, [("Accept", "application/json")], None, read_timeout)
        try:
            if not 200 <= response.status <= 299:
                raise ApiError(response.status, response.reason, response.read(), response.headers)
            for line in _lines(response):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError(status.get("code") or 0, "{0}: {1}".format(status.get("reason"), status.get("message")))
                event["raw_object"] = event.get("object")
                yield event
        finally:
            connection.close()


def _warn_unverified(host: str) -> None:
    """What urllib3 says of every request without certificate verification, with its warning class (urllib3 is
    imported only for this: a connection that turned verification off)."""
    try:
        from urllib3.exceptions import InsecureRequestWarning as category
    except ImportError:
        category = UserWarning
    warnings.warn("Unverified HTTPS request is being made to host '{0}'. Adding certificate verification is strongly advised. "
                  "See: https://urllib3.readthedocs.io/en/latest/advanced-usage.html#tls-warnings".format(host), category)


def _lines(response: http.client.HTTPResponse) -> Iterator[str]:
    """The non-empty lines of a streamed answer; a connection lost midway is a TransportError."""
    while True:
        try:
            line = response.readline()
        except ssl.SSLError:
            raise
        except (OSError, http.client.HTTPException) as error:
            raise TransportError(error) from error
        if not line:
            return
        text = line.decode("utf-8", "replace").strip()
        if text:
            yield text
