# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Actual utilization as LowNodeUtilization reads it (descheduler v0.36 `metricsUtilization`), as plain dicts:

    {"source": "KubernetesMetrics", "nodes": {"worker-a": {"cpu": <millicores>, "memory": <bytes>}},
     "pods": {"<namespace>/<pod>": {"cpu": <millicores>, "memory": <bytes>}}}
    {"source": "Prometheus", "query": "<q>", "nodes": {"worker-a": {"MetricResource": <int(value*100)>}},
     "values": {"worker-a": <raw float 0..1>}}

Metrics server (`source: KubernetesMetrics`, or the deprecated `metricsServer: true`): one list of NodeMetrics and
one of PodMetrics (metrics.k8s.io/v1beta1), whatever the number of Pods. Quantities as the descheduler takes them:
cpu in millicores and memory in bytes, rounded up (`Quantity.MilliValue()`, `Value()`); a missing usage counts 0
(`Usage.Cpu()` of an empty list). A Pod's usage is the sum of its containers' usage, read as it is (upstream's
`actualUsageClient.podUsage`, no smoothing); a Pod without PodMetrics is missing from `pods`, and upstream skips it
(`unable to get pod usage`).

What a single read cannot reproduce: upstream's metrics collector (pkg/descheduler/metricscollector) polls every
node's NodeMetrics every 5 s while the descheduler runs and keeps an exponentially weighted average per node,
`round(0.9 * previous + 0.1 * current)` (cpu in millicores, memory in bytes); the first sample is taken as it is,
and a failed poll keeps the previous value. The descheduler waits for the first sample before its first cycle. So a
CronJob run (one cycle, right after the first sample) sees node usage exactly as one read here does, while a
Deployment (`--descheduling-interval`) sees usage averaged over roughly the last minute (a step change reaches half
its size after about 7 polls, 35 s). Pod usage is never smoothed upstream either.

Prometheus (`source: Prometheus`, `prometheus.query`): an instant query (`/api/v1/query`) whose result must be a
vector, each sample labelled `instance=<node name>` with a value in [0, 1]; MetricResource = int(value * 100), as
upstream's `prometheusUsageClient.sync` computes it, and every node the plugin sees must have a sample. Errors carry
upstream's words. The provider is the policy's `metricsProviders` entry with `source: Prometheus` (`prometheus.url`,
`prometheus.authToken.secretReference`, the token in the Secret's `prometheusAuthToken` key as upstream's
`prometheusAuthTokenSecretKey`); a given URL (reachable from where the module runs) or token overrides it. One
difference: upstream lets a NaN sample through (NaN compares false to both bounds); it is refused here as outside
the interval, because int(NaN * 100) has no meaning.

