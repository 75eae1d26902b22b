# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`kubevirt_cluster_maintenance`: the state of a rolling maintenance of many nodes, kept in the cluster.

`planned` reads the cluster once (the eviction facts, the launchers, the run's ConfigMap), decides the order and the
batches (checks.rolling_maintenance), refuses a plan that moves VMs twice unless allowed, then records the run and
puts the collection's `PreferNoSchedule` taint on every node still to be maintained (lifting ours from any other
node). A recorded run that did not finish is continued: its finished nodes are skipped, its started ones go first.
`started` and `node_done` record each node's progress (`node_done` lifts the node's taint); `finished` and `stopped`
lift every taint of ours and answer the run's report (per node the steps, per VM every migration since the run
began; `stopped` also the VMs KubeVirt is still evacuating from the nodes not done, checks.evacuation_cancel); `absent`
lifts the taints and forgets the run. In check mode the writes go as server-side dry runs.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import drain_plan
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import evacuation_cancel
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import rolling_maintenance as rm
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.migration import migration_record
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.eviction_facts import Scope, read_facts
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.klog import format_time, parse_time
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import matches_selector_string, parse_label_selector
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report import maintenance as report_text

ARG_SPEC = {
    "state": {"type": "str", "choices": ["planned", "started", "node_done", "finished", "stopped", "absent"], "default": "planned"},
    "nodes": {"type": "list", "elements": "str"},
    "node_selector": {"type": "str"},
    "node": {"type": "str"},
    "steps": {"type": "dict"},
    "reason": {"type": "str"},
    "max_nodes_in_parallel": {"type": "int", "default": 3},
    "allow_double_migrations": {"type": "bool", "default": False},
    "restart": {"type": "bool", "default": False},
    "progress_namespace": {"type": "str", "default": "kube-system"},
    "progress_name": {"type": "str", "default": "kubevirt-ops-cluster-maintenance"},
}
RECORD_KEY = "run.json"
UNFINISHED = ("in_progress", "stopped")
TAINT_CONFLICT_RETRIES = 5


@dataclasses.dataclass(frozen=True)
class KubevirtClusterMaintenanceOptions(ModuleOptions):
    """The options of kubevirt_cluster_maintenance, as ARG_SPEC parses them."""
    state: str
    nodes: Optional[List[str]]
    node_selector: Optional[str]
    node: Optional[str]
    steps: Optional[dict]
    reason: Optional[str]
    max_nodes_in_parallel: int
    allow_double_migrations: bool
    restart: bool
    progress_namespace: str
    progress_name: str


def validate(options: KubevirtClusterMaintenanceOptions) -> None:
    if options.state == "planned":
        if bool(options.nodes) == bool(options.node_selector):
            raise InvalidOption("give the nodes to maintain by name or by label selector, one of the two",
                                "Set nodes (a list of node names) or node_selector (e.g. node-role.kubernetes.io/worker=).",
                                path="nodes" if not options.nodes else "node_selector")
        if options.node_selector:
            try:
                parse_label_selector(options.node_selector)
            except ValueError as exc:
                raise InvalidOption("is not a label selector: {0}".format(exc), "Write it as kubectl get nodes -l takes it.",
                                    path="node_selector") from None
        if options.max_nodes_in_parallel < 1:
            raise InvalidOption("must be 1 or more, got {0}".format(options.max_nodes_in_parallel),
                                "Set max_nodes_in_parallel: 1 to maintain one node at a time.", path="max_nodes_in_parallel")
    if options.state == "started" and not options.nodes:
        raise InvalidOption("is required with state started", "Give the nodes of the batch that starts.", path="nodes")
    if options.state == "node_done" and not options.node:
        raise InvalidOption("is required with state node_done", "Give the node that is done.", path="node")


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


