"""Upstream-shaped objects for unit tests: VMIs, virt-launcher Pods, VMs, the KubeVirt and HyperConverged
resources, PDBs, PVCs, migrations, nodes, and the Descheduler package's CronJob, ConfigMap and Jobs, shaped as
KubeVirt v1.8, Kubernetes v1.35 and the ACP Descheduler package write them."""
from __future__ import annotations

import copy

import yaml

from support.policy import page_policy_data

DOMAIN = "kubevirt.io/domain"
EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
LAUNCHER_VOLUMES = ("private", "public", "sockets", "ephemeral-disks", "container-disks", "hotplug-disks")


def _merge(base: dict, extra: dict | None) -> dict:
    result = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def vmi(name="vm-a", namespace="desched-test", uid=None, node="worker-a", strategy="LiveMigrate", migratable=True,
        reason=None, message=None, owner=None, labels=None, claims=(), evacuation=None, phase="Running", **extra) -> dict:
    uid = uid or "uid-" + name
    conditions = [{"type": "Ready", "status": "True"}]
    if migratable is not None:
        cond = {"type": "LiveMigratable", "status": "True" if migratable else "False"}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        conditions.append(cond)
    obj = {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": namespace, "uid": uid,
                     "labels": {"kubevirt.io/nodeName": node, **(labels or {})},
                     "creationTimestamp": "2026-11-30T10:00:00Z"},
        "spec": {"domain": {"resources": {"requests": {"memory": "512Mi"}}, "devices": {}},
                 "volumes": [{"name": "rootdisk", "persistentVolumeClaim": {"claimName": c}} for c in claims]},
        "status": {"phase": phase, "nodeName": node, "conditions": conditions},
    }
    if strategy is not None:
        obj["spec"]["evictionStrategy"] = strategy
    if owner:
        kind, owner_name = owner
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "kubevirt.io/v1", "kind": kind, "name": owner_name,
                                               "uid": "uid-" + owner_name, "controller": True, "blockOwnerDeletion": True}]
    if evacuation:
        obj["status"]["evacuationNodeName"] = evacuation
    return _merge(obj, extra)


def launcher(vmi_obj: dict, name=None, node=None, phase="Running", domain=True, **extra) -> dict:
    meta = vmi_obj["metadata"]
    labels = {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": meta["uid"], "vm.kubevirt.io/name": meta["name"]}
    labels.update({k: v for k, v in meta.get("labels", {}).items() if k != "kubevirt.io/nodeName"})
    annotations = {EVICT_ONLY: ""}
    if domain:
        annotations[DOMAIN] = meta["name"]
    obj = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name or "virt-launcher-{0}-abcde".format(meta["name"]), "namespace": meta["namespace"],
                     "labels": labels, "annotations": annotations, "creationTimestamp": "2026-11-30T10:00:01Z",
                     "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": meta["name"],
                                          "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": node or vmi_obj["status"]["nodeName"],
                 "containers": [{"name": "compute", "image": "virt-launcher:v1.8.4",
                                 "resources": {"requests": {"cpu": "100m", "memory": "782Mi"}}}],
                 "volumes": [{"name": v, "emptyDir": {}} for v in LAUNCHER_VOLUMES]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if phase == "Running" else "False"}]},
    }
    return _merge(obj, extra)


def pod(name, namespace="default", node="worker-a", cpu="500m", memory="1Gi", labels=None, phase="Running", **extra) -> dict:
    return _merge({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
                   "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
                   "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}}, extra)


def vm(name="vm-a", namespace="desched-test", run_strategy="Always", running=None, pool=None, pool_label=None) -> dict:
    obj = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
           "metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name, "labels": {}},
           "spec": {"template": {"spec": {}}}}
    if run_strategy is not None:
        obj["spec"]["runStrategy"] = run_strategy
    if running is not None:
        obj["spec"]["running"] = running
    if pool:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool",
                                               "name": pool, "uid": "uid-" + pool, "controller": True}]
    if pool_label:
        obj["metadata"]["labels"]["kubevirt.io/vmpool"] = pool_label
    return obj


def kubevirt_cr(strategy=None, migrations=None, version="v1.8.4", feature_gates=()) -> dict:
    configuration = {"developerConfiguration": {"featureGates": list(feature_gates)}}
    if strategy is not None:
        configuration["evictionStrategy"] = strategy
    if migrations is not None:
        configuration["migrations"] = migrations
    return {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
            "metadata": {"name": "kubevirt-kubevirt-hyperconverged", "namespace": "kubevirt"},
            "spec": {"configuration": configuration},
            "status": {"phase": "Deployed", "observedKubeVirtVersion": version}}


def hyperconverged(strategy="LiveMigrateIfPossible", version="1.18.1") -> dict:
    spec = {} if strategy is None else {"evictionStrategy": strategy}
    return {"apiVersion": "hco.kubevirt.io/v1beta1", "kind": "HyperConverged",
            "metadata": {"name": "kubevirt-hyperconverged", "namespace": "kubevirt"}, "spec": spec,
            "status": {"versions": [{"name": "operator", "version": version}]}}


