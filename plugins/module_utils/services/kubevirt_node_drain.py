# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`kubevirt_node_drain`: evacuate a node's VMs the way KubeVirt means it, with a preflight before any change.

- `state: drained`: read the eviction facts (cluster.eviction_facts.read_facts) and the node's Pods, decide the
  preflight (drain_plan), refuse what the policy options do not allow, cordon, then evict: the shutdowns and
  other Pods at once, the live migrations at most `concurrency` at a time (KubeVirt's
  parallelOutboundMigrationsPerNode and parallelMigrationsPerCluster). KubeVirt's 429 `Eviction triggered
  evacuation` / `Evacuation in progress` is progress: the VM is then followed by watching VMIs, migrations,
  the node's Pods and PDBs (watching.WatchSet), never evicted again on a timer. A Pod refused by a PDB is
  asked again when a PDB changes. Every VM ends with a result; at the overall timeout, what is open is
  reported; the node stays cordoned; a second run reads the cluster again and continues (a VM already marked
  for evacuation is waited for, not evicted again).
- `nodes` (state drained only): several nodes drained at once, as a rolling maintenance drains a batch. The eviction
  facts are read once; every node's preflight comes first, and one refused node refuses the batch; the capacity check
  places the VMs of the whole batch together on the nodes outside it. Then every node is cordoned and one Drain runs
  over all of them (one WatchSet, a Pods stream per node): each node keeps at most its own concurrency in flight
  (`max_parallel_per_node`, else as for one node), the batch at most parallelMigrationsPerCluster, the nodes served
  in turn. The result has each node's result as a one-node call returns it (`nodes_results`) and the batch's totals.
- `state: uncordon`: the node becomes schedulable again. VMs a stopped drain left marked for evacuation
  (`status.evacuationNodeName`, the VMs that had not moved) are first taken back from KubeVirt, which would otherwise
  go on migrating them: where the API server serves virt-api's `evacuate/cancel` (read from discovery) each mark is
  cleared and the evacuation migrations that have not started are deleted; elsewhere the result says which VMs KubeVirt
  keeps evacuating and how to stop it (checks.evacuation_cancel).
- `state: safe_to_shutdown`: read-only: no VMI runs on the node any more; the other Pods are listed.

Check mode changes nothing: the preflight is read as in a run, and the cordon (or uncordon) that a run would
send goes to the API server as a dry run, so that validation and admission answer; no Pod is evicted (a dry-run
eviction of a launcher would still ask KubeVirt's eviction webhook, which acts on the VMI).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import drain_plan as plan
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import evacuation_cancel as cancel
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client, Failure
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.eviction_facts import Scope, read_facts
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_subdomain
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.migration import migration_record
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import PROGRESS_SPEC, Progress, check_every, named, seconds

ARG_SPEC = {
    "node": {"type": "str"},
    "nodes": {"type": "list", "elements": "str"},
    "max_parallel_per_node": {"type": "dict"},
    "state": {"type": "str", "choices": ["drained", "uncordon", "safe_to_shutdown"], "default": "drained"},
    "pods": {"type": "str", "choices": ["launchers", "all"], "default": "launchers"},
    "ignore_daemonsets": {"type": "bool", "default": True},
    "delete_emptydir_data": {"type": "bool", "default": True},
    "force": {"type": "bool", "default": True},
    "allow_shutdown": {"type": "bool", "default": False},
    "allow_loss": {"type": "bool", "default": False},
    "allow_blocked": {"type": "bool", "default": False},
    "require_capacity": {"type": "bool", "default": True},
    "max_parallel": {"type": "int"},
    "timeout": {"type": "int", "default": 600},
    **PROGRESS_SPEC,
}
PROGRESS_MARKERS = ("Eviction triggered evacuation", "Evacuation in progress")
# Seconds before an eviction refused with another 429 is sent again, as kubectl drain does: KubeVirt's webhook
# answers 429 for what passes (it could not read or mark the VMI; a hotplug Pod while its VM still runs there) and
# leaves the retry to the caller.
RETRY_AFTER = 5.0
FACTS_INCLUDE = ("cluster", "nodes", "vmis")
NODE_NOT_FOUND_FIX = "Give a node that kubectl get nodes lists."
# the results of a VM that leave the node drained
OK_RESULTS = ("migrated", "restarted", "replaced", "deleted", "moved", "not_running", "blocked")
MOVED_RESULTS = ("migrated", "restarted", "replaced", "moved")


@dataclasses.dataclass(frozen=True)
class KubevirtNodeDrainOptions(ModuleOptions):
    """The options of `kubevirt_node_drain` as the module parsed them (defaults are the spec's)."""
    node: Optional[str]
    nodes: Optional[List[str]]
    max_parallel_per_node: Optional[Dict[str, Any]]
    state: str
    pods: str
    ignore_daemonsets: bool
    delete_emptydir_data: bool
    force: bool
    allow_shutdown: bool
    allow_loss: bool
    allow_blocked: bool
    require_capacity: bool
    max_parallel: Optional[int]
    timeout: int
    progress_every: int
    resume: Optional[dict]


# ------------------------------------------------------------------------------------------ options
def validate(options: KubevirtNodeDrainOptions) -> KubevirtNodeDrainOptions:
    """The options checked before any request (InvalidOption names the option), the node names stripped."""
    node, nodes = checked_targets(options)
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long the whole drain may take, e.g. 600.", path="timeout")
    if options.max_parallel is not None and options.max_parallel < 1:
        raise InvalidOption("must be 1 or more", "Give how many live migrations may run at once, or leave it unset for KubeVirt's limits.",
                            path="max_parallel")
    shares = checked_shares(options.max_parallel_per_node, nodes or [node])
    check_every(options.progress_every)
    return dataclasses.replace(options, node=node, nodes=nodes, max_parallel_per_node=shares)


def checked_node_name(name: Any, path: str) -> str:
    node = str(name).strip()
    if not is_dns_subdomain(node):
        raise InvalidOption("{0!r} is not a valid node name".format(node), "Give the node's name as kubectl get nodes shows it.", path=path)
    return node


def checked_targets(options: KubevirtNodeDrainOptions) -> Tuple[Optional[str], Optional[List[str]]]:
    """`node` or `nodes`, exactly one; `nodes` only for state drained, each name once."""
    if options.node is None and options.nodes is None:
        raise InvalidOption("one of node or nodes is required", "Give node (the node to drain, uncordon or check), or nodes (the nodes to "
                            "drain at once).", path="node")
    if options.node is not None and options.nodes is not None:
        raise InvalidOption("node and nodes are mutually exclusive", "Give node for one node, or nodes for several nodes drained at once, "
                            "not both.", path="nodes")
    if options.nodes is None:
        return checked_node_name(options.node, "node"), None
    if options.state != "drained":
        raise InvalidOption("works with state drained only, not {0}".format(options.state),
                            "Use node for state {0}, one task per node (a loop).".format(options.state), path="nodes")
    if not options.nodes:
        raise InvalidOption("names no node", "Give the nodes to drain at once, e.g. [worker-1, worker-2].", path="nodes")
    nodes: List[str] = []
    for index, name in enumerate(options.nodes):
        node = checked_node_name(name, "nodes[{0}]".format(index))
        if node in nodes:
            raise InvalidOption("{0!r} is named twice".format(node), "Name each node once.", path="nodes[{0}]".format(index))
        nodes.append(node)
    return None, nodes


def as_count(value: Any) -> Optional[int]:
    """A whole number as YAML or a survey gives it (2 or "2"); None for anything else (a bool, 1.5, "two")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def checked_shares(shares: Optional[Dict[str, Any]], nodes: List[str]) -> Optional[Dict[str, int]]:
    """`max_parallel_per_node`: a whole number of 1 or more for nodes of this drain."""
    if shares is None:
        return None
    result: Dict[str, int] = {}
    for name, value in shares.items():
        node = str(name).strip()
        path = "max_parallel_per_node.{0}".format(node)
        if node not in nodes:
            raise InvalidOption("{0!r} is not a node of this drain ({1})".format(node, ", ".join(nodes)),
                                "Give a share only for the nodes in node or nodes.", path=path)
        count = as_count(value)
        if count is None or count < 1:
            raise InvalidOption("must be a whole number of 1 or more, not {0!r}".format(value),
                                "Give how many live migrations from this node may run at once.", path=path)
        result[node] = count
    return result


def node_concurrency(limits: dict, options: KubevirtNodeDrainOptions, node: str) -> int:
    """How many live migrations from `node` are kept in flight: its share in `max_parallel_per_node`, else `max_parallel`,
    within KubeVirt's limits either way (drain_plan.concurrency)."""
    share = (options.max_parallel_per_node or {}).get(node)
    return plan.concurrency(limits, share if share is not None else options.max_parallel)


def cluster_limit(preflights: Dict[str, dict]) -> int:
    """parallelMigrationsPerCluster as the preflight read it: the most live migrations the whole drain keeps in flight."""
    default = kv.migration_limits(None)["parallel_migrations_per_cluster"]
    return min(int((pre.get("limits") or {}).get("parallel_migrations_per_cluster") or default) for pre in preflights.values())


def is_eviction_answer(failure: Failure) -> bool:
    """KubeVirt's and the PDB check's refusals, a Pod already gone (404) and the multiple-PDBs 500 are decisions that go
    back to the drain, never retried; a plain 429 (server overload), other 5xx and dropped connections are retried."""
    known = failure.status == 429 and (kv.WEBHOOK in failure.message or kv.PDB_VIOLATION in failure.message)
    return known or failure.status == 404 or (failure.status == 500 and kv.MULTIPLE_PDBS in failure.message)


# ------------------------------------------------------------------------------------------ API edge
class NodeApi:
    """The few writes of a drain: cordon/uncordon, evictions; and the reads of the node's Pods."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.pods = client.require_kind("Pod", "")
        self.nodes = client.require_kind("Node", "")

    def node(self, name: str) -> Optional[dict]:
        return self.client.get(self.nodes, name)

    def pods_on(self, node: str) -> List[dict]:
        return self.client.list(self.pods, field_selector="spec.nodeName={0}".format(node))

    def set_unschedulable(self, node: str, value: bool, dry_run: bool = False) -> dict:
        """Cordon or uncordon (a merge patch of spec.unschedulable); the node as stored, or as it would be with `dry_run`."""
        return self.client.patch(self.nodes, node, {"spec": {"unschedulable": value or None}}, dry_run=dry_run,
                                 request="{0} node {1}".format("cordon" if value else "uncordon", node))

    def evict(self, namespace: str, name: str) -> dict:
        return self.client.evict(namespace, name, is_answer=is_eviction_answer)

    def evacuations(self) -> Tuple[List[dict], List[dict]]:
        """The VMIs and their migrations (empty where KubeVirt is not served)."""
        return (self.client.list_kind("VirtualMachineInstance", "kubevirt.io") or [],
                self.client.list_kind("VirtualMachineInstanceMigration", "kubevirt.io") or [])

    def serves_evacuate_cancel(self) -> bool:
        """Whether virt-api serves `evacuate/cancel` (its APIResourceList in discovery; a version string proves nothing)."""
        try:
            listed = self.client.get_path("/apis/" + cancel.GROUP_VERSION, "read the resources of " + cancel.GROUP_VERSION)
        except ApiFailure as failure:
            if failure.status == 404:
                return False
            raise
        return cancel.served(listed)

    def cancel_evacuation(self, namespace: str, name: str, node: str, dry_run: bool) -> None:
        body = cancel.options(node)
        if dry_run:
            body["dryRun"] = ["All"]
        self.client.put_path(cancel.path(namespace, name), body, "cancel the evacuation of vmi {0}/{1}".format(namespace, name))

    def delete_migration(self, namespace: str, migration: dict, dry_run: bool) -> None:
        self.client.delete(self.client.require_kind("VirtualMachineInstanceMigration", "kubevirt.io"), migration["name"], namespace,
                           preconditions={"uid": migration["uid"]} if migration.get("uid") else None, dry_run=dry_run)


# ------------------------------------------------------------------------------------------ preflight
def read_preflights(client: Client, api: NodeApi, options: KubevirtNodeDrainOptions, nodes: List[str]) -> Dict[str, dict]:
    """Everything the drain decides on, per node, read in a constant number of requests (the eviction facts once, one
    list of Pods per node)."""
    facts = read_facts(client, Scope(include=FACTS_INCLUDE))
    if not (facts.get("served") or {}).get("VirtualMachineInstance"):
        facts["vmis"] = []
    node_facts = facts.get("nodes") or []
    known = {n["name"] for n in node_facts}
    for index, node in enumerate(nodes):
        if node not in known:
            raise InvalidOption("node {0!r} not found".format(node), NODE_NOT_FOUND_FIX,
                                path="node" if options.nodes is None else "nodes[{0}]".format(index))
    preflights = {node: node_preflight(facts, node, api.pods_on(node), options) for node in nodes}
    rooms = batch_capacity(node_facts, {node: pre["vms"] for node, pre in preflights.items()})
    for node, pre in preflights.items():
        pre["capacity"] = rooms[node]
        pre["problems"] = plan.problems(pre["vms"], pre["pods"], rooms[node], allow_loss=options.allow_loss,
                                        allow_shutdown=options.allow_shutdown, allow_blocked=options.allow_blocked,
                                        require_capacity=options.require_capacity)
    return preflights


def node_preflight(facts: dict, node: str, pods: List[dict], options: KubevirtNodeDrainOptions) -> dict:
    """One node's preflight from the facts and its Pods; `capacity` and `problems` follow once the batch is known."""
    node_fact = next(n for n in facts.get("nodes") or [] if n["name"] == node)
    by_name = {kv.ref(p): p for p in pods}
    vm_facts = [f for f in facts.get("vmis") or [] if plan.vmi_on_node(f, node)]
    vms = [plan.vm_plan(f, by_name.get((f["namespace"], (f.get("launcher") or {}).get("name") or ""))) for f in vm_facts]
    pod_plan = plan.classify_pods(pods, all_pods=options.pods == "all", ignore_daemonsets=options.ignore_daemonsets,
                                  delete_emptydir_data=options.delete_emptydir_data, force=options.force)
    launcher_keys = {"{0}/{1}".format(vm["namespace"], vm["launcher"]) for vm in vms if vm["launcher"]}
    pod_plan["other"] = [key for key in pod_plan["evict"] if key not in launcher_keys]
    limits = (facts.get("cluster") or {}).get("migration_limits") or kv.migration_limits(None)
    launchers = [vm["launcher"] for vm in vms if vm["launcher"]]
    return {
        "node": node_fact, "vms": vms, "counts": plan.counts(vms), "pods": pod_plan, "capacity": None,
        "pdbs": plan.pdbs_on_node(facts.get("pdbs") or [], facts.get("findings") or [], launchers),
        "findings": [f for f in facts.get("findings") or [] if f.get("kind") != "PodDisruptionBudget"
                     and any(f.get("name") == vm["name"] and f.get("namespace") == vm["namespace"] for vm in vms)],
        "limits": {k: limits.get(k) for k in ("parallel_migrations_per_cluster", "parallel_outbound_migrations_per_node")},
        "concurrency": node_concurrency(limits, options, node),
        "problems": [],
        "raw_pods": pods,
    }


def batch_capacity(node_facts: List[dict], vms_by_node: Dict[str, List[dict]]) -> Dict[str, dict]:
    """drain_plan.capacity per node. Drained together, the nodes' VMs compete for the same room and none goes to a node of
    the batch (all are cordoned): they are placed together on the other nodes, and each node gets its VMs' part of the
    answer (`batch` names the nodes placed together)."""
    if len(vms_by_node) == 1:
        node, vms = next(iter(vms_by_node.items()))
        return {node: plan.capacity(node_facts, node, vms)}
    batch = sorted(vms_by_node)
    # the batch's nodes as cordoned (still counted for the kubevirt.io/schedulable labelling)
    outside = [dict(fact, schedulable=False) if fact["name"] in vms_by_node else fact for fact in node_facts]
    together = plan.capacity(outside, batch[0], [vm for node in batch for vm in vms_by_node[node]])
    rooms = {}
    for node, vms in vms_by_node.items():
        mine = {"{0}/{1}".format(vm["namespace"], vm["name"]) for vm in vms}
        unplaced = [key for key in together["unplaced"] if key in mine]
        rooms[node] = dict(together, fits=not unplaced, unplaced=unplaced, batch=batch,
                           placements={key: target for key, target in together["placements"].items() if key in mine})
    return rooms


# ------------------------------------------------------------------------------------------ drain
def planned_items(node: str, pre: dict) -> List[dict]:
    """What the drain of `node` evicts and follows: its VMs (not the blocked or stopped ones) and, with pods=all, the other Pods."""
    items = [dict(vm, kind="vm", state="queued", result=None, eviction=None, source_node=node)
             for vm in pre["vms"] if vm["action"] not in ("blocked", "not_running")]
    pods_by_key = {plan.pod_key(p): p for p in pre["raw_pods"]}
    for key in pre["pods"]["other"]:
        pod = pods_by_key[key]
        items.append({"kind": "pod", "namespace": kv.ref(pod)[0], "name": kv.ref(pod)[1], "uid": kv.meta(pod).get("uid"),
                      "action": "evict", "state": "queued", "result": None, "eviction": None, "source_node": node})
    return items


def pods_stream(node: str) -> str:
    return "pods@{0}".format(node)


class Drain:
    """The event-driven part: evict within the limits, follow each VM to its result; one or several nodes at once
    (`preflights` by node), each within its concurrency, all of them within the cluster's limit."""

    def __init__(self, client: Client, api: NodeApi, preflights: Dict[str, dict], clock: Callable[[], float],
                 items: Optional[List[dict]] = None) -> None:
        self.client = client
        self.api = api
        self.preflights = preflights
        self.nodes = list(preflights)
        self.clock = clock
        self.items: List[dict] = items if items is not None else [i for node, pre in preflights.items() for i in planned_items(node, pre)]
        self.concurrency = {node: pre["concurrency"] for node, pre in preflights.items()}
        self.cluster_limit = cluster_limit(preflights)
        self.peak_in_flight = 0
        self.peak_per_node = {node: 0 for node in self.nodes}
        self.evictions = {node: {"requests": 0, "responses": {}} for node in self.nodes}
        # seconds from the start of the drain until each node had every item decided (a batch's nodes finish apart)
        self.finished_seconds: Dict[str, float] = {}
        self.pdb_waiting = False
        self.seen_failures: set = set()
        self.restored = False
        self.progress: Optional[Progress] = None

    def node_items(self, node: str) -> List[dict]:
        return [i for i in self.items if i["source_node"] == node]

    # ------------------------------------------------------------------------------------ between calls
    def snapshot(self) -> dict:
        """What the next call of a sliced drain goes on from (JSON; a retry time as seconds from now)."""
        now = self.clock()
        items = [dict({k: v for k, v in i.items() if k != "retry_at"}, retry_in=max(0.0, i["retry_at"] - now) if "retry_at" in i else None)
                 for i in self.items]
        return {"items": items, "peak_in_flight": self.peak_in_flight, "peak_per_node": self.peak_per_node,
                "seen_failures": sorted(self.seen_failures), "evictions": self.evictions, "finished_seconds": self.finished_seconds}

    @classmethod
    def restore(cls, client: Client, api: NodeApi, preflights: Dict[str, dict], clock: Callable[[], float], snapshot: dict) -> "Drain":
        now = clock()
        items = []
        for item in snapshot["items"]:
            item = dict(item)
            retry_in = item.pop("retry_in", None)
            if retry_in is not None:
                item["retry_at"] = now + retry_in
            items.append(item)
        drain = cls(client, api, preflights, clock, items=items)
        drain.peak_in_flight = snapshot["peak_in_flight"]
        drain.peak_per_node = dict(snapshot["peak_per_node"])
        drain.seen_failures = set(snapshot["seen_failures"])
        drain.evictions = snapshot["evictions"]
        drain.finished_seconds = dict(snapshot["finished_seconds"])
        drain.restored = True
        return drain

    # ------------------------------------------------------------------------------------ what a person sees
    def _report_finished(self, vmims: List[dict]) -> None:
        """One line per VM or Pod that finished since the last line (from, to and seconds of a migration), `<node>: `
        first and counted per node."""
        if self.progress is None:
            return
        newly = [i for i in self.items if i["state"] == "done" and not i.get("reported")]
        if not newly:
            return
        # the records of the migrations that finished them, built once: for the order and for the seconds
        wanted = {(i["result"] or {}).get("migration") for i in newly} - {None}
        records = {kv.meta(m).get("name"): migration_record(m) for m in vmims if kv.meta(m).get("name") in wanted}
        total = {node: len(self.node_items(node)) for node in self.nodes}
        done = {node: sum(1 for i in self.node_items(node) if i.get("reported")) for node in self.nodes}
        # several found in one batch of events: in the order their migrations ended (the cluster's timestamps)
        for item in sorted(newly, key=lambda i: (records.get((i["result"] or {}).get("migration")) or {}).get("end") or ""):
            item["reported"] = True
            node = item["source_node"]
            done[node] += 1
            record = records.get((item["result"] or {}).get("migration"))
            self.progress.finished("{0}: {1} ({2} of {3} done)".format(node, finished_line(item, record, self.progress.wall()),
                                                                       done[node], total[node]))

    def awaiting_line(self, elapsed: float, timeout: int, node: str) -> str:
        items = self.node_items(node)
        open_items = [i for i in items if i["state"] != "done"]
        now = self.progress.wall() if self.progress else 0.0
        return "{0}: {1} of {2} s; awaiting {3} of {4}: {5}".format(
            node, "{0:.0f}".format(elapsed), timeout, len(open_items), len(items),
            named(["{0}/{1} ({2})".format(i["namespace"], i["name"], awaiting_state(i, now)) for i in open_items]))

    def status_line(self, elapsed: float, timeout: int) -> str:
        """What is still awaited: each open node's line (`<node>: ...`), ` | ` between nodes."""
        busy = [node for node in self.nodes if any(i["state"] != "done" for i in self.node_items(node))] or self.nodes[:1]
        return " | ".join(self.awaiting_line(elapsed, timeout, node) for node in busy)

    # ------------------------------------------------------------------------------------ streams
    def streams(self) -> List[Stream]:
        found = self.client.find_kinds([("VirtualMachineInstance", "kubevirt.io"), ("VirtualMachineInstanceMigration", "kubevirt.io"),
                                        ("PodDisruptionBudget", "policy")])
        result = [Stream(pods_stream(node), self.api.pods, field_selector="spec.nodeName={0}".format(node)) for node in self.nodes]
        for name, kind, group in (("vmis", "VirtualMachineInstance", "kubevirt.io"), ("vmims", "VirtualMachineInstanceMigration", "kubevirt.io"),
                                  ("pdbs", "PodDisruptionBudget", "policy")):
            if found[(kind, group)] is not None:
                result.append(Stream(name, found[(kind, group)]))
        return result

    # ------------------------------------------------------------------------------------ one step
    def _evict(self, item: dict) -> None:
        answer = self.api.evict(item["namespace"], item["launcher"] if item["kind"] == "vm" else item["name"])
        counted = self.evictions[item["source_node"]]
        counted["requests"] += 1
        counted["responses"][str(answer["code"])] = counted["responses"].get(str(answer["code"]), 0) + 1
        item["eviction"] = answer
        item.setdefault("requested_at", self.progress.wall() if self.progress else None)
        code, message = answer["code"], answer["message"]
        if code in (201, 404) or (code == 429 and any(m in message for m in PROGRESS_MARKERS)):
            item["state"] = "requested"
        elif code == 429 and kv.PDB_VIOLATION in message:
            item["state"] = "pdb"
            self.pdb_waiting = True
        elif code == 429:
            item["state"], item["retry_at"] = "retry", self.clock() + RETRY_AFTER
        else:
            item["state"] = "done"
            item["result"] = {"result": "failed", "reason": message}

    def _in_flight(self, node: Optional[str] = None) -> int:
        """Live migrations requested and not decided yet, of `node` or of the whole drain."""
        return sum(1 for i in self.items if i["kind"] == "vm" and i["action"] == "live_migrate" and i["state"] == "requested"
                   and node in (None, i["source_node"]))

    def _queued_migrations_in_turn(self) -> List[dict]:
        """The queued live migrations, the nodes taking turns (the first of each node, then the second...), so that a node
        listed late is not starved when the cluster's limit is below the sum of the nodes' concurrency."""
        queues = [[i for i in self.node_items(node) if i["state"] == "queued" and i["kind"] == "vm" and i["action"] == "live_migrate"]
                  for node in self.nodes]
        longest = max([len(q) for q in queues] or [0])
        return [q[k] for k in range(longest) for q in queues if k < len(q)]

    def _update(self, ws: WatchSet) -> None:
        vmis = ws.cache.get("vmis", {})
        vmims = ws.objects("vmims")
        for item in self.items:
            # a Pod whose eviction is refused for now may still go (a hotplug Pod goes with its VM's launcher)
            if item["state"] != "requested" and not (item["kind"] == "pod" and item["state"] == "retry"):
                continue
            if item["kind"] == "pod":
                pod = ws.cache.get(pods_stream(item["source_node"]), {}).get((item["namespace"], item["name"]))
                if pod is None or kv.meta(pod).get("uid") != item["uid"] or (pod.get("status") or {}).get("phase") in kv.TERMINAL_POD_PHASES:
                    item["state"], item["result"] = "done", {"result": "evicted"}
                continue
            result = plan.outcome(item, vmis.get((item["namespace"], item["name"])), vmims, self.seen_failures, item["source_node"])
            if result is not None:
                item["state"], item["result"] = "done", result

    def step(self, ws: WatchSet) -> bool:
        """Called after each batch of watch events: settle results, start what the limits allow; True when all is decided."""
        self._update(ws)
        for item in self.items:
            if item["state"] == "retry" and self.clock() >= item["retry_at"]:
                item["state"] = "queued"   # evicted again below, within the limits
        if self.pdb_waiting:
            self.pdb_waiting = False
            for item in self.items:
                if item["state"] == "pdb":
                    self._evict(item)
        for item in self.items:
            if item["state"] == "queued" and not (item["kind"] == "vm" and item["action"] == "live_migrate"):
                self._evict(item)
        for item in self._queued_migrations_in_turn():
            if self._in_flight() >= self.cluster_limit:
                break
            if self._in_flight(item["source_node"]) >= self.concurrency[item["source_node"]]:
                continue
            if item["in_progress"]:
                item["state"] = "requested"  # marked by an earlier run or another client: wait for it, do not evict again
                item.setdefault("requested_at", self.progress.wall() if self.progress else None)
            else:
                self._evict(item)
        self.peak_in_flight = max(self.peak_in_flight, self._in_flight())
        for node in self.nodes:
            self.peak_per_node[node] = max(self.peak_per_node.get(node, 0), self._in_flight(node))
        self._update(ws)
        self._report_finished(ws.objects("vmims"))
        for node in self.nodes:
            if node not in self.finished_seconds and all(i["state"] == "done" for i in self.node_items(node)):
                self.finished_seconds[node] = round(self.progress.elapsed(), 3) if self.progress else 0.0
        return all(i["state"] == "done" for i in self.items)

    def observe(self, stream: str, _event: str, obj: dict) -> None:
        if stream == "pdbs" and any(i["state"] == "pdb" for i in self.items):
            self.pdb_waiting = True

    def run(self, deadline: float, progress: Optional[Progress] = None) -> dict:
        """Until every item is decided, or `deadline`, or (with `progress`) until this call should return. `left_vmis` and
        `pods` by node."""
        self.progress = progress
        ws = WatchSet(self.client, self.streams(), deadline, clock=self.clock, observe=self.observe)
        ws.start()
        # failed migrations from before this drain are history, not its result (a resumed call keeps the first call's set)
        if not self.restored:
            self.seen_failures = {kv.meta(m).get("name") for m in ws.objects("vmims") if (m.get("status") or {}).get("phase") == "Failed"}
        try:
            ws.wait(lambda w: self.step(w) or (progress is not None and progress.call_over()), wake_every=1.0)
        finally:
            ws.stop()
        finished = all(i["state"] == "done" for i in self.items)
        left_vmis = {node: [] for node in self.nodes}
        for vmi in ws.objects("vmis"):
            status = vmi.get("status") or {}
            if status.get("nodeName") in left_vmis and status.get("phase") not in plan.FINAL_VMI_PHASES:
                left_vmis[status["nodeName"]].append("{0}/{1}".format(*kv.ref(vmi)))
        return {"finished": finished, "left_vmis": {node: sorted(left) for node, left in left_vmis.items()},
                "pods": {node: ws.objects(pods_stream(node)) for node in self.nodes}, "watch": dict(ws.stats, errors=ws.errors[-10:])}


# ------------------------------------------------------------------------------------------ results
def finished_line(item: dict, record: Optional[dict], now: float) -> str:
    """`vms/vm-1 migrated worker-1 -> worker-2 in 12 s`: a finished VM or Pod as a person reads it. A migration's seconds
    are the cluster's (its start and end, from `record`, checks.migration.migration_record), else the time since the
    eviction was asked."""
    what = "{0}/{1}".format(item["namespace"], item["name"]) if item["kind"] == "vm" else "Pod {0}/{1}".format(item["namespace"], item["name"])
    result = item["result"] or {}
    waited = now - item["requested_at"] if item.get("requested_at") else None
    if result.get("result") == "migrated":
        took = (record or {}).get("duration_seconds")
        # the cluster's timestamps have whole seconds: below one, the time since the eviction says more
        return "{0} migrated {1} -> {2} in {3}".format(what, item.get("source_node"), result.get("target_node"), seconds(took if took else waited))
    if result.get("result") == "restarted":
        return "{0} restarted on {1} after {2} (a new VMI: evictionStrategy None)".format(what, result.get("target_node"), seconds(waited))
    if result.get("result") == "failed":
        return "{0} FAILED: {1}".format(what, result.get("reason"))
    return "{0} {1}{2}".format(what, result.get("result"), ": " + result["reason"] if result.get("reason") else "")


def awaiting_state(item: dict, now: float) -> str:
    """What an open item waits for, in a few words."""
    if item["state"] == "requested":
        doing = "migrating" if item.get("action") == "live_migrate" else "going"
        return "{0} {1}".format(doing, seconds(now - item["requested_at"])) if item.get("requested_at") else doing
    return {"queued": "queued", "pdb": "a PDB refuses the eviction", "retry": "eviction refused (429), retrying"}.get(item["state"], item["state"])


def vm_results(pre: dict, drain: Optional[Drain]) -> List[dict]:
    items = {(i["namespace"], i["name"]): i for i in (drain.items if drain else []) if i["kind"] == "vm"}
    results = []
    for vm in pre["vms"]:
        item = items.get((vm["namespace"], vm["name"]))
        entry = {"namespace": vm["namespace"], "name": vm["name"], "action": vm["action"], "uid_before": vm["uid"], "source_node": vm["node"],
                 "owner_kind": vm["owner_kind"], "owner_name": vm["owner_name"], "target_node": None, "uid_after": None,
                 "migration": None, "reason": vm["reason"], "eviction": None}
        if vm["action"] == "blocked":
            entry.update(result="blocked", reason=vm["blocked_message"] or vm["reason"])
        elif vm["action"] == "not_running":
            entry.update(result="not_running")
        elif item is None:
            entry.update(result="pending")
        else:
            entry["eviction"] = item["eviction"]
            if item["result"]:
                entry.update(item["result"])
            else:
                entry.update(result="timeout", reason=timeout_reason(item, "migrating" if vm["action"] == "live_migrate" else "shutting down"))
        results.append(entry)
    return results


def timeout_reason(item: dict, doing: str) -> str:
    """Why an item was still open at the timeout; a refused eviction names the last refusal."""
    refusal = (item["eviction"] or {}).get("message") or ""
    if item["state"] == "pdb":
        return "a PodDisruptionBudget still refuses the eviction: " + refusal
    if item["state"] == "retry" or (item["state"] == "queued" and refusal):
        return "the eviction was still refused (429) at the timeout, retried every {0:g} s: {1}".format(RETRY_AFTER, refusal)
    if item["state"] == "queued":
        return "not started before the timeout"
    return "still {0} at the timeout".format(doing)


def safe_to_shutdown(node: str, vmis_left: List[str], pods: List[dict]) -> dict:
    active = [p for p in pods if plan.on_node(p, node) and (p.get("status") or {}).get("phase") not in kv.TERMINAL_POD_PHASES]
    daemons = sorted(plan.pod_key(p) for p in active if plan.daemonset_pod(p))
    others = sorted(plan.pod_key(p) for p in active if not plan.daemonset_pod(p) and not kv.is_launcher(p))
    return {"safe": not vmis_left, "vmis": vmis_left, "other_pods": others, "daemonset_pods": daemons,
            "note": "From KubeVirt's side the node is safe to shut down once no VMI runs on it; the other Pods listed are the "
                    "cluster admin's to evacuate." if not vmis_left else "VMIs still run on the node."}


def public_preflight(pre: dict) -> dict:
    return {k: v for k, v in pre.items() if k != "raw_pods"}


def summarize(results: List[dict]) -> dict:
    summary: Dict[str, int] = {}
    for entry in results:
        summary[entry["result"]] = summary.get(entry["result"], 0) + 1
    return summary


def resume_text(nodes: List[str]) -> str:
    who = "Node {0} stays".format(nodes[0]) if len(nodes) == 1 else "Nodes {0} stay".format(", ".join(nodes))
    return ("{0} cordoned. Run the task again to continue: it reads the cluster again, waits for VMs KubeVirt is still evacuating "
            "(and retrying after a failed migration) and evicts what is left. Uncordon with state: uncordon to give up: it also cancels "
            "the evacuations KubeVirt still holds, so the VMs that have not moved stay.".format(who))


def unfinished_items(result: dict) -> List[dict]:
    """The VMs and Pods of a node's result that did not end as a drain should."""
    return [r for r in result["vms"] if r["result"] not in OK_RESULTS] + [p for p in result["pods"] if p["result"] != "evicted"]


def unfinished_detail(result: dict) -> str:
    """`vms/a failed: ... Moved: ...; still on the node: ...`: what of one node's drain did not finish."""
    return "{0}. Moved: {1}; still on the node: {2}".format(
        "; ".join("{0}/{1} {2}{3}".format(r["namespace"], r["name"], r["result"], ": " + r["reason"] if r.get("reason") else "")
                  for r in unfinished_items(result)),
        ", ".join(result["moved"]) or "none", ", ".join(result["left"]) or "no VMI")


def refused_problems(pre: dict) -> str:
    return " | ".join(p["message"] for p in pre["problems"])


def preflight_result(node: str, pre: dict, was_cordoned: bool) -> dict:
    """The keys every drained result of a node starts with."""
    return {"node": node, "state": "drained", "was_cordoned": was_cordoned, "preflight": public_preflight(pre), "concurrency": pre["concurrency"]}


def refused_result(node: str, pre: dict, was_cordoned: bool) -> dict:
    """A node's result when the preflight refused the drain (of this node or of another of the batch): nothing changed."""
    result = dict(preflight_result(node, pre, was_cordoned), changed=False, drained=False, cordoned=was_cordoned, vms=vm_results(pre, None),
                  summary={})
    if pre["problems"]:
        result.update(failed=True, msg="Preflight refused to drain {0}, nothing was changed: {1}".format(node, refused_problems(pre)))
    return result


def check_mode_result(api: NodeApi, node: str, pre: dict, was_cordoned: bool) -> dict:
    """A node's result in check mode: the cordon a run would send goes to the server as a dry run (validation and admission
    answer); no eviction is sent."""
    work = [vm for vm in pre["vms"] if vm["action"] not in ("blocked", "not_running")] + pre["pods"]["other"]
    after = True
    if not was_cordoned:
        after = bool((api.set_unschedulable(node, True, dry_run=True).get("spec") or {}).get("unschedulable"))
    return dict(preflight_result(node, pre, was_cordoned), changed=not was_cordoned or bool(work), drained=False, cordoned=was_cordoned,
                vms=vm_results(pre, None), summary={}, diff={"before": {"unschedulable": was_cordoned}, "after": {"unschedulable": after}})


def node_result(node: str, pre: dict, was_cordoned: bool, drain: Drain, outcome: dict, elapsed: float) -> dict:
    """A node's result after its drain, as a one-node call returns it (the keys of the whole drain, `watch`, `api` and
    `progress`, are the caller's); `failed`, `msg` and `resume` when it did not finish."""
    items = drain.node_items(node)
    results = vm_results(pre, drain)
    pods = [{"namespace": i["namespace"], "name": i["name"], "result": (i["result"] or {}).get("result") or ("timeout" if i["state"] != "done" else None),
             "reason": (i["result"] or {}).get("reason") or (timeout_reason(i, "terminating") if i["state"] != "done" else None)}
            for i in items if i["kind"] == "pod"]
    moved = ["{0}/{1}".format(r["namespace"], r["name"]) for r in results if r["result"] in MOVED_RESULTS]
    left = outcome["left_vmis"][node]
    blocked = {"{0}/{1}".format(r["namespace"], r["name"]) for r in results if r["result"] == "blocked"}
    result = dict(
        preflight_result(node, pre, was_cordoned),
        changed=not was_cordoned or bool(items), cordoned=True, vms=results, pods=pods, summary=summarize(results),
        moved=moved, left=left, migrated=["{0}/{1}".format(r["namespace"], r["name"]) for r in results if r["result"] == "migrated"],
        drained=False,
        safe_to_shutdown=safe_to_shutdown(node, left, outcome["pods"][node]), peak_in_flight=drain.peak_per_node[node],
        evictions=drain.evictions[node], waited_seconds=drain.finished_seconds.get(node, round(elapsed, 3)),
        timed_out=any(i["state"] != "done" for i in items))
    bad = unfinished_items(result)
    result["drained"] = not bad and all(v in blocked for v in left)
    if bad:
        result["failed"] = True
        result["resume"] = resume_text([node])
        result["msg"] = "Drain of {0} did not finish: {1}. {2}".format(node, unfinished_detail(result), result["resume"])
    return result


def merged_evictions(per_node: List[dict]) -> dict:
    total: Dict[str, Any] = {"requests": 0, "responses": {}}
    for counted in per_node:
        total["requests"] += counted["requests"]
        for code, count in counted["responses"].items():
            total["responses"][code] = total["responses"].get(code, 0) + count
    return total


# ------------------------------------------------------------------------------------------ states
def run(options: KubevirtNodeDrainOptions, check_mode: bool, client: Optional[Client] = None,
        clock: Callable[[], float] = time.monotonic) -> dict:
    """The module's entry. The client's deadline covers the reads (api_timeout) plus the whole drain (timeout)."""
    options = validate(options)
    client = client or Client.from_options(options.connection, extra_timeout=options.timeout)
    api = NodeApi(client)
    if options.state == "uncordon":
        return uncordon(api, options.node, check_mode)
    if options.state == "safe_to_shutdown":
        return check_safe(client, api, options.node)
    return drained(client, api, options, check_mode, clock)


def uncordon(api: NodeApi, name: str, check_mode: bool) -> dict:
    """Give the node back: first cancel the evacuations a stopped drain left (cancel_evacuations), then uncordon."""
    node = api.node(name)
    if node is None:
        raise InvalidOption("node {0!r} not found".format(name), NODE_NOT_FOUND_FIX, path="node")
    evacuations = cancel_evacuations(api, name, check_mode)
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    if cordoned:
        node = api.set_unschedulable(name, False, dry_run=check_mode)
    cancelled = evacuations["stayed"] + evacuations["moving"]
    diff = {"before": {"unschedulable": cordoned}, "after": {"unschedulable": bool((node.get("spec") or {}).get("unschedulable"))}}
    if evacuations["marked"]:
        diff["before"]["marked_for_evacuation"] = evacuations["marked"]
        diff["after"]["marked_for_evacuation"] = evacuations["continuing"] + evacuations["failed"]
    return {"changed": cordoned or bool(cancelled), "node": name, "state": "uncordon", "was_cordoned": cordoned,
            "cordoned": cordoned and check_mode, "ready": kv.condition_true(node, "Ready"), "evacuations": evacuations, "diff": diff}


def cancel_evacuations(api: NodeApi, node: str, check_mode: bool) -> dict:
    """The VMs still marked for evacuation from `node`: each mark cleared through evacuate/cancel where virt-api serves it,
    then its evacuation migrations that have not started deleted (as `virtctl evacuate-cancel --migrate-cancel`), so that
    no migration moves it after the node is given back; where the cancel is not served, what KubeVirt goes on doing and how
    to stop it. Check mode sends both as server-side dry runs."""
    vmis, vmims = api.evacuations()
    entries = cancel.plan(vmis, vmims, node)
    is_served = bool(entries) and api.serves_evacuate_cancel()
    results = []
    for entry in entries:
        if not is_served:
            results.append(cancel.outcome(entry, cancelled=False, is_served=False))
            continue
        try:
            api.cancel_evacuation(entry["namespace"], entry["name"], node, check_mode)
        except ApiFailure as failure:
            if failure.status in (401, 403):   # a missing permission fails the task, naming it
                raise
            results.append(cancel.outcome(entry, cancelled=False, error=failure.problem))
            continue
        for migration in entry["pending"]:
            api.delete_migration(entry["namespace"], migration, check_mode)
        results.append(cancel.outcome(entry, cancelled=True))
    return cancel.summary(node, is_served if entries else None, results)


def check_safe(client: Client, api: NodeApi, name: str) -> dict:
    node = api.node(name)
    if node is None:
        raise InvalidOption("node {0!r} not found".format(name), NODE_NOT_FOUND_FIX, path="node")
    vmis = client.list_kind("VirtualMachineInstance", "kubevirt.io") or []
    left = sorted("{0}/{1}".format(*kv.ref(v)) for v in vmis
                  if (v.get("status") or {}).get("nodeName") == name and (v.get("status") or {}).get("phase") not in plan.FINAL_VMI_PHASES)
    return {"changed": False, "node": name, "state": "safe_to_shutdown", "cordoned": bool((node.get("spec") or {}).get("unschedulable")),
            "safe_to_shutdown": safe_to_shutdown(name, left, api.pods_on(name))}


def drained(client: Client, api: NodeApi, options: KubevirtNodeDrainOptions, check_mode: bool, clock: Callable[[], float]) -> dict:
    """Preflight, cordon and drain, of `node` or of every node of `nodes` at once; with `progress_every`, in calls that each
    return when a VM finished or a status line is due (`progress`), the later calls going on from the first one's
    preflights and the items' states (`resume`)."""
    nodes = options.nodes or [options.node]
    progress = Progress(options.progress_every, options.resume if not check_mode else None, clock=clock)
    progress.require_state("preflights", "was_cordoned", "drain")
    if progress.resumed:
        preflights, was_cordoned = progress.state["preflights"], progress.state["was_cordoned"]
        drain = Drain.restore(client, api, preflights, clock, progress.state["drain"])
        client.retried[:0] = progress.state.get("retried") or []  # the retries of the calls before count in the result
    else:
        preflights = read_preflights(client, api, options, nodes)
        was_cordoned = {node: bool(pre["node"].get("cordoned")) for node, pre in preflights.items()}
        if any(pre["problems"] for pre in preflights.values()):
            return shaped(options, {node: refused_result(node, preflights[node], was_cordoned[node]) for node in nodes}, refused=True)
        if check_mode:
            return shaped(options, {node: check_mode_result(api, node, preflights[node], was_cordoned[node]) for node in nodes})
        for node in nodes:
            if not was_cordoned[node]:
                api.set_unschedulable(node, True)
        drain = Drain(client, api, preflights, clock)
    if drain.items:
        outcome = drain.run(progress.call_deadline(options.timeout), progress)
    else:
        outcome = {"finished": True, "left_vmis": {node: [] for node in nodes}, "pods": {node: pre.get("raw_pods") or [] for node, pre in preflights.items()},
                   "watch": {}}
    if not outcome["finished"] and progress.every > 0 and not progress.out_of_time(options.timeout):
        state = {"preflights": {node: public_preflight(pre) for node, pre in preflights.items()}, "was_cordoned": was_cordoned,
                 "drain": drain.snapshot(), "retried": client.retried}
        return dict(targets(options), changed=True, state="drained", cordoned=True,
                    progress=progress.unfinished(drain.status_line(progress.elapsed(), options.timeout), state))
    elapsed = progress.elapsed()
    per_node = {node: node_result(node, preflights[node], was_cordoned[node], drain, outcome, elapsed) for node in nodes}
    return shaped(options, per_node, whole={
        "watch": outcome["watch"], "waited_seconds": round(elapsed, 3), "timed_out": not outcome["finished"],
        "api": {"retries": len(client.retried), "retried": client.retried[-20:]}, "progress": progress.done(),
        "peak_in_flight": drain.peak_in_flight, "evictions": merged_evictions([drain.evictions[node] for node in nodes])})


def targets(options: KubevirtNodeDrainOptions) -> dict:
    return {"node": options.node} if options.nodes is None else {"nodes": list(options.nodes)}


def shaped(options: KubevirtNodeDrainOptions, per_node: Dict[str, dict], whole: Optional[dict] = None, refused: bool = False) -> dict:
    """The module's result: with `node`, that node's result and the drain-wide keys (`whole`); with `nodes`, every node's
    result in `nodes_results` and the batch's totals."""
    whole = whole or {}
    if options.nodes is None:
        result = dict(per_node[options.node])
        failure = {k: result.pop(k) for k in ("failed", "resume", "msg") if k in result}
        result.update(whole)
        result.update(failure)
        return result
    nodes = list(options.nodes)
    results = [per_node[node] for node in nodes]
    result: Dict[str, Any] = dict(targets(options), state="drained", changed=any(r["changed"] for r in results),
                                  drained=all(r["drained"] for r in results), cordoned=all(r["cordoned"] for r in results),
                                  moved=[vm for r in results for vm in r.get("moved") or []],
                                  migrated=[vm for r in results for vm in r.get("migrated") or []],
                                  left=[vm for r in results for vm in r.get("left") or []],
                                  concurrency_per_node={node: per_node[node]["concurrency"] for node in nodes},
                                  nodes_results=per_node)
    if "diff" in results[0]:
        result["diff"] = {side: {node: per_node[node]["diff"][side] for node in nodes} for side in ("before", "after")}
    result.update(whole)
    if refused:
        result.update(failed=True, msg="Preflight refused to drain {0} at once, nothing was changed: {1}".format(
            ", ".join(nodes), " | ".join("{0}: {1}".format(node, p["message"]) for node in nodes for p in per_node[node]["preflight"]["problems"])))
    unfinished = [node for node in nodes if per_node[node].get("failed") and not refused]
    if unfinished:
        drained_nodes = [node for node in nodes if node not in unfinished]
        result["failed"] = True
        result["resume"] = resume_text(nodes)
        result["msg"] = "Drain of {0} did not finish{1}: {2}. {3}".format(
            ", ".join(unfinished), " ({0} drained)".format(", ".join(drained_nodes)) if drained_nodes else "",
            " | ".join("{0}: {1}".format(node, unfinished_detail(per_node[node])) for node in unfinished), result["resume"])
    return result