# ------------------------------------------------------------------------------------------ the cluster
class MaintenanceApi:
    """The run's ConfigMap and the nodes' taints."""

    def __init__(self, client: Client, options: KubevirtClusterMaintenanceOptions, dry_run: bool) -> None:
        self.client = client
        self.options = options
        self.dry_run = dry_run
        self.nodes_resource = client.require_kind("Node", "")
        self.configmaps = client.require_kind("ConfigMap", "")
        self.changed_nodes: List[dict] = []

    def read_record(self) -> Optional[dict]:
        found = self.client.get(self.configmaps, self.options.progress_name, self.options.progress_namespace)
        if found is None:
            return None
        try:
            record = json.loads(((found.get("data") or {}).get(RECORD_KEY)) or "{}")
        except ValueError:
            raise InvalidOption("ConfigMap {0}/{1} holds no run this module wrote ({2} is not JSON)".format(
                self.options.progress_namespace, self.options.progress_name, RECORD_KEY),
                "Delete it (kubectl delete configmap) or give another progress_name.", path="progress_name") from None
        record["_resource_version"] = kv.meta(found).get("resourceVersion")
        return record

    def write_record(self, record: dict) -> dict:
        body_record = {k: v for k, v in record.items() if not k.startswith("_")}
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": self.options.progress_name, "namespace": self.options.progress_namespace,
                             "labels": {"app.kubernetes.io/managed-by": "kubevirt_ops.rebalance"}},
                "data": {RECORD_KEY: json.dumps(body_record, indent=1, sort_keys=True)}}
        if record.get("_resource_version"):
            body["metadata"]["resourceVersion"] = record["_resource_version"]
            stored = self.client.replace(self.configmaps, body, self.options.progress_namespace, dry_run=self.dry_run)
        else:
            stored = self.client.create(self.configmaps, body, self.options.progress_namespace, dry_run=self.dry_run)
        if not self.dry_run:
            record["_resource_version"] = kv.meta(stored).get("resourceVersion")
        return record

    def delete_record(self) -> bool:
        return self.client.delete(self.configmaps, self.options.progress_name, self.options.progress_namespace,
                                  dry_run=self.dry_run) is not None

    def set_taints(self, node: dict, change: Callable[[List[dict]], List[dict]]) -> bool:
        """Apply `change` to the node's taints, guarded by its resourceVersion (a conflict reads it again)."""
        name = kv.meta(node).get("name")
        for _attempt in range(TAINT_CONFLICT_RETRIES):
            before = (node.get("spec") or {}).get("taints") or []
            after = change(before)
            if after == before:
                return False
            body = {"metadata": {"resourceVersion": kv.meta(node).get("resourceVersion")}, "spec": {"taints": after or None}}
            try:
                self.client.patch(self.nodes_resource, name, body, dry_run=self.dry_run)
                self.changed_nodes.append({"node": name, "before": before, "after": after})
                return True
            except ApiFailure as failure:
                if failure.status != 409:
                    raise
                node = self.client.get(self.nodes_resource, name) or {}
        raise ApiFailure(409, "Conflict", "node {0} kept changing while its taints were set".format(name), retryable=False)

    def lift_all(self, nodes: List[dict]) -> List[str]:
        return [kv.meta(n).get("name") for n in nodes if self.set_taints(n, rm.without_pending_taint)]


# ------------------------------------------------------------------------------------------ reading
def select_nodes(options: KubevirtClusterMaintenanceOptions, nodes: List[dict]) -> List[str]:
    names = [kv.meta(n).get("name") for n in nodes]
    if options.nodes:
        unknown = [n for n in options.nodes if n not in names]
        if unknown:
            raise InvalidOption("node(s) not found: {0}".format(", ".join(unknown)), "Give nodes that kubectl get nodes lists.", path="nodes")
        return list(dict.fromkeys(options.nodes))
    requirements = parse_label_selector(options.node_selector)
    chosen = sorted(kv.meta(n).get("name") for n in nodes if matches_selector_string(requirements, kv.labels(n)))
    if not chosen:
        raise InvalidOption("selects no node ({0!r})".format(options.node_selector),
                            "Check it with kubectl get nodes -l '{0}'.".format(options.node_selector), path="node_selector")
    return chosen


