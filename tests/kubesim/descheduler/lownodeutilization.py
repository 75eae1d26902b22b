"""The LowNodeUtilization balance plugin of descheduler v0.36, on requests or actual usage
(pkg/framework/plugins/nodeutilization: lownodeutilization.go, nodeutilization.go, usageclients.go,
classifier/, normalizer/; pkg/descheduler/pod/pods.go for the ordering).

- Usage of a node (by requests) = the summed requests (containers, the largest init container, overhead) of its
  non-terminal Pods, for cpu, memory and pods (plus any resource named in the thresholds), as a percentage
  of the node's allocatable (capacity when allocatable is empty); the other sources are below.
- Classification (in that order, first match wins): underutilized when every thresholds resource is at or
  below its threshold (a cordoned node never is: `"Node is unschedulable, thus not considered as
  underutilized"` at V(2)); overutilized when any targetThresholds resource is above its target; otherwise
  appropriately utilized. With `useDeviationThresholds` the limits are the average usage of the nodes minus
  the thresholds and plus the targetThresholds, clamped to [0, 100].
- Logs, as v0.36 writes them: the plugin's own logger carries `plugin="LowNodeUtilization"
  ExtensionPoint="Balance"` (lownodeutilization.go: `klog.FromContext(ctx).WithValues`), so V(0) prints
  `"Node has been classified" plugin="LowNodeUtilization" ExtensionPoint="Balance" category="overutilized"
  node="worker-a" usage={"cpu":"1100m","memory":"8Gi","pods":"12"} usagePercentage={"cpu":69,...}` (the
  requested quantities, then the rounded percentages) and `"Node is appropriately utilized"` with the same
  pairs; V(1): the criteria (`cpu="45.00%"`), the counts, and the early exits `No node is underutilized,
  nothing to do here, you might tune your thresholds further`, `Number of nodes underutilized is less or
  equal than NumberOfNodes, nothing to do here`, `All nodes are underutilized, nothing to do here`, `All
  nodes are under target utilization, nothing to do here`. The eviction loop (nodeutilization.go) logs with
  the logger of the context it is given, which carries no plugin values: `"Total capacity to be moved"`,
  `"Evicting pods from node" node usage` (V(3)), `"Pods on node"`, `"Evicted pods"`, `"Updated node usage"`.
  Source lines are those of the v0.36 sources read (lownodeutilization.go:215 for the classification,
  nodeutilization.go:193 for "Evicting pods from node", matching a v0.36-era log).
- Eviction: the overutilized nodes in order of summed usage (cpu in millicores + memory bytes + pods),
  highest first; `"Pods on node" node allPods nonRemovablePods removablePods` (V(2)), removable meaning the
  DefaultEvictor filter passes; removable Pods lowest priority first (no priority first), then BestEffort <
  Burstable < Guaranteed. Among equals the order is not defined upstream (sort.Slice over an informer
  listing in map order; nodes of one category are logged in map order): here ties are broken by the
  process's seeded random order (`Handle.rng`), so the same seed repeats a run and no test may rely on
  which of two equal Pods (or nodes) comes first. A node stops when it is no longer above its targetThresholds, when any resource of
  the headroom left on the underutilized nodes (their capacity up to their targetThresholds, minus usage) is
  used up, at `evictionLimits.node`, or when the pod evictor reports the node limit; the total limit stops
  the plugin. Pods that tolerate no underutilized node's taints, Pods of `evictableNamespaces.exclude` and
  Pods the DefaultEvictor's PreEvictionFilter refuses (nodeFit, namespaceLabelSelector) are skipped.

Usage sources (`metricsUtilization`, usageclients.py): requests by default; `source: KubernetesMetrics` (or the
deprecated `metricsServer: true`) takes node usage from the metrics collector (metricscollector.py) and Pod usage from
PodMetrics; `source: Prometheus` takes one value per node from the policy's Prometheus provider and classifies by the
single resource `MetricResource` (thresholds and targetThresholds must name exactly it: `thresholds are expected to
specify a single instance of "MetricResource" resource, got [cpu] instead`, built before anything else), whose
capacity is 100. Building the plugin needs the process's client: without a metrics collector `metrics client not
initialized`, without a Prometheus client `prometheus client not initialized` (the profile then fails to build);
`unrecognized metrics source` / `metrics source is empty` otherwise. A sync that fails ends the plugin's Balance
with `error getting node usage: <why>` (run.py logs it for the profile). With Prometheus a Pod's usage is unknown, so
an eviction is unconstrained: usage is not updated after it and, without `evictionLimits.node`, only one Pod is
evicted per source node (`"Currently, only a single pod eviction is allowed"` at V(3)); a Pod whose PodMetrics
cannot be read is skipped (`"unable to get pod usage" err=... pod=...`).

Simplified: the memory in `usage=` is printed in binary units (upstream: the format of the first summed
request); the criteria keep the policy's order (upstream: map order)."""
from __future__ import annotations

