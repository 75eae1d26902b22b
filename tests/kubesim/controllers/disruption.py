"""The PodDisruptionBudget disruption controller and the PDB check of the eviction REST.

Upstream: kubernetes `pkg/controller/disruption` (status computation) and
`pkg/registry/core/pod/storage/eviction.go` (the check an Eviction passes after the admission webhooks).

The controller keeps `status` of every `policy/v1` PodDisruptionBudget: `currentHealthy` (matching Pods
that are Ready, not being deleted and not recently evicted), `desiredHealthy`, `expectedPods`,
`disruptionsAllowed`, `observedGeneration`, `disruptedPods` and the `DisruptionAllowed` condition
(`SufficientPods` / `InsufficientPods`, or `SyncFailed` when the expected count cannot be computed).

- An integer `minAvailable` counts the matching Pods directly: `expectedPods` is their number.
- `maxUnavailable`, or a percentage `minAvailable` (rounded up), needs the replicas of each Pod's controller:
  a ReplicaSet owned by a Deployment gives the Deployment's `spec.replicas`, a ReplicaSet or StatefulSet its
  own, any other kind its `spec.replicas` when it serves `/scale`. A controller kind without `/scale` fails
  the sync: a Warning `CalculateExpectedPodCountFailed` "Failed to calculate the number of expected pods:
  <plural>.<group> does not implement the scale subresource" (so virt-launcher Pods, owned by a
  VirtualMachineInstance, kubevirt/kubevirt#18063), `disruptionsAllowed: 0` and `DisruptionAllowed=False`
  reason `SyncFailed` with the error as message; the other counters keep their last values (0 on a new PDB).
  Pods without a controller are left out with a Warning `UnmanagedPods` event.

The eviction guard (registered in `cluster.eviction_guards`, so it runs after the admission webhooks such as
the KubeVirt interceptor): Pods that are Pending, finished or already being deleted pass; a Pod selected
by more than one PDB gets a 500 `This pod has more than one PodDisruptionBudget, which the eviction
subresource does not support.`; a PDB whose status is behind its generation answers 429 with the
`is still being processed by the server` cause; `disruptionsAllowed: 0` answers 429 `Cannot evict pod as
it would violate the pod's disruption budget.` with the `DisruptionBudget` cause `The disruption budget
<name> needs <desired> healthy pods and has <current> currently`; otherwise the budget is decremented
and the Pod recorded in `disruptedPods` (not on a dry run). A Pod that is not Ready may go without
decrementing when the budget is met (`IfHealthyBudget`) or when `unhealthyPodEvictionPolicy: AlwaysAllow`.

As upstream, an empty selector selects every Pod of the namespace for the controller but nothing for the
eviction check, and a nil one nothing; a PDB that never synced (`observedGeneration` behind, which the
fail-safe path leaves as it is) answers evictions with the "still being processed" cause.

Test instrumentation, not upstream behaviour: `violations` (served under `/_kubesim/counters` as `pdbs`) records
each time a PDB's `currentHealthy` drops below its `desiredHealthy` while Pods it selects exist (a sync that finds
it below after one that found it at or above; the first sync with Pods and a sync without Pods record nothing),
so that tests and benchmarks can prove that a drain kept every budget; a counter reset empties it.

Simplified: no ReplicationController finder; a failed sync is not retried with back-off (the next change
of a Pod, PDB or scalable owner in the namespace syncs again); the `disruptedPods` timeout (2 minutes) is
scaled by the scenario's timeScale; the `NotDeleted` event of an expired entry is not recorded.
"""
from __future__ import annotations

import copy
import math
import threading
from datetime import datetime, timedelta, timezone

from .. import events
from ..api import AdmissionRequest, now_iso
from ..errors import ApiError
from ..printers import parse_time
from ..selectors import match_label_selector_object
from ..store import DELETED, Event
from . import Controller

PDB_KEY = "poddisruptionbudgets.policy"
DELETION_TIMEOUT = 120          # simulated seconds an evicted Pod stays out of currentHealthy before it goes
MAX_DISRUPTED_PODS = 2000
COMPONENT = "controllermanager"
NOT_EVICTABLE = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


class SyncError(Exception):
    """Why the expected Pod count could not be computed (the message upstream records)."""


# ------------------------------------------------------------------------------------------ helpers
def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def selects(pdb: dict, pod: dict) -> bool:
    selector = (pdb.get("spec") or {}).get("selector")
    return match_label_selector_object(selector, pod["metadata"].get("labels") or {})


