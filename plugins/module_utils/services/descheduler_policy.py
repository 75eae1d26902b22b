# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `descheduler_policy` module's work: find the policy ConfigMap, validate the wanted policy against the
live cluster, back up the ConfigMap, update it with its resourceVersion, report the ACP ResourcePatch, and
restore (a backup file, or the chart's policy by deleting the ResourcePatches).

Order, always: options -> offline validation -> reads -> validation with the cluster -> (check mode stops here)
-> backup, verified by reading it back -> the one write. Nothing in the cluster is touched before the policy
passed validation and the backup is on disk."""

from __future__ import annotations

import copy
import datetime
import json
import os
import re
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Connection, classify
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import meta, migration_limits, pick_kubevirt
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import plan_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import dump_policy, load_policy, same_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.render import check_options, render_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.validate import check_policy

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported by the module
    HAS_YAML = False

RENDER_OPTIONS = ("nodes", "node_selector", "vm_labels", "vm_selector", "thresholds", "target_thresholds", "max_pods_to_evict_per_node",
                  "max_pods_to_evict_per_namespace", "max_pods_to_evict_total", "eviction_limit_node", "exclude_namespaces")
RESOURCE_PATCH_RE = re.compile(r"ResourcePatch (\S+?) is created")
POLL_INTERVAL = 0.5


class Conflict(RebalanceError):
    """The object changed between the read and the write (HTTP 409 on the update with resourceVersion)."""


# ------------------------------------------------------------------------------------------ options
def wanted_policy(params: dict, existing: Optional[dict]) -> dict:
    """The policy to apply: `policy` as given, or rendered from the options (merged into `existing` with `merge`)."""
    if params.get("policy") is not None:
        given = [name for name in RENDER_OPTIONS if params.get(name) not in (None, [], {})]
        if given:
            raise InvalidOption("policy and {0} are mutually exclusive".format(", ".join(given)),
                                "Give a whole policy, or the options to render one, not both.", path="policy")
        return load_policy(params["policy"])
    missing = [name for name in ("thresholds", "target_thresholds") if not params.get(name)]
    if missing:
        raise InvalidOption("{0} not set".format(" and ".join(missing)),
                            "Give thresholds and target_thresholds (percent per resource), or a whole policy.", path=missing[0])
    check_options(params)
    return render_policy(params, existing)


def vm_profiles(params: dict) -> List[str]:
    if params.get("vm_profiles") is not None:
        return list(params["vm_profiles"])
    return [params.get("profile_name") or "vm-rebalance"]


# ------------------------------------------------------------------------------------------ cluster
class Cluster:
    """The reads and writes of this module, through the collection's Connection."""

    def __init__(self, connection: Connection, namespace: str, name: str) -> None:
        self.connection = connection
        self.namespace = namespace
        self.name = name
        self.configmap_resource = connection.require_kind("ConfigMap", "")

    def locate_policy(self) -> Tuple[str, str]:
        """(ConfigMap name, data key) the descheduler reads, from its CronJob or Deployment."""
        cronjobs = self.connection.list_kind("CronJob", "batch", namespace=self.namespace) or []
        deployments = self.connection.list_kind("Deployment", "apps", namespace=self.namespace) or []
        kind, workload = desched.find_workload(cronjobs, deployments, self.name)
        if workload is None:
            return self.name, desched.POLICY_KEY
        spec = desched.pod_spec(kind, workload)
        container = desched.main_container(spec)
        args = [str(a) for a in (container.get("command") or [])[1:] + (container.get("args") or [])]
        cm_name, key = desched.policy_source(spec, container, desched.parse_args(args)["policy_config_file"])
        return cm_name or self.name, key or desched.POLICY_KEY

    def _path(self, name: str) -> str:
        return self.configmap_resource.path(name=name, namespace=self.namespace)

    def get_configmap(self, name: str) -> Optional[dict]:
        try:
            return self.connection.request_json(self._path(name), "get configmap {0}/{1}".format(self.namespace, name))
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise

    def replace_configmap(self, configmap: dict) -> Tuple[dict, List[str]]:
        """PUT with the object's resourceVersion; the stored object and the API warnings. 409 -> Conflict."""
        name = meta(configmap)["name"]
        request = "update configmap {0}/{1}".format(self.namespace, name)
        try:
            response = self.connection.call(request, self._put, self._path(name), configmap)
        except ApiFailure as failure:
            if failure.status == 409:
                raise Conflict("409 Conflict: {0}".format(failure.api_message),
                               "The ConfigMap was changed by someone else between this module's read (resourceVersion {0}) and its "
                               "write; nothing was overwritten. Run the task again: it reads, validates and backs up the new "
                               "content first.".format(meta(configmap).get("resourceVersion")),
                               path=request, status=409) from failure
            raise
        return response

    def _put(self, path: str, body: dict) -> Tuple[dict, List[str]]:
        client = self.connection.client.client
        response = client.request("put", path, body=body, content_type="application/json", serialize=False,
                                  _request_timeout=max(0.001, self.connection.remaining()))
        data = getattr(response, "data", response)
        stored = json.loads(data) if isinstance(data, (bytes, str)) else data
        return stored, warnings_of(response)

    def wait_for_change(self, name: str, resource_version: Optional[str], done: Callable[[dict], bool], timeout: float) -> Optional[dict]:
        """Watch the ConfigMap from `resource_version` until `done(object)`; the object, or None at the timeout.

        A watch that ends early (server timeout, dropped connection, 410 Gone) is followed by a fresh read and
        a new watch from that read's resourceVersion."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.get_configmap(name)
            if current is not None and done(current):
                return current
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            version = meta(current).get("resourceVersion") or resource_version
            try:
                for event in self.connection.client.client.watch(self.configmap_resource, namespace=self.namespace, name=name,
                                                                 resource_version=version, timeout=max(1, int(remaining))):
                    obj = event.get("raw_object") or {}
                    if event.get("type") in ("ADDED", "MODIFIED") and done(obj):
                        return obj
                    if time.monotonic() >= deadline:
                        break
            except Exception as error:  # pylint: disable=broad-exception-caught  # a broken watch is re-read and re-opened
                if classify(error) is None:
                    raise
                time.sleep(min(POLL_INTERVAL, max(0.0, deadline - time.monotonic())))

    def kubevirt_limits(self) -> Optional[dict]:
        items = self.connection.list_kind("KubeVirt", "kubevirt.io")
        if items is None:
            return None
        return migration_limits(pick_kubevirt(items))

    def nodes(self) -> List[dict]:
        return self.connection.list_kind("Node", "") or []

    def pods(self) -> List[dict]:
        return self.connection.list_kind("Pod", "") or []

    def resource_patches(self) -> Optional[List[dict]]:
        return self.connection.list_kind("ResourcePatch", None, namespace=self.namespace)

    def delete_resource_patch(self, name: str) -> None:
        resource = self.connection.require_kind("ResourcePatch", None)
        path = resource.path(name=name, namespace=self.namespace)

        def delete() -> Any:
            return self.connection.client.client.request("delete", path, serialize=False, _request_timeout=max(0.001, self.connection.remaining()))
        try:
            self.connection.call("delete resourcepatch {0}/{1}".format(self.namespace, name), delete)
        except ApiFailure as failure:
            if failure.status != 404:
                raise

    def cluster_name(self, params: dict) -> str:
        if params.get("cluster_name"):
            return params["cluster_name"]
        if params.get("context"):
            return params["context"]
        host = getattr(getattr(getattr(self.connection.client.client, "client", None), "configuration", None), "host", None)
        return host or "cluster"


def warnings_of(response: Any) -> List[str]:
    headers = getattr(response, "headers", None)
    if headers is None:
        return []
    if hasattr(headers, "getlist"):
        values = headers.getlist("Warning")
    elif hasattr(headers, "get_all"):
        values = headers.get_all("Warning") or []
    else:
        values = [v for k, v in dict(headers).items() if k.lower() == "warning"]
    result = []
    for value in values:
        match = re.match(r'^\s*\d{3}\s+\S+\s+"(.*)"\s*$', value)
        result.append(match.group(1) if match else value)
    return result


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
    """Write the whole ConfigMap as YAML to `<dir>/<cluster>_<namespace>_<name>_<UTC timestamp>.yaml`, read it
    back and compare; the path. Never overwrites a file. `chart_rendering` marks it with CHART_MARK."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
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
            with open(path, encoding="utf-8") as handle:
                if handle.readline() != CHART_MARK:
                    continue
            backup = read_backup(path)
        except (OSError, InvalidOption):
            continue
        same = (meta(backup).get("namespace"), meta(backup).get("name")) == (meta(configmap).get("namespace"), meta(configmap).get("name"))
        uids = (meta(backup).get("uid"), meta(configmap).get("uid"))
        if same and (not all(uids) or uids[0] == uids[1]):
            return path, backup
    return None


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


def _backup_and_write(params: dict, cluster: Cluster, configmap: dict, data: dict, result: dict) -> dict:
    """Back up `configmap` (verified), then replace its data with `data`; the result with the ResourcePatch."""
    listed = cluster.resource_patches()
    patches_before = [p["name"] for p in desched.patches_touching(listed or [], [("ConfigMap", cluster.namespace, meta(configmap)["name"])])]
    # with ResourcePatches served and none on this ConfigMap, what it holds now is the chart's rendering
    result["backup_path"] = backup_configmap(configmap, params.get("backup_dir") or "~/.ansible/descheduler-backups",
                                             cluster.cluster_name(params), chart_rendering=listed is not None and not patches_before)
    stored, written = _write(cluster, configmap, data, patches_before)
    result.update(resource_patch=written["resource_patch"], warnings_from_api=written["warnings"],
                  resource_version=meta(stored).get("resourceVersion"))
    return result


def run(params: dict, check_mode: bool, connection: Optional[Connection] = None,
        planner: Optional[Callable[..., dict]] = plan_policy) -> dict:
    """The module's work for `state` present, restored or absent; the module result."""
    state = params.get("state") or "present"
    connection = connection or Connection.from_params(params)
    cluster = Cluster(connection, params.get("descheduler_namespace") or "descheduler", params.get("descheduler_name") or "descheduler")
    if state == "present" and not params.get("merge"):
        wanted_policy(params, None)  # option errors before any read
    cm_name, key = (params["configmap_name"], params.get("policy_key") or desched.POLICY_KEY) if params.get("configmap_name") \
        else cluster.locate_policy()
    configmap = cluster.get_configmap(cm_name)
    if configmap is None:
        raise RebalanceError("ConfigMap {0}/{1} not found".format(cluster.namespace, cm_name),
                             "Install the Descheduler plugin, or set descheduler_namespace and descheduler_name.",
                             path="descheduler_namespace")
    result: Dict[str, Any] = {"changed": False, "configmap": {"namespace": cluster.namespace, "name": cm_name, "key": key},
                              "backup_path": None, "resource_patch": None, "warnings_from_api": [], "findings": []}
    before_text = _text(configmap, key)
    if state == "present":
        return _present(params, check_mode, cluster, configmap, key, result, planner)
    if state == "restored":
        return _restored(params, check_mode, cluster, configmap, key, result)
    return _absent(params, check_mode, cluster, configmap, key, before_text, result)


def _diff(before: Optional[str], after: Optional[str], name: str) -> dict:
    return {"before": before or "", "after": after or "", "before_header": "{0} (before)".format(name), "after_header": "{0} (after)".format(name)}


def _present(params: dict, check_mode: bool, cluster: Cluster, configmap: dict, key: str, result: dict,
             planner: Optional[Callable[..., dict]]) -> dict:
    current_text = _text(configmap, key)
    current = _parsed(current_text)
    policy = wanted_policy(params, current)
    limits = cluster.kubevirt_limits()
    nodes = cluster.nodes()
    findings = check_policy(policy, vm_profiles=vm_profiles(params), min_gap=params.get("min_threshold_gap") or 0,
                            migration_limits=limits, nodes=nodes)
    text = dump_policy(policy)
    result.update(policy=policy, policy_yaml=text, findings=findings, kubevirt_migration_limits=limits)
    if planner is not None and params.get("plan", True):
        result["plan"] = planner(policy, nodes, cluster.pods(), vm_profiles(params))
    if same_policy(current, policy):
        return result
    result["changed"] = True
    result["diff"] = _diff(current_text, text, "{0}/{1} {2}".format(cluster.namespace, meta(configmap)["name"], key))
    if check_mode:
        return result
    data = dict(configmap.get("data") or {})
    data[key] = text
    return _backup_and_write(params, cluster, configmap, data, result)


def _restored(params: dict, check_mode: bool, cluster: Cluster, configmap: dict, key: str, result: dict) -> dict:
    backup = read_backup(params["backup_file"])
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
    result["restored_from"] = params["backup_file"]
    if (configmap.get("data") or {}) == wanted:
        return result
    result["changed"] = True
    result["diff"] = _diff(_text(configmap, key), wanted.get(key), "{0}/{1} {2}".format(cluster.namespace, meta(configmap)["name"], key))
    if check_mode:
        return result
    return _backup_and_write(params, cluster, configmap, dict(wanted), result)


def _absent(params: dict, check_mode: bool, cluster: Cluster, configmap: dict, key: str, before_text: Optional[str], result: dict) -> dict:
    patches = desched.patches_touching(cluster.resource_patches() or [], [("ConfigMap", cluster.namespace, meta(configmap)["name"])])
    result["resource_patches_removed"] = [p["name"] for p in patches]
    if not patches:
        return result
    result["changed"] = True
    if check_mode:
        return result
    result["backup_path"] = backup_configmap(configmap, params.get("backup_dir") or "~/.ansible/descheduler-backups",
                                             cluster.cluster_name(params))
    # What to wait for: the reconciler's write (the text changes), or, when the chart's policy is known from a
    # backup taken while no ResourcePatch targeted the ConfigMap, that text; a ConfigMap that already holds it
    # (a restore of the chart's own text) gets no write at all, so waiting for a change would never end.
    known = chart_backup(params.get("backup_dir") or "~/.ansible/descheduler-backups", cluster.cluster_name(params), configmap)
    chart_text = _text(known[1], key) if known else None
    result["chart_policy_from"] = known[0] if known and chart_text is not None else None
    for patch in patches:
        cluster.delete_resource_patch(patch["name"])
    timeout = params.get("wait_timeout") or 120
    current = cluster.wait_for_change(meta(configmap)["name"], meta(configmap).get("resourceVersion"),
                                      lambda obj: absent_done(_text(obj, key), before_text, chart_text), timeout)
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


# ------------------------------------------------------------------------------------------ options spec
POLICY_ARG_SPEC = {
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
    "min_threshold_gap": {"type": "int", "default": 5},
    "plan": {"type": "bool", "default": True},
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "configmap_name": {"type": "str"},
    "policy_key": {"type": "str", "default": "policy.yaml", "no_log": False},
    "backup_dir": {"type": "path", "default": "~/.ansible/descheduler-backups"},
    "backup_file": {"type": "path"},
    "cluster_name": {"type": "str"},
    "wait_timeout": {"type": "int", "default": 120},
}
POLICY_MUTUALLY_EXCLUSIVE = [("nodes", "node_selector"), ("vm_labels", "vm_selector")]
POLICY_REQUIRED_IF = [("state", "restored", ("backup_file",))]
