# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The connection to the API server, shared by every module.

- Options: kubernetes.core's auth options (`AUTH_ARG_SPEC`, secrets `no_log` there) plus `api_retries`
  and `api_timeout`; the client is kubernetes.core's `get_api_client`, so kubeconfig files and dicts,
  contexts, tokens, certificates, proxies, impersonation and the `K8S_AUTH_*` environment work as in
  `kubernetes.core.k8s_info`.
- Kinds are found through discovery, by kind and optionally group (ACP's ResourcePatch and ModuleInfo are
  looked up by kind in whatever group serves them); a kind that is not served is `None` or `KindNotServed`.
- Lists are paged (`limit`/`continue`) and return plain dicts (no per-object wrappers, so ten thousand VMIs
  cost what their JSON costs).
- Every request is retried on 429, 5xx and connection errors, waiting as long as `Retry-After` asks or
  with exponential backoff, and never past the `api_timeout` deadline; what fails for good becomes an
  `ApiFailure` carrying the request, the HTTP status, the Kubernetes reason and message.
"""

from __future__ import annotations

import copy
import email.utils
import http.client
import json
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import (
    ApiFailure,
    InvalidOption,
    KindNotServed,
)

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException
    from kubernetes.dynamic.resource import ResourceList
    import urllib3
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError as import_error:  # the module reports it with missing_required_lib
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = import_error
    get_api_client = None  # pylint: disable=invalid-name
    CoreV1Api = None  # pylint: disable=invalid-name

    class ApiException(Exception):  # type: ignore[no-redef]
        """Stand-in so that `except ApiException` stays valid without the kubernetes client."""
        status = 0
        reason = ""
        body = None
        headers = None

    class ConfigException(Exception):  # type: ignore[no-redef]
        """Stand-in for kubernetes.config.ConfigException."""

    ResourceList = ()  # pylint: disable=invalid-name
    urllib3 = None  # pylint: disable=invalid-name


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
    """Turn an exception from the client into a Failure, or None when it is not an API problem."""
    if isinstance(error, ApiException):
        status = int(getattr(error, "status", 0) or 0)
        body = _status_body(getattr(error, "body", None))
        reason = body.get("reason") or str(getattr(error, "reason", "") or "")
        message = body.get("message") or str(getattr(error, "reason", "") or "")
        retry_after = parse_retry_after(_header(getattr(error, "headers", None), "Retry-After"))
        if retry_after is None:
            retry_after = parse_retry_after((body.get("details") or {}).get("retryAfterSeconds"))
        # status 0: the client's own wrapper around TLS errors; retrying does not fix a certificate
        return Failure(status, reason, message, status in RETRYABLE_STATUS, retry_after)
    if urllib3 is not None and isinstance(error, urllib3.exceptions.HTTPError):
        cause = getattr(error, "reason", None)
        if isinstance(error, urllib3.exceptions.SSLError) or isinstance(cause, urllib3.exceptions.SSLError):
            return Failure(0, "TLSError", str(cause or error), False)
        return Failure(0, type(error).__name__, str(cause or error), True)
    if isinstance(error, (ConnectionError, http.client.HTTPException)):
        return Failure(0, type(error).__name__, str(error), True)
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
class Connection:
    """An API client with discovery by kind, paged lists and bounded retries.

    `client_factory(**auth)` returns a kubernetes.core `K8SClient` (its `.client` is the dynamic client);
    tests pass a fake. `sleep` and `clock` are injectable so that retry timing is tested without waiting.
    """

    def __init__(self, auth: Optional[dict] = None, retries: int = 5, timeout: float = 120,
                 client_factory: Optional[Callable[..., Any]] = None, sleep: Callable[[float], Any] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, page_size: int = PAGE_SIZE) -> None:
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
        self._factory = client_factory or get_api_client
        self._sleep = sleep
        self._clock = clock
        self._deadline = clock() + timeout
        self._client: Any = None
        self._index: Optional[Dict[str, list]] = None
        self._refreshed = False
        self._read_in_full = False
        self.retried: List[dict] = []
        self.last_resource_version: Optional[str] = None

    @classmethod
    def from_params(cls, params: dict, **kwargs: Any) -> "Connection":
        return cls(auth_params(params), retries=params.get("api_retries", 5), timeout=params.get("api_timeout", 120), **kwargs)

    # ---------------------------------------------------------------------------------- retrying
    def remaining(self) -> float:
        return self._deadline - self._clock()

    def call(self, request: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `func` (one API round trip), retrying what may succeed later, within the deadline."""
        attempt = 0
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
                if not failure.retryable or attempt > self.retries:
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
        """kubernetes.core's K8SClient, created on first use (its creation reads /version and /apis)."""
        if self._client is None:
            self._client = self.call("connect to the API server", self._connect)
        return self._client

    def _connect(self) -> Any:
        if self._factory is None:
            raise InvalidOption("the kubernetes Python client is not installed ({0})".format(KUBERNETES_IMPORT_ERROR),
                                "Install the packages in requirements.txt on the host that runs the module.")
        try:
            k8s_client = self._factory(**self.auth)
        except (CoreException, ConfigException) as error:
            raise InvalidOption(str(error), "Give kubeconfig (a path or a dict) and context, or host with api_key, "
                                            "or set the K8S_AUTH_* environment variables.", path="kubeconfig") from error
        except ValueError as error:  # e.g. "Host value ... should start with https://"
            raise InvalidOption(str(error), "Check the scheme and port of host or the kubeconfig server.", path="host") from error
        disable_transport_retries(k8s_client)
        return k8s_client

    def request_json(self, path: str, request: str, **params: Any) -> Any:
        """GET a path and return its JSON body, with retries."""
        return self.call(request, self._get, path, **params)

    def _get(self, path: str, **params: Any) -> Any:
        response = self.client.client.request("get", path, serialize=False, _request_timeout=self._request_timeout(), **params)
        data = getattr(response, "data", response)
        if isinstance(data, (bytes, str)):
            return json.loads(data)
        return data

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
        for entry in resources:
            for resource in entry if isinstance(entry, list) else [entry]:
                if isinstance(resource, ResourceList) or not getattr(resource, "kind", None):
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

    def pod_log(self, namespace: str, name: str, container: Optional[str] = None, tail_lines: Optional[int] = None) -> str:
        """The log of a Pod's container (pods/log), with retries."""
        return self.call("read the log of pod {0}/{1}".format(namespace, name), self._pod_log, namespace, name, container, tail_lines)

    def _pod_log(self, namespace: str, name: str, container: Optional[str], tail_lines: Optional[int]) -> str:
        api = CoreV1Api(self.client.client.client)
        kwargs = {key: value for key, value in (("container", container), ("tail_lines", tail_lines)) if value}
        return api.read_namespaced_pod_log(name, namespace, _request_timeout=self._request_timeout(), **kwargs) or ""

    def create(self, resource: Any, body: dict, namespace: Optional[str] = None) -> dict:
        """POST an object (not retried after a request that may have reached the server: a create is not idempotent)."""
        request = "create {0} {1}/{2}".format(resource.name, namespace or "", (body.get("metadata") or {}).get("name") or "")
        created = self.call(request, self.client.client.create, resource, body=body, namespace=namespace)
        return created.to_dict() if hasattr(created, "to_dict") else dict(created)

    def list_kind(self, kind: str, group: Optional[str] = None, **kwargs: Any) -> Optional[List[dict]]:
        """`list` by kind; None when the kind is not served."""
        resource = self.find_kind(kind, group)
        if resource is None:
            return None
        try:
            return self.list(resource, **kwargs)
        except KindNotServed:
            return None
