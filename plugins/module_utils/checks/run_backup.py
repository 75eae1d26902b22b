# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parts of the runs' backups kept in the cluster, and of the run history read from them.

Every run that backs up the Descheduler's objects before it changes them (the descheduler_backup role) also stores
the backup in the cluster, in the Descheduler's namespace: one immutable ConfigMap per run, named from the run id,
labelled with the collection, the cluster, the run id and the playbook. Its `data` holds the backup files' contents
under the files' names without the run id (`configmap_<namespace>_<name>.yaml`, `cronjob_<namespace>_<name>.yaml`):
the same bytes as the files on the controller. The annotation `kubevirt-ops.io/run` (JSON) is the run's record: who,
when, the files, the Secrets the backup only refers to, and, once the run ended, its outcome and the rollback that
undid it. Only the metadata of an immutable ConfigMap can change, so the record can follow the run while the backup
cannot.

Backups hold no Secret data: a Secret the policy names (Prometheus `authToken.secretReference`) is kept as the
reference only, and anything else under an `authToken`, or the `data` of a Secret object, is dropped (`scrub`).

Retention keeps the newest `retention` runs' objects and never deletes one a Lease record still names (`to_prune`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported by the service before any request
    HAS_YAML = False

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError

MANAGED_BY = ("app.kubernetes.io/managed-by", "kubevirt_ops.rebalance")
COMPONENT = ("app.kubernetes.io/component", "run-backup")
RUN_ID_LABEL = "kubevirt-ops.io/run-id"
CLUSTER_LABEL = "kubevirt-ops.io/cluster"
PLAYBOOK_LABEL = "kubevirt-ops.io/playbook"
RECORD = "kubevirt-ops.io/run"
SELECTOR = "{0}={1},{2}={3}".format(MANAGED_BY[0], MANAGED_BY[1], COMPONENT[0], COMPONENT[1])
NAME_PREFIX = "kubevirt-ops-backup-"
# the key of the lease record's `backup` that names the run's object, as <namespace>/<name>
LEASE_KEY = "cluster_object"
# ConfigMap data keys: [-._a-zA-Z0-9]+ (ValidateConfigMapKey)
_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]+")
_NAME_CHARS = re.compile(r"[^a-z0-9-]+")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def object_name(run_id: str) -> str:
    """The run's object: `kubevirt-ops-backup-<run id>` as a DNS subdomain (lowercase, other characters as `-`); when
    that changed the id, a short hash of the id keeps two ids that clean to the same text apart."""
    cleaned = _NAME_CHARS.sub("-", run_id.lower()).strip("-")[:200].strip("-") or "run"
    if cleaned != run_id:
        cleaned = "{0}-{1}".format(cleaned, hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8])
    return NAME_PREFIX + cleaned


def label_value(text: str) -> str:
    """`text` as a label value (at most 63 characters of [-A-Za-z0-9_.], alphanumeric at both ends); the whole text
    is in the record."""
    value = re.sub(r"^[^A-Za-z0-9]+", "", re.sub(r"[^-A-Za-z0-9_.]+", "-", text or ""))[:63]
    value = re.sub(r"[^A-Za-z0-9]+$", "", value)
    return value if _LABEL_VALUE.match(value) else ""


def data_key(file_name: str, run_id: str) -> str:
    """The ConfigMap key of a backup file: its base name without the run id prefix (`<run id>_configmap_ns_name.yaml`
    -> `configmap_ns_name.yaml`)."""
    base = file_name.rsplit("/", 1)[-1]
    if base.startswith(run_id + "_"):
        base = base[len(run_id) + 1:]
    return _KEY_CHARS.sub("-", base) or "backup.yaml"


def labels(run_id: str, cluster: str, playbook: str) -> Dict[str, str]:
    return {MANAGED_BY[0]: MANAGED_BY[1], COMPONENT[0]: COMPONENT[1], RUN_ID_LABEL: label_value(run_id),
            CLUSTER_LABEL: label_value(cluster), PLAYBOOK_LABEL: label_value(playbook)}


