# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The eviction facts of a cluster, read in a constant number of list calls (one per kind and scope, paged; never
one call per VMI) and assembled into cluster, nodes, descheduler and per-VMI facts with verdicts and findings from
the pure derivations in `kube`. Shared by `kubevirt_eviction_facts` (the whole read) and `kubevirt_node_drain` (its
preflight).

Requests for a full read: GET /version, discovery (kubernetes.core's cache; when a kind is missing from it,
read again once, so each group version is read at most once a run, whatever is not served), and one paged
list each of nodes, Pods, VMIs, VMs, VMIMs, PDBs, PVCs, KubeVirt, HyperConverged, CronJobs, Deployments,
Jobs, ConfigMaps, ResourcePatches, and KubeDescheduler and ModuleInfo where served. With `namespaces`, the namespaced
VM lists are made once per namespace.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.findings import CODES, WARNING, finding
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import CONTROL_PLANE_LABELS
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES, amount, percent, pod_requests
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import Requirement, matches_selector_string

SECTIONS = ("cluster", "nodes", "descheduler", "vmis")
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
MODULE_INFO_SELECTOR = "cpaas.io/module-name=descheduler"


@dataclasses.dataclass(frozen=True)
class Scope:
    """What one read covers, checked and normalised: the sections in SECTIONS order, VMIs by namespace, label
    selector and name (empty: all), and the Descheduler's namespace and name (needed only by its section)."""
    include: Tuple[str, ...]
    namespaces: Tuple[str, ...] = ()
    label_selector: Optional[str] = None
    requirements: Tuple[Requirement, ...] = ()
    names: Tuple[str, ...] = ()
    descheduler_namespace: Optional[str] = None
    descheduler_name: Optional[str] = None


# (kind, group) looked up through discovery; group None = whatever group serves the kind
KINDS = {
    "nodes": ("Node", ""), "pods": ("Pod", ""), "pvcs": ("PersistentVolumeClaim", ""), "configmaps": ("ConfigMap", ""),
    "pdbs": ("PodDisruptionBudget", "policy"), "cronjobs": ("CronJob", "batch"), "jobs": ("Job", "batch"),
    "deployments": ("Deployment", "apps"), "kubevirts": ("KubeVirt", "kubevirt.io"),
    "vmis": ("VirtualMachineInstance", "kubevirt.io"), "vms": ("VirtualMachine", "kubevirt.io"),
    "vmims": ("VirtualMachineInstanceMigration", "kubevirt.io"), "hyperconvergeds": ("HyperConverged", None),
    "resourcepatches": ("ResourcePatch", None), "moduleinfos": ("ModuleInfo", None), "kubedeschedulers": ("KubeDescheduler", None),
}
SECTION_KINDS = {
    "cluster": ("kubevirts", "hyperconvergeds"),
    "nodes": ("nodes", "pods"),
    "vmis": ("pods", "pvcs", "pdbs", "kubevirts", "vmis", "vms", "vmims"),
    "descheduler": ("cronjobs", "jobs", "deployments", "configmaps", "resourcepatches", "moduleinfos", "kubedeschedulers"),
}


# ------------------------------------------------------------------------------------------ reading
class Reader:
    """The few list calls, each made at most once."""

    def __init__(self, client: Client, scope: Scope) -> None:
        self.client = client
        self.scope = scope
        wanted = sorted({key for section in scope.include for key in SECTION_KINDS[section]})
        found = client.find_kinds(KINDS[key] for key in wanted)
        self.resources = {key: found[KINDS[key]] for key in wanted}

    def served(self, key: str) -> bool:
        return self.resources.get(key) is not None

    def cluster_wide(self, key: str, **selectors: Any) -> Optional[List[dict]]:
        resource = self.resources.get(key)
        return None if resource is None else self.client.list(resource, **selectors)

    def scoped(self, key: str, **selectors: Any) -> Optional[List[dict]]:
        """All namespaces, or each namespace of the `namespaces` option (one list per namespace)."""
        resource = self.resources.get(key)
        if resource is None:
            return None
        if not self.scope.namespaces or not resource.namespaced:
            return self.client.list(resource, **selectors)
        items: List[dict] = []
        for namespace in self.scope.namespaces:
            items.extend(self.client.list(resource, namespace=namespace, **selectors))
        return items

    def in_namespace(self, key: str, namespace: str, **selectors: Any) -> Optional[List[dict]]:
        resource = self.resources.get(key)
        return None if resource is None else self.client.list(resource, namespace=namespace, **selectors)