def vm_entries(facts: dict, launchers: List[dict]) -> List[dict]:
    """Per VMI on a node: its drain action and its launcher's requests (as the drain's preflight decides them,
    drain_plan.vm_plan) and the PDBs over it."""
    by_name = {kv.ref(p): p for p in launchers}
    result = []
    for fact in facts.get("vmis") or []:
        if not fact.get("node"):
            continue
        vm = drain_plan.vm_plan(fact, by_name.get((fact["namespace"], (fact.get("launcher") or {}).get("name") or "")))
        result.append({"key": "{0}/{1}".format(vm["namespace"], vm["name"]), "node": vm["node"], "action": vm["action"],
                       "requests": vm["requests"], "pdbs": ["{0}/{1}".format(vm["namespace"], name) for name in vm["pdbs"]]})
    return result


def pdb_allowances(facts: dict) -> Dict[str, int]:
    return {"{0}/{1}".format(p["namespace"], p["name"]): int(p.get("disruptions_allowed") or 0) for p in facts.get("pdbs") or []}


# ------------------------------------------------------------------------------------------ states
def planned(client: Client, api: MaintenanceApi, options: KubevirtClusterMaintenanceOptions, now: Callable[[], datetime.datetime]) -> dict:
    facts = read_facts(client, Scope(include=("cluster", "nodes", "vmis")))
    nodes = client.list(api.nodes_resource)
    chosen = select_nodes(options, nodes)
    record = api.read_record()
    resumed = bool(record) and record.get("status") in UNFINISHED and not options.restart
    if resumed and sorted(record.get("nodes") or []) != sorted(chosen):
        raise InvalidOption(
            "a run of other nodes is unfinished ({0}, run {1}, {2} of {3} done)".format(
                ", ".join(record.get("nodes") or []), record.get("run_id"), len(done_nodes(record)), len(record.get("nodes") or [])),
            "Give the same nodes to continue it, restart: true to start over, or state: absent to forget it.", path="nodes")
    if not resumed:
        moment = now()
        record = dict({"_resource_version": (record or {}).get("_resource_version")},
                      run_id=moment.strftime("%Y%m%dt%H%M%Sz"), started_at=format_time(moment), status="in_progress", nodes=chosen,
                      node_states={}, previous=summary_of(record))
    done = done_nodes(record)
    started = [n for n, s in (record.get("node_states") or {}).items() if s.get("state") == "started"]
    pending = [n for n in chosen if n not in done]
    limits = (facts.get("cluster") or {}).get("migration_limits") or kv.migration_limits(None)
    launchers = client.list(client.require_kind("Pod", ""), label_selector="kubevirt.io=virt-launcher")
    vms, pdbs = vm_entries(facts, launchers), pdb_allowances(facts)
    decided = rm.plan(facts.get("nodes") or [], vms, pending, limits, options.max_nodes_in_parallel, pdbs, started)
    narrower = None
    if decided["second_migrations"] and decided["nodes_at_once"] > 1:
        narrower = rm.plan(facts.get("nodes") or [], vms, pending, limits, 1, pdbs, started)
    found = rm.problems(decided, options.allow_double_migrations, narrower)
    result: Dict[str, Any] = {"run_id": record["run_id"], "resumed": resumed, "done": done, "pending": pending, "plan": decided,
                              "problems": found, "nodes": chosen}
    if found:
        result.update(changed=False, failed=True, msg="Preflight refused the maintenance of {0}, nothing was changed: {1}".format(
            ", ".join(chosen), " | ".join(p["message"] for p in found)))
        return result
    record["plan"] = {"order": decided["order"], "batches": [b["nodes"] for b in decided["batches"]],
                      "expected_second_migrations": len(decided["second_migrations"])}
    record["status"] = "in_progress"
    api.write_record(record)
    by_name = {kv.meta(n).get("name"): n for n in nodes}
    for name in sorted(by_name):
        if name in pending:
            api.set_taints(by_name[name], lambda taints: rm.with_pending_taint(taints, record["run_id"]))
        else:
            api.set_taints(by_name[name], rm.without_pending_taint)
    before = sorted(n for n, obj in by_name.items() if any(rm.is_pending_taint(t) for t in (obj.get("spec") or {}).get("taints") or []))
    result.update(changed=not resumed or bool(api.changed_nodes), tainted=list(pending),
                  diff={"before": {"tainted": before}, "after": {"tainted": sorted(pending)}})
    return result


