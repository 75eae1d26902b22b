"""virt-api's `subresources.kubevirt.io` API, as virtctl and kubevirt.core call it: PUT
`/apis/subresources.kubevirt.io/v1/namespaces/<ns>/virtualmachines/<name>/start|stop|restart|migrate` and
`/virtualmachineinstances/<name>/pause|unpause` (v1alpha3 answers the same). An aggregated API group: its paths
address the VMs and VMIs of `kubevirt.io`; RBAC asks about resource `virtualmachines/start` (and so on) in group
`subresources.kubevirt.io` with verb `update`.

Effects (the request body is StartOptions/StopOptions/RestartOptions/MigrateOptions/PauseOptions: `dryRun`,
`paused`, `gracePeriod`, `gracePeriodSeconds`, `addedNodeSelector`; a dry run does every check and writes nothing):
- start: runStrategy Halted -> `spec.runStrategy: Always` (or `spec.running: true` where the VM uses `running`);
  Manual and RerunOnFailure -> a Start state change request in `status.stateChangeRequests` (Stop + Start when the
  VMI is final); Always/Once: 409 `Always does not support manual start requests`; a VMI that is not final
  (and past phase Unset/Unknown): 409 `VM is already running`.
- stop: Always/Once -> `spec.runStrategy: Halted` (or `running: false`); Manual/RerunOnFailure -> a Stop request
  for the VMI's UID; Halted -> 409 `Halted only supports manual stop requests with a shorter graceperiod`
  (or `VM is not running`); `gracePeriod` first sets the VMI's `terminationGracePeriodSeconds`.
- restart: Stop (VMI UID) + Start requests, which the VM controller (`vm.py`) turns into a deletion of the VMI
  and a new one; Halted/Once: 409 `RunStategy Halted does not support manual restart requests` (upstream's
  spelling); no VMI: 409 `VM is not running: Halted`; `gracePeriodSeconds: 0` also deletes the running launcher
  Pod with a 1 s grace period, > 0 is 400 `For force restart, only gracePeriod=0 is supported for now`.
- migrate: a VirtualMachineInstanceMigration `kubevirt-migrate-vm-<5>` (generateName) for the VMI; the VMI must be
  Running (409 `VM is not running`).
- pause/unpause: virt-handler pauses the domain: VMI condition `Paused=True` (reason `PausedByUser`, message
  `VMI was paused by user`), removed again by unpause; 409 `VM is not running`, `VMI is already paused`,
  `VMI is not running`, `VMI is not paused`; 403 for a VMI with a livenessProbe.
- Answers: 202 Accepted with no body (start, stop, restart, migrate), 200 with no body (pause, unpause); errors are
  Status objects naming `virtualmachine.kubevirt.io` / `virtualmachineinstance.kubevirt.io` (404 `... not found`,
  409 `Operation cannot be fulfilled on ...`), 400 `Can not unmarshal Request body to struct, error: ...`, and an
  error of the write behind it as 500 `Internal error occurred: ...`.

- evacuate/cancel (`/virtualmachineinstances/<name>/evacuate/cancel`, `/virtualmachines/<name>/evacuate/cancel`),
  served only where the KubeVirt CR reports v1.7.0 or newer (older virt-api has no route: 404 `page not found`):
  cancels the evacuation of a VMI marked by the eviction interceptor, so that the evacuation controller creates no
  further migration for it. In order: the VMI (for a VM: 404 when the VM or its VMI is missing, 409 `VMI is not
  started` while `status.created` is false, 500 when the VMI is not the VM's); 400 `Node "<n>" has NodeDrainTaintKey
  "<key>:NoSchedule"` when the evacuation node (else the VMI's node) carries the (deprecated) drain taint, 500 when
  that node cannot be read; a VMI that is not marked: 200 and nothing changes; then the body, EvacuateCancelOptions
  `{"evacuationNodeName": <node>, "dryRun": ["All"]}` (400 when it cannot be decoded), and a JSON patch `test`
  `/status/evacuationNodeName` == the body's `evacuationNodeName`, `remove` it: a body naming another node (or
  none) fails the test and is answered 500 `Internal error occurred: ...`. Answer 200 with no body. Nothing else
  changes: migrations already created (Pending or running) are not touched; the migration controller still runs
  them (virtctl's `evacuate-cancel --migrate-cancel` deletes the VMI's unfinished migration for that).

Discovery of `/apis/subresources.kubevirt.io/v1`: an APIResourceList whose entries carry only a name and
`namespaced: true` (no kind, no verbs), as virt-api writes it; `virtualmachineinstances/evacuate/cancel` and
`virtualmachines/evacuate/cancel` only where the subresource is served.

Upstream source: kubevirt/kubevirt `pkg/virt-api/rest/lifecycle.go` (Start/Stop/Restart/Migrate/Pause/Unpause
handlers, getChangeRequestJson, getRunningPatch), `pkg/virt-api/rest/subresource.go` (fetch, writeError,
decodeBody), `pkg/virt-api/api.go` (the group's routes and resource list), `pkg/virt-handler` (Paused condition),
`pkg/virt-api/rest/evacuate_cancel.go` (evacuateCancel, validateEvacuationNode, fetchVirtualMachineInstanceForVM),
`pkg/virtctl/vm/evacuate_cancel.go`; the v1.7.0 release notes (kubevirt/kubevirt#16097, the release-1.7 backport
of #15957) for the first version that serves it.
Simplified: only these subresources are served and listed (upstream lists console, vnc, freeze, addvolume ...
too); state change requests are written under the cluster lock instead of with JSON-patch `test` operations (no
race can make them fail here); start with `paused: true` is not honoured; pausing stops nothing else."""
from __future__ import annotations

