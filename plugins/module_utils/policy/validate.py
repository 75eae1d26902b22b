# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules a DeschedulerPolicy must pass before it is applied, each problem as `path: problem. fix`.

Three sets of rules:
- the schema: unknown or mis-cased keys (the descheduler's decoder silently drops them), types, names;
- upstream validation (descheduler v0.36), with its messages verbatim: the policy's (`metricsProviders`, one
  per source, the Prometheus URL and token Secret), LowNodeUtilization's (thresholds; `metricsUtilization`: what
  may be combined, the Prometheus query and its single `MetricResource` threshold) and the errors the plugin or
  its metrics client fail with when the descheduler starts (`prometheus client not initialized`, ...);
- the rebalance procedure's rules for a profile that moves VMs: `PodsWithLocalStorage` stays disabled,
  `PodsWithPVC` not in `extraEnabled`, a non-empty label selector, thresholds below target thresholds by a
  minimum gap, eviction limits set and not above KubeVirt's parallel migration limits, and a node selector
  that leaves control-plane nodes out.

And ours for actual usage: a Prometheus token is a Secret reference, never written into the policy (an inline
token, password or URL user information is refused without echoing it); a query the descheduler would refuse
for its shape (a range vector or a scalar) is refused before it runs.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import (
    DEFAULT_PROTECTIONS,
    DEPRECATED_FIELDS,
    EXTENSION_POINTS,
    EXTRA_PROTECTIONS,
    protections,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    API_VERSION,
    AUTH_TOKEN_FIELDS,
    DEFAULT_EVICTOR,
    EVICTABLE_NAMESPACES_FIELDS,
    EVICTION_LIMITS_FIELDS,
    KIND,
    KUBERNETES_METRICS,
    LABEL_SELECTOR_FIELDS,
    LIMIT_FIELDS,
    LOW_NODE_UTILIZATION,
    METRIC_RESOURCE,
    METRICS_COLLECTOR_FIELDS,
    METRICS_PROVIDER_FIELDS,
    METRICS_SOURCES,
    METRICS_UTILIZATION_FIELDS,
    PLUGIN_ARGS,
    PLUGIN_CONFIG_FIELDS,
    PLUGIN_SET_FIELDS,
    PLUGINS,
    POD_PROTECTIONS_FIELDS,
    PROFILE_FIELDS,
    PROMETHEUS,
    PROMETHEUS_PROVIDER_FIELDS,
    PROMETHEUS_QUERY_FIELDS,
    PROMETHEUS_TOKEN_KEY,
    SECRET_REFERENCE_FIELDS,
    TOP_LEVEL_FIELDS,
    PolicyInvalid,
    enabled_plugins,
    metrics_provider,
    metrics_source,
    metrics_utilization,
    plugin_config,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import CONTROL_PLANE_LABELS
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import (
    check_labels,
    is_dns_label,
    is_dns_subdomain,
    matches_selector_string,
    parse_label_selector,
)

DEFAULT_MIN_GAP = 5
KUBEVIRT_DEFAULT_LIMITS = {"parallel_migrations_per_cluster": 5, "parallel_outbound_migrations_per_node": 2}
NO_EVICTION_POLICIES = ("Preferred", "Mandatory")
# a key beside the known ones whose name says it holds a credential (checked only for scalar values: a misplaced
# mapping such as authToken is an unknown field like any other)
INLINE_CREDENTIAL_RE = re.compile(r"token|bearer|passw|credential|api_?key", re.IGNORECASE)
SECRET_FIX = ("The descheduler reads the Prometheus token only from a Secret, and one written into the policy sits in plain text in its "
              "ConfigMap: remove it, store the token in a Secret under the key {0} and name that Secret in the Prometheus provider's "
              "authToken.secretReference {{namespace, name}} (option prometheus_auth_secret).".format(PROMETHEUS_TOKEN_KEY))
PROMETHEUS_PROVIDER_EXAMPLE = ("metricsProviders: [{source: Prometheus, prometheus: {url: https://prometheus-k8s.monitoring.svc:9091, "
                               "authToken: {secretReference: {namespace: descheduler, name: prometheus-token}}}}]")
URL_USERINFO_RE = re.compile(r"^[^/?#]*//[^/?#]*@")
# what the Prometheus client can query: Go's url.Parse also takes an opaque or relative URL
ABSOLUTE_HTTP_URL_RE = re.compile(r"^https?://[^/?#]+", re.IGNORECASE)
# a host character Go's url.Parse refuses (`invalid character " " in host name`); %-escapes are checked apart
HOST_CHARS_RE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:\[\]<>\"%\x80-\U0010ffff]")
BAD_ESCAPE_RE = re.compile(r"%(?![0-9A-Fa-f]{2})")
NUMBER_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def _go_list(values: Sequence[Any]) -> str:
    """A list the way Go's %v prints a []string: `[a b]`."""
    return "[{0}]".format(" ".join(str(v) for v in values))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def go_quote(text: str) -> str:
    """`text` as Go's %q writes it (printable characters as they are)."""
    escaped = []
    for char in text:
        if char in ('"', "\\"):
            escaped.append("\\" + char)
        elif char == "\n":
            escaped.append("\\n")
        elif char == "\t":
            escaped.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7f:
            escaped.append("\\x{0:02x}".format(ord(char)))
        else:
            escaped.append(char)
    return '"{0}"'.format("".join(escaped))


