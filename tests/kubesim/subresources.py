"""Built-in subresources with behaviour of their own: `pods/eviction` and `pods/log`. Admission hooks
registered on the cluster (the KubeVirt eviction interceptor, PDB checks) see an eviction as a CREATE on
`pods` with subresource `eviction` and may refuse it with an ApiError (429 and its message)."""
from __future__ import annotations

from .api import AdmissionRequest, Cluster, RequestContext
from .errors import bad_request, not_found


def evict(cluster: Cluster, namespace: str, name: str, body: dict, ctx: RequestContext) -> dict:
    pods = cluster.registry.by_key("pods")
    if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
        raise bad_request("the body of the request is not an Eviction")
    if (body.get("metadata") or {}).get("name") not in (None, name):
        raise bad_request("name in URL does not match name in Eviction object")
    with cluster.lock:
        pod = cluster.store.get("pods", namespace, name)
        if pod is None:
            raise not_found(pods, name)
        request = AdmissionRequest("CREATE", pods, "eviction", namespace, name, body, pod.obj,
                                   body.get("deleteOptions") or {}, ctx)
        cluster.admit(request)   # webhooks first (the KubeVirt interceptor), as in the real API server
        for guard in list(cluster.eviction_guards):   # then the eviction REST's own checks (PDBs)
            guard(request)
        if not ctx.dry_run:
            cluster.delete(pods, namespace, name, body.get("deleteOptions") or {}, ctx)
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
