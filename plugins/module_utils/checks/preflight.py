# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prerequisites of the rebalance procedure, checked against the result of `kubevirt_eviction_facts`: a pure function
from facts to {passed, problems, warnings, summary}, used by the `descheduler_preflight` role through the
`kubevirt_ops.rebalance.descheduler_preflight` filter.

Every missing prerequisite is collected (never only the first); each problem names the object, the observed
value and the procedure's fix, so one failed run tells a person everything to repair."""

from __future__ import annotations

from typing import Any, List, Optional, Set, Tuple

MIGRATING = ("LiveMigrate", "LiveMigrateIfPossible")
GATE = "EvictionsInBackground"
MIN_VERBOSITY = 3
NO_HAND_EDIT = "Do not hand-edit the generated CronJob or Deployment: the chart reconciles it."
# Findings shown as warnings besides those of severity warning: they matter before moving VMs.
INFO_WARNINGS = ("descheduler_suspended", "descheduler_dry_run", "migration_unfinished")


def _problem(code: str, kind: str, namespace: Optional[str], name: Optional[str], observed: Any, message: str, fix: str) -> dict:
    where = "{0} {1}".format(kind, "{0}/{1}".format(namespace, name) if namespace else name or "")
    return {"code": code, "kind": kind, "namespace": namespace, "name": name, "observed": observed, "message": message, "fix": fix,
            "text": "{0}: {1} (observed: {2}). Fix: {3}".format(where.strip(), message, _show(observed), fix)}


def _show(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]" if value else "none"
    return str(value)


# ------------------------------------------------------------------------------------------ Descheduler
def descheduler_problems(desched: dict) -> List[dict]:
    """Descheduler found, the EvictionsInBackground gate rendered, --v=3 or higher."""
    namespace = desched.get("namespace")
    if not desched.get("found"):
        return [_problem("descheduler_not_found", "Namespace", None, namespace, "no CronJob or Deployment of the Descheduler",
                         "the Descheduler plugin was not found",
                         "Install Alauda Container Platform Descheduler from Administrator > Marketplace > Cluster Plugins, or point "
                         "descheduler_namespace / descheduler_name at the installation.")]
    kind, name, args = desched.get("kind"), desched.get("name"), desched.get("args") or []
    problems = []
    if not desched.get("evictions_in_background"):
        gate = (desched.get("feature_gates") or {}).get(GATE)
        observed = "{0}={1}".format(GATE, str(gate).lower()) if gate is not None else args
        problems.append(_problem(
            "feature_gate_missing", kind, namespace, name, observed,
            "--feature-gates={0}=true is not rendered: KubeVirt's 429 counts as a failed eviction and the same launcher is "
            "nominated again every cycle".format(GATE),
            "The installed package predates the change: upgrade the Alauda Container Platform Descheduler plugin (a package "
            "newer than v0.36.0-4). " + NO_HAND_EDIT))
    verbosity = desched.get("verbosity")
    if verbosity is None or verbosity < MIN_VERBOSITY:
        problems.append(_problem(
            "verbosity_below_3", kind, namespace, name, "--v={0}".format(verbosity) if verbosity is not None else "no --v",
            "--v=3 or higher is required to see the 'Eviction in background ...' log lines the validation reads",
            "Upgrade the plugin to a package that renders --v=3. " + NO_HAND_EDIT))
    return problems


# ------------------------------------------------------------------------------------------ KubeVirt
def cluster_problems(cluster: dict) -> List[dict]:
    """The cluster default eviction strategy (KubeVirt CR) is a migrating one."""
    kubevirt = cluster.get("kubevirt") or {}
    if not kubevirt.get("served", True):
        return [_problem("kubevirt_not_served", "Cluster", None, None, "kubevirt.io not served", "KubeVirt is not installed on this cluster",
                         "Run the rebalance on the workload cluster that runs the VMs (check context / kubeconfig).")]
    if not kubevirt.get("found", True):
        return [_problem("kubevirt_cr_missing", "KubeVirt", None, None, "no KubeVirt resource", "KubeVirt has no KubeVirt resource",
                         "Install KubeVirt (HyperConverged) on this cluster; without it the cluster default strategy is None.")]
    strategy = cluster.get("eviction_strategy")
    if strategy in MIGRATING:
        return []
    hco = cluster.get("hyperconverged") or {}
    if hco.get("found"):
        fix = ("Set spec.evictionStrategy: LiveMigrateIfPossible on HyperConverged {0}/{1} (the HCO example shipped with ACP does; an "
               "empty spec defaults to None). HCO renders it into the KubeVirt resource; direct edits of the KubeVirt resource are "
               "reconciled away. Existing VMIs keep their recorded strategy until the VM is restarted.").format(hco.get("namespace"), hco.get("name"))
    else:
        fix = ("Set spec.configuration.evictionStrategy: LiveMigrateIfPossible on the KubeVirt resource. Existing VMIs keep their recorded "
               "strategy until the VM is restarted.")
    return [_problem("cluster_strategy_not_migrating", "KubeVirt", kubevirt.get("namespace"), kubevirt.get("name"),
                     "spec.configuration.evictionStrategy={0}".format(strategy if strategy else "unset (None)"),
                     "the cluster default eviction strategy is not LiveMigrate or LiveMigrateIfPossible", fix)]