def backup_body(name: str, namespace: str, run_id: str, cluster: str, playbook: str, contents: Dict[str, str], record: dict) -> dict:
    """The immutable ConfigMap that holds one run's backup files (`contents`: data key -> file text) and its record."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
            "metadata": {"name": name, "namespace": namespace, "labels": labels(run_id, cluster, playbook),
                         "annotations": {RECORD: json.dumps(record, sort_keys=True)}},
            "data": dict(contents)}


def read_record(obj: Optional[dict]) -> dict:
    return kv.json_annotation(obj, RECORD) or {}


def record_patch(obj: dict, changes: Dict[str, Any]) -> Optional[dict]:
    """The merge patch that adds `changes` to the object's record (metadata only: an immutable ConfigMap's data never
    changes), with its resourceVersion so that two writers do not lose each other's change; None when the record
    already says so."""
    record = read_record(obj)
    updated = dict(record, **changes)
    if updated == record:
        return None
    return {"metadata": {"resourceVersion": kv.meta(obj).get("resourceVersion"),
                         "annotations": {RECORD: json.dumps(updated, sort_keys=True)}}}


# ------------------------------------------------------------------------------------------ Secrets
def _scrub_value(value: Any, path: str, references: List[dict], removed: List[str]) -> Any:
    if isinstance(value, dict):
        if value.get("kind") == "Secret":
            kept = {key: item for key, item in value.items() if key not in ("data", "stringData")}
            removed.extend("{0}.{1}".format(path, key) for key in ("data", "stringData") if key in value)
            return {key: _scrub_value(item, "{0}.{1}".format(path, key), references, removed) for key, item in kept.items()}
        result = {}
        for key, item in value.items():
            where = "{0}.{1}".format(path, key) if path else str(key)
            if key == "authToken" and isinstance(item, dict):
                reference = item.get("secretReference")
                removed.extend("{0}.{1}".format(where, other) for other in item if other != "secretReference")
                if isinstance(reference, dict):
                    references.append({"path": where + ".secretReference", "namespace": reference.get("namespace"),
                                       "name": reference.get("name")})
                result[key] = {"secretReference": reference} if "secretReference" in item else {}
            else:
                result[key] = _scrub_value(item, where, references, removed)
        return result
    if isinstance(value, list):
        return [_scrub_value(item, "{0}[{1}]".format(path, index), references, removed) for index, item in enumerate(value)]
    return value


def load_yaml(text: str) -> Any:
    """`text` parsed as YAML; ValueError with the parser's words when it is not YAML."""
    if not HAS_YAML:
        raise RebalanceError("PyYAML is not installed", "Install the packages in requirements.txt.")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(str(error)) from error


def _embedded(text: str) -> Optional[Any]:
    """A ConfigMap value that is a YAML mapping (a policy file), else None."""
    try:
        loaded = load_yaml(text)
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None


def plain_copy(value: Any) -> Any:
    """A copy of JSON-shaped data as plain dicts and lists. As a filter (without_secret_data) this runs on the
    controller, where the object is one of ansible-core's lazy template containers: copy.deepcopy copies those as
    lazy containers again, which took seconds for a CronJob in a run with many facts."""
    if isinstance(value, Mapping):
        return {key: plain_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_copy(item) for item in value]
    return value


def scrub(obj: dict) -> Tuple[dict, List[dict], List[str]]:
    """`obj` without Secret data, the Secret references it keeps, and the paths of what was dropped.

    Kept: `authToken.secretReference` (namespace and name: where the token is, not the token). Dropped: every other key
    under an `authToken`, and `data`/`stringData` of an embedded Secret. A ConfigMap's values are read as YAML too (the
    policy file): one that held something to drop is written again without it, one that did not keeps its bytes."""
    references: List[dict] = []
    removed: List[str] = []
    clean = _scrub_value(plain_copy(obj), "", references, removed)
    if obj.get("kind") == "ConfigMap" and isinstance(obj.get("data"), dict):
        for key, text in obj["data"].items():
            loaded = _embedded(text) if isinstance(text, str) else None
            if loaded is None:
                continue
            dropped: List[str] = []
            cleaned = _scrub_value(loaded, "data.{0}".format(key), references, dropped)
            if dropped:
                removed.extend(dropped)
                clean["data"][key] = yaml.safe_dump(cleaned, default_flow_style=False, sort_keys=False)
    return clean, references, removed


def secret_data_paths(obj: dict) -> List[str]:
    """Where `obj` holds Secret data that `scrub` would drop (empty when it holds none): what a backup must never store."""
    return scrub(obj)[2]


# ------------------------------------------------------------------------------------------ retention
def lease_names(record: Optional[dict]) -> Set[str]:
    """The backup objects (namespace/name) a Lease record names: the run's own and that of the unfinished run it took
    over (a rollback restores from it)."""
    names: Set[str] = set()
    for entry in (record or {}, (record or {}).get("unfinished_run") or {}):
        named = (entry.get("backup") or {}).get(LEASE_KEY)
        if isinstance(named, str) and named:
            names.add(named)
    return names


def created_key(obj: dict) -> Tuple[str, str, str]:
    """Sort key, oldest first: the record's creation time (microseconds), else the object's, then the name."""
    record = read_record(obj)
    return (record.get("created") or "", kv.meta(obj).get("creationTimestamp") or "", kv.meta(obj).get("name") or "")


def newest_first(objects: Iterable[dict]) -> List[dict]:
    return sorted(objects, key=created_key, reverse=True)


