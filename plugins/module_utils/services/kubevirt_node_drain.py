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
- `state: uncordon`: the node becomes schedulable again.
- `state: safe_to_shutdown`: read-only: no VMI runs on the node any more; the other Pods are listed.

Check mode changes nothing: the preflight is read as in a run, and the cordon (or uncordon) that a run would
send goes to the API server as a dry run, so that validation and admission answer; no Pod is evicted (a dry-run
eviction of a launcher would still ask KubeVirt's eviction webhook, which acts on the VMI).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import drain_plan as plan
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client, Failure
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.eviction_facts import Scope, read_facts
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_subdomain
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.migration import migration_record
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import PROGRESS_SPEC, Progress, check_every, named, seconds

ARG_SPEC = {
    "node": {"type": "str", "required": True},
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


@dataclasses.dataclass(frozen=True)
class KubevirtNodeDrainOptions(ModuleOptions):
    """The options of `kubevirt_node_drain` as the module parsed them (defaults are the spec's)."""
    node: str
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
    """The options checked before any request (InvalidOption names the option), the node name stripped."""
    node = options.node.strip()  # required by the spec
    if not is_dns_subdomain(node):
        raise InvalidOption("{0!r} is not a valid node name".format(node), "Give the node's name as kubectl get nodes shows it.", path="node")
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long the whole drain may take, e.g. 600.", path="timeout")
    if options.max_parallel is not None and options.max_parallel < 1:
        raise InvalidOption("must be 1 or more", "Give how many live migrations may run at once, or leave it unset for KubeVirt's limits.",
                            path="max_parallel")
    check_every(options.progress_every)
    return dataclasses.replace(options, node=node)


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
        self.evictions = {"requests": 0, "responses": {}}

    def node(self, name: str) -> Optional[dict]:
        return self.client.get(self.nodes, name)

    def pods_on(self, node: str) -> List[dict]:
        return self.client.list(self.pods, field_selector="spec.nodeName={0}".format(node))

    def set_unschedulable(self, node: str, value: bool, dry_run: bool = False) -> dict:
        """Cordon or uncordon (a merge patch of spec.unschedulable); the node as stored, or as it would be with `dry_run`."""
        return self.client.patch(self.nodes, node, {"spec": {"unschedulable": value or None}}, dry_run=dry_run,
                                 request="{0} node {1}".format("cordon" if value else "uncordon", node))

    def evict(self, namespace: str, name: str) -> dict:
        self.evictions["requests"] += 1
        answer = self.client.evict(namespace, name, is_answer=is_eviction_answer)
        key = str(answer["code"])
        self.evictions["responses"][key] = self.evictions["responses"].get(key, 0) + 1
        return answer


# ------------------------------------------------------------------------------------------ preflight
def read_preflight(client: Client, api: NodeApi, options: KubevirtNodeDrainOptions) -> dict:
    """Everything the drain decides on, read in a constant number of requests."""
    node = options.node
    facts = read_facts(client, Scope(include=FACTS_INCLUDE))
    node_fact = next((n for n in facts.get("nodes") or [] if n["name"] == node), None)
    if node_fact is None:
        raise InvalidOption("node {0!r} not found".format(node), "Give a node that kubectl get nodes lists.", path="node")
    if not (facts.get("served") or {}).get("VirtualMachineInstance"):
        facts["vmis"] = []
    pods = api.pods_on(node)
    by_name = {kv.ref(p): p for p in pods}
    vm_facts = [f for f in facts.get("vmis") or [] if plan.vmi_on_node(f, node)]
    vms = [plan.vm_plan(f, by_name.get((f["namespace"], (f.get("launcher") or {}).get("name") or ""))) for f in vm_facts]
    pod_plan = plan.classify_pods(pods, all_pods=options.pods == "all", ignore_daemonsets=options.ignore_daemonsets,
                                  delete_emptydir_data=options.delete_emptydir_data, force=options.force)
    launcher_keys = {"{0}/{1}".format(vm["namespace"], vm["launcher"]) for vm in vms if vm["launcher"]}
    pod_plan["other"] = [key for key in pod_plan["evict"] if key not in launcher_keys]
    room = plan.capacity(facts.get("nodes") or [], node, vms)
    limits = (facts.get("cluster") or {}).get("migration_limits") or kv.migration_limits(None)
    launchers = [vm["launcher"] for vm in vms if vm["launcher"]]
    return {
        "node": node_fact, "vms": vms, "counts": plan.counts(vms), "pods": pod_plan, "capacity": room,
        "pdbs": plan.pdbs_on_node(facts.get("pdbs") or [], facts.get("findings") or [], launchers),
        "findings": [f for f in facts.get("findings") or [] if f.get("kind") != "PodDisruptionBudget"
                     and any(f.get("name") == vm["name"] and f.get("namespace") == vm["namespace"] for vm in vms)],
        "limits": {k: limits.get(k) for k in ("parallel_migrations_per_cluster", "parallel_outbound_migrations_per_node")},
        "concurrency": plan.concurrency(limits, options.max_parallel),
        "problems": plan.problems(vms, pod_plan, room, allow_loss=options.allow_loss, allow_shutdown=options.allow_shutdown,
                                  allow_blocked=options.allow_blocked, require_capacity=options.require_capacity),
        "raw_pods": pods,
    }


# ------------------------------------------------------------------------------------------ drain
class Drain:
    """The event-driven part: evict within the limits, follow each VM to its result."""

    def __init__(self, client: Client, api: NodeApi, node: str, pre: dict, clock: Callable[[], float]) -> None:
        self.client = client
        self.api = api
        self.node = node
        self.pre = pre
        self.clock = clock
        self.items: List[dict] = []
        for vm in pre["vms"]:
            if vm["action"] in ("blocked", "not_running"):
                continue
            self.items.append(dict(vm, kind="vm", state="queued", result=None, eviction=None, source_node=self.node))
        pods_by_key = {plan.pod_key(p): p for p in pre["raw_pods"]}
        for key in pre["pods"]["other"]:
            pod = pods_by_key[key]
            self.items.append({"kind": "pod", "namespace": kv.ref(pod)[0], "name": kv.ref(pod)[1], "uid": kv.meta(pod).get("uid"),
                               "action": "evict", "state": "queued", "result": None, "eviction": None})
        self.peak_in_flight = 0
        self.pdb_waiting = False
        self.seen_failures: set = set()
        self.restored = False
        self.progress: Optional[Progress] = None

    # ------------------------------------------------------------------------------------ between calls
    def snapshot(self) -> dict:
        """What the next call of a sliced drain goes on from (JSON; a retry time as seconds from now)."""
        now = self.clock()
        items = [dict({k: v for k, v in i.items() if k != "retry_at"}, retry_in=max(0.0, i["retry_at"] - now) if "retry_at" in i else None)
                 for i in self.items]
        return {"items": items, "peak_in_flight": self.peak_in_flight, "seen_failures": sorted(self.seen_failures),
                "evictions": self.api.evictions}

    @classmethod
    def restore(cls, client: Client, api: NodeApi, node: str, pre: dict, clock: Callable[[], float], snapshot: dict) -> "Drain":
        drain = cls(client, api, node, dict(pre, vms=[], raw_pods=[], pods=dict(pre["pods"], other=[])), clock)
        drain.pre = pre
        now = clock()
        for item in snapshot["items"]:
            item = dict(item)
            retry_in = item.pop("retry_in", None)
            if retry_in is not None:
                item["retry_at"] = now + retry_in
            drain.items.append(item)
        drain.peak_in_flight = snapshot["peak_in_flight"]
        drain.seen_failures = set(snapshot["seen_failures"])
        api.evictions = snapshot["evictions"]
        drain.restored = True
        return drain

    # ------------------------------------------------------------------------------------ what a person sees
    def _report_finished(self, vmims: List[dict]) -> None:
        """One line per VM or Pod that finished since the last line (from, to and seconds of a migration)."""
        if self.progress is None:
            return
        total = len(self.items)
        newly = [i for i in self.items if i["state"] == "done" and not i.get("reported")]
        if not newly:
            return
        # the records of the migrations that finished them, built once: for the order and for the seconds
        wanted = {(i["result"] or {}).get("migration") for i in newly} - {None}
        records = {kv.meta(m).get("name"): migration_record(m) for m in vmims if kv.meta(m).get("name") in wanted}
        done = sum(1 for i in self.items if i.get("reported"))
        # several found in one batch of events: in the order their migrations ended (the cluster's timestamps)
        for item in sorted(newly, key=lambda i: (records.get((i["result"] or {}).get("migration")) or {}).get("end") or ""):
            item["reported"] = True
            done += 1
            record = records.get((item["result"] or {}).get("migration"))
            self.progress.finished("{0}: {1} ({2} of {3} done)".format(self.node, finished_line(item, record, self.progress.wall()), done, total))

    def awaiting_line(self, elapsed: float, timeout: int) -> str:
        open_items = [i for i in self.items if i["state"] != "done"]
        now = self.progress.wall() if self.progress else 0.0
        return "{0}: {1} of {2} s; awaiting {3} of {4}: {5}".format(
            self.node, "{0:.0f}".format(elapsed), timeout, len(open_items), len(self.items),
            named(["{0}/{1} ({2})".format(i["namespace"], i["name"], awaiting_state(i, now)) for i in open_items]))

    # ------------------------------------------------------------------------------------ streams
    def streams(self) -> List[Stream]:
        found = self.client.find_kinds([("VirtualMachineInstance", "kubevirt.io"), ("VirtualMachineInstanceMigration", "kubevirt.io"),
                                        ("PodDisruptionBudget", "policy")])
        result = [Stream("pods", self.api.pods, field_selector="spec.nodeName={0}".format(self.node))]
        for name, kind, group in (("vmis", "VirtualMachineInstance", "kubevirt.io"), ("vmims", "VirtualMachineInstanceMigration", "kubevirt.io"),
                                  ("pdbs", "PodDisruptionBudget", "policy")):
            if found[(kind, group)] is not None:
                result.append(Stream(name, found[(kind, group)]))
        return result

    # ------------------------------------------------------------------------------------ one step
    def _evict(self, item: dict) -> None:
        answer = self.api.evict(item["namespace"], item["launcher"] if item["kind"] == "vm" else item["name"])
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

    def _in_flight(self) -> int:
        return sum(1 for i in self.items if i["kind"] == "vm" and i["action"] == "live_migrate" and i["state"] == "requested")

    def _update(self, ws: WatchSet) -> None:
        vmis = ws.cache.get("vmis", {})
        vmims = ws.objects("vmims")
        pods = ws.cache.get("pods", {})
        for item in self.items:
            # a Pod whose eviction is refused for now may still go (a hotplug Pod goes with its VM's launcher)
            if item["state"] != "requested" and not (item["kind"] == "pod" and item["state"] == "retry"):
                continue
            if item["kind"] == "pod":
                pod = pods.get((item["namespace"], item["name"]))
                if pod is None or kv.meta(pod).get("uid") != item["uid"] or (pod.get("status") or {}).get("phase") in kv.TERMINAL_POD_PHASES:
                    item["state"], item["result"] = "done", {"result": "evicted"}
                continue
            result = plan.outcome(item, vmis.get((item["namespace"], item["name"])), vmims, self.seen_failures, self.node)
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
        for item in self.items:
            if item["state"] == "queued" and item["action"] == "live_migrate" and self._in_flight() < self.pre["concurrency"]:
                if item["in_progress"]:
                    item["state"] = "requested"  # marked by an earlier run or another client: wait for it, do not evict again
                    item.setdefault("requested_at", self.progress.wall() if self.progress else None)
                else:
                    self._evict(item)
        self.peak_in_flight = max(self.peak_in_flight, self._in_flight())
        self._update(ws)
        self._report_finished(ws.objects("vmims"))
        return all(i["state"] == "done" for i in self.items)

    def observe(self, stream: str, _event: str, obj: dict) -> None:
        if stream == "pdbs" and any(i["state"] == "pdb" for i in self.items):
            self.pdb_waiting = True

    def run(self, deadline: float, progress: Optional[Progress] = None) -> dict:
        """Until every item is decided, or `deadline`, or (with `progress`) until this call should return."""
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
        left_vmis = sorted("{0}/{1}".format(*kv.ref(v)) for v in ws.objects("vmis")
                           if (v.get("status") or {}).get("nodeName") == self.node and (v.get("status") or {}).get("phase") not in plan.FINAL_VMI_PHASES)
        return {"finished": finished, "left_vmis": left_vmis, "pods": ws.objects("pods"), "watch": dict(ws.stats, errors=ws.errors[-10:])}


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
    node = api.node(name)
    if node is None:
        raise InvalidOption("node {0!r} not found".format(name), "Give a node that kubectl get nodes lists.", path="node")
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    if cordoned:
        node = api.set_unschedulable(name, False, dry_run=check_mode)
    return {"changed": cordoned, "node": name, "state": "uncordon", "was_cordoned": cordoned,
            "cordoned": cordoned and check_mode, "ready": kv.condition_true(node, "Ready"),
            "diff": {"before": {"unschedulable": cordoned}, "after": {"unschedulable": bool((node.get("spec") or {}).get("unschedulable"))}}}


def check_safe(client: Client, api: NodeApi, name: str) -> dict:
    node = api.node(name)
    if node is None:
        raise InvalidOption("node {0!r} not found".format(name), "Give a node that kubectl get nodes lists.", path="node")
    vmis = client.list_kind("VirtualMachineInstance", "kubevirt.io") or []
    left = sorted("{0}/{1}".format(*kv.ref(v)) for v in vmis
                  if (v.get("status") or {}).get("nodeName") == name and (v.get("status") or {}).get("phase") not in plan.FINAL_VMI_PHASES)
    return {"changed": False, "node": name, "state": "safe_to_shutdown", "cordoned": bool((node.get("spec") or {}).get("unschedulable")),
            "safe_to_shutdown": safe_to_shutdown(name, left, api.pods_on(name))}


def drained(client: Client, api: NodeApi, options: KubevirtNodeDrainOptions, check_mode: bool, clock: Callable[[], float]) -> dict:
    """Preflight, cordon and drain; with `progress_every`, in calls that each return when a VM finished or a status line
    is due (`progress`), the later calls going on from the first one's preflight and the items' states (`resume`)."""
    node = options.node
    progress = Progress(options.progress_every, options.resume if not check_mode else None, clock=clock)
    progress.require_state("preflight", "was_cordoned", "drain")
    if progress.resumed:
        pre, was_cordoned = progress.state["preflight"], progress.state["was_cordoned"]
        drain = Drain.restore(client, api, node, pre, clock, progress.state["drain"])
        client.retried[:0] = progress.state.get("retried") or []  # the retries of the calls before count in the result
    else:
        pre = read_preflight(client, api, options)
        was_cordoned = bool(pre["node"].get("cordoned"))
        drain = None
    result: Dict[str, Any] = {"node": node, "state": "drained", "was_cordoned": was_cordoned, "preflight": public_preflight(pre),
                              "concurrency": pre["concurrency"]}
    if drain is None:
        work = [vm for vm in pre["vms"] if vm["action"] not in ("blocked", "not_running")] + pre["pods"]["other"]
        if pre["problems"]:
            result.update(changed=False, failed=True, drained=False, cordoned=was_cordoned, vms=vm_results(pre, None), summary={},
                          msg="Preflight refused to drain {0}, nothing was changed: {1}".format(node, " | ".join(p["message"] for p in pre["problems"])))
            return result
        if check_mode:
            # the cordon a run would send goes to the server as a dry run (validation and admission answer); no eviction is sent
            after = True
            if not was_cordoned:
                after = bool((api.set_unschedulable(node, True, dry_run=True).get("spec") or {}).get("unschedulable"))
            result.update(changed=not was_cordoned or bool(work), drained=False, cordoned=was_cordoned, vms=vm_results(pre, None),
                          summary={}, diff={"before": {"unschedulable": was_cordoned}, "after": {"unschedulable": after}})
            return result
        if not was_cordoned:
            api.set_unschedulable(node, True)
        drain = Drain(client, api, node, pre, clock)
    if drain.items:
        outcome = drain.run(progress.call_deadline(options.timeout), progress)
    else:
        outcome = {"finished": True, "left_vmis": [], "pods": pre.get("raw_pods") or [], "watch": {}}
    if not outcome["finished"] and progress.every > 0 and not progress.out_of_time(options.timeout):
        state = {"preflight": public_preflight(pre), "was_cordoned": was_cordoned, "drain": drain.snapshot(), "retried": client.retried}
        return {"changed": True, "node": node, "state": "drained", "cordoned": True,
                "progress": progress.unfinished(drain.awaiting_line(progress.elapsed(), options.timeout), state)}
    results = vm_results(pre, drain)
    pods = [{"namespace": i["namespace"], "name": i["name"], "result": (i["result"] or {}).get("result") or ("timeout" if i["state"] != "done" else None),
             "reason": (i["result"] or {}).get("reason") or (timeout_reason(i, "terminating") if i["state"] != "done" else None)}
            for i in drain.items if i["kind"] == "pod"]
    ok_results = ("migrated", "restarted", "replaced", "deleted", "moved", "not_running", "blocked")
    bad = [r for r in results if r["result"] not in ok_results] + [p for p in pods if p["result"] != "evicted"]
    moved = ["{0}/{1}".format(r["namespace"], r["name"]) for r in results if r["result"] in ("migrated", "restarted", "replaced", "moved")]
    left = outcome["left_vmis"]
    blocked = {"{0}/{1}".format(r["namespace"], r["name"]) for r in results if r["result"] == "blocked"}
    result.update(
        changed=not was_cordoned or bool(drain.items), cordoned=True, vms=results, pods=pods, summary=summarize(results),
        moved=moved, left=left, migrated=["{0}/{1}".format(r["namespace"], r["name"]) for r in results if r["result"] == "migrated"],
        drained=not bad and all(v in blocked for v in left),
        safe_to_shutdown=safe_to_shutdown(node, left, outcome["pods"]), peak_in_flight=drain.peak_in_flight,
        evictions=api.evictions, watch=outcome["watch"], waited_seconds=round(progress.elapsed(), 3), timed_out=not outcome["finished"],
        api={"retries": len(client.retried), "retried": client.retried[-20:]}, progress=progress.done())
    if bad:
        result["failed"] = True
        result["resume"] = ("Node {0} stays cordoned. Run the task again to continue: it reads the cluster again, waits for VMs KubeVirt is "
                            "still evacuating (and retrying after a failed migration) and evicts what is left. Uncordon with state: uncordon "
                            "to give up.".format(node))
        result["msg"] = "Drain of {0} did not finish: {1}. Moved: {2}; still on the node: {3}. {4}".format(
            node, "; ".join("{0}/{1} {2}{3}".format(r["namespace"], r["name"], r["result"], ": " + r["reason"] if r.get("reason") else "") for r in bad),
            ", ".join(moved) or "none", ", ".join(left) or "no VMI", result["resume"])
    return result