An in-cluster URL (`http[s]://<service>.<namespace>.svc[.cluster.local][:port]`) whose host does not resolve from
here is queried through the API server's service proxy,
`/api/v1/namespaces/<namespace>/services/[https:]<service>:<port>/proxy/<path>/api/v1/query`, with the connection's
own credentials. The Prometheus token is not sent there: kube-apiserver authenticates the caller with the
Authorization header of the incoming request and deletes it before proxying (apiserver's WithAuthentication
filter), so the token would replace the connection's credentials and never reach Prometheus. A Prometheus that
requires a token (kube-rbac-proxy, OpenShift's prometheus-k8s:9091) answers 401/403 there; give a URL reachable from
here (a Route, an Ingress, `kubectl port-forward`) so that the token goes straight to it. The token is only ever in
the Authorization header of a direct query, never in a result, an error or a request description.
"""

from __future__ import annotations

import base64
import decimal
import math
import re
import socket
import urllib.parse
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client, failure_body
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import amount
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    KUBERNETES_METRICS,
    LOW_NODE_UTILIZATION,
    METRIC_RESOURCE,
    PROMETHEUS,
    PROMETHEUS_TOKEN_KEY,
)

METRICS_GROUP = "metrics.k8s.io"
QUERY_PATH = "/api/v1/query"
ACTUAL_RESOURCES = ("cpu", "memory")

FIX_METRICS_SERVER = ("Install metrics-server (kubectl top nodes must answer), or balance by requests: leave metricsUtilization out of "
                      "LowNodeUtilization (usage_source: requests here).")
FIX_PROMETHEUS_PROXY_AUTH = ("Through the API server's service proxy Prometheus gets no bearer token (the API server authenticates the "
                             "caller with the Authorization header and removes it before proxying): give {option} a URL "
                             "reachable from here (a Route, an Ingress or kubectl port-forward) so that the token is sent to it.")
FIX_QUERY_SHAPE = ("Give a query that returns one sample per node, labelled instance=<node name>, with a value between 0 and 1, e.g. "
                   "instance:node_cpu_utilisation:rate1m, or label_replace(...) to copy the node name into the instance label.")
# <service>.<namespace>.svc[.cluster.local]: a Service's in-cluster DNS name
SERVICE_HOST_RE = re.compile(r"^(?P<service>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?\.?$")


# ------------------------------------------------------------------------------------------ metrics server
def usage_of(usage: Optional[dict]) -> Dict[str, int]:
    """cpu (millicores) and memory (bytes) of a metrics `usage`, rounded up; a missing or unreadable one counts 0."""
    result = {}
    for resource in ACTUAL_RESOURCES:
        try:
            result[resource] = amount(resource, (usage or {})[resource])
        except (KeyError, TypeError, ValueError):
            result[resource] = 0
    return result


def node_usage(node_metrics: Iterable[dict]) -> Dict[str, Dict[str, int]]:
    """NodeMetrics items by node name."""
    return {meta(item).get("name") or "": usage_of(item.get("usage")) for item in node_metrics}


def pod_usage(pod_metrics: Iterable[dict]) -> Dict[str, Dict[str, int]]:
    """PodMetrics items by `namespace/name`: the sum of the containers' usage."""
    result = {}
    for item in pod_metrics:
        total = {resource: 0 for resource in ACTUAL_RESOURCES}
        for container in item.get("containers") or []:
            for resource, value in usage_of(container.get("usage")).items():
                total[resource] += value
        result["{0}/{1}".format(meta(item).get("namespace") or "", meta(item).get("name") or "")] = total
    return result


def metrics_server_error(problem: str, path: Optional[str]) -> RebalanceError:
    return RebalanceError(problem, FIX_METRICS_SERVER, path=path)


def read_metrics_server(client: Client, path: Optional[str] = "metricsUtilization.source") -> dict:
    """Node and Pod usage from metrics.k8s.io/v1beta1 in two list calls (all namespaces). Not served (no metrics-server,
    or its APIService unavailable, which discovery leaves out), 404 or 503: a RebalanceError at `path` naming the fix.
    Other failures (403) are the ApiFailure with its RBAC fix."""
    found = client.find_kinds([("NodeMetrics", METRICS_GROUP), ("PodMetrics", METRICS_GROUP)])
    nodes_resource, pods_resource = found[("NodeMetrics", METRICS_GROUP)], found[("PodMetrics", METRICS_GROUP)]
    if nodes_resource is None or pods_resource is None:
        raise metrics_server_error("the API server does not serve {0} (NodeMetrics, PodMetrics): no metrics server is installed, "
                                   "or its APIService is not available".format(METRICS_GROUP), path)
    try:   # one GET each, no paging: metrics-server answers a list from memory, whole, and a 404 must not read as empty
        node_items = client.get_path(nodes_resource.path(), Client.describe(nodes_resource)).get("items") or []
        pod_items = client.get_path(pods_resource.path(), Client.describe(pods_resource)).get("items") or []
    except ApiFailure as failure:
        if failure.status in (404, 503):
            raise metrics_server_error("the metrics server did not answer: {0} ({1})".format(failure.problem, failure.path), path) from failure
        raise
    return {"source": KUBERNETES_METRICS, "nodes": node_usage(node_items), "pods": pod_usage(pod_items)}


# ------------------------------------------------------------------------------------------ Prometheus answers
def go_float(value: float) -> str:
    """A float as Go's %v prints a Prometheus SampleValue (strconv.FormatFloat 'f', -1): 0.5, 2, 1.25, NaN, +Inf."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(decimal.Decimal(repr(value)), "f")
    return text[:-2] if text.endswith(".0") else text


def prometheus_usage(answer: Any, query: str, path: Optional[str] = "prometheus.query") -> dict:
    """The usage dict of a Prometheus `/api/v1/query` answer, checked as upstream's prometheusUsageClient.sync does."""
    if not isinstance(answer, dict) or answer.get("status") != "success" or not isinstance(answer.get("data"), dict):
        detail = ""
        if isinstance(answer, dict) and answer.get("status") == "error":
            detail = ": {0}: {1}".format(answer.get("errorType"), answer.get("error"))
        raise RebalanceError("unable to capture prometheus metrics: not a successful Prometheus query answer{0}".format(detail),
                             "Check the query in the Prometheus UI; the URL must be the base of the Prometheus HTTP API.", path=path)
    data = answer["data"]
    result_type = data.get("resultType")
    if result_type != "vector":
        raise RebalanceError('expected query results to be of type "vector", got "{0}" instead'.format(result_type), FIX_QUERY_SHAPE, path=path)
    nodes: Dict[str, Dict[str, int]] = {}
    values: Dict[str, float] = {}
    for sample in data.get("result") or []:
        labels = (sample or {}).get("metric") or {}
        if "instance" not in labels:
            raise RebalanceError("The collected metrics sample is missing 'instance' key", FIX_QUERY_SHAPE, path=path)
        node = str(labels["instance"])
        try:
            value = float((sample.get("value") or [None, None])[1])
        except (TypeError, ValueError, IndexError) as error:
            raise RebalanceError("the sample for {0!r} has no value: {1!r}".format(node, sample.get("value")), FIX_QUERY_SHAPE, path=path) from error
        if math.isnan(value) or value < 0 or value > 1:
            raise RebalanceError('The collected metrics sample for "{0}" has value {1} outside of <0; 1> interval'.format(node, go_float(value)),
                                 FIX_QUERY_SHAPE, path=path)
        nodes[node] = {METRIC_RESOURCE: int(value * 100)}   # int() truncates toward zero, as Go's int64()
        values[node] = value
    return {"source": PROMETHEUS, "query": query, "nodes": nodes, "values": values}


def require_node_entries(actual_usage: dict, node_names: Iterable[str], path: Optional[str] = None) -> None:
    """Every node the plugin sees must have usage, or upstream's LowNodeUtilization fails the whole cycle with these
    words (Prometheus: `unable to find metric entry for <node>`; metrics server: `unable to find node "<node>" in the
    collected metrics`). The first missing node, in the order given, is reported, as upstream does."""
    names = list(node_names)
    missing = [name for name in names if name not in (actual_usage.get("nodes") or {})]
    if not missing:
        return
    more = " ({0} more node{1} without one: {2})".format(len(missing) - 1, "" if len(missing) == 2 else "s", ", ".join(missing[1:6])) \
        if len(missing) > 1 else ""
    if actual_usage.get("source") == PROMETHEUS:
        raise RebalanceError("unable to find metric entry for {0}{1}".format(missing[0], more),
                             FIX_QUERY_SHAPE + " Samples came for: {0}.".format(", ".join(sorted(actual_usage.get("nodes") or {})) or "none"),
                             path=path or "prometheus.query")
    raise RebalanceError('unable to find node "{0}" in the collected metrics{1}'.format(missing[0], more),
                         "The metrics server has no NodeMetrics for it (a new or NotReady node, or a kubelet it cannot scrape): "
                         "check kubectl top nodes and try again in a minute.", path=path or "metricsUtilization.source")


# ------------------------------------------------------------------------------------------ Prometheus URLs
def display_url(url: str) -> str:
    """`url` without user information or query, for messages and results."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = "[{0}]".format(netloc)
    try:
        port = parts.port
    except ValueError:   # shown without it; check_prometheus_url says what is wrong
        port = None
    if port:
        netloc += ":{0}".format(port)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_prometheus_url(url: Any, path: Optional[str] = "prometheus.url") -> urllib.parse.SplitResult:
    """The parsed URL; a RebalanceError at `path` unless it is http(s) with a host and a valid port."""
    parts = urllib.parse.urlsplit(str(url or "").strip())
    try:
        port = parts.port
    except ValueError as error:
        raise RebalanceError("{0!r} has an invalid port".format(display_url(str(url))), "Give a URL such as https://prometheus.example:9091.",
                             path=path) from error
    if parts.scheme not in ("http", "https") or not parts.hostname or (port is not None and port <= 0):
        raise RebalanceError("{0!r} is not an http or https URL with a host".format(str(url or "")),
                             "Give the base URL of the Prometheus HTTP API, e.g. https://prometheus-k8s.monitoring.svc:9091.", path=path)
    return parts


def service_of(url: str) -> Optional[dict]:
    """The Service behind an in-cluster URL (`<service>.<namespace>.svc[.cluster.local]`): namespace, service,
    scheme, port (default 443/80) and the URL's path; None for another host."""
    parts = urllib.parse.urlsplit(url)
    match = SERVICE_HOST_RE.match((parts.hostname or "").lower())
    if not match:
        return None
    return {"namespace": match["namespace"], "service": match["service"], "scheme": parts.scheme,
            "port": parts.port or (443 if parts.scheme == "https" else 80), "path": parts.path.rstrip("/")}


def service_proxy_path(url: str) -> Optional[str]:
    """The API server's service proxy path of the query endpoint of an in-cluster Prometheus URL; None for another host.
    `https:` before the Service name makes the API server speak TLS to it."""
    service = service_of(url)
    if service is None:
        return None
    return "/api/v1/namespaces/{namespace}/services/{prefix}{service}:{port}/proxy{path}{query}".format(
        prefix="https:" if service["scheme"] == "https" else "", query=QUERY_PATH, **service)


def host_resolves(host: str) -> bool:
    """Whether `host` resolves from here (an in-cluster Service name does only inside the cluster)."""
    try:
        return bool(socket.getaddrinfo(host, None))
    except (socket.gaierror, UnicodeError, OSError):
        return False


def prometheus_route(url: str, resolves: Optional[Callable[[str], bool]] = None) -> dict:
    """How the query reaches Prometheus: `{"via": "direct", "url"}` or, for an in-cluster URL whose host does not resolve
    from here, `{"via": "service_proxy", "path"}`. `url` (user information dropped) is there either way."""
    proxy_path = service_proxy_path(url)
    host = urllib.parse.urlsplit(url).hostname or ""
    if proxy_path is not None and not (resolves or host_resolves)(host):
        return {"via": "service_proxy", "url": display_url(url), "path": proxy_path}
    return {"via": "direct", "url": display_url(url), "path": None}


# ------------------------------------------------------------------------------------------ Prometheus queries
def _is_api_status(body: Any) -> bool:
    return isinstance(body, dict) and body.get("kind") == "Status"


def _capture_error(failure: ApiFailure, route: dict, path: Optional[str]) -> RebalanceError:
    """An ApiFailure of the query as upstream's `unable to capture prometheus metrics: ...`, with a fix for who answered:
    the API server itself (its own fix: RBAC, endpoints), or Prometheus (through the proxy or directly)."""
    body = failure_body(failure)
    if isinstance(body, dict) and body.get("status") == "error":
        said = "{0} {1}: {2}: {3}".format(failure.status, failure.reason, body.get("errorType"), body.get("error"))
    elif isinstance(body, str) and body.strip():
        said = "{0} {1}: {2}".format(failure.status, failure.reason, body.strip()[:200])
    else:
        said = failure.problem
    if route["via"] == "service_proxy" and failure.status in (401, 403) and not _is_api_status(body):
        fix = FIX_PROMETHEUS_PROXY_AUTH.format(option=route.get("url_option", "prometheus_url"))
    elif route["via"] == "service_proxy" and _is_api_status(body) and failure.status == 503:
        fix = "The API server found no ready endpoint of the Service: check that Prometheus runs, or give {0}.".format(
            route.get("url_option", "prometheus_url"))
    elif route["via"] == "service_proxy" and _is_api_status(body):   # the API server's own answer (RBAC of services/proxy, ...)
        fix = failure.fix
    elif failure.status in (401, 403):
        fix = ("Prometheus refused the request's token, or wants one: give a token that may query it (prometheus_token, the "
               "prometheus_auth_secret Secret, or the Secret of the policy's metricsProviders[].prometheus.authToken.secretReference, "
               "key {0}).".format(PROMETHEUS_TOKEN_KEY))
    elif failure.status in (400, 422):
        fix = FIX_QUERY_SHAPE
    else:
        fix = failure.fix
    return RebalanceError("unable to capture prometheus metrics: {0} ({1})".format(said, failure.path), fix, path=path)


def query_prometheus(client: Client, url: str, query: str, token: Optional[str], nodes: Optional[Iterable[str]] = None,
                     path: Optional[str] = "prometheus.query", url_path: Optional[str] = "prometheus.url",
                     route: Optional[dict] = None) -> dict:
    """One instant query; the Prometheus usage dict (see the module docstring). `nodes`: the node names the plugin sees,
    each of which must have a sample. Directly, `token` goes in the Authorization header; through the service proxy
    it is not sent (see the module docstring). `route`: prometheus_route(url) when the caller made it already. Errors
    name `path` (the query) or `url_path` (where to reach it)."""
    check_prometheus_url(url, url_path)
    if not query or not str(query).strip():
        raise RebalanceError("prometheus query is missing", FIX_QUERY_SHAPE, path=path)
    route = route or prometheus_route(url)
    params: List[Tuple[str, str]] = [("query", str(query))]
    try:
        if route["via"] == "service_proxy":
            answer = client.get_path(route["path"], "query Prometheus through the API server's service proxy {0}".format(route["path"]),
                                     query_params=params)
        else:
            headers = {"Accept": "application/json"}
            if token:
                headers["Authorization"] = "Bearer " + token
            endpoint = urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(query="", fragment="")).rstrip("/") + QUERY_PATH
            answer = client.http_get_json(endpoint, "query Prometheus at {0}{1}".format(route["url"].rstrip("/"), QUERY_PATH),
                                          query_params=params, headers=headers)
    except ApiFailure as failure:
        raise _capture_error(failure, route, url_path) from failure
    except ValueError as error:   # the proxy answered something that is not JSON
        raise RebalanceError("unable to capture prometheus metrics: the answer through {0} is not JSON ({1})".format(route["path"], error),
                             "Give the base URL of the Prometheus HTTP API (the one that serves /api/v1/query).", path=url_path) from error
    usage = prometheus_usage(answer, str(query), path)
    if nodes is not None:
        require_node_entries(usage, nodes, path)
    return usage


