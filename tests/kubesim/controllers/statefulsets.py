"""The StatefulSet controller: Pods `<set>-0` .. `<set>-<replicas-1>` with a stable identity, and their claims.

A Pod is built from the template (generateName `<set>-`, a controller ownerReference) and named
`<set>-<ordinal>`, with `spec.hostname` = its name, `spec.subdomain` = `spec.serviceName`, and the labels
`controller-revision-hash` (`<set>-<template hash>`), `statefulset.kubernetes.io/pod-name` and
`apps.kubernetes.io/pod-index`. Each `volumeClaimTemplates` entry becomes a PersistentVolumeClaim
`<claim>-<set>-<ordinal>` (labels: the template's plus the selector's matchLabels; created before the Pod,
kept when the Pod or the set goes: the default Retain policy) and a volume of the same name in the Pod.

`OrderedReady` (default) creates one Pod at a time in ordinal order, the next once its predecessor is
Running and Ready, and scales down from the highest ordinal, one at a time, waiting for each to go;
`Parallel` creates and deletes them all at once. A deleted, failed or succeeded Pod is replaced with the
same name. `RollingUpdate` (a template change = a new update revision) deletes the highest-ordinal Pod at
or above `partition` not at the update revision, once every Pod is healthy, and so on down; `OnDelete`
waits for the user. Status: `observedGeneration`, `replicas`, `readyReplicas`, `currentReplicas`,
`updatedReplicas`, `availableReplicas`, `currentRevision`, `updateRevision` (the current one follows once a
rolling update has every Pod updated and ready), `collisionCount`. Events `SuccessfulCreate` "create Pod
web-0 in StatefulSet web successful", `SuccessfulDelete`, and "create Claim www-web-0 Pod web-0 in
StatefulSet web success".

Upstream: pkg/controller/statefulset (stateful_set_control.go, stateful_set_utils.go,
stateful_pod_control.go). Simplified: no ControllerRevision objects (the revision names have the upstream
form, the hash is the simulator's, see workloads.template_hash), so a recreated Pod below the partition
gets the update revision's template; `minReadySeconds` is ignored (a ready Pod is available); no
`maxUnavailable`, no `ordinals.start`, no claim retention policies other than Retain, no adoption of
orphan Pods."""
from __future__ import annotations

import copy
import re

from .. import events
from ..errors import ApiError
from .workloads import (OwnerController, is_ready, is_terminal, owned, pod_from_template, template_hash,
                        write_status)

COMPONENT = "statefulset-controller"
_KEY = "statefulsets.apps"
_REVISION = "controller-revision-hash"
_POD_NAME = "statefulset.kubernetes.io/pod-name"
_POD_INDEX = "apps.kubernetes.io/pod-index"


def _ordinal(set_name: str, pod: dict) -> int | None:
    match = re.fullmatch(re.escape(set_name) + r"-(\d+)", pod["metadata"]["name"])
    return int(match.group(1)) if match else None


def _running_and_ready(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod)


def _terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def claim_name(template: dict, set_name: str, ordinal: int) -> str:
    return f"{template['metadata']['name']}-{set_name}-{ordinal}"