def _go_scheme(url: str) -> Tuple[str, str]:
    """Go's getScheme: (scheme, rest); ValueError for a URL that starts with a colon."""
    for index, char in enumerate(url):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if index == 0:
                return "", url
            continue
        if char == ":":
            if index == 0:
                raise ValueError("missing protocol scheme")
            return url[:index].lower(), url[index + 1:]
        return "", url
    return "", url


def _go_host_error(host: str) -> Optional[str]:
    """Go's parseHost: a non-numeric port, an unclosed IPv6 bracket, a character no host name has, a bad %-escape."""
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            return "missing ']' in host"
        port = host[close + 1:]
    else:
        colon = host.rfind(":")
        port = host[colon:] if colon >= 0 else ""
    if port and not (port.startswith(":") and all(char in "0123456789" for char in port[1:])):
        return "invalid port {0} after host".format(go_quote(port))
    bad = BAD_ESCAPE_RE.search(host)
    if bad:
        return "invalid URL escape {0}".format(go_quote(host[bad.start():bad.start() + 3]))
    char = HOST_CHARS_RE.search(host)
    if char:
        return "invalid character {0} in host name".format(go_quote(char.group(0)))
    return None


def go_url_error(url: str) -> Optional[str]:
    """What Go's url.Parse (with which the descheduler reads the Prometheus provider's URL) says about `url`, as its
    error prints (`parse "<url>": <why>`); None when it parses. The errors a typed URL meets: a control character,
    a missing scheme, a colon in the first path segment, a bad port or host character, a bad %-escape."""
    before_fragment = url.split("#", 1)[0]

    def error(why: str) -> str:
        return "parse {0}: {1}".format(go_quote(before_fragment), why)
    if any(ord(char) < 0x20 or ord(char) == 0x7f for char in before_fragment):
        return error("net/url: invalid control character in URL")
    try:
        scheme, rest = _go_scheme(before_fragment)
    except ValueError as problem:
        return error(str(problem))
    rest = rest.split("?", 1)[0]
    if not rest.startswith("/"):
        if scheme:
            return None  # opaque: Go accepts it (and the Prometheus client fails on it later; our own rule says so)
        if ":" in rest.split("/", 1)[0]:
            return error("first path segment in URL cannot contain colon")
    if rest.startswith("//"):
        authority, _slash, rest = rest[2:].partition("/")
        rest = "/" + rest
        host_error = _go_host_error(authority.rpartition("@")[2])
        if host_error:
            return error(host_error)
    bad = BAD_ESCAPE_RE.search(rest)
    if bad:
        return error("invalid URL escape {0}".format(go_quote(rest[bad.start():bad.start() + 3])))
    return None


class Checker:
    """Collects problems (errors) and findings while walking one policy."""

    def __init__(self) -> None:
        self.errors: List[dict] = []
        self.findings: List[dict] = []

    def error(self, path: str, problem: str, fix: str) -> None:
        self.errors.append({"path": path, "problem": problem, "fix": fix})

    def finding(self, code: str, path: str, message: str) -> None:
        self.findings.append({"code": code, "severity": "warning", "path": path, "message": "{0}: {1}".format(path, message)})

    # ---------------------------------------------------------------------------------- schema
    def keys(self, obj: Any, path: str, known: Sequence[str], what: str) -> bool:
        """Unknown or mis-cased keys of a mapping; False when `obj` is not a mapping at all."""
        if obj is None:
            return False
        if not isinstance(obj, dict):
            self.error(path, "{0} must be a mapping, got {1}".format(what, type(obj).__name__), "Write it as key: value pairs.")
            return False
        lower = {k.lower(): k for k in known}
        for key in obj:
            if key in known:
                continue
            right = lower.get(str(key).lower())
            where = "{0}.{1}".format(path, key) if path else str(key)
            if right:
                self.error(where, "unknown field (keys are case-sensitive); the descheduler silently drops it",
                           "Write it as {0}.".format(right))
            else:
                self.error(where, "unknown field in {0}; the descheduler silently drops it".format(what),
                           "Remove it, or use one of: {0}.".format(", ".join(known)))
        return True

    def count(self, obj: dict, field: str, path: str) -> None:
        if field in obj and obj[field] is not None and not _is_count(obj[field]):
            self.error(path, "must be a whole number of Pods, 0 or more, got {0!r}".format(obj[field]),
                       "Give an integer such as 1, or leave it out for no limit.")


