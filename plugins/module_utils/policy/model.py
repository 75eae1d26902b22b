# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DeschedulerPolicy (`descheduler/v1alpha2`) as data: its known fields (the real decoder silently drops
unknown or mis-cased keys, so the schema here is what catches a typo), the registered plugins and their
extension points, loading a policy from a dict or YAML text, comparing two policies, and YAML output in the
layout of the rebalance procedure's verification policy (Configure a Bounded VM Rebalance Policy)."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import DEPRECATED_FIELDS
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported by the module
    HAS_YAML = False

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerPolicy"

# v0.36 has no top-level `prometheus` (the Prometheus provider is an entry of metricsProviders); `metricsCollector`
# is the deprecated switch for the metrics server
TOP_LEVEL_FIELDS = ("apiVersion", "kind", "profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace",
                    "maxNoOfPodsToEvictTotal", "evictionFailureEventNotification", "metricsCollector", "metricsProviders",
                    "gracePeriodSeconds")
LIMIT_FIELDS = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")
PROFILE_FIELDS = ("name", "pluginConfig", "plugins")
PLUGIN_CONFIG_FIELDS = ("name", "args")
PLUGIN_SET_FIELDS = ("enabled", "disabled")

DEFAULT_EVICTOR = "DefaultEvictor"
LOW_NODE_UTILIZATION = "LowNodeUtilization"

# plugin -> the extension points it implements (descheduler v0.36 in-tree registry)
PLUGINS: Dict[str, tuple] = {
    DEFAULT_EVICTOR: ("filter", "preevictionfilter"),
    "RemoveDuplicates": ("balance",),
    LOW_NODE_UTILIZATION: ("balance",),
    "HighNodeUtilization": ("balance",),
    "RemovePodsViolatingTopologySpreadConstraint": ("balance",),
    "RemovePodsHavingTooManyRestarts": ("deschedule",),
    "RemovePodsViolatingNodeAffinity": ("deschedule",),
    "RemovePodsViolatingNodeTaints": ("deschedule",),
    "RemovePodsViolatingInterPodAntiAffinity": ("deschedule",),
    "RemoveFailedPods": ("deschedule",),
    "PodLifeTime": ("deschedule",),
}

DEFAULT_EVICTOR_ARGS = ("nodeSelector", "labelSelector", "namespaceLabelSelector", "priorityThreshold", "nodeFit", "minReplicas",
                        "minPodAge", "noEvictionPolicy", "podProtections", "ignorePodsWithoutPDB") + tuple(f for f, _p, _e in DEPRECATED_FIELDS)
POD_PROTECTIONS_FIELDS = ("defaultDisabled", "extraEnabled", "config")
LOW_NODE_UTILIZATION_ARGS = ("thresholds", "targetThresholds", "useDeviationThresholds", "numberOfNodes", "evictableNamespaces",
                             "evictionLimits", "metricsUtilization")
METRICS_UTILIZATION_FIELDS = ("metricsServer", "source", "prometheus")
PROMETHEUS_QUERY_FIELDS = ("query",)
EVICTABLE_NAMESPACES_FIELDS = ("exclude", "include")
EVICTION_LIMITS_FIELDS = ("node",)
LABEL_SELECTOR_FIELDS = ("matchLabels", "matchExpressions")
# metrics sources (api.MetricsSource) and what the policy's metricsProviders[] hold
KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS = "Prometheus"
METRICS_SOURCES = (KUBERNETES_METRICS, PROMETHEUS)
METRICS_COLLECTOR_FIELDS = ("enabled",)
METRICS_PROVIDER_FIELDS = ("source", "prometheus")
PROMETHEUS_PROVIDER_FIELDS = ("url", "authToken")
AUTH_TOKEN_FIELDS = ("secretReference",)
SECRET_REFERENCE_FIELDS = ("namespace", "name")
# the key of the referenced Secret the descheduler reads the Prometheus bearer token from
PROMETHEUS_TOKEN_KEY = "prometheusAuthToken"
# the one threshold resource of a Prometheus query: int(sample value * 100) per node
METRIC_RESOURCE = "MetricResource"
# plugin -> its known args (plugins not listed here are not checked key by key)
PLUGIN_ARGS = {DEFAULT_EVICTOR: DEFAULT_EVICTOR_ARGS, LOW_NODE_UTILIZATION: LOW_NODE_UTILIZATION_ARGS}


class PolicyInvalid(RebalanceError):
    """A policy that must not be applied; `errors` holds every problem found (each a dict with path, problem, fix)."""

    def __init__(self, errors: List[dict]) -> None:
        first = errors[0]
        more = len(errors) - 1
        fix = first.get("fix")
        if more:
            fix = "{0} ({1} more problem{2}: see error.errors)".format(fix or "", more, "" if more == 1 else "s").strip()
        super().__init__(first["problem"], fix, path=first.get("path"), errors=errors)
        self.errors = errors


def load_policy(value: Any, path: str = "policy") -> dict:
    """A policy from a dict or YAML text, as a new dict; `PolicyInvalid` when it is neither."""
    if isinstance(value, dict):
        return copy.deepcopy(value)
    if isinstance(value, str):
        if not HAS_YAML:
            raise RebalanceError("PyYAML is not installed", "Install the packages in requirements.txt.", path=path)
        try:
            loaded = yaml.safe_load(value)
        except yaml.YAMLError as error:
            raise PolicyInvalid([{"path": path, "problem": "not YAML: {0}".format(str(error).replace("\n", " ")),
                                  "fix": "Give the policy as a mapping or as YAML text that parses."}]) from error
        if isinstance(loaded, dict):
            return loaded
        value = loaded
    raise PolicyInvalid([{"path": path, "problem": "a DeschedulerPolicy is a mapping, got {0}".format(type(value).__name__),
                          "fix": "Give apiVersion, kind and profiles as a mapping."}])


