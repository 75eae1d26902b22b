"""Built-in subresources with behaviour of their own: `pods/eviction` and `pods/log`. Admission hooks
registered on the cluster (the KubeVirt eviction interceptor, PDB checks) see an eviction as a CREATE on
`pods` with subresource `eviction` and may refuse it with an ApiError (429 and its message).

Dry run, as the eviction REST does it (`pkg/registry/core/pod/storage/eviction.go`, propagateDryRun): the
Eviction is a dry run when the request says `?dryRun=All` or its `deleteOptions.dryRun` does (what `kubectl
drain --dry-run=server` sends: only the body); both set and different is an error. Admission hooks see the
request's own dryRun in `context.dry_run` and the Eviction body in `obj` (KubeVirt's webhook reads both);
the PDB check and the Pod's deletion see the combined one, so a dry run decrements no budget and deletes
no Pod, and still answers 201 Success or the 429 a real eviction would get."""
from __future__ import annotations

import copy
from dataclasses import replace

from .api import AdmissionRequest, Cluster, RequestContext
from .errors import ApiError, bad_request, not_found


def is_dry_run(values) -> bool:
    return bool(values)   # apiserver dryrun.IsDryRun: any value (validation allows only "All")


def evict(cluster: Cluster, namespace: str, name: str, body: dict, ctx: RequestContext) -> dict:
    pods = cluster.registry.by_key("pods")
    if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
        raise bad_request("the body of the request is not an Eviction")
    if (body.get("metadata") or {}).get("name") not in (None, name):
        raise bad_request("name in URL does not match name in Eviction object")
    eviction = copy.deepcopy(body)
    query_dry = ["All"] if ctx.dry_run else []
    delete_options = eviction.get("deleteOptions")
    body_dry = list((delete_options or {}).get("dryRun") or [])
    if query_dry and body_dry and query_dry != body_dry:
        raise ApiError(500, "InternalError", "Internal error occurred: DryRun in DeleteOptions "
                       f"([{' '.join(body_dry)}]) doesn't match DryRun in CreateOptions ([{' '.join(query_dry)}])")
    if delete_options is None:
        delete_options = {"dryRun": query_dry} if query_dry else {}
    elif query_dry and not body_dry:
        delete_options["dryRun"] = query_dry     # propagated into the Eviction the webhooks see
    rest_ctx = replace(ctx, dry_run=True) if is_dry_run(query_dry or body_dry) and not ctx.dry_run else ctx
    with cluster.lock:
        pod = cluster.store.get("pods", namespace, name)
        if pod is None:
            raise not_found(pods, name)
        request = AdmissionRequest("CREATE", pods, "eviction", namespace, name, eviction, pod.obj,
                                   copy.deepcopy(delete_options), ctx)
        cluster.admit(request)   # webhooks first (the KubeVirt interceptor), as in the real API server
        checked = replace(request, context=rest_ctx)
        for guard in list(cluster.eviction_guards):   # then the eviction REST's own checks (PDBs)
            guard(checked)
        cluster.delete(pods, namespace, name, delete_options, rest_ctx, admit=False)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def pod_log(cluster: Cluster, namespace: str, name: str, query: dict) -> str:
    pods = cluster.registry.by_key("pods")
    entry = cluster.store.get("pods", namespace, name)
    if entry is None:
        raise not_found(pods, name)
    containers = [c["name"] for c in (entry.obj.get("spec") or {}).get("containers") or []]
    container = query.get("container")
    if not container:
        if len(containers) > 1:
            raise bad_request(f"a container name must be specified for pod {name}, choose one of: "
                              f"[{' '.join(containers)}]")
        container = containers[0] if containers else ""
    elif container not in containers:
        raise bad_request(f"container {container} is not valid for pod {name}")
    lines = cluster.read_log(namespace, name, container)
    tail = query.get("tailLines")
    if tail not in (None, ""):
        count = int(tail)
        lines = lines[-count:] if count > 0 else []
    limit = query.get("limitBytes")
    text = "".join(line + "\n" for line in lines)
    if limit:
        text = text[: int(limit)]
    return text


def register(cluster: Cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if cluster.registry.by_key("pods") is not None:
        cluster.subresources[("pods", "eviction")] = evict
        cluster.subresources[("pods", "log")] = pod_log
