# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one door to the API server: every request of the collection goes through `Client`.

- Options: kubernetes.core's auth options (`AUTH_ARG_SPEC`, secrets `no_log` there) plus `api_retries`
  and `api_timeout`; kubeconfig files and dicts, contexts, tokens, certificates, proxies, impersonation and the
  `K8S_AUTH_*` environment work as in `kubernetes.core.k8s_info`. The common cases (see `kubeconfig.load`) go
  through the collection's own HTTP client (`native`), which never imports the kubernetes package, half of
  a module's CPU; everything else through kubernetes.core's `get_api_client`, imported only then.
- Kinds are found through discovery, by kind and optionally group (ACP's ResourcePatch and ModuleInfo are
  looked up by kind in whatever group serves them); a kind that is not served is `None` or `KindNotServed`.
- Lists are paged (`limit`/`continue`) and return plain dicts (no per-object wrappers, so ten thousand VMIs
  cost what their JSON costs).
- Every request is retried on 429, 5xx (`api_retries` times) and connection errors (until the deadline: an API server
  that restarts refuses connections for a while), waiting as long as `Retry-After` asks or
  with exponential backoff, and never past the `api_timeout` deadline; what fails for good becomes an
  `ApiFailure` carrying the request, the HTTP status, the Kubernetes reason and message.