def prometheus_token_from_secret(client: Client, namespace: Optional[str], name: Optional[str],
                                 path: Optional[str] = "metricsProviders.prometheus.authToken.secretReference") -> str:
    """The token in a Secret's `prometheusAuthToken` key, with upstream's messages when it cannot be had."""
    if not namespace or not name:
        raise RebalanceError("prometheus metrics source configuration is missing authentication token secret",
                             "Set both namespace and name of the Secret that holds the token (key {0}).".format(PROMETHEUS_TOKEN_KEY), path=path)
    secret = client.get(client.require_kind("Secret", ""), name, namespace)
    if secret is None:
        raise RebalanceError("unable to get {0}/{1} secret".format(namespace, name),
                             "Create it: kubectl -n {0} create secret generic {1} --from-literal={2}=<token>.".format(namespace, name, PROMETHEUS_TOKEN_KEY),
                             path=path)
    encoded = (secret.get("data") or {}).get(PROMETHEUS_TOKEN_KEY)
    try:
        token = base64.b64decode(encoded).decode("utf-8").strip() if encoded else ""
    except (ValueError, UnicodeDecodeError):
        token = ""
    if not token:
        raise RebalanceError('prometheus authentication token secret missing "{0}" data or empty'.format(PROMETHEUS_TOKEN_KEY),
                             "Put the token under the key {0} of Secret {1}/{2}.".format(PROMETHEUS_TOKEN_KEY, namespace, name), path=path)
    return token