import math
import random

from ..quantity import format_cpu, format_memory, is_terminal
from .evictor import (EvictionError, EvictionNodeLimitError, EvictionTotalLimitError, pod_priority)
from .klog import kobj
from .usageclients import (METRIC_RESOURCE, ActualUsage, NotSupported, PrometheusUsage, RequestedUsage, UsageError,
                           amount)

NAME = "LowNodeUtilization"
SRC_LOW = "lownodeutilization.go"
SRC_NU = "nodeutilization.go"
BASIC = ("cpu", "memory", "pods")
_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


class PluginError(Exception):
    """The plugin cannot be built: the profile fails to build with this message."""


def node_capacity(node: dict) -> dict[str, int]:
    """Allocatable, or capacity when no allocatable is reported; pods default to the kubelet's 110; the
    `MetricResource` of a Prometheus query is a percentage, so its capacity is 100."""
    status = node.get("status") or {}
    source = status.get("allocatable") or status.get("capacity") or {}
    capacity = {name: amount(name, value) for name, value in source.items()}
    capacity.setdefault("pods", 110)
    capacity[METRIC_RESOURCE] = 100
    return capacity


def go_round(value: float) -> float:
    """math.Round: half away from zero."""
    return float(math.floor(value + 0.5)) if value >= 0 else -float(math.floor(-value + 0.5))


def quantity_string(resource: str, value: int) -> str:
    if resource == "cpu":
        return format_cpu(value)
    if resource == "memory":
        return format_memory(value)
    return str(value)


def qos_class(pod: dict) -> str:
    from ..defaults import qos_class as compute   # pylint: disable=import-outside-toplevel
    return (pod.get("status") or {}).get("qosClass") or compute(pod.get("spec") or {})


def shuffled_sort(items: list, key, rng: random.Random | None) -> list:
    """Sorted by `key`, equal items in `rng`'s order (upstream's sort.Slice over a listing in map order
    defines none); without `rng` equal items keep their order."""
    items = list(items)
    if rng is not None:
        rng.shuffle(items)
    return sorted(items, key=key)


def sort_pods_low_to_high(cluster, pods: list[dict], rng: random.Random | None = None) -> list[dict]:
    """podutil.SortPodsBasedOnPriorityLowToHigh: no priority first, then by priority, then QoS."""
    def key(pod: dict):
        priority = pod_priority(cluster, pod)
        return (priority is not None, priority or 0, _QOS_RANK.get(qos_class(pod), 1))
    return shuffled_sort(pods, key, rng)


def _unordered(_item) -> int:
    return 0


def _tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and toleration.get("value", "") == taint.get("value", "")