def same_policy(left: Optional[dict], right: Optional[dict]) -> bool:
    """Equal as data (parsed YAML), whatever the text layout, key order or quoting."""
    return left == right


def profile_named(policy: dict, name: str) -> Optional[dict]:
    for profile in policy.get("profiles") or []:
        if isinstance(profile, dict) and profile.get("name") == name:
            return profile
    return None


def plugin_config(profile: dict, plugin: str) -> Optional[dict]:
    """The args of `plugin` in a profile's pluginConfig ({} for an entry without args); None when not configured."""
    for entry in profile.get("pluginConfig") or []:
        if isinstance(entry, dict) and entry.get("name") == plugin:
            return entry.get("args") or {}
    return None


def enabled_plugins(profile: dict, point: str) -> List[str]:
    return list((((profile.get("plugins") or {}).get(point) or {}).get("enabled")) or [])


def metrics_utilization(profile: dict) -> Optional[dict]:
    """The profile's LowNodeUtilization `metricsUtilization` when it reads actual usage (a mapping), else None."""
    args = plugin_config(profile, LOW_NODE_UTILIZATION)
    value = args.get("metricsUtilization") if isinstance(args, dict) else None
    return value if isinstance(value, dict) else None


def metrics_source(utilization: Optional[dict]) -> Optional[str]:
    """The source a metricsUtilization reads: its `source`, KubernetesMetrics for the deprecated `metricsServer: true`
    (which upstream checks first), None for requests."""
    if not isinstance(utilization, dict):
        return None
    if utilization.get("metricsServer") is True:
        return KUBERNETES_METRICS
    return utilization.get("source") or None


def metrics_provider(policy: dict, source: str) -> Optional[dict]:
    """The first entry of the policy's metricsProviders with `source`."""
    providers = policy.get("metricsProviders")
    for provider in providers if isinstance(providers, list) else []:
        if isinstance(provider, dict) and provider.get("source") == source:
            return provider
    return None


def prometheus_secret_reference(policy: dict) -> Optional[dict]:
    """`{namespace, name}` of the Secret that holds the Prometheus provider's token, when the policy names one."""
    current: Any = metrics_provider(policy, PROMETHEUS)
    for key in ("prometheus", "authToken", "secretReference"):
        current = current.get(key) if isinstance(current, dict) else None
    return current if isinstance(current, dict) else None


def merge_providers(existing: Any, wanted: List[dict]) -> List[dict]:
    """`existing` metricsProviders with each of `wanted` replacing the entry of its source (or appended): the
    providers other profiles read stay."""
    result = [copy.deepcopy(p) for p in existing] if isinstance(existing, list) else []
    for provider in wanted:
        for index, current in enumerate(result):
            if isinstance(current, dict) and current.get("source") == provider.get("source"):
                result[index] = copy.deepcopy(provider)
                break
        else:
            result.append(copy.deepcopy(provider))
    return result


def merge_profile(existing: Optional[dict], profile: dict, top_level: dict) -> dict:
    """`existing` with `profile` replacing the profile of the same name (or appended) and the top-level fields
    of `top_level` set; the other profiles are kept as they are."""
    result = copy.deepcopy(existing) if isinstance(existing, dict) else {}
    result.update({"apiVersion": API_VERSION, "kind": KIND})
    for key, value in top_level.items():
        if key in ("apiVersion", "kind", "profiles"):
            continue
        result[key] = merge_providers(result.get(key), value) if key == "metricsProviders" else copy.deepcopy(value)
    profiles = list(result.get("profiles") or [])
    for index, current in enumerate(profiles):
        if isinstance(current, dict) and current.get("name") == profile.get("name"):
            profiles[index] = copy.deepcopy(profile)
            break
    else:
        profiles.append(copy.deepcopy(profile))
    ordered = {key: result[key] for key in TOP_LEVEL_FIELDS if key in result and key != "profiles"}
    ordered.update({key: value for key, value in result.items() if key not in ordered and key != "profiles"})
    ordered["profiles"] = profiles
    return ordered


# ------------------------------------------------------------------------------------------ YAML
class _Quoted(str):
    """A string written in double quotes, as the rebalance procedure writes apiVersion, kind and nodeSelector."""


if HAS_YAML:
    class PolicyDumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """SafeDumper that keeps key order and writes `_Quoted` strings in double quotes."""

    def _quoted(dumper: Any, data: _Quoted) -> Any:
        return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style='"')

    PolicyDumper.add_representer(_Quoted, _quoted)


def _for_dump(policy: dict) -> dict:
    result = dict(policy)
    for key in ("apiVersion", "kind", "nodeSelector"):
        if isinstance(result.get(key), str):
            result[key] = _Quoted(result[key])
    return result


def dump_policy(policy: dict) -> str:
    """The policy as YAML text in the rebalance procedure's layout: keys in the given order, lists not indented under their
    key, apiVersion, kind and nodeSelector in double quotes."""
    return yaml.dump(_for_dump(policy), Dumper=PolicyDumper, sort_keys=False, default_flow_style=False, width=1000)