def _strategy_fix(vmi: dict) -> str:
    cluster = vmi.get("cluster_strategy")
    if vmi.get("owner_kind") != "VirtualMachine":
        return ("Recreate the VMI with spec.evictionStrategy LiveMigrate or LiveMigrateIfPossible (it is fixed when the VMI is created).")
    if vmi.get("vm_strategy") and vmi["vm_strategy"] not in MIGRATING:
        return ("Set spec.template.spec.evictionStrategy of VM {0} to LiveMigrate or LiveMigrateIfPossible (or remove it to inherit the "
                "cluster default), then restart the VM.").format(vmi.get("vm_name"))
    if cluster in MIGRATING:
        return ("The VMI recorded its strategy when it was created; restart VM {0} so that it picks up the cluster default {1}."
                ).format(vmi.get("vm_name"), cluster)
    return "Make the cluster default migrating (see the KubeVirt problem), then restart VM {0}.".format(vmi.get("vm_name"))


def vmi_problems(vmi: dict) -> List[dict]:
    """Effective strategy migrating, LiveMigratable=True, every PVC ReadWriteMany."""
    namespace, name = vmi.get("namespace"), vmi.get("name")
    problems = []
    strategy = vmi.get("effective_strategy")
    if strategy not in MIGRATING:
        problems.append(_problem(
            "vmi_strategy_not_migrating", "VirtualMachineInstance", namespace, name,
            "effective {0} (spec.evictionStrategy {1}, cluster default {2})".format(
                strategy, _show(vmi.get("recorded_strategy")), _show(vmi.get("cluster_strategy"))),
            "the VMI's effective eviction strategy is not LiveMigrate or LiveMigrateIfPossible, so an eviction does not live-migrate it",
            _strategy_fix(vmi)))
    if vmi.get("live_migratable") is not True:
        reason = vmi.get("live_migratable_reason")
        message = vmi.get("live_migratable_message")
        problems.append(_problem(
            "vmi_not_live_migratable", "VirtualMachineInstance", namespace, name,
            "LiveMigratable={0}{1}".format("False" if vmi.get("live_migratable") is False else "unknown",
                                           " ({0}: {1})".format(reason, message) if reason or message else ""),
            "the VMI does not report LiveMigratable=True",
            "Use shared storage usable from the target node (for example RWX block storage) and remove what the condition's message "
            "names; wait for LiveMigratable=True before rebalancing."))
    for pvc in vmi.get("pvcs") or []:
        if pvc.get("read_write_many"):
            continue
        observed = "accessModes {0}".format(_show(pvc.get("access_modes"))) if pvc.get("found") else "PVC not found"
        problems.append(_problem(
            "vmi_storage_not_shared", "PersistentVolumeClaim", namespace, pvc.get("name"), observed,
            "disk of VMI {0} is not on shared (ReadWriteMany) storage".format(name),
            "Put the VM's disks on shared storage usable from the target node, for example a ReadWriteMany block volume."))
    return problems


# ------------------------------------------------------------------------------------------ scope
def _why_not_counted(node: dict) -> List[str]:
    reasons = []
    if node.get("control_plane"):
        reasons.append("control-plane")
    if not node.get("ready"):
        reasons.append("not Ready")
    if node.get("cordoned"):
        reasons.append("cordoned")
    if not node.get("kubevirt_schedulable"):
        reasons.append("no kubevirt.io/schedulable=true")
    return reasons


def nodes_in_scope(facts_nodes: List[dict], names: Optional[List[str]]) -> Tuple[List[dict], List[str]]:
    """The nodes in scope (the named ones, else every non-control-plane node) and the named ones that do not exist."""
    if names:
        by_name = {node.get("name"): node for node in facts_nodes}
        return [by_name[n] for n in names if n in by_name], [n for n in names if n not in by_name]
    return [node for node in facts_nodes if not node.get("control_plane")], []


