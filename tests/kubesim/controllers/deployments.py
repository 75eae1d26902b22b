"""The Deployment controller: one ReplicaSet per Pod template, named `<deployment>-<pod-template-hash>`, with
the label `pod-template-hash` on the ReplicaSet, its selector and its template, the annotations
`deployment.kubernetes.io/revision`, `desired-replicas` and `max-replicas`, and a controller
ownerReference. The ReplicaSet whose template equals the Deployment's (ignoring the hash label) is scaled to
`spec.replicas`; a template change creates a new ReplicaSet (revision + 1, also written to the Deployment's
revision annotation); old ReplicaSets go to 0 and beyond `revisionHistoryLimit` are deleted. Status:
`observedGeneration`, `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`,
`unavailableReplicas` and the conditions `Available` (MinimumReplicasAvailable / MinimumReplicasUnavailable)
and `Progressing` (NewReplicaSetCreated, ReplicaSetUpdated, NewReplicaSetAvailable) with the upstream
messages. Event `ScalingReplicaSet` "Scaled up replica set <rs> to <n> from <m>".

Upstream: pkg/controller/deployment. Simplified: a rollout (RollingUpdate or Recreate) scales the new
ReplicaSet up and the old ones down in one step instead of respecting maxSurge/maxUnavailable batches; a
paused Deployment is not rolled out but still scaled (one active ReplicaSet) and reports Progressing
`Unknown` `DeploymentPaused` "Deployment is paused" (`DeploymentResumed` "Deployment is resumed" when
resumed, until the rollout's own reason replaces it); no progress deadline
(ProgressDeadlineExceeded), no rollback subresource, no adoption of orphan ReplicaSets, no `scale`
subresource."""
from __future__ import annotations

import copy
import math

from .. import events
from ..errors import ApiError
from .workloads import (OwnerController, condition, owned, owner_reference, set_condition, template_hash,
                        write_status)

COMPONENT = "deployment-controller"
_KEY = "deployments.apps"
_RS_KEY = "replicasets.apps"
_REVISION = "deployment.kubernetes.io/revision"
_DESIRED = "deployment.kubernetes.io/desired-replicas"
_MAX = "deployment.kubernetes.io/max-replicas"
_HASH = "pod-template-hash"
_PAUSED = ("DeploymentPaused", "Deployment is paused")
_RESUMED = ("DeploymentResumed", "Deployment is resumed")


def _int_or_percent(value, total: int, round_up: bool) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


def surge_and_unavailable(deployment: dict) -> tuple[int, int]:
    """maxSurge and maxUnavailable resolved against spec.replicas (upstream ResolveFenceposts)."""
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return 0, 0
    rolling = strategy.get("rollingUpdate") or {}
    surge = _int_or_percent(rolling.get("maxSurge", "25%"), replicas, True)
    unavailable = _int_or_percent(rolling.get("maxUnavailable", "25%"), replicas, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, replicas)


def _without_hash(template: dict) -> dict:
    result = copy.deepcopy(template or {})
    labels = (result.get("metadata") or {}).get("labels")
    if labels is not None:
        labels.pop(_HASH, None)
        if not labels:
            result["metadata"].pop("labels")
    return result


def _revision(rs: dict) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(_REVISION, 0))
    except ValueError:
        return 0


