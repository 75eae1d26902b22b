# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure half of `kubevirt_cluster_maintenance`: in which order, how many at once, and at what cost in second
migrations a set of nodes is maintained, decided from plain facts before anything changes.

Why an order matters: a VM evacuated from the first node lands on a node still to be maintained and moves again when
that node's turn comes. Every node still to be maintained carries the collection's `PreferNoSchedule` taint
(`PENDING_TAINT_KEY`), which kube-scheduler's TaintToleration score (weight 3, normalised to 0..100) makes outweigh
NodeResourcesFit and BalancedAllocation together (weights 1 and 1): a VM goes to an untainted node (maintained, or
outside the set) whenever one has room, and only then to a pending one. The model follows that: each VM of a batch is
placed, largest memory first, on the untainted node with most free memory that fits it, else on the pending node
with most free memory that fits it (a second migration, and that VM moves again with its new node), else nowhere (the
cluster has no room). Placement is by requests, as the drain preflight's (checks.drain_plan.capacity).

The order is greedy: the next batch starts with the pending node whose VMs cost the fewest second migrations (fewest
VMs on a tie, then by name: an empty spare worker first), and takes more nodes while every VM of the batch still fits
on untainted nodes, the batch stays within `nodes_at_once` and no PodDisruptionBudget would have more of its Pods on
the batch than it allows disruptions (conservative: a live migration keeps the source Pod until the target runs, but a
VM that restarts does not). Nodes already in progress (a resumed run) form the first batch.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import drain_plan
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES

PENDING_TAINT_KEY = "kubevirt-ops.io/maintenance-pending"
PENDING_TAINT_EFFECT = "PreferNoSchedule"


def pending_taint(run_id: str) -> dict:
    return {"key": PENDING_TAINT_KEY, "value": run_id, "effect": PENDING_TAINT_EFFECT}


def is_pending_taint(taint: dict) -> bool:
    return taint.get("key") == PENDING_TAINT_KEY and taint.get("effect") == PENDING_TAINT_EFFECT


def with_pending_taint(taints: Optional[List[dict]], run_id: str) -> List[dict]:
    """The node's taints with ours (this run's value) and without an older one of ours."""
    return [t for t in taints or [] if not is_pending_taint(t)] + [pending_taint(run_id)]


def without_pending_taint(taints: Optional[List[dict]]) -> List[dict]:
    return [t for t in taints or [] if not is_pending_taint(t)]


# ------------------------------------------------------------------------------------------ parallelism
def nodes_at_once(limits: dict, max_nodes_in_parallel: int) -> int:
    """How many nodes KubeVirt's limits keep busy: each node sends `parallelOutboundMigrationsPerNode` at once, the
    cluster runs `parallelMigrationsPerCluster`; more nodes would only queue. Never more than the user's maximum."""
    cluster, outbound = cluster_limits(limits)
    return max(1, min(int(max_nodes_in_parallel), int(math.ceil(cluster / float(outbound)))))


def cluster_limits(limits: dict) -> Tuple[int, int]:
    cluster = max(1, int(limits.get("parallel_migrations_per_cluster") or 5))
    outbound = max(1, int(limits.get("parallel_outbound_migrations_per_node") or 2))
    return cluster, outbound


def migration_shares(batch: Sequence[str], limits: dict) -> Dict[str, int]:
    """Live migrations each node of a batch keeps in flight: the per-node limit, the cluster limit shared out
    (5 over three nodes at 2 each: 2, 2, 1), at least one each."""
    cluster, outbound = cluster_limits(limits)
    shares, left = {}, cluster
    for index, node in enumerate(batch):
        still = len(batch) - index - 1
        shares[node] = max(1, min(outbound, left - still))
        left -= shares[node]
    return shares


# ------------------------------------------------------------------------------------------ the model
def _fits(requests: Dict[str, int], room: Dict[str, int]) -> bool:
    return all(value <= room.get(resource, 0) for resource, value in requests.items() if resource in room)


def _take(requests: Dict[str, int], room: Dict[str, int]) -> None:
    for resource, value in requests.items():
        if resource in room:
            room[resource] -= value


