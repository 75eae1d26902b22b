"""An in-memory stand-in for the collection's Client, for the cooldown and storm breaker services: discovery of the kinds
it holds, lists by namespace and label selector, get, merge patches and deletes (dry runs store nothing, as the API
server's), and watches scripted per call, with every request recorded."""
from __future__ import annotations

import copy
import threading
from typing import Any, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import matches_selector_string, parse_label_selector
from kubesim.patching import json_merge_patch  # the simulator's RFC 7386 merge patch, as the API server applies it

from ..fake_api import resource

KINDS = {
    "Pod": resource("Pod", "pods"),
    "ConfigMap": resource("ConfigMap", "configmaps"),
    "CronJob": resource("CronJob", "cronjobs", "batch"),
    "Deployment": resource("Deployment", "deployments", "apps"),
    "Job": resource("Job", "jobs", "batch"),
    "VirtualMachineInstance": resource("VirtualMachineInstance", "virtualmachineinstances", "kubevirt.io"),
    "VirtualMachineInstanceMigration": resource("VirtualMachineInstanceMigration", "virtualmachineinstancemigrations", "kubevirt.io"),
    "ResourcePatch": resource("ResourcePatch", "resourcepatches", "operator.alauda.io", "v1alpha1"),
    "Lease": resource("Lease", "leases", "coordination.k8s.io"),
}


class MemoryCluster:
    """Objects by kind; `served` names the kinds discovery finds (all of KINDS by default)."""

    def __init__(self, objects: List[dict], served: Optional[List[str]] = None, watches: Optional[List[List[dict]]] = None) -> None:
        self.objects: Dict[str, List[dict]] = {}
        for obj in objects:
            self.objects.setdefault(obj["kind"], []).append(copy.deepcopy(obj))
        self.served = set(served if served is not None else KINDS)
        self.watches = list(watches or [])
        self.requests: List[tuple] = []
        self.last_resource_version: Optional[str] = None
        self.idle = threading.Event()

    # ---------------------------------------------------------------------------------- discovery
    def find_kind(self, kind: str, group: Optional[str] = None) -> Any:
        return KINDS[kind] if kind in self.served else None

    def find_kinds(self, wanted):
        return {(kind, group): self.find_kind(kind, group) for kind, group in wanted}

    def require_kind(self, kind: str, group: Optional[str] = None, fix: Optional[str] = None) -> Any:
        found = self.find_kind(kind, group)
        assert found is not None, kind
        return found

    # ---------------------------------------------------------------------------------- reads
    def list(self, res: Any, namespace: Optional[str] = None, label_selector: Optional[str] = None, field_selector: Optional[str] = None):
        self.requests.append(("list", res.kind, namespace, label_selector))
        requirements = parse_label_selector(label_selector)
        self.last_resource_version = "100"
        return [copy.deepcopy(o) for o in self.objects.get(res.kind, [])
                if (namespace is None or o["metadata"].get("namespace") == namespace)
                and matches_selector_string(requirements, o["metadata"].get("labels") or {})]

    def find(self, kind: str, name: str, namespace: Optional[str]) -> Optional[dict]:
        return next((o for o in self.objects.get(kind, []) if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace), None)

    def get(self, res: Any, name: str, namespace: Optional[str] = None) -> Optional[dict]:
        self.requests.append(("get", res.kind, namespace, name))
        found = self.find(res.kind, name, namespace)
        return copy.deepcopy(found) if found else None

    # ---------------------------------------------------------------------------------- writes
    def patch(self, res: Any, name: str, body: Any, namespace: Optional[str] = None, patch_type: str = "merge", dry_run: bool = False,
              request: Optional[str] = None) -> dict:
        assert patch_type == "merge"
        self.requests.append(("patch", res.kind, namespace, name, copy.deepcopy(body), dry_run))
        found = self.find(res.kind, name, namespace)
        if found is None:
            raise ApiFailure(request or "patch", 404, "NotFound", '{0} "{1}" not found'.format(res.name, name))
        changed = json_merge_patch(found, body)
        if changed.get("metadata", {}).get("annotations") == {}:
            del changed["metadata"]["annotations"]
        if not dry_run:
            found.clear()
            found.update(changed)
        return copy.deepcopy(changed)

    def create(self, res: Any, body: dict, namespace: Optional[str] = None, dry_run: bool = False) -> dict:
        """POST: 409 AlreadyExists for a taken name; the stored object gets resourceVersion 1."""
        self.requests.append(("create", res.kind, namespace, body["metadata"]["name"], copy.deepcopy(body), dry_run))
        if self.find(res.kind, body["metadata"]["name"], namespace) is not None:
            raise ApiFailure("create", 409, "AlreadyExists", '{0} "{1}" already exists'.format(res.name, body["metadata"]["name"]))
        stored = copy.deepcopy(body)
        stored["metadata"].update(namespace=namespace, resourceVersion="1")
        if not dry_run:
            self.objects.setdefault(res.kind, []).append(copy.deepcopy(stored))
        return stored

    def replace(self, res: Any, body: dict, namespace: Optional[str] = None, dry_run: bool = False, request: Optional[str] = None) -> dict:
        """PUT with the object's resourceVersion: 409 Conflict when it changed since; the stored one's version + 1."""
        name = body["metadata"]["name"]
        self.requests.append(("replace", res.kind, namespace, name, copy.deepcopy(body), dry_run))
        found = self.find(res.kind, name, namespace)
        if found is None:
            raise ApiFailure(request or "update", 404, "NotFound", '{0} "{1}" not found'.format(res.name, name))
        if body["metadata"].get("resourceVersion") != found["metadata"].get("resourceVersion"):
            raise ApiFailure(request or "update", 409, "Conflict", "the object has been modified; please apply your changes to the latest "
                                                                   "version and try again")
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(int(found["metadata"]["resourceVersion"]) + 1)
        if not dry_run:
            found.clear()
            found.update(copy.deepcopy(stored))
        return stored

    def delete(self, res: Any, name: str, namespace: Optional[str] = None, dry_run: bool = False, request: Optional[str] = None, **_options):
        self.requests.append(("delete", res.kind, namespace, name, dry_run))
        if not dry_run:
            self.objects[res.kind] = [o for o in self.objects.get(res.kind, []) if o["metadata"]["name"] != name]
        return {"kind": "Status", "status": "Success"}

    def writes(self) -> List[tuple]:
        return [r for r in self.requests if r[0] in ("patch", "delete", "create", "replace")]

    # ---------------------------------------------------------------------------------- watches
    def watch(self, res: Any, namespace=None, label_selector=None, resource_version=None, timeout=60, field_selector=None):
        """The next scripted batch of events, then an idle watch until the server's timeout (short here)."""
        self.requests.append(("watch", res.kind, namespace, resource_version))
        events, self.watches = (self.watches[0], self.watches[1:]) if self.watches else ([], [])
        yield from events
        self.idle.wait(timeout=min(timeout, 0.3))
