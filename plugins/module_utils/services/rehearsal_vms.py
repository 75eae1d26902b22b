# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rehearsal's disposable namespace and test VMs: create them and wait until each runs and can live-migrate
(validation step 1: name, UID, node), or delete the namespace and wait until it is gone.

Only a namespace carrying the rehearsal's labels (`kube/rehearsal_objects.namespace_labels`) is ever written to or
deleted; any other is refused before the first write. Creation is idempotent (what exists is kept), deletion too
(a namespace already gone is nothing to do). A rehearsal namespace still Terminating (an earlier run's cleanup, or a
delete by hand) is waited for until it is gone, within `timeout`, before it is created again: the API refuses new
objects in a namespace being deleted. Waiting is by list + watch (`k8s.watch.WatchSet`), within `timeout`;
the client's bounded retries carry the requests through a burst of 5xx answers. Check mode creates nothing: the
namespace is created with server-side dry run, the rest is reported as it would be created.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.watch import Stream, WatchSet
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import rehearsal_objects as objects
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import live_migratable, meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import amount, pod_requests
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.rehearsal import RehearsalRefused

ARG_SPEC = {
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "namespace": {"type": "str", "default": "kubevirt-ops-rehearsal"},
    "run_id": {"type": "str", "default": ""},
    "vms": {"type": "list", "elements": "str", "default": []},
    "vm_memory": {"type": "str", "default": "1Gi"},
    "vm_labels": {"type": "dict", "default": {"app": "kubevirt-ops-rehearsal"}},
    "source": {"type": "str"},
    "destination": {"type": "str"},
    "storage_class": {"type": "str"},
    "pvc_size": {"type": "str", "default": "1Gi"},
    "volume_mode": {"type": "str", "choices": ["Block", "Filesystem"]},
    "image": {"type": "str", "default": "quay.io/kubevirt/cirros-container-disk-demo:v1.4.0"},
    "timeout": {"type": "int", "default": 600},
}


class VmsNotReady(RebalanceError):
    """The test VMs did not all run and become live-migratable within the timeout."""


class NamespaceNotGone(RebalanceError):
    """The rehearsal's namespace was still there at the timeout."""


@dataclasses.dataclass(frozen=True)
class RehearsalVmsOptions(ModuleOptions):
    """The options of rehearsal_vms, as ARG_SPEC parses them."""
    state: str
    namespace: str
    run_id: str
    vms: List[str]
    vm_memory: str
    vm_labels: Dict[str, str]
    source: Optional[str]
    destination: Optional[str]
    storage_class: Optional[str]
    pvc_size: str
    volume_mode: Optional[str]
    image: str
    timeout: int


def check_options(options: RehearsalVmsOptions) -> None:
    if not is_dns_label(options.namespace):
        raise InvalidOption("{0!r} is not a valid namespace name".format(options.namespace),
                            "Use lower-case letters, digits and '-', at most 63 characters.", path="namespace")
    if options.timeout <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give how long to wait, e.g. 600.", path="timeout")
    if options.state == "absent":
        return
    for field in ("source", "destination"):
        if not getattr(options, field):
            raise InvalidOption("is required with state=present", "Give the worker names that rehearsal_plan chose.", path=field)
    if not options.vms:
        raise InvalidOption("is empty", "Give the test VM names that rehearsal_plan chose (sizing.vm_names).", path="vms")
    try:
        amount("memory", options.vm_memory)
    except ValueError as error:
        raise InvalidOption("{0!r} is not a memory quantity".format(options.vm_memory), "Give e.g. 2816Mi.", path="vm_memory") from error


def owned_namespace(client: Client, name: str) -> Optional[dict]:
    """The namespace when it is the rehearsal's, None when it does not exist; refused when it is someone else's."""
    found = client.get(client.require_kind("Namespace"), name)
    if found is not None and not objects.is_rehearsal_namespace(found):
        raise RehearsalRefused(
            objects.foreign_namespace_problem(name),
            "Give another rehearse_namespace; the rehearsal never writes to a namespace it did not create.", path="namespace")
    return found


def is_terminating(namespace: Optional[dict]) -> bool:
    return bool(namespace and meta(namespace).get("deletionTimestamp"))


