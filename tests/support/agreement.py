"""The simulator's descheduler and the collection's planner on one generated cluster, for
tests/integration/test_planner_agrees_with_simulator.py.

A generated cluster is plain data (`ClusterSpec`: workers with their sizes and the VM launcher Pods on each, grouped
in `VmKind`s of interchangeable VMs). `build_cluster` makes an in-process simulator cluster of it (no server, no
controllers: one descheduler cycle needs only the store and the eviction subresource); `simulator_run` runs one
cycle of the simulator's descheduler and reads what it did from its klog lines; `planner_run` plans on the same
nodes and Pods read back from the store as plain dicts; `disagreements` compares the two. For the metrics modes,
`metrics_section` gives the cluster the simulator's usage model (every VM's load, a node overhead, other Pods at their
requests), and `served_metrics` / `prometheus_answer` read what it serves.

Every worker carries a DaemonSet agent Pod (not evictable) whose memory request, and so its reported usage, differs
per node by less than the memory step of a VM: no two nodes have the same summed usage, in requests or in actual
usage, which is the key upstream sorts source nodes by (its order among equals is undefined)."""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlencode

import yaml

from kubesim.api import Cluster
from kubesim.clock import Clock
from kubesim.descheduler.run import run_once
from kubesim.metrics import api as metrics_api, prometheus, usage
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate

PROFILE = "vm-rebalance"
VM_LABELS = {"app": "desched-test"}
NAMESPACES = ("vms-a", "vms-b")
QOS_CLASSES = ("BestEffort", "Burstable", "Guaranteed")
# The agent Pods' memory step from one node to the next; VM sizes and loads are multiples of 256 MiB.
DISTINCT_STEP_MI = 8
ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]
CONTROL_PLANE = "control-plane"
EARLY_EXITS = (
    "No node is underutilized, nothing to do here, you might tune your thresholds further",
    "Number of nodes underutilized is less or equal than NumberOfNodes, nothing to do here",
    "All nodes are underutilized, nothing to do here",
    "All nodes are under target utilization, nothing to do here",
)
EVICTED = re.compile(r'"Evicted pod" pod="(?P<namespace>[^"/]+)/(?P<pod>[^"]+)".* node="(?P<node>[^"]+)"')
CLASSIFIED = re.compile(r'"Node has been classified" .*category="(?P<category>[a-z]+)" node="(?P<node>[^"]+)"')
APPROPRIATE = re.compile(r'"Node is appropriately utilized" .*node="(?P<node>[^"]+)"')
PROFILE_ERRORS = ("unable to create a profile", "unable to initialize a plugin", "unable to build", "failed with error")
PROMETHEUS_SERVICE = {"namespace": "monitoring", "name": "prometheus-k8s", "port": 9091}
PROMETHEUS_URL = "https://{name}.{namespace}.svc:{port}".format(**PROMETHEUS_SERVICE)
PROMETHEUS_SECRET = {"namespace": "descheduler", "name": "prometheus-auth"}
PROMETHEUS_TOKEN = "agreement-token"
# What the simulator's Prometheus answers per node: cpu, memory, and the query of OpenShift's KubeVirtRelieveAndMigrate.
PROMETHEUS_QUERIES = prometheus.KNOWN_QUERIES
DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@dataclass(frozen=True)
class VmKind:
    """VMs the descheduler cannot tell apart: one namespace, priority, QoS class, size and actual load. On a node,
    only VMs of one kind share a priority and QoS class, so upstream's undefined order among equally ranked Pods
    chooses among identical VMs only."""
    namespace: str
    priority: int
    qos: str
    cpu_m: int
    memory_mi: int
    in_scope: bool = True
    load_cpu_m: int = 0
    load_memory_mi: int = 0
    starting: bool = False   # the launcher Pod is still Pending: counted by its requests, but no PodMetrics yet
    tolerates_dedicated: bool = False   # tolerates the DEDICATED taint


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    cpu: int
    memory_gi: int
    pods: int
    vms: tuple = ()   # (VmKind, count) pairs
    cordoned: bool = False
    dedicated: bool = False   # tainted with DEDICATED (a node kept for some workloads, e.g. GPU VMs)


@dataclass(frozen=True)
class ClusterSpec:
    workers: tuple
    overhead: tuple = (200, 512)   # the metrics model's node overhead: cpu millicores, memory MiB

    @property
    def names(self) -> list[str]:
        return [w.name for w in self.workers]


