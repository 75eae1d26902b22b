"""Defaulting and normalisation of every object the API server decodes, in one place.

`apply_defaults` runs on every write that carries an object: create, update (PUT, `/status` too) and the
result of every patch (merge, JSON, strategic, apply), real or dry run, as the apiserver decodes the body (or
the patched object) into its Go type and runs the scheme's defaulting functions each time. It first
normalises as decoding does (`normalize.decode`: nulls, zero values of `omitempty` fields, Secret
`stringData`), then fills the kind's defaults. `prepare_for_create` adds what only a create gets: the
registry strategies' PrepareForCreate, the admission plugins that act on CREATE, the kubelet's node labels.

Upstream: `pkg/apis/core/v1/defaults.go` (Pod, PodSpec, Container, Probe, volumes, Service, Secret,
Namespace, Node, PV, PVC), `pkg/apis/apps/v1/defaults.go`, `pkg/apis/batch/v1/defaults.go`, the generated
`zz_generated.defaults.go` (which applies the PodSpec/Container defaults inside every pod template, but
`SetDefaults_Pod` only to Pods and `SetDefaults_Job` not to a CronJob's jobTemplate), `pkg/util/parsers`
(`ParseImageName`: no tag and no digest means `latest`), `pkg/registry/{core/pod,core/namespace,batch/job}`
strategies, admission `ServiceAccount`, `Priority`, `DefaultTolerationSeconds`.

Simplified: a Job template without `restartPolicy` gets `Never` (upstream defaults `Always` and Job
validation then refuses it); feature gates are as in v1.35 with their defaults; no LimitRange or pod-level
resources defaulting; Service clusterIP/ipFamilies allocation is not done."""
from __future__ import annotations

from decimal import Decimal
from typing import Callable

from .normalize import decode, fold_service_account_alias
from .quantity import parse