from types import SimpleNamespace

import yaml

from .. import errors
from ..api import RequestContext
from ..errors import ApiError
from .common import PODS, VM, VMI, VMIM, CREATED_BY_LABEL, FINAL_VMI_PHASES, find, get_condition, \
    meta, mutate, remove_condition, rt, serves, set_condition, status
from .defaults import kubevirt_version, migration_config
from .vm import run_strategy

GROUP = "subresources.kubevirt.io"
VERSIONS = ("v1", "v1alpha3")
TARGET_GROUP = "kubevirt.io"       # the group whose objects the paths address
VIRT_API_USER = "system:serviceaccount:kubevirt:kubevirt-apiserver"
# The resources named in Status errors: upstream builds them from the singular (v1.Resource("virtualmachine")).
_VM_RESOURCE = SimpleNamespace(plural="virtualmachine", group="kubevirt.io")
_VMI_RESOURCE = SimpleNamespace(plural="virtualmachineinstance", group="kubevirt.io")
PAUSED_REASON, PAUSED_MESSAGE = "PausedByUser", "VMI was paused by user"
EVACUATE_CANCEL = "evacuate/cancel"
EVACUATE_CANCEL_SINCE = (1, 7, 0)     # v1.7.0 release notes: kubevirt/kubevirt#16097 (backport of #15957)
EVACUATE_CANCEL_PLURALS = ("virtualmachineinstances", "virtualmachines")


def _conflict(resource, name: str, why: str) -> ApiError:
    return errors.conflict(resource, name, why)


def internal_error(message: str) -> ApiError:
    """apimachinery NewInternalError: the cause's message in details.causes."""
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def decode_options(body: bytes) -> dict:
    """decodeBody: YAML or JSON; an empty body is no options."""
    if not body.strip():
        return {}
    try:
        options = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"Can not unmarshal Request body to struct, error: {exc}") from None
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise errors.bad_request("Can not unmarshal Request body to struct, error: json: cannot unmarshal "
                                 f"{type(options).__name__} into Go value of type v1.Options")
    return options


def _context(options: dict) -> RequestContext:
    """virt-api writes as its own service account, passing the options' dryRun on."""
    return RequestContext(dry_run=bool(options.get("dryRun")), user=VIRT_API_USER,
                          field_manager="virt-api", default_field_manager="virt-api")


def _vm(cluster, namespace: str, name: str) -> dict:
    vm = find(cluster, VM, namespace, name)
    if vm is None:
        raise errors.not_found(_VM_RESOURCE, name)
    return vm


def _vmi(cluster, namespace: str, name: str, required: bool = True) -> dict | None:
    vmi = find(cluster, VMI, namespace, name)
    if vmi is None and required:
        raise errors.not_found(_VMI_RESOURCE, name)
    return vmi


