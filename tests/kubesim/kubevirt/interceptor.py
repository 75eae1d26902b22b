"""KubeVirt's eviction interceptor: the validating admission webhook
`virt-launcher-eviction-interceptor.kubevirt.io` on `pods/eviction` (virt-api's pod eviction admitter).

The webhook reads the evicted Pod (a Pod it cannot read is passed through) and then decides:
- A hotplug attachment Pod (label `kubevirt.io=hotplug-disk`, exactly one ownerReference): its owner Pod
  (the first ownerReference's name) missing, not a `kubevirt.io=virt-launcher` Pod, finished, or without
  `kubevirt.io/domain` -> passed; the owner unreadable for another reason -> 429 `failed getting owner for
  hotplug pod: <error>`; the VMI missing -> passed; unreadable -> 429 `kubevirt failed getting the vmi:
  <error>`; the VMI there -> 429 `cannot evict hotplug pod: <pod> associated with running vmi: <vmi> in
  namespace <ns>`.
- A virt-launcher Pod (`kubevirt.io=virt-launcher`) that has not finished: without `kubevirt.io/domain`
  passed; the VMI it names unreadable, missing included -> 429 `kubevirt failed getting the vmi: <error>`
  (`virtualmachineinstances.kubevirt.io "<name>" not found`); then by the VMI's effective eviction strategy
  (`spec.evictionStrategy`, else the KubeVirt CR's `spec.configuration.evictionStrategy`, else None):
  - `LiveMigrate`: not live-migratable -> 429 `VMI <name> is configured with an eviction strategy but is not
    live-migratable`; otherwise mark.
  - `LiveMigrateIfPossible`: mark if live-migratable, else allow (the Pod is deleted).
  - `External`: always mark.
  - `None`: allow (the Pod is deleted; a VM whose run strategy keeps it running starts again elsewhere).
- Any other Pod: passed (the eviction goes on to the PDB checks and deletes the Pod).
- Marking: already marked (`status.evacuationNodeName` set) -> 429 `Evacuation in progress: Eviction
  triggered evacuation of VMI "<ns>/<name>"`; the Pod not on the VMI's node (a migration target) -> 429
  `Eviction request for target Pod`; otherwise a JSON patch adds `status.evacuationNodeName` = the Pod's
  node; a failed patch -> 429 `kubevirt failed marking the vmi for eviction: <error>` (the caller retries);
  else the VMI gets annotation `kubevirt.io/eviction-source: descheduler` when the Eviction's
  `metadata.annotations` has `requested-by: sigs.k8s.io/descheduler`, and the answer is 429 `Eviction
  triggered evacuation of VMI "<ns>/<name>"`.
- Dry run (the request's `dryRun=All`, or `deleteOptions.dryRun: [All]` in the Eviction, as upstream's
  `isDryRun` reads both; `kubectl drain --dry-run=server` sends only the latter): the same reads, the mark
  patch sent as a dry run (so it can fail the same way) and the same 429 answers, but the VMI is not
  touched, so no evacuation, no migration and no eviction-source annotation follow.
`<error>` is the message of the Status the read or the patch got (what client-go's error prints). The reads
and the patch are internal calls: fault rules with `component: virt-api` (faults.py) make them fail.
Every denial is a 429 (reason TooManyRequests) whose message is prefixed, as the API server does for a
webhook denial, with `admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the
request: `. The evacuation controller (`evacuation.py`) then creates the migration.

Upstream source: kubevirt/kubevirt `pkg/virt-api/webhooks/validating-webhook/admitters/
pod-eviction-admitter.go` (v1.8: `Admit`, `admitHotplugPod`, `admitLauncherPod`, `markVMI`, `isDryRun`) and
apiserver `admission/plugin/webhook/errors` (the prefix).
Simplified: runs in process as an admission hook (no webhook timeouts or failure policy); the
eviction-source annotation is a separate write after the mark (from the ACP rebalance page, not the
admitter)."""
from __future__ import annotations

from ..api import AdmissionRequest, RequestContext
from ..errors import ApiError, not_found
from ..faults import inject
from .common import (APP_LABEL, DOMAIN_ANNOTATION, EVICTION_SOURCE_ANNOTATION, PODS, VMI, annotations,
                     condition_true, find, labels, meta, mutate, pod_terminal, rt, serves, status)
from .defaults import effective_strategy

