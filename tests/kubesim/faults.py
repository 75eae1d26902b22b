"""Request counters and fault injection, driven through the admin endpoint (`/_kubesim/`).

A fault rule matches requests by cluster, verb, resource (with subresource, e.g. `pods/eviction`),
namespace and name (each optional; `*` or absent matches anything; `verb` and `resource` may be lists, any of
which matches) and, with `dryRun` true or false, only server-side dry runs (`?dryRun=All`) or only real requests.
The namespace of a request for a Namespace object is that namespace's name (as the apiserver's RequestInfo has
it), so `namespace: X` covers `X` itself and everything in it. A matching rule does one or more of: add
`latency` seconds, answer with an error `status` (500, 503, 429 with `retryAfter`, 409, ...), or `drop`
the connection without an answer, or add a `warning` (a `Warning: 299` response header) to an otherwise
normal answer. It fires for the next `count` matching requests, or with probability
`rate` (deterministic per rule with `seed`), or always; with `seconds` it ends that many (real) seconds after it
was armed. It is armed when added, or, with `armedBy` (a match of its own: cluster, verb, resource, namespace,
name), by the first real (not dry-run) HTTP request that matches that, which the rule then already answers if it
matches it: a burst "from the moment cleanup starts" is `{"armedBy": {"verb": "delete", "resource":
"namespaces", "name": "ns"}, "namespace": "ns", "status": 503, "count": 5}`.

A rule with `component` (one of COMPONENTS) matches instead the calls a simulated component makes to the API
from inside the simulator, which never cross HTTP: `virt-api` is KubeVirt's eviction webhook reading Pods
(`get pods`) and the VMI (`get virtualmachineinstances`) and marking it (`patch virtualmachineinstances`, a dry
run when the Eviction is one, as upstream sends the patch with dryRun). Such a rule can only answer an error
`status`: the component gets the ApiError a client would (`inject`). Rules without `component` never match
these calls, so the HTTP rules of a test leave the webhook and the handlers alone.

`virt-handler` is the handlers moving a VMI: a rule with component `virt-handler`, verb `migrate`, resource
`virtualmachineinstances` (namespace, name = the VMI, both optional) and `migration` (`fail`, `hang` or `slow`)
makes the next matching live migrations (`count`) behave as the per-VM annotation `kubesim.io/migration` does
(kubevirt/migration.py), decided once per migration when its transfer starts (`migration_fault`)."""
from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError

_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            410: "Expired", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 504: "Timeout"}
_MESSAGES = {429: "the server has received too many requests and has asked us to try again later",
             500: "Internal error occurred: injected by kubesim",
             503: "the server is currently unable to handle the request",
             504: "the server was unable to return a response in the time allotted, but may still be processing "
                  "the request"}
_FIELDS = ("cluster", "verb", "resource", "namespace", "name")
_LIST_FIELDS = ("verb", "resource")      # a list: any of its values
COMPONENTS = ("virt-api", "virt-handler")
MIGRATION_FAULTS = ("fail", "hang", "slow")


def _matches(fields: dict, request: dict) -> bool:
    """Each given field equals the request's (a list: contains it); absent, empty or `*` matches anything."""
    for name in _FIELDS:
        want = fields.get(name)
        if want in (None, "", "*"):
            continue
        if isinstance(want, (list, tuple)):
            if request.get(name) not in want:
                return False
        elif request.get(name) != want:
            return False
    return True


@dataclass
class FaultRule:
    id: int
    cluster: str | None = None
    verb: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    component: str | None = None  # None: HTTP requests only; a name: only that component's internal calls
    dry_run: bool | None = None  # None: any request; True/False: only (not) server-side dry runs
    status: int | None = None
    reason: str | None = None
    message: str | None = None
    retry_after: int | None = None
    latency: float = 0.0
    drop: bool = False
    warning: str | None = None
    rate: float | None = None
    count: int | None = None
    seed: int | None = None
    migration: str | None = None   # virt-handler rules: fail | hang | slow
    seconds: float | None = None   # active for this many real seconds once armed
    armed_by: dict | None = None   # armed by the first HTTP request matching these fields
    armed_at: float | None = None  # monotonic time it was armed (None: waiting for armed_by)
    fired: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def matches(self, request: dict) -> bool:
        if not _matches({name: getattr(self, name) for name in _FIELDS}, request):
            return False
        if self.component != request.get("component"):
            return False
        return self.dry_run is None or bool(request.get("dry_run")) == self.dry_run

    def expired(self, now: float) -> bool:
        return self.seconds is not None and self.armed_at is not None and now - self.armed_at > self.seconds

    def as_dict(self) -> dict:
        data = {"id": self.id, "fired": self.fired}
        if self.dry_run is not None:
            data["dryRun"] = self.dry_run
        shown = ("component", "status", "reason", "message", "latency", "drop", "warning", "rate", "count", "seed",
                 "migration", "seconds")
        for name in _FIELDS + shown:
            value = getattr(self, name)
            if value not in (None, False, 0.0) or name in ("status",) and value:
                data[name] = list(value) if isinstance(value, tuple) else value
        if self.retry_after is not None:
            data["retryAfter"] = self.retry_after
        if self.armed_by is not None:
            data["armedBy"] = show_armed_by(self.armed_by)
            data["armed"] = self.armed_at is not None
        return data


