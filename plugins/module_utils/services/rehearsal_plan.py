# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rehearsal's plan: which two workers, how large the test VMs, which thresholds, and what the planner
predicts (`policy/rehearsal.py`); or, with `confirm`, the same prediction checked on the running test VMs.

Everything that would make the rehearsal unsafe or pointless is refused here, before anything is created: fewer
than two schedulable KubeVirt workers, a worker named that does not exist, is not Ready or is cordoned, a namespace
of that name that is not the rehearsal's own (or is left from an earlier run), a storage class that does not exist,
a policy owned by OpenShift's descheduler operator (its KubeDescheduler CR rewrites the ConfigMap), and workers
without room for the test VMs. Reads only: nodes, Pods (one list each), the namespace, the storage class and the
KubeDescheduler resources where served. A rehearsal namespace still Terminating (the cleanup of a run just before)
is waited for, within `timeout`, before the cluster is sized: its test VMs still hold memory on the workers.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import rehearsal_objects as objects
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import labels, meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import (
    CONTROL_PLANE_LABELS,
    FIT_EFFECTS,
    KUBEVIRT_SCHEDULABLE_LABEL,
    is_ready,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import amount
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import check_labels, is_dns_label
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import rehearsal
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import active_pods
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.rehearsal import RehearsalRefused
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.rehearsal_vms import (
    is_terminating,
    still_terminating_fix,
    still_terminating_problem,
    wait_until_gone,
)

ARG_SPEC = {
    "nodes": {"type": "list", "elements": "str"},
    "moves": {"type": "int", "default": 1},
    "namespace": {"type": "str", "default": "kubevirt-ops-rehearsal"},
    "vm_labels": {"type": "dict", "default": {"app": "kubevirt-ops-rehearsal"}},
    "margin": {"type": "float", "default": 2.0},
    "min_gap": {"type": "int", "default": 5},
    "vm_memory_min": {"type": "str", "default": "1Gi"},
    "vm_memory_max": {"type": "str"},
    "storage_class": {"type": "str"},
    "allow_operator_policy": {"type": "bool", "default": False},
    "confirm": {"type": "dict"},
    "timeout": {"type": "int", "default": 600},
}


@dataclasses.dataclass(frozen=True)
class RehearsalPlanOptions(ModuleOptions):
    """The options of rehearsal_plan, as ARG_SPEC parses them."""
    nodes: Optional[List[str]]
    moves: int
    namespace: str
    vm_labels: Dict[str, str]
    margin: float
    min_gap: int
    vm_memory_min: str
    vm_memory_max: Optional[str]
    storage_class: Optional[str]
    allow_operator_policy: bool
    confirm: Optional[dict]
    timeout: int


def _memory(value: Optional[str], path: str) -> Optional[int]:
    if value is None:
        return None
    try:
        result = amount("memory", value)
    except ValueError as error:
        raise InvalidOption("{0!r} is not a memory quantity".format(value), "Write it as Kubernetes does, e.g. 1Gi or 1536Mi.",
                            path=path) from error
    if result < 256 * objects.MI:
        raise InvalidOption("{0} is too small for a VM".format(value), "Give at least 256Mi.", path=path)
    return result


def check_options(options: RehearsalPlanOptions) -> None:
    """Every option that cannot work, named with its fix, before the cluster is read."""
    if options.moves < 1:
        raise InvalidOption("must be 1 or more, got {0}".format(options.moves), "Give how many live migrations to rehearse, e.g. 1.",
                            path="moves")
    if not is_dns_label(options.namespace):
        raise InvalidOption("{0!r} is not a valid namespace name".format(options.namespace),
                            "Use lower-case letters, digits and '-', at most 63 characters.", path="namespace")
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long to wait for an earlier rehearsal's namespace to go, e.g. 600.",
                            path="timeout")
    if options.nodes is not None and (len(options.nodes) != 2 or options.nodes[0] == options.nodes[1]):
        raise InvalidOption("needs two different worker names, got {0}".format(options.nodes),
                            "Give the worker to overload first and the one to receive the VMs second, e.g. [worker-a, worker-b].",
                            path="nodes")
    if not options.vm_labels:
        raise InvalidOption("must not be empty", "Give the scoping label of the test VMs, e.g. {app: kubevirt-ops-rehearsal}.",
                            path="vm_labels")
    try:
        check_labels(options.vm_labels)
    except ValueError as error:
        raise InvalidOption(str(error), "Give valid label keys and values.", path="vm_labels") from error
    if not 0 <= options.margin <= 10:
        raise InvalidOption("must be between 0 and 10 percentage points", "Keep the default 2.", path="margin")
    if options.min_gap < 1:
        raise InvalidOption("must be at least 1 point", "Keep the default 5: closer thresholds make nodes swap categories.", path="min_gap")
    low, high = _memory(options.vm_memory_min, "vm_memory_min"), _memory(options.vm_memory_max, "vm_memory_max")
    if high is not None and low is not None and high < low:
        raise InvalidOption("is below vm_memory_min", "Raise vm_memory_max or lower vm_memory_min.", path="vm_memory_max")