# ------------------------------------------------------------------------------------ PodSpec and Container
def _pod_spec(spec: dict) -> None:
    """SetDefaults_PodSpec and the defaults of what a PodSpec holds; also applied to every pod template."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(group) or []:
            _container(container)
    for volume in spec.get("volumes") or []:
        _volume(volume)


def image_pull_policy(image: str) -> str:
    """`Always` for the `latest` tag (also implied by a reference without tag or digest), else `IfNotPresent`."""
    name, digest = image.partition("@")[::2]
    last = name.rsplit("/", 1)[-1]   # a registry host may carry a port: only the last segment has the tag
    tag = last.rpartition(":")[2] if ":" in last else ""
    return "Always" if tag == "latest" or not (tag or digest) else "IfNotPresent"


def _container(container: dict) -> None:
    container.setdefault("imagePullPolicy", image_pull_policy(container.get("image", "")))
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(container.get(probe), dict):
            _probe(container[probe])
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")


_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}


def _probe(probe: dict) -> None:
    for name, value in _PROBE_DEFAULTS.items():   # plain int32 fields: 0 (dropped by decode) means unset
        probe.setdefault(name, value)
    if isinstance(probe.get("httpGet"), dict):
        probe["httpGet"].setdefault("path", "/")
        probe["httpGet"].setdefault("scheme", "HTTP")


_MODE_DEFAULTED_SOURCES = ("secret", "configMap", "downwardAPI", "projected")   # defaultMode 0644


def _volume(volume: dict) -> None:
    if set(volume) <= {"name"}:
        volume["emptyDir"] = {}   # a volume without a source is an emptyDir
    for source in _MODE_DEFAULTED_SOURCES:
        if isinstance(volume.get(source), dict):
            volume[source].setdefault("defaultMode", 0o644)
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"].setdefault("type", "")
    for projection in (volume.get("projected") or {}).get("sources") or []:
        token = projection.get("serviceAccountToken")
        if isinstance(token, dict):
            token.setdefault("expirationSeconds", 3600)


# ------------------------------------------------------------------------------------------------ core/v1
def _pod(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    _pod_spec(spec)
    # SetDefaults_Pod (Pods only, not templates): requests default to limits, service links on, and host
    # networking exposes every container port on the host.
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            resources = container.setdefault("resources", {})
            if isinstance(resources.get("limits"), dict):
                requests = resources.setdefault("requests", {})
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
            if spec.get("hostNetwork"):
                for port in container.get("ports") or []:
                    port.setdefault("hostPort", port.get("containerPort"))
    spec.setdefault("enableServiceLinks", True)
    # Go serialises these ContainerStatus fields even when empty; the typed Python client requires them.
    images = {c.get("name"): c.get("image", "") for c in spec.get("containers") or []}
    for cs in (obj.get("status") or {}).get("containerStatuses") or []:
        cs.setdefault("image", images.get(cs.get("name"), ""))
        cs.setdefault("imageID", "")
        cs.setdefault("ready", False)
        cs.setdefault("restartCount", 0)


def _resource_qos(resources: dict) -> str:
    """resourceQOS: one set of requests and limits, cpu and memory only, a missing quantity being zero."""
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if not requests and not limits:
        return "BestEffort"
    found = None
    for name in ("cpu", "memory"):
        try:
            request, limit = parse(requests.get(name)), parse(limits.get(name))
        except ValueError:
            request = limit = Decimal(0)
        if request != limit:
            return "Burstable"
        kind = "BestEffort" if request == 0 else "Guaranteed"
        if found is not None and kind != found:
            return "Burstable"
        found = kind
    return found


def qos_class(spec: dict) -> str:
    """ComputePodQOS (pkg/apis/core/v1/helper/qos): pod-level `resources` when set, else every init and app
    container's class; any Burstable container, or BestEffort mixed with Guaranteed, makes the Pod Burstable.
    Zero quantities count as unset, so `requests: {cpu: "0", memory: "0"}` is BestEffort."""
    if spec.get("resources") is not None:
        return _resource_qos(spec["resources"])
    found = None
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        kind = _resource_qos(container.get("resources") or {})
        if kind == "Burstable" or (found is not None and kind != found):
            return "Burstable"
        found = kind
    return found or "BestEffort"


def _namespace(obj: dict) -> None:
    meta = obj["metadata"]
    if meta.get("name"):   # SetDefaults_Namespace sets it on every write, whatever the client sent
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    obj.setdefault("status", {}).setdefault("phase", "Active")


def _node(obj: dict) -> None:
    status = obj.get("status") or {}
    if "allocatable" not in status and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])
    # A kubelet reports every NodeSystemInfo field (Go serialises them even when empty); the typed Python
    # client rejects a nodeInfo without them.
    info = status.get("nodeInfo")
    if isinstance(info, dict):
        for key in ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
                    "kubeletVersion", "kubeProxyVersion"):
            info.setdefault(key, "")
        info.setdefault("operatingSystem", "linux")
        info.setdefault("architecture", "amd64")


def _service(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("sessionAffinity", "None")
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client_ip = spec.setdefault("sessionAffinityConfig", {}).setdefault("clientIP", {})
        client_ip.setdefault("timeoutSeconds", 10800)
    spec.setdefault("type", "ClusterIP")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    service_type = spec["type"]
    if service_type in ("NodePort", "LoadBalancer") or (service_type == "ClusterIP" and spec.get("externalIPs")):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if service_type in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if service_type == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)


def _pvc(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _pv(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _secret(obj: dict) -> None:
    obj.setdefault("type", "Opaque")


# ------------------------------------------------------------------------------------------------ apps/v1
def _rolling_update(spec: dict, field: str, **limits) -> None:
    """A Deployment's `strategy` or a DaemonSet's `updateStrategy`: type RollingUpdate unless set, and for that type
    the `rollingUpdate` limits."""
    strategy = spec.setdefault(field, {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        for name, value in limits.items():
            rolling.setdefault(name, value)


def _deployment(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _rolling_update(spec, "strategy", maxUnavailable="25%", maxSurge="25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


def _daemonset(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    _rolling_update(spec, "updateStrategy", maxUnavailable=1, maxSurge=0)
    spec.setdefault("revisionHistoryLimit", 10)
    _pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


def _statefulset(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    if "type" not in strategy:
        # only an unset type brings a rollingUpdate; `type: RollingUpdate` alone keeps it unset
        strategy["type"] = "RollingUpdate"
        strategy.setdefault("rollingUpdate", {})
    if strategy["type"] == "RollingUpdate" and isinstance(strategy.get("rollingUpdate"), dict):
        strategy["rollingUpdate"].setdefault("partition", 0)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    _pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    for claim in spec.get("volumeClaimTemplates") or []:
        _pvc(claim)   # the claim templates are PersistentVolumeClaims and get their defaults


def _replicaset(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


# ----------------------------------------------------------------------------------------------- batch/v1
def _job(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1   # a non-parallel Job; a work queue (parallelism only) keeps completions unset
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 2147483647 if "backoffLimitPerIndex" in spec else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if "podFailurePolicy" in spec else "TerminatingOrFailed")
    spec.setdefault("manualSelector", False)
    template_spec = spec.setdefault("template", {}).setdefault("spec", {})
    template_spec.setdefault("restartPolicy", "Never")   # simplified: upstream would refuse the template
    _pod_spec(template_spec)
    _job_labels(obj)


def _job_labels(job: dict) -> None:
    """A Job without labels takes its template's."""
    template_labels = ((job["spec"].get("template") or {}).get("metadata") or {}).get("labels")
    if template_labels and not job["metadata"].get("labels"):
        job["metadata"]["labels"] = dict(template_labels)


