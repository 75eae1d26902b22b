"""The usage clients of LowNodeUtilization (descheduler v0.36 `pkg/framework/plugins/nodeutilization/usageclients.go`):
where a node's usage and a Pod's usage come from. Each Balance starts with `sync(nodes)`, which takes a snapshot
of every node's usage and Pods (the Pods are the node's non-terminal ones in every client).

- requests (no `metricsUtilization`): a node's usage is the summed requests of its Pods for the plugin's resources
  (the threshold resources plus cpu, memory, pods); a Pod's usage its requests.
- actual (`metricsUtilization.source: KubernetesMetrics`, or the deprecated `metricsServer: true`): cpu and memory
  from the metrics collector (smoothed NodeMetrics), `pods` = the number of Pods on the node. A node the collector has
  no value for fails the sync `unable to find node "<node>" in the collected metrics`, a threshold resource the
  metrics lack `unable to find "<resource>" resource for collected "<node>" node metric`. A Pod's usage is its
  PodMetrics read at the eviction (no smoothing); an unreadable one is skipped by the eviction loop
  (`"unable to get pod usage"`).
- Prometheus (`source: Prometheus`, `prometheus.query`): one instant query per sync; the result must be a vector
  (`expected query results to be of type "vector", got "<type>" instead`), each sample needs the label `instance`
  (`The collected metrics sample is missing 'instance' key`) and a value in [0, 1] (`The collected metrics sample for
  "<node>" has value <v> outside of <0; 1> interval`); `MetricResource` = int(value * 100); every node needs a sample
  (`unable to find metric entry for <node>`). A failed request is `unable to capture prometheus metrics: <the
  client's error>`. A Pod's usage is not supported: the eviction is unconstrained (see lownodeutilization.py)."""
from __future__ import annotations

from ..metrics.prometheus import ClientError, format_value
from ..quantity import cpu_millis, memory_bytes, parse, pod_requests
from .metricscollector import MetricsError

METRIC_RESOURCE = "MetricResource"


class UsageError(Exception):
    """A sync or pod usage that failed, with upstream's message."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotSupported(Exception):
    """podUsage of a client that cannot tell a Pod's usage (Prometheus)."""


def amount(resource: str, value) -> int:
    """A quantity in the unit the plugin counts: millicores for cpu, bytes, or units."""
    if resource == "cpu":
        return cpu_millis(value)
    if resource == "memory":
        return memory_bytes(value)
    return int(parse(value))


def requested_usage(pod: dict, resources: tuple[str, ...]) -> dict[str, int]:
    """utils.GetResourceRequestQuantity per resource: containers summed, at least the largest init container, plus
    overhead (cpu, memory and pods as the scheduler counts them)."""
    basic = pod_requests(pod)
    spec = pod.get("spec") or {}
    usage = {}
    for resource in resources:
        if resource in basic:
            usage[resource] = basic[resource]
            continue
        total = sum(amount(resource, ((c.get("resources") or {}).get("requests") or {}).get(resource))
                    for c in spec.get("containers") or [])
        for container in spec.get("initContainers") or []:
            total = max(total, amount(resource, ((container.get("resources") or {}).get("requests") or {})
                                      .get(resource)))
        usage[resource] = total + amount(resource, (spec.get("overhead") or {}).get(resource))
    return usage


class _Client:
    kind = ""

    def __init__(self, handle):
        self.handle = handle
        self._usage: dict[str, dict[str, int]] = {}
        self._pods: dict[str, list[dict]] = {}

    def node_usage(self, node: str) -> dict[str, int]:
        return self._usage[node]

    def pods(self, node: str) -> list[dict]:
        return self._pods[node]


class RequestedUsage(_Client):
    kind = "requests"

    def __init__(self, handle, resources: tuple[str, ...]):
        super().__init__(handle)
        self.resources = resources

    def sync(self, nodes: list[dict]) -> None:
        self._usage, self._pods = {}, {}
        for node in nodes:
            name = node["metadata"]["name"]
            pods = self.handle.pods_on_node(name)
            total = {resource: 0 for resource in self.resources}
            for pod in pods:
                for resource, value in requested_usage(pod, self.resources).items():
                    total[resource] += value
            self._pods[name], self._usage[name] = pods, total

    def pod_usage(self, pod: dict) -> dict[str, int]:
        return requested_usage(pod, self.resources)


class ActualUsage(_Client):
    kind = "KubernetesMetrics"

    def __init__(self, handle, resources: tuple[str, ...], collector):
        super().__init__(handle)
        self.resources = resources
        self.collector = collector

    def sync(self, nodes: list[dict]) -> None:
        self._usage, self._pods = {}, {}
        collected = self.collector.all_nodes_usage()
        for node in nodes:
            name = node["metadata"]["name"]
            pods = self.handle.pods_on_node(name)
            if name not in collected:
                raise UsageError(f'unable to find node "{name}" in the collected metrics')
            usage = dict(collected[name])
            usage["pods"] = len(pods)
            for resource in self.resources:
                if resource not in usage:
                    raise UsageError(f'unable to find "{resource}" resource for collected "{name}" node metric')
            self._pods[name], self._usage[name] = pods, usage

    def pod_usage(self, pod: dict) -> dict[str, int]:
        try:
            return self.collector.pod_usage(pod, self.resources)
        except MetricsError as err:
            raise UsageError(err.message) from None


class PrometheusUsage(_Client):
    kind = "Prometheus"

    def __init__(self, handle, client, query: str):
        super().__init__(handle)
        self.client = client
        self.query = query

    def sync(self, nodes: list[dict]) -> None:
        self._usage, self._pods = {}, {}
        try:
            result_type, samples = self.client.query(self.query)
        except ClientError as err:
            raise UsageError(f"unable to capture prometheus metrics: {err}") from None
        if result_type != "vector":
            raise UsageError(f'expected query results to be of type "vector", got "{result_type}" instead')
        usages = {}
        for labels, value in samples:
            if "instance" not in labels:
                raise UsageError("The collected metrics sample is missing 'instance' key")
            node = labels["instance"]
            if value < 0 or value > 1:
                raise UsageError(f'The collected metrics sample for "{node}" has value {format_value(value)} outside '
                                 "of <0; 1> interval")
            usages[node] = {METRIC_RESOURCE: int(value * 100)}
        for node in nodes:
            name = node["metadata"]["name"]
            if name not in usages:
                raise UsageError(f"unable to find metric entry for {name}")
            self._pods[name], self._usage[name] = self.handle.pods_on_node(name), usages[name]

    def pod_usage(self, pod: dict) -> dict[str, int]:
        raise NotSupported()
