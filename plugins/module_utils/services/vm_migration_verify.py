# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vm_migration_verify`: record a baseline, or wait (list + watch) until the migrations of the baseline VMs are
decided by the five pass criteria (the rebalance procedure, Validate Rebalancing, step 5), with the trigger, the
descheduler log lines and the evidence files. Both modes only read, so check mode returns the same result."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import DeschedulerInstallation
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import klog
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import migration as mc
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, KindNotServed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label, parse_label_selector
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import PROGRESS_SPEC, Progress, check_every, named, seconds

ARG_SPEC = {
    "mode": {"type": "str", "choices": ["record", "verify"], "default": "verify"},
    "names": {"type": "list", "elements": "str"},
    "namespace": {"type": "str"},
    "label_selector": {"type": "str"},
    "baseline": {"type": "raw"},
    "timeout": {"type": "int", "default": 600},
    "require_trigger": {"type": "str", "choices": ["descheduler", "drain", "any"], "default": "any"},
    "min_moved": {"type": "int", "default": 1},
    "evidence_path": {"type": "path"},
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "run_log_lines": {"type": "list", "elements": "str", "default": []},
    **PROGRESS_SPEC,
}
# the argument spec's checks, as AnsibleModule takes them (the module and tests/integration/module_call.py pass these)
SPEC_CHECKS = {"required_if": [["mode", "verify", ["baseline"]]]}


# ------------------------------------------------------------------------------------------ options
@dataclasses.dataclass(frozen=True)
class VmMigrationVerifyOptions(ModuleOptions):
    """The options of vm_migration_verify, as ARG_SPEC parses them."""
    mode: str
    names: Optional[List[str]]
    namespace: Optional[str]
    label_selector: Optional[str]
    baseline: Any
    timeout: int
    require_trigger: str
    min_moved: int
    evidence_path: Optional[str]
    descheduler_namespace: str
    descheduler_name: str
    run_log_lines: List[str]
    progress_every: int
    resume: Optional[dict]


@dataclasses.dataclass(frozen=True)
class Selection:
    """The VMs in question: namespace, label selector, names as (namespace, name), and (mode=verify) the baseline keyed
    `namespace/name` (`checks.migration.normalize_baseline`)."""
    namespace: Optional[str]
    label_selector: Optional[str]
    names: List[Tuple[str, str]]
    baseline: Dict[str, dict]


def _split(name: str, namespace: Optional[str]) -> tuple:
    if "/" in name:
        ns, short = name.split("/", 1)
        return ns, short
    return namespace, name


def selection(options: VmMigrationVerifyOptions) -> Selection:
    """The options checked, in the order a person reads them, and what the mode works on: the VMs to record, or the
    baseline to verify."""
    namespace = options.namespace
    if namespace and not is_dns_label(namespace):
        raise InvalidOption("{0!r} is not a valid namespace name".format(namespace), "Use the namespace of the VMs.", path="namespace")
    try:
        parse_label_selector(options.label_selector)
    except ValueError as error:
        raise InvalidOption(str(error), "Write a Kubernetes label selector such as 'app=desched-test'.", path="label_selector") from error
    names = []
    for index, name in enumerate(options.names or []):
        ns, short = _split(name, namespace)
        if not ns:
            raise InvalidOption("{0!r} has no namespace".format(name), "Give namespace, or write the name as namespace/name.",
                                path="names[{0}]".format(index))
        names.append((ns, short))
    check_every(options.progress_every)
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long to wait for the migrations, e.g. 600.", path="timeout")
    if options.min_moved < 0:
        raise InvalidOption("must be 0 or more", "Give how many of the VMs must move (the bounded policy of the rebalance procedure, "
                            "Configure a Bounded VM Rebalance Policy, moves one per cycle).", path="min_moved")
    baseline: Dict[str, dict] = {}
    if options.mode == "record":
        if not names and not options.label_selector and not namespace:
            raise InvalidOption("record needs the VMs", "Give names, or namespace and label_selector.", path="names")
    else:
        if not options.baseline:
            raise InvalidOption("verify needs the baseline", "Pass the baseline returned by mode=record, or the output of kubevirt_eviction_facts.",
                                path="baseline")
        baseline = mc.normalize_baseline(options.baseline)
        if not baseline:
            raise InvalidOption("no VM with namespace, name and node in it", "Pass the baseline returned by mode=record.", path="baseline")
    return Selection(namespace=namespace, label_selector=options.label_selector or None, names=names, baseline=baseline)


