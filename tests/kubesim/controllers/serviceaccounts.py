"""ServiceAccounts: the ServiceAccount controller (a `default` ServiceAccount in every active namespace,
recreated when deleted) and the `ServiceAccount` admission plugin for Pod creation.

Controller (upstream pkg/controller/serviceaccount/serviceaccounts_controller.go): on a namespace add or
update, and on the deletion of a ServiceAccount, it ensures `default` exists in that namespace unless the
namespace is not `Active` (a terminating namespace gets nothing). The object it creates carries only its name
and namespace (no token Secrets since v1.24).

"At once": upstream the controller is asynchronous and the admission plugin covers the race by reading the
`default` ServiceAccount live up to 10 times (100-200 ms apart) before it refuses. Here the controller runs
as a store listener, so `default` is written in the same call that stores the namespace (or removes the
ServiceAccount): a Pod created right after its namespace, by a scenario or a client, never sees it missing.

Admission (upstream plugin/pkg/admission/serviceaccount/admission.go, Pod CREATE only): a mirror Pod
(`kubernetes.io/config.mirror`) is not defaulted and may not name an account (403 `a mirror pod may not
reference service accounts`; `default` passes, creation defaults here having written it). Any other Pod's
`spec.serviceAccountName` defaults to `default` (decoding has already read the deprecated
`spec.serviceAccount` into it; the v1 Pod reports the name in both), and a missing ServiceAccount is refused
with 403 `pods "<name>" is forbidden: error looking up service account <ns>/<sa>: serviceaccount "<sa>" not
found`.

Simplified: no projected token volume (`kube-api-access-<5>`), no `imagePullSecrets` copied from the
ServiceAccount, no mountable-secrets enforcement, no check of a mirror Pod's Secret references (and
creation defaults give a mirror Pod `default` too); a Pod with `generateName` is named in the message by its
generated name (upstream by the prefix, as admission runs before name generation)."""
from __future__ import annotations

from ..api import AdmissionRequest, Cluster
from ..errors import ApiError
from ..store import ADDED, DELETED, MODIFIED, Event

DEFAULT = "default"
_KEY = "serviceaccounts"
_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def ensure_default(cluster: Cluster, namespace: str) -> None:
    """Create the `default` ServiceAccount in an active namespace that lacks it."""
    ns = cluster.store.get("namespaces", "", namespace)
    if ns is None or (ns.obj.get("status") or {}).get("phase", "Active") != "Active":
        return
    if cluster.store.get(_KEY, namespace, DEFAULT) is not None:
        return
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT, "namespace": namespace}}
    try:
        cluster.create(cluster.registry.by_key(_KEY), namespace, body)
    except ApiError:
        pass   # already there or the namespace is going: as upstream, nothing to do


def service_account_controller(cluster: Cluster):
    def on_event(event: Event) -> None:
        if event.key == "namespaces" and event.type in (ADDED, MODIFIED):
            ensure_default(cluster, event.obj["metadata"]["name"])
        elif event.key == _KEY and event.type == DELETED:
            ensure_default(cluster, event.namespace)
    return on_event


def pod_forbidden(name: str, why: str) -> ApiError:
    """403 as admission.NewForbidden builds it for a Pod."""
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {why}', {"name": name, "kind": "pods"})


def service_account_admission(cluster: Cluster):
    def admit(request: AdmissionRequest) -> None:
        if request.resource.key != "pods" or request.operation != "CREATE" or request.subresource:
            return
        pod = request.obj
        spec = pod.setdefault("spec", {})
        if _MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
            # a mirror Pod gets no account; `default` is what creation defaults wrote, not the kubelet
            if spec.get("serviceAccountName") not in (None, "", DEFAULT):
                raise pod_forbidden(request.name, "a mirror pod may not reference service accounts")
            return
        name = spec.get("serviceAccountName") or DEFAULT
        spec["serviceAccountName"] = spec["serviceAccount"] = name   # the v1 Pod reports it in both fields
        if cluster.store.get(_KEY, request.namespace, name) is None:
            raise pod_forbidden(request.name, f"error looking up service account {request.namespace}/{name}: "
                                f'serviceaccount "{name}" not found')
    return admit


def register(cluster: Cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if cluster.registry.by_key(_KEY) is None or cluster.registry.by_key("namespaces") is None:
        return
    cluster.add_listener(service_account_controller(cluster))
    with cluster.lock:   # the namespaces that exist already, as the controller's first list finds them
        for namespace in [entry.obj["metadata"]["name"] for entry in cluster.store.entries("namespaces")]:
            ensure_default(cluster, namespace)
    if cluster.registry.by_key("pods") is not None:
        cluster.admission_hooks.append(service_account_admission(cluster))