@dataclass
class FaultAction:
    latency: float = 0.0
    drop: bool = False
    status: int | None = None
    reason: str | None = None
    message: str | None = None
    retry_after: int | None = None
    migration: str | None = None
    warnings: list[str] = field(default_factory=list)
    rule_ids: list[int] = field(default_factory=list)


class Faults:
    def __init__(self):
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._ids = itertools.count(1)
        self.counters: dict[str, Counter] = {}
        self.faulted: dict[str, Counter] = {}

    # ------------------------------------------------------------------------------------- counters
    def count(self, cluster: str, verb: str, resource: str) -> None:
        with self._lock:
            self.counters.setdefault(cluster, Counter())[f"{verb} {resource}"] += 1

    def counter_report(self, cluster: str | None = None) -> dict:
        with self._lock:
            names = [cluster] if cluster else sorted(set(self.counters) | set(self.faulted))
            return {name: {"total": sum(self.counters.get(name, Counter()).values()),
                           "requests": dict(sorted(self.counters.get(name, Counter()).items())),
                           "faulted": dict(sorted(self.faulted.get(name, Counter()).items()))}
                    for name in names}

    def reset_counters(self) -> None:
        with self._lock:
            self.counters.clear()
            self.faulted.clear()

    # --------------------------------------------------------------------------------------- rules
    def add(self, spec: dict[str, Any]) -> FaultRule:
        known = set(_FIELDS) | {"component", "dryRun", "status", "reason", "message", "retryAfter", "latency", "drop",
                                "warning", "rate", "count", "seed", "migration", "seconds", "armedBy"}
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"unknown fault field(s) {sorted(unknown)}; known: {sorted(known)}")
        matching = {name: _match_value(name, spec.get(name)) for name in _FIELDS}
        armed_by = parse_armed_by(spec.get("armedBy"))
        seconds = seconds_value("seconds", spec.get("seconds"))
        if spec.get("component") == "virt-handler":
            self._check_handler_rule(spec, matching)
        elif spec.get("migration") is not None:
            raise ValueError("migration is the action of a virt-handler rule (component: virt-handler)")
        elif not (spec.get("status") or spec.get("latency") or spec.get("drop") or spec.get("warning")):
            raise ValueError("a fault needs at least one of status, latency, drop or warning")
        rate = spec.get("rate")
        if rate is not None and not 0 <= float(rate) <= 1:
            raise ValueError("rate must be between 0 and 1")
        # Reject values that would otherwise only fail later, inside a request that the rule matches.
        for key, low, high in (("status", 100, 599), ("count", 1, None), ("retryAfter", 0, None)):
            value = spec.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low or
                                      (high is not None and value > high)):
                raise ValueError(f"{key} must be an integer >= {low}" + (f" and <= {high}" if high else ""))
        if not isinstance(spec.get("latency") or 0, (int, float)) or float(spec.get("latency") or 0) < 0:
            raise ValueError("latency must be a number of seconds >= 0")
        if spec.get("dryRun") is not None and not isinstance(spec["dryRun"], bool):
            raise ValueError("dryRun must be true (only server-side dry runs) or false (only real requests)")
        component = spec.get("component")
        if component is not None:
            if component not in COMPONENTS:
                raise ValueError(f"unknown component {component!r}; known: {list(COMPONENTS)}")
            if armed_by is not None:
                raise ValueError("armedBy arms on HTTP requests; a component rule is armed when added")
            if component == "virt-api" and (not spec.get("status") or spec.get("latency") or spec.get("drop") or
                                            spec.get("warning")):
                raise ValueError("a component fault answers an error status only (no latency, drop or warning)")
        with self._lock:
            rule = FaultRule(id=next(self._ids), **matching, component=component,
                             dry_run=spec.get("dryRun"),
                             status=spec.get("status"), reason=spec.get("reason"), message=spec.get("message"),
                             retry_after=spec.get("retryAfter"), latency=float(spec.get("latency") or 0),
                             drop=bool(spec.get("drop")), warning=spec.get("warning"), rate=None if rate is None else float(rate),
                             count=spec.get("count"), seed=spec.get("seed"), migration=spec.get("migration"),
                             seconds=seconds, armed_by=armed_by,
                             armed_at=None if armed_by is not None else time.monotonic())
            rule._rng = random.Random(rule.seed if rule.seed is not None else rule.id)
            self._rules.append(rule)
            return rule

    @staticmethod
    def _check_handler_rule(spec: dict, matching: dict) -> None:
        if spec.get("migration") not in MIGRATION_FAULTS:
            raise ValueError(f"a virt-handler rule needs migration: one of {list(MIGRATION_FAULTS)}")
        if any(spec.get(k) for k in ("status", "latency", "drop", "warning", "dryRun")):
            raise ValueError("a virt-handler rule changes a migration only "
                             "(no status, latency, drop, warning or dryRun)")
        if matching["verb"] not in (None, "*", "migrate") or \
                matching["resource"] not in (None, "*", "virtualmachineinstances"):
            raise ValueError("a virt-handler rule matches verb migrate on resource virtualmachineinstances")

    def remove(self, rule_id: int | None = None) -> int:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if rule_id is not None and r.id != rule_id]
            return before - len(self._rules)

    def rules(self) -> list[dict]:
        with self._lock:
            now = time.monotonic()
            self._rules = [r for r in self._rules if not r.expired(now)]
            return [r.as_dict() for r in self._rules]

    def decide(self, request: dict) -> FaultAction | None:
        """The combined action of the rules that fire for this request, or None."""
        with self._lock:
            action = None
            now = time.monotonic()
            for rule in list(self._rules):
                if rule.armed_at is None and arms(rule.armed_by or {}, request):
                    rule.armed_at = now
                if rule.expired(now):
                    self._rules.remove(rule)
                    continue
                if rule.armed_at is None or not rule.matches(request):
                    continue
                if rule.rate is not None and rule._rng.random() >= rule.rate:
                    continue
                rule.fired += 1
                if rule.count is not None:
                    rule.count -= 1
                    if rule.count <= 0:
                        self._rules.remove(rule)
                action = action or FaultAction()
                action.rule_ids.append(rule.id)
                action.latency += rule.latency
                action.drop = action.drop or rule.drop
                if rule.warning:
                    action.warnings.append(rule.warning)
                action.migration = action.migration or rule.migration
                if rule.status and action.status is None:
                    action.status = int(rule.status)
                    action.reason = rule.reason or _REASONS.get(action.status, "InternalError")
                    action.message = rule.message or _MESSAGES.get(action.status, f"injected fault {rule.id}")
                    action.retry_after = rule.retry_after
            if action is not None:
                cluster = request.get("cluster", "")
                key = f"{request.get('verb')} {request.get('resource')}"
                if request.get("component"):
                    key = f"{request['component']} {key}"
                self.faulted.setdefault(cluster, Counter())[key] += 1
            return action

    # ------------------------------------------------------------------------------ internal calls
    def attach(self, *clusters) -> None:
        """Let the clusters' components consult these rules for their internal calls (see `inject`)."""
        for cluster in clusters:
            cluster.faults = self


