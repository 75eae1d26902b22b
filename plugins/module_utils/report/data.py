# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the HTML report draws, derived from the report document (roles/rebalance_report/vars/main.yml) as plain
dicts: the policy's LowNodeUtilization thresholds, each node's percent before and after of what the plan judged it
by (its `usage_source`: requests, or actual usage from the metrics server or Prometheus, with the request figures
beside actual usage, and in deviation mode the thresholds the plan computed around the mean), the forecast of the
policy over many runs, and the migrations as spans in seconds from the first request. Missing parts give empty
results, never errors: a report of a failed or check-mode run has to render whatever it holds."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import parse_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import format_time, parse_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import LOW_NODE_UTILIZATION, plugin_config

RESOURCES = ("cpu", "memory", "pods")
THRESHOLD_KINDS = ("thresholds", "targetThresholds")
FINAL_PHASES = ("Succeeded", "Failed")
REQUESTS = "requests"
SOURCE_TEXT = {REQUESTS: "requests (the sum of the Pods' resource requests)",
               "KubernetesMetrics": "actual usage from the metrics server (KubernetesMetrics: NodeMetrics and PodMetrics)",
               "Prometheus": "actual usage from Prometheus (MetricResource: the query's value per node, in percent)"}
# Where a report document may carry the forecast of descheduler_policy (the role's policy section first).
FORECAST_PLACES = (("policy", "forecast"), ("forecast",), ("policy", "plan", "forecast"), ("plan", "forecast"))


def mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list:
    return value if isinstance(value, list) else []


def percent(value: Any) -> Optional[float]:
    """A number as a float; None for anything else (booleans included, which are ints to Python)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def policy_thresholds(policy_text: Optional[str]) -> dict:
    """`{"profile", "thresholds", "targetThresholds"}` of the first profile that configures LowNodeUtilization, each a
    resource -> percent dict of the numeric values; empty dicts when the policy is missing, not YAML or has none."""
    policy, _reason = parse_policy(policy_text) if policy_text else (None, None)
    for profile in items(mapping(policy).get("profiles")):
        args = plugin_config(profile, LOW_NODE_UTILIZATION) if isinstance(profile, dict) else None
        if args is not None:
            found = {kind: numeric_values(mapping(args.get(kind))) for kind in THRESHOLD_KINDS}
            return {"profile": profile.get("name"), **found}
    return {"profile": None, "thresholds": {}, "targetThresholds": {}}


def numeric_values(values: dict) -> Dict[str, float]:
    return {str(key): percent(value) for key, value in values.items() if percent(value) is not None}


def deviation_policy(policy_text: Optional[str]) -> bool:
    """Whether the first profile that configures LowNodeUtilization sets useDeviationThresholds: its thresholds are
    then distances from the mean, not percents a node is compared with."""
    policy, _reason = parse_policy(policy_text) if policy_text else (None, None)
    for profile in items(mapping(policy).get("profiles")):
        args = plugin_config(profile, LOW_NODE_UTILIZATION) if isinstance(profile, dict) else None
        if args is not None:
            return mapping(args).get("useDeviationThresholds") is True
    return False


def node_name(node: dict) -> Optional[str]:
    """Plan nodes carry `name`, the Descheduler log's classification `node`."""
    return node.get("name") or node.get("node")


def node_source(node: dict) -> Optional[str]:
    """What the plan judged the node by (`usage_source` of a plan row); None for a row without it (a log record)."""
    source = node.get("usage_source")
    return source if isinstance(source, str) and source else None


def node_percents(node: dict) -> Dict[str, float]:
    """Percent per resource of what the plan judged the node by: its `usage_percent` when the plan read actual usage
    (a `usage_source` other than requests); by requests, `requests_percent` (all resources) when the document has it,
    else `usage_percent` (the resources the thresholds count)."""
    if node_source(node) not in (None, REQUESTS):
        return numeric_values(mapping(node.get("usage_percent")))
    source = mapping(node.get("requests_percent")) or mapping(node.get("usage_percent"))
    return numeric_values(source)