def worker_problems(scope: List[dict], missing: List[str], min_workers: int) -> List[dict]:
    problems = [_problem("node_not_found", "Node", None, name, "not found", "the node named in scope does not exist",
                         "Correct the node names (kubectl get nodes).") for name in missing]
    counted = [node["name"] for node in scope if not _why_not_counted(node)]
    if len(counted) < min_workers:
        observed = ["{0} ({1})".format(node.get("name"), ", ".join(_why_not_counted(node)) or "counted") for node in scope]
        problems.append(_problem(
            "too_few_workers", "Nodes", None, "in scope", observed,
            "{0} schedulable KubeVirt worker(s) in scope, at least {1} needed".format(len(counted), min_workers),
            "LowNodeUtilization needs a source and a target node: uncordon or add schedulable workers with kubevirt.io/schedulable=true "
            "to the scope (nodes), and keep control-plane nodes out."))
    return problems


# ------------------------------------------------------------------------------------------ assembly
def _warnings(findings: List[dict], covered: Set[Tuple[str, Optional[str], Optional[str]]]) -> List[dict]:
    result = []
    for item in findings:
        if item.get("severity") != "warning" and item.get("code") not in INFO_WARNINGS:
            continue
        if (item.get("code"), item.get("namespace"), item.get("name")) in covered:
            continue
        result.append({key: item.get(key) for key in ("code", "severity", "kind", "namespace", "name", "message")})
    return result


def _covered(problems: List[dict], vmis: List[dict]) -> Set[Tuple[str, Optional[str], Optional[str]]]:
    """Findings that say again what a problem already says."""
    covered: Set[Tuple[str, Optional[str], Optional[str]]] = set()
    for problem in problems:
        covered.add((problem["code"], problem["namespace"], problem["name"]))
        if problem["code"] == "vmi_not_live_migratable":
            covered.add(("not_migratable_with_migrating_strategy", problem["namespace"], problem["name"]))
    for vmi in vmis:
        if vmi.get("effective_strategy") not in MIGRATING:
            covered.add(("strategy_differs_from_cluster", vmi.get("namespace"), vmi.get("name")))
    return covered


def summary(facts: dict, scope: List[dict], vmis: List[dict]) -> dict:
    desched = facts.get("descheduler") or {}
    return {
        "nodes": [{"name": node.get("name"), "usage_percent": node.get("usage_percent"), "schedulable": node.get("schedulable"),
                   "kubevirt_schedulable": node.get("kubevirt_schedulable"), "vmis": node.get("vmis"),
                   "counted": not _why_not_counted(node)} for node in scope],
        "vms": [{"name": vmi.get("name"), "namespace": vmi.get("namespace"), "node": vmi.get("node"), "uid": vmi.get("uid"),
                 "strategy": vmi.get("effective_strategy"), "live_migratable": vmi.get("live_migratable"), "verdict": vmi.get("verdict")}
                for vmi in vmis],
        "cluster_eviction_strategy": (facts.get("cluster") or {}).get("eviction_strategy"),
        "descheduler": {key: desched.get(key) for key in ("found", "kind", "namespace", "name", "args", "evictions_in_background", "verbosity",
                                                          "suspended", "schedule")},
        "workers": sum(1 for node in scope if not _why_not_counted(node)),
    }


def preflight(facts: dict, nodes: Optional[List[str]] = None, min_workers: int = 2, require_vms: bool = True,
              namespace: Optional[str] = None, label_selector: Optional[str] = None) -> dict:
    """{passed, problems, warnings, summary} for the result of kubevirt_eviction_facts (all four sections)."""
    vmis = list(facts.get("vmis") or [])
    problems: List[dict] = []
    problems.extend(descheduler_problems(facts.get("descheduler") or {}))
    problems.extend(cluster_problems(facts.get("cluster") or {}))
    for vmi in vmis:
        problems.extend(vmi_problems(vmi))
    scope, missing = nodes_in_scope(list(facts.get("nodes") or []), nodes)
    problems.extend(worker_problems(scope, missing, min_workers))
    if require_vms and not vmis:
        where = "namespace {0}".format(namespace) if namespace else "all namespaces"
        problems.append(_problem(
            "no_vms_in_scope", "VirtualMachineInstances", namespace, None,
            "0 VMIs ({0}, label selector {1})".format(where, label_selector or "none"), "no VM in scope to rebalance",
            "Create the test VMs with the scoping label and wait for LiveMigratable=True, or correct namespace and label_selector "
            "(require_vms: false checks only the cluster)."))
    return {"passed": not problems, "problems": problems, "warnings": _warnings(list(facts.get("findings") or []), _covered(problems, vmis)),
            "summary": summary(facts, scope, vmis)}


def problem_lines(problems: List[dict]) -> List[str]:
    return ["{0}. {1}".format(index, problem["text"]) for index, problem in enumerate(problems, 1)]