# ------------------------------------------------------------------------------------------ rules
def _check_top(check: Checker, policy: dict) -> None:
    if "prometheus" in policy:  # a development-era field (never in a release): the provider is an entry of metricsProviders
        check.error("prometheus", "unknown field in DeschedulerPolicy (v0.36 reads Prometheus from metricsProviders); the descheduler "
                    "silently drops it", "Move it into {0}.".format(PROMETHEUS_PROVIDER_EXAMPLE))
    check.keys({k: v for k, v in policy.items() if k != "prometheus"}, "", TOP_LEVEL_FIELDS, "DeschedulerPolicy")
    if policy.get("apiVersion") != API_VERSION:
        check.error("apiVersion", 'must be "{0}", got {1!r}'.format(API_VERSION, policy.get("apiVersion")),
                    'Set apiVersion: "{0}"; the package reads no other version.'.format(API_VERSION))
    if policy.get("kind") != KIND:
        check.error("kind", 'must be "{0}", got {1!r}'.format(KIND, policy.get("kind")), 'Set kind: "{0}".'.format(KIND))
    for field in LIMIT_FIELDS:
        check.count(policy, field, field)
    selector = policy.get("nodeSelector")
    if selector is not None:
        if not isinstance(selector, str):
            check.error("nodeSelector", "must be a label selector string, got {0}".format(type(selector).__name__),
                        'Write it as a string, e.g. "kubernetes.io/hostname in (worker-a,worker-b)".')
        else:
            try:
                parse_label_selector(selector)
            except ValueError as error:
                check.error("nodeSelector", "not a label selector: {0}".format(error),
                            'Use the label-selector syntax, e.g. "kubernetes.io/hostname in (worker-a,worker-b)".')
    profiles = policy.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        check.error("profiles", "no profiles: the descheduler does nothing", "Add a profile with a plugin enabled in balance or deschedule.")


# ------------------------------------------------------------------------------------------ actual usage
def metrics_keys(check: Checker, obj: Any, path: str, known: Sequence[str], what: str) -> bool:
    """`Checker.keys`, except that an unknown key with a scalar value whose name says it holds a credential (token,
    bearerToken, password, ...) is refused with the Secret-reference fix; the value is never echoed."""
    if isinstance(obj, dict):
        inline = [key for key, value in obj.items() if key not in known and not isinstance(value, (dict, list))
                  and INLINE_CREDENTIAL_RE.search(str(key))]
        for key in inline:
            check.error("{0}.{1}".format(path, key), "a credential written into the policy: the descheduler never reads it from here", SECRET_FIX)
        obj = {key: value for key, value in obj.items() if key not in inline}
    return check.keys(obj, path, known, what)


def _check_metrics_collector(check: Checker, policy: dict) -> bool:
    """The deprecated `metricsCollector`; whether it is enabled."""
    collector = policy.get("metricsCollector")
    if not check.keys(collector, "metricsCollector", METRICS_COLLECTOR_FIELDS, "metricsCollector"):
        return False
    enabled = collector.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        check.error("metricsCollector.enabled", "must be true or false, got {0!r}".format(enabled), "Write true or false, or leave it out.")
        return False
    if enabled:
        check.finding("deprecated_metrics_collector", "metricsCollector", "deprecated; use metricsProviders: [{source: KubernetesMetrics}]")
    return bool(enabled)


def _check_secret_reference(check: Checker, token: Any, where: str) -> None:
    if not isinstance(token, dict):
        check.error(where, "a token written into the policy (authToken must be a mapping with secretReference)", SECRET_FIX)
        return
    if not metrics_keys(check, token, where, AUTH_TOKEN_FIELDS, "authToken"):
        return
    reference = token.get("secretReference")
    if reference is None:
        check.error(where + ".secretReference", "prometheus authToken secret is expected to be set when authToken field is",
                    "Name the Secret that holds the token (key {0}): secretReference: {{namespace: descheduler, name: prometheus-token}}; or "
                    "remove authToken, and the descheduler uses its service account's token.".format(PROMETHEUS_TOKEN_KEY))
        return
    if not metrics_keys(check, reference, where + ".secretReference", SECRET_REFERENCE_FIELDS, "secretReference"):
        return
    namespace, name = reference.get("namespace"), reference.get("name")
    if not namespace or not name:
        check.error(where + ".secretReference", "prometheus authToken secret reference does not set both namespace and name",
                    "Give both, e.g. {{namespace: descheduler, name: prometheus-token}}; the Secret holds the token under the key "
                    "{0}.".format(PROMETHEUS_TOKEN_KEY))
    elif not is_dns_label(str(namespace)) or not is_dns_subdomain(str(name)):
        check.error(where + ".secretReference", "{0}/{1} is not a valid Secret reference".format(namespace, name),
                    "Give the namespace (an RFC 1123 label) and the name (an RFC 1123 subdomain) of the Secret as kubectl shows them.")


