"""Subresources with behaviour of their own: `pods/eviction`, `pods/log` and `/scale`. Admission hooks
registered on the cluster (the KubeVirt eviction interceptor, PDB checks) see an eviction as a CREATE on
`pods` with subresource `eviction` and may refuse it with an ApiError (429 and its message).

Dry run, as the eviction REST does it (`pkg/registry/core/pod/storage/eviction.go`, propagateDryRun): the
Eviction is a dry run when the request says `?dryRun=All` or its `deleteOptions.dryRun` does (what `kubectl
drain --dry-run=server` sends: only the body); both set and different is an error. Admission hooks see the
request's own dryRun in `context.dry_run` and the Eviction body in `obj` (KubeVirt's webhook reads both);
the PDB check and the Pod's deletion see the combined one, so a dry run decrements no budget and deletes
no Pod, and still answers 201 Success or the 429 a real eviction would get.

`/scale` (autoscaling/v1 Scale) of Deployments, ReplicaSets, StatefulSets (`pkg/registry/apps/*/storage`
ScaleREST) and of custom kinds with a CRD scale subresource (apiextensions `pkg/registry/customresource/etcd.go`
ScaleREST, by `ResourceType.scale` paths: KubeVirt's VirtualMachineInstanceReplicaSet and VirtualMachinePool):
a Scale carries the parent's name, namespace, uid, resourceVersion and creationTimestamp, `spec.replicas` and
`status.replicas`/`status.selector`. An update (PUT) or patch (merge, JSON, apply; strategic for the built-in
kinds) edits the old Scale and writes only its `spec.replicas` into the parent, as an UPDATE of the parent with
subresource `scale` (so admission, dry run and the parent's resourceVersion precondition, 409, apply); a Scale
`resourceVersion` is that precondition. A missing parent is 404 (`deployments.apps "x" not found` on a get,
`deployments/scale.apps "x" not found` on a write of a built-in kind)."""
from __future__ import annotations

import copy
from dataclasses import replace

from . import patching, printers
from .api import AdmissionRequest, Cluster, RequestContext
from .errors import ApiError, bad_request, conflict, invalid, not_found, unsupported_media_type
from .resources import ResourceType


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


def _path(path: str) -> list[str]:
    return path.lstrip(".").split(".")


def _value_at(obj: dict, path: str):
    value = obj
    for part in _path(path):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _scale_parts(rt: ResourceType, obj: dict) -> tuple[int | None, int, str]:
    """spec replicas (None: a custom kind without the field), status replicas, selector string."""
    if rt.scale is not None:
        spec_path, status_path, selector_path = rt.scale
        replicas = _value_at(obj, spec_path)
        return (None if replicas is None else int(replicas), int(_value_at(obj, status_path) or 0),
                str(_value_at(obj, selector_path) or ""))
    spec = obj.get("spec") or {}
    replicas = spec.get("replicas")
    return (1 if replicas is None else int(replicas),   # apps/v1 defaulting: 1
            int((obj.get("status") or {}).get("replicas") or 0), printers.selector_string(spec.get("selector")))


def scale_of(rt: ResourceType, obj: dict) -> dict:
    """The parent as an autoscaling/v1 Scale, as Go writes it (`spec.replicas` omitted when 0)."""
    meta = obj["metadata"]
    replicas, status_replicas, selector = _scale_parts(rt, obj)
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                  if meta.get(k)}
    status: dict = {"replicas": status_replicas}
    if selector:
        status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
            "spec": {"replicas": replicas} if replicas else {}, "status": status}


def _scale_resource(rt: ResourceType) -> ResourceType:
    """`deployments/scale` in the group `apps`: how the built-in ScaleRESTs name what a write did not find."""
    return replace(rt, plural=f"{rt.plural}/scale")


