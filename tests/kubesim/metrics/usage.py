"""The usage model of a cluster: what its Pods and nodes actually use, from the scenario's `metrics:` section.

```yaml
metrics:
  nodeOverhead: {cpu: 300m, memory: 1Gi}    # system usage of every node, added to its Pods' usage
  pods: requests                             # other Pods (and VMs not listed below) use their requests; or: zero
  vms:                                       # a guest's load, keyed <namespace>/<VM or VMI name>
    desched-test/vm-hot: {cpu: "6", memory: 12Gi}
    desched-test/vm-2:                       # steps: from `after` simulated seconds since start (Go duration or a
    - {cpu: 500m, memory: 2Gi}               # number of seconds; before a first step with an `after`: zero); a
    - {after: 600s, cpu: "4"}                # step without a resource keeps the previous step's value
  migrationTarget: {cpu: 20m, memory: 64Mi}  # what a launcher away from its VMI's node reports (default shown)
  podUsage:                                  # particular non-VM Pods (their first container), e.g. to reproduce
    apps/web-1: {cpu: 401m, memory: 0}       # upstream's test cases
  prometheus: {...}                          # the simulated Prometheus (see prometheus.py)
```

Who reports what (what the kubelet's cAdvisor would see and metrics-server would serve):
- a virt-launcher Pod (`kubevirt.io=virt-launcher`) on the node of its VMI (`status.nodeName`) while the VMI is
  Running reports the guest's load in its `compute` container; any other launcher of that VMI (a migration target
  before the switch-over, the source after it until it completes) reports `migrationTarget`. So the load moves with
  the VM when a migration succeeds, at the moment the VMI's node changes;
- every other Running Pod reports, per container, its requests (`pods: requests`) or zero (`pods: zero`), unless
  `podUsage` names it; a VM that `vms` does not list counts like that too (its launcher's requests, or zero);
- only Running Pods on nodes that report (a node whose Ready condition is False or Unknown has no metrics, nor its
  Pods: the kubelet cannot be scraped);
- a node's usage = `nodeOverhead` + the sum of its reporting Pods' usage.

`POST /_kubesim/usage {"cluster", "vm": "ns/name", "cpu", "memory"}` replaces a VM's load from then on (a
resource left out keeps its current value); `GET /_kubesim/usage[?cluster=]` answers the current snapshot.

Simplified: no per-container split inside a launcher (the guest's load is the `compute` container's), no cAdvisor
rate windows (usage changes at once), no CPU throttling or memory limits (usage may exceed requests, limits and
capacity)."""
from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..descheduler.policy import parse_duration
from ..quantity import cpu_millis, memory_bytes

LAUNCHER_LABEL, LAUNCHER_VALUE = "kubevirt.io", "virt-launcher"
VM_NAME_LABEL = "vm.kubevirt.io/name"
LAUNCHER_CONTAINER = "compute"
VMI_KEY = "virtualmachineinstances.kubevirt.io"
DEFAULT_MIGRATION_TARGET = {"cpu": 20, "memory": 64 * 2 ** 20}
POD_MODES = ("requests", "zero")
_KEYS = {"nodeOverhead", "pods", "vms", "migrationTarget", "podUsage", "prometheus"}
_RESOURCES = ("cpu", "memory")


class ConfigError(ValueError):
    """A `metrics:` section the simulator cannot use; the message names the key."""


@dataclass
class Step:
    after: float                      # simulated seconds since the start
    usage: dict[str, int]             # cpu in millicores, memory in bytes


@dataclass
class Config:
    node_overhead: dict[str, int] = field(default_factory=lambda: {"cpu": 0, "memory": 0})
    pods: str = "requests"
    vms: dict[str, list[Step]] = field(default_factory=dict)
    migration_target: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MIGRATION_TARGET))
    pod_usage: dict[str, dict[str, int]] = field(default_factory=dict)
    prometheus: dict | None = None    # validated by prometheus.parse_config


def _amounts(where: str, value, keep: dict[str, int] | None = None, extra: tuple[str, ...] = ()) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping with cpu and memory, got {value!r}")
    unknown = set(value) - set(_RESOURCES) - set(extra)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(set(_RESOURCES) | set(extra))}")
    result = dict(keep or {"cpu": 0, "memory": 0})
    for name, parse in (("cpu", cpu_millis), ("memory", memory_bytes)):
        if name in value:
            try:
                result[name] = parse(value[name])
            except (ValueError, ArithmeticError) as exc:
                raise ConfigError(f"{where}.{name}: {exc}") from None
            if result[name] < 0:
                raise ConfigError(f"{where}.{name}: must not be negative")
    return result