@dataclass(frozen=True)
class Eviction:
    node: str
    namespace: str
    pod: str


@dataclass
class SimulatorRun:
    evictions: list
    categories: dict
    lines: list

    def messages(self) -> list[str]:
        return [line.split("] ", 1)[1] if "] " in line else line for line in self.lines]


@dataclass
class PlannerRun:
    plan: dict
    evictions: list = field(default_factory=list)
    alternatives: dict = field(default_factory=dict)   # Eviction -> names of its equally ranked alternatives

    @property
    def categories(self) -> dict:
        return {row["name"]: row["category"] for row in self.plan["nodes"]}


# ------------------------------------------------------------------------------------------ objects
def agent_memory_mi(index: int) -> int:
    return 128 + DISTINCT_STEP_MI * index


def vm_name(worker: str, kind_index: int, copy_index: int) -> str:
    return "vm-{0}{1}-{2}".format(worker.rsplit("-", 1)[-1], kind_index, copy_index)


def launcher_name(vm: str) -> str:
    return "virt-launcher-{0}-x7k2p".format(vm)


def node_object(name: str, cpu: int, memory_gi: int, pods: int, labels: Optional[dict] = None, taints: Optional[list] = None,
                cordoned: bool = False) -> dict:
    resources = {"cpu": str(cpu), "memory": "{0}Gi".format(memory_gi), "pods": str(pods)}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}},
            "spec": {},
            "status": {"capacity": dict(resources), "allocatable": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
    if taints:
        node["spec"]["taints"] = taints
    if cordoned:
        node["spec"]["unschedulable"] = True
    return node


def agent_pod(node: str, index: int) -> dict:
    """A DaemonSet Pod on every node: requests that count, never evictable (DaemonSetPods, no VM label)."""
    resources = {"requests": {"cpu": "100m", "memory": "{0}Mi".format(agent_memory_mi(index))}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "node-agent-{0}".format(node), "namespace": "kube-system", "labels": {"app": "node-agent"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-agent",
                                              "uid": "uid-node-agent", "controller": True}]},
            "spec": {"nodeName": node, "priority": 0, "containers": [{"name": "agent", "image": "agent", "resources": resources}]},
            "status": {"phase": "Running", "startTime": "2020-01-01T00:00:00Z"}}


def container_resources(kind: VmKind) -> dict:
    if kind.qos == "BestEffort":
        return {}
    requests = {"cpu": "{0}m".format(kind.cpu_m), "memory": "{0}Mi".format(kind.memory_mi)}
    if kind.qos == "Guaranteed":
        return {"requests": requests, "limits": dict(requests)}
    return {"requests": requests}


def vmi_object(node: str, vm: str, kind: VmKind) -> dict:
    """The VMI a launcher Pod belongs to: the simulator's metrics model reports a VM's load on its Running VMI's node."""
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": vm, "namespace": kind.namespace, "labels": {"vm.kubevirt.io/name": vm}},
            "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "{0}Mi".format(kind.memory_mi)}}}},
            "status": {"phase": "Scheduled" if kind.starting else "Running", "nodeName": node}}


def launcher_pod(node: str, vm: str, kind: VmKind) -> dict:
    """A virt-launcher Pod as KubeVirt creates it, in the parts the descheduler reads (the owner's uid is filled in
    from the VMI when the cluster is populated)."""
    labels = {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": vm}
    if kind.in_scope:
        labels.update(VM_LABELS)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": launcher_name(vm), "namespace": kind.namespace, "labels": labels,
                         "annotations": {"kubevirt.io/domain": vm},
                         "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": vm,
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"nodeName": node, "priority": kind.priority,
                     "containers": [{"name": "compute", "image": "virt-launcher", "resources": container_resources(kind)}],
                     "volumes": [{"name": "private", "emptyDir": {}}],
                     "tolerations": [{"key": DEDICATED["key"], "operator": "Equal", "value": DEDICATED["value"], "effect": "NoSchedule"}]
                     if kind.tolerates_dedicated else []},
            "status": {"phase": "Pending" if kind.starting else "Running", "startTime": "2020-01-01T00:00:00Z"}}


