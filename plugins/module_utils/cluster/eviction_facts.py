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

Actual usage (`Scope.usage_source`, `cluster.metrics`): with the nodes section, each node row gets the metrics server's
usage (one list of NodeMetrics and one of PodMetrics) and the Prometheus query's value (one query, and one GET of the
token's Secret where it comes from one) beside its requests, and a `requests_disagree_with_usage` finding when they
disagree enough that a request-based LowNodeUtilization policy would move the wrong VMs (`usage_disagreement`).
`auto` reads what is there and never fails for it (why it could not is in `actual_usage`); an explicit source fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster import metrics as actual
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.findings import CODES, WARNING, finding
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.node_fit import CONTROL_PLANE_LABELS
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES, amount, percent, pod_requests
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import Requirement, matches_selector_string
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import metrics_source

SECTIONS = ("cluster", "nodes", "descheduler", "vmis")
USAGE_SOURCES = ("auto", "requests", actual.KUBERNETES_METRICS, actual.PROMETHEUS)
DISAGREEMENT_POINTS = 20
# a pair of nodes counts as ranked the other way round only when both orders differ by more than this (noise)
RANKING_TOLERANCE_POINTS = 5.0
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
MODULE_INFO_SELECTOR = "cpaas.io/module-name=descheduler"


@dataclasses.dataclass(frozen=True)
class Scope:
    """What one read covers, checked and normalised: the sections in SECTIONS order, VMIs by namespace, label
    selector and name (empty: all), the Descheduler's namespace and name (needed only by its section), and where the
    nodes' actual usage comes from (`requests`: nowhere, the default of callers other than the facts module)."""
    include: Tuple[str, ...]
    namespaces: Tuple[str, ...] = ()
    label_selector: Optional[str] = None
    requirements: Tuple[Requirement, ...] = ()
    names: Tuple[str, ...] = ()
    descheduler_namespace: Optional[str] = None
    descheduler_name: Optional[str] = None
    usage_source: str = "requests"
    prometheus_url: Optional[str] = None
    prometheus_query: Optional[str] = None
    prometheus_auth_secret: Optional[Tuple[str, str]] = None     # (namespace, name)
    prometheus_token: Optional[str] = dataclasses.field(default=None, repr=False)
    usage_disagreement_points: float = DISAGREEMENT_POINTS


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


# ------------------------------------------------------------------------------------------ actual usage
def _percent(used: Optional[int], available: Optional[int]) -> Optional[float]:
    return percent(used, available) if used is not None and available else None


def add_actual_usage(rows: List[dict], server: Optional[dict], prometheus: Optional[dict]) -> None:
    """Put the metrics server's and Prometheus' usage beside each node row's requests (None where not read):
    `actual_usage` (cpu millicores, memory bytes), `actual_percent` (of allocatable, as LowNodeUtilization's
    usagePercentage), `prometheus_value` (the raw sample, 0..1), `prometheus_percent` (MetricResource, int(value*100))
    and `usage_deviation_points` (actual minus requested percent: cpu, memory; prometheus against cpu requests)."""
    for row in rows:
        used = ((server or {}).get("nodes") or {}).get(row["name"])
        value = ((prometheus or {}).get("values") or {}).get(row["name"])
        row["actual_usage"] = dict(used) if used is not None else None
        row["actual_percent"] = {r: _percent(used[r], row["allocatable"].get(r)) for r in actual.ACTUAL_RESOURCES} if used is not None else None
        row["prometheus_value"] = value
        row["prometheus_percent"] = prometheus["nodes"][row["name"]][actual.METRIC_RESOURCE] if value is not None else None
        deviation: Dict[str, float] = {}
        for resource in actual.ACTUAL_RESOURCES:
            measured, requested = (row["actual_percent"] or {}).get(resource), row["usage_percent"].get(resource)
            if measured is not None and requested is not None:
                deviation[resource] = round(measured - requested, 2)
        if row["prometheus_percent"] is not None and row["usage_percent"].get("cpu") is not None:
            deviation["prometheus"] = round(row["prometheus_percent"] - row["usage_percent"]["cpu"], 2)
        row["usage_deviation_points"] = deviation or None