# ------------------------------------------------------------------------------------------ nodes
def node_facts(node: dict, pods: List[dict], vmi_count: int) -> dict:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    node_labels = kv.labels(node)
    allocatable: Dict[str, Optional[int]] = {}
    for resource in RESOURCES:
        try:
            allocatable[resource] = amount(resource, (status.get("allocatable") or {})[resource])
        except (KeyError, ValueError):
            allocatable[resource] = None
    requested = {resource: 0 for resource in RESOURCES}
    for pod in pods:
        for resource, value in pod_requests(pod).items():
            if resource in requested:
                requested[resource] += value
    ready = kv.condition_true(node, "Ready")
    return {
        "name": kv.meta(node).get("name"),
        "ready": ready,
        "cordoned": bool(spec.get("unschedulable")),
        "schedulable": ready and not spec.get("unschedulable"),
        "control_plane": any(label in node_labels for label in CONTROL_PLANE_LABELS),
        "roles": sorted(k.split("/", 1)[1] for k in node_labels if k.startswith("node-role.kubernetes.io/")),
        "kubevirt_schedulable": node_labels.get("kubevirt.io/schedulable") == "true",
        "taints": [{"key": t.get("key"), "value": t.get("value"), "effect": t.get("effect")} for t in spec.get("taints") or []],
        "allocatable": allocatable,
        "requested": requested,
        "usage_percent": {r: percent(requested[r], allocatable[r] or 0) for r in RESOURCES},
        "pods": len(pods),
        "vmis": vmi_count,
    }