def pdb(name="vms-pdb", namespace="desched-test", match=None, min_available=None, max_unavailable=None, status=None,
        generation=1) -> dict:
    spec = {"selector": {"matchLabels": match or {"app": "desched-test"}}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": name, "namespace": namespace, "generation": generation}, "spec": spec}
    if status is not None:
        obj["status"] = dict({"observedGeneration": generation}, **status)
    return obj


def pvc(name, namespace="desched-test", modes=("ReadWriteMany",), storage_class="ceph-rbd", volume_mode="Block") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": list(modes), "storageClassName": storage_class, "volumeMode": volume_mode},
            "status": {"phase": "Bound", "accessModes": list(modes)}}


def vmim(name, vmi_name="vm-a", namespace="desched-test", phase="Running", source="worker-a", target="worker-b",
         evacuation=True, created="2026-11-30T10:05:00Z") -> dict:
    annotations = {"kubevirt.io/evacuationMigration": source} if evacuation else {}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "creationTimestamp": created,
                         "labels": {"kubevirt.io/vmi-name": vmi_name}},
            "spec": {"vmiName": vmi_name},
            "status": {"phase": phase, "migrationState": {"sourceNode": source, "targetNode": target}}}


def node(name, cpu="16", memory="64Gi", pods="110", control_plane=False, unschedulable=False, ready=True, taints=()) -> dict:
    labels = {"kubernetes.io/hostname": name}
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    else:
        labels.update({"node-role.kubernetes.io/worker": "", "kubevirt.io/schedulable": "true"})
    spec = {"taints": list(taints)} if taints else {}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


PACKAGE_ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--feature-gates=EvictionsInBackground=true", "--v=3"]

# The ACP package's default policy (the rebalance page, "Why the Default Policy Never Migrates a VM")
DEFAULT_POLICY = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "profiles": [{"name": "default",
                  "pluginConfig": [{"name": "DefaultEvictor", "args": {"podProtections": {"defaultDisabled": ["PodsWithLocalStorage"],
                                                                                          "extraEnabled": ["PodsWithPVC"]}}},
                                   {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                                                                           "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}}],
                  "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}],
}

# The bounded VM rebalance policy of the verification run (the page's, with the scenario's workers)
VM_POLICY = page_policy_data()


def cronjob(args=None, suspend=False, uid="uid-cronjob", name="descheduler") -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": "descheduler", "uid": uid, "labels": {"app.kubernetes.io/name": "descheduler"}},
            "spec": {"schedule": "*/2 * * * *", "suspend": suspend,
                     "jobTemplate": {"spec": {"template": {"spec": {
                         "containers": [{"name": "descheduler", "image": "descheduler:v0.36.0",
                                         "args": list(PACKAGE_ARGS if args is None else args),
                                         "volumeMounts": [{"name": "policy-volume", "mountPath": "/policy-dir"}]}],
                         "volumes": [{"name": "policy-volume", "configMap": {"name": "descheduler"}}]}}}}},
            "status": {"lastScheduleTime": "2026-11-30T10:04:00Z"}}


def deployment(args=None) -> dict:
    spec = cronjob(args)["spec"]["jobTemplate"]["spec"]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "descheduler", "namespace": "descheduler", "uid": "uid-deploy",
                         "labels": {"app.kubernetes.io/name": "descheduler"}},
            "spec": {"replicas": 1, "template": spec["template"]}, "status": {"readyReplicas": 1}}


def configmap(policy=None, text=None, name="descheduler", key="policy.yaml") -> dict:
    body = text if text is not None else yaml.safe_dump(policy if policy is not None else DEFAULT_POLICY)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "descheduler", "labels": {"app.kubernetes.io/name": "descheduler"}},
            "data": {key: body}}


def job(name, created, result="Complete", owner_uid="uid-cronjob") -> dict:
    conditions = [{"type": result, "status": "True"}] if result in ("Complete", "Failed") else []
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "descheduler", "creationTimestamp": created,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "descheduler",
                                              "uid": owner_uid, "controller": True}]},
            "status": {"conditions": conditions, "succeeded": 1 if result == "Complete" else 0,
                       "failed": 1 if result == "Failed" else 0, "active": 1 if result == "Running" else 0}}


def resource_patch(name, target_kind="ConfigMap", target_name="descheduler", created="2026-11-30T10:03:00Z") -> dict:
    return {"apiVersion": "operator.alauda.io/v1alpha1", "kind": "ResourcePatch",
            "metadata": {"name": name, "namespace": "descheduler", "creationTimestamp": created},
            "spec": {"release": "descheduler/descheduler",
                     "target": {"apiVersion": "v1", "kind": target_kind, "namespace": "descheduler", "name": target_name},
                     "jsonPatch": [{"op": "add", "path": "/data/policy.yaml", "value": "..."}]}}
