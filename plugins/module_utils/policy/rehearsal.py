# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rehearsal's imbalance, sized from the live cluster, and its prediction by the planner.

The rebalance procedure's validation needs test VMs that make worker A overutilized and worker B underutilized,
and a policy under which exactly the wanted number of VMs move from A to B and then nothing moves back. Fixed
numbers cannot do that on a cluster whose workers already carry other Pods, so the rehearsal reads the two
workers' request usage (as LowNodeUtilization counts it: `kube/node_fit.node_usage`), and searches, smallest test
VMs first, for a memory request per VM and integer memory thresholds such that, with `margin` percentage points
to spare on every side:

- B is underutilized now (at or below `thresholds.memory`) and stays below `targetThresholds.memory` after the moves;
- A with the test VMs is above the target, and after `moves` migrations at or below it (so the run stops there),
  but not underutilized (so the next run has no reason to move anything back);
- `targetThresholds - thresholds` is at least `min_gap` points (the procedure's flapping pitfall).

The policy is memory-only: the descheduler reads a resource missing from both maps as 100 percent, so cpu and
pods never make a node overutilized and never keep one from being underutilized. Every candidate is then run
through the planner (`plan.plan_policy`) on the cluster as it will be, with stand-ins for the launchers, and kept
only when the planner predicts exactly `moves` evictions of test VMs from A, and no eviction after them
(`predict`). The same `predict` runs again on the real launchers once the VMs run.
"""

from __future__ import annotations

import copy
import math
from typing import Dict, List, Optional, Sequence

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import rehearsal_objects as objects
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import is_launcher, meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import allocatable, node_usage
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import active_pods, plan_policy, vm_name
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.render import render_policy

PROFILE_NAME = "vm-rebalance"
EXTRA_VMS_TRIED = 4          # beyond moves + 1, when B is busier than A and one remaining VM cannot make up for it


class RehearsalRefused(RebalanceError):
    """The cluster cannot host the rehearsal as asked; nothing was created."""


def gib(amount: float) -> str:
    return "{0:.1f}Gi".format(amount / objects.GI)


def node_figures(node: dict, pods_on_node: List[dict]) -> dict:
    """Allocatable, requested and free per resource, and the request usage in percent (cpu, memory, pods)."""
    capacity = allocatable(node)
    used = node_usage(pods_on_node)
    used["pods"] = len(pods_on_node)
    return {"name": meta(node).get("name"), "allocatable": {r: capacity.get(r, 0) for r in RESOURCES},
            "requested": {r: used.get(r, 0) for r in RESOURCES},
            "free": {r: capacity.get(r, 0) - used.get(r, 0) for r in RESOURCES},
            "percent": {r: round(100.0 * used.get(r, 0) / capacity[r], 2) if capacity.get(r) else 0.0 for r in RESOURCES}}


def rehearsal_policy(source: str, destination: str, vm_labels: Dict[str, str], threshold: int, target: int, moves: int) -> dict:
    """The bounded policy the rehearsal applies: the descheduler_rebalance role renders the same from these options."""
    return render_policy(profile_name=PROFILE_NAME, node_fit=True, nodes=[source, destination], vm_labels=vm_labels,
                         thresholds={"memory": threshold}, target_thresholds={"memory": target},
                         max_pods_to_evict_per_node=moves, max_pods_to_evict_per_namespace=moves, max_pods_to_evict_total=moves)


def policy_options(source: str, destination: str, vm_labels: Dict[str, str], threshold: int, target: int, moves: int) -> dict:
    """`rehearsal_policy` as the rebalance playbook's variables."""
    return {"rebalance_nodes": [source, destination], "rebalance_vm_labels": dict(vm_labels),
            "rebalance_thresholds": {"memory": threshold}, "rebalance_target_thresholds": {"memory": target},
            "rebalance_max_pods_to_evict_per_node": moves, "rebalance_max_pods_to_evict_per_namespace": moves,
            "rebalance_max_pods_to_evict_total": moves}


# ------------------------------------------------------------------------------------------ prediction
def _moved(pods: List[dict], evicted: Sequence[tuple], destination: str) -> List[dict]:
    """The Pods after the planned evictions, each evicted launcher now on the destination."""
    result = []
    for pod in pods:
        key = (meta(pod).get("namespace"), meta(pod).get("name"))
        if key in evicted:
            pod = copy.deepcopy(pod)
            pod["spec"]["nodeName"] = destination
        result.append(pod)
    return result


def _plan_summary(plan: dict) -> dict:
    return {"nodes": plan["nodes"], "stop_reason": plan["stop_reason"], "warnings": [w["message"] for w in plan["warnings"]],
            "evictions": [{"vm": e["vm"], "pod": e["pod"], "node": e["node"], "alternatives": e["alternative_vms"]} for e in plan["evictions"]]}


def predict(policy: dict, nodes: List[dict], pods: List[dict], source: str, destination: str, moves: int,
            test_vms: Sequence[str], namespace: str) -> dict:
    """What the planner says the policy does: `holds` when it evicts exactly `moves` test VMs, all from `source`,
    without a flapping warning, and a run after those moves evicts nothing."""
    first = plan_policy(policy, nodes, pods)
    problems = []
    evictions = first["evictions"]
    if len(evictions) != moves:
        problems.append("the planner predicts {0} eviction(s), not {1} ({2})".format(len(evictions), moves, first["stop_reason"] or "limits"))
    strangers = [e["pod"] for e in evictions if e["node"] != source or e["namespace"] != namespace or e["vm"] not in test_vms]
    if strangers:
        problems.append("the planner would evict Pods other than test VMs on {0}: {1}".format(source, ", ".join(strangers)))
    if first["warnings"]:
        problems.extend(w["message"] for w in first["warnings"])
    after_pods = _moved(pods, [(e["namespace"], e["pod"]) for e in evictions], destination)
    second = plan_policy(policy, nodes, after_pods)
    if second["evictions"]:
        problems.append("after the moves the next run would evict {0} more ({1})".format(len(second["evictions"]), ", ".join(
            e["vm"] or e["pod"] for e in second["evictions"])))
    candidates = sorted({vm for e in evictions for vm in [e["vm"]] + e["alternative_vms"] if vm})
    return {"holds": not problems, "problems": problems, "moves": len(evictions), "from": source, "to": destination,
            "candidates": candidates, "first_run": _plan_summary(first), "next_run": _plan_summary(second)}


def misplaced(pods: List[dict], test_vms: Sequence[str], namespace: str, source: str) -> List[str]:
    """The test VMs not where the prediction put them, as `vm (on worker-b)`: each must have exactly one active
    virt-launcher Pod, on `source`. A second launcher (a migration in flight) or one on another node means something moved
    it after it was created: a Descheduler run that was not held, or another controller."""
    found: Dict[str, List[str]] = {vm: [] for vm in test_vms}
    for node, on_node in active_pods(pods).items():
        for pod in on_node:
            name = vm_name(pod) if is_launcher(pod) and meta(pod).get("namespace") == namespace else None
            if name in found:
                found[name].append(node)
    problems = []
    for vm in test_vms:
        nodes = sorted(found[vm])
        if nodes != [source]:
            problems.append("{0} ({1})".format(vm, "on " + " and ".join(nodes) if nodes else "no running launcher"))
    return problems


# ------------------------------------------------------------------------------------------ sizing
def _thresholds(source: dict, destination: dict, launcher: int, count: int, moves: int, margin: float, min_gap: int) -> Optional[tuple]:
    """Integer (threshold, target) for `count` test VMs of `launcher` bytes each on the source, or None."""
    cap_a, cap_b = source["allocatable"]["memory"], destination["allocatable"]["memory"]
    used_a, used_b = source["requested"]["memory"], destination["requested"]["memory"]
    step = 100.0 * launcher / cap_a
    a_after = 100.0 * (used_a + (count - moves) * launcher) / cap_a
    b_now = 100.0 * used_b / cap_b
    b_after = 100.0 * (used_b + moves * launcher) / cap_b
    low_target, high_target = math.ceil(a_after + margin), math.floor(a_after + step - margin)
    for target in range(low_target, high_target + 1):
        threshold = min(math.floor(a_after - margin), target - min_gap)
        if threshold >= math.ceil(b_now + margin) and b_after <= target - margin and 0 < threshold < target <= 100:
            return threshold, target
    return None


def _fits(figures: dict, count: int, launcher: int) -> bool:
    free = figures["free"]
    return free["memory"] >= count * launcher and free["cpu"] >= count * objects.launcher_cpu_millis() and free["pods"] >= count


def size(nodes: List[dict], pods: List[dict], source: str, destination: str, moves: int, namespace: str, vm_labels: Dict[str, str],
         margin: float = 2.0, min_gap: int = 5, memory_min: int = objects.GI, memory_max: Optional[int] = None,
         memory_step: int = 256 * objects.MI, storage_class: Optional[str] = None) -> dict:
    """The smallest test VMs and the thresholds that make the planner predict exactly `moves` migrations from
    `source` to `destination`; RehearsalRefused (with the figures) when the two workers cannot host that."""
    by_name = {meta(n).get("name"): n for n in nodes}
    pods_by_node = active_pods(pods)
    figures = {name: node_figures(by_name[name], pods_by_node.get(name, [])) for name in (source, destination)}
    a, b = figures[source], figures[destination]
    ceiling = memory_max or a["free"]["memory"]
    smallest = objects.launcher_memory(memory_min)
    if not _fits(a, moves + 1, smallest) or not _fits(b, moves, smallest):
        short = source if not _fits(a, moves + 1, smallest) else destination
        need = (moves + 1 if short == source else moves) * smallest
        raise RehearsalRefused(
            "not enough free allocatable on {0} for the test VMs: {1} memory, {2}m cpu and {3} Pods free by requests, the rehearsal "
            "needs at least {4} memory ({5} VM(s) of {6} with the launcher overhead)".format(
                short, gib(figures[short]["free"]["memory"]), figures[short]["free"]["cpu"], figures[short]["free"]["pods"], gib(need),
                moves + 1 if short == source else moves, gib(smallest)),
            "Free memory on {0} (or pick other workers with rehearse_nodes), or lower rehearse_moves.".format(short),
            path="rehearse_nodes", figures=figures)
    for count in range(moves + 1, moves + 1 + EXTRA_VMS_TRIED):
        guest = memory_min
        while guest <= ceiling:
            launcher = objects.launcher_memory(guest)
            if not (_fits(a, count, launcher) and _fits(b, moves, launcher)):
                break
            picked = _thresholds(a, b, launcher, count, moves, margin, min_gap)
            if picked:
                sizing = _candidate(nodes, pods, source, destination, moves, namespace, vm_labels, count, guest, picked, storage_class)
                if sizing["prediction"]["holds"]:
                    sizing["figures"] = figures
                    return sizing
            guest += memory_step
    raise RehearsalRefused(
        "no test VM size makes {0} overutilized and {1} underutilized with {2} migration(s) and a gap of {3} points: by requests "
        "{0} uses {4}% memory ({5} free), {1} {6}% ({7} free)".format(
            source, destination, moves, min_gap, a["percent"]["memory"], gib(a["free"]["memory"]), b["percent"]["memory"],
            gib(b["free"]["memory"])),
        "Choose as rehearse_nodes a busier worker first and a less busy one second, free memory on {0}, or lower "
        "rehearse_moves.".format(source), path="rehearse_nodes", figures=figures)


def _candidate(nodes: List[dict], pods: List[dict], source: str, destination: str, moves: int, namespace: str, vm_labels: Dict[str, str],
               count: int, guest: int, picked: tuple, storage_class: Optional[str]) -> dict:
    threshold, target = picked
    names = objects.vm_names(count)
    stand_ins = [objects.launcher_stand_in(name, namespace, source, destination, guest, vm_labels, storage_class) for name in names]
    policy = rehearsal_policy(source, destination, vm_labels, threshold, target, moves)
    prediction = predict(policy, nodes, list(pods) + stand_ins, source, destination, moves, names, namespace)
    return {"source": source, "destination": destination, "moves": moves, "vm_count": count, "vm_names": names,
            "vm_memory": objects.memory_quantity(guest), "vm_memory_bytes": guest, "launcher_memory_estimate": objects.launcher_memory(guest),
            "thresholds": {"memory": threshold}, "target_thresholds": {"memory": target}, "policy": policy,
            "policy_options": policy_options(source, destination, vm_labels, threshold, target, moves), "prediction": prediction}


def prediction_lines(sizing: dict) -> List[str]:
    """The prediction as a person reads it before anything is created."""
    prediction = sizing["prediction"]
    first = {n["name"]: n for n in prediction["first_run"]["nodes"]}
    after = {n["name"]: n for n in prediction["next_run"]["nodes"]}
    lines = ["{0} test VM(s) of {1} (launcher about {2}) on {3}; policy memory thresholds {4}%, targetThresholds {5}%".format(
        sizing["vm_count"], sizing["vm_memory"], gib(sizing["launcher_memory_estimate"]), sizing["source"],
        sizing["thresholds"]["memory"], sizing["target_thresholds"]["memory"])]
    for name in (sizing["source"], sizing["destination"]):
        if name in first:
            lines.append("{0}: memory {1}% -> {2} now with the test VMs; {3}% -> {4} after the moves".format(
                name, first[name]["usage_percent"].get("memory"), first[name]["category"],
                after.get(name, {}).get("usage_percent", {}).get("memory"), after.get(name, {}).get("category")))
    lines.append("predicted: {0} live migration(s) from {1} to {2} of one of {3} (ranked equally); then no further move ({4})".format(
        prediction["moves"], prediction["from"], prediction["to"], ", ".join(prediction["candidates"]),
        prediction["next_run"]["stop_reason"] or "nothing evicted"))
    return lines


# ------------------------------------------------------------------------------------------ comparison
def compare(prediction: dict, moved: List[dict], namespace: str) -> dict:
    """What happened (the validation's `moved`: vm, namespace, from, to) against the prediction."""
    ours = [m for m in moved if m.get("namespace") == namespace]
    problems = []
    if len(ours) != prediction["moves"]:
        problems.append("{0} VM(s) moved, {1} predicted".format(len(ours), prediction["moves"]))
    for move in ours:
        if move.get("vm") not in prediction["candidates"]:
            problems.append("{0} moved, not one of the predicted {1}".format(move.get("vm"), ", ".join(prediction["candidates"])))
        if (move.get("from"), move.get("to")) != (prediction["from"], prediction["to"]):
            problems.append("{0} moved from {1} to {2}, predicted from {3} to {4}".format(
                move.get("vm"), move.get("from"), move.get("to"), prediction["from"], prediction["to"]))
    lines = ["{0} moved from {1} to {2}".format(m.get("vm"), m.get("from"), m.get("to")) for m in ours] or ["no test VM moved"]
    lines.append("as predicted" if not problems else "not as predicted: " + "; ".join(problems))
    return {"matches": not problems, "problems": problems, "moved": ours, "lines": lines}