def nodes_section(nodes: List[dict], pods: List[dict], vmis: List[dict]) -> List[dict]:
    by_node: Dict[str, List[dict]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in kv.TERMINAL_POD_PHASES:
            by_node.setdefault(node, []).append(pod)
    vmi_count: Dict[str, int] = {}
    for vmi in vmis:
        node = (vmi.get("status") or {}).get("nodeName")
        if node:
            vmi_count[node] = vmi_count.get(node, 0) + 1
    result = [node_facts(node, by_node.get(kv.meta(node).get("name") or "", []), vmi_count.get(kv.meta(node).get("name") or "", 0))
              for node in nodes]
    return sorted(result, key=lambda n: n["name"] or "")


# ------------------------------------------------------------------------------------------ VMIs
def _index(objects: List[dict]) -> Dict[Tuple[str, str], dict]:
    return {kv.ref(obj): obj for obj in objects}


def vmis_section(vmis: List[dict], pods: List[dict], vms: List[dict], pvcs: List[dict], pdbs: List[dict],
                 migrations: List[dict], cluster_default: Optional[str]) -> Tuple[List[dict], List[dict], List[dict]]:
    """Per-VMI facts with verdicts, the PDBs over launchers, and their findings."""
    launchers = kv.index_launchers(pods)
    pods_by_namespace: Dict[str, List[dict]] = {}
    for pod in pods:
        pods_by_namespace.setdefault(kv.meta(pod).get("namespace") or "", []).append(pod)
    pdbs_by_namespace: Dict[str, List[Tuple[dict, int]]] = {}
    pdb_out, findings = [], []
    for pdb in sorted(pdbs, key=kv.ref):
        namespace = kv.meta(pdb).get("namespace") or ""
        selected = [kv.meta(p).get("name") for p in pods_by_namespace.get(namespace, [])
                    if kv.is_launcher(p) and kv.pdbs_selecting(p, [pdb])]
        allowed = kv.disruptions_allowed(pdb, bool(selected), pods_by_namespace.get(namespace, []))
        pdbs_by_namespace.setdefault(namespace, []).append((pdb, allowed))
        if selected:
            pdb_out.append(dict(kv.pdb_facts(pdb, allowed, True), launchers=sorted(selected)))
            findings.extend(kv.pdb_findings(pdb, allowed, selected))
    vm_index, pvc_index = _index(vms), _index(pvcs)
    migrations_by_vmi: Dict[Tuple[str, str], List[dict]] = {}
    for migration in migrations:
        key = (kv.meta(migration).get("namespace") or "", (migration.get("spec") or {}).get("vmiName") or "")
        migrations_by_vmi.setdefault(key, []).append(migration)
    result = []
    for vmi in sorted(vmis, key=kv.ref):
        namespace = kv.meta(vmi).get("namespace") or ""
        fact = kv.vmi_facts(vmi, cluster_default, launchers, vm_index, pvc_index, pdbs_by_namespace.get(namespace, []),
                            migrations_by_vmi.get(kv.ref(vmi), []))
        findings.extend(kv.vmi_findings(fact))
        result.append(fact)
    return result, pdb_out, findings


# ------------------------------------------------------------------------------------------ service
def _summary(vmis: List[dict], findings: List[dict]) -> dict:
    verdicts = {verdict: 0 for verdict in kv.VERDICTS}
    for fact in vmis:
        verdicts[fact["verdict"]] = verdicts.get(fact["verdict"], 0) + 1
    codes: Dict[str, int] = {}
    for item in findings:
        codes[item["code"]] = codes.get(item["code"], 0) + 1
    return {"vmis": len(vmis), "verdicts": verdicts, "findings": codes,
            "warnings": sum(1 for item in findings if CODES.get(item["code"]) == WARNING)}


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The lists of a large cluster decode into hundreds of thousands of dicts and lists, none of them in a cycle;
    while they are read and assembled the cyclic collector would walk them again and again (a third of the CPU time
    at 10,000 VMIs). Reference counting still frees everything; the collector is back on afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_facts(client: Client, scope: Scope) -> dict:
    """Read the cluster once for `scope` (a few list calls, none per VMI) and assemble the facts."""
    with _cyclic_gc_paused():
        return _read_facts(client, scope)


def _read_facts(client: Client, scope: Scope) -> dict:
    include = list(scope.include)
    version = client.server_version()
    reader = Reader(client, scope)
    findings: List[dict] = []
    result: Dict[str, Any] = {"changed": False, "include": include, "findings": findings}

    kubevirts = reader.cluster_wide("kubevirts") if ("cluster" in include or "vmis" in include) else None
    kubevirt = kv.pick_kubevirt(kubevirts or [])
    cluster_default = kv.cluster_strategy(kubevirt)
    if "cluster" in include:
        hcos = reader.cluster_wide("hyperconvergeds")
        result["cluster"] = {
            "server_version": version.get("gitVersion"),
            "server_version_info": {k: version.get(k) for k in ("major", "minor", "gitVersion", "platform")},
            "kubevirt": dict(kv.kubevirt_facts(kubevirt), served=kubevirts is not None),
            "hyperconverged": dict(kv.hyperconverged_facts((hcos or [None])[0]), served=hcos is not None),
            "eviction_strategy": cluster_default,
            "effective_default_strategy": cluster_default or kv.NONE,
            "migration_limits": kv.migration_limits(kubevirt),
        }

    pods: List[dict] = []
    vmis = reader.scoped("vmis", label_selector=scope.label_selector) if "vmis" in include else None
    if "nodes" in include:
        pods = reader.cluster_wide("pods", field_selector=NON_TERMINAL_PODS) or []
    elif "vmis" in include:
        pods = reader.scoped("pods", label_selector=kv.LAUNCHER_SELECTOR, field_selector=NON_TERMINAL_PODS) or []
    if vmis is not None and scope.names:
        vmis = [vmi for vmi in vmis if kv.meta(vmi).get("name") in scope.names]
    if vmis is not None and scope.requirements:  # the server filtered already; this keeps fakes and caches honest
        vmis = [vmi for vmi in vmis if matches_selector_string(list(scope.requirements), kv.labels(vmi))]

    if "nodes" in include:
        result["nodes"] = nodes_section(reader.cluster_wide("nodes") or [], pods, vmis or [])

    if "vmis" in include:
        if vmis is None:
            findings.append(finding("kubevirt_not_served", "The API server does not serve VirtualMachineInstance (kubevirt.io): "
                                    "KubeVirt is not installed on this cluster, so there is nothing to migrate."))
            result.update(vmis=[], pdbs=[])
        else:
            if kubevirt is None:
                findings.append(finding("kubevirt_cr_missing", "No KubeVirt resource found: the cluster default eviction strategy is "
                                        "unknown and taken as None (KubeVirt's internal default)."))
            facts, pdb_out, vmi_findings = vmis_section(vmis, pods, reader.scoped("vms") or [], reader.scoped("pvcs") or [],
                                                        reader.scoped("pdbs") or [], reader.scoped("vmims") or [], cluster_default)
            findings.extend(vmi_findings)
            result.update(vmis=facts, pdbs=pdb_out)

    if "descheduler" in include:
        # imported here: the drain's preflight reads no descheduler section and need not load its policy and klog readers
        from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched  # pylint: disable=import-outside-toplevel

        namespace = scope.descheduler_namespace
        section = desched.descheduler_facts(
            namespace, scope.descheduler_name, reader.in_namespace("cronjobs", namespace) or [],
            reader.in_namespace("deployments", namespace) or [], reader.in_namespace("jobs", namespace) or [],
            reader.in_namespace("configmaps", namespace) or [], reader.in_namespace("resourcepatches", namespace))
        findings.extend(section.pop("findings"))
        section["module_info"] = desched.module_info_facts(reader.cluster_wide("moduleinfos", label_selector=MODULE_INFO_SELECTOR))
        section["kube_descheduler"] = desched.kube_descheduler_facts(reader.cluster_wide("kubedeschedulers"))
        result["descheduler"] = section

    result["served"] = {KINDS[key][0]: reader.served(key) for key in sorted(reader.resources)}
    result["summary"] = _summary(result.get("vmis") or [], findings)
    result["api"] = {"retries": len(client.retried), "retried": client.retried[-20:]}
    return result