class StatefulSetController(OwnerController):
    resource_key = _KEY
    owner_kind = "StatefulSet"
    owner_group = "apps"
    keys = (_KEY, "pods")

    def reconcile(self, owner: dict) -> None:
        sts = owner
        name, spec = sts["metadata"]["name"], sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        status = sts.get("status") or {}
        update_revision = f"{name}-{template_hash(spec.get('template') or {}, int(status.get('collisionCount', 0)))}"
        pods = {}
        for pod in owned(self.cluster, sts["metadata"]["uid"], "pods"):
            ordinal = _ordinal(name, pod)
            if ordinal is not None:
                pods[ordinal] = pod
        ordered = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        if self._scale_up(sts, pods, replicas, update_revision, ordered) and \
                self._scale_down(sts, pods, replicas, ordered):
            self._roll(sts, pods, replicas, update_revision)
        self._write_status(sts, update_revision)

    # ------------------------------------------------------------------------------ replicas
    def _scale_up(self, sts: dict, pods: dict[int, dict], replicas: int, revision: str, ordered: bool) -> bool:
        """Create missing Pods and replace finished ones; False when OrderedReady has to wait."""
        for ordinal in range(replicas):
            pod = pods.get(ordinal)
            if pod is not None and is_terminal(pod) and not _terminating(pod):
                self._delete(sts, pod)   # replaced under the same name once it is gone
                pod = self._current(pod)
                if pod is None:
                    del pods[ordinal]
                else:
                    pods[ordinal] = pod
            if pod is None:
                created = self._create(sts, ordinal, revision)
                if created is not None:
                    pods[ordinal] = created
                if ordered:
                    return False
                continue
            if ordered and (_terminating(pod) or not _running_and_ready(pod)):
                return False
        return True

    def _scale_down(self, sts: dict, pods: dict[int, dict], replicas: int, ordered: bool) -> bool:
        """Delete Pods at ordinals >= replicas, highest first; False when OrderedReady has to wait."""
        for ordinal in sorted((o for o in pods if o >= replicas), reverse=True):
            pod = pods[ordinal]
            if _terminating(pod):
                if ordered:
                    return False
                continue
            self._delete(sts, pod)
            if ordered:
                return False
        return True

    def _roll(self, sts: dict, pods: dict[int, dict], replicas: int, revision: str) -> None:
        """RollingUpdate: from the highest ordinal down to the partition, replace one outdated Pod at a time."""
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0))
        for ordinal in range(replicas - 1, partition - 1, -1):
            pod = pods.get(ordinal)
            if pod is None:
                return
            if _revision(pod) != revision and not _terminating(pod):
                self._delete(sts, pod)
                return
            if _terminating(pod) or not _running_and_ready(pod):
                return

    # ------------------------------------------------------------------------------ writes
    def _create(self, sts: dict, ordinal: int, revision: str) -> dict | None:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        pod_name = f"{meta['name']}-{ordinal}"
        body = pod_from_template(spec.get("template") or {}, meta["namespace"], sts, f"{meta['name']}-", {
            _REVISION: revision, _POD_NAME: pod_name, _POD_INDEX: str(ordinal)})
        body["metadata"]["name"] = pod_name
        pod_spec = body["spec"]
        pod_spec["hostname"] = pod_name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        claims = spec.get("volumeClaimTemplates") or []
        if not self._create_claims(sts, claims, ordinal, pod_name):
            return None
        claim_names = {c["metadata"]["name"] for c in claims}
        pod_spec["volumes"] = [{"name": c["metadata"]["name"],
                                "persistentVolumeClaim": {"claimName": claim_name(c, meta["name"], ordinal)}}
                               for c in claims] + [v for v in pod_spec.get("volumes") or []
                                                   if v.get("name") not in claim_names]
        if not pod_spec["volumes"]:
            del pod_spec["volumes"]
        try:
            pod = self.cluster.create(self.cluster.registry.by_key("pods"), meta["namespace"], body)
        except ApiError as err:
            self._event(sts, "Warning", "FailedCreate",
                        f"create Pod {pod_name} in StatefulSet {meta['name']} failed error: {err.message}")
            return None
        self._event(sts, "Normal", "SuccessfulCreate",
                    f"create Pod {pod_name} in StatefulSet {meta['name']} successful")
        return pod

    def _create_claims(self, sts: dict, claims: list[dict], ordinal: int, pod_name: str) -> bool:
        meta = sts["metadata"]
        pvcs = self.cluster.registry.by_key("persistentvolumeclaims")
        selector_labels = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        for template in claims:
            name = claim_name(template, meta["name"], ordinal)
            if pvcs is None or self.cluster.store.get(pvcs.key, meta["namespace"], name) is not None:
                continue
            claim_meta = copy.deepcopy(template.get("metadata") or {})
            claim_meta.update(name=name, namespace=meta["namespace"],
                              labels={**(claim_meta.get("labels") or {}), **selector_labels})
            body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
                    "spec": copy.deepcopy(template.get("spec") or {})}
            try:
                self.cluster.create(pvcs, meta["namespace"], body)
            except ApiError as err:
                self._event(sts, "Warning", "FailedCreate", f"create Claim {name} for Pod {pod_name} in StatefulSet "
                            f"{meta['name']} failed error: {err.message}")
                return False
            self._event(sts, "Normal", "SuccessfulCreate",
                        f"create Claim {name} Pod {pod_name} in StatefulSet {meta['name']} success")
        return True

    def _delete(self, sts: dict, pod: dict) -> None:
        pods = self.cluster.registry.by_key("pods")
        meta = pod["metadata"]
        try:
            self.cluster.delete(pods, meta["namespace"], meta["name"], {"preconditions": {"uid": meta["uid"]}})
        except ApiError as err:
            self._event(sts, "Warning", "FailedDelete", f"delete Pod {meta['name']} in StatefulSet "
                        f"{sts['metadata']['name']} failed error: {err.message}")
            return
        self._event(sts, "Normal", "SuccessfulDelete",
                    f"delete Pod {meta['name']} in StatefulSet {sts['metadata']['name']} successful")

    def _current(self, pod: dict) -> dict | None:
        entry = self.cluster.store.get("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        return entry.obj if entry is not None and entry.obj["metadata"]["uid"] == pod["metadata"]["uid"] else None

    def _event(self, sts: dict, kind: str, reason: str, message: str) -> None:
        events.record(self.cluster, sts, kind, reason, message, COMPONENT)

    # ------------------------------------------------------------------------------ status
    def _write_status(self, sts: dict, update_revision: str) -> None:
        entry = self.cluster.store.get(_KEY, sts["metadata"]["namespace"], sts["metadata"]["name"])
        if entry is None:
            return
        sts = entry.obj
        old = sts.get("status") or {}
        current_revision = old.get("currentRevision") or update_revision
        pods = [p for p in owned(self.cluster, sts["metadata"]["uid"], "pods")
                if _ordinal(sts["metadata"]["name"], p) is not None]
        live = [p for p in pods if not _terminating(p)]
        ready = sum(1 for p in pods if _running_and_ready(p))
        current = sum(1 for p in live if _revision(p) == current_revision)
        updated = sum(1 for p in live if _revision(p) == update_revision)
        strategy = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type", "RollingUpdate")
        if strategy == "RollingUpdate" and updated == len(pods) and ready == len(pods):
            current_revision, current = update_revision, updated   # upstream completeRollingUpdate
        status = {k: v for k, v in old.items() if k == "conditions"}
        status.update(observedGeneration=sts["metadata"].get("generation", 1), replicas=len(pods))
        for field, value in (("readyReplicas", ready), ("currentReplicas", current), ("updatedReplicas", updated)):
            if value:
                status[field] = value
        status.update(availableReplicas=ready, currentRevision=current_revision, updateRevision=update_revision,
                      collisionCount=int(old.get("collisionCount", 0)))
        write_status(self.cluster, self.cluster.registry.by_key(_KEY), sts, status)


def _revision(pod: dict) -> str:
    return (pod["metadata"].get("labels") or {}).get(_REVISION, "")


def register(cluster, manager) -> None:
    if cluster.registry.by_key(_KEY) is not None and cluster.registry.by_key("pods") is not None:
        manager.add(StatefulSetController(cluster))
