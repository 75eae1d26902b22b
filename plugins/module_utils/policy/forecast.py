# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a policy does over many descheduler runs: plan a run (`plan.plan_policy`), apply each planned eviction to
the cluster as it would end (the VM live-migrates to the node `placement.Placement` says the scheduler picks, its
usage moving with it), plan the next run, until a run finds nothing to move or `max_cycles` runs were planned.

How usage moves with a VM:
- requests: the Pod's requests go with the Pod;
- KubernetesMetrics: the Pod's PodMetrics (`actual_usage["pods"]`) leave its node's NodeMetrics and join the
  destination's; the Pod keeps its name (a real migration starts a new launcher Pod with the same usage);
- Prometheus (an estimate: the query is one number per node, nothing per VM): the VM takes its share of the source
  node's value, its cpu PodMetrics over those of the node's Pods when `actual_usage["pods"]` has them, else the mean
  of its cpu and memory requests over the node's; the destination gains that share scaled by the two nodes' cpu
  allocatable (a VM weighs less on a bigger node); values stay within [0, 1] and MetricResource is int(value * 100).
Simplified: the migrations of a run complete one after the other, each before the scheduler places the next (in a
cluster they overlap, and a source keeps a migrating VM's requests until it ends); usage does not change otherwise.

What is reported (`forecast_policy`): per run its planned evictions with the destination (and the scheduler's
score and ties) and the categories it found; whether a run found nothing to move (`converged`) and how many runs
moved VMs before (`cycles_to_converge`); the migrations; `swaps`, a node going from overutilized to underutilized
or back between two runs (`cycle`: the run whose migrations did it); `moved_back`, a VM arriving on a node it left
(`nodes`: its path); `unplaced`, a planned eviction whose VM fits no other node (it stays, so every run evicts it
again); `refusal`, one line on the first of these (swap or move back first, by run), or on not converging
within `max_cycles`, with the fix; and `error`, the plan's stop reason when no plan can be made (no actual usage,
usage without a node, a metricsUtilization upstream refuses), with no cycles, not converged and no refusal.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import pod_requests
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    KUBERNETES_METRICS,
    LOW_NODE_UTILIZATION,
    METRIC_RESOURCE,
    PROMETHEUS,
    enabled_plugins,
    plugin_config,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.placement import TIE_RULE, Placement, migration_target
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import OVER, PLAN_ERRORS, UNDER, active_pods, pod_key, plan_policy

SWAPS = {(OVER, UNDER), (UNDER, OVER)}
WIDEN = "widen the gap between thresholds and targetThresholds"
WIDEN_DEVIATION = "widen the band around the mean (thresholds plus targetThresholds)"
FEWER = "let fewer VMs land on one node in a run"


def forecast_policy(policy: dict, nodes: List[dict], pods: List[dict], vm_profiles: Sequence[str] = (), actual_usage: Optional[dict] = None,
                    max_cycles: int = 10) -> dict:
    """Plan run after run, each run's evictions applied, until a run moves nothing or `max_cycles` runs (the one that
    finds nothing to do included). Pure: `nodes`, `pods` and `actual_usage` are not changed."""
    cluster = Cluster(nodes, pods, actual_usage)
    result: Dict[str, Any] = {"cycles": [], "converged": False, "cycles_to_converge": None, "migrations": 0, "swaps": [],
                              "moved_back": [], "unplaced": [], "refusal": None, "error": None, "scheduler": TIE_RULE}
    previous: Optional[Dict[str, str]] = None
    paths: Dict[Tuple[str, str], List[str]] = {}
    for cycle in range(1, max(max_cycles, 1) + 1):
        plan = plan_policy(policy, nodes, cluster.pods, vm_profiles, cluster.usage)
        if (plan["stop_reason"] or "").startswith(PLAN_ERRORS):
            result["error"] = plan["stop_reason"]   # no forecast: the plan itself cannot be made
            return result
        categories = {row["name"]: row["category"] for row in plan["nodes"]}
        if previous is not None:
            result["swaps"].extend({"node": name, "from": previous[name], "to": category, "cycle": cycle - 1}
                                   for name, category in categories.items() if (previous.get(name), category) in SWAPS)
        entry = {"cycle": cycle, "evictions": [], "categories": categories, "stop_reason": plan["stop_reason"]}
        result["cycles"].append(entry)
        previous = categories
        if not plan["evictions"]:
            result.update(converged=True, cycles_to_converge=cycle - 1)
            break
        for eviction in plan["evictions"]:
            entry["evictions"].append(cluster.migrate(eviction, cycle, paths, result))
    result["migrations"] = sum(1 for c in result["cycles"] for e in c["evictions"] if e["destination"])
    result["refusal"] = refusal(policy, result, max_cycles)
    return result