def _final(vmi: dict | None) -> bool:
    return vmi is not None and status(vmi).get("phase") in FINAL_VMI_PHASES


def _write(call) -> None:
    """An error of the write virt-api makes behind the request is answered as an internal error."""
    try:
        call()
    except ApiError as err:
        raise internal_error(err.message) from None


def _set_running(cluster, vm: dict, running: bool, ctx: RequestContext) -> None:
    """getRunningPatch: runStrategy Always/Halted, or `running` where the VM uses the deprecated field."""
    spec = vm.get("spec") or {}
    patch = {"spec": {"runStrategy": "Always" if running else "Halted"}} if spec.get("runStrategy") is not None \
        else {"spec": {"running": running}}
    _write(lambda: cluster.patch(rt(cluster, VM), meta(vm)["namespace"], meta(vm)["name"], "merge", patch, ctx))


def _request_changes(cluster, vm: dict, changes: list[dict], ctx: RequestContext) -> None:
    """getChangeRequestJson: append to `status.stateChangeRequests`; a lone Stop replaces pending requests, anything
    else while requests are pending is refused; a recorded startFailure is dropped."""
    st = dict(status(vm))
    pending = st.get("stateChangeRequests") or []
    if pending and not (len(changes) == 1 and changes[0]["action"] == "Stop"):
        raise internal_error("unable to complete request: stop/start already underway")
    st["stateChangeRequests"] = changes
    st.pop("startFailure", None)
    body = {**vm, "status": st}
    _write(lambda: cluster.update(rt(cluster, VM), meta(vm)["namespace"], meta(vm)["name"], body, ctx,
                                  subresource="status"))


# ------------------------------------------------------------------------------------------------ handlers
def start(cluster, namespace: str, name: str, options: dict) -> int:
    vm = _vm(cluster, namespace, name)
    vmi = _vmi(cluster, namespace, name, required=False)
    if vmi is not None and not _final(vmi) and status(vmi).get("phase") not in (None, "", "Unknown"):
        raise _conflict(_VM_RESOURCE, name, "VM is already running")
    ctx, strategy = _context(options), run_strategy(vm)
    if strategy == "Halted":
        _set_running(cluster, vm, True, ctx)
    elif strategy in ("RerunOnFailure", "Manual"):
        phase = status(vmi).get("phase") if vmi is not None else None
        if strategy == "RerunOnFailure" and phase == "Failed":
            raise _conflict(_VM_RESOURCE, name, "RerunOnFailure does not support starting VM from failed state")
        restart = (strategy == "RerunOnFailure" and phase == "Succeeded") or (strategy == "Manual" and _final(vmi))
        changes = [{"action": "Stop", "uid": meta(vmi)["uid"]}] if restart else []
        _request_changes(cluster, vm, changes + [{"action": "Start"}], ctx)
    else:
        raise _conflict(_VM_RESOURCE, name, f"{strategy} does not support manual start requests")
    return 202


def stop(cluster, namespace: str, name: str, options: dict) -> int:
    vm = _vm(cluster, namespace, name)
    ctx, strategy = _context(options), run_strategy(vm)
    vmi = _vmi(cluster, namespace, name, required=False)
    grace = options.get("gracePeriod")
    old_grace = None
    if vmi is not None and not _final(vmi) and grace is not None:
        old_grace = (vmi.get("spec") or {}).get("terminationGracePeriodSeconds")
        _write(lambda: cluster.patch(rt(cluster, VMI), namespace, name, "merge",
                                     {"spec": {"terminationGracePeriodSeconds": int(grace)}}, ctx))
    if strategy in ("Halted", "Manual", "RerunOnFailure"):
        if vmi is None or _final(vmi):
            raise _conflict(_VM_RESOURCE, name, "VM is not running")
        if strategy == "Halted" and (grace is None or (old_grace is not None and int(grace) >= int(old_grace))):
            raise _conflict(_VM_RESOURCE, name, "Halted only supports manual stop requests with a shorter graceperiod")
        _request_changes(cluster, vm, [{"action": "Stop", "uid": meta(vmi)["uid"]}], ctx)
    else:
        _set_running(cluster, vm, False, ctx)
    return 202