def _check_prometheus_url(check: Checker, url: Any, where: str) -> None:
    fix = "Give the URL the descheduler reaches Prometheus at, e.g. https://prometheus-k8s.monitoring.svc:9091 (option prometheus_url)."
    if url in (None, ""):
        check.error(where, "prometheus URL is required when prometheus is enabled", fix)
    elif not isinstance(url, str):
        check.error(where, "must be a URL string, got {0}".format(type(url).__name__), fix)
    elif URL_USERINFO_RE.match(url):  # user:password@host: a credential inline, and Go's error would print it
        check.error(where, "the URL carries user information, a credential written into the policy", SECRET_FIX)
    else:
        problem = go_url_error(url)
        if problem:
            check.error(where, "error parsing prometheus URL: {0}".format(problem), fix)
        elif not ABSOLUTE_HTTP_URL_RE.match(url):
            check.error(where, "{0} is not an absolute http(s) URL with a host; the Prometheus client cannot query it".format(go_quote(url)), fix)


def _check_metrics_providers(check: Checker, policy: dict) -> None:
    """The top-level providers (pkg/descheduler's validation, v0.36): one per source, the Prometheus URL, the token Secret."""
    collector_enabled = _check_metrics_collector(check, policy)
    providers = policy.get("metricsProviders")
    if providers is None:
        return
    if not isinstance(providers, list):
        check.error("metricsProviders", "must be a list of providers, got {0}".format(type(providers).__name__),
                    "Write it as a list, e.g. metricsProviders: [{source: KubernetesMetrics}].")
        return
    seen: Dict[str, int] = {}
    for index, provider in enumerate(providers):
        where = "metricsProviders[{0}]".format(index)
        if not metrics_keys(check, provider, where, METRICS_PROVIDER_FIELDS, "a metrics provider"):
            if provider is None:
                check.error(where, "a metrics provider must be a mapping, got null", "Give source (and for Prometheus, prometheus).")
            continue
        source = provider.get("source")
        if source not in METRICS_SOURCES:
            check.error(where + ".source", "must be KubernetesMetrics or Prometheus, got {0!r}".format(source),
                        "Use KubernetesMetrics (the metrics server) or Prometheus (names are case-sensitive).")
            continue
        if source in seen:
            check.error(where + ".source", 'metric provider "{0}" is already configured, each source can be configured only once'.format(source),
                        "Keep one entry per source (metricsProviders[{0}] is the first).".format(seen[source]))
            continue
        seen[source] = index
        prometheus = provider.get("prometheus")
        if source == PROMETHEUS:
            if prometheus is None:
                check.error(where + ".prometheus.url", "prometheus URL is required when prometheus is enabled",
                            "Give the provider's URL: {0}.".format(PROMETHEUS_PROVIDER_EXAMPLE))
            elif metrics_keys(check, prometheus, where + ".prometheus", PROMETHEUS_PROVIDER_FIELDS, "the Prometheus provider"):
                _check_prometheus_url(check, prometheus.get("url"), where + ".prometheus.url")
                if prometheus.get("authToken") is not None:
                    _check_secret_reference(check, prometheus["authToken"], where + ".prometheus.authToken")
        elif prometheus is not None:
            check.finding("prometheus_ignored", where + ".prometheus", "ignored with source KubernetesMetrics")
    if providers and collector_enabled:
        check.error("metricsCollector.enabled", "it is not allowed to combine metrics provider when metrics collector is enabled",
                    "Remove metricsCollector (deprecated) and keep metricsProviders: [{source: KubernetesMetrics}].")


def query_shape_problem(query: str) -> Optional[str]:
    """What a Prometheus query returns when that is not an instant vector (the descheduler refuses anything else):
    `matrix` for a range selector or subquery at the outside, `scalar` or `string` for a literal; None otherwise."""
    text = query.strip()
    if text.endswith("]"):
        return "matrix"
    if NUMBER_RE.match(text):
        return "scalar"
    if text[:1] in ('"', "'", "`"):
        return "string"
    return None


def _check_prometheus_query(check: Checker, prometheus: Any, where: str) -> None:
    query = prometheus.get("query") if isinstance(prometheus, dict) else None
    example = ("Give a query that returns one sample from 0 to 1 per node, labelled instance=<node name>, e.g. "
               "instance:node_cpu_utilisation:rate1m (option prometheus_query).")
    if not isinstance(query, str) or not query.strip():
        check.error(where + ".prometheus.query", 'prometheus query is required when metrics source is set to "{0}"'.format(PROMETHEUS), example)
        return
    shape = query_shape_problem(query)
    if shape:
        check.error(where + ".prometheus.query", 'the query is refused by the descheduler at every run: expected query results to be of type '
                    '"vector", got "{0}" instead'.format(shape), example)


def _check_metrics_utilization(check: Checker, args: dict, path: str) -> None:
    """LowNodeUtilization `metricsUtilization` (nodeutilization's validation and plugin setup, v0.36), and a
    MetricResource threshold without the Prometheus source that measures it."""
    utilization = args.get("metricsUtilization")
    if metrics_keys(check, utilization, path + ".metricsUtilization", METRICS_UTILIZATION_FIELDS, "metricsUtilization"):
        _check_utilization_fields(check, args, utilization, path)
        if utilization.get("source") == PROMETHEUS:
            return
    for field in ("thresholds", "targetThresholds"):
        if isinstance(args.get(field), dict) and METRIC_RESOURCE in args[field]:
            check.error("{0}.{1}.{2}".format(path, field, METRIC_RESOURCE), "only a Prometheus query measures MetricResource",
                        "Set metricsUtilization.source: Prometheus with a query (metrics_source: Prometheus), or use cpu, memory and pods.")