# ------------------------------------------------------------------------------------------ record
def _vmi_resource(client: Client) -> Any:
    return client.require_kind("VirtualMachineInstance", "kubevirt.io", fix="Install KubeVirt on this cluster: there is nothing to verify.")


def current_vmis(client: Client, selected: Selection) -> List[dict]:
    namespaces = sorted({pair[0] for pair in selected.names}) or [selected.namespace]
    resource = _vmi_resource(client)
    vmis: List[dict] = []
    for namespace in namespaces:
        vmis.extend(client.list(resource, namespace=namespace, label_selector=selected.label_selector))
    if selected.names:
        vmis = [v for v in vmis if kv.ref(v) in selected.names]
    return vmis


def record(selected: Selection, client: Client) -> dict:
    """The baseline of the selected VMIs: {name: {namespace, name, uid, node, launcher}}."""
    vmis = current_vmis(client, selected)
    pods = []
    for namespace in sorted({kv.ref(v)[0] for v in vmis}):
        pods.extend(client.list(client.require_kind("Pod", ""), namespace=namespace, label_selector=kv.LAUNCHER_SELECTOR))
    index = kv.index_launchers(pods)
    baseline: Dict[str, dict] = {}
    recorded_at = utc_now()
    clash = len({kv.ref(v)[1] for v in vmis}) < len(vmis)
    for vmi in vmis:
        launcher = kv.find_launcher(vmi, index.get(kv.meta(vmi).get("uid"), []))
        entry = mc.baseline_entry(vmi, kv.meta(launcher).get("name") if launcher else None, recorded_at)
        baseline["{0}/{1}".format(*kv.ref(vmi)) if clash else entry["name"]] = entry
    missing = [n for n in selected.names if n not in {kv.ref(v) for v in vmis}]
    return {"changed": False, "mode": "record", "baseline": baseline, "recorded_at": recorded_at,
            "missing": ["{0}/{1}".format(*n) for n in missing]}


# ------------------------------------------------------------------------------------------ descheduler log
class DeschedulerLog:
    """The log of the descheduler's Pods (a CronJob's last Jobs, or the Deployment's), parsed; read again only when
    asked for something new. The log is evidence, not a verdict: a read that fails is reported in `error`."""

    def __init__(self, installation: DeschedulerInstallation, given: Optional[List[dict]] = None) -> None:
        self.installation = installation
        self.namespace = installation.namespace
        # lines the caller read already (a run's own log): kept when the run's Job and Pods are gone (history limits)
        self.given: List[dict] = given or []
        self.records: List[dict] = list(self.given)
        self.reads = 0
        self.pods: List[str] = []
        self.error: Optional[str] = None

    def read(self) -> List[dict]:
        self.reads += 1
        try:
            self.records = self.given + self._read()
            self.error = None
        except Exception as error:  # pylint: disable=broad-exception-caught  # the log is evidence, not a verdict: report and go on
            self.error = str(error)
        return self.records

    def _read(self) -> List[dict]:
        kind, workload = self.installation.workload()
        if workload is None:
            return []
        container = desched.container_name(kind, workload)
        records: List[dict] = []
        self.pods = []
        for pod in self.installation.pods(kind, workload):
            if (pod.get("status") or {}).get("phase") == "Pending":
                continue
            records.extend(self.installation.log(pod, container))
            self.pods.append(kv.meta(pod).get("name"))
        return records


# ------------------------------------------------------------------------------------------ drain evidence
class DrainEvidence:
    """What the evacuated nodes show of a drain (checks.migration.drain_evidence), read once per node when an evacuation
    finished without evidence of the descheduler, and kept: a node seen cordoned stays evidence after an uncordon. A
    Node that cannot be read (RBAC without get on nodes) is no evidence; the error is reported."""

    def __init__(self, client: Client, seen: Optional[Dict[str, str]] = None) -> None:
        self.client = client
        self.seen: Dict[str, str] = dict(seen or {})
        self.read_nodes: set = set(self.seen)
        self.errors: List[str] = []

    def read(self, nodes: set) -> bool:
        """Read the nodes not read yet; whether anything was read."""
        new = sorted(n for n in nodes if n and n not in self.read_nodes)
        for name in new:
            self.read_nodes.add(name)
            try:
                found = mc.drain_evidence(self.client.get(self.client.require_kind("Node", ""), name))
            except ApiFailure as error:  # evidence, not a verdict: no evidence, and say why
                self.errors.append("node {0}: {1}".format(name, error))
                continue
            if found:
                self.seen[name] = found
        return bool(new)


