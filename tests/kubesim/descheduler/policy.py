"""The `descheduler/v1alpha2` DeschedulerPolicy as the descheduler v0.36 reads it from
`--policy-config-file` (pkg/descheduler/policyconfig.go, pkg/api/v1alpha2, the plugins' types.go and
validation.go).

Decoding follows the real decoder (sigs.k8s.io/yaml to JSON, then a non-strict, case-sensitive JSON
decode): unknown or mis-cased keys are dropped without a word, so a typo such as `targetThreshold` or
`preEvictionFilter` silently changes the policy. A value of the wrong JSON type fails the decode with
`failed decoding descheduler's policy config "<file>": json: cannot unmarshal ...`.

Validation (`validateDeschedulerConfiguration`) runs over `pluginConfig` with the plugins' own validators and
reports, aggregated, `in profile <p>: plugin <x> in pluginConfig not registered` and `in profile <p>: <the
plugin's message>` (LowNodeUtilization/HighNodeUtilization thresholds and `evictableNamespaces.include`,
DefaultEvictor priority threshold, noEvictionPolicy, deprecated booleans versus `podProtections`, unknown or
duplicate protections; LowNodeUtilization's `metricsUtilization`: `it is not allowed to set both "KubernetesMetrics"
source and metricsServer`, `prometheus query is required when metrics source is set to "Prometheus"`, `prometheus
configuration is not allowed to set when source is set to "KubernetesMetrics"`), then the top-level
`metricsProviders` (`metric provider "<source>" is already configured, each source can be configured only once`,
`it is not allowed to combine metrics provider when metrics collector is enabled`, `prometheus URL is required when
prometheus is enabled`, `error parsing prometheus URL: parse "<url>": <Go's url.Parse error>`, `prometheus authToken
secret is expected to be set when authToken field is`, `prometheus authToken secret reference does not set both
namespace and name`; messages from upstream's policyconfig_test.go and validation_test.go). Then the DefaultEvictor is
prepended to the `filter` and `preevictionfilter` extension points, with default arguments when the profile has no
pluginConfig for it.

`DEFAULT_POLICY` is the ACP package's default: the DefaultEvictor block is the one the rebalance reference
page quotes; the other plugins and thresholds follow the upstream chart's default profile.

Simplified: JSON decode errors name the field path approximately; only the validators of DefaultEvictor,
LowNodeUtilization and HighNodeUtilization are implemented (other registered plugins accept any args);
`descheduler/v1alpha1` is rejected as unregistered, as in v0.36."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerPolicy"

DEFAULT_EVICTOR = "DefaultEvictor"
LOW_NODE_UTILIZATION = "LowNodeUtilization"
HIGH_NODE_UTILIZATION = "HighNodeUtilization"

# The v0.36 plugin registry and the extension points each plugin implements.
DESCHEDULE_PLUGINS = ("RemovePodsViolatingNodeTaints", "RemovePodsViolatingNodeAffinity",
                      "RemovePodsViolatingInterPodAntiAffinity", "RemovePodsHavingTooManyRestarts", "PodLifeTime",
                      "RemoveFailedPods")
BALANCE_PLUGINS = ("RemoveDuplicates", "RemovePodsViolatingTopologySpreadConstraint", LOW_NODE_UTILIZATION,
                   HIGH_NODE_UTILIZATION)
EVICTOR_PLUGINS = (DEFAULT_EVICTOR,)
REGISTRY = frozenset(DESCHEDULE_PLUGINS + BALANCE_PLUGINS + EVICTOR_PLUGINS)
EXTENSION_POINTS = ("presort", "sort", "deschedule", "balance", "filter", "preevictionfilter")

DEFAULT_PROTECTIONS = ("PodsWithLocalStorage", "SystemCriticalPods", "FailedBarePods", "DaemonSetPods")
EXTRA_PROTECTIONS = ("PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims")
DEPRECATED_EVICTOR_FIELDS = ("evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods",
                             "ignorePvcPods", "ignorePodsWithoutPDB", "evictFailedBarePods")
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000

DEFAULT_POLICY = """\
apiVersion: "descheduler/v1alpha2"
kind: "DeschedulerPolicy"
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
    args:
      podProtections:
        defaultDisabled:
        - PodsWithLocalStorage
        extraEnabled:
        - PodsWithPVC
  - name: RemoveDuplicates
  - name: RemovePodsHavingTooManyRestarts
    args:
      podRestartThreshold: 100
      includingInitContainers: true
  - name: RemovePodsViolatingNodeAffinity
    args:
      nodeAffinityType:
      - requiredDuringSchedulingIgnoredDuringExecution
  - name: RemovePodsViolatingNodeTaints
  - name: RemovePodsViolatingInterPodAntiAffinity
  - name: RemovePodsViolatingTopologySpreadConstraint
  - name: LowNodeUtilization
    args:
      thresholds:
        cpu: 20
        memory: 20
        pods: 20
      targetThresholds:
        cpu: 50
        memory: 50
        pods: 50
  plugins:
    balance:
      enabled:
      - RemoveDuplicates
      - RemovePodsViolatingTopologySpreadConstraint
      - LowNodeUtilization
    deschedule:
      enabled:
      - RemovePodsHavingTooManyRestarts
      - RemovePodsViolatingNodeTaints
      - RemovePodsViolatingNodeAffinity
      - RemovePodsViolatingInterPodAntiAffinity