def _seconds(where: str, value) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a duration such as 600s, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_duration(str(value))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _steps(where: str, value) -> list[Step]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ConfigError(f"{where}: needs at least one step")
    steps: list[Step] = []
    for index, item in enumerate(items):
        here = f"{where}[{index}]" if isinstance(value, list) else where
        after = _seconds(f"{here}.after", item.get("after", 0)) if isinstance(item, dict) else 0.0
        if steps and after <= steps[-1].after:
            raise ConfigError(f"{here}.after: steps must start later than the one before ({after:g}s <= "
                              f"{steps[-1].after:g}s)")
        usage = _amounts(here, item, steps[-1].usage if steps else None, extra=("after",))
        steps.append(Step(after, usage))
    if steps[0].after != 0:
        steps.insert(0, Step(0.0, {"cpu": 0, "memory": 0}))
    return steps


def parse_config(where: str, data) -> Config:
    """The `metrics:` section of one cluster; ConfigError names the key (`where` is its path)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(_KEYS)}")
    config = Config()
    if "nodeOverhead" in data:
        config.node_overhead = _amounts(f"{where}.nodeOverhead", data["nodeOverhead"])
    if "migrationTarget" in data:
        config.migration_target = _amounts(f"{where}.migrationTarget", data["migrationTarget"])
    if "pods" in data:
        if data["pods"] not in POD_MODES:
            raise ConfigError(f"{where}.pods: {data['pods']!r} is not one of {list(POD_MODES)}")
        config.pods = data["pods"]
    for key, value in (data.get("podUsage") or {}).items():
        if not isinstance(key, str) or key.count("/") != 1 or not all(key.split("/")):
            raise ConfigError(f"{where}.podUsage: keys are <namespace>/<pod>, got {key!r}")
        config.pod_usage[key] = _amounts(f"{where}.podUsage.{key}", value)
    vms = data.get("vms") or {}
    if not isinstance(vms, dict):
        raise ConfigError(f"{where}.vms: expected a mapping of <namespace>/<name> to usage")
    for key, value in vms.items():
        if not isinstance(key, str) or key.count("/") != 1 or not all(key.split("/")):
            raise ConfigError(f"{where}.vms: keys are <namespace>/<name>, got {key!r}")
        config.vms[key] = _steps(f"{where}.vms.{key}", value)
    if data.get("prometheus") is not None:
        from .prometheus import parse_config as parse_prometheus   # pylint: disable=import-outside-toplevel
        config.prometheus = parse_prometheus(f"{where}.prometheus", data["prometheus"])
    return config


# ------------------------------------------------------------------------------------------ snapshot
@dataclass
class PodUsage:
    namespace: str
    name: str
    node: str
    labels: dict
    containers: list[tuple[str, dict[str, int]]]

    @property
    def total(self) -> dict[str, int]:
        return {r: sum(usage[r] for _name, usage in self.containers) for r in _RESOURCES}


@dataclass
class Snapshot:
    """What the metrics pipeline reports at one moment (`timestamp`, RFC 3339)."""
    timestamp: str
    nodes: dict[str, dict[str, int]]                  # reporting nodes -> {cpu (m), memory (bytes)}
    node_labels: dict[str, dict]
    capacity: dict[str, dict[str, int]]               # node capacity (status.capacity, else allocatable)
    pods: dict[tuple[str, str], PodUsage]

    def report(self) -> dict:
        return {"timestamp": self.timestamp, "nodes": copy.deepcopy(self.nodes),
                "pods": {f"{ns}/{name}": {"node": pod.node, **pod.total} for (ns, name), pod in sorted(self.pods.items())}}


def node_reports(node: dict) -> bool:
    """A node is scraped unless its Ready condition is False or Unknown (no condition: it reports)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True