def node_thresholds(node: dict) -> Optional[dict]:
    """The thresholds a deviation-mode plan judged the node by (`thresholds_percent` {low, high}: the mean minus
    `thresholds` and plus `targetThresholds`) as `{"thresholds": low, "targetThresholds": high}`; None without them."""
    judged = mapping(node.get("thresholds_percent"))
    if not judged:
        return None
    return {"thresholds": numeric_values(mapping(judged.get("low"))), "targetThresholds": numeric_values(mapping(judged.get("high")))}


def node_state(node: Optional[dict]) -> Optional[dict]:
    """`{"category", "percent"}`, plus what a plan row tells: `source` (its usage_source), `requests` (its request
    figures, when the plan judged by actual usage) and `thresholds` (deviation mode)."""
    if node is None:
        return None
    state = {"category": node.get("category"), "percent": node_percents(node)}
    source = node_source(node)
    if source:
        state["source"] = source
    if source not in (None, REQUESTS):
        state["requests"] = numeric_values(mapping(node.get("requests_percent")))
    thresholds = node_thresholds(node)
    if thresholds:
        state["thresholds"] = thresholds
    return state


def classification_nodes(classification: dict, when: str) -> List[dict]:
    return [node for node in items(mapping(classification.get(when)).get("nodes")) if isinstance(node, dict) and node_name(node)]


def usage_rows(classification: Any) -> List[dict]:
    """One row per node, in the order the nodes first appear (before, then after): `{"name", "before", "after"}`, each
    state `{"category", "percent"}` or None when the document has no such node at that time."""
    classification = mapping(classification)
    before = {node_name(node): node for node in classification_nodes(classification, "before")}
    after = {node_name(node): node for node in classification_nodes(classification, "after")}
    names = list(before) + [name for name in after if name not in before]
    return [{"name": name, "before": node_state(before.get(name)), "after": node_state(after.get(name))} for name in names]


def judged_sources(rows: List[dict]) -> List[str]:
    """The usage sources the rows were judged by, before then after, each once."""
    found: List[str] = []
    for when in ("before", "after"):
        for row in rows:
            source = (row[when] or {}).get("source")
            if source and source not in found:
                found.append(source)
    return found


def judged_thresholds(rows: List[dict], policy: dict, deviation: bool = False) -> dict:
    """The lines the usage charts draw, shaped as `policy_thresholds`, plus `deviation`: in deviation mode the
    thresholds the plan computed around the mean (of the first row that has them, before first; none when no row
    has them, as the policy's values are distances, not percents); else the policy's."""
    for when in ("before", "after"):
        for row in rows:
            judged = (row[when] or {}).get("thresholds")
            if judged:
                return {"profile": policy.get("profile"), "deviation": True, **judged}
    if deviation:
        return {"profile": policy.get("profile"), "deviation": True, "thresholds": {}, "targetThresholds": {}}
    return dict(policy, deviation=False)


def chart_resources(rows: List[dict], thresholds: dict, always: Sequence[str] = RESOURCES) -> List[str]:
    """`always` (cpu, memory and pods), then any other resource the nodes or the thresholds name (an extended resource,
    MetricResource)."""
    named = []
    for row in rows:
        for state in (row["before"], row["after"]):
            named.extend((state or {}).get("percent", {}))
    for kind in THRESHOLD_KINDS:
        named.extend(thresholds.get(kind) or {})
    ordered = [r for r in RESOURCES if r in named and r not in always]
    return list(always) + ordered + sorted(set(named) - set(RESOURCES) - set(always))


# ------------------------------------------------------------------------------------------ forecast
def forecast_of(document: Any) -> Optional[dict]:
    """The forecast the document carries (descheduler_policy's `forecast`), at the first of FORECAST_PLACES that has one."""
    for path in FORECAST_PLACES:
        value: Any = document
        for key in path:
            value = mapping(value).get(key)
        if isinstance(value, dict) and value:
            return value
    return None