def controller_ref(obj: dict) -> dict | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def scaled_value(value, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with rounding up."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        try:
            percent = int(text[:-1])
        except ValueError:
            raise SyncError(f'invalid value for IntOrString: invalid value "{text}"') from None
        return math.ceil(percent * total / 100)
    raise SyncError("invalid value for IntOrString: invalid type: string is not a percentage")


def selector_text(selector: dict | None) -> str:
    """A readable rendering of the PDB selector for the UnmanagedPods event."""
    if selector is None:
        return "nil"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        parts.append(f"{expr.get('key')} {expr.get('operator')} ({','.join(expr.get('values') or [])})")
    return "&LabelSelector{" + ",".join(parts) + "}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


# --------------------------------------------------------------------------------------- controller
class DisruptionController(Controller):
    """Recomputes PDB status when a PDB, a Pod it may select, or a scalable owner in its namespace changes."""

    def __init__(self, cluster):
        super().__init__(cluster)
        self._dirty: set[tuple[str, str]] = set()
        self._flush_scheduled = False
        self._below: dict[tuple[str, str], bool] = {}     # PDB -> below desiredHealthy at its last sync with Pods
        self._violations: list[dict] = []
        self._violations_lock = threading.Lock()

    @property
    def pdb_rt(self):
        return self.cluster.registry.by_key(PDB_KEY)

    def start(self) -> None:
        for entry in list(self.cluster.store.entries(PDB_KEY)):
            meta = entry.obj["metadata"]
            self._mark(meta["namespace"], meta["name"])

    def on_event(self, event: Event) -> None:
        if event.key == PDB_KEY:
            if event.type != DELETED:
                self._mark(event.namespace, event.obj["metadata"]["name"])
            return
        if event.key == "pods":
            for entry in list(self.cluster.store.entries(PDB_KEY, event.namespace)):
                pdb = entry.obj
                if selects(pdb, event.obj) or (event.old is not None and selects(pdb, event.old)):
                    self._mark(event.namespace, pdb["metadata"]["name"])
            return
        rt = self.cluster.registry.by_key(event.key)
        if rt is not None and "scale" in rt.subresources and event.namespace:
            for entry in list(self.cluster.store.entries(PDB_KEY, event.namespace)):
                self._mark(event.namespace, entry.obj["metadata"]["name"])

    def _mark(self, namespace: str, name: str) -> None:
        self._dirty.add((namespace, name))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.manager.after(0, self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        for namespace, name in sorted(dirty):
            self.sync(namespace, name)

    # ------------------------------------------------------------------------------------- sync
    def sync(self, namespace: str, name: str) -> None:
        cluster, rt = self.cluster, self.pdb_rt
        pdb = cluster.find(rt, namespace, name)
        if pdb is None or pdb["metadata"].get("deletionTimestamp"):
            return
        pods = [e.obj for e in cluster.store.entries("pods", namespace) if selects(pdb, e.obj)]
        if not pods:
            events.record(cluster, pdb, "Normal", "NoPods", "No matching pods found", COMPONENT)
        try:
            expected, desired, unmanaged = self.expected_pod_count(pdb, pods)
        except SyncError as err:
            events.record(cluster, pdb, "Warning", "CalculateExpectedPodCountFailed",
                          f"Failed to calculate the number of expected pods: {err}", COMPONENT)
            self._fail_safe(pdb, str(err))
            return
        if unmanaged:
            events.record(cluster, pdb, "Warning", "UnmanagedPods",
                          f"Pods selected by this PodDisruptionBudget (selector: "
                          f"{selector_text((pdb.get('spec') or {}).get('selector'))}) were found to be unmanaged. "
                          "As a result, the status of the PDB cannot be calculated correctly, which may result in "
                          "undefined behavior. To account for these pods please set \".spec.minAvailable\" field of "
                          "the PDB to an integer value.", COMPONENT)
        now = _now()
        disrupted, recheck = self._disrupted_pods(pdb, pods, now)
        healthy = 0
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp") or pod["metadata"]["name"] in disrupted:
                continue
            if pod_ready(pod):
                healthy += 1
        self._record_violation(pdb, healthy, desired, bool(pods))
        self._update_status(pdb, healthy, desired, expected, disrupted)
        if recheck is not None:
            delay = max((recheck - now).total_seconds(), 0) + 0.05
            self.manager.after(delay, lambda: self._mark(namespace, name))

    def _record_violation(self, pdb: dict, healthy: int, desired: int, has_pods: bool) -> None:
        ident = (pdb["metadata"]["namespace"], pdb["metadata"]["name"])
        if not has_pods:
            self._below.pop(ident, None)
            return
        below, was_below = healthy < desired, self._below.get(ident)
        self._below[ident] = below
        if below and was_below is False:
            with self._violations_lock:
                self._violations.append({"namespace": ident[0], "name": ident[1], "at": now_iso(), "healthy": healthy,
                                         "min_available": desired})

    def violations(self) -> dict:
        """`{"violations": [{namespace, name, at, healthy, min_available}, ...], "count": N}` since the last reset."""
        with self._violations_lock:
            return {"violations": [dict(v) for v in self._violations], "count": len(self._violations)}

    def reset_violations(self) -> None:
        with self._violations_lock:
            self._violations = []

    def expected_pod_count(self, pdb: dict, pods: list[dict]) -> tuple[int, int, list[str]]:
        spec = pdb.get("spec") or {}
        max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
        if max_unavailable is not None:
            expected, unmanaged = self.expected_scale(pods)
            desired = max(expected - scaled_value(max_unavailable, expected), 0)
            return expected, desired, unmanaged
        if min_available is not None:
            if isinstance(min_available, int):
                return len(pods), min_available, []
            expected, unmanaged = self.expected_scale(pods)
            return expected, scaled_value(min_available, expected), unmanaged
        return 0, 0, []

    def expected_scale(self, pods: list[dict]) -> tuple[int, list[str]]:
        """The sum of the replicas of the Pods' controllers, each counted once."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                unmanaged.append(pod["metadata"]["name"])
                continue
            if ref.get("uid") in scales:
                continue
            found = self._controller_scale(ref, pod["metadata"]["namespace"])
            if found is None:
                raise SyncError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    def _controller_scale(self, ref: dict, namespace: str) -> tuple[str, int] | None:
        cluster = self.cluster
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        if (api_version, kind) == ("apps/v1", "ReplicaSet"):
            rs = cluster.store.get("replicasets.apps", namespace, ref.get("name", ""))
            if rs is not None and rs.obj["metadata"].get("uid") == ref.get("uid"):
                owner = controller_ref(rs.obj)
                if owner and (owner.get("apiVersion"), owner.get("kind")) == ("apps/v1", "Deployment"):
                    dep = cluster.store.get("deployments.apps", namespace, owner.get("name", ""))
                    if dep is not None and dep.obj["metadata"].get("uid") == owner.get("uid"):
                        return owner["uid"], int((dep.obj.get("spec") or {}).get("replicas", 1))
                    return None
                return ref["uid"], int((rs.obj.get("spec") or {}).get("replicas", 1))
        rt = cluster.registry.by_kind(api_version, kind)
        if rt is None:
            group, _sep, version = api_version.rpartition("/")
            raise SyncError(f'no matches for kind "{kind}" in version "{group + "/" if group else ""}{version}"')
        if "scale" not in rt.subresources:
            raise SyncError(f"{rt.plural}.{rt.group} does not implement the scale subresource" if rt.group
                            else f"{rt.plural} does not implement the scale subresource")
        owner = cluster.store.get(rt.key, namespace if rt.namespaced else "", ref.get("name", ""))
        if owner is None or owner.obj["metadata"].get("uid") != ref.get("uid"):
            return None
        return ref["uid"], int((owner.obj.get("spec") or {}).get("replicas", 1))

    def _disrupted_pods(self, pdb: dict, pods: list[dict], now: datetime) -> tuple[dict, datetime | None]:
        by_name = {p["metadata"]["name"]: p for p in pods}
        timeout = timedelta(seconds=self.cluster.clock.real_seconds(DELETION_TIMEOUT))
        result, recheck = {}, None
        for name, stamp in ((pdb.get("status") or {}).get("disruptedPods") or {}).items():
            pod = by_name.get(name)
            when = parse_time(stamp)
            if pod is None or pod["metadata"].get("deletionTimestamp") or when is None:
                continue
            expires = when + timeout
            if expires < now:
                continue
            result[name] = stamp
            if recheck is None or expires < recheck:
                recheck = expires
        return result, recheck

    def _update_status(self, pdb: dict, healthy: int, desired: int, expected: int, disrupted: dict) -> None:
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old = pdb.get("status") or {}
        status = {
            "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
            "disruptionsAllowed": allowed, "observedGeneration": pdb["metadata"].get("generation", 1),
            "conditions": copy.deepcopy(old.get("conditions") or []),
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        set_allowed_condition(status)
        self._write_status(pdb, status)

    def _fail_safe(self, pdb: dict, message: str) -> None:
        status = copy.deepcopy(pdb.get("status") or {})
        for counter in ("currentHealthy", "desiredHealthy", "expectedPods"):
            status.setdefault(counter, 0)
        status["disruptionsAllowed"] = 0
        set_condition(status, "False", "SyncFailed", message)
        self._write_status(pdb, status)

    def _write_status(self, pdb: dict, status: dict) -> None:
        if status == pdb.get("status"):
            return
        updated = copy.deepcopy(pdb)
        updated["status"] = status
        meta = pdb["metadata"]
        try:
            self.cluster.update(self.pdb_rt, meta["namespace"], meta["name"], updated, subresource="status")
        except ApiError:
            self._mark(meta["namespace"], meta["name"])   # a conflict with an eviction: compute again


def set_condition(status: dict, value: str, reason: str, message: str = "") -> None:
    """apimeta.SetStatusCondition for DisruptionAllowed: the transition time changes with the status only."""
    conditions = status.setdefault("conditions", [])
    current = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    wanted = {"type": "DisruptionAllowed", "status": value, "reason": reason, "message": message}
    if status.get("observedGeneration"):
        wanted["observedGeneration"] = status["observedGeneration"]
    if current is None:
        conditions.append({**wanted, "lastTransitionTime": now_iso()})
        return
    if current.get("status") != value:
        current["lastTransitionTime"] = now_iso()
    current.update(wanted)


def set_allowed_condition(status: dict) -> None:
    if status.get("disruptionsAllowed", 0) > 0:
        set_condition(status, "True", "SufficientPods")
    else:
        set_condition(status, "False", "InsufficientPods")


# ----------------------------------------------------------------------------------- eviction guard
def _too_many(message: str, causes: list[dict], retry_after: int = 0) -> ApiError:
    details: dict = {"causes": causes}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", message, details, headers)


def eviction_guard(cluster):
    """The PDB check of the eviction REST, for `cluster.eviction_guards`."""

    def guard(request: AdmissionRequest) -> None:
        if request.subresource != "eviction" or request.old is None:
            return
        pod = request.old
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            return
        rt = cluster.registry.by_key(PDB_KEY)
        # Here a nil or empty selector matches nothing (the controller reads an empty one as "every Pod").
        pdbs = [e.obj for e in cluster.store.entries(PDB_KEY, request.namespace)
                if (e.obj.get("spec") or {}).get("selector") and selects(e.obj, pod)]
        if len(pdbs) > 1:
            raise ApiError(500, "", MORE_THAN_ONE)
        if not pdbs:
            return
        pdb = copy.deepcopy(pdbs[0])
        spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
        name = pdb["metadata"]["name"]
        if not pod_ready(pod):
            if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
                return
            if status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0:
                return
        if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
            raise _too_many(NOT_EVICTABLE, [{"reason": "DisruptionBudget", "message": f"The disruption budget "
                                             f"{name} is still being processed by the server."}], 10)
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed < 0:
            raise ApiError(403, "Forbidden", f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions '
                           "allowed is negative", {"name": name, "group": "policy", "kind": "poddisruptionbudgets"})
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
            raise ApiError(403, "Forbidden", f'poddisruptionbudgets.policy "{name}" is forbidden: DisruptedPods map '
                           "too big - too many evictions not confirmed by PDB controller",
                           {"name": name, "group": "policy", "kind": "poddisruptionbudgets"})
        if allowed == 0:
            raise _too_many(NOT_EVICTABLE, [{"reason": "DisruptionBudget", "message": f"The disruption budget {name} "
                                             f"needs {status.get('desiredHealthy', 0)} healthy pods and has "
                                             f"{status.get('currentHealthy', 0)} currently"}])
        if request.context.dry_run:
            return
        status["disruptionsAllowed"] = allowed - 1
        if status["disruptionsAllowed"] == 0:
            set_allowed_condition(status)
        status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now_iso()
        pdb["status"] = status
        cluster.update(rt, request.namespace, name, pdb, subresource="status")

    return guard


def register(cluster, manager) -> None:
    if cluster.registry.by_key(PDB_KEY) is None or cluster.registry.by_key("pods") is None:
        return
    controller = DisruptionController(cluster)
    manager.add(controller)
    cluster.disruption = controller
    cluster.eviction_guards.append(eviction_guard(cluster))
