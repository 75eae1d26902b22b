"""ACP's admission of user edits to chart-rendered objects: the edit is allowed and recorded as a
ResourcePatch in the plugin's namespace, so it survives chart reconciliation (see `chart.py`).

Upstream: the ACP Descheduler page ("Configure a Bounded VM Rebalance Policy": the API server prints
`Warning: The operation is allowed, and ResourcePatch rp-<suffix> is created`; "Stop and Roll Back":
deleting the ResourcePatch restores the chart-managed policy) and ACP's ResourcePatch documentation
(`operator.alauda.io/v1alpha1`, `spec.release`, `spec.target`, `spec.jsonPatch`, label `target`).

When anyone but ACP's own platform components (identities `system:serviceaccount:cpaas-system:*`, which
include the chart reconciler) updates or patches a chart-rendered object (`UPDATE` on the main resource):
a user with the kubeconfig's token (`kubernetes-admin`), the real kubectl (which sends no bearer token over
plain HTTP and so arrives as `system:anonymous`), an in-process test or a controller; and the new content
differs from what the chart reconciler would render (rendering + existing ResourcePatches), the hook
creates ResourcePatch `rp-<5 random>` in the release namespace with `spec.jsonPatch` = the RFC 6902
difference from that rendering to the new content (top-level fields other than metadata and status),
label `target: <md5 of apiVersion/kind/namespace/name>` and annotation `cpaas.io/creator: <user>`, and
adds the warning to the answer.

Dry run: the hook behaves as a webhook registered with `sideEffects: NoneOnDryRun`, which the API server
calls on dry-run requests with `dryRun: true`: it still computes its decision, but records no ResourcePatch
and adds no warning, since the warning reports by name a ResourcePatch that a dry run never creates (a
webhook's warnings describe what it did). The dry-run answer is the edited object, as a real write stores it.

Simplified: the real webhook's exact patch layout, label hash and exempt identities are not public; edits
of labels or annotations only are not recorded (the reconciler does not manage metadata); an edit by a
platform identity is not recorded, so the reconciler undoes it.
"""
from __future__ import annotations

import hashlib

from ..api import AdmissionRequest, RequestContext
from . import chart

WARNING = "The operation is allowed, and ResourcePatch {name} is created"
CREATOR_ANNOTATION = "cpaas.io/creator"


PLATFORM_PREFIX = "system:serviceaccount:cpaas-system:"


def recorded(user: str) -> bool:
    """Whether an edit by this caller becomes a ResourcePatch: everyone's but ACP's own components'."""
    return not user.startswith(PLATFORM_PREFIX)


def target_label(api_version: str, kind: str, namespace: str, name: str) -> str:
    return hashlib.md5(f"{api_version}/{kind}/{namespace}/{name}".encode(), usedforsecurity=False).hexdigest()


def resource_patch_hook(cluster):
    def hook(request: AdmissionRequest) -> None:
        if request.operation != "UPDATE" or request.subresource or request.obj is None or request.old is None:
            return
        if not recorded(request.context.user):
            return
        controller = chart.controller_for(cluster)
        if controller is None:
            return
        release = controller.release(request.resource.key, request.old)
        if release is None:
            return
        target = (request.resource.key, request.namespace, request.name)
        base = controller.desired(target)
        if base is None:
            return
        operations = chart.json_diff(base, chart.content(request.obj))
        if not operations or request.context.dry_run:
            return   # NoneOnDryRun: no ResourcePatch, and so no warning naming one (see the module docstring)
        rt = request.resource
        release_namespace = release.split("/", 1)[0] or request.namespace
        rp_rt = cluster.registry.by_key(chart.RP_KEY)
        created = cluster.create(rp_rt, release_namespace, {
            "apiVersion": rp_rt.api_version, "kind": rp_rt.kind,
            "metadata": {"generateName": "rp-", "namespace": release_namespace,
                         "labels": {"target": target_label(rt.api_version, rt.kind, request.namespace, request.name)},
                         "annotations": {CREATOR_ANNOTATION: request.context.user}},
            "spec": {"release": release,
                     "target": {"apiVersion": rt.api_version, "kind": rt.kind, "namespace": request.namespace,
                                "name": request.name},
                     "jsonPatch": operations}},
            RequestContext(user=chart.CONTROLLER_USER))
        request.context.warnings.append(WARNING.format(name=created["metadata"]["name"]))

    return hook


def register(cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if cluster.registry.by_key(chart.RP_KEY) is None:
        return
    cluster.admission_hooks.append(resource_patch_hook(cluster))