def _give(requests: Dict[str, int], room: Dict[str, int]) -> None:
    for resource, value in requests.items():
        if resource in room:
            room[resource] += value


class Cluster:
    """The free room of each node that can take VMs, which VMs sit where, and which nodes are still pending."""

    def __init__(self, node_facts: List[dict], vms: List[dict], pending: Iterable[str]) -> None:
        self.targets = {fact["name"] for fact in drain_plan.target_nodes(node_facts, "")}
        self.room = {fact["name"]: {r: (fact.get("allocatable") or {}).get(r, 0) - (fact.get("requested") or {}).get(r, 0)
                                    for r in RESOURCES if (fact.get("allocatable") or {}).get(r) is not None}
                     for fact in node_facts}
        self.vms_on: Dict[str, List[dict]] = {fact["name"]: [] for fact in node_facts}
        for vm in vms:
            self.vms_on.setdefault(vm["node"], []).append(dict(vm))
        self.pending = set(pending)

    def copy(self) -> "Cluster":
        other = Cluster.__new__(Cluster)
        other.targets = set(self.targets)
        other.room = {name: dict(room) for name, room in self.room.items()}
        other.vms_on = {name: [dict(vm) for vm in vms] for name, vms in self.vms_on.items()}
        other.pending = set(self.pending)
        return other

    def movers(self, node: str) -> List[dict]:
        return [vm for vm in self.vms_on.get(node, []) if vm["action"] in drain_plan.RELOCATED]

    def _best(self, vm: dict, names: Iterable[str]) -> Optional[str]:
        fitting = [name for name in names if _fits(vm["requests"], self.room[name])]
        return sorted(fitting, key=lambda name: (-self.room[name].get("memory", 0), name))[0] if fitting else None

    def drain(self, batch: Sequence[str]) -> dict:
        """Move the movers of the batch as the scheduler would; the batch's nodes are then maintained."""
        busy = set(batch)
        open_nodes = [n for n in sorted(self.targets) if n not in busy]
        movers = [vm for node in batch for vm in self.movers(node)]
        movers.sort(key=lambda vm: (-(vm["requests"].get("memory") or 0), vm["key"]))
        placed, again, unplaced = {}, [], []
        for vm in movers:
            target = self._best(vm, [n for n in open_nodes if n not in self.pending])
            if target is None:
                target = self._best(vm, [n for n in open_nodes if n in self.pending])
                if target is not None and vm["action"] == "live_migrate":
                    again.append({"vm": vm["key"], "from": vm["node"], "lands_on": target})
            if target is None:
                unplaced.append(vm["key"])
                continue
            _take(vm["requests"], self.room[target])
            placed[vm["key"]] = target
            self.vms_on[target].append(dict(vm, node=target))
        for node in batch:
            for vm in self.movers(node):
                _give(vm["requests"], self.room[node])
            self.vms_on[node] = [vm for vm in self.vms_on.get(node, []) if vm["action"] not in drain_plan.RELOCATED]
            self.pending.discard(node)
        migrations = sum(1 for vm in movers if vm["action"] == "live_migrate" and vm["key"] not in unplaced)
        return {"placements": placed, "second_migrations": again, "unplaced": unplaced, "migrations": migrations}


def _pdb_room(cluster: Cluster, batch: Sequence[str], pdbs: Dict[str, int]) -> bool:
    """No PDB has more of its Pods on the batch than it allows disruptions (one node alone is always allowed)."""
    if len(batch) < 2:
        return True
    count: Dict[str, int] = {}
    for node in batch:
        for vm in cluster.vms_on.get(node, []):
            for pdb in vm.get("pdbs") or []:
                count[pdb] = count.get(pdb, 0) + 1
    return all(number <= pdbs.get(pdb, 0) for pdb, number in count.items())


def _cost(cluster: Cluster, batch: Sequence[str]) -> dict:
    return cluster.copy().drain(batch)