# ------------------------------------------------------------------------------------------ workers
def worker_problem(node: Optional[dict], name: str) -> Optional[str]:
    """Why `node` cannot take part in the rehearsal, or None."""
    if node is None:
        return "node {0} does not exist".format(name)
    if not is_ready(node):
        return "node {0} is not Ready".format(name)
    if (node.get("spec") or {}).get("unschedulable"):
        return "node {0} is cordoned (spec.unschedulable)".format(name)
    if labels(node).get(KUBEVIRT_SCHEDULABLE_LABEL) != "true":
        return "node {0} is not labelled {1}=true (virt-handler does not run there)".format(name, KUBEVIRT_SCHEDULABLE_LABEL)
    if any(t.get("effect") in FIT_EFFECTS for t in (node.get("spec") or {}).get("taints") or []):
        return "node {0} has a NoSchedule or NoExecute taint".format(name)
    return None


def pick_workers(nodes: List[dict], pods: List[dict], named: Optional[List[str]]) -> List[str]:
    """The named workers checked, or the busiest and the least busy schedulable KubeVirt workers by memory requests."""
    by_name = {meta(n).get("name"): n for n in nodes}
    if named:
        problems = [p for p in (worker_problem(by_name.get(n), n) for n in named) if p]
        if problems:
            raise RehearsalRefused("; ".join(problems), "Name two Ready, schedulable KubeVirt workers in rehearse_nodes.", path="rehearse_nodes")
        return list(named)
    workers = [n for n in nodes if not any(k in labels(n) for k in CONTROL_PLANE_LABELS) and worker_problem(n, meta(n).get("name")) is None]
    if len(workers) < 2:
        raise RehearsalRefused(
            "the rehearsal needs two schedulable KubeVirt workers, found {0}{1}".format(
                len(workers), " ({0})".format(", ".join(meta(n)["name"] for n in workers)) if workers else ""),
            "Uncordon or add a worker; a live migration needs somewhere to go.", path="rehearse_nodes")
    pods_by_node = active_pods(pods)
    ranked = sorted(workers, key=lambda n: (-rehearsal.node_figures(n, pods_by_node.get(meta(n)["name"], []))["percent"]["memory"],
                                            meta(n)["name"]))
    return [meta(ranked[0])["name"], meta(ranked[-1])["name"]]


# ------------------------------------------------------------------------------------------ refusals
def operator_refusal(client: Client, allowed: bool) -> None:
    resource = client.find_kind("KubeDescheduler", "operator.openshift.io")
    if resource is None or allowed:
        return
    owners = client.list(resource)
    if owners:
        raise RehearsalRefused(
            "the Descheduler here is OpenShift's operator: KubeDescheduler {0} owns the policy ConfigMap and puts its own profiles "
            "back".format(", ".join("{0}/{1}".format(meta(o).get("namespace"), meta(o).get("name")) for o in owners)),
            "Rehearse with the KubeDescheduler CR (profiles such as KubeVirtRelieveAndMigrate) instead, or set "
            "rehearse_allow_operator_policy=true when the operator is scaled down and the ConfigMap is yours.",
            path="rehearse_allow_operator_policy")


def wait_for_earlier_namespace(client: Client, name: str, timeout: int, clock: Callable[[], float]) -> float:
    """The seconds waited (within `timeout`) for the rehearsal's namespace `name` to be gone when it is Terminating (a
    cleanup just before); refused when it is still there at the timeout."""
    started = clock()
    found = client.get(client.require_kind("Namespace"), name)
    if not (is_terminating(found) and objects.is_rehearsal_namespace(found)):
        return 0.0
    left = wait_until_gone(client, name, started + timeout, clock)
    if left is not None:
        raise RehearsalRefused(still_terminating_problem(name, left, timeout), still_terminating_fix(name), path="timeout")
    return round(clock() - started, 3)


