# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a Descheduler installation (the ACP ModulePlugin package: a policy ConfigMap and a CronJob or
Deployment in one namespace) from plain dicts: where it runs, its flags, the policy it reads and what that
policy protects, its last Jobs, its Pods and their logs, and the ACP ResourcePatches that change its objects.

Upstream facts used here (kubernetes-sigs/descheduler v0.36): EvictionsInBackground is a feature gate
(`--feature-gates=EvictionsInBackground=true`), its log lines need `--v=3`; DefaultEvictor protects Pods with
local storage (emptyDir/hostPath, which every virt-launcher Pod has), system-critical Pods, failed bare Pods
and DaemonSet Pods unless listed in `podProtections.defaultDisabled`, and adds PodsWithPVC, PodsWithoutPDB and
PodsWithResourceClaims when listed in `podProtections.extraEnabled`.
"""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import klog
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.findings import finding
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import condition_true, labels, meta

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported by the module (kubernetes.core's module checks PyYAML)
    HAS_YAML = False

APP_LABEL = "app.kubernetes.io/name"
APP_NAME = "descheduler"
POLICY_KEY = "policy.yaml"
FEATURE_GATE = "EvictionsInBackground"
MIN_VERBOSITY = 3
LAST_JOBS = 3

DEFAULT_PROTECTIONS = ("PodsWithLocalStorage", "SystemCriticalPods", "FailedBarePods", "DaemonSetPods")
EXTRA_PROTECTIONS = ("PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims")
# deprecated DefaultEvictor booleans: (field, protection, true enables the protection)
DEPRECATED_FIELDS = (
    ("evictLocalStoragePods", "PodsWithLocalStorage", False),
    ("evictSystemCriticalPods", "SystemCriticalPods", False),
    ("evictFailedBarePods", "FailedBarePods", False),
    ("evictDaemonSetPods", "DaemonSetPods", False),
    ("ignorePvcPods", "PodsWithPVC", True),
)
EXTENSION_POINTS = ("presort", "sort", "deschedule", "balance", "filter", "preevictionfilter")


# ------------------------------------------------------------------------------------------ workload
def _selected(obj: dict, name: str) -> bool:
    return labels(obj).get(APP_LABEL) == APP_NAME or meta(obj).get("name") == name


def find_workload(cronjobs: List[dict], deployments: List[dict], name: str) -> Tuple[Optional[str], Optional[dict]]:
    """The CronJob or Deployment that runs the descheduler: labelled `app.kubernetes.io/name=descheduler` or
    named `name`; a CronJob before a Deployment, the one named `name` first."""
    for kind, objects in (("CronJob", cronjobs), ("Deployment", deployments)):
        found = [obj for obj in objects if _selected(obj, name)]
        found.sort(key=lambda obj: (meta(obj).get("name") != name, meta(obj).get("name") or ""))
        if found:
            return kind, found[0]
    return None, None


def pod_spec(kind: Optional[str], workload: Optional[dict]) -> dict:
    spec = (workload or {}).get("spec") or {}
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec") or {})
    return ((spec.get("template") or {}).get("spec") or {})


def main_container(spec: dict) -> dict:
    containers = spec.get("containers") or []
    for container in containers:
        if container.get("name") == APP_NAME:
            return container
    return containers[0] if containers else {}


def container_name(kind: Optional[str], workload: Optional[dict]) -> Optional[str]:
    """The name of the descheduler's container in the workload's Pods (the one whose log tells)."""
    return main_container(pod_spec(kind, workload)).get("name")


def command_args(container: dict) -> List[str]:
    """The descheduler's arguments: the command after the binary, then the args."""
    return [str(a) for a in (container.get("command") or [])[1:] + (container.get("args") or [])]


def workload_policy_source(kind: Optional[str], workload: Optional[dict]) -> Tuple[Optional[str], Optional[str]]:
    """(ConfigMap name, key) the workload's descheduler reads (`policy_source` of its --policy-config-file); (None, None)
    without a workload, a flag or a configMap volume behind it."""
    if workload is None:
        return None, None
    spec = pod_spec(kind, workload)
    container = main_container(spec)
    return policy_source(spec, container, parse_args(command_args(container))["policy_config_file"])


def _flag_pairs(args: List[str]) -> List[Tuple[str, Optional[str]]]:
    pairs: List[Tuple[str, Optional[str]]] = []
    index = 0
    while index < len(args):
        arg = str(args[index])
        index += 1
        if not arg.startswith("-"):
            continue
        name, has_value, value = arg.lstrip("-").partition("=")
        takes_value = name in ("v", "policy-config-file", "feature-gates", "descheduling-interval")
        if not has_value and takes_value and index < len(args) and not str(args[index]).startswith("-"):
            value, has_value = str(args[index]), "="
            index += 1
        pairs.append((name, value if has_value else None))
    return pairs


