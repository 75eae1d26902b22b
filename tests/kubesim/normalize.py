"""What decoding a request body into the apiserver's Go types does to an object, before any defaulting:

- an explicit JSON `null` is the Go zero value, so it is never stored (built-in kinds); custom resources get
  the same from structural-schema pruning, which drops nulls of non-nullable fields without a default;
- a non-pointer field tagged `omitempty` (`bool`, `int32`, `string`, maps, slices) is not serialised at its
  zero value: `spec.unschedulable: false` on a Node reads back as `spec: {}`, while a pointer field
  (`*bool`, `*int32`: CronJob `suspend`, ConfigMap `immutable`, `replicas`) keeps its `false` or `0`;
- a non-pointer field without `omitempty` is always serialised, at its zero value if unset (ReplicaSet
  `status.replicas: 0`, a PodDisruptionBudget's four status counters);
- the v1 -> internal conversions that fold one field into another: Secret `stringData` into base64 `data`
  (the internal Secret has no stringData, so it is never stored or returned), PodSpec `serviceAccount` (the
  deprecated alias) into `serviceAccountName` and back out.

Upstream: `staging/src/k8s.io/api/{core,apps,batch,policy}/v1/types.go` (which fields are pointers, which
are `omitempty`), `pkg/apis/core/v1/conversion.go` (Secret, PodSpec), apiextensions-apiserver
`pkg/apiserver/schema/defaulting` (`PruneNonNullableNullsWithoutDefaults`) and `pkg/apiserver/schema/objectmeta`.

Simplified: custom resources carry no per-field schema here, so every null is treated as a non-nullable
field's (no `nullable: true`, and nulls under `x-kubernetes-preserve-unknown-fields` are pruned too); the
tables below cover the kinds and fields the simulator serves and its clients send, not every Go type; a
null inside a list or a map of strings is dropped rather than turned into `""`."""
from __future__ import annotations

import base64
import copy
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GoStruct:
    """The serialisation facts of one Go struct: `omitempty` non-pointer fields (dropped at their zero value),
    fields always serialised (filled with their zero value when absent), and nested structs by field name
    (a list field holds items of that struct)."""
    omitempty: frozenset[str] = frozenset()
    always: dict = field(default_factory=dict)
    nested: dict[str, str] = field(default_factory=dict)


def _go(omitempty: str = "", always: dict | None = None, **nested: str) -> GoStruct:
    return GoStruct(frozenset(omitempty.split()), always or {}, nested)


_META = {"metadata": "ObjectMeta"}
_STATUS_STRUCT = {"status": {}}   # a non-pointer Status struct: `status: {}` even before a controller writes it