- The verbs the collection uses: get, list, create, replace (with the object's resourceVersion), patch by
  type, delete with preconditions, evict, watch from a resourceVersion, read logs, GET of any path (an aggregated
  API, a Service's proxy), and a GET of a URL outside the API server (Prometheus reachable from here) with the
  TLS trust of the API connection. Every write takes
  `dry_run`, sent as the API server's `dryRun=All`: validation and admission run, nothing is stored (this is
  how check mode asks the server, as kubernetes.core does). The API's `Warning` headers of the last write
  are in `last_warnings`.
- Nothing else in the collection touches the kubernetes client or the HTTP connection to the API server.
"""

from __future__ import annotations

import copy
import email.utils
import http.client
import json
import re
import ssl
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import (
    ApiFailure,
    InvalidOption,
    KindNotServed,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s import native
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.kubeconfig import NotNative
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.transport import ApiError


def loaded_class(module: str, name: str) -> Any:
    """A class of a library, only when the library is already imported (None otherwise): an exception or an object
    of a library that was never imported cannot be at hand, so checking for it must not import the library."""
    return getattr(sys.modules.get(module), name, None)


def api_error_classes() -> Tuple[type, ...]:
    """The exceptions for an answer other than 2xx: the native transport's, and the kubernetes client's once imported."""
    api_exception = loaded_class("kubernetes.client.exceptions", "ApiException")
    return (ApiError, api_exception) if api_exception else (ApiError,)


def connection_option_errors() -> Tuple[type, ...]:
    """The errors of options a client cannot connect with: kubernetes.core's, and the kubernetes client's once imported."""
    config_exception = loaded_class("kubernetes.config", "ConfigException")
    return (CoreException, config_exception) if config_exception else (CoreException,)


def kubernetes_core_client(**auth: Any) -> Any:
    """kubernetes.core's `get_api_client`, for the options the native client leaves to it (imported only then)."""
    try:
        from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
        import kubernetes.config  # noqa: F401  pylint: disable=unused-import  # kubernetes.core's import of it is silent
    except ImportError as error:
        raise InvalidOption("the kubernetes Python client is not installed ({0})".format(error),
                            "Install the packages in requirements.txt on the host that runs the module.") from error
    return get_api_client(**auth)


RETRY_ARG_SPEC = {
    "api_retries": {"type": "int", "default": 5},
    "api_timeout": {"type": "int", "default": 120},
}

RETRYABLE_STATUS = frozenset((429, 500, 502, 503, 504))
PAGE_SIZE = 500
BASE_DELAY = 0.5
MAX_DELAY = 10.0


def connection_argument_spec() -> dict:
    """kubernetes.core's auth options (a deep copy) plus `api_retries` and `api_timeout`."""
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(copy.deepcopy(RETRY_ARG_SPEC))
    return spec


def auth_params(params: dict) -> dict:
    """The auth options among a module's params, as kubernetes.core's `get_api_client` takes them."""
    return {name: params.get(name) for name in AUTH_ARG_SPEC}


@dataclass(frozen=True)
class ConnectionOptions:
    """The connection options of every module: kubernetes.core's auth options, `api_retries`, `api_timeout`."""
    auth: Dict[str, Any]
    api_retries: int
    api_timeout: int

    @classmethod
    def from_params(cls, params: dict) -> "ConnectionOptions":
        return cls(auth=auth_params(params), api_retries=params["api_retries"], api_timeout=params["api_timeout"])


PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
FIELD_MANAGER = "kubevirt_ops.rebalance"


# ------------------------------------------------------------------------------------------ errors
class Failure:
    """What went wrong with one attempt, and whether another attempt may help."""

    def __init__(self, status: int, reason: str, message: str, retryable: bool, retry_after: Optional[float] = None) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


def _header(headers: Any, name: str) -> Optional[str]:
    if not headers:
        return None
    for key in headers:
        if str(key).lower() == name.lower():
            return headers[key]
    return None


def parse_retry_after(value: Any, now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _status_body(body: Any) -> dict:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip().startswith("{"):
        try:
            data = json.loads(body)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
    return {}


def classify(error: BaseException) -> Optional[Failure]:
    """Turn an exception from the client (either one) into a Failure, or None when it is not an API problem."""
    if isinstance(error, api_error_classes()):
        status = int(getattr(error, "status", 0) or 0)
        body = _status_body(getattr(error, "body", None))
        reason = body.get("reason") or str(getattr(error, "reason", "") or "")
        message = body.get("message") or str(getattr(error, "reason", "") or "")
        retry_after = parse_retry_after(_header(getattr(error, "headers", None), "Retry-After"))
        if retry_after is None:
            retry_after = parse_retry_after((body.get("details") or {}).get("retryAfterSeconds"))
        # status 0: the client's own wrapper around TLS errors; retrying does not fix a certificate
        return Failure(status, reason, message, status in RETRYABLE_STATUS, retry_after)
    urllib3 = sys.modules.get("urllib3")
    if urllib3 is not None and isinstance(error, urllib3.exceptions.HTTPError):
        cause = getattr(error, "reason", None)
        if isinstance(error, urllib3.exceptions.SSLError) or isinstance(cause, urllib3.exceptions.SSLError):
            return Failure(0, "TLSError", str(cause or error), False)
        return Failure(0, type(error).__name__, str(cause or error), True)
    if isinstance(error, ssl.SSLError):
        return Failure(0, "TLSError", str(error), False)
    if isinstance(error, (ConnectionError, http.client.HTTPException)):   # the native transport's TransportError names its cause
        return Failure(0, getattr(error, "kind", None) or type(error).__name__, str(error), True)
    return None


def disable_transport_retries(k8s_client: Any) -> None:
    """Turn off urllib3's own retries in the client's connection pools (by default 3, without backoff, and
    for 429/503 with Retry-After), so that one policy applies: `api_retries` within `api_timeout`, with the
    real status of every failed attempt. Clients without a urllib3 pool manager (fakes) are left alone."""
    api_client = getattr(getattr(k8s_client, "client", None), "client", None)
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if pool_manager is None or not hasattr(pool_manager, "connection_pool_kw"):
        return
    pool_manager.connection_pool_kw["retries"] = False
    pool_manager.clear()


# -------------------------------------------------------------------------------------- connection
class Client:
    """The API client: discovery by kind, paged lists, the verbs, bounded retries, dry run.

    `client_factory(**auth)` returns a kubernetes.core `K8SClient` (its `.client` is the dynamic client);
    tests pass a fake. Without it, the client is the native one when `kubeconfig.load` reads the options, else
    kubernetes.core's. `sleep` and `clock` are injectable so that retry timing is tested without waiting.
    """

    def __init__(self, auth: Optional[dict] = None, retries: int = 5, timeout: float = 120,
                 client_factory: Optional[Callable[..., Any]] = None, sleep: Callable[[float], Any] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, page_size: int = PAGE_SIZE,
                 http_pool_factory: Optional[Callable[[str], Any]] = None) -> None:
        if retries is None or retries < 0:
            raise InvalidOption("must be 0 or more, got {0}".format(retries), "Give the number of retries after the first attempt, e.g. 5.",
                                path="api_retries")
        if timeout is None or timeout <= 0:
            raise InvalidOption("must be more than 0 seconds, got {0}".format(timeout),
                                "Give the time in seconds that reading the cluster may take in total, retries included, e.g. 120.",
                                path="api_timeout")
        self.auth = dict(auth or {})
        self.retries = retries
        self.timeout = timeout
        self.page_size = page_size
        self._factory = client_factory
        self._sleep = sleep
        self._clock = clock
        self._deadline = clock() + timeout
        self._client: Any = None
        self._index: Optional[Dict[str, list]] = None
        self._refreshed = False
        self._read_in_full = False
        self.retried: List[dict] = []
        self.last_resource_version: Optional[str] = None
        self._http_pool_factory = http_pool_factory or self._http_pool
        self._http_pools: Dict[str, Any] = {}

        self.last_warnings: List[str] = []

    @classmethod
    def from_options(cls, options: ConnectionOptions, extra_timeout: float = 0, **kwargs: Any) -> "Client":
        """A client for a module's connection options; `extra_timeout` extends the deadline for a module that also
        waits (a drain waits up to its own timeout on top of the reads)."""
        return cls(options.auth, retries=options.api_retries, timeout=options.api_timeout + extra_timeout, **kwargs)

    # ---------------------------------------------------------------------------------- retrying
    def remaining(self) -> float:
        return self._deadline - self._clock()

    def call(self, request: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `func` (one API round trip), retrying what may succeed later, within the deadline. Answers that may change
        (429, 5xx) are retried `retries` times; a connection refused or cut before an answer (an API server restarting in
        an upgrade, a load balancer failing over) is retried until the deadline, so that an outage shorter than
        `api_timeout` is survived whatever `api_retries` says."""
        attempt = 0
        answered = 0
        while True:
            attempt += 1
            if self.remaining() <= 0:
                raise ApiFailure(request, 0, "Timeout", "api_timeout of {0}s used up".format(self.timeout),
                                 fix="Raise api_timeout, or narrow the scope (namespaces, label_selector, include).",
                                 attempts=attempt - 1)
            try:
                return func(*args, **kwargs)
            except Exception as error:  # pylint: disable=broad-exception-caught  # classify() decides what is an API problem
                failure = classify(error)
                if failure is None:
                    raise
                answered += 1 if failure.status else 0
                if not failure.retryable or answered > self.retries:
                    raise ApiFailure(request, failure.status, failure.reason, failure.message, attempts=attempt) from error
                delay = failure.retry_after if failure.retry_after is not None else min(MAX_DELAY, BASE_DELAY * 2 ** (attempt - 1))
                if delay >= self.remaining():
                    raise ApiFailure(request, failure.status, failure.reason, failure.message, attempts=attempt,
                                     fix="Waiting {0:g}s before the next attempt would pass api_timeout ({1}s): raise api_timeout "
                                         "or try again later.".format(delay, self.timeout)) from error
                self.retried.append({"request": request, "status": failure.status, "reason": failure.reason, "wait": delay})
                self._sleep(delay)

    def _request_timeout(self) -> float:
        return max(0.001, self.remaining())

    # ---------------------------------------------------------------------------------- client
    @property
    def client(self) -> Any:
        """kubernetes.core's K8SClient or the native one, created on first use (its creation reads /version and /apis
        when there is no discovery cache)."""
        if self._client is None:
            self._client = self.call("connect to the API server", self._connect)
        return self._client

    def _connect(self) -> Any:
        try:
            k8s_client = self._open()
        except connection_option_errors() as error:   # evaluated now: the fallback may just have imported kubernetes
            raise InvalidOption(str(error), "Give kubeconfig (a path or a dict) and context, or host with api_key, "
                                            "or set the K8S_AUTH_* environment variables.", path="kubeconfig") from error
        except ValueError as error:  # e.g. "Host value ... should start with https://"
            raise InvalidOption(str(error), "Check the scheme and port of host or the kubeconfig server.", path="host") from error
        disable_transport_retries(k8s_client)
        return k8s_client

    def _open(self) -> Any:
        """The client of `client_factory` when given, else the native one, else (options only kubernetes.core reads)
        kubernetes.core's."""
        if self._factory is not None:
            return self._factory(**self.auth)
        try:
            return native.connect(self.auth, self._request_timeout)
        except NotNative:
            return kubernetes_core_client(**self.auth)

    def request_json(self, path: str, request: str, **query: Any) -> Any:
        """GET a path and return its JSON body, with retries."""
        return self.call(request, lambda: self._send("get", path, **query))

    def _send(self, method: str, path: str, body: Any = None, content_type: Optional[str] = None, text: bool = False, **query: Any) -> Any:
        """One round trip through the dynamic client: the decoded JSON body (the text with `text`); the response's
        `Warning` headers in `last_warnings`."""
        response = self.client.client.request(method, path, body=body, content_type=content_type, serialize=False,
                                              _request_timeout=self._request_timeout(), **query)
        self.last_warnings = warnings_of(response)
        data = getattr(response, "data", response)
        if isinstance(data, bytes):
            data = data.decode("utf-8", "replace")
        if isinstance(data, str) and not text:
            return json.loads(data)
        return data

    def get_path(self, path: str, request: str, query_params: Sequence[Tuple[str, str]] = ()) -> Any:
        """GET any path of the API server (an aggregated API, a Service's proxy) with query parameters; the decoded
        JSON, with retries. A failure's answer, in whatever format the server behind the path used, is `failure_body`."""
        return self.call(request, lambda: self._send("get", path, query_params=list(query_params)))

    def put_path(self, path: str, body: Any, request: str) -> Any:
        """PUT a JSON body to any path of the API server (an aggregated API's subresource, such as virt-api's
        `virtualmachineinstances/<name>/evacuate/cancel`, whose options carry their own `dryRun`), with retries; the
        decoded answer, None when the answer has no body."""
        answer = self.call(request, lambda: self._send("put", path, body=body, content_type="application/json", text=True))
        return json.loads(answer) if isinstance(answer, str) and answer.strip() else None

    def http_get_json(self, url: str, request: str, query_params: Sequence[Tuple[str, str]] = (),
                      headers: Optional[Dict[str, str]] = None) -> Any:
        """GET a URL outside the API server and return its decoded JSON, with the retries and deadline of every request.

        TLS as the API connection: certificates verified unless the connection turns that off (`validate_certs`, the
        kubeconfig's insecure-skip-tls-verify), trusting the system's CAs and the cluster CA of the connection (the
        descheduler trusts its Pod's cluster CA for Prometheus). Proxies come from the environment (HTTPS_PROXY,
        NO_PROXY) as Go's ProxyFromEnvironment does. Redirects are not followed, so `headers` (a bearer token) reach
        only `url`'s host. An answer other than 2xx is an ApiFailure with the status (429 and 5xx retried); its body
        is `failure_body`. `request` names the request in errors: it must not carry `headers`."""
        target = url + ("?" + urllib.parse.urlencode(list(query_params)) if query_params else "")

        def get() -> Any:
            response = self._http_pool_factory(url).request("GET", target, headers=dict(headers or {}), redirect=False, retries=False,
                                                            timeout=self._request_timeout(), preload_content=True)
            if not 200 <= response.status < 300:
                raise http_answer_error(response)
            return response.data
        data = self.call(request, get)
        try:
            return json.loads(data.decode("utf-8", "replace") if isinstance(data, bytes) else data)
        except ValueError as error:
            raise ApiFailure(request, 200, "NotJSON", "the answer is not JSON: {0!r}".format(data[:120]),
                             fix="Give the base URL of the Prometheus HTTP API (the one that serves /api/v1/query).") from error

    def _http_pool(self, url: str) -> Any:
        """A urllib3 pool for `url`'s scheme and proxy, made once a run."""
        scheme = urllib.parse.urlsplit(url).scheme
        host = urllib.parse.urlsplit(url).hostname or ""
        proxy = urllib.request.getproxies_environment().get(scheme)
        if proxy and urllib.request.proxy_bypass_environment(host):
            proxy = None
        key = "{0} {1}".format(scheme, proxy or "")
        if key not in self._http_pools:
            import urllib3  # only a GET outside the API server needs it
            tls = tls_options(self._configuration()) if scheme == "https" else {}
            self._http_pools[key] = urllib3.ProxyManager(proxy, **tls) if proxy else urllib3.PoolManager(**tls)
        return self._http_pools[key]

    def server_version(self) -> dict:
        """GET /version, read now (kubernetes.core caches it with discovery)."""
        return self.request_json("/version", "get /version")

    # ---------------------------------------------------------------------------------- discovery
    @staticmethod
    def _nothing_fetched(resources: Any) -> bool:
        """True when kubernetes.core's discovery cache holds no group version's resources yet, so that building
        the index reads every one of them from the server now. False when unknown (a client without the
        LazyDiscoverer's `parse_api_groups`)."""
        parse = getattr(resources, "parse_api_groups", None)
        if parse is None:
            return False
        tree = parse(request_resources=False)  # the cached tree: no request once the group list is known
        for groups in tree.values():
            for versions in groups.values():
                for group_version in versions.values():
                    if any(kind != "List" for kind in getattr(group_version, "resources", None) or {}):
                        return False
        return True

    def _build_index(self, refresh: bool) -> Dict[str, list]:
        """Index the served resources by kind, from the discovery cache as it is or (`refresh`) read again."""
        resources = self.client.client.resources
        if refresh:
            resources.invalidate_cache()
        elif self._index is None:
            self._read_in_full = self._nothing_fetched(resources)
        index: Dict[str, list] = {}
        resource_list = loaded_class("kubernetes.dynamic.resource", "ResourceList") or ()
        for entry in resources:
            for resource in entry if isinstance(entry, list) else [entry]:
                if isinstance(resource, resource_list) or not getattr(resource, "kind", None):
                    continue
                index.setdefault(resource.kind, []).append(resource)
        return index

    def _pick(self, kind: str, group: Optional[str]) -> Any:
        candidates = [r for r in (self._index or {}).get(kind, []) if group is None or (r.group or "") == group]
        if not candidates:
            return None
        candidates.sort(key=lambda r: (not r.preferred, r.group or "", r.api_version))
        return candidates[0]

    def _refresh(self) -> None:
        """Read discovery again, at most once per run, and only when the index came from the cache: a kind
        missing after that is known not to be served for the rest of the run. A run that started without a
        cache has just read every group version, so it has nothing to refresh; either way a run reads each
        group version once, whatever kinds are missing."""
        if self._refreshed or self._read_in_full:
            return
        self._index = self.call("discover the served kinds", self._build_index, True)
        self._refreshed = True

    def find_kinds(self, wanted: Iterable[Tuple[str, Optional[str]]]) -> Dict[Tuple[str, Optional[str]], Any]:
        """Resources for (kind, group) pairs (group None = any group); None for a kind that is not served.

        The discovery cache of kubernetes.core is used as it is; when a wanted kind is missing from it,
        discovery is read again once per run (see `_refresh`), so a kind installed since the cache was
        written is found, and the number of discovery requests stays the same from run to run.
        """
        wanted = list(wanted)
        if self._index is None:
            self._index = self.call("discover the served kinds", self._build_index, False)
        if any(self._pick(kind, group) is None for kind, group in wanted):
            self._refresh()
        return {(kind, group): self._pick(kind, group) for kind, group in wanted}

    def find_kind(self, kind: str, group: Optional[str] = None) -> Any:
        return self.find_kinds([(kind, group)])[(kind, group)]

    def require_kind(self, kind: str, group: Optional[str] = None, fix: Optional[str] = None) -> Any:
        resource = self.find_kind(kind, group)
        if resource is None:
            raise KindNotServed(kind, group, fix=fix)
        return resource

    # ---------------------------------------------------------------------------------- lists
    @staticmethod
    def describe(resource: Any, namespace: Optional[str] = None, label_selector: Optional[str] = None,
                 field_selector: Optional[str] = None) -> str:
        name = resource.name + ("." + resource.group if resource.group else "")
        text = "list {0}".format(name)
        if namespace and resource.namespaced:
            text += " in namespace {0}".format(namespace)
        if label_selector:
            text += " with labelSelector {0}".format(label_selector)
        if field_selector:
            text += " with fieldSelector {0}".format(field_selector)
        return text

    def list(self, resource: Any, namespace: Optional[str] = None, label_selector: Optional[str] = None,
             field_selector: Optional[str] = None) -> List[dict]:
        """All objects of a resource (in a namespace, or all namespaces), page by page, as dicts.

        A 404 on the collection (a namespace that does not exist, or a kind removed since discovery) is an
        empty list when the kind is still served after a fresh discovery, `KindNotServed` otherwise. A 410 on
        a continuation (its token expired) starts the list again once.
        """
        request = self.describe(resource, namespace, label_selector, field_selector)
        path = resource.path(namespace=namespace) if resource.namespaced else resource.path()
        restarted = False
        items: List[dict] = []
        token = None
        while True:
            query = {"limit": self.page_size, "label_selector": label_selector or None, "field_selector": field_selector or None,
                     "_continue": token}
            try:
                page = self.request_json(path, request, **query)
            except ApiFailure as failure:
                if failure.status == 410 and token and not restarted:
                    restarted, items, token = True, [], None
                    continue
                if failure.status == 404 and token is None:
                    self._confirm_served(resource)
                    return []
                raise
            items.extend(page.get("items") or [])
            if token is None:  # the first page's resourceVersion: where a watch of this list starts
                self.last_resource_version = (page.get("metadata") or {}).get("resourceVersion")
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def _confirm_served(self, resource: Any) -> None:
        self._refresh()
        if self._pick(resource.kind, resource.group or "") is None:
            raise KindNotServed(resource.kind, resource.group or None)

    # ---------------------------------------------------------------------------------- verbs
    @staticmethod
    def _where(resource: Any, name: Optional[str], namespace: Optional[str]) -> str:
        return "{0} {1}".format(resource.name, "/".join(part for part in (namespace if resource.namespaced else None, name) if part))

    @staticmethod
    def _path(resource: Any, name: Optional[str] = None, namespace: Optional[str] = None) -> str:
        return resource.path(name=name, namespace=namespace if resource.namespaced else None)

    @staticmethod
    def _dry_run(dry_run: bool) -> Dict[str, str]:
        return {"dry_run": "All"} if dry_run else {}

    def get(self, resource: Any, name: str, namespace: Optional[str] = None) -> Optional[dict]:
        """One object, or None when it does not exist (404)."""
        try:
            return self.request_json(self._path(resource, name, namespace), "get " + self._where(resource, name, namespace))
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise

    def create(self, resource: Any, body: dict, namespace: Optional[str] = None, dry_run: bool = False) -> dict:
        """POST an object; the object as stored (or as it would be, with `dry_run`)."""
        name = (body.get("metadata") or {}).get("name") or (body.get("metadata") or {}).get("generateName") or ""
        return self.call("create " + self._where(resource, name, namespace),
                         lambda: self._send("post", self._path(resource, namespace=namespace), body=body,
                                            content_type="application/json", **self._dry_run(dry_run)))

    def replace(self, resource: Any, body: dict, namespace: Optional[str] = None, dry_run: bool = False,
                request: Optional[str] = None) -> dict:
        """PUT an object with the resourceVersion it carries (409 Conflict when it changed since); the stored object.
        `request` names the request in errors (by default `update <resource> <namespace>/<name>`)."""
        name = (body.get("metadata") or {}).get("name")
        return self.call(request or "update " + self._where(resource, name, namespace),
                         lambda: self._send("put", self._path(resource, name, namespace), body=body,
                                            content_type="application/json", **self._dry_run(dry_run)))

    def patch(self, resource: Any, name: str, body: Any, namespace: Optional[str] = None, patch_type: str = "merge",
              dry_run: bool = False, request: Optional[str] = None) -> dict:
        """PATCH an object: `patch_type` merge, json, strategic or apply (server-side apply as this collection's field
        manager, forcing conflicts); the stored object."""
        query: Dict[str, Any] = self._dry_run(dry_run)
        if patch_type == "apply":
            query.update(field_manager=FIELD_MANAGER, force_conflicts=True)
        return self.call(request or "patch " + self._where(resource, name, namespace),
                         lambda: self._send("patch", self._path(resource, name, namespace), body=body,
                                            content_type=PATCH_CONTENT_TYPES[patch_type], **query))

    def delete(self, resource: Any, name: str, namespace: Optional[str] = None, preconditions: Optional[dict] = None,
               propagation_policy: Optional[str] = None, dry_run: bool = False, request: Optional[str] = None) -> Optional[dict]:
        """DELETE an object, only if it still has the `preconditions` (uid, resourceVersion) given; None when it was
        already gone (404), else the server's answer (the object, or a Status). `request` names the request in errors."""
        options: Dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if dry_run:
            options["dryRun"] = ["All"]
        try:
            return self.call(request or "delete " + self._where(resource, name, namespace),
                             lambda: self._send("delete", self._path(resource, name, namespace), body=options,
                                                content_type="application/json", **self._dry_run(dry_run)))
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise

    def evict(self, namespace: str, name: str, dry_run: bool = False,
              is_answer: Callable[[Failure], bool] = lambda failure: False) -> dict:
        """POST an Eviction for a Pod; `{"code": 201, "message": "evicted"}`, or the refusal
        as `{"code", "message"}` for failures `is_answer` says are answers (KubeVirt's and the PDB check's 429s are
        decisions, never retried). Other failures are retried as any request."""
        body: Dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if dry_run:
            body["deleteOptions"] = {"dryRun": ["All"]}

        def post() -> dict:
            try:
                self._send("post", self._path(self.require_kind("Pod", ""), name, namespace) + "/eviction", body=body, content_type="application/json",
                           **self._dry_run(dry_run))
                return {"code": 201, "message": "evicted"}
            except Exception as error:  # pylint: disable=broad-exception-caught  # classify() decides what is an API problem
                failure = classify(error)
                if failure is not None and is_answer(failure):
                    return {"code": failure.status, "message": failure.message}
                raise
        return self.call("evict pod {0}/{1}".format(namespace, name), post)

    def watch(self, resource: Any, namespace: Optional[str] = None, name: Optional[str] = None, label_selector: Optional[str] = None,
              field_selector: Optional[str] = None, resource_version: Optional[str] = None, timeout: int = 60) -> Iterator[dict]:
        """Raw watch events (`{"type", "object"}`, BOOKMARKs included) from `resource_version`, for at most `timeout`
        seconds (the server's timeoutSeconds). Not retried: the one watch implementation (k8s.watch) reconnects."""
        for event in self.client.client.watch(resource, namespace=namespace if resource.namespaced else None, name=name,
                                              label_selector=label_selector, field_selector=field_selector,
                                              resource_version=resource_version, timeout=timeout, allow_watch_bookmarks=True):
            yield {"type": event.get("type"), "object": event.get("raw_object")}

    def pod_log(self, namespace: str, name: str, container: Optional[str] = None, tail_lines: Optional[int] = None) -> str:
        """The log of a Pod's container (pods/log), with retries."""
        query = [(key, value) for key, value in (("container", container), ("tailLines", tail_lines)) if value]
        text = self.call("read the log of pod {0}/{1}".format(namespace, name),
                         lambda: self._send("get", self._path(self.require_kind("Pod", ""), name, namespace) + "/log", text=True, query_params=query,
                                            header_params={"Accept": "text/plain"}))
        return text or ""

    def _configuration(self) -> Any:
        """The connection settings (`host`, `verify_ssl`, `ssl_ca_cert`) of the client; None for a fake."""
        configuration = getattr(self.client, "configuration", None)
        return configuration if configuration is not None else getattr(getattr(self.client.client, "client", None), "configuration", None)

    def server_host(self) -> Optional[str]:
        """The API server URL the client talks to (from the kubeconfig or `host`)."""
        return getattr(self._configuration(), "host", None)

    def list_kind(self, kind: str, group: Optional[str] = None, **kwargs: Any) -> Optional[List[dict]]:
        """`list` by kind; None when the kind is not served."""
        resource = self.find_kind(kind, group)
        if resource is None:
            return None
        try:
            return self.list(resource, **kwargs)
        except KindNotServed:
            return None


def tls_options(configuration: Any) -> Dict[str, Any]:
    """urllib3 pool options for a server outside the API server with the TLS trust of the API connection: verified
    unless `verify_ssl` is off, against the system's CAs plus the connection's CA (a file, or the native client's
    certificate-authority-data; no client certificate: those are credentials for the API server)."""
    if configuration is not None and getattr(configuration, "verify_ssl", True) is False:
        return {"cert_reqs": "CERT_NONE", "assert_hostname": False}
    context = ssl.create_default_context()
    ca_file = getattr(configuration, "ssl_ca_cert", None) if configuration is not None else None
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    ca_data = getattr(configuration, "ssl_ca_data", None) if configuration is not None else None
    if ca_data:
        context.load_verify_locations(cadata=ca_data.decode("ascii", "replace"))
    return {"ssl_context": context}


def http_answer_error(response: Any) -> Exception:
    """An answer other than 2xx from a server outside the API server, as an ApiError (status, reason, body, headers),
    so that `classify` treats it as any API answer."""
    status = int(getattr(response, "status", 0) or 0)
    return ApiError(status, getattr(response, "reason", None) or http.client.responses.get(status, ""), getattr(response, "data", None),
                    dict(getattr(response, "headers", None) or {}))


def failure_body(failure: BaseException) -> Any:
    """The body of the answer behind an ApiFailure (decoded JSON when it is JSON, else the text); None when there was
    no answer. A service behind the API server's proxy answers in its own format, Prometheus with
    `{"status": "error", "errorType", "error"}`, which `classify` does not read."""
    body = getattr(failure.__cause__, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            return json.loads(body)
        except ValueError:
            return body
    return body


def warnings_of(response: Any) -> List[str]:
    """The texts of a response's `Warning` headers (`299 - "text"`)."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return []
    if hasattr(headers, "getlist"):
        values = headers.getlist("Warning")
    elif hasattr(headers, "get_all"):
        values = headers.get_all("Warning") or []
    else:
        values = [v for k, v in dict(headers).items() if k.lower() == "warning"]
    result = []
    for value in values:
        match = re.match(r'^\s*\d{3}\s+\S+\s+"(.*)"\s*$', value)
        result.append(match.group(1) if match else value)
    return result