"""


class PolicyError(Exception):
    """A policy the descheduler refuses: the text is the error the binary logs (`err=...`)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# ------------------------------------------------------------------------------------------- schemas
# A schema is a type name ("string", "int", "uint", "int32", "bool", "float", "duration", "raw"), or a tuple:
# ("list", schema), ("map", schema), ("struct", go_name, {json_key: schema}).
_LABEL_SELECTOR = ("struct", "LabelSelector", {
    "matchLabels": ("map", "string"),
    "matchExpressions": ("list", ("struct", "LabelSelectorRequirement", {
        "key": "string", "operator": "string", "values": ("list", "string")})),
})
_NAMESPACES = ("struct", "Namespaces", {"include": ("list", "string"), "exclude": ("list", "string")})
_PRIORITY_THRESHOLD = ("struct", "PriorityThreshold", {"value": "int32", "name": "string"})

DEFAULT_EVICTOR_ARGS = ("struct", "DefaultEvictorArgs", {
    "nodeSelector": "string",
    "labelSelector": _LABEL_SELECTOR,
    "namespaceLabelSelector": _LABEL_SELECTOR,
    "priorityThreshold": _PRIORITY_THRESHOLD,
    "nodeFit": "bool",
    "minReplicas": "uint",
    "minPodAge": "duration",
    "noEvictionPolicy": "string",
    "podProtections": ("struct", "PodProtections", {
        "extraEnabled": ("list", "string"),
        "defaultDisabled": ("list", "string"),
        "config": ("struct", "PodProtectionsConfig", {
            "PodsWithPVC": ("struct", "PodsWithPVCConfig", {
                "protectedStorageClasses": ("list", ("struct", "ProtectedStorageClass", {"name": "string"})),
            }),
        }),
    }),
    **{name: "bool" for name in DEPRECATED_EVICTOR_FIELDS},
})
_METRICS_UTILIZATION = ("struct", "MetricsUtilization", {
    "metricsServer": "bool", "source": "string",
    "prometheus": ("struct", "Prometheus", {"query": "string"}),
})
LOW_NODE_UTILIZATION_ARGS = ("struct", "LowNodeUtilizationArgs", {
    "useDeviationThresholds": "bool",
    "thresholds": ("map", "float"),
    "targetThresholds": ("map", "float"),
    "numberOfNodes": "int",
    "metricsUtilization": _METRICS_UTILIZATION,
    "evictableNamespaces": _NAMESPACES,
    "evictionLimits": ("struct", "EvictionLimits", {"node": "uint"}),
})
HIGH_NODE_UTILIZATION_ARGS = ("struct", "HighNodeUtilizationArgs", {
    "thresholds": ("map", "float"),
    "numberOfNodes": "int",
    "metricsUtilization": _METRICS_UTILIZATION,
    "evictableNamespaces": _NAMESPACES,
})
PLUGIN_ARGS = {DEFAULT_EVICTOR: DEFAULT_EVICTOR_ARGS, LOW_NODE_UTILIZATION: LOW_NODE_UTILIZATION_ARGS,
               HIGH_NODE_UTILIZATION: HIGH_NODE_UTILIZATION_ARGS}

