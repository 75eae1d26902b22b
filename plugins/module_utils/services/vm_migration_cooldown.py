# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vm_migration_cooldown`: keep the VMs that migrated recently, or migrate now, out of the Descheduler's next runs.

Reads the VirtualMachineInstanceMigrations, the VMIs and the virt-launcher Pods in scope in a constant number of list
calls (one per kind, or per kind and namespace with `namespaces`), decides per VM with `checks.cooldown` and writes the
marks as merge patches of the launcher Pods' annotations: a mark on the Pod that runs the VMI now, a lift of every
mark of ours that is no longer due. In check mode the same patches go as server-side dry runs. With `check_policy`,
the live policy is read (the installation's workload, its policy ConfigMap) to say whether the Descheduler honours
the marks (`noEvictionPolicy: Mandatory`). `state: absent` lifts every mark of ours in scope and reads only the Pods.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import cooldown as cd
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import DeschedulerInstallation
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, KindNotServed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import check_location
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import (
    Requirement,
    is_dns_label,
    matches_selector_string,
    parse_label_selector,
)

ARG_SPEC = {
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "namespaces": {"type": "list", "elements": "str", "aliases": ["namespace"]},
    "label_selector": {"type": "str", "aliases": ["vm_selector"]},
    "cooldown": {"type": "raw", "default": "15m"},
    "max_cooldown": {"type": "raw", "default": "6h"},
    "history_window": {"type": "raw", "default": "6h"},
    "check_policy": {"type": "bool", "default": True},
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
}
KINDS = {"pods": ("Pod", ""), "vmis": ("VirtualMachineInstance", "kubevirt.io"), "vmims": ("VirtualMachineInstanceMigration", "kubevirt.io")}
KUBEVIRT_FIX = "Install KubeVirt on this cluster, or point the connection at the cluster that runs the VMs."


# ------------------------------------------------------------------------------------------ options
@dataclasses.dataclass(frozen=True)
class VmMigrationCooldownOptions(ModuleOptions):
    """The options of vm_migration_cooldown, as ARG_SPEC parses them."""
    state: str
    namespaces: Optional[List[str]]
    label_selector: Optional[str]
    cooldown: Any
    max_cooldown: Any
    history_window: Any
    check_policy: bool
    descheduler_namespace: str
    descheduler_name: str


@dataclasses.dataclass(frozen=True)
class Settings:
    """The options checked: scope, durations in seconds, the installation whose policy is checked."""
    state: str
    namespaces: Tuple[str, ...]
    label_selector: Optional[str]
    requirements: Tuple[Requirement, ...]
    cooldown: int
    max_cooldown: int
    history_window: int
    check_policy: bool
    descheduler_namespace: str
    descheduler_name: str


def duration(value: Any, path: str, example: str) -> int:
    try:
        seconds = cd.parse_duration(value)
    except ValueError as error:
        raise InvalidOption(str(error), "Give seconds or a duration such as {0} (units d, h, m, s).".format(example), path=path) from error
    if seconds <= 0:
        raise InvalidOption("must be more than 0 seconds", "Give seconds or a duration such as {0}.".format(example), path=path)
    return seconds


def settings(options: VmMigrationCooldownOptions) -> Settings:
    """The options checked before any request; InvalidOption names the option."""
    namespaces = sorted({n.strip() for n in options.namespaces or [] if n and n.strip()})
    for namespace in namespaces:
        if not is_dns_label(namespace):
            raise InvalidOption("{0!r} is not a valid namespace name".format(namespace), "Give the namespaces of the VMs, or none for all.",
                                path="namespaces")
    selector = (options.label_selector or "").strip() or None
    try:
        requirements = parse_label_selector(selector)
    except ValueError as error:
        raise InvalidOption(str(error), "Write a Kubernetes label selector of the VMs, such as 'app=desched-test'.", path="label_selector") from error
    check_location(options.descheduler_namespace, options.descheduler_name)
    base = duration(options.cooldown, "cooldown", "15m")
    cap = duration(options.max_cooldown, "max_cooldown", "6h")
    if cap < base:
        raise InvalidOption("{0}s is less than cooldown ({1}s)".format(cap, base), "Give a max_cooldown of at least the cooldown, e.g. 6h.",
                            path="max_cooldown")
    return Settings(state=options.state, namespaces=tuple(namespaces), label_selector=selector, requirements=tuple(requirements),
                    cooldown=base, max_cooldown=cap, history_window=duration(options.history_window, "history_window", "6h"),
                    check_policy=options.check_policy, descheduler_namespace=options.descheduler_namespace,
                    descheduler_name=options.descheduler_name)


# ------------------------------------------------------------------------------------------ reading
class Reader:
    """The lists of the run: each kind once, or once per namespace in scope."""

    def __init__(self, client: Client, scope: Settings) -> None:
        self.client = client
        self.scope = scope
        found = client.find_kinds(KINDS.values())
        self.resources = {key: found[kind] for key, kind in KINDS.items()}
        for key in ("vmis", "vmims") if scope.state == "present" else ():  # lifting marks needs only the Pods
            if self.resources[key] is None:
                raise KindNotServed(KINDS[key][0], KINDS[key][1], fix=KUBEVIRT_FIX)

    def list(self, key: str, label_selector: Optional[str] = None) -> List[dict]:
        resource = self.resources[key]
        if not self.scope.namespaces:
            return self.client.list(resource, label_selector=label_selector)
        items: List[dict] = []
        for namespace in self.scope.namespaces:
            items.extend(self.client.list(resource, namespace=namespace, label_selector=label_selector))
        return items

    def launchers(self) -> List[dict]:
        """The live launcher Pods in scope (the label selector of the VMs applies to them too: KubeVirt copies the VMI's labels)."""
        return [pod for pod in self.list("pods", kv.LAUNCHER_SELECTOR)
                if matches_selector_string(list(self.scope.requirements), kv.labels(pod)) and live(pod)]


def live(pod: dict) -> bool:
    """Neither finished nor being deleted: a Pod the Descheduler could still evict."""
    return (pod.get("status") or {}).get("phase") not in kv.TERMINAL_POD_PHASES and not kv.meta(pod).get("deletionTimestamp")


def pod_vm(pod: dict) -> Optional[str]:
    """The VMI a launcher runs: its VMI ownerReference, else the `vm.kubevirt.io/name` label."""
    for owner in kv.meta(pod).get("ownerReferences") or []:
        if owner.get("kind") == "VirtualMachineInstance":
            return owner.get("name")
    return kv.labels(pod).get("vm.kubevirt.io/name")


def policy_check(client: Client, scope: Settings) -> List[dict]:
    """The findings on the live policy: does the Descheduler honour the marks."""
    installation = DeschedulerInstallation(client, scope.descheduler_namespace, scope.descheduler_name)
    kind, workload = installation.workload()
    if workload is None:
        return cd.policy_findings(None, "no Descheduler CronJob or Deployment found", scope.descheduler_namespace, scope.descheduler_name,
                                  desched.POLICY_KEY)
    name, key = installation.policy_source(kind, workload)
    configmap = client.get(client.require_kind("ConfigMap", ""), name, scope.descheduler_namespace)
    if configmap is None:
        return cd.policy_findings(None, "not found", scope.descheduler_namespace, name, key)
    text = (configmap.get("data") or {}).get(key)
    policy, error = desched.parse_policy(text)
    return cd.policy_findings(policy, error, scope.descheduler_namespace, name, key)


# ------------------------------------------------------------------------------------------ deciding
def _key(pod: dict) -> str:
    return "{0}/{1}".format(kv.meta(pod).get("namespace"), kv.meta(pod).get("name"))


def row(decision: Optional[dict], pod: Optional[dict], namespace: str, vm: Optional[str]) -> dict:
    """One VM as the module reports it."""
    decision = decision or {}
    return {"namespace": namespace, "vm": vm, "pod": kv.meta(pod).get("name") if pod else None,
            "node": (pod.get("spec") or {}).get("nodeName") if pod else None,
            "last_migration": decision.get("last_migration"), "migrations_in_window": decision.get("migrations_in_window", 0),
            "migrating": decision.get("migrating", False), "cooldown_seconds": decision.get("cooldown_seconds", 0),
            "until": decision.get("until") or (cd.mark_state(pod)["until"] if pod else None)}


def plan(scope: Settings, vmis: List[dict], vmims: List[dict], pods: List[dict], now: datetime.datetime) -> List[dict]:
    """Every VM in its cooldown or with migrations in the window (`decided`), and every other launcher with a mark of
    ours: what to do with each (`action`: mark, keep, lift, skip, none), with the row the module reports and the Pod to
    patch."""
    decided: Dict[str, dict] = {}  # launcher namespace/name -> the decision of the VM it runs now
    actions: List[dict] = []
    if scope.state == "present":
        past = cd.history(vmims, now - datetime.timedelta(seconds=scope.history_window))
        launchers = kv.index_launchers(pods)
        for vmi in vmis:
            namespace, name = kv.ref(vmi)
            decision = cd.decide(namespace, name, past.get((namespace, name)), now, scope.cooldown, scope.max_cooldown)
            if not decision["due"] and not decision["migrations_in_window"]:
                continue
            pod = kv.find_launcher(vmi, launchers.get(kv.meta(vmi).get("uid"), []))
            if pod is None:
                if decision["due"]:
                    actions.append({"action": "skip", "reason": "no live virt-launcher Pod on its node {0}".format(
                        (vmi.get("status") or {}).get("nodeName")), "pod": None, "row": row(decision, None, namespace, name), "decided": True})
                continue
            decided[_key(pod)] = decision
            action, reason = cd.pod_action(pod, decision)
            actions.append({"action": action, "reason": reason, "pod": pod, "row": row(decision, pod, namespace, name), "decided": True})
    for pod in pods:
        if _key(pod) in decided:
            continue
        action, _reason = cd.pod_action(pod, None)
        if action == "lift":
            actions.append({"action": action, "reason": None, "pod": pod, "row": row(None, pod, kv.meta(pod).get("namespace"), pod_vm(pod)),
                            "decided": False})
    actions.sort(key=lambda a: (a["row"]["namespace"] or "", a["row"]["vm"] or "", a["row"]["pod"] or ""))
    return actions


# ------------------------------------------------------------------------------------------ the run
def apply(client: Client, resource: Any, actions: List[dict], check_mode: bool) -> Dict[str, Any]:
    """The patches of the marks and lifts (server-side dry runs in check mode); a Pod gone since the list is skipped."""
    outcome: Dict[str, Any] = {"marked": [], "kept": [], "lifted": [], "not_marked": [], "before": {}, "after": {}}
    for item in actions:
        action, pod, entry = item["action"], item["pod"], item["row"]
        if action == "none":
            continue
        if action in ("keep", "skip"):
            outcome["kept" if action == "keep" else "not_marked"].append(dict(entry, **({"reason": item["reason"]} if action == "skip" else {})))
            continue
        body = cd.mark_patch(entry["until"]) if action == "mark" else cd.lift_patch()
        meta = kv.meta(pod)
        try:
            answer = client.patch(resource, meta.get("name"), body, namespace=meta.get("namespace"), dry_run=check_mode,
                                  request="{0} the cooldown on pod {1}".format("mark" if action == "mark" else "lift", _key(pod)))
        except ApiFailure as failure:
            if failure.status != 404:
                raise
            outcome["not_marked"].append(dict(entry, reason="the Pod is gone since it was listed"))
            continue
        outcome["before"][_key(pod)] = cd.annotations_shown(pod)
        outcome["after"][_key(pod)] = cd.annotations_shown(answer)
        outcome["marked" if action == "mark" else "lifted"].append(entry)
    return outcome


def run(options: VmMigrationCooldownOptions, check_mode: bool, client: Optional[Client] = None,
        now: Optional[Callable[[], datetime.datetime]] = None) -> dict:
    """The module's entry: the options checked, the cluster read, the marks applied and lifted; the module result."""
    scope = settings(options)
    client = client or Client.from_options(options.connection)
    reader = Reader(client, scope)
    pods = reader.launchers()
    vmis: List[dict] = []
    vmims: List[dict] = []
    if scope.state == "present":
        vmis = reader.list("vmis", scope.label_selector)
        vmims = reader.list("vmims")
    local = (now or (lambda: datetime.datetime.now(datetime.timezone.utc)))()
    current, clock = cd.reference_now(local, vmims + vmis + pods)
    findings = policy_check(client, scope) if scope.check_policy and scope.state == "present" else []  # reads before any write
    actions = plan(scope, vmis, vmims, pods, current)
    outcome = apply(client, reader.resources["pods"], actions, check_mode)
    changed = bool(outcome["marked"] or outcome["lifted"])
    result: Dict[str, Any] = {
        "changed": changed, "state": scope.state, "dry_run": check_mode,
        "marked": outcome["marked"], "kept": outcome["kept"], "lifted": outcome["lifted"], "not_marked": outcome["not_marked"],
        "vms": [a["row"] for a in actions if a["decided"]],
        "findings": findings, "clock": clock,
        "settings": {"cooldown_seconds": scope.cooldown, "max_cooldown_seconds": scope.max_cooldown,
                     "history_window_seconds": scope.history_window},
    }
    if changed:
        result["diff"] = {"before": outcome["before"], "after": outcome["after"],
                          "before_header": "launcher Pod annotations (before)", "after_header": "launcher Pod annotations (after)"}
    return result