# ------------------------------------------------------------------------------------------ verify
def _streams(client: Client, namespaces: List[str]) -> List[Stream]:
    found = client.find_kinds([("VirtualMachineInstance", "kubevirt.io"), ("VirtualMachineInstanceMigration", "kubevirt.io"),
                               ("VirtualMachine", "kubevirt.io"), ("Pod", "")])
    for kind in ("VirtualMachineInstance", "VirtualMachineInstanceMigration"):
        if found[(kind, "kubevirt.io")] is None:
            raise KindNotServed(kind, "kubevirt.io", fix="Install KubeVirt on this cluster: there is nothing to verify.")
    streams = []
    for namespace in namespaces:
        streams.append(Stream("vmis/" + namespace, found[("VirtualMachineInstance", "kubevirt.io")], namespace))
        streams.append(Stream("vmims/" + namespace, found[("VirtualMachineInstanceMigration", "kubevirt.io")], namespace))
        streams.append(Stream("pods/" + namespace, found[("Pod", "")], namespace, kv.LAUNCHER_SELECTOR))
        if found[("VirtualMachine", "kubevirt.io")] is not None:
            streams.append(Stream("vms/" + namespace, found[("VirtualMachine", "kubevirt.io")], namespace))
    return streams


def select_entries(selected: Selection, client: Client) -> List[dict]:
    entries = list(selected.baseline.values())
    if selected.names:
        known = {(e["namespace"], e["name"]): e for e in entries}
        missing = [n for n in selected.names if n not in known]
        if missing:
            raise InvalidOption("{0} not in the baseline".format(", ".join("{0}/{1}".format(*n) for n in missing)),
                                "Record the baseline of every VM to verify (mode=record, or kubevirt_eviction_facts) before the change.",
                                path="names")
        entries = [known[n] for n in selected.names]
    elif selected.namespace:
        entries = [e for e in entries if e["namespace"] == selected.namespace]
    if selected.label_selector and not selected.names:
        chosen = {kv.ref(v) for v in current_vmis(client, selected)}
        entries = [e for e in entries if (e["namespace"], e["name"]) in chosen]
    for entry in entries:
        if not entry.get("node"):
            raise InvalidOption("{0}/{1} has no node in the baseline".format(entry["namespace"], entry["name"]),
                                "Record the baseline while the VM runs.", path="baseline")
    return entries


def decided_line(result: dict, decided: int, total: int) -> str:
    """`vms/vm-1 passed the five checks: worker-a -> worker-b in 8 s`: a decided VM as a person reads it."""
    what = "{0}/{1}".format(result["namespace"], result["name"])
    if result["verdict"] == mc.PASS:
        migration = result["migration"] or {}
        took = "in {0} ".format(seconds(migration["duration_seconds"])) if migration.get("duration_seconds") else ""
        line = "{0} passed the checks: {1} -> {2} {3}(migration {4})".format(what, result["source_node"], result["node"], took, migration.get("name"))
    else:
        line = "{0} FAILED: {1}".format(what, result["reason"])
    return "{0} ({1} of {2} decided)".format(line, decided, total)


def awaiting_line(results: List[dict], elapsed: float, timeout: int) -> str:
    open_vms = [r for r in results if r["verdict"] == mc.OPEN]
    return "verify: {0:.0f} of {1} s; awaiting {2} of {3} VMs: {4}".format(elapsed, timeout, len(open_vms), len(results), named(
        ["{0}/{1} ({2})".format(r["namespace"], r["name"], "migration " + (r["migration"]["phase"] or "created") if r["migration"]
                                else "moving" if r["moving"] else "not moved") for r in open_vms]))