def to_prune(objects: Sequence[dict], retention: int, protected: Set[str], keep: Sequence[str] = ()) -> List[dict]:
    """The objects past the newest `retention` runs, without those a Lease record names (`protected`, namespace/name)
    and those in `keep` (the run's own, even in check mode where it was not stored)."""
    ordered = newest_first(objects)
    kept_names = set(keep)
    budget = max(retention - len([name for name in keep if name not in {kv.meta(o).get("name") for o in ordered}]), 0)
    prune = []
    for index, obj in enumerate(ordered):
        meta = kv.meta(obj)
        full = "{0}/{1}".format(meta.get("namespace"), meta.get("name"))
        if index < budget or meta.get("name") in kept_names or full in protected:
            continue
        prune.append(obj)
    return prune


# ------------------------------------------------------------------------------------------ history
def history_entry(obj: Optional[dict], record: Optional[dict] = None) -> dict:
    """One run as the history lists it: from its backup object (`obj`), or from a Lease record alone (a run that
    made no backup, as a rollback)."""
    stored = read_record(obj) if obj else {}
    lease = record or {}
    merged = dict(stored, **{key: value for key, value in lease.items() if value not in (None, "", {}) and key != "backup"})
    holder = merged.get("holder") or {}
    meta = kv.meta(obj)
    return {"run_id": merged.get("run_id") or kv.labels(obj).get(RUN_ID_LABEL), "playbook": merged.get("playbook"),
            "who": holder_line(holder), "started": merged.get("started") or merged.get("created"),
            "ended": merged.get("ended"), "outcome": outcome(merged),
            "backup": "{0}/{1}".format(meta.get("namespace"), meta.get("name")) if obj else None,
            "files": sorted((obj or {}).get("data") or {}), "rolled_back_by": merged.get("rolled_back_by"),
            "secret_references": stored.get("secret_references") or [], "step": merged.get("step"), "restored_from": None}


def holder_line(holder: dict) -> str:
    if not holder:
        return ""
    if holder.get("awx_job_id"):
        return "AWX job {0} ({1})".format(holder["awx_job_id"], holder.get("user") or "?")
    return "{0}@{1}".format(holder.get("user") or "?", holder.get("host") or "?")


def outcome(record: dict) -> str:
    """The run's outcome: its final status; `rolled_back` once a rollback undid it; `in_progress` while it runs, or
    `unknown` when the record does not say (a run that died before it recorded one)."""
    if (record.get("rolled_back_by") or {}).get("outcome") == "rolled_back":
        return "rolled_back"
    return record.get("status") or record.get("outcome") or "unknown"


def history(objects: Sequence[dict], lease_record: Optional[dict]) -> List[dict]:
    """The cluster's runs, newest first: one per backup object, merged with the Lease record for the run it names (the
    last run, which may have made no backup), and the run that record had taken over unfinished."""
    by_run: Dict[str, dict] = {}
    order: List[Tuple[str, str]] = []
    for obj in objects:
        entry = history_entry(obj)
        run_id = entry["run_id"] or kv.meta(obj).get("name")
        by_run[run_id] = entry
        order.append((read_record(obj).get("created") or entry["started"] or "", run_id))
    for record in ((lease_record or {}).get("unfinished_run"), lease_record):
        if not record or not record.get("run_id"):
            continue
        run_id = record["run_id"]
        named = (record.get("backup") or {}).get(LEASE_KEY)
        own = next((o for o in objects if read_record(o).get("run_id") == run_id), None)
        if own is None and named and record.get("playbook") != "rollback":
            own = next((o for o in objects if "{0}/{1}".format(kv.meta(o).get("namespace"), kv.meta(o).get("name")) == named), None)
        entry = history_entry(own, record)
        if record.get("playbook") == "rollback" and own is None:
            entry["restored_from"] = named   # a rollback makes no backup: the one it restored
        if run_id not in by_run:
            order.append((record.get("started") or "", run_id))
        by_run[run_id] = entry
    seen: Set[str] = set()
    result = []
    for _when, run_id in sorted(order, reverse=True):
        if run_id not in seen:
            seen.add(run_id)
            result.append(by_run[run_id])
    return result


def history_lines(entries: Sequence[dict]) -> List[str]:
    """The history as `helm history` prints it: one line per run, newest first."""
    lines = ["RUN ID | PLAYBOOK | WHO | STARTED | OUTCOME | BACKUP"]
    for entry in entries:
        backup = entry["backup"] or ("restored " + entry["restored_from"] if entry.get("restored_from") else None)
        values = (entry["run_id"], entry["playbook"], entry["who"], entry["started"], entry["outcome"], backup)
        lines.append(" | ".join(str(value or "-") for value in values))
    return lines