_PLUGIN_SET = ("struct", "PluginSet", {"enabled": ("list", "string"), "disabled": ("list", "string")})
POLICY_SCHEMA = ("struct", "DeschedulerPolicy", {
    "apiVersion": "string",
    "kind": "string",
    "profiles": ("list", ("struct", "DeschedulerProfile", {
        "name": "string",
        "pluginConfig": ("list", ("struct", "PluginConfig", {"name": "string", "args": "raw"})),
        "plugins": ("struct", "Plugins", {point: _PLUGIN_SET for point in EXTENSION_POINTS}),
    })),
    "nodeSelector": "string",
    "maxNoOfPodsToEvictPerNode": "uint",
    "maxNoOfPodsToEvictPerNamespace": "uint",
    "maxNoOfPodsToEvictTotal": "uint",
    "evictionFailureEventNotification": "bool",
    "gracePeriodSeconds": "int",
    "metricsCollector": ("struct", "MetricsCollector", {"enabled": "bool"}),
    "metricsProviders": ("list", ("struct", "MetricsProvider", {
        "source": "string",
        "prometheus": ("struct", "Prometheus", {
            "url": "string",
            "authToken": ("struct", "AuthToken", {
                "secretReference": ("struct", "SecretReference", {"namespace": "string", "name": "string"}),
            }),
        }),
    })),
})

_GO_TYPES = {"string": "string", "int": "int", "uint": "uint", "int32": "int32", "bool": "bool",
             "float": "api.Percentage", "duration": "v1.Duration"}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def parse_duration(text: str) -> float:
    """A Go duration (`1h30m`, `90s`, `0`) in seconds; ValueError with Go's message otherwise."""
    raw = text
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise ValueError(f'time: invalid duration "{raw}"')
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's time.Duration.String() for whole seconds and up (`5m0s`, `1h0m0s`, `30s`)."""
    whole = int(seconds)
    if whole == 0:
        return "0s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class _DecodeError(Exception):
    pass


def _decode(value: Any, schema, path: str) -> Any:
    """Decode like encoding/json into the Go type: unknown keys dropped, null = zero value."""
    if value is None:
        return None
    if schema == "raw":
        return value
    if isinstance(schema, tuple):
        shape = schema[0]
        if shape == "list":
            if not isinstance(value, list):
                raise _DecodeError(f"json: cannot unmarshal {_json_type(value)} into Go struct field {path} of type "
                                   f"[]{_go_name(schema[1])}")
            return [_decode(item, schema[1], path) for item in value]
        if shape == "map":
            if not isinstance(value, dict):
                raise _DecodeError(f"json: cannot unmarshal {_json_type(value)} into Go struct field {path} of type "
                                   f"map[string]{_go_name(schema[1])}")
            return {str(k): _decode(v, schema[1], f"{path}.{k}") for k, v in value.items()}
        go_name, fields = schema[1], schema[2]
        if not isinstance(value, dict):
            raise _DecodeError(f"json: cannot unmarshal {_json_type(value)} into Go struct field {path} of type "
                               f"{go_name}" if path else f"json: cannot unmarshal {_json_type(value)} into Go value "
                               f"of type {go_name}")
        out = {}
        for key, item in value.items():
            if key in fields:   # case-sensitive: `Thresholds` or `preEvictionFilter` are dropped
                decoded = _decode(item, fields[key], f"{path or go_name}.{key}")
                if decoded is not None:
                    out[key] = decoded
        return out
    go_type = _GO_TYPES[schema]
    kind = _json_type(value)
    fail = _DecodeError(f"json: cannot unmarshal {kind} into Go struct field {path} of type {go_type}")
    if schema == "string":
        if kind != "string":
            raise fail
        return value
    if schema == "bool":
        if kind != "bool":
            raise fail
        return value
    if schema == "float":
        if kind != "number":
            raise fail
        return float(value)
    if schema == "duration":
        if kind != "string":
            raise fail
        try:
            return parse_duration(value)
        except ValueError as err:
            raise _DecodeError(str(err)) from None
    # integers
    if kind != "number" or (isinstance(value, float) and value != int(value)):
        if kind == "number":
            raise _DecodeError(f"json: cannot unmarshal number {value} into Go struct field {path} of type {go_type}")
        raise fail
    number = int(value)
    if schema == "uint" and number < 0:
        raise _DecodeError(f"json: cannot unmarshal number {number} into Go struct field {path} of type {go_type}")
    return number


def _go_name(schema) -> str:
    if isinstance(schema, tuple):
        return schema[1] if schema[0] == "struct" else _go_name(schema[1])
    return _GO_TYPES.get(schema, "interface {}")