STRUCTS: dict[str, GoStruct] = {
    "ObjectMeta": _go("name generateName namespace uid resourceVersion generation labels annotations "
                      "ownerReferences finalizers"),
    # core/v1
    "PodTemplateSpec": _go(**_META, spec="PodSpec"),
    "PodSpec": _go("volumes initContainers ephemeralContainers restartPolicy dnsPolicy nodeSelector "
                   "serviceAccountName serviceAccount nodeName hostNetwork hostPID hostIPC imagePullSecrets "
                   "hostname subdomain schedulerName tolerations hostAliases priorityClassName readinessGates "
                   "overhead topologySpreadConstraints schedulingGates resourceClaims",
                   containers="Container", initContainers="Container", ephemeralContainers="Container",
                   tolerations="Toleration"),
    "Container": _go("image command args workingDir ports envFrom env resizePolicy volumeMounts volumeDevices "
                     "terminationMessagePath terminationMessagePolicy imagePullPolicy stdin stdinOnce tty",
                     always={"resources": {}}, ports="ContainerPort", env="EnvVar", volumeMounts="VolumeMount"),
    "ContainerPort": _go("name hostPort protocol hostIP"),
    "EnvVar": _go("value"),
    "VolumeMount": _go("readOnly subPath subPathExpr"),
    "Toleration": _go("key operator value effect"),
    "PodStatus": _go("phase conditions message reason nominatedNodeName hostIP hostIPs podIP podIPs "
                     "initContainerStatuses containerStatuses qosClass ephemeralContainerStatuses resize"),
    "Pod": _go(always=_STATUS_STRUCT, **_META, spec="PodSpec", status="PodStatus"),
    "NodeSpec": _go("podCIDR podCIDRs providerID unschedulable taints externalID", taints="Taint"),
    "Taint": _go("value"),
    "Node": _go(**_META, spec="NodeSpec"),   # simplified: no zero daemonEndpoints/nodeInfo status
    "ServiceSpec": _go("ports selector clusterIP clusterIPs type externalIPs sessionAffinity loadBalancerIP "
                       "loadBalancerSourceRanges externalName externalTrafficPolicy healthCheckNodePort "
                       "publishNotReadyAddresses ipFamilies", ports="ServicePort"),
    "ServicePort": _go("name protocol nodePort"),
    "Service": _go(always=_STATUS_STRUCT, **_META, spec="ServiceSpec", status="ServiceStatus"),
    "ServiceStatus": _go("conditions", always={"loadBalancer": {}}),
    "Namespace": _go(always=_STATUS_STRUCT, **_META, spec="NamespaceSpec", status="NamespaceStatus"),
    "NamespaceSpec": _go("finalizers"),
    "NamespaceStatus": _go("phase conditions"),
    "ConfigMap": _go("data binaryData", **_META),
    "Secret": _go("data stringData type", **_META),
    # apps/v1
    "Deployment": _go(always=_STATUS_STRUCT, **_META, spec="DeploymentSpec", status="DeploymentStatus"),
    "DeploymentSpec": _go("minReadySeconds paused", template="PodTemplateSpec", strategy="DeploymentStrategy"),
    "DeploymentStrategy": _go("type"),
    "DeploymentStatus": _go("observedGeneration replicas updatedReplicas readyReplicas availableReplicas "
                            "unavailableReplicas conditions"),
    "ReplicaSet": _go(always=_STATUS_STRUCT, **_META, spec="ReplicaSetSpec", status="ReplicaSetStatus"),
    "ReplicaSetSpec": _go("minReadySeconds", template="PodTemplateSpec"),
    "ReplicaSetStatus": _go("fullyLabeledReplicas readyReplicas availableReplicas observedGeneration conditions",
                            always={"replicas": 0}),
    "StatefulSet": _go(always=_STATUS_STRUCT, **_META, spec="StatefulSetSpec", status="StatefulSetStatus"),
    "StatefulSetSpec": _go("volumeClaimTemplates serviceName podManagementPolicy minReadySeconds",
                           template="PodTemplateSpec", updateStrategy="StatefulSetUpdateStrategy"),
    "StatefulSetUpdateStrategy": _go("type"),
    "StatefulSetStatus": _go("observedGeneration readyReplicas currentReplicas updatedReplicas currentRevision "
                             "updateRevision conditions", always={"replicas": 0, "availableReplicas": 0}),
    "DaemonSet": _go(always=_STATUS_STRUCT, **_META, spec="DaemonSetSpec", status="DaemonSetStatus"),
    "DaemonSetSpec": _go("minReadySeconds", template="PodTemplateSpec", updateStrategy="DaemonSetUpdateStrategy"),
    "DaemonSetUpdateStrategy": _go("type"),
    "DaemonSetStatus": _go("observedGeneration updatedNumberScheduled numberAvailable numberUnavailable "
                           "conditions", always={"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                                 "desiredNumberScheduled": 0, "numberReady": 0}),
    # batch/v1
    "Job": _go(always=_STATUS_STRUCT, **_META, spec="JobSpec", status="JobStatus"),
    "JobSpec": _go(template="PodTemplateSpec"),
    "JobTemplateSpec": _go(**_META, spec="JobSpec"),
    "JobStatus": _go("conditions active succeeded failed completedIndexes"),
    "CronJob": _go(always=_STATUS_STRUCT, **_META, spec="CronJobSpec", status="CronJobStatus"),
    "CronJobSpec": _go("concurrencyPolicy", jobTemplate="JobTemplateSpec"),
    "CronJobStatus": _go("active"),
    # policy/v1
    "PodDisruptionBudget": _go(always=_STATUS_STRUCT, **_META, status="PodDisruptionBudgetStatus"),
    "PodDisruptionBudgetStatus": _go("observedGeneration disruptedPods conditions", always={
        "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
}

# The Go struct at the root of each built-in kind's objects; other kinds get ObjectMeta's facts only.
ROOTS: dict[str, str] = {
    "pods": "Pod", "nodes": "Node", "services": "Service", "namespaces": "Namespace", "configmaps": "ConfigMap",
    "secrets": "Secret", "deployments.apps": "Deployment", "replicasets.apps": "ReplicaSet",
    "statefulsets.apps": "StatefulSet", "daemonsets.apps": "DaemonSet", "jobs.batch": "Job",
    "cronjobs.batch": "CronJob", "poddisruptionbudgets.policy": "PodDisruptionBudget",
}
_OBJECT = _go(**_META)


def decode(key: str, obj: dict) -> None:
    """Normalise `obj` (of resource `key`) in place as decoding it into its Go type and encoding it back does."""
    _drop_nulls(obj)
    if key == "secrets":
        _fold_string_data(obj)
    _serialise(STRUCTS[ROOTS[key]] if key in ROOTS else _OBJECT, obj)
    for spec in pod_specs(key, obj):
        fold_service_account_alias(spec)


def _drop_nulls(value) -> None:
    if isinstance(value, dict):
        for name in [name for name, item in value.items() if item is None]:
            del value[name]
        for item in value.values():
            if isinstance(item, (dict, list)):
                _drop_nulls(item)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                _drop_nulls(item)


def _is_zero(value) -> bool:
    return isinstance(value, (bool, int, float, str, list, dict)) and not value


def _serialise(struct: GoStruct, value) -> None:
    if isinstance(value, list):
        for item in value:
            _serialise(struct, item)
        return
    if not isinstance(value, dict):
        return
    for name in struct.omitempty & value.keys():
        if _is_zero(value[name]):
            del value[name]
    for name, zero in struct.always.items():
        if name not in value:
            value[name] = copy.deepcopy(zero)
    for name, nested in struct.nested.items():
        if name in value:
            _serialise(STRUCTS[nested], value[name])


def _fold_string_data(secret: dict) -> None:
    """Convert_v1_Secret_To_core_Secret: each stringData entry overwrites data's, base64-encoded."""
    string_data = secret.pop("stringData", None)
    if string_data:
        data = secret.setdefault("data", {})
        for name, text in string_data.items():
            data[name] = base64.b64encode(str(text).encode()).decode()


def fold_service_account_alias(spec: dict) -> None:
    """The v1 PodSpec's deprecated `serviceAccount` is read when `serviceAccountName` is unset, and always
    written back as a copy of `serviceAccountName`."""
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    else:
        spec.pop("serviceAccount", None)


# Where a kind's objects hold a PodSpec: the Pod's own, a workload's template, a CronJob's job template.
_POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "pods": ("spec",),
    "deployments.apps": ("spec", "template", "spec"), "replicasets.apps": ("spec", "template", "spec"),
    "statefulsets.apps": ("spec", "template", "spec"), "daemonsets.apps": ("spec", "template", "spec"),
    "jobs.batch": ("spec", "template", "spec"),
    "cronjobs.batch": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def pod_specs(key: str, obj: dict) -> list[dict]:
    """The PodSpec of `obj` (a Pod's, or its pod template's), if it has one."""
    path = _POD_SPEC_PATHS.get(key)
    if path is None:
        return []
    value = obj
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return [value] if isinstance(value, dict) else []
