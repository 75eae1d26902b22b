# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks' cross-variable rules, what a type or a choice cannot say, by rule set: `rebalance` (rebalance.yml,
fleet_rollout.yml), `fleet`, `rehearse`, `maintenance`, `cluster_maintenance`, `rollback`,
`cooldown`. A rule reads the variables that are set (already
converted to their spec's types) and returns a Problem per wrong variable with its fix; it is not run when one of the
variables it reads has a problem of its own. Pure: the looks at the controller are whether a backup file and a hook file exist.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Iterable, List, Mapping, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import parse_duration
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.run_lease import MIN_DURATION as LEASE_MIN_DURATION
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_checks import Problem, Rule, extra_var, shown

# The rebalance procedure's LowNodeUtilization values, the examples of a pair that works.
PROCEDURE_THRESHOLDS = {"cpu": 70, "memory": 60, "pods": 20}
PROCEDURE_TARGETS = {"cpu": 75, "memory": 68, "pods": 30}
# What the policy's labels can be built from (rebalance_cluster.yml splits it on `,` and `=`).
EQUALITY_SELECTOR = re.compile(r"^[A-Za-z0-9./_-]+=[A-Za-z0-9._-]+(,[A-Za-z0-9./_-]+=[A-Za-z0-9._-]+)*$")
PERCENTAGE = re.compile(r"^([0-9]+)%$")
GAP = 10  # percentage points between a threshold and its target in a suggested fix (the policy module wants 5 or more)
# A Prometheus query's one threshold resource (its value in percent), and examples that work with it.
METRIC_RESOURCE = "MetricResource"
PROMETHEUS_THRESHOLDS = {"rebalance_thresholds": {METRIC_RESOURCE: 20}, "rebalance_target_thresholds": {METRIC_RESOURCE: 40}}
PROMETHEUS_VARIABLES = ("rebalance_prometheus_query", "rebalance_prometheus_url", "rebalance_prometheus_auth_secret")
SECRET_EXAMPLE = {"namespace": "descheduler", "name": "prometheus-token"}


def at_least(name: str, minimum: int, unit: str = "", example: int = 1) -> Rule:
    """`name` (an integer, in `unit`) is `minimum` or more."""
    def check(values: Mapping[str, Any]) -> List[Problem]:
        if values.get(name) is None or values[name] >= minimum:
            return []
        return [Problem(name, "{0} is less than {1}".format(values[name], minimum),
                        "Give {0} or more{1}, e.g. {2}".format(minimum, " " + unit if unit else "", extra_var(name, example)))]
    return Rule((name,), check)


def node_names(text: str) -> List[str]:
    """Node names from a text, one per line or comma separated (maintenance.yml splits it the same way)."""
    return text.replace(",", " ").split()


# ------------------------------------------------------------------------------------------ rebalance
def rebalance_workers(values: Mapping[str, Any]) -> List[Problem]:
    if "rebalance_policy" in values:
        return []
    nodes = list(dict.fromkeys(values.get("rebalance_nodes") or []))
    if len(nodes) >= 2:
        return []
    said = "names one worker ({0})".format(nodes[0]) if nodes else ("is empty" if "rebalance_nodes" in values else "is not given")
    return [Problem("rebalance_nodes", "{0}; the policy balances between two or more workers".format(said),
                    "Give the workers to balance, e.g. -e '{\"rebalance_nodes\": [\"worker-a\", \"worker-b\"]}', or a whole policy in rebalance_policy")]


def rebalance_label_selector(values: Mapping[str, Any]) -> List[Problem]:
    selector = values.get("rebalance_label_selector")
    if selector is None or "rebalance_vm_labels" in values or EQUALITY_SELECTOR.match(selector):
        return []
    return [Problem("rebalance_label_selector", "{0} is not key=value[,key=value], which the policy's labels are built from".format(shown(selector)),
                    "Give equality terms, e.g. -e rebalance_label_selector=app=desched-test, or the labels themselves in rebalance_vm_labels")]


def percentage_problems(name: str, values: Mapping[str, Any]) -> List[Problem]:
    problems = []
    for resource, percent in (values.get(name) or {}).items():
        if not is_number(percent) or not 0 <= percent <= 100:
            problems.append(Problem("{0}.{1}".format(name, resource), "{0} is not a percentage from 0 to 100".format(shown(percent)),
                                    "Give a number from 0 to 100 (of the node's allocatable), e.g. {0}".format(
                                        extra_var(name, dict(values.get(name), **{resource: PROCEDURE_THRESHOLDS.get(resource, 50)})))))
    return problems


def rebalance_thresholds(values: Mapping[str, Any]) -> List[Problem]:
    """Percentages; with both given: the same resources, each threshold below its target (unless they are deviations
    from the mean, which upstream does not order)."""
    low, high = "rebalance_thresholds", "rebalance_target_thresholds"
    problems = percentage_problems(low, values) + percentage_problems(high, values)
    if problems or low not in values or high not in values:
        return problems
    thresholds, targets = values[low] or {}, values[high] or {}
    if set(thresholds) != set(targets):
        return [Problem(high, "names {0} and rebalance_thresholds names {1}: thresholds and targetThresholds configured different resources".format(
                        ", ".join(sorted(targets)) or "none", ", ".join(sorted(thresholds)) or "none"),
                        "Give both the same resources, e.g. -e '{0}'".format(json.dumps({low: PROCEDURE_THRESHOLDS, high: PROCEDURE_TARGETS})))]
    if values.get("rebalance_use_deviation_thresholds"):
        return []
    wrong = [resource for resource in thresholds if thresholds[resource] >= targets[resource]]
    fixed_thresholds, fixed_targets = widened(thresholds, targets, wrong)
    example = "-e '{0}'".format(json.dumps({low: fixed_thresholds, high: fixed_targets}))
    return [Problem("{0}.{1}".format(low, resource),
                    "{0} is not below {1}.{2} ({3}); a node between the two is appropriately utilized".format(
                        thresholds[resource], high, resource, targets[resource]),
                    "Lower the threshold or raise the target, e.g. {0}".format(example))
            for resource in wrong]


def widened(thresholds: Dict[str, Any], targets: Dict[str, Any], wrong: Iterable[str]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Thresholds and targets with a gap of GAP points where `wrong`: the threshold lowered, or the target raised
    when the target is too low for that."""
    thresholds, targets = dict(thresholds), dict(targets)
    for resource in wrong:
        if targets[resource] >= GAP:
            thresholds[resource] = targets[resource] - GAP
        elif thresholds[resource] <= 100 - GAP:
            targets[resource] = thresholds[resource] + GAP
        else:
            thresholds[resource], targets[resource] = PROCEDURE_THRESHOLDS.get(resource, 60), PROCEDURE_TARGETS.get(resource, 70)
    return thresholds, targets


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rebalance_metrics(values: Mapping[str, Any]) -> List[Problem]:
    """Actual usage: a Prometheus source needs its query and URL, and thresholds that name only MetricResource; the
    Prometheus variables and MetricResource only with it; the token Secret named by namespace and name (its values are
    never shown: a token put there by mistake stays out of the output)."""
    if "rebalance_policy" in values:  # a whole policy wins over the rendering variables
        return []
    source = values.get("rebalance_metrics_source") or "requests"
    if source != "Prometheus":
        problems = [Problem(name, "is only used with rebalance_metrics_source=Prometheus (it is {0})".format(source),
                            "Set -e rebalance_metrics_source=Prometheus, or leave {0} unset".format(name))
                    for name in PROMETHEUS_VARIABLES if values.get(name) not in (None, "", {})]
        return problems + [Problem(name, "names MetricResource, which only a Prometheus query measures",
                                   "Set -e rebalance_metrics_source=Prometheus with rebalance_prometheus_query, or give cpu, memory and pods, e.g. "
                                   "-e '{0}'".format(json.dumps({"rebalance_thresholds": PROCEDURE_THRESHOLDS,
                                                                 "rebalance_target_thresholds": PROCEDURE_TARGETS})))
                           for name in ("rebalance_thresholds", "rebalance_target_thresholds") if METRIC_RESOURCE in (values.get(name) or {})]
    problems = []
    if not values.get("rebalance_prometheus_query"):
        problems.append(Problem("rebalance_prometheus_query", "is not given; rebalance_metrics_source=Prometheus balances by this query",
                                "Give a query with one value from 0 to 1 per node labelled instance=<node name>, e.g. "
                                "-e rebalance_prometheus_query=instance:node_cpu_utilisation:rate1m"))
    if not values.get("rebalance_prometheus_url"):
        problems.append(Problem("rebalance_prometheus_url", "is not given; the policy's Prometheus provider needs it",
                                "Give the URL the descheduler reaches Prometheus at, e.g. "
                                "-e rebalance_prometheus_url=https://prometheus-k8s.monitoring.svc:9091"))
    secret = values.get("rebalance_prometheus_auth_secret")
    if secret is not None and (sorted(secret) != ["name", "namespace"] or not all(isinstance(v, str) and v for v in secret.values())):
        problems.append(Problem("rebalance_prometheus_auth_secret", "has the keys {0}; it names the token's Secret by namespace and name only, "
                                "never the token".format(", ".join(sorted(map(str, secret))) or "none"),
                                "Give e.g. -e '{0}'".format(json.dumps({"rebalance_prometheus_auth_secret": SECRET_EXAMPLE}))))
    for name in ("rebalance_thresholds", "rebalance_target_thresholds"):
        given = values.get(name)
        if given is None or sorted(given) != [METRIC_RESOURCE]:
            said = "is not given" if given is None else "names {0}".format(", ".join(sorted(given)) or "nothing")
            problems.append(Problem(name, "{0}; with rebalance_metrics_source=Prometheus the thresholds name the one resource MetricResource (the "
                                          "query's value in percent)".format(said), "Give e.g. -e '{0}'".format(json.dumps(PROMETHEUS_THRESHOLDS))))
    return problems


# ------------------------------------------------------------------------------------------ fleet
def serial(name: str) -> Rule:
    """`name` is for Ansible's `serial`: a number of hosts, a percentage, or a list of them (batch sizes that grow)."""
    def check(values: Mapping[str, Any]) -> List[Problem]:
        if name not in values:
            return []
        batches = values[name] if isinstance(values[name], list) else [values[name]]
        if batches and all(batch_size(batch) for batch in batches):
            return []
        return [Problem(name, "{0} is not a batch size".format(shown(values[name])),
                        "Give clusters per batch (1 or more) or a percentage of them, e.g. -e {0}=2 or -e {0}=25%".format(name))]
    return Rule((name,), check)


def batch_size(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 1
    text = str(value).strip()
    percentage = PERCENTAGE.match(text)
    if percentage:
        return 0 < int(percentage.group(1)) <= 100
    return text.isdigit() and int(text) >= 1


# ------------------------------------------------------------------------------------------ rehearse
def rehearse_nodes(values: Mapping[str, Any]) -> List[Problem]:
    nodes = values.get("rehearse_nodes")
    if nodes is None or (len(nodes) == 2 and nodes[0] != nodes[1]):
        return []
    said = "names the same worker twice" if len(nodes) == 2 else "names {0} worker{1}".format(len(nodes), "" if len(nodes) == 1 else "s")
    return [Problem("rehearse_nodes", "{0}; the rehearsal needs two different workers, the one to overload first".format(said),
                    "Give two, e.g. -e '{\"rehearse_nodes\": [\"worker-a\", \"worker-b\"]}', or leave it unset to take the busiest and the least busy")]


def rehearse_vm_labels(values: Mapping[str, Any]) -> List[Problem]:
    if "rehearse_vm_labels" not in values or values["rehearse_vm_labels"]:
        return []
    return [Problem("rehearse_vm_labels", "is empty; the test VMs and the policy are scoped by these labels",
                    "Give at least one label, e.g. -e '{\"rehearse_vm_labels\": {\"app\": \"kubevirt-ops-rehearsal\"}}', or leave it unset")]


# ------------------------------------------------------------------------------------------ maintenance
def maintenance_nodes(values: Mapping[str, Any]) -> List[Problem]:
    """The nodes to drain: maintenance_nodes_text (AWX's textarea) when it names some, else maintenance_nodes."""
    text = values.get("maintenance_nodes_text")
    if text and node_names(text):
        return []
    if values.get("maintenance_nodes"):
        return []
    name, said = ("maintenance_nodes_text", "names no node") if text is not None and text.strip() else ("maintenance_nodes", "is empty or not given")
    return [Problem(name, "{0}; nothing to drain".format(said),
                    "Give the nodes to drain, in order, e.g. -e '{\"maintenance_nodes\": [\"worker-1\"]}' "
                    "(or maintenance_nodes_text, one name per line or comma separated)")]


# ------------------------------------------------------------------------------------------ cluster maintenance
def cluster_maintenance_nodes(values: Mapping[str, Any]) -> List[Problem]:
    """The nodes to maintain: by name or by label selector, one of the two (cleanup needs neither)."""
    if values.get("cluster_maintenance_cleanup") == "only":
        return []
    names, selector = values.get("cluster_maintenance_nodes"), values.get("cluster_maintenance_node_selector")
    if bool(names) != bool(selector):
        return []
    name = "cluster_maintenance_node_selector" if names else "cluster_maintenance_nodes"
    return [Problem(name, "is given with cluster_maintenance_nodes; give one of the two" if names else "is empty or not given; nothing to maintain",
                    "Give the nodes by name, e.g. -e '{\"cluster_maintenance_nodes\": [\"worker-1\", \"worker-2\"]}', or by label, "
                    "e.g. -e cluster_maintenance_node_selector=node-role.kubernetes.io/worker=")]


def cluster_maintenance_hook(values: Mapping[str, Any]) -> List[Problem]:
    path = values.get("cluster_maintenance_hook") or ""
    if not path or os.path.isfile(path):
        return []
    return [Problem("cluster_maintenance_hook", "{0} is not a file".format(path),
                    "Give the path of a tasks file (run per node after its drain, with cluster_maintenance_node set), "
                    "relative to the directory ansible-playbook runs in, or leave it empty")]


# ------------------------------------------------------------------------------------------ rollback
def rollback_backup_file(values: Mapping[str, Any]) -> List[Problem]:
    path = values.get("rollback_backup_file") or ""
    fix = ("Give a file written by the descheduler_backup role (reports say where: backup.path), "
           "e.g. -e rollback_backup_file=backups/<cluster>/<file>.yaml, or leave rollback_method at auto to delete the ResourcePatch")
    if not path:
        if values.get("rollback_method") == "backup" and not values.get("rollback_backup_object"):
            return [Problem("rollback_backup_file", "is not given; rollback_method=backup re-applies a backup file", fix)]
        return []
    # with the run's copy in the cluster named, a file that is not on this controller is read from there
    if not os.path.isfile(path) and not values.get("rollback_backup_object"):
        return [Problem("rollback_backup_file", "{0} is not a file".format(path), fix)]
    return []


# ------------------------------------------------------------------------------------------ cooldown
def duration(name: str, example: str) -> Rule:
    """`name` is seconds or a duration with units d, h, m, s (as vm_migration_cooldown and descheduler_storm_breaker read it),
    more than 0."""
    def check(values: Mapping[str, Any]) -> List[Problem]:
        if values.get(name) is None:
            return []
        try:
            seconds = parse_duration(values[name])
        except ValueError:
            seconds = 0
        if seconds > 0:
            return []
        return [Problem(name, "{0} is not a duration of more than 0 seconds".format(shown(values[name])),
                        "Give seconds or a duration with units d, h, m, s, e.g. {0}".format(extra_var(name, example)))]
    return Rule((name,), check)


def cooldown_periods(values: Mapping[str, Any]) -> List[Problem]:
    """With both given, the longest cooldown is at least the first one."""
    if values.get("cooldown_period") is None or values.get("cooldown_max_period") is None:
        return []
    base, cap = parse_duration(values["cooldown_period"]), parse_duration(values["cooldown_max_period"])
    if cap >= base:
        return []
    return [Problem("cooldown_max_period", "{0} is shorter than cooldown_period ({1}); the cooldown doubles up to it".format(
                    shown(values["cooldown_max_period"]), shown(values["cooldown_period"])),
                    "Give a longer one, e.g. {0}".format(extra_var("cooldown_max_period", "6h")))]


# The run lease's duration (playbooks/tasks/run_lease.yml), in every rule set of a playbook that takes the lease.
LEASE_DURATION = at_least("run_lease_duration", LEASE_MIN_DURATION, "seconds", 1800)

RULE_SETS: Dict[str, Tuple[Rule, ...]] = {
    "rebalance": (
        Rule(("rebalance_nodes", "rebalance_policy"), rebalance_workers),
        Rule(("rebalance_label_selector", "rebalance_vm_labels"), rebalance_label_selector),
        # before the thresholds' rule: with Prometheus they must name MetricResource, said once
        Rule(("rebalance_metrics_source", "rebalance_policy", "rebalance_thresholds", "rebalance_target_thresholds") + PROMETHEUS_VARIABLES,
             rebalance_metrics),
        Rule(("rebalance_thresholds", "rebalance_target_thresholds", "rebalance_use_deviation_thresholds"), rebalance_thresholds),
        at_least("rebalance_cycles", 1),
        at_least("rebalance_forecast_cycles", 1),
        at_least("rebalance_timeout", 1, "seconds", 600),
        at_least("rebalance_rollback_timeout", 1, "seconds", 600),
        LEASE_DURATION,
    ),
    "fleet": (serial("fleet_serial"), serial("fleet_canary_serial")),
    "rehearse": (
        Rule(("rehearse_nodes",), rehearse_nodes),
        at_least("rehearse_moves", 1),
        at_least("rehearse_timeout", 1, "seconds", 600),
        Rule(("rehearse_vm_labels",), rehearse_vm_labels),
        LEASE_DURATION,
    ),
    "maintenance": (
        Rule(("maintenance_nodes", "maintenance_nodes_text"), maintenance_nodes),
        at_least("maintenance_batch_size", 1),
        at_least("maintenance_timeout", 1, "seconds", 1800),
        LEASE_DURATION,
    ),
    "cluster_maintenance": (
        Rule(("cluster_maintenance_nodes", "cluster_maintenance_node_selector", "cluster_maintenance_cleanup"), cluster_maintenance_nodes),
        Rule(("cluster_maintenance_hook",), cluster_maintenance_hook),
        at_least("cluster_maintenance_max_nodes_in_parallel", 1, example=2),
        at_least("cluster_maintenance_timeout", 1, "seconds", 1800),
        at_least("cluster_maintenance_ready_timeout", 1, "seconds", 600),
        LEASE_DURATION,
    ),
    "rollback": (Rule(("rollback_method", "rollback_backup_file", "rollback_backup_object"), rollback_backup_file), LEASE_DURATION),
    "cooldown": (
        duration("cooldown_period", "15m"),
        duration("cooldown_max_period", "6h"),
        duration("cooldown_history_window", "6h"),
        duration("cooldown_breaker_window", "1h"),
        Rule(("cooldown_period", "cooldown_max_period"), cooldown_periods),
        at_least("cooldown_max_failed_migrations", 1, example=3),
        at_least("cooldown_max_migrations_per_vm", 1, example=3),
        at_least("cooldown_wait_timeout", 1, "seconds", 600),
    ),
}


def rules_named(names: Iterable[str]) -> List[Rule]:
    """The rules of the named sets; KeyError names an unknown set."""
    unknown = [name for name in names if name not in RULE_SETS]
    if unknown:
        raise KeyError("unknown rule set {0}; known: {1}".format(", ".join(unknown), ", ".join(RULE_SETS)))
    return [rule for name in names for rule in RULE_SETS[name]]