def restart(cluster, namespace: str, name: str, options: dict) -> int:
    grace = options.get("gracePeriodSeconds")
    if grace is not None and int(grace) > 0:
        raise errors.bad_request("For force restart, only gracePeriod=0 is supported for now")
    if grace is not None and int(grace) < 0:
        raise errors.bad_request("gracePeriod has to be greater or equal to 0")
    vm = _vm(cluster, namespace, name)
    strategy = run_strategy(vm)
    if strategy in ("Halted", "Once"):
        raise _conflict(_VM_RESOURCE, name, f"RunStategy {strategy} does not support manual restart requests")
    vmi = _vmi(cluster, namespace, name, required=False)
    if vmi is None:
        raise _conflict(_VM_RESOURCE, name, "VM is not running: Halted")
    ctx = _context(options)
    _request_changes(cluster, vm, [{"action": "Stop", "uid": meta(vmi)["uid"]}, {"action": "Start"}], ctx)
    if grace == 0:
        pod = _running_launcher(cluster, vmi)
        if pod is not None:
            try:
                cluster.delete(rt(cluster, PODS), namespace, meta(pod)["name"], {"gracePeriodSeconds": 1}, ctx)
            except ApiError as err:
                if err.code != 404:
                    raise internal_error(err.message) from None
    return 202


def _running_launcher(cluster, vmi: dict) -> dict | None:
    """findPod: the Running launcher Pod of the VMI (after a finished migration, its target Pod)."""
    uid = meta(vmi)["uid"]
    pods = [e.obj for e in cluster.store.entries(PODS, meta(vmi)["namespace"])
            if (meta(e.obj).get("labels") or {}).get(CREATED_BY_LABEL) == uid and status(e.obj).get("phase") == "Running"]
    if len(pods) > 1:
        state = status(vmi).get("migrationState") or {}
        return next((p for p in pods if state.get("completed") and meta(p)["name"] == state.get("targetPod")), None)
    return pods[0] if pods else None


def migrate(cluster, namespace: str, name: str, options: dict) -> int:
    _vm(cluster, namespace, name)
    vmi = _vmi(cluster, namespace, name)
    if status(vmi).get("phase") != "Running":
        raise _conflict(_VM_RESOURCE, name, "VM is not running")
    spec = {"vmiName": name}
    if options.get("addedNodeSelector"):
        spec["addedNodeSelector"] = dict(options["addedNodeSelector"])
    body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"generateName": "kubevirt-migrate-vm-", "namespace": namespace}, "spec": spec}
    _write(lambda: cluster.create(rt(cluster, VMIM), namespace, body, _context(options)))
    return 202


def pause(cluster, namespace: str, name: str, options: dict) -> int:
    vmi = _vmi(cluster, namespace, name)
    if status(vmi).get("phase") != "Running":
        raise _conflict(_VMI_RESOURCE, name, "VM is not running")
    if (vmi.get("spec") or {}).get("livenessProbe"):
        raise ApiError(403, "Forbidden", f'virtualmachineinstance.kubevirt.io "{name}" is forbidden: Pausing VMIs '
                       "with LivenessProbe is currently not supported",
                       {"name": name, "group": "kubevirt.io", "kind": "virtualmachineinstance"})
    if get_condition(vmi, "Paused") is not None:
        raise _conflict(_VMI_RESOURCE, name, "VMI is already paused")
    if not _dry_run_all(options):
        mutate(cluster, VMI, namespace, name,
               lambda obj: set_condition(obj, "Paused", "True", PAUSED_REASON, PAUSED_MESSAGE, probe=True),
               uid=meta(vmi)["uid"])
    return 200


def unpause(cluster, namespace: str, name: str, options: dict) -> int:
    vmi = _vmi(cluster, namespace, name)
    if status(vmi).get("phase") != "Running":
        raise _conflict(_VMI_RESOURCE, name, "VMI is not running")
    if get_condition(vmi, "Paused") is None:
        raise _conflict(_VMI_RESOURCE, name, "VMI is not paused")
    if not _dry_run_all(options):
        mutate(cluster, VMI, namespace, name, lambda obj: remove_condition(obj, "Paused"), uid=meta(vmi)["uid"])
    return 200


def _dry_run_all(options: dict) -> bool:
    """Pause and unpause skip virt-handler only for `dryRun: [All]` (the first value)."""
    values = options.get("dryRun") or []
    return bool(values) and values[0] == "All"


