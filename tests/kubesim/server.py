"""The HTTP layer: Kubernetes REST paths for several clusters on one port, content negotiation (JSON,
Table, protobuf request bodies), watch streams, warnings, faults, outages (the listener closed and opened again,
outage.py), and the `/_kubesim/` admin endpoint.

Cluster routing: `/clusters/<name>/...` addresses a cluster by name; paths without that prefix address the
default cluster (`workload`)."""
from __future__ import annotations

import json
import queue
import selectors
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from . import conversion, discovery, errors, kubeconfig, openapi
from . import listoptions, negotiation, tables, watchlist
from .api import PATCH_TYPES, Cluster, RequestContext
from .errors import ApiError
from .faults import Faults
from .kubevirt import subresources as kubevirt_api
from .metrics import api as metrics_api, prometheus, usage as metrics_usage
from .outage import Busy, Outage
from .rbac import Attributes, Authorizer, User
from .resources import ResourceType
from .store import ERROR, encode
from .tls import identity

JSON = "application/json"


def _list_name(verb: str, query: dict) -> str:
    """The name a list or watch asks for, as the apiserver's RequestInfo resolver reads it (requestinfo.go): a
    fieldSelector that requires `metadata.name` to equal one valid path segment name, so that RBAC's resourceNames
    can allow a list or watch of that one object."""
    if verb not in ("list", "watch"):
        return ""
    for requirement in (query.get("fieldSelector") or "").split(","):
        field, sep, value = requirement.strip().partition("==") if "==" in requirement else requirement.strip().partition("=")
        if sep and not field.endswith("!") and field.strip() == "metadata.name":
            value = value.strip()
            if value not in (".", "..") and "/" not in value and "%" not in value:
                return value
    return ""


class Route:
    """What a Kubernetes resource request addresses."""

    def __init__(self, rt: ResourceType, namespace: str | None, name: str | None, sub: str, group: str | None = None):
        self.rt, self.namespace, self.name, self.sub = rt, namespace, name, sub
        self.group = rt.group if group is None else group     # the API group of the path (RBAC asks about it)

    @property
    def resource(self) -> str:
        return f"{self.rt.plural}/{self.sub}" if self.sub else self.rt.plural


class MetricsRoute(Route):
    """A metrics.k8s.io request: counted and faulted as `nodes.metrics.k8s.io`, authorized as group metrics.k8s.io."""

    @property
    def resource(self) -> str:
        return metrics_api.counted_resource(self.rt)


class ProxyRoute(Route):
    """`services/<ref>/proxy/<path>`: the rest of the path goes to the Service."""

    def __init__(self, rt: ResourceType, namespace: str | None, name: str, path: str):
        super().__init__(rt, namespace, name, "proxy")
        self.path = path