def verify(options: VmMigrationVerifyOptions, selected: Selection, client: Client, clock: Callable[[], float] = time.monotonic) -> dict:
    """Wait until the baseline VMs are decided (or the timeout); the verdicts, the counts and the evidence. With
    `progress_every`, in calls that each return when a VM is decided or a status line is due (module_utils/progress)."""
    progress = Progress(options.progress_every, options.resume, clock=clock)
    progress.require_state("saw_source", "reported")
    baseline = selected.baseline
    entries = select_entries(selected, client)
    if not entries:
        raise InvalidOption("no baseline VM matches names, namespace and label_selector", "Check the selection against the baseline.", path="names")
    require = options.require_trigger
    min_moved = min(options.min_moved, len(entries))
    timeout = options.timeout
    namespaces = sorted({e["namespace"] for e in entries})
    saw_source: Dict[tuple, bool] = {tuple(key): True for key in progress.state.get("saw_source") or []}
    drains = DrainEvidence(client, progress.state.get("drain_seen"))
    reported = set(progress.state.get("reported") or [])
    client.retried[:0] = progress.state.get("retried") or []  # the retries of the calls before count in the result
    keys = {(e["namespace"], e["name"]) for e in entries}

    def observe(stream: str, _event: str, obj: dict) -> None:
        if stream.startswith("vmis/") and kv.ref(obj) in keys and mc.descheduler_source(obj):
            saw_source[kv.ref(obj)] = True

    log = DeschedulerLog(DeschedulerInstallation(client, options.descheduler_namespace, options.descheduler_name),
                         klog.parse_lines(options.run_log_lines, reference=datetime.datetime.now(datetime.timezone.utc)))
    asked_log_for: set = set()
    watchset = WatchSet(client, _streams(client, namespaces), progress.call_deadline(timeout), clock=clock, observe=observe)
    state: Dict[str, Any] = {"results": [], "decided_at": None}

    def evaluate_all(ws: WatchSet) -> List[dict]:
        results = []
        for entry in entries:
            ns, name = entry["namespace"], entry["name"]
            results.append(mc.evaluate(entry, ws.cache["vmis/" + ns].get((ns, name)), ws.cache.get("vms/" + ns, {}).get((ns, name)),
                                       ws.objects("vmims/" + ns), ws.objects("pods/" + ns), saw_source.get((ns, name), False),
                                       log.records, require, log_read=log.error is None, drain_seen=drains.seen))
        return results

    def unproven_sources(results: List[dict]) -> set:
        """The source nodes of finished evacuations that no evidence ties to the descheduler yet."""
        return {r["migration"]["source_node"] or r["source_node"] for r in results if r["migration"] and r["migration"]["evacuation"]
                and r["migration"]["phase"] in kv.FINISHED_MIGRATION_PHASES and r["trigger"] not in ("descheduler", "drain")}

    def needs_log(results: List[dict]) -> bool:
        """A finished evacuation whose trigger is still unproven: read the log (once per migration, and again while
        the last read failed: an API outage must not turn into a verdict)."""
        wanted = {r["migration"]["name"] for r in results if r["migration"] and r["migration"]["evacuation"]
                  and r["migration"]["phase"] in kv.FINISHED_MIGRATION_PHASES and r["trigger"] != "descheduler"}
        new = wanted - asked_log_for
        asked_log_for.update(new)
        return require != "any" and (bool(new) or (bool(wanted) and log.error is not None))

    def done(ws: WatchSet) -> bool:
        results = evaluate_all(ws)
        if needs_log(results):
            log.read()
            results = evaluate_all(ws)
        if drains.read(unproven_sources(results)):
            results = evaluate_all(ws)
        state["results"] = results
        for result in results:
            key = "{0}/{1}".format(result["namespace"], result["name"])
            if result["verdict"] != mc.OPEN and key not in reported:
                reported.add(key)
                progress.finished(decided_line(result, len(reported), len(results)))
        return mc.decided(results, min_moved) or progress.call_over()

    watchset.start()
    try:
        watchset.wait(done)
    finally:
        watchset.stop()
    results = state["results"] or evaluate_all(watchset)
    finished = mc.decided(results, min_moved)
    if not finished and progress.every > 0 and not progress.out_of_time(timeout):
        carried = {"saw_source": sorted(list(k) for k in saw_source), "reported": sorted(reported), "retried": client.retried,
                   "drain_seen": drains.seen}
        return {"changed": False, "mode": "verify", "progress": progress.unfinished(awaiting_line(results, progress.elapsed(), timeout), carried)}
    decided_after = progress.elapsed()
    if any(r["migration"] and r["migration"]["evacuation"] for r in results) and not log.reads:
        log.read()
        results = evaluate_all(watchset)
    elif log.reads and any(r["migration"] and r["migration"]["evacuation"] and not r["descheduler_log"] for r in results):
        log.read()
        results = evaluate_all(watchset)
    if drains.read(unproven_sources(results)):
        results = evaluate_all(watchset)
    overall = mc.finish(results, min_moved, timed_out=not finished)
    for result in results:
        result["baseline"] = baseline["{0}/{1}".format(result["namespace"], result["name"])] if "{0}/{1}".format(
            result["namespace"], result["name"]) in baseline else None
    output = {
        "changed": False, "mode": "verify", "passed": overall["passed"], "failed_vms": overall["failed_vms"], "counts": overall["counts"],
        "vms": results, "timed_out": not finished, "timeout": timeout, "require_trigger": require,
        "waited_seconds": round(decided_after, 3), "verified_at": utc_now(),
        "descheduler_log": {"namespace": log.namespace, "pods": log.pods, "reads": log.reads, "error": log.error},
        "drain_evidence": {"nodes": drains.seen, "errors": drains.errors},
        "watch": dict(watchset.stats, errors=watchset.errors[-20:]),
        "api": {"retries": len(client.retried), "retried": client.retried[-20:]}, "progress": progress.done(),
    }
    for result in results:
        result.pop("baseline", None)
    if options.evidence_path:
        output["evidence"] = write_evidence(options.evidence_path, output)
    return output