def _check_utilization_fields(check: Checker, args: dict, utilization: dict, path: str) -> None:
    where = path + ".metricsUtilization"
    server, source, prometheus = utilization.get("metricsServer"), utilization.get("source"), utilization.get("prometheus")
    if server is not None and not isinstance(server, bool):
        check.error(where + ".metricsServer", "must be true or false, got {0!r}".format(server), "Write true or false, or leave it out.")
    if prometheus is not None:
        metrics_keys(check, prometheus, where + ".prometheus", PROMETHEUS_QUERY_FIELDS, "metricsUtilization.prometheus")
    if source not in (None, "") + METRICS_SOURCES:
        check.error(where + ".source", "unrecognized metrics source",
                    "Use KubernetesMetrics (the metrics server) or Prometheus (case-sensitive), or remove metricsUtilization to balance by requests.")
        return
    if server is True:
        check.finding("deprecated_metrics_server", where + ".metricsServer", "deprecated; use source: KubernetesMetrics")
    if source == KUBERNETES_METRICS and server is True:
        check.error(where + ".metricsServer", 'it is not allowed to set both "{0}" source and metricsServer'.format(KUBERNETES_METRICS),
                    "Remove metricsServer (deprecated): source KubernetesMetrics reads the metrics server.")
    if source == KUBERNETES_METRICS and prometheus is not None:
        check.error(where + ".prometheus", 'prometheus configuration is not allowed to set when source is set to "{0}"'.format(KUBERNETES_METRICS),
                    "Remove prometheus, or set source: Prometheus to balance by the query.")
    if source == PROMETHEUS:
        if server is True:  # upstream reads the metrics server first, yet checks the thresholds for the query: nothing works
            check.error(where + ".metricsServer", "metricsServer with source Prometheus: the descheduler reads the metrics server, not the query",
                        "Remove metricsServer.")
        _check_prometheus_query(check, prometheus, where)
        for field in ("thresholds", "targetThresholds"):
            values = args.get(field)
            if isinstance(values, dict) and values and sorted(values) != [METRIC_RESOURCE]:
                check.error("{0}.{1}".format(path, field), '{0} are expected to specify a single instance of "{1}" resource, got {2} instead'.format(
                    field, METRIC_RESOURCE, _go_list(sorted(values))),
                    "With source Prometheus give the one resource MetricResource (percent of the query's value), e.g. {0}: {{{1}: 20}}.".format(
                        field, METRIC_RESOURCE))
    elif not source and server is not True:
        check.error(where, "metrics source is empty",
                    "Set source: KubernetesMetrics or Prometheus (metrics_source), or remove metricsUtilization to balance by requests.")


def _check_metrics_clients(check: Checker, policy: dict, profile: dict, path: str, collector_enabled: bool) -> None:
    """The clients the descheduler builds from the top-level providers: a profile that reads a source without them
    fails when the plugin is created (upstream's words), and so the whole run; a plugin not enabled is never created."""
    if LOW_NODE_UTILIZATION not in enabled_plugins(profile, "balance"):
        return
    utilization = metrics_utilization(profile)
    source = metrics_source(utilization)
    where = _lnu_path(profile, path) + ".metricsUtilization"
    if source == PROMETHEUS and metrics_provider(policy, PROMETHEUS) is None:
        check.error(where + ".source", "prometheus client not initialized (metricsProviders has no source Prometheus)",
                    "Add the provider: {0} (options prometheus_url, prometheus_auth_secret).".format(PROMETHEUS_PROVIDER_EXAMPLE))
    elif source == KUBERNETES_METRICS and metrics_provider(policy, KUBERNETES_METRICS) is None and not collector_enabled:
        check.error(where + (".metricsServer" if utilization.get("metricsServer") is True else ".source"),
                    "metrics client not initialized (metricsProviders has no source KubernetesMetrics)",
                    "Add metricsProviders: [{source: KubernetesMetrics}] (the metrics server, metrics.k8s.io).")


def _check_protections(check: Checker, args: dict, path: str) -> None:
    pod_protections = args.get("podProtections")
    if not check.keys(pod_protections, path + ".podProtections", POD_PROTECTIONS_FIELDS, "podProtections"):
        pod_protections = {}
    deprecated = [f for f, _p, _e in DEPRECATED_FIELDS if f in args]
    for field, valid in (("defaultDisabled", DEFAULT_PROTECTIONS), ("extraEnabled", EXTRA_PROTECTIONS)):
        values = pod_protections.get(field) or []
        where = "{0}.podProtections.{1}".format(path, field)
        if not isinstance(values, list):
            check.error(where, "must be a list of protection names", "Write it as a YAML list.")
            continue
        upstream = "DefaultDisabled" if field == "defaultDisabled" else "ExtraEnabled"
        for index, name in enumerate(values):
            if name not in valid:
                check.error("{0}[{1}]".format(where, index),
                            'invalid pod protection policy in {0}: "{1}". Valid options are: {2}'.format(upstream, name, _go_list(valid)),
                            "Use one of {0} (names are case-sensitive).".format(", ".join(valid)))
        if len(set(map(str, values))) != len(values):
            check.error(where, "PodProtections.{0} contains duplicate entries".format(upstream), "List each protection once.")
        if values and deprecated:
            check.error(path, "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or PodProtections.DefaultDisabled",
                        "Remove {0} and express them in podProtections.".format(", ".join(deprecated)))
            deprecated = []
    policy_value = args.get("noEvictionPolicy")
    if policy_value is not None and policy_value not in NO_EVICTION_POLICIES:
        check.error(path + ".noEvictionPolicy", "must be Preferred or Mandatory, got {0!r}".format(policy_value),
                    "Use Preferred or Mandatory (case-sensitive), or leave it out.")