# ------------------------------------------------------------------------------------------ from a policy
def _index_of(items: List[Any], wanted: Any) -> Optional[int]:
    for index, item in enumerate(items):
        if item is wanted:
            return index
    for index, item in enumerate(items):
        if item == wanted:
            return index
    return None


def metrics_utilization(policy: dict, profile: dict) -> Tuple[Optional[dict], str]:
    """The profile's LowNodeUtilization `metricsUtilization` (None when absent or null) and its field path."""
    profiles = list(policy.get("profiles") or [])
    index = _index_of(profiles, profile)
    where = "profiles[{0}]".format(index) if index is not None else "profiles[{0}]".format(profile.get("name"))
    configs = profile.get("pluginConfig") or []
    for position, entry in enumerate(configs):
        if isinstance(entry, dict) and entry.get("name") == LOW_NODE_UTILIZATION:
            path = "{0}.pluginConfig[{1}].args.metricsUtilization".format(where, position)
            return ((entry.get("args") or {}).get("metricsUtilization")), path
    return None, "{0}.pluginConfig".format(where)


def usage_source(metrics: Optional[dict], path: str) -> Optional[str]:
    """KubernetesMetrics, Prometheus or None (requests), chosen as upstream's usageClientForMetrics does: the deprecated
    `metricsServer: true` or `source: KubernetesMetrics` first."""
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        raise RebalanceError("must be a mapping, got {0}".format(type(metrics).__name__), "Give source: KubernetesMetrics or Prometheus.", path=path)
    if metrics.get("metricsServer") is True or metrics.get("source") == KUBERNETES_METRICS:
        return KUBERNETES_METRICS
    if metrics.get("source") == PROMETHEUS:
        return PROMETHEUS
    if metrics.get("source"):
        raise RebalanceError("unrecognized metrics source", "Use source KubernetesMetrics or Prometheus.", path=path + ".source")
    raise RebalanceError("metrics source is empty", "Set source: KubernetesMetrics or Prometheus, or leave metricsUtilization out.",
                         path=path + ".source")