def plan(node_facts: List[dict], vms: List[dict], pending: Sequence[str], limits: dict, max_nodes_in_parallel: int,
         pdbs: Optional[Dict[str, int]] = None, in_progress: Sequence[str] = ()) -> dict:
    """The batches in order, each with the migrations its nodes keep in flight, and what the whole run costs.

    `vms`: per VMI `key` (namespace/name), `node`, `action` (a drain action, checks.drain_plan), `requests`, `pdbs`
    (namespace/name of the PDBs over its launcher); `pdbs`: disruptions allowed per PDB; `pending`: the nodes still to
    be maintained; `in_progress`: those of them a stopped run had started (they go first, together)."""
    pdbs = pdbs or {}
    width = nodes_at_once(limits, max_nodes_in_parallel)
    cluster = Cluster(node_facts, vms, pending)
    left = list(pending)
    batches, again, unplaced, migrations = [], [], [], 0
    first = [node for node in left if node in set(in_progress)]
    while left:
        ranked = _by_cost(cluster, left)
        batch = first or ranked[:1]
        first = []
        for node in ranked:
            if node in batch or len(batch) >= width:
                continue
            trial = batch + [node]
            cost = _cost(cluster, trial)
            if not cost["second_migrations"] and not cost["unplaced"] and _pdb_room(cluster, trial, pdbs):
                batch = trial
        vms_moving = sum(len(cluster.movers(node)) for node in batch)
        result = cluster.drain(batch)
        batches.append({"nodes": list(batch), "max_parallel": migration_shares(batch, limits), "vms": vms_moving,
                        "migrations": result["migrations"], "second_migrations": result["second_migrations"],
                        "unplaced": result["unplaced"]})
        again.extend(result["second_migrations"])
        unplaced.extend(result["unplaced"])
        migrations += result["migrations"]
        left = [node for node in left if node not in batch]
    live = [vm for vm in vms if vm["action"] == "live_migrate"]
    return {
        "order": [node for batch in batches for node in batch["nodes"]],
        "batches": batches,
        "nodes_at_once": width,
        "limits": dict(zip(("parallel_migrations_per_cluster", "parallel_outbound_migrations_per_node"), cluster_limits(limits))),
        "vms": len(live),
        "migrations": migrations,
        "second_migrations": again,
        "unplaced": unplaced,
        "migrations_per_vm": round(migrations / float(len(live)), 3) if live else 0.0,
    }


def _by_cost(cluster: Cluster, nodes: Sequence[str]) -> List[str]:
    costs = {node: len(_cost(cluster, [node])["second_migrations"]) for node in nodes}
    return sorted(nodes, key=lambda node: (costs[node], len(cluster.movers(node)), node))


# ------------------------------------------------------------------------------------------ preflight
def problems(result: dict, allow_double_migrations: bool, narrower: Optional[dict] = None) -> List[dict]:
    """What stops the run before anything changes, each with the option that allows it."""
    found = []
    again = result["second_migrations"]
    if again and not allow_double_migrations:
        fewer = ""
        if narrower is not None and len(narrower["second_migrations"]) < len(again):
            fewer = " With max_nodes_in_parallel: 1 the plan costs {0}.".format(len(narrower["second_migrations"]))
        found.append({
            "code": "second_migrations", "option": "allow_double_migrations",
            "message": "the plan live-migrates {0} of {1} VMs twice: {2}; the nodes outside the set and the ones maintained first "
                       "have too little spare room for the VMs of the next node, so they land on a node still to be maintained.{3} "
                       "Set allow_double_migrations: true to accept it, or maintain fewer nodes per run, or add spare capacity "
                       "(an empty worker is maintained first and takes the next node's VMs)".format(
                           len(again), result["vms"], _named(["{0} ({1} -> {2})".format(a["vm"], a["from"], a["lands_on"]) for a in again]),
                           fewer)})
    if result["unplaced"]:
        found.append({
            "code": "capacity", "option": "require_capacity",
            "message": "no node has room by requests for {0} while the plan's batch is drained: {1}; add capacity or maintain "
                       "fewer nodes".format(len(result["unplaced"]), _named(result["unplaced"]))})
    return found


def _named(items: List[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (" and {0} more".format(len(items) - limit) if len(items) > limit else "")