class Cluster:
    """The Pods and actual usage as the forecast's migrations leave them (copies; the caller's stay as they were)."""

    def __init__(self, nodes: List[dict], pods: List[dict], actual_usage: Optional[dict]) -> None:
        self.pods = list(pods)
        self.where = {pod_key(p): i for i, p in enumerate(self.pods)}
        self.placement = Placement(nodes, active_pods(self.pods))
        self.usage = copy.deepcopy(actual_usage) if isinstance(actual_usage, dict) else None
        if self.usage is not None and self.usage.get("source") == PROMETHEUS and "values" not in self.usage:
            self.usage["values"] = {n: v.get(METRIC_RESOURCE, 0) / 100.0 for n, v in (self.usage.get("nodes") or {}).items()}

    def migrate(self, eviction: dict, cycle: int, paths: Dict[Tuple[str, str], List[str]], result: dict) -> dict:
        """Apply one planned eviction: the record of where the VM goes (destination None when it fits no node)."""
        key = "{0}/{1}".format(eviction["namespace"], eviction["pod"])
        pod = self.pods[self.where[key]]
        source = eviction["node"]
        target = migration_target(pod, source)
        choice = self.placement.choose(target, source)
        record = {"vm": eviction["vm"], "namespace": eviction["namespace"], "pod": eviction["pod"], "source": source,
                  "destination": choice["destination"], "score": choice["score"], "tied": choice["tied"]}
        if choice["destination"] is None:
            record["node_fit"] = choice["errors"]
            result["unplaced"].append({"vm": eviction["vm"], "namespace": eviction["namespace"], "pod": eviction["pod"], "node": source,
                                       "cycle": cycle})
            return record
        destination = choice["destination"]
        record["share_percent"] = self.share_percent(self.move_usage(pod, source, destination), destination)
        moved = dict(target, spec=dict(target["spec"], nodeName=destination))   # keeps KubeVirt's exclusion of `source`
        self.placement.move(pod, moved, source, destination)
        self.pods[self.where[key]] = moved
        path = paths.setdefault((eviction["namespace"], eviction["vm"] or eviction["pod"]), [source])
        if destination in path:
            result["moved_back"].append({"vm": eviction["vm"], "namespace": eviction["namespace"], "cycle": cycle, "nodes": path + [destination]})
        path.append(destination)
        return record

    def move_usage(self, pod: dict, source: str, destination: str) -> Dict[str, float]:
        """Move the Pod's actual usage with it; what it takes to the destination (requests mode: its requests)."""
        usage = self.usage
        source_name = (usage or {}).get("source")
        if source_name == KUBERNETES_METRICS:
            measured = (usage.get("pods") or {}).get(pod_key(pod)) or {}
            nodes = usage.setdefault("nodes", {})
            for resource in ("cpu", "memory"):
                value = int(measured.get(resource, 0))
                for name, sign in ((source, -1), (destination, 1)):
                    entry = nodes.setdefault(name, {})
                    entry[resource] = max(int(entry.get(resource, 0)) + sign * value, 0)
            return {r: float(measured.get(r, 0)) for r in ("cpu", "memory")}
        if source_name == PROMETHEUS:
            values = usage["values"]
            share = values.get(source, 0.0) * self.fraction_of_node(pod, source)
            scale = self.cpu_ratio(source, destination)
            values[source] = min(max(values.get(source, 0.0) - share, 0.0), 1.0)
            values[destination] = min(max(values.get(destination, 0.0) + share * scale, 0.0), 1.0)
            nodes = usage.setdefault("nodes", {})
            for name in (source, destination):
                nodes[name] = {METRIC_RESOURCE: int(values[name] * 100)}
            return {METRIC_RESOURCE: round(share * 100 * scale, 2)}
        requested = pod_requests(pod)
        return {r: float(v) for r, v in requested.items()}

    def share_percent(self, taken: Dict[str, float], destination: str) -> Dict[str, float]:
        """What the VM adds to its destination, in percent points of the destination's capacity (a query's points as
        they are), one Pod counted in `pods`."""
        capacity = self.placement.capacity.get(destination, {})
        shares = dict(taken, pods=1.0)
        result = {r: round(100.0 * v / capacity[r], 2) for r, v in shares.items() if r != METRIC_RESOURCE and capacity.get(r)}
        if METRIC_RESOURCE in shares:
            result[METRIC_RESOURCE] = shares[METRIC_RESOURCE]
        return result

    def fraction_of_node(self, pod: dict, node: str) -> float:
        """The VM's part of its node's query value: its cpu PodMetrics over the node's, else its requests' mean part."""
        on_node = self.placement.pods.get(node, [])
        measured = (self.usage or {}).get("pods") or {}
        if pod_key(pod) in measured:
            total = sum(float((measured.get(pod_key(p)) or {}).get("cpu", 0)) for p in on_node)
            if total > 0:
                return float(measured[pod_key(pod)].get("cpu", 0)) / total
        own = pod_requests(pod)
        used = self.placement.used.get(node, {})
        parts = [float(own.get(r, 0)) / used[r] for r in ("cpu", "memory") if used.get(r)]
        return sum(parts) / len(parts) if parts else 0.0

    def cpu_ratio(self, source: str, destination: str) -> float:
        capacity = self.placement.capacity
        source_cpu, destination_cpu = capacity.get(source, {}).get("cpu", 0), capacity.get(destination, {}).get("cpu", 0)
        return float(source_cpu) / destination_cpu if source_cpu and destination_cpu else 1.0