def _check_thresholds(check: Checker, args: dict, path: str) -> None:
    thresholds = args.get("thresholds")
    targets = args.get("targetThresholds")
    deviation = bool(args.get("useDeviationThresholds"))
    before = len(check.errors)
    for field, values in (("thresholds", thresholds), ("targetThresholds", targets)):
        where = "{0}.{1}".format(path, field)
        if not values:
            if field == "thresholds" or not deviation:
                check.error(where, "{0} config is not valid: no resource threshold is configured".format(field),
                            "Give a percentage per resource, e.g. cpu: 70, memory: 60, pods: 20.")
            continue
        if not isinstance(values, dict):
            check.error(where, "must map resource names to percentages", "Write it as resource: percent, e.g. memory: 60.")
            continue
        for resource, percent in values.items():
            if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not 0 <= percent <= 100:
                check.error("{0}.{1}".format(where, resource), "{0} config is not valid: {1} threshold not in [0, 100] range".format(field, resource),
                            "Give a number from 0 to 100 (a percentage of the node's allocatable).")
    if len(check.errors) == before and isinstance(thresholds, dict) and isinstance(targets, dict) and thresholds and targets:
        if set(thresholds) != set(targets):
            check.error(path + ".targetThresholds", "thresholds and targetThresholds configured different resources",
                        "Give both the same resources (now {0} and {1}).".format(", ".join(sorted(thresholds)), ", ".join(sorted(targets))))
        elif not deviation:
            for resource in thresholds:
                low, high = thresholds[resource], targets[resource]
                if _number(low) and _number(high) and low > high:
                    check.error("{0}.thresholds.{1}".format(path, resource),
                                "thresholds' {0} percentage is greater than targetThresholds'".format(resource),
                                "Lower thresholds.{0} ({1}) below targetThresholds.{0} ({2}).".format(resource, low, high))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_lnu(check: Checker, args: dict, path: str) -> None:
    _check_thresholds(check, args, path)
    _check_metrics_utilization(check, args, path)
    namespaces = args.get("evictableNamespaces")
    if check.keys(namespaces, path + ".evictableNamespaces", EVICTABLE_NAMESPACES_FIELDS, "evictableNamespaces"):
        if namespaces.get("include"):
            check.error(path + ".evictableNamespaces.include", "only Exclude namespaces can be set, inclusion is not supported",
                        "Use exclude, or scope the VMs with DefaultEvictor.labelSelector.")
    limits = args.get("evictionLimits")
    if check.keys(limits, path + ".evictionLimits", EVICTION_LIMITS_FIELDS, "evictionLimits"):
        check.count(limits, "node", path + ".evictionLimits.node")


def _check_match_labels(check: Checker, labels: Any, path: str) -> None:
    if not isinstance(labels, dict):
        return
    try:
        check_labels(labels)
    except ValueError as error:
        check.error(path, str(error), "Use label keys and values as Kubernetes accepts them, e.g. app: desched-test.")