# --------------------------------------------------------------------------------------------- model
@dataclass
class PluginConfig:
    name: str
    args: dict


@dataclass
class Profile:
    name: str
    plugin_configs: list[PluginConfig] = field(default_factory=list)
    plugins: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def enabled(self, point: str) -> list[str]:
        return list((self.plugins.get(point) or {}).get("enabled") or [])

    def config(self, name: str) -> PluginConfig | None:
        return next((pc for pc in self.plugin_configs if pc.name == name), None)


@dataclass
class Policy:
    profiles: list[Profile] = field(default_factory=list)
    node_selector: str | None = None
    max_per_node: int | None = None
    max_per_namespace: int | None = None
    max_total: int | None = None
    eviction_failure_event_notification: bool = False
    grace_period_seconds: int | None = None
    metrics_collector: bool = False
    metrics_providers: list[dict] = field(default_factory=list)


def _yaml_error(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    line = f"line {mark.line + 1}: " if mark is not None else ""
    return f"error converting YAML to JSON: yaml: {line}{problem}"


def decode(text: str, path: str = "/policy-dir/policy.yaml") -> Policy:
    """The decode step of LoadPolicyConfig; PolicyError with the binary's message on failure."""
    prefix = f"failed decoding descheduler's policy config {_quote(path)}: "
    try:
        doc = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as err:
        raise PolicyError(prefix + _yaml_error(err)) from None
    compact = _compact_json(doc)
    if not isinstance(doc, dict):
        if doc is None:
            raise PolicyError(prefix + "Object 'Kind' is missing in 'null'")
        raise PolicyError(prefix + f"couldn't get version/kind; json parse error: json: cannot unmarshal "
                          f"{_json_type(doc)} into Go value of type struct {{ APIVersion string "
                          f"\"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}")
    if not doc.get("kind"):
        raise PolicyError(prefix + f"Object 'Kind' is missing in '{compact}'")
    if not doc.get("apiVersion"):
        raise PolicyError(prefix + f"Object 'apiVersion' is missing in '{compact}'")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise PolicyError(prefix + f'no kind "{doc.get("kind")}" is registered for version '
                          f'"{doc.get("apiVersion")}" in scheme "pkg/runtime/scheme.go:100"')
    try:
        raw = _decode(doc, POLICY_SCHEMA, "")
        profiles = []
        for raw_profile in raw.get("profiles") or []:
            configs = []
            for raw_config in raw_profile.get("pluginConfig") or []:
                name = raw_config.get("name", "")
                args = raw_config.get("args")
                schema = PLUGIN_ARGS.get(name)
                if schema is not None:
                    args = _decode(args if args is not None else {}, schema, "")
                configs.append(PluginConfig(name, args if isinstance(args, dict) else {}))
            plugins = {point: {"enabled": list(sets.get("enabled") or []), "disabled": list(sets.get("disabled") or [])}
                       for point, sets in (raw_profile.get("plugins") or {}).items()}
            profiles.append(Profile(raw_profile.get("name", ""), configs, plugins))
    except _DecodeError as err:
        raise PolicyError(prefix + str(err)) from None
    return Policy(profiles=profiles, node_selector=raw.get("nodeSelector"),
                  max_per_node=raw.get("maxNoOfPodsToEvictPerNode"),
                  max_per_namespace=raw.get("maxNoOfPodsToEvictPerNamespace"),
                  max_total=raw.get("maxNoOfPodsToEvictTotal"),
                  eviction_failure_event_notification=bool(raw.get("evictionFailureEventNotification")),
                  grace_period_seconds=raw.get("gracePeriodSeconds"),
                  metrics_collector=bool((raw.get("metricsCollector") or {}).get("enabled")),
                  metrics_providers=list(raw.get("metricsProviders") or []))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _compact_json(doc: Any) -> str:
    import json   # pylint: disable=import-outside-toplevel
    try:
        return json.dumps(doc, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(doc)


# ---------------------------------------------------------------------------------------- validation
def aggregate(messages: list[str]) -> str | None:
    """utilerrors.NewAggregate(...).Error(): one message as is, several as `[a, b]`, duplicates once."""
    unique: list[str] = []
    for message in messages:
        if message not in unique:
            unique.append(message)
    if not unique:
        return None
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _validate_thresholds(thresholds: dict | None) -> str | None:
    if not thresholds:
        return "no resource threshold is configured"
    for name, percent in thresholds.items():
        if percent < 0 or percent > 100:
            return f"{name} threshold not in [0, 100] range"
    return None


def validate_low_node_utilization(args: dict) -> str | None:
    if (args.get("evictableNamespaces") or {}).get("include"):
        return "only Exclude namespaces can be set, inclusion is not supported"
    thresholds, targets = args.get("thresholds") or {}, args.get("targetThresholds") or {}
    problem = _validate_thresholds(thresholds)
    if problem:
        return f"thresholds config is not valid: {problem}"
    problem = _validate_thresholds(targets)
    if problem:
        return f"targetThresholds config is not valid: {problem}"
    if len(thresholds) != len(targets):
        return "thresholds and targetThresholds configured different resources"
    for name, value in thresholds.items():
        if name not in targets:
            return "thresholds and targetThresholds configured different resources"
        if value > targets[name] and not args.get("useDeviationThresholds"):
            return f"thresholds' {name} percentage is greater than targetThresholds'"
    return validate_metrics_utilization(args.get("metricsUtilization"))


def validate_metrics_utilization(metrics: dict | None) -> str | None:
    """The metricsUtilization rules of the plugin's validation (validation_test.go of nodeutilization)."""
    if metrics is None:
        return None
    source = metrics.get("source", "")
    if metrics.get("metricsServer") and source == "KubernetesMetrics":
        return 'it is not allowed to set both "KubernetesMetrics" source and metricsServer'
    if source == "Prometheus" and not (metrics.get("prometheus") or {}).get("query"):
        return 'prometheus query is required when metrics source is set to "Prometheus"'
    if source == "KubernetesMetrics" and metrics.get("prometheus") is not None:
        return 'prometheus configuration is not allowed to set when source is set to "KubernetesMetrics"'
    return None


_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def go_url_error(url: str) -> str | None:
    """The error of Go's url.Parse for the common mistakes (control characters, a missing scheme before a colon,
    a port that is not a number, a space in the host), without the `parse "<url>": ` prefix."""
    if any(ord(char) < 0x20 or ord(char) == 0x7f for char in url):
        return "net/url: invalid control character in URL"
    if url.startswith(":"):
        return "missing protocol scheme"
    match = _URL_SCHEME.match(url)
    rest = url[match.end():] if match else url
    if not match and ":" in url.split("/", 1)[0]:
        return "first path segment in URL cannot contain colon"
    if not rest.startswith("//"):
        return None
    authority = rest[2:].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1]
    host, sep, port = authority.rpartition(":") if not authority.endswith("]") else (authority, "", "")
    if sep and not port.isdigit() and port != "":
        return f'invalid port ":{port}" after host'
    for char in host if sep else authority:
        if char in ' <>"{}|\\^`':
            return f'invalid character "{char}" in host name'
    return None


def validate_metrics_providers(policy: "Policy") -> list[str]:
    """validateDeschedulerConfiguration's rules for the top-level metricsProviders."""
    errors, seen = [], set()
    for provider in policy.metrics_providers:
        source = provider.get("source", "")
        if source in seen:
            errors.append(f'metric provider "{source}" is already configured, each source can be configured only once')
        seen.add(source)
    if policy.metrics_providers and policy.metrics_collector:
        errors.append("it is not allowed to combine metrics provider when metrics collector is enabled")
    for provider in policy.metrics_providers:
        if provider.get("source") != "Prometheus":
            continue
        prometheus = provider.get("prometheus") or {}
        url = prometheus.get("url") or ""
        if not url:
            errors.append("prometheus URL is required when prometheus is enabled")
        else:
            problem = go_url_error(url)
            if problem:
                errors.append(f"error parsing prometheus URL: parse {_quote(url)}: {problem}")
        if "authToken" in prometheus:
            reference = (prometheus.get("authToken") or {}).get("secretReference")
            if reference is None:
                errors.append("prometheus authToken secret is expected to be set when authToken field is")
            elif not reference.get("namespace") or not reference.get("name"):
                errors.append("prometheus authToken secret reference does not set both namespace and name")
    return errors


def validate_high_node_utilization(args: dict) -> str | None:
    if (args.get("evictableNamespaces") or {}).get("include"):
        return "only Exclude namespaces can be set, inclusion is not supported"
    return _validate_thresholds(args.get("thresholds") or {})


def validate_default_evictor(args: dict) -> str | None:
    errors = []
    threshold = args.get("priorityThreshold") or {}
    if threshold.get("value") is not None and threshold.get("name"):
        errors.append("priority threshold misconfigured, only one of priorityThreshold fields can be set")
    policy = args.get("noEvictionPolicy")
    if policy and policy not in ("Preferred", "Mandatory"):
        errors.append('noEvictionPolicy accepts only ["Preferred" "Mandatory"] values')
    protections = args.get("podProtections") or {}
    extra, disabled = protections.get("extraEnabled") or [], protections.get("defaultDisabled") or []
    if any(args.get(name) for name in DEPRECATED_EVICTOR_FIELDS) and (extra or disabled):
        errors.append("cannot use Deprecated fields alongside PodProtections.ExtraEnabled or "
                      "PodProtections.DefaultDisabled")
    if extra or disabled:
        for name in extra:
            if name not in EXTRA_PROTECTIONS:
                errors.append(f"invalid pod protection policy in ExtraEnabled: {_quote(name)}. Valid options are: "
                              f"[{' '.join(EXTRA_PROTECTIONS)}]")
        for name in disabled:
            if name not in DEFAULT_PROTECTIONS:
                errors.append(f"invalid pod protection policy in DefaultDisabled: {_quote(name)}. Valid options "
                              f"are: [{' '.join(DEFAULT_PROTECTIONS)}]")
        if len(set(disabled)) != len(disabled):
            errors.append("PodProtections.DefaultDisabled contains duplicate entries")
        if len(set(extra)) != len(extra):
            errors.append("PodProtections.ExtraEnabled contains duplicate entries")
    return aggregate(errors)


VALIDATORS = {DEFAULT_EVICTOR: validate_default_evictor, LOW_NODE_UTILIZATION: validate_low_node_utilization,
              HIGH_NODE_UTILIZATION: validate_high_node_utilization}


def validate(policy: Policy) -> None:
    errors = []
    for profile in policy.profiles:
        for config in profile.plugin_configs:
            if config.name not in REGISTRY:
                errors.append(f"in profile {profile.name}: plugin {config.name} in pluginConfig not registered")
                continue
            validator = VALIDATORS.get(config.name)
            problem = validator(config.args) if validator else None
            if problem:
                errors.append(f"in profile {profile.name}: {problem}")
    errors += validate_metrics_providers(policy)
    message = aggregate(errors)
    if message:
        raise PolicyError(message)


def set_defaults(policy: Policy) -> Policy:
    """setDefaults: the DefaultEvictor is always a filter and preEvictionFilter plugin, with a config."""
    for profile in policy.profiles:
        for point in ("filter", "preevictionfilter"):
            plugin_set = profile.plugins.setdefault(point, {"enabled": [], "disabled": []})
            if DEFAULT_EVICTOR not in plugin_set["enabled"]:
                plugin_set["enabled"].insert(0, DEFAULT_EVICTOR)
        if profile.config(DEFAULT_EVICTOR) is None:
            profile.plugin_configs.insert(0, PluginConfig(DEFAULT_EVICTOR, {}))
    return policy


def load(text: str, path: str = "/policy-dir/policy.yaml") -> Policy:
    """decode, validate, set defaults: what LoadPolicyConfig returns, or PolicyError."""
    policy = decode(text, path)
    validate(policy)
    return set_defaults(policy)


def effective_protections(args: dict) -> list[str]:
    """getEffectivePodProtections: podProtections when it lists anything, else the deprecated booleans."""
    protections = args.get("podProtections") or {}
    extra, disabled = protections.get("extraEnabled") or [], protections.get("defaultDisabled") or []
    if extra or disabled:
        return [p for p in DEFAULT_PROTECTIONS if p not in disabled] + list(extra)
    legacy = []
    for flag, name in (("evictLocalStoragePods", "PodsWithLocalStorage"), ("evictDaemonSetPods", "DaemonSetPods"),
                       ("evictSystemCriticalPods", "SystemCriticalPods"), ("evictFailedBarePods", "FailedBarePods")):
        if not args.get(flag):
            legacy.append(name)
    if args.get("ignorePvcPods"):
        legacy.append("PodsWithPVC")
    if args.get("ignorePodsWithoutPDB"):
        legacy.append("PodsWithoutPDB")
    return legacy
