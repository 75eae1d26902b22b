# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`run_backup`: the runs' backups kept in the cluster, and the run history read from them.

`state: present` stores one run's backup files as an immutable ConfigMap in the Descheduler's namespace (before the
run changes anything) and deletes the objects past the newest `retention` runs, except those the collection's Lease
record names. `state: finished` adds the run's outcome to its object's record (and, for a rollback, marks the run it
undid). `state: history` lists the runs newest first and, for one run, returns its backup files' contents (what a
rollback on another controller restores). The decisions are `checks.run_backup`'s; this file reads and writes.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Dict, List, Optional, Set

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_backup as rb
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_lease as rl
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.run_lease import ARG_SPEC as LEASE_SPEC, this_run

ARG_SPEC = {
    "state": {"type": "str", "choices": ["present", "finished", "history"], "default": "present"},
    "namespace": {"type": "str", "default": "descheduler"},
    "run_id": {"type": "str"},
    "playbook": {"type": "str"},
    "cluster_name": {"type": "str"},
    "files": {"type": "dict"},
    "retention": {"type": "int", "default": 10},
    "outcome": {"type": "str", "choices": list(rl.FINAL_STATUSES)},
    "rollback_of": {"type": "str"},
    "backup_object": {"type": "str"},
    "lease_namespace": {"type": "str", "default": LEASE_SPEC["lease_namespace"]["default"]},
    "lease_name": {"type": "str", "default": LEASE_SPEC["lease_name"]["default"]},
    "launched_by": {"type": "str"},
}
REQUIRED_IF = [("state", "present", ["run_id", "playbook", "cluster_name", "files"]), ("state", "finished", ["run_id", "outcome"])]


class BackupConflict(RebalanceError):
    """The run's object name is taken by another run's backup."""


@dataclasses.dataclass(frozen=True)
class RunBackupOptions(ModuleOptions):
    """The options of run_backup, as ARG_SPEC parses them."""
    state: str
    namespace: str
    run_id: Optional[str]
    playbook: Optional[str]
    cluster_name: Optional[str]
    files: Optional[Dict[str, Any]]
    retention: int
    outcome: Optional[str]
    rollback_of: Optional[str]
    backup_object: Optional[str]
    lease_namespace: str
    lease_name: str
    launched_by: Optional[str]


def check_options(options: RunBackupOptions) -> Dict[str, str]:
    """Refuse what cannot be stored, before any request; the files' contents by data key."""
    for path, value in (("namespace", options.namespace), ("lease_namespace", options.lease_namespace)):
        if not is_dns_label(value):
            raise InvalidOption("{0!r} is not a namespace name".format(value), "Give the Descheduler's namespace (descheduler, or "
                                "kube-system for the upstream chart) and the Lease's (kube-system).", path=path)
    if options.retention < 1:
        raise InvalidOption("must be 1 or more, got {0}".format(options.retention),
                            "Give how many runs' backups to keep in the cluster (default 10).", path="retention")
    if options.run_id is not None and not options.run_id.strip():
        raise InvalidOption("must not be empty", "Give the run's id, the one in the backup files' names.", path="run_id")
    if options.state != "present":
        return {}
    contents: Dict[str, str] = {}
    for file_name, text in sorted((options.files or {}).items()):
        where = "files.{0}".format(file_name)
        if not isinstance(text, str):
            raise InvalidOption("is not text", "Give each backup file's content as the role wrote it (YAML text).", path=where)
        try:
            obj = rb.load_yaml(text)
        except ValueError as error:
            raise InvalidOption("is not YAML: {0}".format(error), "Give the backup file's content as written.", path=where) from error
        if not isinstance(obj, dict) or not obj.get("kind"):
            raise InvalidOption("is not a Kubernetes object", "Give the objects as the API returned them (kind, metadata, ...).", path=where)
        secret = rb.secret_data_paths(obj)
        if secret:
            raise InvalidOption("holds Secret data ({0})".format(", ".join(secret)),
                                "Backups keep only the reference to a Secret: pass the object through the "
                                "kubevirt_ops.rebalance.without_secret_data filter first.", path=where)
        contents[rb.data_key(file_name, options.run_id or "")] = text
    if not contents:
        raise InvalidOption("is empty", "Give the backup files (name: content) to store.", path="files")
    return contents