def vms_of(spec: ClusterSpec):
    """(worker, vm name, kind) of every VM of the cluster."""
    for worker in spec.workers:
        for kind_index, (kind, count) in enumerate(worker.vms):
            for copy_index in range(count):
                yield worker, vm_name(worker.name, kind_index, copy_index), kind


def kinds_by_pod(spec: ClusterSpec) -> dict:
    """(namespace, launcher Pod name) -> (its node, the index of its kind on the node)."""
    found = {}
    for worker in spec.workers:
        for kind_index, (kind, count) in enumerate(worker.vms):
            for copy_index in range(count):
                found[(kind.namespace, launcher_name(vm_name(worker.name, kind_index, copy_index)))] = (worker.name, kind_index)
    return found


def objects(spec: ClusterSpec) -> list[dict]:
    """The nodes (the workers and a tainted control-plane node outside the policy's selection) and their Pods."""
    result = [node_object(CONTROL_PLANE, 4, 8, 110, {"node-role.kubernetes.io/control-plane": ""},
                          [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])]
    for index, worker in enumerate(spec.workers):
        result.append(node_object(worker.name, worker.cpu, worker.memory_gi, worker.pods, {"node-role.kubernetes.io/worker": ""},
                                  [dict(DEDICATED)] if worker.dedicated else None, worker.cordoned))
        result.append(agent_pod(worker.name, index))
    result.append(agent_pod(CONTROL_PLANE, len(spec.workers)))
    result.extend(vmi_object(worker.name, vm, kind) for worker, vm, kind in vms_of(spec))
    result.extend(launcher_pod(worker.name, vm, kind) for worker, vm, kind in vms_of(spec))
    return result


def metrics_section(spec: ClusterSpec, prometheus: bool = False) -> dict:
    """The scenario `metrics:` section serving each VM's load (other Pods use their requests) and, with `prometheus`,
    the Prometheus the policy's provider names, with its token in a Secret."""
    section = {"nodeOverhead": {"cpu": "{0}m".format(spec.overhead[0]), "memory": "{0}Mi".format(spec.overhead[1])}, "pods": "requests",
               "vms": {"{0}/{1}".format(kind.namespace, vm): {"cpu": "{0}m".format(kind.load_cpu_m), "memory": "{0}Mi".format(kind.load_memory_mi)}
                       for _worker, vm, kind in vms_of(spec)}}
    if prometheus:
        section["prometheus"] = {"namespace": PROMETHEUS_SERVICE["namespace"], "service": PROMETHEUS_SERVICE["name"],
                                 "port": PROMETHEUS_SERVICE["port"], "token": PROMETHEUS_TOKEN, "tokenSecret": dict(PROMETHEUS_SECRET)}
    return {"metrics": section}


def served_metrics(cluster: Cluster) -> tuple[list, list]:
    """The NodeMetrics and PodMetrics items the simulator's metrics.k8s.io serves now (what a list call returns)."""
    return (metrics_api.list_objects(cluster, metrics_api.NODE_METRICS, None, None, None),
            metrics_api.list_objects(cluster, metrics_api.POD_METRICS, None, None, None))


def prometheus_answer(cluster: Cluster, query: str) -> dict:
    """The simulator's Prometheus `/api/v1/query` answer to an instant `query`, as JSON."""
    code, _type, body = prometheus.serve(usage.model(cluster), "GET", "/api/v1/query", urlencode({"query": query}), b"", "",
                                         "Bearer {0}".format(PROMETHEUS_TOKEN))
    assert code == 200, body
    return json.loads(body)


def build_cluster(spec: ClusterSpec, extra: Optional[dict] = None) -> Cluster:
    """An in-process workload cluster holding `spec` (`extra`: more keys of a scenario's cluster section)."""
    cluster = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(1000))
    populate(cluster, {"namespaces": ["descheduler", *NAMESPACES], "objects": objects(spec), **(extra or {})})
    return cluster


def stored(cluster: Cluster, key: str) -> list[dict]:
    """The cluster's objects of one resource as plain dicts, as a list call returns them."""
    return [copy.deepcopy(entry.obj) for entry in cluster.store.entries(key)]