def tolerates_any_node(pod: dict, taints_by_node: dict[str, list[dict]]) -> bool:
    """utils.PodToleratesTaints: the Pod tolerates every taint of at least one of the nodes."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taints in taints_by_node.values():
        if len(tolerations) >= len(taints) and all(any(_tolerates(t, taint) for t in tolerations) for taint in taints):
            return True
    return False


class LowNodeUtilization:
    """One instance per profile and cycle, like NewLowNodeUtilization."""

    def __init__(self, args: dict, handle):
        self.args = args
        self.handle = handle
        self.log = handle.log.with_values("plugin", NAME)   # NewLowNodeUtilization's logger
        self.thresholds = dict(args.get("thresholds") or {})
        self.targets = dict(args.get("targetThresholds") or {})
        self.resource_names = tuple(self.thresholds)
        metrics = args.get("metricsUtilization")
        if metrics is not None and metrics.get("source") == "Prometheus":
            problem = self._prometheus_problem(metrics)
            if problem:
                raise PluginError(problem)
            self.extended = self.resource_names
        else:
            self.extended = tuple(dict.fromkeys(self.resource_names + BASIC))
        self.usage_client = RequestedUsage(handle, self.extended) if metrics is None else self._metrics_client(metrics)

    def _prometheus_problem(self, metrics: dict) -> str | None:
        """validatePrometheusMetricsUtilization."""
        if not metrics.get("prometheus"):
            return "prometheus property is missing"
        if not (metrics.get("prometheus") or {}).get("query"):
            return "prometheus query is missing"
        for key, names in (("thresholds", list(self.thresholds)), ("targetThresholds", list(self.targets))):
            if names != [METRIC_RESOURCE]:
                return (f'{key} are expected to specify a single instance of "{METRIC_RESOURCE}" resource, got '
                        f"[{' '.join(names)}] instead")
        return None

    def _metrics_client(self, metrics: dict):
        """usageClientForMetrics."""
        source = metrics.get("source", "")
        if metrics.get("metricsServer") or source == "KubernetesMetrics":
            collector = getattr(self.handle, "metrics_collector", None)
            if collector is None:
                raise PluginError("metrics client not initialized")
            return ActualUsage(self.handle, self.extended, collector)
        if source == "Prometheus":
            client = getattr(self.handle, "prometheus_client", None)
            if client is None:
                raise PluginError("prometheus client not initialized")
            return PrometheusUsage(self.handle, client, metrics["prometheus"]["query"])
        raise PluginError("unrecognized metrics source" if source else "metrics source is empty")

    # ------------------------------------------------------------------------------------------ helpers
    def _percentages(self, usage: dict[str, int], capacity: dict[str, int], names) -> dict[str, float]:
        result = {}
        for name in names:
            if name not in capacity:
                continue
            total = capacity[name]
            result[name] = usage.get(name, 0) / total * 100 if total > 0 else 0.0
        return result

    def _capped(self, capacity: dict[str, int], limits: dict[str, float]) -> dict[str, int]:
        capped = {}
        for name in self.extended:
            if name not in capacity:
                capped[name] = 0
            elif name not in limits:
                capped[name] = capacity[name]
            else:
                capped[name] = int(limits[name] * 0.01 * capacity[name])
        return capped

    # ------------------------------------------------------------------------------------------ balance
    def balance(self, nodes: list[dict]) -> str | None:
        """One Balance; the Status error's text when the usage could not be read, else None."""
        handle, log = self.handle, self.log.with_values("ExtensionPoint", "Balance")
        try:
            self.usage_client.sync(nodes)
        except UsageError as err:
            return f"error getting node usage: {err.message}"
        names = [n["metadata"]["name"] for n in nodes]
        by_name = {n["metadata"]["name"]: n for n in nodes}
        pods = {name: self.usage_client.pods(name) for name in names}
        usage = {name: dict(self.usage_client.node_usage(name)) for name in names}
        capacity = {name: node_capacity(by_name[name]) for name in names}

        if self.args.get("useDeviationThresholds"):
            percent = {name: self._percentages(usage[name], capacity[name], self.resource_names) for name in names}
            average = {}
            for resource in self.resource_names:
                values = [percent[name][resource] for name in names if resource in percent[name]]
                if values:
                    average[resource] = sum(values) / len(values)
            low = {r: min(max(average[r] - self.thresholds[r], 0), 100) for r in average}
            high = {r: min(max(average[r] + self.targets.get(r, 0), 0), 100) for r in average}
        else:
            percent = {name: self._percentages(usage[name], capacity[name], self.extended) for name in names}
            low, high = self.thresholds, self.targets

        under, over = [], []
        for name in names:
            node_pct = percent[name]
            if (by_name[name].get("spec") or {}).get("unschedulable"):
                log.info(2, f"{SRC_LOW}:190", "Node is unschedulable, thus not considered as underutilized",
                         "node", name)
            elif all(node_pct.get(r, 0.0) <= low[r] for r in low):
                under.append(name)
                continue
            if any(high[r] < node_pct.get(r, 0.0) for r in high):
                over.append(name)
        rounded = {name: {r: go_round(v) for r, v in percent[name].items()} for name in names}
        quantities = {name: {r: quantity_string(r, v) for r, v in usage[name].items()} for name in names}
        rng = getattr(handle, "rng", None)
        for category, group in (("underutilized", under), ("overutilized", over)):
            for name in shuffled_sort(group, _unordered, rng):   # map order upstream
                log.info(0, f"{SRC_LOW}:215", "Node has been classified", "category", category, "node", name,
                         "usage", quantities[name], "usagePercentage", rounded[name])
        appropriate = [name for name in names if name not in under and name not in over]
        for name in shuffled_sort(appropriate, _unordered, rng):
            log.info(0, f"{SRC_LOW}:241", "Node is appropriately utilized", "node", name,
                     "usage", quantities[name], "usagePercentage", rounded[name])

        criteria = []
        for resource, value in self.thresholds.items():
            criteria += [resource, f"{value:.2f}%"]
        log.info(1, f"{SRC_LOW}:253", "Criteria for a node under utilization", *criteria)
        log.info(1, f"{SRC_LOW}:254", "Number of underutilized nodes", "totalNumber", len(under))
        criteria = []
        for resource, value in self.targets.items():
            criteria += [resource, f"{value:.2f}%"]
        log.info(1, f"{SRC_LOW}:255", "Criteria for a node above target utilization", *criteria)
        log.info(1, f"{SRC_LOW}:256", "Number of overutilized nodes", "totalNumber", len(over))

        number_of_nodes = int(self.args.get("numberOfNodes") or 0)
        if not under:
            log.info(1, f"{SRC_LOW}:259", "No node is underutilized, nothing to do here, you might tune your "
                     "thresholds further")
            return None
        if len(under) <= number_of_nodes:
            log.info(1, f"{SRC_LOW}:266", "Number of nodes underutilized is less or equal than NumberOfNodes, "
                     "nothing to do here", "underutilizedNodes", len(under), "numberOfNodes", number_of_nodes)
            return None
        if len(under) == len(nodes):
            log.info(1, f"{SRC_LOW}:275", "All nodes are underutilized, nothing to do here")
            return None
        if not over:
            log.info(1, f"{SRC_LOW}:280", "All nodes are under target utilization, nothing to do here")
            return None

        available = {name: self._capped(capacity[name], high) for name in under + over}
        over = shuffled_sort(over, lambda name: -sum(usage[name].get(r, 0) for r in self.extended), rng)
        self._evict_from_sources(over, under, by_name, pods, usage, available)
        return None

    def _evict_from_sources(self, sources, destinations, by_name, pods, usage, available) -> None:
        handle, log = self.handle, self.handle.log
        total_available = {name: 0 for name in self.extended}
        for name in destinations:
            for resource in self.extended:
                total_available[resource] += available[name][resource] - usage[name].get(resource, 0)
        log.info(1, f"{SRC_NU}:185", "Total capacity to be moved", *self._usage_pairs(total_available))
        taints = {name: list((by_name[name].get("spec") or {}).get("taints") or []) for name in destinations}
        node_limit = (self.args.get("evictionLimits") or {}).get("node")
        excluded = set((self.args.get("evictableNamespaces") or {}).get("exclude") or [])
        for name in sources:
            log.info(3, f"{SRC_NU}:193", "Evicting pods from node", "node", name,
                     "usage", {r: quantity_string(r, v) for r, v in usage[name].items()})
            removable = [pod for pod in pods[name] if handle.evictor.filter(pod)]
            log.info(2, f"{SRC_NU}:200", "Pods on node", "node", name, "allPods", len(pods[name]),
                     "nonRemovablePods", len(pods[name]) - len(removable), "removablePods", len(removable))
            if not removable:
                log.info(1, f"{SRC_NU}:209", "No removable pods on node, try next node", "node", name)
                continue
            log.info(1, f"{SRC_NU}:216", "Evicting pods based on priority, if they have same priority, they'll be "
                     "evicted based on QoS tiers")
            ordered = sort_pods_low_to_high(handle.cluster, removable, getattr(handle, "rng", None))
            try:
                self._evict_pods(ordered, name, usage[name], available[name], total_available, taints, node_limit,
                                 excluded)
            except EvictionTotalLimitError:
                return
            except EvictionNodeLimitError:
                continue

    def _continue(self, node_usage: dict, node_available: dict, total_available: dict) -> bool:
        if not any(node_available.get(r, 0) < value for r, value in node_usage.items()):
            return False
        return all(value > 0 for value in total_available.values())

    def _evict_pods(self, ordered, node_name, node_usage, node_available, total_available, taints, node_limit,
                    excluded) -> None:
        handle, log = self.handle, self.handle.log
        if not self._continue(node_usage, node_available, total_available):
            return
        count = 0
        for pod in ordered:
            if node_limit is not None and count >= node_limit:
                log.info(3, f"{SRC_NU}:278", "Max number of evictions per node per plugin reached", "limit", node_limit)
                break
            if not tolerates_any_node(pod, taints):
                log.info(3, f"{SRC_NU}:286", "Skipping eviction for pod, doesn't tolerate node taint", "pod", kobj(pod))
                continue
            if pod["metadata"].get("namespace") in excluded or not handle.evictor.pre_eviction_filter(pod):
                continue
            unconstrained = False
            try:
                podusage = self.usage_client.pod_usage(pod)
            except NotSupported:
                podusage, unconstrained = {}, True
            except UsageError as err:
                log.error(f"{SRC_NU}:318", err.message, "unable to get pod usage", "pod", kobj(pod))
                continue
            try:
                handle.evict(pod, NAME)
            except (EvictionNodeLimitError, EvictionTotalLimitError):
                raise
            except EvictionError as err:
                log.error(f"{SRC_NU}:328", err.message, "eviction failed")
                continue
            if node_limit is None and unconstrained:
                log.info(3, f"{SRC_NU}:333", "Currently, only a single pod eviction is allowed")
                break
            count += 1
            log.info(3, f"{SRC_NU}:339", "Evicted pods", "pod", kobj(pod))
            if unconstrained:
                continue
            for resource in total_available:
                amount = 1 if resource == "pods" else podusage.get(resource, 0)
                node_usage[resource] = node_usage.get(resource, 0) - amount
                total_available[resource] -= amount
            log.info(3, f"{SRC_NU}:348", "Updated node usage", "node", node_name, *self._usage_pairs(node_usage))
            if not self._continue(node_usage, node_available, total_available):
                break

    @staticmethod
    def _usage_pairs(values: dict[str, int]) -> list:
        pairs = []
        for resource, label in (("cpu", "CPU"), ("memory", "Mem"), ("pods", "Pods")):
            if resource in values:
                pairs += [label, values[resource]]
        for resource, value in values.items():
            if resource not in BASIC:
                pairs += [resource, value]
        return pairs


def pods_on_node(cluster, node_name: str, all_pods: list[dict] | None = None) -> list[dict]:
    """podutil.ListPodsOnANode: the node's Pods that are not Succeeded or Failed."""
    source = all_pods if all_pods is not None else [e.obj for e in cluster.store.entries("pods")]
    return [pod for pod in source if (pod.get("spec") or {}).get("nodeName") == node_name and not is_terminal(pod)]