def namespace_refusal(client: Client, name: str) -> None:
    found = client.get(client.require_kind("Namespace"), name)
    if found is None:
        return
    if not objects.is_rehearsal_namespace(found):
        raise RehearsalRefused(
            objects.foreign_namespace_problem(name),
            "Give another rehearse_namespace; the rehearsal deletes its namespace at the end and never touches one it did not create.",
            path="rehearse_namespace")
    raise RehearsalRefused(
        "namespace {0} is left from an earlier rehearsal (run {1})".format(name, (meta(found).get("annotations") or {}).get(
            objects.RUN_ANNOTATION, "unknown")),
        "Remove it first: ansible-playbook kubevirt_ops.rebalance.rehearse -e rehearse_cleanup=only.", path="rehearse_namespace")


def storage_class_refusal(client: Client, name: Optional[str]) -> None:
    if name and client.get(client.require_kind("StorageClass", "storage.k8s.io"), name) is None:
        raise RehearsalRefused("storage class {0} does not exist".format(name),
                               "Give a StorageClass that provisions ReadWriteMany volumes (kubectl get storageclass), or none "
                               "for containerDisk test VMs.", path="rehearse_storage_class")


# ------------------------------------------------------------------------------------------ run
def _confirm(options: RehearsalPlanOptions, nodes: List[dict], pods: List[dict]) -> dict:
    sizing = dict(options.confirm or {})
    missing = [k for k in ("source", "destination", "vm_names", "thresholds", "target_thresholds") if k not in sizing]
    if missing:
        raise InvalidOption("lacks {0}".format(", ".join(missing)), "Pass the sizing that rehearsal_plan returned.", path="confirm")
    moved = rehearsal.misplaced(pods, sizing["vm_names"], options.namespace, sizing["source"])
    if moved:
        raise RehearsalRefused(
            "test VM(s) not on {0}, where the prediction put them: {1}. Something moved them after they were created; the "
            "rehearsal holds the Descheduler, so another run or controller did".format(sizing["source"], ", ".join(moved)),
            "Find what moved them (kubectl get vmim -n {0}; a second Descheduler, a node maintenance, a person), stop it, then "
            "rehearse again: the comparison with the prediction would prove nothing now.".format(options.namespace),
            path="confirm", result={"misplaced": moved})
    policy = rehearsal.rehearsal_policy(sizing["source"], sizing["destination"], options.vm_labels, sizing["thresholds"]["memory"],
                                        sizing["target_thresholds"]["memory"], options.moves)
    prediction = rehearsal.predict(policy, nodes, pods, sizing["source"], sizing["destination"], options.moves, sizing["vm_names"],
                                   options.namespace)
    if not prediction["holds"]:
        raise RehearsalRefused(
            "with the test VMs running, the prediction no longer holds: {0}".format("; ".join(prediction["problems"])),
            "Run the rehearsal again (it sizes from the cluster as it is then); if a VM landed on the wrong worker, free memory on "
            "{0}.".format(sizing["source"]), path="confirm", result={"prediction": prediction})
    sizing.update(prediction=prediction, policy=policy)
    return sizing


def run(options: RehearsalPlanOptions, check_mode: bool, client: Optional[Client] = None, clock: Callable[[], float] = time.monotonic) -> dict:
    """The sizing and prediction (reads only, the same in check mode)."""
    del check_mode  # reads only
    check_options(options)
    client = client or Client.from_options(options.connection, extra_timeout=options.timeout)
    # before the cluster is read: the test VMs of a rehearsal being deleted still hold memory on the workers
    waited = 0.0 if options.confirm else wait_for_earlier_namespace(client, options.namespace, options.timeout, clock)
    nodes = client.list(client.require_kind("Node"))
    pods = client.list(client.require_kind("Pod"))
    if options.confirm:
        sizing = _confirm(options, nodes, pods)
    else:
        operator_refusal(client, options.allow_operator_policy)
        source, destination = pick_workers(nodes, pods, options.nodes)
        namespace_refusal(client, options.namespace)
        storage_class_refusal(client, options.storage_class)
        sizing = rehearsal.size(nodes, pods, source, destination, options.moves, options.namespace, options.vm_labels,
                                margin=options.margin, min_gap=options.min_gap,
                                memory_min=_memory(options.vm_memory_min, "vm_memory_min") or objects.GI,
                                memory_max=_memory(options.vm_memory_max, "vm_memory_max"), storage_class=options.storage_class)
    waited_line = ["waited {0}s for namespace {1} of an earlier rehearsal to be deleted".format(waited, options.namespace)] if waited else []
    result: Dict[str, Any] = {"changed": False, "sizing": sizing, "lines": waited_line + rehearsal.prediction_lines(sizing),
                              "waited_seconds": waited}
    return result