def done_nodes(record: Optional[dict]) -> List[str]:
    return [n for n in (record or {}).get("nodes") or [] if ((record.get("node_states") or {}).get(n) or {}).get("state") == "done"]


def summary_of(record: Optional[dict]) -> Optional[dict]:
    if not record:
        return None
    return {k: record.get(k) for k in ("run_id", "status", "started_at", "finished_at")}


def require_record(api: MaintenanceApi) -> dict:
    record = api.read_record()
    if not record:
        raise InvalidOption("no run is recorded in ConfigMap {0}/{1}".format(api.options.progress_namespace, api.options.progress_name),
                            "Run state: planned first (the playbook does).", path="state")
    return record


def node_started(api: MaintenanceApi, options: KubevirtClusterMaintenanceOptions, now: Callable[[], datetime.datetime]) -> dict:
    record = require_record(api)
    states = record.setdefault("node_states", {})
    for node in options.nodes or []:
        states[node] = dict(states.get(node) or {}, state="started", started_at=format_time(now()))
    api.write_record(record)
    return {"changed": True, "run_id": record["run_id"], "started": options.nodes}


def node_done(api: MaintenanceApi, options: KubevirtClusterMaintenanceOptions, now: Callable[[], datetime.datetime]) -> dict:
    record = require_record(api)
    states = record.setdefault("node_states", {})
    states[options.node] = dict(states.get(options.node) or {}, state="done", done_at=format_time(now()), steps=options.steps or {})
    api.write_record(record)
    node = api.client.get(api.nodes_resource, options.node or "")
    lifted = bool(node) and api.set_taints(node, rm.without_pending_taint)
    return {"changed": True, "run_id": record["run_id"], "node": options.node, "taint_lifted": lifted,
            "done": done_nodes(record), "left": [n for n in record.get("nodes") or [] if n not in done_nodes(record)]}


def ended(client: Client, api: MaintenanceApi, options: KubevirtClusterMaintenanceOptions, now: Callable[[], datetime.datetime]) -> dict:
    """finished, stopped or absent: every taint of ours lifted; the run's report (absent: forgotten too)."""
    lifted = api.lift_all(client.list(api.nodes_resource))
    record = api.read_record()
    result: Dict[str, Any] = {"changed": bool(lifted), "lifted": lifted, "run_id": (record or {}).get("run_id")}
    if options.state == "absent":
        result["changed"] = api.delete_record() or bool(lifted)
        return result
    if not record:
        result["report"] = None
        return result
    moment = now()
    if options.state == "finished":
        record.update(status="complete", finished_at=format_time(moment))
    else:
        record.update(status="stopped", stopped={"at": format_time(moment), "reason": options.reason or "stopped"})
    api.write_record(record)
    vmims = client.list_kind("VirtualMachineInstanceMigration", "kubevirt.io") or []
    report = run_report(record, vmims, moment)
    if options.state == "stopped":   # what KubeVirt goes on evacuating from the nodes not done (a cordoned node keeps its marks)
        vmis = client.list_kind("VirtualMachineInstance", "kubevirt.io") or []
        report["still_evacuating"] = evacuation_cancel.left_marked(
            vmis, [n for n in record.get("nodes") or [] if n not in done_nodes(record)])
    result.update(changed=True, report=report, markdown=report_text.markdown(report), html=report_text.html(report))
    return result