# ------------------------------------------------------------------------------------------ refusal
def _first_args(policy: dict) -> dict:
    for profile in policy.get("profiles") or []:
        if isinstance(profile, dict) and LOW_NODE_UTILIZATION in enabled_plugins(profile, "balance"):
            return plugin_config(profile, LOW_NODE_UTILIZATION) or {}
    return {}


def gap_advice(policy: dict, result: dict, cycle: int) -> Tuple[str, bool]:
    """What to widen, with the largest single-VM share of the run (percent points of the destination) for each
    threshold resource whose gap is not wider than it; and whether any is that narrow."""
    args = _first_args(policy)
    thresholds, targets = args.get("thresholds") or {}, args.get("targetThresholds") or {}
    deviation = bool(args.get("useDeviationThresholds"))
    moves = [e for c in result["cycles"] if c["cycle"] == cycle for e in c["evictions"] if e["destination"]]
    parts = []
    for resource in sorted(thresholds):
        share = max((e["share_percent"].get(resource, 0.0) for e in moves), default=0.0)
        gap = (thresholds[resource] + targets.get(resource, 0)) if deviation else (targets.get(resource, 0) - thresholds[resource])
        if share > 0 and gap <= share:
            parts.append("{0} {1} points apart now and one VM weighs {2}: make it at least {3}".format(
                resource, round(gap, 2), round(share, 2), int(math.floor(share)) + 1))
    how = WIDEN_DEVIATION if deviation else WIDEN
    return ("{0} ({1})".format(how, "; ".join(parts)) if parts else how), bool(parts)


def refusal(policy: dict, result: dict, max_cycles: int) -> Optional[str]:
    """One line on the first swap or move back (by run), else an unplaced VM, else not converging; None when calm."""
    events = [(s["cycle"], 0, s) for s in result["swaps"]] + [(m["cycle"], 1, m) for m in result["moved_back"]]
    if events:
        cycle, kind, event = min(events, key=lambda item: (item[0], item[1]))
        widen, narrow = gap_advice(policy, result, cycle)
        fix = widen if narrow else "{0} (maxNoOfPodsToEvictPerNode, maxNoOfPodsToEvictTotal) or {1}".format(FEWER, widen)
        if kind == 0:
            moves = ", ".join("{0} {1} -> {2}".format(e["vm"] or e["pod"], e["source"], e["destination"])
                              for c in result["cycles"] if c["cycle"] == cycle for e in c["evictions"]
                              if event["node"] in (e["source"], e["destination"]))
            return ("the forecast swaps {0} from {1} to {2} with run {3}'s migrations ({4}), so a later run moves VMs back: "
                    "{5}.".format(event["node"], event["from"], event["to"], cycle, moves, fix))
        return ("the forecast moves {0} back to {1} in run {2} ({3}): {4}, or keep migrated VMs out of the next runs with the "
                "cooldown.".format(event["vm"], event["nodes"][-1], cycle, " -> ".join(event["nodes"]), fix))
    if result["unplaced"]:
        first = result["unplaced"][0]
        return ("the forecast finds no node the scheduler would place {0} on (evicted from {1} in run {2}), so every run evicts it "
                "again: turn DefaultEvictor nodeFit on, or make room for it.".format(first["vm"] or first["pod"], first["node"], first["cycle"]))
    if not result["converged"]:
        widen, narrow = gap_advice(policy, result, max_cycles)
        most = max((len(c["evictions"]) for c in result["cycles"]), default=0)
        fix = widen if narrow else "a run moves at most {0} VMs here: forecast more runs (max_cycles) or raise the per-run limits".format(most)
        return "the forecast does not converge within {0} runs ({1} migrations): {2}.".format(max_cycles, result["migrations"], fix)
    return None
