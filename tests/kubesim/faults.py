"""Request counters and fault injection, driven through the admin endpoint (`/_kubesim/`).

A fault rule matches requests by cluster, verb, resource (with subresource, e.g. `pods/eviction`),
namespace and name (each optional; `*` or absent matches anything) and, with `dryRun` true or false, only server-side
dry runs (`?dryRun=All`) or only real requests, and then does one or more of: add
`latency` seconds, answer with an error `status` (500, 503, 429 with `retryAfter`, 409, ...), or `drop`
the connection without an answer, or add a `warning` (a `Warning: 299` response header) to an otherwise
normal answer. It fires for the next `count` matching requests, or with probability
`rate` (deterministic per rule with `seed`), or always.

A rule with `component` (one of COMPONENTS) matches instead the calls a simulated component makes to the API
from inside the simulator, which never cross HTTP: `virt-api` is KubeVirt's eviction webhook reading Pods
(`get pods`) and the VMI (`get virtualmachineinstances`) and marking it (`patch virtualmachineinstances`, a dry
run when the Eviction is one, as upstream sends the patch with dryRun). Such a rule can only answer an error
`status`: the component gets the ApiError a client would (`inject`). Rules without `component` never match
these calls, so the HTTP rules of a test leave the webhook alone."""
from __future__ import annotations

import itertools
import random
import threading
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
COMPONENTS = ("virt-api",)


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
    fired: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def matches(self, request: dict) -> bool:
        for name in _FIELDS:
            want = getattr(self, name)
            if want not in (None, "", "*") and request.get(name) != want:
                return False
        if self.component != request.get("component"):
            return False
        return self.dry_run is None or bool(request.get("dry_run")) == self.dry_run

    def as_dict(self) -> dict:
        data = {"id": self.id, "fired": self.fired}
        if self.dry_run is not None:
            data["dryRun"] = self.dry_run
        shown = ("component", "status", "reason", "message", "latency", "drop", "warning", "rate", "count", "seed")
        for name in _FIELDS + shown:
            value = getattr(self, name)
            if value not in (None, False, 0.0) or name in ("status",) and value:
                data[name] = value
        if self.retry_after is not None:
            data["retryAfter"] = self.retry_after
        return data


@dataclass
class FaultAction:
    latency: float = 0.0
    drop: bool = False
    status: int | None = None
    reason: str | None = None
    message: str | None = None
    retry_after: int | None = None
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
                                "warning", "rate", "count", "seed"}
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"unknown fault field(s) {sorted(unknown)}; known: {sorted(known)}")
        if not (spec.get("status") or spec.get("latency") or spec.get("drop") or spec.get("warning")):
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
            if not spec.get("status") or spec.get("latency") or spec.get("drop") or spec.get("warning"):
                raise ValueError("a component fault answers an error status only (no latency, drop or warning)")
        with self._lock:
            rule = FaultRule(id=next(self._ids), **{k: spec.get(k) for k in _FIELDS}, component=component,
                             dry_run=spec.get("dryRun"),
                             status=spec.get("status"), reason=spec.get("reason"), message=spec.get("message"),
                             retry_after=spec.get("retryAfter"), latency=float(spec.get("latency") or 0),
                             drop=bool(spec.get("drop")), warning=spec.get("warning"), rate=None if rate is None else float(rate),
                             count=spec.get("count"), seed=spec.get("seed"))
            rule._rng = random.Random(rule.seed if rule.seed is not None else rule.id)
            self._rules.append(rule)
            return rule

    def remove(self, rule_id: int | None = None) -> int:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if rule_id is not None and r.id != rule_id]
            return before - len(self._rules)

    def rules(self) -> list[dict]:
        with self._lock:
            return [r.as_dict() for r in self._rules]

    def decide(self, request: dict) -> FaultAction | None:
        """The combined action of the rules that fire for this request, or None."""
        with self._lock:
            action = None
            for rule in list(self._rules):
                if not rule.matches(request):
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