def prometheus_provider(policy: dict) -> Tuple[Optional[dict], str]:
    """The policy's metricsProviders entry with source Prometheus (None when there is none) and its field path."""
    for index, provider in enumerate(policy.get("metricsProviders") or []):
        if isinstance(provider, dict) and provider.get("source") == PROMETHEUS:
            return provider, "metricsProviders[{0}]".format(index)
    return None, "metricsProviders"


def read_actual_usage(client: Client, policy: dict, profile: dict, prometheus_url: Optional[str] = None,
                      prometheus_token: Optional[str] = None, nodes: Optional[Iterable[str]] = None,
                      url_option: str = "prometheus_url") -> Optional[dict]:
    """The actual usage the profile's LowNodeUtilization asks for; None when it has no metricsUtilization (requests).
    Prometheus: the query of `metricsUtilization.prometheus`, the URL `prometheus_url` or the policy's provider's, the
    token `prometheus_token` or the one in the provider's authToken Secret (none without either, and no Secret is read
    when the query goes through the service proxy, which would not pass it on). `nodes`: node names that must each
    have usage (upstream's check), unchecked when None. `url_option`: the caller's option that gives `prometheus_url`, named
    in the fixes."""
    metrics, path = metrics_utilization(policy, profile)
    source = usage_source(metrics, path)
    if source is None:
        return None
    if source == KUBERNETES_METRICS:
        usage = read_metrics_server(client, path + ".source")
        if nodes is not None:
            require_node_entries(usage, nodes, path + ".source")
        return usage
    prometheus = (metrics or {}).get("prometheus")
    if not isinstance(prometheus, dict):
        raise RebalanceError("prometheus property is missing", "Give prometheus.query, a query with one value in [0, 1] per node.",
                             path=path + ".prometheus")
    query = prometheus.get("query")
    if not query:
        raise RebalanceError("prometheus query is missing", FIX_QUERY_SHAPE, path=path + ".prometheus.query")
    provider, provider_path = prometheus_provider(policy)
    settings = (provider or {}).get("prometheus") or {}
    url = prometheus_url or settings.get("url")
    if not url:
        raise RebalanceError("prometheus client not initialized: no metricsProviders entry with source Prometheus and a url",
                             "Add metricsProviders: [{source: Prometheus, prometheus: {url: ..., authToken: {secretReference: {namespace: ..., "
                             "name: ...}}}}], or give " + url_option + ".", path=provider_path + (".prometheus.url" if provider else ""))
    url_path = url_option if prometheus_url else provider_path + ".prometheus.url"
    check_prometheus_url(url, url_path)
    route = dict(prometheus_route(url), url_option=url_option)
    token = prometheus_token
    auth = settings.get("authToken")
    if token is None and auth is not None and route["via"] == "direct":   # the proxy would not pass it on: no Secret read
        reference = (auth or {}).get("secretReference") or {}
        token = prometheus_token_from_secret(client, reference.get("namespace"), reference.get("name"),
                                             provider_path + ".prometheus.authToken.secretReference")
    return query_prometheus(client, url, query, token, nodes=nodes, path=path + ".prometheus.query", url_path=url_path, route=route)