def _comparisons(rows: List[dict]) -> List[Tuple[str, str, Dict[str, Tuple[float, float]]]]:
    """(label of the requests, label of the usage, {node: (requested percent, actual percent)}) for each measure read,
    over the nodes that can take VMs: ready, not cordoned, and not a control-plane node unless VMIs run there."""
    candidates = [row for row in rows if row["schedulable"] and (not row["control_plane"] or row["vmis"])]
    result = []
    for resource in actual.ACTUAL_RESOURCES:
        pairs = {row["name"]: (row["usage_percent"][resource], row["actual_percent"][resource]) for row in candidates
                 if row.get("actual_percent") and row["actual_percent"].get(resource) is not None and row["usage_percent"].get(resource) is not None}
        result.append(("{0} requests".format(resource), "actual {0}".format(resource), pairs))
    pairs = {row["name"]: (row["usage_percent"]["cpu"], float(row["prometheus_percent"])) for row in candidates
             if row.get("prometheus_percent") is not None and row["usage_percent"].get("cpu") is not None}
    result.append(("cpu requests", "the Prometheus query", pairs))
    return result


def _points(value: float) -> str:
    return "{0:g}".format(round(value, 1))


def usage_disagreement(rows: List[dict], points: float) -> Optional[dict]:
    """The `requests_disagree_with_usage` finding, or None: a node whose actual percent is more than `points` from its
    requested percent, or two nodes ranked one way by requests and the other way by actual usage (each order by more
    than RANKING_TOLERANCE_POINTS). Either way a request-based policy would pick its source and target nodes by numbers
    that are not the load."""
    deviating, inverted = [], []
    for requests_label, usage_label, pairs in _comparisons(rows):
        for node in sorted(pairs):
            requested, used = pairs[node]
            if abs(used - requested) > points:
                deviating.append("{0} {1} {2}% against {3} {4}% ({5}{6} points)".format(
                    node, usage_label, _points(used), requests_label, _points(requested), "+" if used >= requested else "", _points(used - requested)))
        names = sorted(pairs)
        for index, first in enumerate(names):
            for second in names[index + 1:]:
                (req_a, act_a), (req_b, act_b) = pairs[first], pairs[second]
                if (req_a - req_b) * (act_b - act_a) > 0 and min(abs(req_a - req_b), abs(act_a - act_b)) > RANKING_TOLERANCE_POINTS:
                    above, below = (first, second) if req_a > req_b else (second, first)
                    inverted.append("by {0} {1} is above {2}, by {3} {2} is above {1}".format(requests_label, above, below, usage_label))
    if not deviating and not inverted:
        return None
    shown = deviating[:5] + inverted[:3]
    hidden = len(deviating) + len(inverted) - len(shown)
    return finding("requests_disagree_with_usage", "Requests and actual usage disagree: {0}{1}. A request-based LowNodeUtilization policy "
                   "classifies nodes by what their Pods request, so it would move VMs off the wrong nodes, or none at all. Use an "
                   "actual-utilization policy (descheduler_policy with metrics_source KubernetesMetrics or Prometheus), or set "
                   "requests that match the load.".format("; ".join(shown), " (and {0} more)".format(hidden) if hidden else ""))


def _installed_prometheus(policy: Optional[dict]) -> Tuple[Optional[dict], Optional[dict]]:
    """The first profile of the installed policy whose LowNodeUtilization reads Prometheus, and its metricsUtilization."""
    for profile in (policy or {}).get("profiles") or []:
        if not isinstance(profile, dict):
            continue
        metrics, _path = actual.metrics_utilization(policy or {}, profile)
        if metrics_source(metrics) == actual.PROMETHEUS:   # upstream: metricsServer: true reads the metrics server first
            return profile, metrics
    return None, None


def _read_prometheus(client: Client, scope: Scope, policy: Optional[dict], section: dict) -> dict:
    """The Prometheus usage; `section` (the report's `prometheus`) is filled in as far as it got. Query and URL come
    from the options, else from the installed policy (its first LowNodeUtilization with source Prometheus, its
    metricsProviders); the token from prometheus_token, the prometheus_auth_secret Secret, or the policy's authToken
    Secret."""
    _profile, metrics = _installed_prometheus(policy)
    provider, provider_path = actual.prometheus_provider(policy or {})
    settings = (provider or {}).get("prometheus") or {}
    query = scope.prometheus_query or ((metrics or {}).get("prometheus") or {}).get("query")
    url = scope.prometheus_url or settings.get("url")
    section.update(query=query, url=actual.display_url(url) if url else None)
    if not query:
        raise RebalanceError("no query: prometheus_query is not given and the installed policy has no LowNodeUtilization with source Prometheus",
                             "Give prometheus_query (one value in [0, 1] per node, labelled instance=<node name>), or include the descheduler "
                             "section of a cluster whose policy reads Prometheus.", path="prometheus_query")
    if not url:
        raise RebalanceError("no URL: prometheus_url is not given and the installed policy has no metricsProviders entry with source Prometheus",
                             "Give prometheus_url, the base URL of the Prometheus HTTP API.", path="prometheus_url")
    actual.check_prometheus_url(url, "prometheus_url" if scope.prometheus_url else "descheduler.policy." + provider_path + ".prometheus.url")
    route = actual.prometheus_route(url)
    section.update(url=route["url"], via=route["via"])
    token = scope.prometheus_token
    if route["via"] != "direct":   # the service proxy would not pass a token on: no Secret read
        token = None
    elif token is None and scope.prometheus_auth_secret:
        token = actual.prometheus_token_from_secret(client, scope.prometheus_auth_secret[0], scope.prometheus_auth_secret[1], "prometheus_auth_secret")
    elif token is None and settings.get("authToken") is not None:
        reference = settings["authToken"].get("secretReference") or {}
        token = actual.prometheus_token_from_secret(client, reference.get("namespace"), reference.get("name"),
                                                    "descheduler.policy." + provider_path + ".prometheus.authToken.secretReference")
    section["token_sent"] = bool(token)
    return actual.query_prometheus(client, url, query, token, path="prometheus_query", url_path="prometheus_url", route=route)