def inject(cluster, component: str, verb: str, resource: str, namespace: str | None, name: str,
           dry_run: bool = False) -> None:
    """Before an internal call of `component`: raise the error a rule scoped to it answers, as the client
    would see it (an ApiError with the rule's code, reason and message); nothing when no rule fires or no
    Faults is attached to the cluster (in-process tests without one)."""
    faults = getattr(cluster, "faults", None)
    if faults is None:
        return
    action = faults.decide({"cluster": cluster.name, "component": component, "verb": verb, "resource": resource,
                            "namespace": namespace, "name": name, "dry_run": dry_run})
    if action is not None and action.status:
        raise ApiError(action.status, action.reason or "InternalError", action.message or "")


def seconds_value(name: str, value: Any, zero: bool = False) -> float | None:
    """A number of real seconds given as `name` (None: not given): > 0, or >= 0 with `zero`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} must be a number of seconds {'>=' if zero else '>'} 0")
    return float(value)


def parse_armed_by(value: Any) -> dict | None:
    """An `armedBy` match as given (None: not armed by a request), each field checked as a rule's match field."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value or set(value) - set(_FIELDS):
        raise ValueError(f"armedBy must be a non-empty mapping of {list(_FIELDS)}")
    return {name: _match_value(f"armedBy.{name}", field_value) for name, field_value in value.items()}


def show_armed_by(armed_by: dict) -> dict:
    """An `armedBy` match as the admin endpoint shows it (lists as given)."""
    return {name: list(value) if isinstance(value, tuple) else value for name, value in armed_by.items()}


def arms(armed_by: dict, request: dict) -> bool:
    """Whether `request` arms what waits for `armed_by`: a real (not dry-run) HTTP request (not a component's
    internal call) that matches it."""
    return not request.get("component") and not request.get("dry_run") and _matches(armed_by, request)


def _match_value(name: str, value: Any) -> Any:
    """A rule's match field: a string, or for verb and resource also a non-empty list of strings (kept as a tuple)."""
    if value is None or isinstance(value, str):
        return value
    base = name.rsplit(".", 1)[-1]
    if base in _LIST_FIELDS and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    kinds = "a string or a list of strings" if base in _LIST_FIELDS else "a string"
    raise ValueError(f"{name} must be {kinds}")


def migration_fault(cluster, namespace: str, vmi_name: str) -> str | None:
    """The migration fault (`fail`, `hang`, `slow`) a virt-handler rule gives the migration of this VMI that starts
    now, or None; each call counts as one match (so `count` limits how many migrations it hits)."""
    faults = getattr(cluster, "faults", None)
    if faults is None:
        return None
    action = faults.decide({"cluster": cluster.name, "component": "virt-handler", "verb": "migrate",
                            "resource": "virtualmachineinstances", "namespace": namespace, "name": vmi_name})
    return action.migration if action is not None else None
