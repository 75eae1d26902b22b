"""KubeVirt's eviction interceptor: the validating admission webhook
`virt-launcher-eviction-interceptor.kubevirt.io` on `pods/eviction`.

Decision for an Eviction of a Pod:
- Passed through (the eviction goes on to the PDB checks and deletes the Pod): Pods without label
  `kubevirt.io=virt-launcher`, finished Pods, Pods without the `kubevirt.io/domain` annotation.
- The VMI named by `kubevirt.io/domain` missing: 429 `kubevirt failed getting the vmi: <error>`.
- By the VMI's effective eviction strategy (`spec.evictionStrategy`, else the KubeVirt CR's
  `spec.configuration.evictionStrategy`, else None):
  - `LiveMigrate`: not live-migratable -> 429 `VMI <name> is configured with an eviction strategy but is not
    live-migratable`; otherwise mark.
  - `LiveMigrateIfPossible`: mark if live-migratable, else allow (the Pod is deleted).
  - `External`: always mark.
  - `None`: allow (the Pod is deleted; a VM whose run strategy keeps it running starts again elsewhere).
- Marking: already marked (`status.evacuationNodeName` set) -> 429 `Evacuation in progress: Eviction
  triggered evacuation of VMI "<ns>/<name>"`; the Pod not on the VMI's node (a migration target) -> 429
  `Eviction request for target Pod`; otherwise `status.evacuationNodeName` is set to the Pod's node, the
  VMI gets annotation `kubevirt.io/eviction-source: descheduler` when the Eviction's `metadata.annotations`
  has `requested-by: sigs.k8s.io/descheduler`, and the answer is 429 `Eviction triggered evacuation of VMI
  "<ns>/<name>"`.
- Dry run (the request's `dryRun=All`, or `deleteOptions.dryRun: [All]` in the Eviction, as upstream's
  `isDryRun` reads both): the same decision and the same 429 answers, but the VMI is not touched (upstream
  sends its patch with dryRun), so no evacuation, no migration and no eviction-source annotation follow.
Every denial is a 429 (reason TooManyRequests) whose message is prefixed, as the API server does for a
webhook denial, with `admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the
request: `. The evacuation controller (`evacuation.py`) then creates the migration.

Upstream source: kubevirt/kubevirt `pkg/virt-api/webhooks/validating-webhook/admitters/
pod-eviction-admitter.go` (v1.8) and apiserver `admission/plugin/webhook/errors` (the prefix).
Simplified: runs in process as an admission hook (no webhook timeouts or failure policy)."""
from __future__ import annotations

from ..api import AdmissionRequest
from ..errors import ApiError
from .common import (APP_LABEL, DOMAIN_ANNOTATION, EVICTION_SOURCE_ANNOTATION, PODS, VMI, annotations,
                     condition_true, find, labels, meta, mutate, pod_terminal, serves, status)
from .defaults import effective_strategy

WEBHOOK = "virt-launcher-eviction-interceptor.kubevirt.io"
PREFIX = f'admission webhook "{WEBHOOK}" denied the request: '
DESCHEDULER = "sigs.k8s.io/descheduler"


def denied(message: str) -> ApiError:
    return ApiError(429, "TooManyRequests", PREFIX + message)


def is_dry_run(request: AdmissionRequest) -> bool:
    """The admitter's isDryRun: the request's dryRun, else `deleteOptions.dryRun[0] == "All"` in the Eviction
    (`kubectl drain --dry-run=server` sends only the latter)."""
    if request.context.dry_run:
        return True
    dry = ((request.obj or {}).get("deleteOptions") or {}).get("dryRun") or []
    return bool(dry) and dry[0] == "All"


def make_hook(cluster):
    def intercept(request: AdmissionRequest) -> None:
        if request.subresource != "eviction" or request.resource.key != PODS:
            return
        pod = request.old
        if pod is None or labels(pod).get(APP_LABEL) != "virt-launcher" or pod_terminal(pod):
            return
        vmi_name = annotations(pod).get(DOMAIN_ANNOTATION)
        if vmi_name is None:
            return
        namespace = request.namespace
        vmi = find(cluster, VMI, namespace, vmi_name)
        if vmi is None:
            raise denied(f'kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io "{vmi_name}" '
                         "not found")
        strategy = effective_strategy(cluster, vmi)
        live_migratable = condition_true(vmi, "LiveMigratable")
        if strategy == "LiveMigrate":
            if not live_migratable:
                raise denied(f"VMI {vmi_name} is configured with an eviction strategy but is not live-migratable")
            mark = True
        elif strategy == "LiveMigrateIfPossible":
            mark = live_migratable
        else:
            mark = strategy == "External"
        if not mark:
            return
        triggered = f'Eviction triggered evacuation of VMI "{namespace}/{vmi_name}"'
        if status(vmi).get("evacuationNodeName"):
            raise denied(f"Evacuation in progress: {triggered}")
        node = (pod.get("spec") or {}).get("nodeName")
        if status(vmi).get("nodeName") != node:
            raise denied("Eviction request for target Pod")
        eviction_annotations = ((request.obj or {}).get("metadata") or {}).get("annotations") or {}
        if not is_dry_run(request):
            def mark_vmi(obj: dict) -> None:
                obj.setdefault("status", {})["evacuationNodeName"] = node
                if eviction_annotations.get("requested-by") == DESCHEDULER:
                    obj["metadata"].setdefault("annotations", {})[EVICTION_SOURCE_ANNOTATION] = "descheduler"
            mutate(cluster, VMI, namespace, vmi_name, mark_vmi, uid=meta(vmi)["uid"])
        raise denied(triggered)
    return intercept


def register(cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if serves(cluster, VMI, PODS):
        cluster.admission_hooks.append(make_hook(cluster))