def _check_profile(check: Checker, profile: Any, index: int, names: Dict[str, int]) -> Optional[Tuple[str, dict]]:
    path = "profiles[{0}]".format(index)
    if not check.keys(profile, path, PROFILE_FIELDS, "a profile"):
        if profile is None:
            check.error(path, "a profile must be a mapping, got null", "Give name, pluginConfig and plugins.")
        return None
    name = profile.get("name")
    if not name or not isinstance(name, str):
        check.error(path + ".name", "a profile needs a name", "Give it a name, e.g. vm-rebalance.")
        name = "#{0}".format(index)
    elif name in names:
        check.error(path + ".name", "profile name {0!r} is used by profiles[{1}] too".format(name, names[name]), "Give each profile its own name.")
    names.setdefault(name, index)
    configured = []
    for position, entry in enumerate(profile.get("pluginConfig") or []):
        where = "{0}.pluginConfig[{1}]".format(path, position)
        if not check.keys(entry, where, PLUGIN_CONFIG_FIELDS, "a pluginConfig entry"):
            continue
        plugin = entry.get("name")
        if plugin not in PLUGINS:
            check.error(where + ".name", "in profile {0}: plugin {1} in pluginConfig not registered".format(name, plugin),
                        "Use one of the in-tree plugins: {0}.".format(", ".join(sorted(PLUGINS))))
            continue
        configured.append(plugin)
        args = entry.get("args") or {}
        if plugin in PLUGIN_ARGS and check.keys(args, where + ".args", PLUGIN_ARGS[plugin], "{0} args".format(plugin)):
            if plugin == DEFAULT_EVICTOR:
                _check_protections(check, args, where + ".args")
                for field in ("labelSelector", "namespaceLabelSelector"):
                    if check.keys(args.get(field), "{0}.args.{1}".format(where, field), LABEL_SELECTOR_FIELDS, "a label selector"):
                        _check_match_labels(check, args[field].get("matchLabels"), "{0}.args.{1}.matchLabels".format(where, field))
            elif plugin == LOW_NODE_UTILIZATION:
                _check_lnu(check, args, where + ".args")
    plugins = profile.get("plugins")
    if check.keys(plugins, path + ".plugins", EXTENSION_POINTS, "plugins"):
        for point in EXTENSION_POINTS:
            if not check.keys(plugins.get(point), "{0}.plugins.{1}".format(path, point), PLUGIN_SET_FIELDS, "a plugin set"):
                continue
            wrong = [p for p in enabled_plugins(profile, point) if point not in PLUGINS.get(p, ())]
            if wrong:
                check.error("{0}.plugins.{1}.enabled".format(path, point),
                            'profile "{0}" configures {1} extension point of non-existing plugins: {2}'.format(name, point, _go_list(wrong)),
                            "Enable there only plugins that implement {0}: {1}.".format(
                                point, ", ".join(sorted(p for p, points in PLUGINS.items() if point in points))))
    return name, profile


def _evicts(profile: dict) -> bool:
    return bool(enabled_plugins(profile, "balance") or enabled_plugins(profile, "deschedule"))


def _evictor_path(profile: dict, path: str) -> str:
    for position, entry in enumerate(profile.get("pluginConfig") or []):
        if isinstance(entry, dict) and entry.get("name") == DEFAULT_EVICTOR:
            return "{0}.pluginConfig[{1}].args".format(path, position)
    return "{0}.pluginConfig".format(path)


def _lnu_path(profile: dict, path: str) -> str:
    for position, entry in enumerate(profile.get("pluginConfig") or []):
        if isinstance(entry, dict) and entry.get("name") == LOW_NODE_UTILIZATION:
            return "{0}.pluginConfig[{1}].args".format(path, position)
    return "{0}.pluginConfig".format(path)


def _check_vm_profile(check: Checker, policy: dict, profile: dict, path: str, min_gap: int, limits: dict) -> None:
    evictor = plugin_config(profile, DEFAULT_EVICTOR)
    where = _evictor_path(profile, path)
    active = protections(evictor if isinstance(evictor, dict) else {})
    if "PodsWithLocalStorage" in active:
        check.error(where + ".podProtections.defaultDisabled",
                    "PodsWithLocalStorage is protected: every virt-launcher Pod has emptyDir volumes, so no VM is ever evicted",
                    "Keep PodsWithLocalStorage in podProtections.defaultDisabled of a VM profile.")
    if "PodsWithPVC" in active:
        check.error(where + ".podProtections.extraEnabled",
                    "PodsWithPVC is protected: launchers of PVC-backed VMs are skipped, so no VM will ever move",
                    "Remove PodsWithPVC from extraEnabled in the profile scoped to the VMs.")
    selector = (evictor or {}).get("labelSelector") if isinstance(evictor, dict) else None
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        check.error(where + ".labelSelector", "empty or missing: the profile may evict any Pod on the nodes, not only the VMs",
                    "Scope the profile to the VMs with a label of their spec.template.metadata.labels (vm_labels or vm_selector).")
    lnu = plugin_config(profile, LOW_NODE_UTILIZATION)
    if isinstance(lnu, dict) and not lnu.get("useDeviationThresholds"):
        thresholds, targets = lnu.get("thresholds"), lnu.get("targetThresholds")
        if isinstance(thresholds, dict) and isinstance(targets, dict):
            for resource, low in thresholds.items():
                high = targets.get(resource)
                if _number(low) and _number(high) and low <= high and high - low < min_gap:
                    check.error("{0}.targetThresholds.{1}".format(_lnu_path(profile, path), resource),
                                "{0} is only {1:g} above thresholds.{2} ({3}): moving one VM can make two nodes swap categories "
                                "(flapping)".format(high, high - low, resource, low),
                                "Keep targetThresholds at least {0} points above thresholds (min_threshold_gap), e.g. "
                                "thresholds.{1}: {2:g}.".format(min_gap, resource, max(0, high - min_gap)))
    per_node = [v for v in (policy.get("maxNoOfPodsToEvictPerNode"), ((lnu or {}).get("evictionLimits") or {}).get("node")
                            if isinstance(lnu, dict) else None) if _is_count(v)]
    node_cap = limits["parallel_outbound_migrations_per_node"]
    cluster_cap = limits["parallel_migrations_per_cluster"]
    if not per_node:
        check.error("maxNoOfPodsToEvictPerNode", "not set: every VM on an overutilized node may be asked to migrate in one run",
                    "Set maxNoOfPodsToEvictPerNode (or LowNodeUtilization evictionLimits.node) to at most {0}, "
                    "KubeVirt's parallelOutboundMigrationsPerNode.".format(node_cap))
    elif min(per_node) > node_cap:
        check.error("maxNoOfPodsToEvictPerNode", "{0} is above KubeVirt's parallelOutboundMigrationsPerNode ({1})".format(min(per_node), node_cap),
                    "Lower it to {0} or less; extra requests only queue as pending migrations.".format(node_cap))
    total = policy.get("maxNoOfPodsToEvictTotal")
    if not _is_count(total):
        check.error("maxNoOfPodsToEvictTotal", "not set: a run may request any number of migrations",
                    "Set maxNoOfPodsToEvictTotal to at most {0}, KubeVirt's parallelMigrationsPerCluster.".format(cluster_cap))
    elif total > cluster_cap:
        check.error("maxNoOfPodsToEvictTotal", "{0} is above KubeVirt's parallelMigrationsPerCluster ({1})".format(total, cluster_cap),
                    "Lower it to {0} or less.".format(cluster_cap))