class KubeSimServer(ThreadingHTTPServer):
    """The API port: HTTPS with `tls` (the TLS handshake runs in the connection's thread, so a slow or broken
    client never holds up the accept loop), plain HTTP without."""
    daemon_threads = True
    allow_reuse_address = True
    handshake_timeout = 10.0

    def __init__(self, address, clusters: dict[str, Cluster], version: dict, faults: Faults | None = None,
                 default_cluster: str = "workload", info: dict | None = None, managers: dict | None = None,
                 verbose: bool = False, authorizer: Authorizer | None = None, tls: ssl.SSLContext | None = None):
        self.tls = tls
        self.clusters = clusters
        self.authorizer = authorizer or Authorizer(admin_token=kubeconfig.TOKEN)
        self.version = version
        self.faults = faults or Faults()
        self.default_cluster = default_cluster if default_cluster in clusters else next(iter(clusters))
        self.info = info or {}
        self.managers = managers or {}
        self.verbose = verbose
        self.stopping = threading.Event()
        self.bookmark_interval = watchlist.BOOKMARK_FREQUENCY   # seconds between periodic bookmarks (tests: less)
        self._network = threading.Lock()     # the listener and the open connections, which an outage replaces and cuts
        self._accepting = selectors.DefaultSelector()
        self._connections: dict = {}         # open connection -> whether an outage cut it
        self.outage = Outage(self)
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def fileno(self) -> int:
        """What serve_forever polls: the selector (epoll, kqueue) watching the listener of the moment, readable
        while a connection waits there. An outage closes the listener and later opens another; serve_forever would
        poll the closed one's number (spinning on it, or on whatever socket gets that number next)."""
        return self._accepting.fileno()

    def server_activate(self) -> None:
        """Listen; non-blocking, so that an accept after a stale poll (the listener swapped meanwhile) never waits."""
        super().server_activate()
        self.socket.setblocking(False)
        self._accepting.register(self.socket, selectors.EVENT_READ)

    def get_request(self):
        with self._network:   # an outage does not close the listener under an accept
            sock, address = super().get_request()    # OSError (closed, nothing waiting): serve_forever goes on
            sock.setblocking(True)                   # the handler's blocking reads and writes
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            self._connections[sock] = False
        return sock, address

    def shutdown_request(self, request) -> None:
        with self._network:   # forgotten before it is closed, so an outage never shuts down a reused descriptor
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def go_away(self, keep=None) -> int:
        """An outage begins: close the listener (connects are refused) and shut down the open connections but
        `keep` (their clients read EOF); answers how many were cut."""
        with self._network:
            self._accepting.unregister(self.socket)
            self.socket.close()
            cut = [connection for connection in self._connections if connection is not keep]
            for connection in cut:
                self._connections[connection] = True
                try:   # the OS socket's shutdown: SSLSocket.shutdown would drop the TLS state the handler is using
                    socket.socket.shutdown(connection, socket.SHUT_RDWR)
                except OSError:
                    pass
            return len(cut)

    def come_back(self) -> None:
        """The outage ends: listen on the same address again (SO_REUSEADDR: the cut connections' TIME_WAIT holds
        the port); OSError when someone else took it meanwhile."""
        with self._network:
            if self.stopping.is_set():
                return
            self.socket = socket.socket(self.address_family, self.socket_type)
            try:
                socketserver.TCPServer.server_bind(self)   # HTTPServer's would look the host name up again
                self.server_activate()
            except OSError:
                self.socket.close()
                raise

    def connection_cut(self, connection) -> bool:
        """Whether an outage shut this connection down (a quiet watch then ends without waiting for a write to fail)."""
        return self._connections.get(connection, False)

    def server_close(self) -> None:
        with self._network:
            super().server_close()
            self._accepting.close()

    def finish_request(self, request, client_address) -> None:
        if self.tls is not None and not self._handshake(request, client_address):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address) -> None:
        """A client that goes away mid-request (a broken pipe, a TLS EOF) is no error of the server's; nothing
        is printed for it (an unread stderr pipe would fill up with such tracebacks)."""
        if isinstance(sys.exc_info()[1], OSError) and not self.verbose:
            return
        super().handle_error(request, client_address)

    def _handshake(self, sock: ssl.SSLSocket, client_address) -> bool:
        """In the connection's thread: a client that does not trust the CA, or offers a certificate the CA did
        not sign, ends here (its side reports the TLS error)."""
        sock.settimeout(self.handshake_timeout)
        try:
            sock.do_handshake()
        except OSError as exc:          # ssl.SSLError, a reset, the timeout
            if self.verbose:
                sys.stderr.write(f"kubesim: TLS handshake with {client_address[0]} failed: {exc}\n")
            return False
        sock.settimeout(None)
        return True

    def cluster_url(self, name: str) -> str:
        return self.url if name == self.default_cluster else f"{self.url}/clusters/{name}"

    def shutdown_all(self) -> None:
        self.stopping.set()
        self.outage.stop()
        for cluster in self.clusters.values():
            cluster.store.stop_all_watches()
        self.shutdown()
        self.server_close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, a keep-alive client's delayed ACK adds
    # ~40 ms to every response.
    disable_nagle_algorithm = True
    server: KubeSimServer

    def log_message(self, fmt: str, *args: Any) -> None:
        if self.server.verbose:
            sys.stderr.write("kubesim: " + (fmt % args) + "\n")

    def do_GET(self):  # noqa: N802 (the names BaseHTTPRequestHandler looks up)
        self._dispatch("GET")

    def do_POST(self):  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self):  # noqa: N802
        self._dispatch("PUT")

    def do_PATCH(self):  # noqa: N802
        self._dispatch("PATCH")

    def do_DELETE(self):  # noqa: N802
        self._dispatch("DELETE")

    # ------------------------------------------------------------------------------------ plumbing
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, code: int, body: bytes, content_type: str = JSON, headers: dict | None = None,
              warnings: list[str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        for warning in (warnings or []) + getattr(self, "_injected_warnings", []):
            self.send_header("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, code: int, obj: Any, warnings: list[str] | None = None, headers: dict | None = None):
        self._send(code, encode(obj), JSON, headers, warnings)

    def _send_error(self, err: ApiError, warnings: list[str] | None = None) -> None:
        self._send_json(err.code, err.status(), warnings, err.headers)

    def _dispatch(self, method: str) -> None:
        self._injected_warnings: list[str] = []
        url = urlsplit(self.path)
        self._raw_query = url.query
        self._query_lists = parse_qs(url.query, keep_blank_values=True)
        query = {k: v[-1] for k, v in self._query_lists.items()}
        path = unquote(url.path)
        body = self._read_body()
        try:
            if path.startswith("/_kubesim/") or path == "/_kubesim":
                self._admin(method, path, query, body)
                return
            cluster_name = self.server.default_cluster
            if path.startswith("/clusters/"):
                parts = path.split("/", 3)
                cluster_name = parts[2]
                path = "/" + (parts[3] if len(parts) > 3 else "")
            cluster = self.server.clusters.get(cluster_name)
            if cluster is None:
                raise errors.page_not_found()
            self._kube(cluster, method, path, query, body)
        except ApiError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):     # the client went away (over TLS: SSLEOFError)
            self.close_connection = True
        except Exception as exc:  # keep serving; report as the API server would
            import traceback
            traceback.print_exc()
            self._send_error(ApiError(500, "InternalError", f"Internal error occurred: {exc}"))

    # -------------------------------------------------------------------------------- kubernetes
    def _kube(self, cluster: Cluster, method: str, path: str, query: dict, body: bytes) -> None:
        route = self._route(cluster, path)
        verb = self._verb(method, route, query) if route else method.lower()
        resource = route.resource if route else (path.rstrip("/") or "/")   # `/version/` counts as `/version`
        faults = self.server.faults
        faults.count(cluster.name, verb, resource)
        self._authorize(cluster, route, verb, path, query)
        namespace = route.namespace if route else None
        if route is not None and route.rt.key == "namespaces" and not route.namespace:
            namespace = route.name      # RequestInfo: a Namespace object's namespace is its name
        request = {"cluster": cluster.name, "verb": verb, "resource": resource, "namespace": namespace,
                   "name": route.name if route else None, "dry_run": self._requested_dry_run(verb, route, query, body)}
        if self.server.outage.observe(request):   # it began an outage, which cut this connection too: no answer
            self.close_connection = True
            return
        action = faults.decide(request)
        if action is not None:
            self._injected_warnings = list(action.warnings)
            if action.latency:
                time.sleep(action.latency)
            if action.drop:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if action.status:
                headers = {"Retry-After": str(action.retry_after)} if action.retry_after is not None else None
                details = {"retryAfterSeconds": action.retry_after} if action.retry_after is not None else None
                raise ApiError(action.status, action.reason or "InternalError", action.message or "", details,
                               headers)
        if route is None:
            self._nonresource(cluster, method, path)
            return
        self._resource(cluster, method, route, verb, query, body)

    @staticmethod
    def _requested_dry_run(verb: str, route: Route | None, query: dict, body: bytes) -> bool:
        """Whether a request is a server-side dry run, for fault matching before it is decoded: `?dryRun=All`, or a
        DeleteOptions body's `dryRun` (kubectl delete --dry-run=server), or an Eviction's `deleteOptions.dryRun`."""
        if query.get("dryRun") == "All":
            return True
        if route is None or not body.strip() or not (verb in ("delete", "deletecollection") or route.sub == "eviction"):
            return False
        try:
            data = json.loads(body)
        except ValueError:
            return False
        if not isinstance(data, dict):
            return False
        options = data if verb != "create" else data.get("deleteOptions") or {}
        return isinstance(options, dict) and bool(options.get("dryRun"))

    def _authorize(self, cluster: Cluster, route: Route | None, verb: str, path: str, query: dict) -> None:
        """Authentication (client certificate, bearer token, anonymous), then RBAC where the scenario turns it on
        (see rbac.py). The user is kept for the request's admission hooks (`_user`)."""
        authorizer = self.server.authorizer
        self._authenticated = None      # a 401 must not leave the user of the connection's previous request
        user = authorizer.authenticate(self.headers.get("Authorization") or "", self._certificate_user())
        self._authenticated = user
        if route is None:
            attrs = Attributes(verb=verb, path=path)
        else:
            attrs = Attributes(verb=verb, group=route.group, resource=route.rt.plural, subresource=route.sub,
                               namespace=route.namespace or "", name=route.name or _list_name(verb, query))
        authorizer.authorize(cluster, user, attrs)

    def _route(self, cluster: Cluster, path: str) -> Route | None:
        segs = [s for s in path.split("/") if s]
        if len(segs) >= 3 and segs[0] == "api":
            group, version, rest = "", segs[1], segs[2:]
        elif len(segs) >= 4 and segs[0] == "apis":
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            return None
        if group == kubevirt_api.GROUP and kubevirt_api.served(cluster):
            return self._kubevirt_route(cluster, version, rest)
        if group == metrics_api.GROUP and metrics_api.served(cluster):
            return self._metrics_route(version, rest)
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = cluster.registry.lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        rt = cluster.registry.lookup(group, version, rest[0])
        if rt is not None and rt.key == "services" and namespace and len(rest) >= 3 and rest[2] == "proxy":
            return ProxyRoute(rt, namespace, rest[1], "/" + "/".join(rest[3:]))
        if rt is None or len(rest) > 3:
            raise errors.page_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in rt.subresources:
            raise errors.page_not_found()
        return Route(rt, namespace, name, sub)

    @staticmethod
    def _metrics_route(version: str, rest: list[str]) -> Route:
        """metrics-server's group: `nodes[/<name>]`, `pods`, `namespaces/<ns>/pods[/<name>]`."""
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        rt = metrics_api.lookup(version, rest[0])
        if rt is None or len(rest) > 2 or (namespace and not rt.namespaced):
            raise errors.page_not_found()
        return MetricsRoute(rt, namespace, rest[1] if len(rest) > 1 else None, "")

    @staticmethod
    def _kubevirt_route(cluster: Cluster, version: str, rest: list[str]) -> Route:
        """virt-api's aggregated group: `namespaces/<ns>/<plural>/<name>/<sub>` of a kubevirt.io kind."""
        rt = cluster.registry.lookup(kubevirt_api.TARGET_GROUP, "v1", rest[2]) if len(rest) in (5, 6) else None
        if version not in kubevirt_api.VERSIONS or rest[0] != "namespaces" or rt is None:
            raise errors.page_not_found()
        return Route(rt, rest[1], rest[3], "/".join(rest[4:]), group=kubevirt_api.GROUP)   # evacuate/cancel: two segments

    @staticmethod
    def _verb(method: str, route: Route, query: dict) -> str:
        if method == "GET":
            if route.name:
                return "get"
            return "watch" if query.get("watch") in ("true", "1") else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if route.name else "deletecollection"}.get(method, method.lower())

    def _nonresource(self, cluster: Cluster, method: str, path: str) -> None:
        if method != "GET":
            raise errors.method_not_allowed()
        registry = cluster.registry
        path = path.rstrip("/") or "/"
        doc: Any = None
        if path == "/version":
            doc = discovery.version_info(self.server.version)
        elif path == "/api":
            doc = discovery.api_versions(self.server.cluster_url(cluster.name).split("//", 1)[1])
        elif path == "/apis":
            aggregated = {kubevirt_api.GROUP: kubevirt_api.VERSIONS} if kubevirt_api.served(cluster) else {}
            if metrics_api.served(cluster):
                aggregated[metrics_api.GROUP] = (metrics_api.VERSION,)
            doc = discovery.api_group_list(registry, aggregated)
        elif path.startswith("/api/"):
            doc = discovery.resource_list(registry, "", path.split("/")[2]) if path.count("/") == 2 else None
        elif path.startswith("/apis/"):
            parts = path.split("/")[2:]
            if parts[0] == metrics_api.GROUP and metrics_api.served(cluster):
                doc = (discovery.aggregated_group(metrics_api.GROUP, (metrics_api.VERSION,)) if len(parts) == 1 else
                       metrics_api.resource_list(parts[1]) if len(parts) == 2 else None)
            elif parts[0] == kubevirt_api.GROUP and kubevirt_api.served(cluster):
                doc = (discovery.aggregated_group(kubevirt_api.GROUP, kubevirt_api.VERSIONS) if len(parts) == 1 else
                       kubevirt_api.resource_list(cluster, parts[1]) if len(parts) == 2 and parts[1] in kubevirt_api.VERSIONS
                       else None)
            else:
                doc = (discovery.api_group(registry, parts[0]) if len(parts) == 1 else
                       discovery.resource_list(registry, parts[0], parts[1]) if len(parts) == 2 else None)
        elif path == "/openapi/v3":
            doc = openapi.root(registry)
        elif path.startswith("/openapi/v3/"):
            doc = openapi.group_version_document(registry, path[len("/openapi/v3/"):])
        elif path in ("/healthz", "/livez", "/readyz"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
            return
        if doc is None:
            raise errors.page_not_found()
        self._send_json(200, doc)

    # --------------------------------------------------------------------------------- resources
    def _context(self, query: dict, options_kind: str, dry_run: list[str] | None = None) -> RequestContext:
        """The request's options: `dryRun` (every value must be `All`: apimachinery ValidateDryRun, answered as
        `<Kind>Options.meta.k8s.io "" is invalid`), fieldManager, fieldValidation and the caller."""
        if dry_run is None:
            dry_run = list(getattr(self, "_query_lists", {}).get("dryRun") or [])
        if not isinstance(dry_run, list) or any(value != "All" for value in dry_run):
            shown = json.dumps(dry_run if isinstance(dry_run, list) else [dry_run], separators=(",", ":"))
            unsupported = f'Unsupported value: {shown}: supported values: "All"'
            raise errors.invalid(None, options_kind, "", [("dryRun", unsupported)], group="meta.k8s.io")
        return RequestContext(dry_run=bool(dry_run), field_manager=query.get("fieldManager"),
                              default_field_manager=self._user_agent_manager(),
                              field_validation=query.get("fieldValidation"), user=self._user())

    def _user_agent_manager(self) -> str:
        """The field manager of a write without fieldManager, as the apiserver's prefixFromUserAgent: the
        User-Agent up to its first `/`, printable characters only, at most 128."""
        product = (self.headers.get("User-Agent") or "").split("/")[0]
        return "".join(char for char in product if char.isprintable())[:128]

    def _certificate_user(self) -> User | None:
        """The user of the connection's client certificate (the handshake verified it against the run's CA)."""
        if not isinstance(self.connection, ssl.SSLSocket):
            return None
        found = identity(self.connection.getpeercert())
        return User(found.user, found.groups) if found else None

    def _user(self) -> str:
        """Who asks, as `_authorize` authenticated the request."""
        user = getattr(self, "_authenticated", None)
        return user.name if user is not None else "system:anonymous"

    def _decode(self, body: bytes, content_type: str) -> Any:
        content_type = (content_type or JSON).split(";")[0].strip().lower()
        if not body:
            return None
        try:
            if content_type == "application/vnd.kubernetes.protobuf":
                from . import protobuf
                return protobuf.decode_object(body)
            if content_type.endswith("yaml"):
                return yaml.safe_load(body)
            return json.loads(body)
        except ImportError:
            raise errors.unsupported_media_type(content_type, [JSON]) from None
        except ValueError as exc:
            raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None

    def _target(self) -> negotiation.Target:
        """What the Accept header asks the answer to be (406 when the server can offer none of it)."""
        return negotiation.negotiate(self.headers.get("Accept") or "")

    def _resource(self, cluster: Cluster, method: str, route: Route, verb: str, query: dict, body: bytes) -> None:
        rt, ns, name, sub = route.rt, route.namespace, route.name, route.sub
        content_type = self.headers.get("Content-Type") or JSON
        if rt.namespaced is False and ns:
            raise errors.page_not_found()
        if route.group != rt.group:     # virt-api's subresources.kubevirt.io: answers with a code and no body
            self._send(kubevirt_api.serve(cluster, rt.plural, sub, method, ns, name, body), b"")
            return
        if isinstance(route, MetricsRoute):
            self._metrics(cluster, route, verb, query)
            return
        if isinstance(route, ProxyRoute):
            code, content_type, answer = prometheus.proxy(cluster, ns, name, method, route.path,
                                                          getattr(self, "_raw_query", ""), body,
                                                          self.headers.get("Content-Type") or "")
            self._send(code, answer, content_type)
            return
        handler = cluster.subresources.get((rt.key, sub)) if sub else None
        if sub == "log" and handler and method == "GET":
            self._send(200, handler(cluster, ns, name, query).encode(), "text/plain")
            return
        if sub == "eviction" and handler and method == "POST":
            ctx = self._context(query, "CreateOptions")
            result = handler(cluster, ns, name, self._decode(body, content_type) or {}, ctx)
            self._send_json(201, result, ctx.warnings)
            return
        if sub == "scale" and handler and method in ("GET", "PUT", "PATCH"):
            ctx = self._context(query, {"GET": "GetOptions", "PUT": "UpdateOptions"}.get(method, "PatchOptions"))
            patch_type = PATCH_TYPES.get(content_type.split(";")[0].strip().lower()) if method == "PATCH" else None
            if method == "PATCH" and patch_type is None:
                raise errors.unsupported_media_type(content_type, list(PATCH_TYPES))
            payload = self._decode(body, "application/yaml" if patch_type == "apply" else JSON) if body else None
            self._send_json(200, handler(cluster, rt, ns, name, verb, payload, patch_type, ctx), ctx.warnings)
            return
        if sub and sub != "status" and not handler:
            raise errors.method_not_allowed()
        if verb == "list":
            self._list(cluster, route, query)
        elif verb == "watch":
            self._watch(cluster, route, query)
        elif verb == "get":
            self._object(200, cluster.entry(rt, ns, name).obj, rt, query, [])
        elif verb == "create":
            if sub or name:
                raise errors.method_not_allowed()
            ctx = self._context(query, "CreateOptions")
            obj = cluster.create(rt, ns, self._decode(body, content_type) or {}, ctx)
            self._object(201, obj, rt, query, ctx.warnings)
        elif verb == "update":
            ctx = self._context(query, "UpdateOptions")
            obj = cluster.update(rt, ns, name, self._decode(body, content_type) or {}, ctx, sub)
            self._object(200, obj, rt, query, ctx.warnings)
        elif verb == "patch":
            ctx = self._context(query, "PatchOptions")
            patch_type = PATCH_TYPES.get(content_type.split(";")[0].strip().lower())
            if patch_type is None:
                raise errors.unsupported_media_type(content_type, list(PATCH_TYPES))
            patch = self._decode(body, "application/yaml" if patch_type == "apply" else JSON)
            existed = cluster.store.get(rt.key, (ns or "") if rt.namespaced else "", name) is not None
            obj = cluster.patch(rt, ns, name, patch_type, patch, ctx, sub, force=query.get("force") == "true")
            self._object(200 if existed or patch_type != "apply" else 201, obj, rt, query, ctx.warnings)
        elif verb == "delete":
            options = self._delete_options(body, content_type, query)
            ctx = self._context(query, "DeleteOptions", options.get("dryRun") or [])
            obj = cluster.delete(rt, ns, name, options, ctx)
            self._object(200, obj, rt, query, ctx.warnings)
        elif verb == "deletecollection":
            options = self._delete_options(body, content_type, query)
            ctx = self._context(query, "DeleteOptions", options.get("dryRun") or [])
            items = cluster.delete_collection(rt, ns, query.get("labelSelector"), query.get("fieldSelector"),
                                              options, ctx)
            items = [conversion.served(rt, item) for item in items]
            self._send_json(200, {"kind": rt.list_kind, "apiVersion": rt.api_version,
                                  "metadata": {"resourceVersion": str(cluster.store.rv)}, "items": items},
                            ctx.warnings)
        else:
            raise errors.method_not_allowed()

    def _metrics(self, cluster: Cluster, route: Route, verb: str, query: dict) -> None:
        """metrics.k8s.io: get and list (JSON or Table), nothing else."""
        metrics_api.refuse(verb)
        rt = route.rt
        if verb == "get":
            self._object(200, metrics_api.get(cluster, rt, route.namespace, route.name), rt, query, [])
            return
        items = metrics_api.list_objects(cluster, rt, route.namespace, query.get("labelSelector"),
                                         query.get("fieldSelector"))
        target = self._target()
        if target.kind == negotiation.TABLE:
            self._send_json(200, tables.table(rt, items, {}, query.get("includeObject", "Metadata")))
            return
        self._send_json(200, metrics_api.list_answer(rt, items))

    def _delete_options(self, body: bytes, content_type: str, query: dict) -> dict:
        """DeleteOptions as the delete handlers read them: from the body when there is one (the query is then
        ignored, dryRun included), else from the query parameters."""
        options = self._decode(body, content_type) if body.strip() else None
        if options is not None:
            if not isinstance(options, dict):
                raise errors.bad_request("the body of the request is not a DeleteOptions object")
            return options
        options = {}
        lists = getattr(self, "_query_lists", {})
        if "dryRun" in lists:
            options["dryRun"] = list(lists["dryRun"])
        if "gracePeriodSeconds" in query:
            try:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError:
                raise errors.bad_request(f'strconv.ParseInt: parsing "{query["gracePeriodSeconds"]}": invalid '
                                         "syntax") from None
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in query:
            options["orphanDependents"] = query["orphanDependents"] in ("true", "1")
        return options

    def _object(self, code: int, obj: dict, rt: ResourceType, query: dict, warnings: list[str]) -> None:
        obj = conversion.served(rt, obj)   # stored form -> the requested version's (events.k8s.io Event)
        target = self._target()
        if target.kind and obj.get("kind") == rt.kind:
            obj = watchlist.object_answer(rt, obj, target, query.get("includeObject", "Metadata"))
        self._send_json(code, obj, warnings)

    def _list(self, cluster: Cluster, route: Route, query: dict) -> None:
        rt = route.rt
        target = self._target()   # as ListResource: the output media type first, then the options
        options = listoptions.ListOptions.from_query(query, watch=False)
        result = cluster.list(rt, route.namespace, options.label_selector, options.field_selector, options.limit,
                              options.continue_token, options.resource_version, options.resource_version_match)
        metadata: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            metadata["continue"] = result.continue_token
            metadata["remainingItemCount"] = result.remaining
        self._send(200, watchlist.list_answer(rt, result.items, metadata, target,
                                              query.get("includeObject", "Metadata")))

    # ------------------------------------------------------------------------------------- watch
    def _watch(self, cluster: Cluster, route: Route, query: dict) -> None:
        """A watch stream (watch.go serveWatch): the options' errors and a 406 answer before the stream starts;
        errors of the watch itself (too old, too large) come as one ERROR event; `timeoutSeconds` ends the stream
        cleanly; with allowWatchBookmarks, a BOOKMARK every `bookmark_interval` and 2 s before the timeout."""
        rt = route.rt
        events = watchlist.EventEncoder(rt, self._target(), query.get("includeObject", "Metadata"))
        options = listoptions.ListOptions.from_query(query, watch=True)
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            watcher = cluster.watch(rt, route.namespace, options.label_selector, options.field_selector,
                                    options.resource_version, options.send_initial_events,
                                    options.allow_watch_bookmarks)
        except ApiError as err:
            self._chunk(encode({"type": ERROR, "object": err.status()}) + b"\n")
            self._chunk(b"")
            return
        now = time.monotonic()
        deadline = now + options.timeout_seconds if options.timeout_seconds else None
        interval = self.server.bookmark_interval
        due = watchlist.next_bookmark(now, deadline, interval) if options.allow_watch_bookmarks else None
        try:
            while not self.server.stopping.is_set() and not self.server.connection_cut(self.connection):
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if due is not None and now >= due:
                    cluster.store.bookmark(watcher)   # queued behind the events already sent to this watcher
                    due = watchlist.next_bookmark(now, deadline, interval)
                wake = min(t for t in (now + 0.5, deadline, due) if t is not None)
                try:
                    event = watcher.events.get(timeout=max(wake - now, 0.01))
                except queue.Empty:
                    continue
                if event is None:
                    break
                self._chunk(events.encode(event))
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            cluster.store.stop_watch(watcher)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # ------------------------------------------------------------------------------------- admin
    def _admin(self, method: str, path: str, query: dict, body: bytes) -> None:
        server, faults = self.server, self.server.faults
        parts = [p for p in path.split("/") if p][1:]
        topic = parts[0] if parts else ""
        if topic == "prometheus":   # a Prometheus request: a form or a query string, not the admin's JSON
            self._admin_prometheus(method, parts[1:], query, body)
            return
        try:
            data = json.loads(body) if body else {}
        except ValueError as exc:
            raise errors.bad_request(f"the admin request body is not JSON: {exc}") from None
        if topic == "healthz":
            self._send_json(200, {"ok": True})
        elif topic == "info":
            self._send_json(200, {**server.info, "url": server.url,
                                  "clusters": {n: server.cluster_url(n) for n in server.clusters}})
        elif topic == "counters":
            peaks = {name: c.migration_peaks for name, c in server.clusters.items() if getattr(c, "migration_peaks", None)}
            budgets = {name: c.disruption for name, c in server.clusters.items() if getattr(c, "disruption", None)}
            if method == "DELETE" or (method == "POST" and parts[1:2] == ["reset"]):
                faults.reset_counters()
                for recorder in peaks.values():
                    recorder.reset()
                for controller in budgets.values():
                    controller.reset_violations()
                self._send_json(200, {"reset": True})
            else:
                report = faults.counter_report(query.get("cluster"))
                for name, entry in report.items():
                    if name in peaks:
                        entry["migrations"] = peaks[name].report()
                    if name in budgets:
                        entry["pdbs"] = budgets[name].violations()
                self._send_json(200, report)
        elif topic == "faults":
            if method == "POST":
                try:
                    rule = faults.add(data)
                except (ValueError, TypeError) as exc:
                    raise errors.bad_request(str(exc)) from None
                self._send_json(201, rule.as_dict())
            elif method == "DELETE":
                removed = faults.remove(int(parts[1]) if len(parts) > 1 else None)
                self._send_json(200, {"removed": removed})
            else:
                self._send_json(200, {"faults": faults.rules()})
        elif topic == "outage":
            self._admin_outage(method, data)
        elif topic == "users" and method == "POST":
            if data.get("certificate"):
                raise errors.bad_request("certificates are made at start for the scenario's users; "
                                         "a user added at run time authenticates with its token")
            try:
                user = server.authorizer.add_user(data)
            except ValueError as exc:
                raise errors.bad_request(str(exc)) from None
            self._send_json(201, {"name": user.name, "groups": list(user.all_groups), "rbac": server.authorizer.enabled})
        elif topic == "compact" and method == "POST":
            cluster = server.clusters.get(query.get("cluster", server.default_cluster))
            if cluster is None:
                raise errors.page_not_found()
            self._send_json(200, {"compactedResourceVersion": str(cluster.store.compact())})
        elif topic == "settle":
            timeout = float(query.get("timeout", 10))
            idle = all(m.wait_idle(timeout) for m in server.managers.values())
            self._send_json(200 if idle else 504, {"idle": idle})
        elif topic == "usage":
            self._admin_usage(method, query, data)
        elif topic == "nodes" and method == "POST" and len(parts) == 3 and parts[2] == "reboot":
            self._admin_reboot(parts[1], query, data)
        elif topic == "logs" and method == "POST":
            cluster = server.clusters.get(data.get("cluster", server.default_cluster))
            if cluster is None:
                raise errors.page_not_found()
            cluster.append_log(data["namespace"], data["pod"], data.get("container", ""), data.get("lines", []))
            self._send_json(200, {"appended": len(data.get("lines", []))})
        else:
            raise errors.page_not_found()

    def _admin_outage(self, method: str, data: dict) -> None:
        """`POST /_kubesim/outage {"seconds", "after", "armedBy"}` arms an outage (outage.py); one that begins at once
        has closed the listener and cut the other connections before this answer goes out, and this connection
        closes after it. GET: the outage armed or going on and the record; DELETE: drop an armed one."""
        outage = self.server.outage
        if method == "POST":
            try:
                report = outage.arm(data, keep=self.connection)
            except ValueError as exc:
                raise errors.bad_request(str(exc)) from None
            except Busy as exc:
                raise ApiError(409, "Conflict", str(exc)) from None
            self._send_json(201, report, headers={"Connection": "close"} if report["active"] else None)
        elif method == "DELETE":
            self._send_json(200, {"cancelled": outage.cancel()})
        else:
            self._send_json(200, outage.report())

    def _admin_usage(self, method: str, query: dict, data: dict) -> None:
        """`POST /_kubesim/usage {"cluster", "vm", "cpu", "memory"}` sets a VM's load; GET answers the snapshot."""
        server = self.server
        name = data.get("cluster") or query.get("cluster") or server.default_cluster
        cluster = server.clusters.get(name)
        model = metrics_usage.model(cluster) if cluster is not None else None
        if model is None:
            raise errors.bad_request(f"cluster {name!r} has no metrics: section in its scenario")
        if method == "POST":
            try:
                usage = model.set_vm_load(data.get("vm"), data)
            except ValueError as exc:
                raise errors.bad_request(str(exc)) from None
            self._send_json(200, {"cluster": name, "vm": data.get("vm"), "cpu": usage["cpu"], "memory": usage["memory"]})
        else:
            self._send_json(200, {"cluster": name, **model.snapshot().report()})

    def _admin_reboot(self, node: str, query: dict, data: dict) -> None:
        """`POST /_kubesim/nodes/<name>/reboot {"cluster", "kubeletVersion", "seconds"}`: the node NotReady now, Ready
        again after `seconds` simulated seconds (default 10) with the new kubelet version; 202 with when."""
        name = data.get("cluster") or query.get("cluster") or self.server.default_cluster
        cluster = self.server.clusters.get(name)
        if cluster is None or getattr(cluster, "kubelet", None) is None:
            raise errors.page_not_found()
        try:
            seconds = float(data.get("seconds", 10))
        except (TypeError, ValueError):
            raise errors.bad_request(f"seconds must be a number of simulated seconds, not {data.get('seconds')!r}") from None
        if seconds < 0:
            raise errors.bad_request("seconds must not be negative")
        version = data.get("kubeletVersion")
        ready_at = cluster.kubelet.reboot(node, seconds, version)
        self._send_json(202, {"cluster": name, "node": node, "seconds": seconds, "readyAt": ready_at,
                              **({"kubeletVersion": version} if version else {})})

    def _admin_prometheus(self, method: str, rest: list[str], query: dict, body: bytes) -> None:
        """`/_kubesim/prometheus[/<cluster>]/<path>`: the Prometheus as a Route reaches it, Authorization included."""
        server = self.server
        name = server.default_cluster
        if rest and rest[0] in server.clusters:
            name, rest = rest[0], rest[1:]
        model = metrics_usage.model(server.clusters[name])
        if model is None or model.config.prometheus is None:
            raise errors.page_not_found()
        code, content_type, answer = prometheus.serve(model, method, "/" + "/".join(rest), getattr(self, "_raw_query", ""),
                                                      body, self.headers.get("Content-Type") or "",
                                                      self.headers.get("Authorization"))
        self._send(code, answer, content_type)