def node_capacity(node: dict) -> dict[str, int]:
    status = node.get("status") or {}
    source = status.get("capacity") or status.get("allocatable") or {}
    return {"cpu": cpu_millis(source.get("cpu")), "memory": memory_bytes(source.get("memory"))}


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class UsageModel:
    """One cluster's usage (`cluster.metrics`): the configured loads, run-time overrides, and snapshots."""

    def __init__(self, cluster, config: Config):
        self.cluster = cluster
        self.config = config
        self.started = time.monotonic()
        self.overrides: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Simulated seconds since the cluster was built."""
        return (time.monotonic() - self.started) * self.cluster.clock.time_scale

    def vm_load(self, key: str) -> dict[str, int] | None:
        """The configured (or overridden) load of VM `namespace/name` now; None when the scenario lists none."""
        with self._lock:
            if key in self.overrides:
                return dict(self.overrides[key])
        steps = self.config.vms.get(key)
        if not steps:
            return None
        now = self.elapsed()
        current = steps[0]
        for step in steps:
            if step.after <= now:
                current = step
        return dict(current.usage)

    def set_vm_load(self, key: str, values: dict) -> dict[str, int]:
        """The admin endpoint: a new constant load for a VM (resources left out keep their current value)."""
        if not isinstance(key, str) or key.count("/") != 1 or not all(key.split("/")):
            raise ConfigError(f"vm: expected <namespace>/<name>, got {key!r}")
        base = self.vm_load(key) or {"cpu": 0, "memory": 0}
        usage = _amounts("usage", {k: v for k, v in values.items() if k in _RESOURCES}, base)
        with self._lock:
            self.overrides[key] = usage
        return dict(usage)

    # ---------------------------------------------------------------------------------- computing
    def _container_usage(self, pod: dict) -> list[tuple[str, dict[str, int]]]:
        containers = []
        fixed = self.config.pod_usage.get(f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}")
        for index, container in enumerate((pod.get("spec") or {}).get("containers") or []):
            if fixed is not None:
                containers.append((container.get("name", ""), dict(fixed) if index == 0 else {"cpu": 0, "memory": 0}))
                continue
            requests = (container.get("resources") or {}).get("requests") or {}
            if self.config.pods == "requests":
                usage = {"cpu": cpu_millis(requests.get("cpu")), "memory": memory_bytes(requests.get("memory"))}
            else:
                usage = {"cpu": 0, "memory": 0}
            containers.append((container.get("name", ""), usage))
        return containers

    def _launcher_usage(self, pod: dict, vmis: dict) -> list[tuple[str, dict[str, int]]] | None:
        labels = pod["metadata"].get("labels") or {}
        if labels.get(LAUNCHER_LABEL) != LAUNCHER_VALUE or not labels.get(VM_NAME_LABEL):
            return None
        key = f"{pod['metadata'].get('namespace', '')}/{labels[VM_NAME_LABEL]}"
        load = self.vm_load(key)
        vmi = vmis.get(key)
        status = (vmi or {}).get("status") or {}
        active = vmi is not None and status.get("phase") == "Running" and \
            status.get("nodeName") == (pod.get("spec") or {}).get("nodeName")
        if not active:
            return [(LAUNCHER_CONTAINER, dict(self.config.migration_target))]
        if load is None:
            return None   # not listed: counted like any other Pod
        return [(LAUNCHER_CONTAINER, load)]

    def snapshot(self) -> Snapshot:
        cluster = self.cluster
        with cluster.lock:
            nodes = [entry.obj for entry in cluster.store.entries("nodes")]
            pods = [entry.obj for entry in cluster.store.entries("pods")]
            vmis = {}
            if cluster.registry.by_key(VMI_KEY) is not None:
                vmis = {f"{e.obj['metadata'].get('namespace', '')}/{e.obj['metadata']['name']}": e.obj
                        for e in cluster.store.entries(VMI_KEY)}
        reporting = {n["metadata"]["name"]: n for n in nodes if node_reports(n)}
        usage = {name: dict(self.config.node_overhead) for name in reporting}
        pod_usage: dict[tuple[str, str], PodUsage] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node not in reporting or (pod.get("status") or {}).get("phase") != "Running":
                continue
            containers = self._launcher_usage(pod, vmis) or self._container_usage(pod)
            meta = pod["metadata"]
            entry = PodUsage(meta.get("namespace", ""), meta["name"], node, dict(meta.get("labels") or {}), containers)
            pod_usage[(entry.namespace, entry.name)] = entry
            for resource, amount in entry.total.items():
                usage[node][resource] += amount
        return Snapshot(now_rfc3339(), usage, {n: dict(o["metadata"].get("labels") or {}) for n, o in reporting.items()},
                        {n: node_capacity(o) for n, o in reporting.items()}, pod_usage)


def install(cluster, config: Config) -> UsageModel:
    """Attach the model to the cluster and create what the scenario's Prometheus needs."""
    cluster.metrics = UsageModel(cluster, config)
    if config.prometheus is not None:
        from .prometheus import install as install_prometheus   # pylint: disable=import-outside-toplevel
        install_prometheus(cluster, config.prometheus)
    return cluster.metrics


def model(cluster) -> UsageModel | None:
    return getattr(cluster, "metrics", None)