class DeploymentController(OwnerController):
    resource_key = _KEY
    owner_kind = "Deployment"
    owner_group = "apps"
    keys = (_KEY, _RS_KEY)

    def reconcile(self, owner: dict) -> None:
        deployment = owner
        cluster = self.cluster
        namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
        spec = deployment.get("spec") or {}
        replica_sets = owned(cluster, deployment["metadata"]["uid"], _RS_KEY)
        template = _without_hash(spec.get("template") or {})
        new_rs = next((rs for rs in replica_sets
                       if _without_hash((rs.get("spec") or {}).get("template")) == template), None)
        created = False
        self._sync_paused_condition(deployment)
        if spec.get("paused"):
            self._scale_paused(deployment, new_rs, replica_sets)
        else:
            if new_rs is None:
                new_rs = self._create_replica_set(deployment, replica_sets)
                created = new_rs is not None
                if new_rs is not None:
                    replica_sets.append(new_rs)
            if new_rs is not None:
                new_rs = self._promote(deployment, new_rs, replica_sets)
                self._scale_all(deployment, new_rs, replica_sets)
                self._cleanup(deployment, new_rs)
        self._sync_status(namespace, name, new_rs, created)

    # ----------------------------------------------------------------------------------- paused
    def _sync_paused_condition(self, deployment: dict) -> None:
        """Progressing Unknown `DeploymentPaused` when paused, `DeploymentResumed` once resumed, written before
        the sync as upstream checkPausedConditions does (a resumed rollout then overwrites it)."""
        status = deployment.get("status") or {}
        progressing = condition(status.get("conditions") or [], "Progressing") or {}
        was_paused = progressing.get("reason") == _PAUSED[0]
        paused = bool((deployment.get("spec") or {}).get("paused"))
        if paused == was_paused:
            return
        reason, message = _PAUSED if paused else _RESUMED
        conditions = set_condition(status.get("conditions"), "Progressing", "Unknown", reason, message,
                                   update_time=True)
        write_status(self.cluster, self.cluster.registry.by_key(_KEY), deployment, {**status, "conditions": conditions})

    def _scale_paused(self, deployment: dict, new_rs: dict | None, replica_sets: list[dict]) -> None:
        """A paused Deployment still scales: with one active ReplicaSet (or none), the current or newest one
        gets spec.replicas (upstream sync/scale with FindActiveOrLatest); nothing is rolled out."""
        active = [rs for rs in replica_sets if int((rs.get("spec") or {}).get("replicas", 1)) > 0]
        if len(active) > 1:
            return
        target = new_rs or (active[0] if active else max(replica_sets, key=_revision, default=None))
        if target is not None:
            replicas = int((deployment.get("spec") or {}).get("replicas", 1))
            surge, _unavailable = surge_and_unavailable(deployment)
            self._scale(deployment, target, replicas, replicas, replicas + surge)

    # ---------------------------------------------------------------------------------- rollout
    def _create_replica_set(self, deployment: dict, existing: list[dict]) -> dict | None:
        cluster = self.cluster
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        rs_rt = cluster.registry.by_key(_RS_KEY)
        collisions = int((deployment.get("status") or {}).get("collisionCount", 0))
        revision = max((_revision(rs) for rs in existing), default=0) + 1
        replicas = int(spec.get("replicas", 1))
        surge, _unavailable = surge_and_unavailable(deployment)
        for attempt in range(collisions, collisions + 5):
            pod_hash = template_hash(_without_hash(spec.get("template") or {}), attempt)
            template = copy.deepcopy(spec.get("template") or {})
            template.setdefault("metadata", {}).setdefault("labels", {})[_HASH] = pod_hash
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})[_HASH] = pod_hash
            body = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
                "name": f"{meta['name']}-{pod_hash}", "namespace": meta["namespace"],
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {_DESIRED: str(replicas), _MAX: str(replicas + surge), _REVISION: str(revision)},
                "ownerReferences": [owner_reference(deployment)]},
                "spec": {"replicas": replicas, "minReadySeconds": int(spec.get("minReadySeconds", 0)),
                         "selector": selector, "template": template}}
            try:
                rs = cluster.create(rs_rt, meta["namespace"], body)
            except ApiError as err:
                if err.code == 409:
                    continue      # a hash collision with a ReplicaSet that is not ours: try the next count
                events.record(cluster, deployment, "Warning", "FailedCreate", err.message, COMPONENT)
                return None
            if attempt != collisions:
                self._write_collision_count(deployment, attempt)
            events.record(cluster, deployment, "Normal", "ScalingReplicaSet",
                          f"Scaled up replica set {rs['metadata']['name']} to {replicas} from 0", COMPONENT)
            return rs
        return None

    def _write_collision_count(self, deployment: dict, count: int) -> None:
        status = dict(deployment.get("status") or {})
        status["collisionCount"] = count
        write_status(self.cluster, self.cluster.registry.by_key(_KEY), deployment, status)

    def _promote(self, deployment: dict, new_rs: dict, replica_sets: list[dict]) -> dict:
        """The new ReplicaSet carries the highest revision, and the Deployment's annotation says which."""
        cluster = self.cluster
        top = max((_revision(rs) for rs in replica_sets if rs is not new_rs), default=0)
        revision = _revision(new_rs)
        if revision <= top:
            revision = top + 1
            body = copy.deepcopy(new_rs)
            body["metadata"].setdefault("annotations", {})[_REVISION] = str(revision)
            try:
                new_rs = cluster.update(cluster.registry.by_key(_RS_KEY), body["metadata"]["namespace"],
                                        body["metadata"]["name"], body)
            except ApiError:
                pass
        current = cluster.store.get(_KEY, deployment["metadata"]["namespace"], deployment["metadata"]["name"])
        if current is not None and (current.obj["metadata"].get("annotations") or {}).get(_REVISION) != str(revision):
            body = copy.deepcopy(current.obj)
            body["metadata"].setdefault("annotations", {})[_REVISION] = str(revision)
            try:
                cluster.update(cluster.registry.by_key(_KEY), body["metadata"]["namespace"], body["metadata"]["name"],
                               body)
            except ApiError:
                pass
        return new_rs

    def _scale_all(self, deployment: dict, new_rs: dict, replica_sets: list[dict]) -> None:
        replicas = int((deployment.get("spec") or {}).get("replicas", 1))
        surge, _unavailable = surge_and_unavailable(deployment)
        for rs in replica_sets:
            is_new = rs["metadata"]["uid"] == new_rs["metadata"]["uid"]
            self._scale(deployment, rs, replicas if is_new else 0, replicas, replicas + surge)

    def _scale(self, deployment: dict, rs: dict, target: int, desired: int, maximum: int) -> None:
        cluster = self.cluster
        current = cluster.store.get(_RS_KEY, rs["metadata"]["namespace"], rs["metadata"]["name"])
        if current is None or current.obj["metadata"]["uid"] != rs["metadata"]["uid"]:
            return
        rs = current.obj
        before = int((rs.get("spec") or {}).get("replicas", 1))
        annotations = dict(rs["metadata"].get("annotations") or {})
        wanted_annotations = {**annotations, _DESIRED: str(desired), _MAX: str(maximum)}
        if before == target and wanted_annotations == annotations:
            return
        body = copy.deepcopy(rs)
        body["spec"]["replicas"] = target
        body["metadata"]["annotations"] = wanted_annotations
        try:
            cluster.update(cluster.registry.by_key(_RS_KEY), rs["metadata"]["namespace"], rs["metadata"]["name"], body)
        except ApiError:
            return
        if before != target:
            direction = "up" if target > before else "down"
            events.record(cluster, deployment, "Normal", "ScalingReplicaSet",
                          f"Scaled {direction} replica set {rs['metadata']['name']} to {target} from {before}", COMPONENT)

    def _cleanup(self, deployment: dict, new_rs: dict) -> None:
        """Delete the oldest scaled-down ReplicaSets beyond revisionHistoryLimit."""
        cluster = self.cluster
        limit = int((deployment.get("spec") or {}).get("revisionHistoryLimit", 10))
        old = [rs for rs in owned(cluster, deployment["metadata"]["uid"], _RS_KEY)
               if rs["metadata"]["uid"] != new_rs["metadata"]["uid"] and not rs["metadata"].get("deletionTimestamp")
               and int((rs.get("spec") or {}).get("replicas", 1)) == 0
               and int((rs.get("status") or {}).get("replicas", 0)) == 0]
        old.sort(key=lambda rs: (_revision(rs), rs["metadata"].get("creationTimestamp", "")))
        for rs in old[:max(len(old) - limit, 0)]:
            try:
                cluster.delete(cluster.registry.by_key(_RS_KEY), rs["metadata"]["namespace"], rs["metadata"]["name"],
                               {"propagationPolicy": "Background"})
            except ApiError:
                continue

    # ----------------------------------------------------------------------------------- status
    def _sync_status(self, namespace: str, name: str, new_rs: dict | None, created: bool) -> None:
        cluster = self.cluster
        entry = cluster.store.get(_KEY, namespace, name)
        if entry is None:
            return
        deployment = entry.obj
        spec = deployment.get("spec") or {}
        replica_sets = owned(cluster, deployment["metadata"]["uid"], _RS_KEY)
        if new_rs is not None:
            stored = cluster.store.get(_RS_KEY, namespace, new_rs["metadata"]["name"])
            new_rs = stored.obj if stored is not None else None

        def total(field: str, sets: list[dict]) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0)) for rs in sets)
        wanted = int(spec.get("replicas", 1))
        counts = {"replicas": total("replicas", replica_sets),
                  "updatedReplicas": total("replicas", [new_rs] if new_rs else []),
                  "readyReplicas": total("readyReplicas", replica_sets),
                  "availableReplicas": total("availableReplicas", replica_sets)}
        counts["unavailableReplicas"] = max(wanted - counts["availableReplicas"], 0)
        old_status = deployment.get("status") or {}
        status = {k: v for k, v in old_status.items() if k in ("collisionCount",)}
        status["observedGeneration"] = deployment["metadata"].get("generation", 1)
        status.update({k: v for k, v in counts.items() if v})
        conditions = old_status.get("conditions") or []
        if not conditions:
            conditions = [{"type": "Available"}, {"type": "Progressing"}]   # upstream order once both exist
        _surge, unavailable = surge_and_unavailable(deployment)
        if counts["availableReplicas"] >= wanted - unavailable:
            conditions = set_condition(conditions, "Available", "True", "MinimumReplicasAvailable",
                                       "Deployment has minimum availability.", update_time=True)
        else:
            conditions = set_condition(conditions, "Available", "False", "MinimumReplicasUnavailable",
                                       "Deployment does not have minimum availability.", update_time=True)
        if new_rs is not None and not spec.get("paused"):   # a paused Deployment keeps DeploymentPaused
            rs_name = new_rs["metadata"]["name"]
            complete = (counts["updatedReplicas"] == wanted and counts["replicas"] == wanted
                        and counts["availableReplicas"] == wanted)
            if created:
                conditions = set_condition(conditions, "Progressing", "True", "NewReplicaSetCreated",
                                           f'Created new replica set "{rs_name}"', update_time=True)
            elif complete:
                conditions = set_condition(conditions, "Progressing", "True", "NewReplicaSetAvailable",
                                           f'ReplicaSet "{rs_name}" has successfully progressed.', update_time=True)
            else:
                conditions = set_condition(conditions, "Progressing", "True", "ReplicaSetUpdated",
                                           f'ReplicaSet "{rs_name}" is progressing.', update_time=True)
        status["conditions"] = [c for c in conditions if c.get("status")]
        write_status(cluster, cluster.registry.by_key(_KEY), deployment, status)


def register(cluster, manager) -> None:
    if cluster.registry.by_key(_KEY) is not None and cluster.registry.by_key(_RS_KEY) is not None:
        manager.add(DeploymentController(cluster))