# ------------------------------------------------------------------------------------------ runs
def simulator_run(cluster: Cluster, policy: dict, seed: int) -> SimulatorRun:
    """One cycle of the simulator's descheduler (a process with no interval), `seed` ordering equals; what it evicted
    is read from its log and checked against the Pods the evictions left terminating."""
    code, lines = run_once(cluster, ARGS, yaml.safe_dump(policy, sort_keys=False), seed=seed)
    text = "\n".join(lines)
    assert code == 0 and not any(error in text for error in PROFILE_ERRORS), text
    evictions = [Eviction(m["node"], m["namespace"], m["pod"]) for m in EVICTED.finditer(text)]
    terminating = {(pod["metadata"]["namespace"], pod["metadata"]["name"]) for pod in stored(cluster, "pods")
                   if pod["metadata"].get("deletionTimestamp")}
    assert terminating == {(e.namespace, e.pod) for e in evictions}, "the log's evictions are not the Pods evicted:\n" + text
    categories = {m["node"]: m["category"] for m in CLASSIFIED.finditer(text)}
    categories.update((m["node"], "appropriately utilized") for m in APPROPRIATE.finditer(text))
    return SimulatorRun(evictions, categories, lines)


def planner_run(planner, cluster: Cluster, policy: dict, actual_usage: Optional[dict] = None) -> PlannerRun:
    """The planner (`planner.plan_policy`) on the nodes and Pods of `cluster`'s store."""
    options = {} if actual_usage is None else {"actual_usage": actual_usage}
    plan = planner.plan_policy(policy, stored(cluster, "nodes"), stored(cluster, "pods"), vm_profiles=(PROFILE,), **options)
    run = PlannerRun(plan)
    for row in plan["evictions"]:
        eviction = Eviction(row["node"], row["namespace"], row["pod"])
        run.evictions.append(eviction)
        run.alternatives[eviction] = set(row.get("alternatives") or ())
    return run


# ------------------------------------------------------------------------------------------ comparison
def disagreements(spec: ClusterSpec, simulator: SimulatorRun, planner: PlannerRun, node_order: bool = True) -> list[str]:
    """What the two runs disagree on; VMs of one kind on one node count as the same VM (see `VmKind`), provided the
    planner names the simulator's choice among the eviction's alternatives. Without `node_order` (source nodes may
    tie) the evictions are compared node by node, each node's in order."""
    problems = []
    if simulator.categories != planner.categories:
        problems.append("categories: simulator {0}, planner {1}".format(simulator.categories, planner.categories))
    stop = planner.plan.get("stop_reason")
    if stop in EARLY_EXITS and not any(m.startswith('"{0}"'.format(stop)) for m in simulator.messages()):
        problems.append("planner stops with {0!r}, the simulator does not log it".format(stop))
    kinds = kinds_by_pod(spec)

    def kind_of(eviction: Eviction):
        return kinds.get((eviction.namespace, eviction.pod), (eviction.node, eviction.pod))

    simulated = [kind_of(e) for e in simulator.evictions]
    planned = [kind_of(e) for e in planner.evictions]
    if not node_order:
        # sorted() is stable: each node's evictions keep their order
        simulated, planned = (sorted(sequence, key=lambda kind: kind[0]) for sequence in (simulated, planned))
    if simulated != planned:
        problems.append("evictions (node, VM kind): simulator {0}, planner {1}".format(simulated, planned))
        return problems
    for kind in set(planned):
        named = set()
        for eviction in planner.evictions:
            if kind_of(eviction) == kind:
                named |= {eviction.pod} | planner.alternatives[eviction]
        chosen = {e.pod for e in simulator.evictions if kind_of(e) == kind}
        if not chosen <= named:
            problems.append("the simulator evicted {0}, the planner names only {1} for kind {2}".format(
                sorted(chosen), sorted(named), kind))
    return problems


def describe(policy: dict, simulator: SimulatorRun, planner: PlannerRun, problems: list[str]) -> str:
    """A failure message: what differs, both runs' evictions, the planner's node rows and the simulator's log."""
    return "\n".join(["disagreement:", *("  " + p for p in problems),
                      "simulator evicted: {0}".format([(e.node, e.pod) for e in simulator.evictions]),
                      "planner evicts:    {0}".format([(e.node, e.pod) for e in planner.evictions]),
                      "planner nodes: {0}".format(planner.plan["nodes"]),
                      "planner stop: {0}; node stops: {1}".format(planner.plan.get("stop_reason"),
                                                                  [p.get("node_stop") for p in planner.plan["profiles"]]),
                      "policy: {0}".format(yaml.safe_dump(policy, sort_keys=False)),
                      "simulator log:", *simulator.messages()])