def _cronjob(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    # only the PodSpec defaults reach the job template: SetDefaults_Job takes a Job, not a JobSpec
    _pod_spec(spec.setdefault("jobTemplate", {}).setdefault("spec", {}).setdefault("template", {})
              .setdefault("spec", {}))


DEFAULTERS: dict[str, Callable[[dict], None]] = {
    "pods": _pod, "namespaces": _namespace, "nodes": _node, "services": _service, "persistentvolumeclaims": _pvc,
    "persistentvolumes": _pv, "secrets": _secret,
    "deployments.apps": _deployment, "daemonsets.apps": _daemonset, "statefulsets.apps": _statefulset,
    "replicasets.apps": _replicaset, "jobs.batch": _job, "cronjobs.batch": _cronjob,
}


def apply_defaults(key: str, obj: dict) -> None:
    """Normalise and default `obj` (of resource `key`) in place, as decoding a written object does."""
    decode(key, obj)
    defaulter = DEFAULTERS.get(key)
    if defaulter:
        defaulter(obj)


# ------------------------------------------------------------------------------------------ create only
_NOT_READY_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _tolerates(tolerations: list, key: str) -> bool:
    return any((t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists")) and
               t.get("effect", "") in ("", "NoExecute") for t in tolerations)


def _create_pod(obj: dict) -> None:
    spec = obj["spec"]
    # admission: ServiceAccount, Priority (no priorityClassName: the default 0), DefaultTolerationSeconds
    spec.setdefault("serviceAccountName", "default")
    fold_service_account_alias(spec)
    spec.setdefault("priority", 0)
    tolerations = spec.setdefault("tolerations", [])
    for key in _NOT_READY_TOLERATIONS:
        if not _tolerates(tolerations, key):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    # the Pod strategy's PrepareForCreate resets the status
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))


def _create_namespace(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])


def _create_node(obj: dict) -> None:
    labels = obj["metadata"].setdefault("labels", {})   # what a registering kubelet labels its Node with
    labels.setdefault("kubernetes.io/hostname", obj["metadata"]["name"])
    labels.setdefault("kubernetes.io/os", "linux")
    labels.setdefault("kubernetes.io/arch", "amd64")


def _create_job(obj: dict) -> None:
    spec, meta = obj["spec"], obj["metadata"]
    if not spec.get("manualSelector") and meta.get("uid"):
        # The Job strategy generates the selector and the template labels from the Job's uid and name.
        generated = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"],
                     "controller-uid": meta["uid"], "job-name": meta["name"]}
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}}
        spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(generated)
    _job_labels(obj)   # the stored Job is decoded (and defaulted) again, now with the generated template labels


CREATE_ONLY: dict[str, Callable[[dict], None]] = {
    "pods": _create_pod, "namespaces": _create_namespace, "nodes": _create_node, "jobs.batch": _create_job,
}


def prepare_for_create(key: str, obj: dict) -> None:
    """What a create adds after `apply_defaults`: strategy PrepareForCreate, CREATE admission, node labels."""
    prepare = CREATE_ONLY.get(key)
    if prepare:
        prepare(obj)
