# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the HTML report draws, derived from the report document (roles/rebalance_report/vars/main.yml) as plain
dicts: the policy's LowNodeUtilization thresholds, each node's percent of allocatable before and after, and the
migrations as spans in seconds from the first request. Missing parts give empty results, never errors: a report
of a failed or check-mode run has to render whatever it holds."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.descheduler import parse_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import parse_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import LOW_NODE_UTILIZATION, plugin_config

RESOURCES = ("cpu", "memory", "pods")
THRESHOLD_KINDS = ("thresholds", "targetThresholds")
FINAL_PHASES = ("Succeeded", "Failed")


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


def node_name(node: dict) -> Optional[str]:
    """Plan nodes carry `name`, the Descheduler log's classification `node`."""
    return node.get("name") or node.get("node")


def node_percents(node: dict) -> Dict[str, float]:
    """Percent of allocatable per resource: by requests (all resources) when the document has it, else the
    usage the policy's thresholds count."""
    source = mapping(node.get("requests_percent")) or mapping(node.get("usage_percent"))
    return numeric_values(source)


def node_state(node: Optional[dict]) -> Optional[dict]:
    if node is None:
        return None
    return {"category": node.get("category"), "percent": node_percents(node)}


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


def chart_resources(rows: List[dict], thresholds: dict) -> List[str]:
    """cpu, memory and pods, then any other resource the nodes or the thresholds name (an extended resource)."""
    named = []
    for row in rows:
        for state in (row["before"], row["after"]):
            named.extend((state or {}).get("percent", {}))
    for kind in THRESHOLD_KINDS:
        named.extend(thresholds.get(kind) or {})
    return list(RESOURCES) + sorted(set(named) - set(RESOURCES))


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
    return {"origin": origin.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "spans": spans}


def span(check: dict, migration: dict, seconds: dict) -> dict:
    return {"vm": check.get("name") or check.get("vm"), "namespace": check.get("namespace"), "migration": migration.get("name"),
            "phase": migration.get("phase"), "source_node": migration.get("source_node") or check.get("source_node"),
            "target_node": migration.get("target_node") or check.get("node"), "duration_seconds": migration.get("duration_seconds"),
            "failure_reason": migration.get("failure_reason"), **seconds}