def wait_until_gone(client: Client, name: str, deadline: float, clock: Callable[[], float]) -> Optional[dict]:
    """Watch the namespace `name` until it is gone: None then, else the namespace as last seen at `deadline`."""
    watchset = WatchSet(client, [Stream("namespace", client.require_kind("Namespace"), field_selector="metadata.name=" + name)],
                        deadline, clock=clock)
    watchset.start()
    try:
        gone = watchset.wait(lambda ws: not ws.objects("namespace"))
    finally:
        watchset.stop()
    return None if gone else (watchset.objects("namespace") or [{}])[0]


def still_terminating_problem(name: str, namespace: dict, timeout: int) -> str:
    """Why the rehearsal cannot start: the namespace of an earlier run is still being deleted, and what holds it (the
    namespace deleter's conditions that are True: content left, finalizers)."""
    holding = [c["message"] for c in (namespace.get("status") or {}).get("conditions") or [] if c.get("status") == "True" and c.get("message")]
    return "namespace {0} of an earlier rehearsal (run {1}) is still Terminating after {2}s{3}".format(
        name, (meta(namespace).get("annotations") or {}).get(objects.RUN_ANNOTATION, "unknown"), timeout,
        ": " + "; ".join(holding) if holding else "")


def still_terminating_fix(name: str) -> str:
    return ("Look at what holds it: kubectl get namespace {0} -o yaml (status.conditions name the content and finalizers left); "
            "rehearse again once it is gone.".format(name))


# ------------------------------------------------------------------------------------------ present
def wanted_objects(options: RehearsalVmsOptions) -> List[tuple]:
    """(kind, group, object) in creation order: the PVCs before the VMs that mount them."""
    guest = amount("memory", options.vm_memory)
    result = []
    for name in options.vms:
        if options.storage_class:
            claim = objects.pvc_object(name, options.namespace, options.storage_class, options.pvc_size, options.volume_mode, options.vm_labels)
            result.append(("PersistentVolumeClaim", None, claim))
    for name in options.vms:
        vm = objects.vm_object(name, options.namespace, guest, options.vm_labels, options.source, options.destination, options.image,
                               options.storage_class)
        result.append(("VirtualMachine", "kubevirt.io", vm))
    return result


def vm_record(vmi: Optional[dict], pods: List[dict]) -> dict:
    """Validation step 1 for one VM: name, UID, node, phase, migratability, and its launcher's memory request."""
    if vmi is None:
        return {"uid": None, "node": None, "phase": None, "live_migratable": False, "reason": "no VMI yet", "launcher": None,
                "launcher_memory": None}
    status = vmi.get("status") or {}
    migratable = live_migratable(vmi)
    launcher = next((p for p in pods if (meta(p).get("labels") or {}).get("vm.kubevirt.io/name") == meta(vmi)["name"]
                     and (p.get("spec") or {}).get("nodeName") == status.get("nodeName")
                     and (p.get("status") or {}).get("phase") == "Running"), None)
    memory = pod_requests(launcher).get("memory") if launcher else None
    return {"uid": meta(vmi).get("uid"), "node": status.get("nodeName"), "phase": status.get("phase"),
            "live_migratable": migratable["migratable"], "reason": migratable["message"] or migratable["reason"],
            "launcher": meta(launcher).get("name") if launcher else None, "launcher_memory": memory}


def _ready(record: dict) -> bool:
    return record["phase"] == "Running" and record["live_migratable"] and record["launcher"] is not None