class RunBackups:
    """One module run against the Descheduler namespace's backup objects."""

    def __init__(self, options: RunBackupOptions, client: Client, check_mode: bool,
                 now: Callable[[], datetime.datetime]) -> None:
        self.options = options
        self.client = client
        self.check_mode = check_mode
        self.now = now
        self.configmaps = client.require_kind("ConfigMap")

    def where(self, name: str) -> str:
        return "configmap {0}/{1}".format(self.options.namespace, name)

    def read(self, name: str) -> Optional[dict]:
        return self.client.get(self.configmaps, name, self.options.namespace)

    def backups(self) -> List[dict]:
        return self.client.list(self.configmaps, namespace=self.options.namespace, label_selector=rb.SELECTOR)

    def lease_record(self) -> Optional[dict]:
        leases = self.client.find_kind("Lease", "coordination.k8s.io")
        if leases is None:
            return None
        return rl.read_record(self.client.get(leases, self.options.lease_name, self.options.lease_namespace))

    # ---------------------------------------------------------------------------------- present
    def store(self, contents: Dict[str, str]) -> dict:
        options = self.options
        run_id = options.run_id or ""
        name = rb.object_name(run_id)
        objects = self.backups()   # the run's own among them: one list, no get (the roles' RBAC grants get on no backup)
        protected = rb.lease_names(self.lease_record())   # read before any write: a refused read changes nothing
        found = next((obj for obj in objects if kv.meta(obj).get("name") == name), None)
        result: Dict[str, Any] = {"name": name, "namespace": options.namespace, "object": "{0}/{1}".format(options.namespace, name),
                                  "dry_run": self.check_mode, "run_id": run_id}
        if found is not None:
            if rb.read_record(found).get("run_id") != run_id:
                raise BackupConflict("holds the backup of run {0!r}, not of {1!r}".format(rb.read_record(found).get("run_id"), run_id),
                                     "Give this run a run id of its own (the playbooks make one per run).", path=self.where(name))
            result.update(changed=False, created=False, kept_earlier=True, matches=(found.get("data") or {}) == contents,
                          files=sorted(found.get("data") or {}))
        else:
            me = this_run(options.launched_by)
            references = []
            for text in contents.values():
                references.extend(rb.scrub(rb.load_yaml(text))[1])
            record = {"run_id": run_id, "playbook": options.playbook, "cluster": options.cluster_name, "holder": me,
                      "created": rl.micro_time(self.now()), "files": sorted(options.files or {}),
                      "secret_references": references}
            body = rb.backup_body(name, options.namespace, run_id, options.cluster_name or "", options.playbook or "", contents, record)
            self.client.create(self.configmaps, body, options.namespace, dry_run=self.check_mode)
            result.update(changed=True, created=True, kept_earlier=False, matches=True, files=sorted(contents))
        pruned = self.prune(objects, protected, keep=[name])
        result.update(pruned)
        result["changed"] = result["changed"] or bool(pruned["pruned"])
        result["message"] = "{0} {1}{2}".format(
            "Would store" if self.check_mode and result["created"] else ("Stored" if result["created"] else "Kept the earlier backup of this run in"),
            result["object"], "; deleted the backups of runs {0} (retention {1})".format(", ".join(pruned["pruned"]), options.retention)
            if pruned["pruned"] else "")
        return result

    def prune(self, objects: List[dict], protected: Set[str], keep: List[str]) -> dict:
        prune = rb.to_prune(objects, self.options.retention, protected, keep=keep)
        deleted = []
        for obj in prune:
            meta = kv.meta(obj)
            self.client.delete(self.configmaps, meta["name"], self.options.namespace, preconditions={"uid": meta.get("uid")},
                               dry_run=self.check_mode)
            deleted.append(meta["name"])
        names = {kv.meta(obj).get("name") for obj in objects} | set(keep)
        held = sorted(full for full in protected if full.split("/", 1)[-1] in names)
        return {"pruned": deleted, "kept": sorted(names - set(deleted)), "protected_by_lease": held}

    # ---------------------------------------------------------------------------------- finished
    def finish(self) -> dict:
        options = self.options
        ended = rl.micro_time(self.now())
        changed = []
        own = self.mark(rb.object_name(options.run_id or ""), {"outcome": options.outcome, "ended": ended})
        if own:
            changed.append(own)
        if options.rollback_of:
            who = this_run(options.launched_by)
            undone = self.mark(rb.object_name(options.rollback_of), {"rolled_back_by": {
                "run_id": options.run_id, "outcome": options.outcome, "ended": ended, "who": rb.holder_line(who)}})
            if undone:
                changed.append(undone)
        return {"changed": bool(changed), "marked": changed, "dry_run": self.check_mode,
                "message": "Recorded run {0} {1} on {2}".format(options.run_id, options.outcome, ", ".join(changed))
                if changed else "No backup object of run {0} to record its outcome on".format(options.run_id)}

    def mark(self, name: str, changes: dict) -> Optional[str]:
        for attempt in (1, 2):
            found = self.read(name)
            if found is None:
                return None
            patch = rb.record_patch(found, changes)
            if patch is None:
                return None
            try:
                self.client.patch(self.configmaps, name, patch, self.options.namespace, dry_run=self.check_mode)
                return "{0}/{1}".format(self.options.namespace, name)
            except ApiFailure as failure:
                if failure.status != 409 or attempt == 2:
                    raise
        return None

    # ---------------------------------------------------------------------------------- history
    def history(self) -> dict:
        options = self.options
        objects = self.backups()
        record = self.lease_record()
        entries = rb.history(objects, record)
        result: Dict[str, Any] = {"changed": False, "runs": entries, "lines": rb.history_lines(entries), "lease_record": record,
                                  "backup": None, "dry_run": self.check_mode}
        wanted = None
        if options.backup_object:
            wanted = options.backup_object.split("/", 1)[-1]
        elif options.run_id:
            wanted = rb.object_name(options.run_id)
        if wanted:
            obj = next((o for o in objects if kv.meta(o).get("name") == wanted), None)
            if obj is not None:
                stored = rb.read_record(obj)
                result["backup"] = {"name": wanted, "namespace": options.namespace, "object": "{0}/{1}".format(options.namespace, wanted),
                                    "run_id": stored.get("run_id"), "playbook": stored.get("playbook"), "files": stored.get("files") or [],
                                    "contents": dict(obj.get("data") or {}), "record": stored}
        found = "" if not wanted else ("; backup {0} found" if result["backup"] else "; no backup object {0}").format(wanted)
        result["message"] = "{0} run(s) in {1}{2}".format(len(entries), options.namespace, found)
        return result


def run(options: RunBackupOptions, check_mode: bool, client: Optional[Client] = None,
        now: Optional[Callable[[], datetime.datetime]] = None) -> dict:
    """The module's entry: options checked, then the backup stored, the outcome recorded, or the history read."""
    contents = check_options(options)
    backups = RunBackups(options, client or Client.from_options(options.connection), check_mode,
                         now or (lambda: datetime.datetime.now(datetime.timezone.utc)))
    if options.state == "present":
        return backups.store(contents)
    if options.state == "finished":
        return backups.finish()
    return backups.history()
