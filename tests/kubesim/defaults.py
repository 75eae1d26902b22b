"""Defaults the API server fills in at creation, for the kinds where clients rely on them."""
from __future__ import annotations

from typing import Callable


def _pod(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("tolerations", [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}])
    for container in spec.get("containers") or []:
        container.setdefault("imagePullPolicy", "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))
    # Go serialises these ContainerStatus fields even when empty; the typed Python client requires them.
    images = {c.get("name"): c.get("image", "") for c in spec.get("containers") or []}
    for cs in status.get("containerStatuses") or []:
        cs.setdefault("image", images.get(cs.get("name"), ""))
        cs.setdefault("imageID", "")
        cs.setdefault("ready", False)
        cs.setdefault("restartCount", 0)


def qos_class(spec: dict) -> str:
    containers = spec.get("containers") or []
    requests = [c.get("resources", {}).get("requests") or {} for c in containers]
    limits = [c.get("resources", {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(lim.get("cpu") and lim.get("memory") and
                     (not req or (req.get("cpu", lim["cpu"]) == lim["cpu"] and
                                  req.get("memory", lim["memory"]) == lim["memory"]))
                     for req, lim in zip(requests, limits))
    return "Guaranteed" if guaranteed else "Burstable"


def _namespace(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")
    labels = obj["metadata"].setdefault("labels", {})
    labels.setdefault("kubernetes.io/metadata.name", obj["metadata"]["name"])


def _node(obj: dict) -> None:
    labels = obj["metadata"].setdefault("labels", {})
    labels.setdefault("kubernetes.io/hostname", obj["metadata"]["name"])
    labels.setdefault("kubernetes.io/os", "linux")
    labels.setdefault("kubernetes.io/arch", "amd64")
    # A kubelet reports every NodeSystemInfo field (Go serialises them even when empty); the typed Python
    # client rejects a nodeInfo without them.
    info = (obj.get("status") or {}).get("nodeInfo")
    if isinstance(info, dict):
        for key in ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
                    "kubeletVersion", "kubeProxyVersion"):
            info.setdefault(key, "")
        info.setdefault("operatingSystem", "linux")
        info.setdefault("architecture", "amd64")


def _cronjob(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("suspend", False)
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    obj.setdefault("status", {})


def _job(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    template = spec.setdefault("template", {})
    template.setdefault("spec", {}).setdefault("restartPolicy", "Never")
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    meta = obj["metadata"]
    if not spec.get("manualSelector") and meta.get("uid"):
        # The Job strategy generates the selector and the template labels from the Job's uid and name.
        generated = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"],
                     "controller-uid": meta["uid"], "job-name": meta["name"]}
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}}
        template.setdefault("metadata", {}).setdefault("labels", {}).update(generated)
    obj.setdefault("status", {})


def _deployment(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    spec.setdefault("strategy", {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    obj.setdefault("status", {})


def _daemonset(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("maxUnavailable", 1)
        strategy["rollingUpdate"].setdefault("maxSurge", 0)
    obj.setdefault("status", {})


def _replicaset(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("replicas", 1)
    obj.setdefault("status", {})


def _service(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))


def _pvc(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _pdb(obj: dict) -> None:
    obj.setdefault("status", {}).setdefault("disruptionsAllowed", 0)


DEFAULTERS: dict[str, Callable[[dict], None]] = {
    "pods": _pod, "namespaces": _namespace, "nodes": _node, "cronjobs.batch": _cronjob, "jobs.batch": _job,
    "deployments.apps": _deployment, "services": _service, "persistentvolumeclaims": _pvc,
    "daemonsets.apps": _daemonset, "replicasets.apps": _replicaset,
    "poddisruptionbudgets.policy": _pdb,
}


def apply_defaults(key: str, obj: dict) -> None:
    defaulter = DEFAULTERS.get(key)
    if defaulter:
        defaulter(obj)