def parse_feature_gates(text: Optional[str]) -> Dict[str, bool]:
    gates: Dict[str, bool] = {}
    for item in (text or "").split(","):
        name, _sep, value = item.strip().partition("=")
        if name:
            gates[name.strip()] = value.strip().lower() == "true"
    return gates


def parse_args(args: List[str]) -> dict:
    """The flags that matter here from a descheduler command line (`--flag=value` or `--flag value`)."""
    result = {"policy_config_file": None, "feature_gates": {}, "verbosity": None, "dry_run": False,
              "descheduling_interval": None}
    for name, value in _flag_pairs(args):
        if name == "policy-config-file":
            result["policy_config_file"] = value
        elif name == "feature-gates":
            result["feature_gates"].update(parse_feature_gates(value))
        elif name == "v":
            try:
                result["verbosity"] = int(value or "")
            except ValueError:
                result["verbosity"] = None
        elif name == "dry-run":
            result["dry_run"] = value is None or str(value).lower() == "true"
        elif name == "descheduling-interval":
            result["descheduling_interval"] = value
    result["evictions_in_background"] = result["feature_gates"].get(FEATURE_GATE, False)
    return result


def policy_source(spec: dict, container: dict, policy_file: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(ConfigMap name, key) behind `--policy-config-file`: the configMap volume mounted at its directory."""
    if not policy_file:
        return None, None
    directory, filename = posixpath.split(policy_file)
    mounts = {m.get("name"): m for m in container.get("volumeMounts") or []}
    for volume in spec.get("volumes") or []:
        source = volume.get("configMap")
        mount = mounts.get(volume.get("name"))
        if not source or not mount:
            continue
        if posixpath.normpath(mount.get("mountPath") or "") != posixpath.normpath(directory or "/"):
            continue
        for item in source.get("items") or []:
            if item.get("path") == filename:
                return source.get("name"), item.get("key")
        return source.get("name"), filename
    return None, None


# ------------------------------------------------------------------------------------------ policy
def parse_policy(text: Optional[str]) -> Tuple[Optional[dict], Optional[str]]:
    """The DeschedulerPolicy as a dict, or None and why not."""
    if text is None:
        return None, "no policy text"
    if not HAS_YAML:
        return None, "PyYAML is not installed"
    try:
        policy = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return None, "not YAML: {0}".format(str(error).replace("\n", " "))
    if not isinstance(policy, dict):
        return None, "not a mapping but {0}".format(type(policy).__name__)
    return policy, None


def _plugin_args(profile: dict, plugin: str) -> Optional[dict]:
    for entry in profile.get("pluginConfig") or []:
        if isinstance(entry, dict) and entry.get("name") == plugin:
            return entry.get("args") or {}
    return None


def protections(evictor_args: Optional[dict]) -> List[str]:
    """The Pod protections DefaultEvictor applies with these args (deprecated booleans understood)."""
    args = evictor_args or {}
    active = set(DEFAULT_PROTECTIONS)
    pod_protections = args.get("podProtections") or {}
    for field, protection, enables in DEPRECATED_FIELDS:
        if args.get(field) is True:
            (active.add if enables else active.discard)(protection)
    active.difference_update(pod_protections.get("defaultDisabled") or [])
    active.update(p for p in pod_protections.get("extraEnabled") or [] if p in EXTRA_PROTECTIONS)
    return sorted(active)


def profile_facts(profile: dict) -> dict:
    plugins = profile.get("plugins") or {}
    enabled = {point: list(((plugins.get(point) or {}).get("enabled")) or []) for point in EXTENSION_POINTS}
    evictor = _plugin_args(profile, "DefaultEvictor")
    active = protections(evictor)
    return {
        "name": profile.get("name"),
        "balance": enabled["balance"],
        "deschedule": enabled["deschedule"],
        "evicts": bool(enabled["balance"] or enabled["deschedule"]),
        "default_evictor": evictor,
        "label_selector": (evictor or {}).get("labelSelector"),
        "protections": active,
        "protects_pvc_pods": "PodsWithPVC" in active,
        "protects_local_storage": "PodsWithLocalStorage" in active,
        "deprecated_fields": sorted(f for f, _p, _e in DEPRECATED_FIELDS if f in (evictor or {})),
        "plugin_config": [entry.get("name") for entry in profile.get("pluginConfig") or [] if isinstance(entry, dict)],
    }


def policy_facts(policy: Optional[dict]) -> dict:
    policy = policy or {}
    profiles = [profile_facts(p) for p in policy.get("profiles") or [] if isinstance(p, dict)]
    return {
        "api_version": policy.get("apiVersion"),
        "kind": policy.get("kind"),
        "node_selector": policy.get("nodeSelector"),
        "max_pods_to_evict_per_node": policy.get("maxNoOfPodsToEvictPerNode"),
        "max_pods_to_evict_per_namespace": policy.get("maxNoOfPodsToEvictPerNamespace"),
        "max_pods_to_evict_total": policy.get("maxNoOfPodsToEvictTotal"),
        "profiles": profiles,
    }


# ------------------------------------------------------------------------------------------ jobs
def job_result(job: dict) -> str:
    if condition_true(job, "Complete"):
        return "Complete"
    if condition_true(job, "Failed"):
        return "Failed"
    if ((job.get("status") or {}).get("active") or 0) > 0:
        return "Running"
    return "Pending"


def last_jobs(jobs: List[dict], workload: Optional[dict], limit: int = LAST_JOBS) -> List[dict]:
    """The newest Jobs of the CronJob (by ownerReference), newest first."""
    uid = meta(workload).get("uid")
    name = meta(workload).get("name")
    owned = [job for job in jobs if any(ref.get("kind") == "CronJob" and (ref.get("uid") == uid if uid else ref.get("name") == name)
                                        for ref in meta(job).get("ownerReferences") or [])]
    owned.sort(key=lambda job: (meta(job).get("creationTimestamp") or "", meta(job).get("name") or ""), reverse=True)
    result = []
    for job in owned[:limit]:
        status = job.get("status") or {}
        result.append({"name": meta(job).get("name"), "created": meta(job).get("creationTimestamp"),
                       "start_time": status.get("startTime"), "completion_time": status.get("completionTime"),
                       "active": status.get("active") or 0, "succeeded": status.get("succeeded") or 0,
                       "failed": status.get("failed") or 0, "result": job_result(job)})
    return result


def owned_by(obj: dict, kind: str, owner: dict) -> bool:
    """`obj` has an ownerReference to `owner` of `kind`: by UID when both carry one, else by name."""
    uid, name = meta(owner).get("uid"), meta(owner).get("name")
    return any(ref.get("kind") == kind and (ref.get("uid") == uid if uid and ref.get("uid") else ref.get("name") == name)
               for ref in meta(obj).get("ownerReferences") or [])


def _oldest_first(objects: List[dict]) -> List[dict]:
    return sorted(objects, key=lambda obj: (meta(obj).get("creationTimestamp") or "", meta(obj).get("name") or ""))


def job_pods(job: dict, pods: List[dict]) -> List[dict]:
    """The Pods of one Job (by ownerReference or the `batch.kubernetes.io/job-name` label), oldest first."""
    name = meta(job).get("name")
    return _oldest_first([p for p in pods if owned_by(p, "Job", job) or labels(p).get("batch.kubernetes.io/job-name") == name])


def kept_runs(cronjob: Optional[dict]) -> int:
    """How many finished runs a CronJob keeps (`successfulJobsHistoryLimit`, Kubernetes' default 3), never fewer than
    LAST_JOBS: the Pods of those runs, and their logs (the evidence of what each run evicted), stay until then."""
    limit = ((cronjob or {}).get("spec") or {}).get("successfulJobsHistoryLimit")
    return max(LAST_JOBS, limit) if isinstance(limit, int) and not isinstance(limit, bool) else LAST_JOBS


def workload_pods(kind: Optional[str], workload: Optional[dict], jobs: List[dict], pods: List[dict]) -> List[dict]:
    """The descheduler's Pods, oldest first: for a CronJob those of the Jobs it keeps (`kept_runs`), for a Deployment those
    its `selector.matchLabels` select (none without matchLabels)."""
    if workload is None:
        return []
    if kind == "CronJob":
        owners = {job["name"] for job in last_jobs(jobs, workload, kept_runs(workload))}
        mine = [p for p in pods if any(r.get("kind") == "Job" and r.get("name") in owners for r in meta(p).get("ownerReferences") or [])]
    else:
        wanted = (((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        mine = [p for p in pods if wanted and all(labels(p).get(k) == v for k, v in wanted.items())]
    return _oldest_first(mine)


def pod_log_records(pod: dict, text: Optional[str]) -> List[dict]:
    """A descheduler Pod's log as klog records, each with its `pod` (name); the year of the lines is the one nearest the
    Pod's start."""
    name = meta(pod).get("name")
    reference = klog.parse_time((pod.get("status") or {}).get("startTime") or meta(pod).get("creationTimestamp"))
    records = klog.parse_lines((text or "").splitlines(), reference=reference)
    for record in records:
        record["pod"] = name
    return records


# ------------------------------------------------------------------------------------------ ACP
def patches_touching(resource_patches: List[dict], targets: List[Tuple[str, str, str]]) -> List[dict]:
    """ResourcePatches whose `spec.target` is one of (kind, namespace, name)."""
    result = []
    for patch in resource_patches:
        target = (patch.get("spec") or {}).get("target") or {}
        key = (target.get("kind"), target.get("namespace") or meta(patch).get("namespace"), target.get("name"))
        if key in targets:
            result.append({"name": meta(patch).get("name"), "namespace": meta(patch).get("namespace"),
                           "created": meta(patch).get("creationTimestamp"), "release": (patch.get("spec") or {}).get("release"),
                           "target": {"kind": key[0], "namespace": key[1], "name": key[2]},
                           "operations": len((patch.get("spec") or {}).get("jsonPatch") or [])})
    result.sort(key=lambda p: (p["created"] or "", p["name"] or ""))
    return result


def _module_info(item: dict) -> dict:
    return {"name": meta(item).get("name"), "cluster": labels(item).get("cpaas.io/cluster-name"),
            "module": labels(item).get("cpaas.io/module-name"), "phase": (item.get("status") or {}).get("phase"),
            "version": (item.get("spec") or {}).get("version")}


def _kube_descheduler(item: dict) -> dict:
    spec = item.get("spec") or {}
    return {"name": meta(item).get("name"), "namespace": meta(item).get("namespace"), "profiles": spec.get("profiles"),
            "mode": spec.get("mode"), "interval_seconds": spec.get("deschedulingIntervalSeconds")}


def module_info_facts(items: Optional[List[dict]]) -> dict:
    """ACP ModuleInfo resources (served on the global cluster); `served` False where the kind is not served."""
    return {"served": items is not None, "resources": [_module_info(i) for i in items or []]}


def kube_descheduler_facts(items: Optional[List[dict]]) -> dict:
    """OpenShift KubeDescheduler resources; `served` False where the kind is not served."""
    return {"served": items is not None, "resources": [_kube_descheduler(i) for i in items or []]}


# ------------------------------------------------------------------------------------------ assembly
def descheduler_facts(namespace: str, name: str, cronjobs: List[dict], deployments: List[dict], jobs: List[dict],
                      configmaps: List[dict], resource_patches: Optional[List[dict]]) -> dict:
    """Everything about the descheduler installation in `namespace`, and its findings."""
    kind, workload = find_workload(cronjobs, deployments, name)
    result: Dict[str, Any] = {"namespace": namespace, "found": workload is not None, "kind": kind, "name": meta(workload).get("name"),
                              "args": [], "feature_gates": {}, "evictions_in_background": False, "verbosity": None,
                              "dry_run": False, "suspended": None, "schedule": None, "last_schedule_time": None,
                              "last_successful_time": None, "last_jobs": [], "descheduling_interval": None, "policy_config_file": None,
                              "image": None, "replicas": None, "ready_replicas": None, "policy": None, "resource_patches": [],
                              "resource_patch_served": resource_patches is not None}
    if workload is None:
        result["findings"] = [finding("descheduler_not_found", "No CronJob or Deployment labelled {0}={1} or named {2} in namespace {3}: the "
                                      "Descheduler plugin is not installed here, or set descheduler_namespace.".format(APP_LABEL, APP_NAME, name, namespace))]
        return result
    spec = pod_spec(kind, workload)
    container = main_container(spec)
    flags = parse_args(command_args(container))
    result.update(args=list(container.get("args") or []), feature_gates=flags["feature_gates"],
                  evictions_in_background=flags["evictions_in_background"], verbosity=flags["verbosity"], dry_run=flags["dry_run"],
                  descheduling_interval=flags["descheduling_interval"], policy_config_file=flags["policy_config_file"],
                  image=container.get("image"))
    if kind == "CronJob":
        workload_spec = workload.get("spec") or {}
        result.update(suspended=bool(workload_spec.get("suspend")), schedule=workload_spec.get("schedule"),
                      last_schedule_time=(workload.get("status") or {}).get("lastScheduleTime"),
                      last_successful_time=(workload.get("status") or {}).get("lastSuccessfulTime"),
                      last_jobs=last_jobs(jobs, workload))
    else:
        result.update(replicas=(workload.get("spec") or {}).get("replicas"), ready_replicas=(workload.get("status") or {}).get("readyReplicas"))
    cm_name, key = policy_source(spec, container, flags["policy_config_file"])
    configmap = _policy_configmap(configmaps, cm_name, name)
    key = key or POLICY_KEY
    policy_text = ((configmap or {}).get("data") or {}).get(key)
    policy, error = parse_policy(policy_text) if configmap is not None else (None, "ConfigMap not found")
    result["policy"] = {"configmap": meta(configmap).get("name") or cm_name, "key": key, "found": policy_text is not None,
                        "error": error, "text": policy_text, "parsed": policy,
                        **(policy_facts(policy) if policy is not None else {"profiles": []})}
    targets = [(kind, namespace, meta(workload).get("name"))]
    if configmap is not None:
        targets.append(("ConfigMap", namespace, meta(configmap).get("name")))
    result["resource_patches"] = patches_touching(resource_patches or [], targets)
    result["findings"] = descheduler_findings(result)
    return result


def _policy_configmap(configmaps: List[dict], wanted: Optional[str], name: str) -> Optional[dict]:
    by_name = {meta(cm).get("name"): cm for cm in configmaps}
    if wanted:
        return by_name.get(wanted)
    if name in by_name:
        return by_name[name]
    labelled = [cm for cm in configmaps if labels(cm).get(APP_LABEL) == APP_NAME and POLICY_KEY in (cm.get("data") or {})]
    return labelled[0] if labelled else None


def descheduler_findings(facts: dict) -> List[dict]:
    where = "{0} {1}/{2}".format(facts["kind"], facts["namespace"], facts["name"])
    ref = {"kind": facts["kind"], "name": facts["name"], "namespace": facts["namespace"]}
    result = []
    if not facts["evictions_in_background"]:
        result.append(finding("feature_gate_missing", "{0} runs without --feature-gates={1}=true: KubeVirt's 429 \"Eviction triggered "
                              "evacuation\" counts as a failed eviction and the same launcher is nominated again every cycle. Upgrade the "
                              "Descheduler plugin package; do not hand-edit the generated {2}.".format(where, FEATURE_GATE, facts["kind"]), **ref))
    if facts["verbosity"] is None or facts["verbosity"] < MIN_VERBOSITY:
        result.append(finding("verbosity_below_3", "{0} logs at --v={1}: the \"Eviction in background ...\" lines need --v=3 or more.".format(
            where, facts["verbosity"] if facts["verbosity"] is not None else "0 (unset)"), **ref))
    if facts["dry_run"]:
        result.append(finding("descheduler_dry_run", "{0} runs with --dry-run: it evicts against a copy of the cluster and never exercises "
                              "PDBs, 429s or background evictions.".format(where), **ref))
    if facts["suspended"]:
        result.append(finding("descheduler_suspended", "{0} is suspended: no runs until spec.suspend is false.".format(where), **ref))
    policy = facts["policy"] or {}
    cm_ref = {"kind": "ConfigMap", "name": policy.get("configmap"), "namespace": facts["namespace"]}
    if not policy.get("found"):
        result.append(finding("policy_missing", "{0}: no policy in ConfigMap {1}/{2} key {3}: the descheduler cannot start.".format(
            where, facts["namespace"], policy.get("configmap"), policy.get("key")), **cm_ref))
    elif policy.get("error"):
        result.append(finding("policy_unparseable", "ConfigMap {0}/{1} key {2}: {3}. Fix the YAML.".format(
            facts["namespace"], policy.get("configmap"), policy.get("key"), policy["error"]), **cm_ref))
    for index, profile in enumerate(policy.get("profiles") or []):
        if not profile["evicts"]:
            continue
        path = "ConfigMap {0}/{1} key {2}: profiles[{3}] ({4})".format(
            facts["namespace"], policy.get("configmap"), policy.get("key"), index, profile["name"])
        if profile["protects_pvc_pods"]:
            result.append(finding("policy_protects_pvc_pods", "{0}: DefaultEvictor protects Pods with a PVC (PodsWithPVC in "
                                  "podProtections.extraEnabled), so launchers of PVC-backed VMs are never evicted. Remove PodsWithPVC from "
                                  "extraEnabled in a profile scoped to the VMs to move.".format(path), **cm_ref))
        if profile["protects_local_storage"]:
            result.append(finding("policy_protects_local_storage", "{0}: DefaultEvictor protects Pods with local storage (PodsWithLocalStorage "
                                  "is not in podProtections.defaultDisabled); every virt-launcher Pod has emptyDir volumes, so no VM is ever "
                                  "evicted. Add PodsWithLocalStorage to defaultDisabled.".format(path), **cm_ref))
    return result