def run(options: VmMigrationVerifyOptions, check_mode: bool, client: Optional[Client] = None,
        clock: Callable[[], float] = time.monotonic) -> dict:
    """The module's entry: the options checked before any request, then mode=record (the baseline) or mode=verify (the
    verdicts; the client's deadline covers the wait's timeout on top of api_timeout). Both read only, so check mode
    returns the same result."""
    selected = selection(options)
    if options.mode == "record":
        return record(selected, client or Client.from_options(options.connection))
    return verify(options, selected, client or Client.from_options(options.connection, extra_timeout=options.timeout), clock=clock)


# ------------------------------------------------------------------------------------------ evidence
def markdown(output: dict) -> str:
    lines = ["# VM migration verification: {0}".format("PASSED" if output["passed"] else "FAILED"), "",
             "Verified at {0}; waited {1}s (timeout {2}s); trigger required: {3}; moved {4} of {5} (at least {6}).".format(
                 output["verified_at"], output["waited_seconds"], output["timeout"], output["require_trigger"],
                 output["counts"]["moved"], output["counts"]["vms"], output["counts"]["min_moved"]), "",
             "| VM | verdict | source | target | migration | phase | duration (s) | trigger | UID unchanged | reason |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for vm in output["vms"]:
        migration = vm.get("migration") or {}
        cells = ["{0}/{1}".format(vm["namespace"], vm["name"]), vm["verdict"], vm["source_node"] or "", vm["node"] or "",
                 migration.get("name") or "", migration.get("phase") or "",
                 "" if migration.get("duration_seconds") is None else "{0:g}".format(migration["duration_seconds"]),
                 vm.get("trigger") or "", vm["checks"]["uid_unchanged"]["result"], (vm.get("reason") or "").replace("|", "\\|")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    unknown = ["- {0}/{1}: trigger unknown: {2}".format(vm["namespace"], vm["name"], vm.get("trigger_reason") or "no evidence left")
               for vm in output["vms"] if vm.get("trigger") == mc.UNKNOWN]
    if unknown:
        lines.extend(unknown + [""])
    return "\n".join(lines)


def write_evidence(path: str, output: dict) -> dict:
    """`path` as JSON (`.json` added when it has no extension) and the Markdown table next to it (`.md`)."""
    base, ext = os.path.splitext(path)
    json_path = path if ext else path + ".json"
    md_path = (base if ext else path) + ".md"
    folder = os.path.dirname(os.path.abspath(json_path))
    try:
        os.makedirs(folder, exist_ok=True)
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(output, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
        with open(md_path, "w", encoding="utf-8") as handle:
            handle.write(markdown(output))
    except OSError as error:
        raise InvalidOption("cannot write the evidence: {0}".format(error), "Give a path in a writable directory.", path="evidence_path") from error
    return {"json": json_path, "markdown": md_path}


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