# ------------------------------------------------------------------------------------------ report
def run_report(record: dict, vmims: List[dict], moment: datetime.datetime) -> dict:
    """Per node its steps, per VM every migration since the run began, and the totals."""
    since = record.get("started_at") or ""
    per_vm: Dict[str, List[dict]] = {}
    for vmim in vmims:
        if (kv.meta(vmim).get("creationTimestamp") or "") < since:
            continue
        entry = migration_record(vmim)
        key = "{0}/{1}".format(kv.meta(vmim).get("namespace"), (vmim.get("spec") or {}).get("vmiName"))
        per_vm.setdefault(key, []).append({k: entry[k] for k in ("name", "phase", "source_node", "target_node", "created", "start", "end",
                                                                 "phase_timestamps", "duration_seconds", "failure_reason")})
    for moves in per_vm.values():
        moves.sort(key=lambda m: (m.get("start") or "", m["name"] or ""))
    succeeded = {vm: [m for m in moves if m["phase"] == "Succeeded"] for vm, moves in per_vm.items()}
    moved = [vm for vm, moves in succeeded.items() if moves]
    count = sum(len(moves) for moves in succeeded.values())
    states = record.get("node_states") or {}
    nodes = [node_entry(n, states.get(n) or {}) for n in (record.get("plan") or {}).get("order") or record.get("nodes") or []]
    started = parse_time(since)
    return {
        "run_id": record.get("run_id"), "status": record.get("status"), "started_at": since,
        "ended_at": record.get("finished_at") or (record.get("stopped") or {}).get("at"),
        "stopped": record.get("stopped"), "plan": record.get("plan"), "nodes": nodes,
        "vms": [{"vm": vm, "migrations": per_vm[vm]} for vm in sorted(per_vm)],
        "totals": {
            "nodes": len(record.get("nodes") or []), "nodes_done": len(done_nodes(record)),
            "vms_migrated": len(moved), "migrations": count,
            "failed_migrations": sum(1 for moves in per_vm.values() for m in moves if m["phase"] == "Failed"),
            "vms_migrated_twice_or_more": sorted(vm for vm in moved if len(succeeded[vm]) > 1),
            "migrations_per_vm": round(count / float(len(moved)), 3) if moved else 0.0,
            "max_migrations_of_a_vm": max([len(m) for m in succeeded.values()] or [0]),
            "peak_concurrent_migrations": peak_overlap([m for moves in succeeded.values() for m in moves]),
            "seconds": round((moment - started).total_seconds(), 1) if started else None,
        },
    }


def node_entry(name: str, state: dict) -> dict:
    return dict({k: v for k, v in state.items() if k != "state"}, node=name, state=state.get("state", "pending"))


def peak_overlap(moves: List[dict]) -> int:
    """The most migrations running at one moment, from their start and end."""
    edges = []
    for move in moves:
        if move.get("start") and move.get("end"):
            edges.append((move["start"], 1))
            edges.append((move["end"], -1))
    peak = running = 0
    for _moment, delta in sorted(edges, key=lambda e: (e[0], e[1])):
        running += delta
        peak = max(peak, running)
    return peak


# ------------------------------------------------------------------------------------------ entry
def run(options: KubevirtClusterMaintenanceOptions, check_mode: bool, client: Optional[Client] = None,
        now: Callable[[], datetime.datetime] = utc_now) -> dict:
    validate(options)
    client = client or Client.from_options(options.connection)
    api = MaintenanceApi(client, options, dry_run=check_mode)
    if options.state == "planned":
        result = planned(client, api, options, now)
    elif options.state == "started":
        result = node_started(api, options, now)
    elif options.state == "node_done":
        result = node_done(api, options, now)
    else:
        result = ended(client, api, options, now)
    result.setdefault("taints_changed", api.changed_nodes)
    result["state"] = options.state
    return result