def present(options: RehearsalVmsOptions, check_mode: bool, client: Client, clock: Callable[[], float]) -> dict:
    started = clock()
    namespace_kind = client.require_kind("Namespace")
    created: List[str] = []
    found = owned_namespace(client, options.namespace)
    if is_terminating(found) and not check_mode:
        found = wait_until_gone(client, options.namespace, started + options.timeout, clock)
        if found is not None:
            raise NamespaceNotGone(still_terminating_problem(options.namespace, found, options.timeout),
                                   still_terminating_fix(options.namespace), path="timeout",
                                   result={"changed": False, "created": [], "vms": [], "waited_seconds": round(clock() - started, 3)})
    if found is None:
        client.create(namespace_kind, objects.namespace_object(options.namespace, options.run_id), dry_run=check_mode)
        created.append("Namespace/" + options.namespace)
    if check_mode:
        created += ["{0}/{1}".format(kind, meta(obj)["name"]) for kind, _group, obj in wanted_objects(options)]
        return {"changed": True, "created": created, "vms": [], "waited_seconds": 0.0}
    for kind, group, obj in wanted_objects(options):
        resource = client.require_kind(kind, group)
        if client.get(resource, meta(obj)["name"], options.namespace) is None:
            client.create(resource, obj, namespace=options.namespace)
            created.append("{0}/{1}".format(kind, meta(obj)["name"]))
    streams = [Stream("vmis", client.require_kind("VirtualMachineInstance", "kubevirt.io"), options.namespace),
               Stream("pods", client.require_kind("Pod"), options.namespace)]
    watchset = WatchSet(client, streams, started + options.timeout, clock=clock)

    def records(ws: WatchSet) -> Dict[str, dict]:
        vmis = {meta(v)["name"]: v for v in ws.objects("vmis")}
        return {name: dict(vm_record(vmis.get(name), ws.objects("pods")), name=name) for name in options.vms}

    watchset.start()
    try:
        done = watchset.wait(lambda ws: all(_ready(r) for r in records(ws).values()))
    finally:
        watchset.stop()
    vms = list(records(watchset).values())
    result = {"changed": bool(created), "created": created, "vms": vms, "waited_seconds": round(clock() - started, 3)}
    if not done:
        waiting = ["{0} ({1}{2})".format(r["name"], r["phase"] or "no VMI", "" if r["live_migratable"] else ", not live-migratable: {0}".format(
            r["reason"] or "no LiveMigratable condition")) for r in vms if not _ready(r)]
        raise VmsNotReady(
            "{0} of {1} test VMs not Running and live-migratable after {2}s: {3}".format(
                len(waiting), len(vms), options.timeout, ", ".join(waiting)),
            "Look at them with kubectl -n {0} get vmi,pods and their events (image pull, storage, scheduling); the cleanup removes "
            "the namespace.".format(options.namespace), path="timeout", result=result)
    return result


# ------------------------------------------------------------------------------------------ absent
def absent(options: RehearsalVmsOptions, check_mode: bool, client: Client, clock: Callable[[], float]) -> dict:
    started = clock()
    namespace_kind = client.require_kind("Namespace")
    found = owned_namespace(client, options.namespace)
    if found is None:
        return {"changed": False, "removed": [], "left": [], "waited_seconds": 0.0}
    if check_mode:
        client.delete(namespace_kind, options.namespace, dry_run=True)
        return {"changed": True, "removed": ["Namespace/" + options.namespace], "left": [], "waited_seconds": 0.0}
    if not is_terminating(found):
        client.delete(namespace_kind, options.namespace, preconditions={"uid": meta(found).get("uid")}, propagation_policy="Background")
    left = wait_until_gone(client, options.namespace, started + options.timeout, clock)
    result = {"changed": True, "removed": ["Namespace/" + options.namespace], "left": [], "waited_seconds": round(clock() - started, 3)}
    if left is not None:
        phase = (left.get("status") or {}).get("phase")
        result.update(removed=[], left=["Namespace/{0} ({1})".format(options.namespace, phase or "still there")])
        raise NamespaceNotGone(
            "namespace {0} still exists ({1}) after {2}s".format(options.namespace, phase or "not deleted", options.timeout),
            "Look at what holds it: kubectl get namespace {0} -o yaml (status.conditions name the finalizers and the content "
            "left); run the cleanup again when it is gone.".format(options.namespace), path="timeout", result=result)
    return result


def run(options: RehearsalVmsOptions, check_mode: bool, client: Optional[Client] = None, clock: Callable[[], float] = time.monotonic) -> dict:
    """Create (state=present) or delete (state=absent) the rehearsal's namespace and test VMs; the module result."""
    check_options(options)
    client = client or Client.from_options(options.connection, extra_timeout=options.timeout)
    handler = present if options.state == "present" else absent
    result: Dict[str, Any] = handler(options, check_mode, client, clock)
    result["namespace"] = options.namespace
    return result
