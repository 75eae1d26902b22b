# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules a DeschedulerPolicy must pass before it is applied, each problem as `path: problem. fix`.

Three sets of rules:
- the schema: unknown or mis-cased keys (the descheduler's decoder silently drops them), types, names;
- upstream validation (descheduler v0.36), with its messages verbatim;
- the rebalance procedure's rules for a profile that moves VMs: `PodsWithLocalStorage` stays disabled,
  `PodsWithPVC` not in `extraEnabled`, a non-empty label selector, thresholds below target thresholds by a
  minimum gap, eviction limits set and not above KubeVirt's parallel migration limits, and a node selector
  that leaves control-plane nodes out.
"""

from __future__ import annotations

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
    DEFAULT_EVICTOR,
    EVICTABLE_NAMESPACES_FIELDS,
    EVICTION_LIMITS_FIELDS,
    KIND,
    LABEL_SELECTOR_FIELDS,
    LIMIT_FIELDS,
    LOW_NODE_UTILIZATION,
    PLUGIN_ARGS,
    PLUGIN_CONFIG_FIELDS,
    PLUGIN_SET_FIELDS,
    PLUGINS,
    POD_PROTECTIONS_FIELDS,
    PROFILE_FIELDS,
    TOP_LEVEL_FIELDS,
    PolicyInvalid,
    enabled_plugins,
    plugin_config,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import CONTROL_PLANE_LABELS
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import check_labels, matches_selector_string, parse_label_selector

DEFAULT_MIN_GAP = 5
KUBEVIRT_DEFAULT_LIMITS = {"parallel_migrations_per_cluster": 5, "parallel_outbound_migrations_per_node": 2}
NO_EVICTION_POLICIES = ("Preferred", "Mandatory")


def _go_list(values: Sequence[Any]) -> str:
    """A list the way Go's %v prints a []string: `[a b]`."""
    return "[{0}]".format(" ".join(str(v) for v in values))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
    check.keys(policy, "", TOP_LEVEL_FIELDS, "DeschedulerPolicy")
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
    for index, name, profile in checked:
        path = "profiles[{0}]".format(index)
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