def forecast_summary(document: Any) -> Optional[dict]:
    """What the forecast says, for the report; None when the document has none. `runs` planned, `converged`,
    `cycles_to_converge`, `migrations`, `refusal`, `error`, `verdict` (one line), `moves` (cycle, vm, namespace, source,
    destination: None for a VM that fits no other node), `swaps`, `moved_back`, and `categories`: each node's category
    per planned run (`cycles`: the run numbers)."""
    forecast = forecast_of(document)
    if forecast is None:
        return None
    cycles = [cycle for cycle in items(forecast.get("cycles")) if isinstance(cycle, dict)]
    moves = [{"cycle": cycle.get("cycle"), "vm": move.get("vm") or move.get("pod"), "namespace": move.get("namespace"), "source": move.get("source"),
              "destination": move.get("destination")} for cycle in cycles for move in items(cycle.get("evictions")) if isinstance(move, dict)]
    names: List[str] = []
    for cycle in cycles:
        names.extend(name for name in mapping(cycle.get("categories")) if name not in names)
    return {"runs": len(cycles), "converged": forecast.get("converged"), "cycles_to_converge": forecast.get("cycles_to_converge"),
            "migrations": forecast.get("migrations"), "refusal": forecast.get("refusal"), "error": forecast.get("error"),
            "verdict": forecast_verdict(forecast, len(cycles)), "moves": moves,
            "swaps": [swap for swap in items(forecast.get("swaps")) if isinstance(swap, dict)],
            "moved_back": [back for back in items(forecast.get("moved_back")) if isinstance(back, dict)],
            "cycles": [cycle.get("cycle") for cycle in cycles],
            "categories": [{"name": name, "by_cycle": [mapping(cycle.get("categories")).get(name) for cycle in cycles]} for name in names]}


def forecast_verdict(forecast: dict, runs: int) -> str:
    if forecast.get("error"):
        return "no forecast: {0}".format(forecast["error"])
    migrations = forecast.get("migrations")
    if forecast.get("converged") is True:
        to_converge = forecast.get("cycles_to_converge")
        if not to_converge:
            return "nothing moves: the first run finds nothing to do"
        return "converges after {0} run(s) with {1} migration(s)".format(to_converge, migrations)
    return "does not converge in {0} run(s): {1} migration(s) planned".format(runs, migrations)


def migration_times(migration: dict) -> dict:
    """The moments of a migration as datetimes (None when not known): requested, running, ended."""
    stamps = mapping(migration.get("phase_timestamps"))
    ended = migration.get("end") or next((stamps[phase] for phase in FINAL_PHASES if stamps.get(phase)), None)
    return {"requested": parse_time(migration.get("created") or stamps.get("Pending")),
            "running": parse_time(stamps.get("Running") or migration.get("start")),
            "ended": parse_time(ended)}


def seconds_since(origin, moment) -> Optional[float]:
    return None if moment is None else round((moment - origin).total_seconds(), 3)


def migration_timeline(checks: Any) -> dict:
    """`{"origin": first request (RFC 3339) or None, "spans": [...]}`, one span per checked VM with a migration whose
    request time is known: vm, namespace, migration, phase, source and target node, duration_seconds, failure_reason,
    and requested/running/ended in seconds from the origin (None when not reached)."""
    found = []
    for check in items(checks):
        migration = mapping(mapping(check).get("migration"))
        times = migration_times(migration)
        if times["requested"] is not None:
            found.append((check, migration, times))
    if not found:
        return {"origin": None, "spans": []}
    origin = min(times["requested"] for _check, _migration, times in found)
    spans = [span(check, migration, {key: seconds_since(origin, moment) for key, moment in times.items()}) for check, migration, times in found]
    return {"origin": format_time(origin), "spans": spans}


def span(check: dict, migration: dict, seconds: dict) -> dict:
    return {"vm": check.get("name") or check.get("vm"), "namespace": check.get("namespace"), "migration": migration.get("name"),
            "phase": migration.get("phase"), "source_node": migration.get("source_node") or check.get("source_node"),
            "target_node": migration.get("target_node") or check.get("node"), "duration_seconds": migration.get("duration_seconds"),
            "failure_reason": migration.get("failure_reason"), **seconds}