# ------------------------------------------------------------------------------------------------ evacuate/cancel
def evacuate_cancel_served(cluster) -> bool:
    return kubevirt_version(cluster) >= EVACUATE_CANCEL_SINCE


def _vmi_of_vm(cluster, namespace: str, name: str) -> dict:
    """fetchVirtualMachineInstanceForVM: the VM, started, and its VMI (owned by it)."""
    vm = _vm(cluster, namespace, name)
    if not status(vm).get("created"):
        raise _conflict(_VM_RESOURCE, name, "VMI is not started")
    vmi = _vmi(cluster, namespace, name)
    if not any(ref.get("uid") == meta(vm).get("uid") for ref in meta(vmi).get("ownerReferences") or []):
        raise internal_error(f"unable to retrieve vmi [{name}] for vm: <nil>")
    return vmi


def _refuse_drain_taint(cluster, vmi: dict) -> None:
    """validateEvacuationNode: no cancel while the evacuation node (else the VMI's node) has the drain taint."""
    key = migration_config(cluster).get("nodeDrainTaintKey")
    if not key:
        return
    node_name = status(vmi).get("evacuationNodeName") or status(vmi).get("nodeName") or ""
    node = find(cluster, "nodes", None, node_name) if node_name else None
    if node is None:
        raise internal_error(f'nodes "{node_name}" not found' if node_name else "resource name may not be empty")
    if any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in (node.get("spec") or {}).get("taints") or []):
        raise errors.bad_request(f'Node "{node_name}" has NodeDrainTaintKey "{key}:NoSchedule"')


def evacuate_cancel(cluster, plural: str, namespace: str, name: str, body: bytes) -> int:
    """evacuateCancel: clear `status.evacuationNodeName` (a JSON patch testing the body's evacuationNodeName)."""
    vmi = _vmi_of_vm(cluster, namespace, name) if plural == "virtualmachines" else _vmi(cluster, namespace, name)
    _refuse_drain_taint(cluster, vmi)
    if not status(vmi).get("evacuationNodeName"):
        return 200
    options = decode_options(body)
    path = "/status/evacuationNodeName"
    patch = [{"op": "test", "path": path, "value": options.get("evacuationNodeName") or ""}, {"op": "remove", "path": path}]
    _write(lambda: cluster.patch(rt(cluster, VMI), namespace, meta(vmi)["name"], "json", patch, _context(options),
                                 subresource="status"))
    return 200


HANDLERS = {("virtualmachines", "start"): start, ("virtualmachines", "stop"): stop,
            ("virtualmachines", "restart"): restart, ("virtualmachines", "migrate"): migrate,
            ("virtualmachineinstances", "pause"): pause, ("virtualmachineinstances", "unpause"): unpause}


def serve(cluster, plural: str, sub: str, method: str, namespace: str, name: str, body: bytes) -> int:
    """One request to the group (the server has routed it here): the HTTP status of the success answer."""
    if sub == EVACUATE_CANCEL and plural in EVACUATE_CANCEL_PLURALS and evacuate_cancel_served(cluster):
        if method != "PUT":
            raise errors.method_not_allowed()
        with cluster.lock:
            return evacuate_cancel(cluster, plural, namespace, name, body)
    handler = HANDLERS.get((plural, sub))
    if handler is None:
        raise errors.page_not_found()
    if method != "PUT":
        raise errors.method_not_allowed()
    with cluster.lock:
        return handler(cluster, namespace, name, decode_options(body))


def served(cluster) -> bool:
    return serves(cluster, VM, VMI, VMIM)


def resource_list(cluster, version: str) -> dict:
    """What virt-api answers for `/apis/subresources.kubevirt.io/<version>` (evacuate/cancel where it is served)."""
    names = [f"{plural}/{sub}" for plural, sub in HANDLERS]
    if evacuate_cancel_served(cluster):
        names += [f"{plural}/{EVACUATE_CANCEL}" for plural in EVACUATE_CANCEL_PLURALS]
    return {"kind": "APIResourceList", "apiVersion": version, "groupVersion": f"{GROUP}/{version}",
            "resources": [{"name": name, "singularName": "", "namespaced": True, "kind": "", "verbs": None}
                          for name in sorted(names)]}
