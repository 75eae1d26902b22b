# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering a bounded VM rebalance policy from options, in the shape and order of the verification policy of the
rebalance procedure (Configure a Bounded VM Rebalance Policy): a profile scoped to the VMs (DefaultEvictor with a label
selector, PodsWithLocalStorage in `defaultDisabled`, PodsWithPVC not in `extraEnabled`) and LowNodeUtilization in `balance`.

Balancing by actual usage adds LowNodeUtilization `metricsUtilization` (the metrics server, or a Prometheus query with
the one threshold resource `MetricResource`) and the policy's `metricsProviders` entry for its source (Prometheus: the
URL and the Secret that holds the token, never the token); `use_deviation_thresholds` makes the thresholds deviations
from the nodes' mean, and `no_eviction_policy: Mandatory` keeps every Pod marked `prefer-no-eviction` (the cooldown)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    API_VERSION,
    DEFAULT_EVICTOR,
    KIND,
    KUBERNETES_METRICS,
    LOW_NODE_UTILIZATION,
    METRIC_RESOURCE,
    PROMETHEUS,
    PROMETHEUS_TOKEN_KEY,
    SECRET_REFERENCE_FIELDS,
    merge_profile,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.validate import (
    ABSOLUTE_HTTP_URL_RE,
    INLINE_CREDENTIAL_RE,
    NO_EVICTION_POLICIES,
    URL_USERINFO_RE,
    go_url_error,
    query_shape_problem,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import check_labels, is_dns_label, is_dns_subdomain

HOSTNAME_LABEL = "kubernetes.io/hostname"
REQUESTS = "requests"
METRICS_SOURCE_CHOICES = (REQUESTS, KUBERNETES_METRICS, PROMETHEUS)
TOKEN_FIX = ("Store the token in a Secret under the key {0} and give that Secret as prometheus_auth_secret {{namespace, name}}: the policy "
             "names it and the descheduler reads it from there.".format(PROMETHEUS_TOKEN_KEY))


def node_selector_for(nodes: Optional[List[str]], node_selector: Optional[str]) -> Optional[str]:
    """`kubernetes.io/hostname in (a,b)` for a node list, else the selector as given."""
    if nodes and node_selector:
        raise InvalidOption("nodes and node_selector are mutually exclusive", "Give the node names or a selector, not both.",
                            path="nodes")
    if nodes:
        return "{0} in ({1})".format(HOSTNAME_LABEL, ",".join(nodes))
    return node_selector or None


def _ordered_thresholds(values: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if values is None:
        return None
    known = [r for r in RESOURCES if r in values]
    return {r: values[r] for r in known + [r for r in values if r not in known]}


def vm_label_selector(vm_labels: Optional[dict], vm_selector: Optional[dict]) -> Optional[dict]:
    if vm_labels and vm_selector:
        raise InvalidOption("vm_labels and vm_selector are mutually exclusive", "Give labels to match, or a whole label selector.",
                            path="vm_labels")
    if vm_labels:
        return {"matchLabels": dict(vm_labels)}
    return dict(vm_selector) if vm_selector else None


def check_options(nodes: Optional[List[str]] = None, vm_labels: Optional[dict] = None,
                  exclude_namespaces: Optional[List[str]] = None) -> None:
    """Names the option (not the rendered policy field) when a node name, VM label or namespace is malformed."""
    for index, node in enumerate(nodes or []):
        if not is_dns_subdomain(str(node)):
            raise InvalidOption("{0!r} is not a valid node name".format(node), "Give node names as kubectl get nodes shows them.",
                                path="nodes[{0}]".format(index))
    try:
        check_labels(vm_labels or {})
    except ValueError as error:
        raise InvalidOption(str(error), "Give the VMs' labels as in spec.template.metadata.labels, e.g. {app: desched-test}.",
                            path="vm_labels") from error
    for index, namespace in enumerate(exclude_namespaces or []):
        if not is_dns_label(str(namespace)):
            raise InvalidOption("{0!r} is not a valid namespace name".format(namespace),
                                "Use lower-case letters, digits and '-', at most 63 characters (RFC 1123 label).",
                                path="exclude_namespaces[{0}]".format(index))


def _check_prometheus_url(url: Any) -> None:
    fix = "Give the URL the descheduler reaches Prometheus at, e.g. https://prometheus-k8s.monitoring.svc:9091."
    if not url:
        raise InvalidOption("not set; metrics_source Prometheus needs the URL of the policy's Prometheus provider", fix, path="prometheus_url")
    if not isinstance(url, str):
        raise InvalidOption("must be a URL string, got {0}".format(type(url).__name__), fix, path="prometheus_url")
    if URL_USERINFO_RE.match(url):  # never echoed: it holds a credential
        raise InvalidOption("the URL carries user information, a credential that would be written into the policy", TOKEN_FIX, path="prometheus_url")
    problem = go_url_error(url)
    if problem:
        raise InvalidOption("the descheduler cannot parse it: {0}".format(problem), fix, path="prometheus_url")
    if not ABSOLUTE_HTTP_URL_RE.match(url):
        raise InvalidOption("{0} is not an absolute http(s) URL with a host".format(url), fix, path="prometheus_url")


def _check_auth_secret(secret: Any) -> None:
    fix = "Give the Secret that holds the token under the key {0}, e.g. {{namespace: descheduler, name: prometheus-token}}.".format(
        PROMETHEUS_TOKEN_KEY)
    if not isinstance(secret, dict):
        raise InvalidOption("must be a mapping with namespace and name, got {0}".format(type(secret).__name__), fix, path="prometheus_auth_secret")
    inline = sorted(str(key) for key in secret if key not in SECRET_REFERENCE_FIELDS and INLINE_CREDENTIAL_RE.search(str(key)))
    if inline:
        raise InvalidOption("{0}: a token is never written into the policy, only the Secret that holds it is named".format(", ".join(inline)),
                            TOKEN_FIX, path="prometheus_auth_secret")
    unknown = sorted(str(key) for key in secret if key not in SECRET_REFERENCE_FIELDS)
    if unknown:
        raise InvalidOption("unknown key{0} {1}".format("s" if len(unknown) > 1 else "", ", ".join(unknown)), fix, path="prometheus_auth_secret")
    if not is_dns_label(str(secret.get("namespace") or "")) or not is_dns_subdomain(str(secret.get("name") or "")):
        raise InvalidOption("needs a namespace (RFC 1123 label) and a name (RFC 1123 subdomain), got {0}/{1}".format(
            secret.get("namespace"), secret.get("name")), fix, path="prometheus_auth_secret")


def check_metrics_options(*, metrics_source: Optional[str] = None, prometheus_query: Optional[str] = None, prometheus_url: Optional[str] = None,
                          prometheus_auth_secret: Optional[dict] = None, thresholds: Optional[Dict[str, Any]] = None,
                          target_thresholds: Optional[Dict[str, Any]] = None, no_eviction_policy: Optional[str] = None) -> None:
    """Names the option when the actual-usage options cannot render a policy the descheduler runs."""
    source = metrics_source or REQUESTS
    if source not in METRICS_SOURCE_CHOICES:
        raise InvalidOption("must be one of {0}, got {1!r}".format(", ".join(METRICS_SOURCE_CHOICES), metrics_source),
                            "Use requests, KubernetesMetrics (the metrics server) or Prometheus (case-sensitive).", path="metrics_source")
    if no_eviction_policy is not None and no_eviction_policy not in NO_EVICTION_POLICIES:
        raise InvalidOption("must be Preferred or Mandatory, got {0!r}".format(no_eviction_policy),
                            "Use Mandatory to keep every marked Pod (the cooldown), or Preferred.", path="no_eviction_policy")
    if source != PROMETHEUS:
        for name, value in (("prometheus_query", prometheus_query), ("prometheus_url", prometheus_url),
                            ("prometheus_auth_secret", prometheus_auth_secret)):
            if value not in (None, "", {}):
                raise InvalidOption("is only used with metrics_source Prometheus (it is {0})".format(source),
                                    "Set metrics_source: Prometheus, or leave {0} out.".format(name), path=name)
        for name, values in (("thresholds", thresholds), ("target_thresholds", target_thresholds)):
            if isinstance(values, dict) and METRIC_RESOURCE in values:
                raise InvalidOption("{0} is measured only by a Prometheus query".format(METRIC_RESOURCE),
                                    "Set metrics_source: Prometheus with prometheus_query, or give cpu, memory and pods.", path=name)
        return
    if not isinstance(prometheus_query, str) or not prometheus_query.strip():
        raise InvalidOption("not set; metrics_source Prometheus balances by this query",
                            "Give a query that returns one sample from 0 to 1 per node labelled instance=<node name>, e.g. "
                            "instance:node_cpu_utilisation:rate1m.", path="prometheus_query")
    shape = query_shape_problem(prometheus_query)
    if shape:
        raise InvalidOption("returns a {0}, and the descheduler takes only an instant vector (one sample per node)".format(shape),
                            "Aggregate the range, e.g. avg by (instance) (rate(...[1m])), or use a recording rule such as "
                            "instance:node_cpu_utilisation:rate1m.", path="prometheus_query")
    _check_prometheus_url(prometheus_url)
    if prometheus_auth_secret is not None:
        _check_auth_secret(prometheus_auth_secret)
    for name, values in (("thresholds", thresholds), ("target_thresholds", target_thresholds)):
        if isinstance(values, dict) and sorted(values) != [METRIC_RESOURCE]:
            raise InvalidOption("with metrics_source Prometheus it names the one resource {0} (percent of the query's value), got {1}".format(
                METRIC_RESOURCE, ", ".join(sorted(values)) or "none"), "Give e.g. {{{0}: 20}}.".format(METRIC_RESOURCE), path=name)


def metrics_utilization_for(metrics_source: Optional[str], prometheus_query: Optional[str]) -> Optional[dict]:
    """LowNodeUtilization `metricsUtilization` for a source; None for requests."""
    if metrics_source == KUBERNETES_METRICS:
        return {"source": KUBERNETES_METRICS}
    if metrics_source == PROMETHEUS:
        return {"source": PROMETHEUS, "prometheus": {"query": prometheus_query}}
    return None


def metrics_providers_for(metrics_source: Optional[str], prometheus_url: Optional[str] = None,
                          prometheus_auth_secret: Optional[dict] = None) -> Optional[List[dict]]:
    """The policy's `metricsProviders` for a source; None for requests."""
    if metrics_source == KUBERNETES_METRICS:
        return [{"source": KUBERNETES_METRICS}]
    if metrics_source != PROMETHEUS:
        return None
    prometheus: Dict[str, Any] = {"url": prometheus_url}
    if prometheus_auth_secret:
        prometheus["authToken"] = {"secretReference": {"namespace": prometheus_auth_secret["namespace"], "name": prometheus_auth_secret["name"]}}
    return [{"source": PROMETHEUS, "prometheus": prometheus}]


def render_profile(*, profile_name: str, node_fit: Optional[bool], vm_labels: Optional[dict] = None, vm_selector: Optional[dict] = None,
                   thresholds: Optional[Dict[str, Any]] = None, target_thresholds: Optional[Dict[str, Any]] = None,
                   exclude_namespaces: Optional[List[str]] = None, eviction_limit_node: Optional[int] = None,
                   use_deviation_thresholds: Optional[bool] = None, no_eviction_policy: Optional[str] = None,
                   metrics_source: Optional[str] = None, prometheus_query: Optional[str] = None) -> dict:
    """The VM profile (see `render_policy`)."""
    evictor: Dict[str, Any] = {}
    if node_fit is not None:
        evictor["nodeFit"] = bool(node_fit)
    selector = vm_label_selector(vm_labels, vm_selector)
    if selector is not None:
        evictor["labelSelector"] = selector
    evictor["podProtections"] = {"defaultDisabled": ["PodsWithLocalStorage"]}
    if no_eviction_policy:
        evictor["noEvictionPolicy"] = no_eviction_policy
    lnu: Dict[str, Any] = {}
    for values, field in ((thresholds, "thresholds"), (target_thresholds, "targetThresholds")):
        if values is not None:
            lnu[field] = _ordered_thresholds(values)
    if use_deviation_thresholds:
        lnu["useDeviationThresholds"] = True
    if exclude_namespaces:
        lnu["evictableNamespaces"] = {"exclude": list(exclude_namespaces)}
    if eviction_limit_node is not None:
        lnu["evictionLimits"] = {"node": eviction_limit_node}
    utilization = metrics_utilization_for(metrics_source, prometheus_query)
    if utilization:
        lnu["metricsUtilization"] = utilization
    return {"name": profile_name,
            "pluginConfig": [{"name": DEFAULT_EVICTOR, "args": evictor}, {"name": LOW_NODE_UTILIZATION, "args": lnu}],
            "plugins": {"balance": {"enabled": [LOW_NODE_UTILIZATION]}}}


def render_top_level(nodes: Optional[List[str]] = None, node_selector: Optional[str] = None, max_pods_to_evict_per_node: Optional[int] = None,
                     max_pods_to_evict_per_namespace: Optional[int] = None, max_pods_to_evict_total: Optional[int] = None,
                     metrics_source: Optional[str] = None, prometheus_url: Optional[str] = None,
                     prometheus_auth_secret: Optional[dict] = None) -> dict:
    top: Dict[str, Any] = {}
    selector = node_selector_for(nodes, node_selector)
    if selector:
        top["nodeSelector"] = selector
    for value, field in ((max_pods_to_evict_per_node, "maxNoOfPodsToEvictPerNode"),
                         (max_pods_to_evict_per_namespace, "maxNoOfPodsToEvictPerNamespace"),
                         (max_pods_to_evict_total, "maxNoOfPodsToEvictTotal")):
        if value is not None:
            top[field] = value
    providers = metrics_providers_for(metrics_source, prometheus_url, prometheus_auth_secret)
    if providers:
        top["metricsProviders"] = providers
    return top


def render_policy(*, profile_name: str, node_fit: Optional[bool], nodes: Optional[List[str]] = None, node_selector: Optional[str] = None,
                  vm_labels: Optional[dict] = None, vm_selector: Optional[dict] = None, thresholds: Optional[Dict[str, Any]] = None,
                  target_thresholds: Optional[Dict[str, Any]] = None, max_pods_to_evict_per_node: Optional[int] = None,
                  max_pods_to_evict_per_namespace: Optional[int] = None, max_pods_to_evict_total: Optional[int] = None,
                  eviction_limit_node: Optional[int] = None, exclude_namespaces: Optional[List[str]] = None,
                  use_deviation_thresholds: Optional[bool] = None, no_eviction_policy: Optional[str] = None,
                  metrics_source: Optional[str] = None, prometheus_query: Optional[str] = None, prometheus_url: Optional[str] = None,
                  prometheus_auth_secret: Optional[dict] = None, merge_into: Optional[dict] = None) -> dict:
    """A DeschedulerPolicy from the module's rendering options (same names; None is an option not set, which
    renders nothing; metrics_source `requests` renders nothing either). With `merge_into` (option `merge`: the
    current policy) its other profiles, the top-level fields not set here and the metrics providers of other
    sources are kept; otherwise the policy holds only the VM profile."""
    check_metrics_options(metrics_source=metrics_source, prometheus_query=prometheus_query, prometheus_url=prometheus_url,
                          prometheus_auth_secret=prometheus_auth_secret, thresholds=thresholds, target_thresholds=target_thresholds,
                          no_eviction_policy=no_eviction_policy)
    profile = render_profile(profile_name=profile_name, node_fit=node_fit, vm_labels=vm_labels, vm_selector=vm_selector,
                             thresholds=thresholds, target_thresholds=target_thresholds, exclude_namespaces=exclude_namespaces,
                             eviction_limit_node=eviction_limit_node, use_deviation_thresholds=use_deviation_thresholds,
                             no_eviction_policy=no_eviction_policy, metrics_source=metrics_source, prometheus_query=prometheus_query)
    top = render_top_level(nodes, node_selector, max_pods_to_evict_per_node, max_pods_to_evict_per_namespace, max_pods_to_evict_total,
                           metrics_source, prometheus_url, prometheus_auth_secret)
    if isinstance(merge_into, dict):
        return merge_profile(merge_into, profile, top)
    policy: Dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    policy.update(top)
    policy["profiles"] = [profile]
    return policy