def _edit(rt: ResourceType, old_scale: dict, verb: str, body, patch_type: str | None) -> dict:
    if verb == "update":
        if not isinstance(body, dict) or body.get("kind") not in (None, "Scale"):
            raise bad_request("the body of the request is not a Scale")
        new = copy.deepcopy(body)
        name = old_scale["metadata"]["name"]
        if (new.get("metadata") or {}).get("name") not in (None, "", name):
            raise bad_request(f"the name of the object ({new['metadata']['name']}) does not match the name on the "
                              f"URL ({name})")
        return new
    if patch_type == "strategic" and not rt.builtin:   # the custom resource handler's patch types
        raise unsupported_media_type("application/strategic-merge-patch+json", [
            "application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"])
    if patch_type == "json":
        return patching.json_patch(old_scale, body)
    if patch_type in ("strategic", "apply"):
        return patching.strategic_merge_patch(old_scale, body)
    if patch_type == "merge":
        return patching.json_merge_patch(old_scale, body)
    raise unsupported_media_type(str(patch_type), ["application/json-patch+json", "application/merge-patch+json",
                                                   "application/strategic-merge-patch+json",
                                                   "application/apply-patch+yaml"])


def _checked_replicas(rt: ResourceType, name: str, scale: dict, parent_uid: str) -> int:
    replicas = (scale.get("spec") or {}).get("replicas") or 0
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise bad_request(f"json: cannot unmarshal {type(replicas).__name__} into Go struct field "
                          "ScaleSpec.spec.replicas of type int32")
    if rt.scale is None:
        if replicas < 0:   # ValidateScale
            raise invalid(rt, "Scale", name, [("spec.replicas", f"Invalid value: {replicas}: must be greater than "
                                               "or equal to 0")], group="autoscaling")
        uid = (scale.get("metadata") or {}).get("uid")
        if uid and uid != parent_uid:
            raise conflict(_scale_resource(rt), name, f"Precondition failed: UID in precondition: {uid}, UID in "
                           f"object meta: {parent_uid}")
    elif replicas < 0:   # the custom resource validator's scale check
        raise invalid(rt, rt.kind, name, [(".".join(_path(rt.scale[0])), f"Invalid value: {replicas}: should be a "
                                           "non-negative integer")])
    return replicas


def scale(cluster: Cluster, rt: ResourceType, namespace: str | None, name: str, verb: str, body=None,
          patch_type: str | None = None, ctx: RequestContext | None = None) -> dict:
    """GET, PUT or PATCH on `<parent>/scale`; answers the (new) Scale."""
    ctx = ctx or RequestContext()
    ns = (namespace or "") if rt.namespaced else ""
    with cluster.lock:
        entry = cluster.store.get(rt.key, ns, name)
        if verb == "get" or entry is None:
            if entry is None:
                raise not_found(rt if verb == "get" or rt.scale is not None else _scale_resource(rt), name)
            parts = _scale_parts(rt, entry.obj)
            if parts[0] is None:
                raise ApiError(500, "InternalError", f'Internal error occurred: the spec replicas field '
                               f'"{rt.scale[0]}" does not exist')
            return scale_of(rt, entry.obj)
        parent = entry.obj
        old_scale = scale_of(rt, parent)
        new_scale = _edit(rt, old_scale, verb, body, patch_type)
        if not isinstance(new_scale, dict):
            raise bad_request("the patch did not produce an object")
        replicas = _checked_replicas(rt, name, new_scale, parent["metadata"]["uid"])
        updated = copy.deepcopy(parent)
        *parents, field = _path(rt.scale[0] if rt.scale else ".spec.replicas")
        holder = updated
        for part in parents:
            holder = holder.setdefault(part, {})
        holder[field] = replicas
        wanted_rv = (new_scale.get("metadata") or {}).get("resourceVersion")
        if wanted_rv:   # the Scale's resourceVersion is the parent's precondition
            updated["metadata"]["resourceVersion"] = wanted_rv
        return scale_of(rt, cluster.update(rt, namespace, name, updated, ctx, subresource="scale"))


def register(cluster: Cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if cluster.registry.by_key("pods") is not None:
        cluster.subresources[("pods", "eviction")] = evict
        cluster.subresources[("pods", "log")] = pod_log
    for rt in cluster.registry.types:
        if "scale" in rt.subresources:
            cluster.subresources[(rt.key, "scale")] = scale