def _check_nodes(check: Checker, policy: dict, nodes: Optional[List[dict]]) -> None:
    selector = policy.get("nodeSelector")
    if not selector:
        check.error("nodeSelector", "not set: every node is classified and used as an eviction source, control-plane nodes included",
                    "Set nodes (or node_selector) to the workers that run the VMs.")
        return
    if nodes is None or not isinstance(selector, str):
        return
    try:
        requirements = parse_label_selector(selector)
    except ValueError:
        return
    selected = [n for n in nodes if matches_selector_string(requirements, (n.get("metadata") or {}).get("labels"))]
    control = [(n.get("metadata") or {}).get("name") for n in selected
               if any(label in ((n.get("metadata") or {}).get("labels") or {}) for label in CONTROL_PLANE_LABELS)]
    if control:
        check.error("nodeSelector", "selects control-plane node{0} {1}".format("s" if len(control) > 1 else "", ", ".join(control)),
                    "Narrow it to the workers, e.g. add !node-role.kubernetes.io/control-plane or list the worker names in nodes.")
    if len(selected) < 2:
        check.finding("too_few_nodes", "nodeSelector", "selects {0} node{1}; LowNodeUtilization needs at least 2 and does nothing".format(
            len(selected), "" if len(selected) == 1 else "s"))


def validate_policy(policy: dict, vm_profiles: Sequence[str] = (), min_gap: int = DEFAULT_MIN_GAP, migration_limits: Optional[dict] = None,
                    nodes: Optional[List[dict]] = None) -> Tuple[List[dict], List[dict]]:
    """Every problem of `policy` (errors) and what to know about it (findings).

    `vm_profiles` are the profiles that move VMs (the rebalance procedure's rules apply to them); `migration_limits` the
    KubeVirt CR's limits (snake_case, upstream defaults when None); `nodes` the live nodes, for the
    control-plane check (skipped when None)."""
    check = Checker()
    _check_top(check, policy)
    _check_metrics_providers(check, policy)
    limits = dict(KUBEVIRT_DEFAULT_LIMITS)
    limits.update({k: v for k, v in (migration_limits or {}).items() if k in limits and v is not None})
    names: Dict[str, int] = {}
    checked = []
    for index, profile in enumerate(policy.get("profiles") or [] if isinstance(policy.get("profiles"), list) else []):
        result = _check_profile(check, profile, index, names)
        if result:
            checked.append((index, result[0], result[1]))
    for name in vm_profiles:
        if name not in names:
            check.error("profiles", "no profile named {0!r} (the VM profile)".format(name),
                        "Name the VM profile with profile_name, or list the profiles that move VMs in vm_profiles.")
    collector = policy.get("metricsCollector")
    collector_enabled = isinstance(collector, dict) and collector.get("enabled") is True
    for index, name, profile in checked:
        path = "profiles[{0}]".format(index)
        _check_metrics_clients(check, policy, profile, path, collector_enabled)
        if name in vm_profiles:
            _check_vm_profile(check, policy, profile, path, min_gap, limits)
        elif _evicts(profile) and "PodsWithPVC" in protections(plugin_config(profile, DEFAULT_EVICTOR) or {}):
            check.finding("policy_protects_pvc_pods", _evictor_path(profile, path) + ".podProtections.extraEnabled",
                          "PodsWithPVC is protected in profile {0}: it never moves a PVC-backed VM".format(name))
    if vm_profiles:
        _check_nodes(check, policy, nodes)
    return check.errors, check.findings


def check_policy(policy: dict, **kwargs: Any) -> List[dict]:
    """`validate_policy`, raising `PolicyInvalid` with every problem when there is one; the findings otherwise."""
    errors, findings = validate_policy(policy, **kwargs)
    if errors:
        raise PolicyInvalid(errors)
    return findings