def actual_usage_facts(client: Client, scope: Scope, rows: List[dict], policy: Optional[dict]) -> Tuple[dict, List[dict]]:
    """The `actual_usage` section and its findings; the node rows gain their actual usage (add_actual_usage)."""
    explicit = scope.usage_source in (actual.KUBERNETES_METRICS, actual.PROMETHEUS)
    section: Dict[str, Any] = {"source": scope.usage_source, "disagreement_points": scope.usage_disagreement_points,
                               "metrics_server": None, "prometheus": None}
    server = prometheus = None
    if scope.usage_source in ("auto", actual.KUBERNETES_METRICS):
        served = client.find_kind("NodeMetrics", actual.METRICS_GROUP) is not None
        section["metrics_server"] = {"served": served, "error": None}
        if served or explicit:
            try:
                server = actual.read_metrics_server(client, path="usage_source")
            except RebalanceError as error:
                if explicit:
                    raise
                section["metrics_server"]["error"] = error.message
    if scope.usage_source == actual.PROMETHEUS or (scope.usage_source == "auto" and (scope.prometheus_query or _installed_prometheus(policy)[1])):
        section["prometheus"] = {"url": None, "query": None, "via": None, "token_sent": False, "error": None}
        try:
            prometheus = _read_prometheus(client, scope, policy, section["prometheus"])
            actual.require_node_entries(prometheus, [row["name"] for row in rows if row["ready"]], "prometheus_query")
        except RebalanceError as error:
            if explicit:
                raise
            section["prometheus"]["error"] = error.message
    add_actual_usage(rows, server, prometheus)
    disagreement = usage_disagreement(rows, scope.usage_disagreement_points)
    installed = installed_usage_sources(policy)
    if disagreement and installed and None not in installed:
        disagreement["message"] += " The installed policy already balances by {0}: this concerns a request-based policy only.".format(
            " and ".join(sorted(installed)))
    return section, [disagreement] if disagreement else []


def installed_usage_sources(policy: Optional[dict]) -> set:
    """The usage source of each LowNodeUtilization of the installed policy (None: requests); empty without one."""
    sources = set()
    for profile in (policy or {}).get("profiles") or []:
        if not isinstance(profile, dict) or not any(isinstance(e, dict) and e.get("name") == actual.LOW_NODE_UTILIZATION
                                                    for e in profile.get("pluginConfig") or []):
            continue
        metrics, path = actual.metrics_utilization(policy or {}, profile)
        try:
            sources.add(actual.usage_source(metrics, path))
        except RebalanceError:   # a policy upstream cannot run is the policy findings' business
            continue
    return sources


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

    if "nodes" in include:
        if scope.usage_source == "requests":
            add_actual_usage(result["nodes"], None, None)
        else:
            installed = ((result.get("descheduler") or {}).get("policy") or {}).get("parsed")
            result["actual_usage"], usage_findings = actual_usage_facts(client, scope, result["nodes"], installed)
            findings.extend(usage_findings)

    result["served"] = {KINDS[key][0]: reader.served(key) for key in sorted(reader.resources)}
    if (result.get("actual_usage") or {}).get("metrics_server") is not None:
        result["served"]["NodeMetrics"] = result["actual_usage"]["metrics_server"]["served"]
    result["summary"] = _summary(result.get("vmis") or [], findings)
    result["api"] = {"retries": len(client.retried), "retried": client.retried[-20:]}
    return result