WEBHOOK = "virt-launcher-eviction-interceptor.kubevirt.io"
PREFIX = f'admission webhook "{WEBHOOK}" denied the request: '
DESCHEDULER = "sigs.k8s.io/descheduler"
COMPONENT = "virt-api"        # whose internal calls fault rules with `component` target


def denied(message: str) -> ApiError:
    return ApiError(429, "TooManyRequests", PREFIX + message)


def is_dry_run(request: AdmissionRequest) -> bool:
    """The admitter's isDryRun: the request's dryRun, else `deleteOptions.dryRun[0] == "All"` in the Eviction
    (`kubectl drain --dry-run=server` sends only the latter)."""
    if request.context.dry_run:
        return True
    dry = ((request.obj or {}).get("deleteOptions") or {}).get("dryRun") or []
    return bool(dry) and dry[0] == "All"


def is_launcher(pod: dict) -> bool:
    return labels(pod).get(APP_LABEL) == "virt-launcher"


def is_hotplug(pod: dict) -> bool:
    return labels(pod).get(APP_LABEL) == "hotplug-disk" and len(meta(pod).get("ownerReferences") or []) == 1


def read(cluster, key: str, namespace: str, name: str) -> dict:
    """virt-api's GET: the stored object, else the ApiError its client gets (a fault rule's, or 404)."""
    resource = rt(cluster, key)
    inject(cluster, COMPONENT, "get", resource.plural, namespace, name)
    obj = find(cluster, key, namespace, name)
    if obj is None:
        raise not_found(resource, name)
    return obj


def admit_hotplug(cluster, pod: dict) -> None:
    namespace, name = meta(pod).get("namespace"), meta(pod)["name"]
    try:
        owner = read(cluster, PODS, namespace, meta(pod)["ownerReferences"][0].get("name") or "")
    except ApiError as err:
        if err.code == 404:
            return
        raise denied(f"failed getting owner for hotplug pod: {err.message}") from None
    vmi_name = annotations(owner).get(DOMAIN_ANNOTATION)
    if not is_launcher(owner) or pod_terminal(owner) or vmi_name is None:
        return
    try:
        read(cluster, VMI, namespace, vmi_name)
    except ApiError as err:
        if err.code == 404:
            return
        raise denied(f"kubevirt failed getting the vmi: {err.message}") from None
    raise denied(f"cannot evict hotplug pod: {name} associated with running vmi: {vmi_name} in namespace {namespace}")


def admit_launcher(cluster, request: AdmissionRequest, pod: dict) -> None:
    vmi_name = annotations(pod).get(DOMAIN_ANNOTATION)
    if vmi_name is None:
        return
    namespace = request.namespace
    try:
        vmi = read(cluster, VMI, namespace, vmi_name)
    except ApiError as err:
        raise denied(f"kubevirt failed getting the vmi: {err.message}") from None
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
    dry_run = is_dry_run(request)
    resource = rt(cluster, VMI)
    try:
        inject(cluster, COMPONENT, "patch", resource.plural, namespace, vmi_name, dry_run=dry_run)
        cluster.patch(resource, namespace, vmi_name, "json",
                      [{"op": "add", "path": "/status/evacuationNodeName", "value": node}],
                      RequestContext(dry_run=dry_run), subresource="status")
    except ApiError as err:
        raise denied(f"kubevirt failed marking the vmi for eviction: {err.message}") from None
    eviction_annotations = ((request.obj or {}).get("metadata") or {}).get("annotations") or {}
    if not dry_run and eviction_annotations.get("requested-by") == DESCHEDULER:
        def add_source(obj: dict) -> None:
            obj["metadata"].setdefault("annotations", {})[EVICTION_SOURCE_ANNOTATION] = "descheduler"
        mutate(cluster, VMI, namespace, vmi_name, add_source, uid=meta(vmi)["uid"])
    raise denied(triggered)


def make_hook(cluster):
    def intercept(request: AdmissionRequest) -> None:
        if request.subresource != "eviction" or request.resource.key != PODS:
            return
        try:
            pod = read(cluster, PODS, request.namespace, request.name)
        except ApiError:
            return      # upstream passes an eviction whose Pod it cannot read
        if is_hotplug(pod):
            admit_hotplug(cluster, pod)
        elif is_launcher(pod) and not pod_terminal(pod):
            admit_launcher(cluster, request, pod)
    return intercept


def register(cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if serves(cluster, VMI, PODS):
        cluster.admission_hooks.append(make_hook(cluster))
