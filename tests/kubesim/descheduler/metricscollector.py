"""The descheduler's metrics collector (descheduler v0.36 `pkg/descheduler/metricscollector/metricscollector.go`):
node usage from metrics.k8s.io NodeMetrics, smoothed over time.

- Created when the policy enables the metrics client: `metricsCollector.enabled: true` (deprecated) or a
  `metricsProviders` entry with `source: KubernetesMetrics` (there is no command-line flag for it); its nodes are
  those of the policy's `nodeSelector` (Ready or not).
- `collect()`: for each node, GET `nodes.metrics.k8s.io/<node>`; the first value is kept as is, later ones are
  smoothed: `round(0.9 * previous + 0.1 * current)` (cpu on millicores, memory on bytes); a node whose metrics cannot
  be read keeps its previous value and is logged `"Error fetching metrics" err="..." node="<node>"`. The collector has
  synced once a collection ran, whatever the nodes answered.
- Upstream collects every 5 s from the process start and waits (polling every second) for the first sync before the
  first cycle. Here a process collects at its start, and a long-running one (`--descheduling-interval`) every 5
  simulated seconds while its container runs (program.py); a CronJob's process, which lives about a second, so sees
  the first, unsmoothed value, as upstream's does.
- Pod usage (`pod_usage`) is not smoothed: the sum of the Pod's PodMetrics containers, read at each call; a Pod
  without metrics is the error `unable to get podmetrics for "<ns>"/"<pod>": <the API's message>`.

Simplified: the reads go to the cluster's metrics model in-process (the answers metrics.k8s.io would give, without
RBAC, counters or faults)."""
from __future__ import annotations

from ..errors import ApiError
from ..metrics import api as metrics_api
from ..quantity import cpu_millis, memory_bytes
from ..selectors import label_matcher
from .klog import Logger

BETA = 0.9
COLLECT_SECONDS = 5.0
SRC = "metricscollector.go"


def go_round(value: float) -> int:
    """math.Round: half away from zero."""
    return int(value + 0.5) if value >= 0 else -int(-value + 0.5)


def weighted_average(previous: int, value: int) -> int:
    return go_round(BETA * previous + (1 - BETA) * value)


class MetricsError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _not_served(resource: str, name: str) -> str:
    return f"the server could not find the requested resource (get {resource}.{metrics_api.GROUP} {name})"


def _read(cluster, rt, namespace: str | None, name: str) -> dict:
    if not metrics_api.served(cluster):
        raise MetricsError(_not_served(rt.plural, name))
    try:
        return metrics_api.get(cluster, rt, namespace, name)
    except ApiError as err:
        raise MetricsError(err.message) from None


class MetricsCollector:
    """One process's collector: smoothed node usage {node: {"cpu": millicores, "memory": bytes}}."""

    def __init__(self, cluster, node_selector: str | None, log: Logger):
        self.cluster = cluster
        self.matcher = label_matcher(node_selector or None)
        self.log = log
        self.nodes: dict[str, dict[str, int]] = {}
        self.has_synced = False

    def collect(self) -> None:
        with self.cluster.lock:
            nodes = sorted(e.obj["metadata"]["name"] for e in self.cluster.store.entries("nodes") if self.matcher(e.obj))
        for name in nodes:
            try:
                metrics = _read(self.cluster, metrics_api.NODE_METRICS, None, name)
            except MetricsError as err:
                self.log.error(f"{SRC}:121", err.message, "Error fetching metrics", "node", name)
                continue
            usage = metrics.get("usage") or {}
            cpu, memory = cpu_millis(usage.get("cpu")), memory_bytes(usage.get("memory"))
            if name not in self.nodes:
                self.nodes[name] = {"cpu": cpu, "memory": memory}
            else:
                previous = self.nodes[name]
                self.nodes[name] = {"cpu": weighted_average(previous["cpu"], cpu),
                                    "memory": weighted_average(previous["memory"], memory)}
        self.has_synced = True

    def all_nodes_usage(self) -> dict[str, dict[str, int]]:
        return {name: dict(values) for name, values in self.nodes.items()}

    def pod_usage(self, pod: dict, resources: tuple[str, ...]) -> dict[str, int]:
        """The summed container usage of the resources the PodMetrics report; MetricsError when unreadable."""
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        try:
            metrics = _read(self.cluster, metrics_api.POD_METRICS, namespace, name)
        except MetricsError as err:
            raise MetricsError(f'unable to get podmetrics for "{namespace}"/"{name}": {err.message}') from None
        total: dict[str, int] = {}
        for container in metrics.get("containers") or []:
            for resource in resources:
                value = (container.get("usage") or {}).get(resource)
                if value is None:
                    continue
                amount = cpu_millis(value) if resource == "cpu" else memory_bytes(value)
                total[resource] = total.get(resource, 0) + amount
        return total
