# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `descheduler_policy` module's work: find the policy ConfigMap, validate the wanted policy against the
live cluster, plan and forecast it, back up the ConfigMap, update it with its resourceVersion, report the ACP
ResourcePatch, and restore (a backup file, or the chart's policy by deleting the ResourcePatches).

Order, always: options -> offline validation -> reads -> validation with the cluster -> the plan and the forecast
(with the actual usage the VM profile balances by, read from the metrics server or Prometheus) -> a forecast that
refuses the policy stops here unless forced -> (check mode: the same write as a server-side dry run, so the API
server validates it and admission runs; nothing is stored and no backup is written) -> backup, verified by reading
it back -> the one write. Nothing in the cluster is touched before the policy passed validation and the forecast,
and the backup is on disk."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import os
import re
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import DeschedulerInstallation
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.metrics import read_actual_usage
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import as_kubectl_shows, meta, migration_limits, pick_kubevirt
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.forecast import forecast_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import plan_policy, select_nodes
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    dump_policy,
    load_policy,
    metrics_utilization,
    profile_named,
    same_policy,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.render import METRICS_SOURCE_CHOICES, check_options, render_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.validate import check_policy

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported by the module
    HAS_YAML = False

RENDER_OPTIONS = ("nodes", "node_selector", "vm_labels", "vm_selector", "thresholds", "target_thresholds", "max_pods_to_evict_per_node",
                  "max_pods_to_evict_per_namespace", "max_pods_to_evict_total", "eviction_limit_node", "exclude_namespaces",
                  "metrics_source", "prometheus_query", "prometheus_url", "prometheus_auth_secret", "use_deviation_thresholds",
                  "no_eviction_policy")
FORCE_FIX = "set force: true to apply anyway"
RESOURCE_PATCH_RE = re.compile(r"ResourcePatch (\S+?) is created")
# the API server's answers to a write it refuses as invalid (validation, e.g. the 1 MiB limit of ConfigMap data)
INVALID_STATUS = (400, 422)


class Conflict(RebalanceError):
    """The object changed between the read and the write (HTTP 409 on the update with resourceVersion)."""


class ForecastRefused(RebalanceError):
    """The forecast of the wanted policy swaps nodes between categories or moves a VM back; nothing was written."""


# ------------------------------------------------------------------------------------------ options
ARG_SPEC = {
    "state": {"type": "str", "default": "present", "choices": ["present", "restored", "absent"]},
    "policy": {"type": "raw"},
    "profile_name": {"type": "str", "default": "vm-rebalance"},
    "vm_profiles": {"type": "list", "elements": "str"},
    "merge": {"type": "bool", "default": False},
    "nodes": {"type": "list", "elements": "str"},
    "node_selector": {"type": "str"},
    "vm_labels": {"type": "dict"},
    "vm_selector": {"type": "dict"},
    "thresholds": {"type": "dict"},
    "target_thresholds": {"type": "dict"},
    "max_pods_to_evict_per_node": {"type": "int"},
    "max_pods_to_evict_per_namespace": {"type": "int"},
    "max_pods_to_evict_total": {"type": "int"},
    "eviction_limit_node": {"type": "int"},
    "exclude_namespaces": {"type": "list", "elements": "str"},
    "node_fit": {"type": "bool", "default": True},
    "metrics_source": {"type": "str", "default": "requests", "choices": list(METRICS_SOURCE_CHOICES)},
    "prometheus_query": {"type": "str"},
    "prometheus_url": {"type": "str"},
    # a reference to the Secret, not the token: nothing secret in it
    "prometheus_auth_secret": {"type": "dict", "no_log": False, "options": {"namespace": {"type": "str", "required": True},
                                                                            "name": {"type": "str", "required": True}}},
    "use_deviation_thresholds": {"type": "bool"},
    "no_eviction_policy": {"type": "str", "choices": ["Preferred", "Mandatory"]},
    "min_threshold_gap": {"type": "int", "default": 5},
    "plan": {"type": "bool", "default": True},
    "forecast": {"type": "bool", "default": True},
    "forecast_cycles": {"type": "int", "default": 10},
    "force": {"type": "bool", "default": False},
    "prometheus_url_override": {"type": "str"},
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "configmap_name": {"type": "str"},
    "policy_key": {"type": "str", "default": "policy.yaml", "no_log": False},
    "backup_dir": {"type": "path", "default": "~/.ansible/descheduler-backups"},
    "backup_file": {"type": "path"},
    "cluster_name": {"type": "str"},
    "wait_timeout": {"type": "int", "default": 120},
}
MUTUALLY_EXCLUSIVE = [("nodes", "node_selector"), ("vm_labels", "vm_selector")]
REQUIRED_IF = [("state", "restored", ("backup_file",))]
# the argument spec's checks, as AnsibleModule takes them (the module and tests/integration/module_call.py pass these)
SPEC_CHECKS = {"mutually_exclusive": [list(m) for m in MUTUALLY_EXCLUSIVE], "required_if": [list(r) for r in REQUIRED_IF]}


@dataclasses.dataclass(frozen=True)
class DeschedulerPolicyOptions(ModuleOptions):  # pylint: disable=too-many-instance-attributes  # one field per option
    """The module's options as parsed by ARG_SPEC (its defaults applied), plus the inherited `connection`."""

    state: str
    policy: Any
    profile_name: str
    vm_profiles: Optional[List[str]]
    merge: bool
    nodes: Optional[List[str]]
    node_selector: Optional[str]
    vm_labels: Optional[Dict[str, str]]
    vm_selector: Optional[Dict[str, Any]]
    thresholds: Optional[Dict[str, Any]]
    target_thresholds: Optional[Dict[str, Any]]
    max_pods_to_evict_per_node: Optional[int]
    max_pods_to_evict_per_namespace: Optional[int]
    max_pods_to_evict_total: Optional[int]
    eviction_limit_node: Optional[int]
    exclude_namespaces: Optional[List[str]]
    node_fit: bool
    metrics_source: str
    prometheus_query: Optional[str]
    prometheus_url: Optional[str]
    prometheus_auth_secret: Optional[Dict[str, str]]
    use_deviation_thresholds: Optional[bool]
    no_eviction_policy: Optional[str]
    min_threshold_gap: int
    plan: bool
    forecast: bool
    forecast_cycles: int
    force: bool
    prometheus_url_override: Optional[str]
    descheduler_namespace: str
    descheduler_name: str
    configmap_name: Optional[str]
    policy_key: str
    backup_dir: str
    backup_file: Optional[str]
    cluster_name: Optional[str]
    wait_timeout: int


def check_module_options(options: DeschedulerPolicyOptions) -> None:
    """What the spec cannot say: a wait of 0 seconds or less would give up right after deleting the ResourcePatches;
    a forecast of no cycle forecasts nothing."""
    if options.wait_timeout <= 0:
        raise InvalidOption("must be more than 0 seconds, got {0}".format(options.wait_timeout),
                            "Give the seconds state=absent may wait for the chart's policy to come back, e.g. 120.", path="wait_timeout")
    if options.forecast_cycles < 1:
        raise InvalidOption("must be 1 or more, got {0}".format(options.forecast_cycles),
                            "Give the descheduler runs to forecast, e.g. 10, or set forecast: false.", path="forecast_cycles")


def _given(options: DeschedulerPolicyOptions, name: str) -> bool:
    """Whether a rendering option is set: not unset, empty, false or its spec default (metrics_source requests)."""
    value = getattr(options, name)
    return value not in (None, [], {}) and value is not False and value != ARG_SPEC[name].get("default")


def wanted_policy(options: DeschedulerPolicyOptions, existing: Optional[dict]) -> dict:
    """The policy to apply: `policy` as given, or rendered from the options (merged into `existing` with `merge`)."""
    if options.policy is not None:
        given = [name for name in RENDER_OPTIONS if _given(options, name)]
        if given:
            raise InvalidOption("policy and {0} are mutually exclusive".format(", ".join(given)),
                                "Give a whole policy, or the options to render one, not both.", path="policy")
        return load_policy(options.policy)
    missing = [name for name in ("thresholds", "target_thresholds") if not getattr(options, name)]
    if missing:
        raise InvalidOption("{0} not set".format(" and ".join(missing)),
                            "Give thresholds and target_thresholds (percent per resource), or a whole policy.", path=missing[0])
    check_options(nodes=options.nodes, vm_labels=options.vm_labels, exclude_namespaces=options.exclude_namespaces)
    return render_policy(profile_name=options.profile_name, node_fit=options.node_fit, nodes=options.nodes, node_selector=options.node_selector,
                         vm_labels=options.vm_labels, vm_selector=options.vm_selector, thresholds=options.thresholds,
                         target_thresholds=options.target_thresholds, max_pods_to_evict_per_node=options.max_pods_to_evict_per_node,
                         max_pods_to_evict_per_namespace=options.max_pods_to_evict_per_namespace,
                         max_pods_to_evict_total=options.max_pods_to_evict_total, eviction_limit_node=options.eviction_limit_node,
                         exclude_namespaces=options.exclude_namespaces, use_deviation_thresholds=options.use_deviation_thresholds,
                         no_eviction_policy=options.no_eviction_policy, metrics_source=options.metrics_source,
                         prometheus_query=options.prometheus_query, prometheus_url=options.prometheus_url,
                         prometheus_auth_secret=options.prometheus_auth_secret, merge_into=existing if options.merge else None)


def vm_profiles(options: DeschedulerPolicyOptions) -> List[str]:
    """The profiles the VM rules apply to: `vm_profiles` as given (an empty list included), else `profile_name`."""
    if options.vm_profiles is not None:
        return list(options.vm_profiles)
    return [options.profile_name]


# ------------------------------------------------------------------------------------------ cluster
class Cluster:
    """The reads and writes of this module, through the collection's Client."""

    def __init__(self, client: Client, namespace: str, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self._clock = clock
        self.configmap_resource = client.require_kind("ConfigMap", "")

    def locate_policy(self) -> Tuple[str, str]:
        """(ConfigMap name, data key) the descheduler reads, from its CronJob or Deployment."""
        return DeschedulerInstallation(self.client, self.namespace, self.name).policy_source()

    def get_configmap(self, name: str) -> Optional[dict]:
        return self.client.get(self.configmap_resource, name, self.namespace)

    def replace_configmap(self, configmap: dict, dry_run: bool = False) -> Tuple[dict, List[str]]:
        """PUT with the object's resourceVersion; the server's answer and its API warnings. With `dry_run` the API
        server validates and admits the update without storing it. 409 -> Conflict."""
        name = meta(configmap)["name"]
        request = "update configmap {0}/{1}".format(self.namespace, name)
        try:
            stored = self.client.replace(self.configmap_resource, configmap, self.namespace, dry_run=dry_run, request=request)
        except ApiFailure as failure:
            if failure.status == 409:
                raise Conflict("409 Conflict: {0}".format(failure.api_message),
                               "The ConfigMap was changed by someone else between this module's read (resourceVersion {0}) and its "
                               "write; nothing was overwritten. Run the task again: it reads, validates and backs up the new "
                               "content first.".format(meta(configmap).get("resourceVersion")),
                               path=request, status=409) from failure
            if dry_run and failure.status in INVALID_STATUS:
                raise ApiFailure(request + " (server-side dry run)", failure.status, failure.reason, failure.api_message,
                                 fix="The API server refused the update in check mode's dry run, so nothing was changed; a run without "
                                     "check mode would fail the same way. Change what the message names (ConfigMap data, for example, "
                                     "is limited to 1 MiB).", attempts=failure.attempts) from failure
            raise
        return stored, list(self.client.last_warnings)

    def wait_for_change(self, name: str, done: Callable[[dict], bool], timeout: float) -> Optional[dict]:
        """Watch the ConfigMap until `done(object)`; the object, or None at the timeout.

        One list (the object as it is now) and a watch from its resourceVersion, through the collection's WatchSet: a
        watch that ends early or breaks is reopened from the last resourceVersion, a 410 Gone lists again."""
        stream = Stream("configmap", self.configmap_resource, self.namespace, field_selector="metadata.name={0}".format(name))
        watchset = WatchSet(self.client, [stream], self._clock() + timeout, clock=self._clock)
        found: List[dict] = []

        def finished(current: WatchSet) -> bool:
            found[:] = [obj for obj in current.objects("configmap") if done(obj)]
            return bool(found)
        watchset.start()
        try:
            return found[0] if watchset.wait(finished) else None
        finally:
            watchset.stop()

    def kubevirt_limits(self) -> Optional[dict]:
        items = self.client.list_kind("KubeVirt", "kubevirt.io")
        if items is None:
            return None
        return migration_limits(pick_kubevirt(items))

    def nodes(self) -> List[dict]:
        return self.client.list_kind("Node", "") or []

    def pods(self) -> List[dict]:
        return self.client.list_kind("Pod", "") or []

    def resource_patches(self) -> Optional[List[dict]]:
        return self.client.list_kind("ResourcePatch", None, namespace=self.namespace)

    def delete_resource_patch(self, name: str, dry_run: bool = False) -> List[str]:
        """Delete one ResourcePatch (already gone is fine); the API warnings. With `dry_run` nothing is deleted."""
        resource = self.client.require_kind("ResourcePatch", None)
        answer = self.client.delete(resource, name, self.namespace, dry_run=dry_run,
                                    request="delete resourcepatch {0}/{1}".format(self.namespace, name))
        return list(self.client.last_warnings) if answer is not None else []

    def cluster_name(self, given: Optional[str], context: Optional[str]) -> str:
        """The cluster's name in backup file names: `given` (cluster_name), else the kubeconfig context, else the API server URL."""
        return given or context or self.client.server_host() or "cluster"


def resource_patch_from(warnings: List[str]) -> Optional[str]:
    for warning in warnings:
        match = RESOURCE_PATCH_RE.search(warning)
        if match:
            return match.group(1)
    return None


# ------------------------------------------------------------------------------------------ backup
def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", re.sub(r"^[a-z]+://", "", text)).strip("-") or "cluster"


# First line of a backup taken while no ResourcePatch targeted the ConfigMap: its data is then the chart's own
# rendering (ACP records every user edit of a chart object as a ResourcePatch and undoes the others), which is
# what state=absent brings back. A YAML comment, so the file still parses to the ConfigMap as it was.
CHART_MARK = "# kubevirt_ops.rebalance: no ResourcePatch targeted this ConfigMap: this is the chart's rendering\n"


def backup_configmap(configmap: dict, directory: str, cluster: str, now: Optional[datetime.datetime] = None,
                     chart_rendering: bool = False) -> str:
    """Write the whole ConfigMap (as `kubectl get` shows it: without managedFields) as YAML to
    `<dir>/<cluster>_<namespace>_<name>_<UTC timestamp>.yaml`, read it back and compare; the path. Never overwrites a
    file. `chart_rendering` marks it with CHART_MARK."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    configmap = as_kubectl_shows(configmap)
    directory = os.path.abspath(os.path.expanduser(directory))
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as error:
        raise InvalidOption("cannot create the backup directory: {0}".format(error), "Give a writable backup_dir.", path="backup_dir") from error
    text = (CHART_MARK if chart_rendering else "") + yaml.safe_dump(configmap, sort_keys=False, default_flow_style=False, width=1000)
    base = "{0}_{1}".format(_backup_prefix(cluster, configmap), now.strftime("%Y%m%dT%H%M%S.%fZ"))
    path = os.path.join(directory, base + ".yaml")
    counter = 1
    while os.path.exists(path):
        path = os.path.join(directory, "{0}-{1}.yaml".format(base, counter))
        counter += 1
    try:
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(text)
        with open(path, encoding="utf-8") as handle:
            written = handle.read()
    except OSError as error:
        raise InvalidOption("cannot write the backup {0}: {1}".format(path, error), "Give a writable backup_dir with free space.",
                            path="backup_dir") from error
    if written != text or yaml.safe_load(written) != configmap:
        raise InvalidOption("the backup {0} does not read back as written".format(path), "Check the disk and backup_dir; nothing was changed.",
                            path="backup_dir")
    return path


def _backup_prefix(cluster: str, configmap: dict) -> str:
    return "{0}_{1}_{2}".format(_safe(cluster), _safe(meta(configmap).get("namespace") or ""), _safe(meta(configmap).get("name") or ""))


def chart_backup(directory: str, cluster: str, configmap: dict) -> Optional[Tuple[str, dict]]:
    """The newest backup of this ConfigMap (same cluster, namespace, name and uid) marked as the chart's
    rendering, and its ConfigMap; None when there is none."""
    directory = os.path.abspath(os.path.expanduser(directory))
    try:
        names = sorted(os.listdir(directory), reverse=True)
    except OSError:
        return None
    prefix = _backup_prefix(cluster, configmap) + "_"
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".yaml")):
            continue
        path = os.path.join(directory, name)
        try:
            if not chart_marked(path):
                continue
            backup = read_backup(path)
        except (OSError, InvalidOption):
            continue
        same = (meta(backup).get("namespace"), meta(backup).get("name")) == (meta(configmap).get("namespace"), meta(configmap).get("name"))
        uids = (meta(backup).get("uid"), meta(configmap).get("uid"))
        if same and (not all(uids) or uids[0] == uids[1]):
            return path, backup
    return None


def chart_marked(path: str) -> bool:
    """Whether the backup file at `path` starts with CHART_MARK (OSError when it cannot be read)."""
    with open(os.path.expanduser(path), encoding="utf-8") as handle:
        return handle.readline() == CHART_MARK


def read_backup(path: str) -> dict:
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            obj = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as error:
        raise InvalidOption("cannot read the backup: {0}".format(error), "Give the path this module returned as backup_file.",
                            path="backup_file") from error
    if not isinstance(obj, dict) or obj.get("kind") != "ConfigMap" or not isinstance(obj.get("data"), dict):
        raise InvalidOption("not a ConfigMap backup (kind ConfigMap with data)", "Give a file written by this module.", path="backup_file")
    return obj


# ------------------------------------------------------------------------------------------ states
def _text(configmap: Optional[dict], key: str) -> Optional[str]:
    return ((configmap or {}).get("data") or {}).get(key)


def _parsed(text: Optional[str]) -> Optional[dict]:
    policy, _error = desched.parse_policy(text)
    return policy


def _updated(configmap: dict, data: dict) -> dict:
    body = copy.deepcopy(configmap)
    body["data"] = data
    return body


def _find_patch(cluster: Cluster, name: str, since: Optional[List[str]] = None) -> Optional[dict]:
    patches = desched.patches_touching(cluster.resource_patches() or [], [("ConfigMap", cluster.namespace, name)])
    fresh = [p for p in patches if since is None or p["name"] not in since]
    return (fresh or patches or [None])[-1]


def _write(cluster: Cluster, configmap: dict, data: dict, patches_before: List[str]) -> Tuple[dict, dict]:
    stored, warnings = cluster.replace_configmap(_updated(configmap, data))
    rp_name = resource_patch_from(warnings)
    patch = None
    if rp_name:
        patch = {"name": rp_name, "namespace": cluster.namespace, "source": "warning"}
    else:
        found = _find_patch(cluster, meta(configmap)["name"], patches_before)
        if found:
            patch = dict(found, source="lookup")
    return stored, {"warnings": warnings, "resource_patch": patch}


def _cluster_name(options: DeschedulerPolicyOptions, cluster: Cluster) -> str:
    return cluster.cluster_name(options.cluster_name, options.connection.auth.get("context"))


def _backup_and_write(options: DeschedulerPolicyOptions, cluster: Cluster, configmap: dict, data: dict, result: dict) -> dict:
    """Back up `configmap` (verified), then replace its data with `data`; the result with the ResourcePatch."""
    listed = cluster.resource_patches()
    patches_before = [p["name"] for p in desched.patches_touching(listed or [], [("ConfigMap", cluster.namespace, meta(configmap)["name"])])]
    # with ResourcePatches served and none on this ConfigMap, what it holds now is the chart's rendering
    result["backup_path"] = backup_configmap(configmap, options.backup_dir, _cluster_name(options, cluster),
                                             chart_rendering=listed is not None and not patches_before)
    stored, written = _write(cluster, configmap, data, patches_before)
    result.update(resource_patch=written["resource_patch"], warnings_from_api=written["warnings"],
                  resource_version=meta(stored).get("resourceVersion"))
    return result


def _dry_run_write(cluster: Cluster, configmap: dict, data: dict, result: dict) -> dict:
    """Check mode: the same update as a server-side dry run, so that the API server validates it and admission runs;
    nothing is stored and no backup is written. The result has what the server answered (its warnings), no backup,
    ResourcePatch or resourceVersion: none of them exists after a dry run."""
    _answer, warnings = cluster.replace_configmap(_updated(configmap, data), dry_run=True)
    result.update(dry_run=True, warnings_from_api=warnings)
    return result


def actual_usage(options: DeschedulerPolicyOptions, client: Client, policy: dict, nodes: List[dict],
                 reader: Callable[..., Optional[dict]] = read_actual_usage) -> Optional[dict]:
    """The actual usage the first VM profile that balances by it reads (the metrics server, or its Prometheus query at
    `prometheus_url_override` else the provider's URL, with the token of the Secret the provider names), for every
    node the policy selects; None when the VM profiles balance by requests."""
    for name in vm_profiles(options):
        profile = profile_named(policy, name)
        if profile is not None and metrics_utilization(profile) is not None:
            selected = [meta(node)["name"] for node in select_nodes(policy.get("nodeSelector"), nodes)]
            return reader(client, policy, profile, prometheus_url=options.prometheus_url_override, nodes=selected,
                          url_option="prometheus_url_override")
    return None


def run(options: DeschedulerPolicyOptions, check_mode: bool, client: Optional[Client] = None,
        planner: Optional[Callable[..., dict]] = plan_policy, forecaster: Optional[Callable[..., dict]] = forecast_policy,
        usage_reader: Callable[..., Optional[dict]] = read_actual_usage) -> dict:
    """The module's work for `state` present, restored or absent; the module result. `planner`, `forecaster` and
    `usage_reader` are the policy's planner, forecast and actual-usage reader (None: no plan, no forecast)."""
    check_module_options(options)
    if options.state == "present" and not options.merge:
        wanted_policy(options, None)  # option errors before any read
    client = client or Client.from_options(options.connection)
    cluster = Cluster(client, options.descheduler_namespace, options.descheduler_name)
    cm_name, key = (options.configmap_name, options.policy_key) if options.configmap_name else cluster.locate_policy()
    configmap = cluster.get_configmap(cm_name)
    if configmap is None:
        raise RebalanceError("ConfigMap {0}/{1} not found".format(cluster.namespace, cm_name),
                             "Install the Descheduler plugin, or set descheduler_namespace and descheduler_name.",
                             path="descheduler_namespace")
    result: Dict[str, Any] = {"changed": False, "configmap": {"namespace": cluster.namespace, "name": cm_name, "key": key},
                              "backup_path": None, "resource_patch": None, "warnings_from_api": [], "findings": []}
    before_text = _text(configmap, key)
    if options.state == "present":
        return _present(options, check_mode, cluster, configmap, key, result, Planning(planner, forecaster, usage_reader))
    if options.state == "restored":
        return _restored(options, check_mode, cluster, configmap, key, result)
    return _absent(options, check_mode, cluster, configmap, key, before_text, result)


def _diff(before: Optional[str], after: Optional[str], name: str) -> dict:
    return {"before": before or "", "after": after or "", "before_header": "{0} (before)".format(name), "after_header": "{0} (after)".format(name)}


@dataclasses.dataclass(frozen=True)
class Planning:
    """What `state=present` runs before the write: the planner, the forecast and the actual-usage reader."""

    planner: Optional[Callable[..., dict]]
    forecaster: Optional[Callable[..., dict]]
    usage_reader: Callable[..., Optional[dict]]


def _plan_and_forecast(options: DeschedulerPolicyOptions, cluster: Cluster, policy: dict, nodes: List[dict], result: dict,
                       planning: Planning) -> None:
    """The plan (`plan`) and the forecast (`forecast`) of `policy` on the live nodes and Pods, with the actual usage
    its VM profile balances by."""
    wanted = [options.plan and planning.planner is not None, options.forecast and planning.forecaster is not None]
    if not any(wanted):
        return
    usage = actual_usage(options, cluster.client, policy, nodes, planning.usage_reader)
    pods = cluster.pods()
    if wanted[0]:
        result["plan"] = planning.planner(policy, nodes, pods, vm_profiles(options), actual_usage=usage)
    if wanted[1]:
        result["forecast"] = planning.forecaster(policy, nodes, pods, vm_profiles(options), actual_usage=usage,
                                                 max_cycles=options.forecast_cycles)


def _warn_of_live_refusal(result: dict) -> None:
    refusal = (result.get("forecast") or {}).get("refusal")
    if refusal:
        result["findings"] = list(result.get("findings") or []) + [
            {"code": "forecast_refuses_live_policy", "severity": "warning", "path": "forecast",
             "message": "forecast: {0}; this is the policy in place: change it, or keep VMs that just moved out of the next runs "
                        "(vm_migration_cooldown)".format(refusal)}]


def _refuse_by_forecast(options: DeschedulerPolicyOptions, result: dict) -> None:
    """A forecast that refuses the policy stops the change before anything is written (check mode the same way),
    with the plan and the forecast in the result; with `force` it is a finding."""
    refusal = (result.get("forecast") or {}).get("refusal")
    if not refusal:
        return
    if not options.force:
        raise ForecastRefused(refusal, FORCE_FIX, path="forecast", result=dict(result))
    result["findings"] = list(result.get("findings") or []) + [
        {"code": "forecast_refusal_forced", "severity": "warning", "path": "forecast",
         "message": "forecast: {0}; applied anyway (force: true)".format(refusal)}]


def _present(options: DeschedulerPolicyOptions, check_mode: bool, cluster: Cluster, configmap: dict, key: str, result: dict,
             planning: Planning) -> dict:
    current_text = _text(configmap, key)
    current = _parsed(current_text)
    policy = wanted_policy(options, current)
    limits = cluster.kubevirt_limits()
    nodes = cluster.nodes()
    findings = check_policy(policy, vm_profiles=vm_profiles(options), min_gap=options.min_threshold_gap, migration_limits=limits, nodes=nodes)
    text = dump_policy(policy)
    result.update(policy=policy, policy_yaml=text, findings=findings, kubevirt_migration_limits=limits)
    _plan_and_forecast(options, cluster, policy, nodes, result, planning)
    if same_policy(current, policy):
        _warn_of_live_refusal(result)   # nothing is written, so nothing to refuse; but the policy in place churns
        return result
    _refuse_by_forecast(options, result)
    result["changed"] = True
    result["diff"] = _diff(current_text, text, "{0}/{1} {2}".format(cluster.namespace, meta(configmap)["name"], key))
    data = dict(configmap.get("data") or {})
    data[key] = text
    if check_mode:
        return _dry_run_write(cluster, configmap, data, result)
    return _backup_and_write(options, cluster, configmap, data, result)


def _restored(options: DeschedulerPolicyOptions, check_mode: bool, cluster: Cluster, configmap: dict, key: str, result: dict) -> dict:
    backup = read_backup(options.backup_file)
    if (meta(backup).get("namespace"), meta(backup).get("name")) != (cluster.namespace, meta(configmap)["name"]):
        where = "{0}/{1}".format(meta(backup).get("namespace"), meta(backup).get("name"))
        raise InvalidOption("the backup is of ConfigMap {0}, not {1}/{2}".format(where, cluster.namespace, meta(configmap)["name"]),
                            "Give the backup of this ConfigMap, or set descheduler_namespace and descheduler_name.", path="backup_file")
    backup_uid, live_uid = meta(backup).get("uid"), meta(configmap).get("uid")
    if backup_uid and live_uid and backup_uid != live_uid:
        raise InvalidOption("the backup is of a ConfigMap with uid {0}, but {1}/{2} here has uid {3}: it was taken on another cluster, "
                            "or the ConfigMap was deleted and created again since".format(backup_uid, cluster.namespace, meta(configmap)["name"],
                                                                                          live_uid),
                            "Give the backup taken on this cluster (its file name starts with the cluster name); to restore it here "
                            "anyway, remove metadata.uid from the file.", path="backup_file")
    wanted = backup.get("data") or {}
    result["restored_from"] = options.backup_file
    chart = _chart_rendering(options, cluster, configmap, backup)
    if chart:
        # ACP brings the chart's rendering back when its overrides are deleted; writing it would pin it in one more
        # ResourcePatch (a run killed between its write and its record leaves only a backup to roll back from)
        return _absent(options, check_mode, cluster, configmap, key, _text(configmap, key), result, chart=chart)
    if (configmap.get("data") or {}) == wanted:
        return result
    result["changed"] = True
    result["diff"] = _diff(_text(configmap, key), wanted.get(key), "{0}/{1} {2}".format(cluster.namespace, meta(configmap)["name"], key))
    if check_mode:
        return _dry_run_write(cluster, configmap, dict(wanted), result)
    return _backup_and_write(options, cluster, configmap, dict(wanted), result)


def _chart_rendering(options: DeschedulerPolicyOptions, cluster: Cluster, configmap: dict, backup: dict) -> Optional[Tuple[str, dict]]:
    """Where ResourcePatches override `configmap`, whether `backup` (read from backup_file) is the chart's rendering:
    marked so, or with the data of the newest marked backup in backup_dir; that backup's path and ConfigMap, else None
    (no override to delete, or a backup of something else, which is written back)."""
    if not desched.patches_touching(cluster.resource_patches() or [], [("ConfigMap", cluster.namespace, meta(configmap)["name"])]):
        return None
    if chart_marked(options.backup_file):
        return options.backup_file, backup
    known = chart_backup(options.backup_dir, _cluster_name(options, cluster), configmap)
    return known if known and (known[1].get("data") or {}) == (backup.get("data") or {}) else None


def _absent(options: DeschedulerPolicyOptions, check_mode: bool, cluster: Cluster, configmap: dict, key: str, before_text: Optional[str],
            result: dict, chart: Optional[Tuple[str, dict]] = None) -> dict:
    patches = desched.patches_touching(cluster.resource_patches() or [], [("ConfigMap", cluster.namespace, meta(configmap)["name"])])
    result["resource_patches_removed"] = [p["name"] for p in patches]
    if not patches:
        return result
    result["changed"] = True
    if check_mode:  # the deletes as server-side dry runs: RBAC and admission answer, nothing is deleted, nothing to wait for
        warnings: List[str] = []
        for patch in patches:
            warnings += cluster.delete_resource_patch(patch["name"], dry_run=True)
        result.update(dry_run=True, warnings_from_api=warnings)
        return result
    name = _cluster_name(options, cluster)
    result["backup_path"] = backup_configmap(configmap, options.backup_dir, name)
    # What to wait for: the reconciler's write (the text changes), or, when the chart's policy is known from a
    # backup taken while no ResourcePatch targeted the ConfigMap, that text; a ConfigMap that already holds it
    # (a restore of the chart's own text) gets no write at all, so waiting for a change would never end.
    known = chart or chart_backup(options.backup_dir, name, configmap)
    chart_text = _text(known[1], key) if known else None
    result["chart_policy_from"] = known[0] if known and chart_text is not None else None
    for patch in patches:
        cluster.delete_resource_patch(patch["name"])
    timeout = options.wait_timeout
    current = cluster.wait_for_change(meta(configmap)["name"], lambda obj: absent_done(_text(obj, key), before_text, chart_text), timeout)
    if current is None:
        hint = "the chart's policy is {0}'s".format(result["chart_policy_from"]) if chart_text is not None else (
            "no backup in backup_dir shows the chart's policy, so only a change could be waited for (none comes when the "
            "ConfigMap already holds the chart's text)")
        raise RebalanceError("the ResourcePatches {0} were deleted but ConfigMap {1}/{2} still shows the override after {3}s; {4}".format(
            ", ".join(result["resource_patches_removed"]), cluster.namespace, meta(configmap)["name"], timeout, hint),
            "Check that the ACP chart reconciler runs (the plugin's ModuleInfo phase), or re-apply the backup with state=restored.",
            path="wait_timeout", backup_path=result["backup_path"])
    result["diff"] = _diff(before_text, _text(current, key), "{0}/{1} {2}".format(cluster.namespace, meta(configmap)["name"], key))
    result["resource_version"] = meta(current).get("resourceVersion")
    return result


def absent_done(text: Optional[str], before_text: Optional[str], chart_text: Optional[str]) -> bool:
    """Whether the override is gone from the ConfigMap: its text changed, or it is the chart's (when known)."""
    return text != before_text or (chart_text is not None and text == chart_text)
