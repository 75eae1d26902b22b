"""Cell renderers for the built-in kinds' `kubectl get` columns, following the real server's printers."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """The API machinery's HumanDuration: 45s, 3m20s, 47m, 5h3m, 20h, 3d4h, 23d, 1y30d, 9y."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{(s % 3600) // 60}m" if (s % 3600) // 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years = hours // (24 * 365)
    if years < 8:
        days = (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{years}y"


def since(value: str | None) -> str:
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((datetime.now(timezone.utc) - when).total_seconds())


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def name(obj: dict, _value: Any = None) -> str:
    return _meta(obj).get("name", "")


def age(obj: dict, _value: Any = None) -> str:
    return since(_meta(obj).get("creationTimestamp"))


def created_at(obj: dict, _value: Any = None) -> str:
    return _meta(obj).get("creationTimestamp", "")


def none_if_empty(_obj: dict, value: Any = None) -> Any:
    return "<none>" if value in (None, "") else value


def false_if_empty(_obj: dict, value: Any = None) -> Any:
    return "false" if value in (None, "") else str(value).lower()


def zero(_obj: dict, value: Any = None) -> Any:
    return 0 if value in (None, "") else value


def default(text: str) -> Callable:
    return lambda _obj, value=None: text if value in (None, "") else value


def ready_of(ready_field: str, total_field: str, total_in_spec: bool = True) -> Callable:
    def render(obj: dict, _value: Any = None) -> str:
        ready = (obj.get("status") or {}).get(ready_field) or 0
        total = (obj.get("spec") if total_in_spec else obj.get("status") or {}).get(total_field)
        return f"{ready}/{1 if total is None else total}"
    return render


def data_count(obj: dict, _value: Any = None) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


def node_status(obj: dict, _value: Any = None) -> str:
    conditions = (obj.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    text = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if (obj.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def node_roles(obj: dict, _value: Any = None) -> str:
    labels = _meta(obj).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k)
    if "kubernetes.io/role" in labels:
        roles.append(labels["kubernetes.io/role"])
    return ",".join(r for r in roles if r) or "<none>"


def _address(obj: dict, kind: str) -> str:
    for address in (obj.get("status") or {}).get("addresses") or []:
        if address.get("type") == kind:
            return address.get("address", "<none>")
    return "<none>"


def node_internal_ip(obj: dict, _value: Any = None) -> str:
    return _address(obj, "InternalIP")


def node_external_ip(obj: dict, _value: Any = None) -> str:
    return _address(obj, "ExternalIP")


def pod_ready(obj: dict, _value: Any = None) -> str:
    containers = (obj.get("spec") or {}).get("containers") or []
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(containers)}"


def pod_status(obj: dict, _value: Any = None) -> str:
    status = obj.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        terminated = (cs.get("state") or {}).get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
    if _meta(obj).get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def pod_restarts(obj: dict, _value: Any = None) -> int:
    return sum(s.get("restartCount", 0) for s in (obj.get("status") or {}).get("containerStatuses") or [])


def pod_readiness_gates(obj: dict, _value: Any = None) -> str:
    gates = (obj.get("spec") or {}).get("readinessGates") or []
    return "<none>" if not gates else f"0/{len(gates)}"


def _event(obj: dict) -> dict:
    """An Event in its core/v1 form: upstream prints the internal Event whichever API (core or events.k8s.io)
    serves it."""
    if obj.get("apiVersion") == "events.k8s.io/v1":
        from .conversion import event_to_core   # conversion imports resources, which imports this module
        return event_to_core(obj)
    return obj


def event_first_seen(obj: dict, _value: Any = None) -> str:
    event = _event(obj)
    return since(event.get("firstTimestamp") or event.get("eventTime") or _meta(obj).get("creationTimestamp"))


def event_last_seen(obj: dict, _value: Any = None) -> str:
    event = _event(obj)
    if event.get("series"):
        return since(event["series"].get("lastObservedTime"))
    return since(event.get("lastTimestamp")) if event.get("lastTimestamp") else event_first_seen(obj)


def event_object(obj: dict, _value: Any = None) -> str:
    involved = _event(obj).get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


def event_subobject(obj: dict, _value: Any = None) -> str:
    return (_event(obj).get("involvedObject") or {}).get("fieldPath") or ""


def event_source(obj: dict, _value: Any = None) -> str:
    """formatEventSource: the source's component and host, else the reporting controller and instance."""
    event = _event(obj)
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


def event_message(obj: dict, _value: Any = None) -> str:
    return str(_event(obj).get("message") or "").strip()


def event_count(obj: dict, _value: Any = None) -> int:
    """The series count, else the count; a singleton Event of the new API has none and counts 1."""
    event = _event(obj)
    if event.get("series"):
        return int(event["series"].get("count") or 0)
    return int(event.get("count") or 0) or 1


def access_modes(obj: dict, _value: Any = None) -> str:
    short = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}
    modes = ((obj.get("status") or {}).get("accessModes") or (obj.get("spec") or {}).get("accessModes") or [])
    return ",".join(short.get(m, m) for m in modes)


def pv_claim(obj: dict, _value: Any = None) -> str:
    ref = (obj.get("spec") or {}).get("claimRef")
    return f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""


def service_external_ip(obj: dict, _value: Any = None) -> str:
    ips = (obj.get("spec") or {}).get("externalIPs") or []
    return ",".join(ips) or "<none>"


def service_ports(obj: dict, _value: Any = None) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def node_selector(obj: dict, _value: Any = None) -> str:
    selector = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return ",".join(f"{k}={v}" for k, v in selector.items()) or "<none>"


def cronjob_suspend(obj: dict, _value: Any = None) -> str:
    return "True" if (obj.get("spec") or {}).get("suspend") else "False"


def cronjob_active(obj: dict, _value: Any = None) -> int:
    return len((obj.get("status") or {}).get("active") or [])


def cronjob_last_schedule(obj: dict, _value: Any = None) -> str:
    last = (obj.get("status") or {}).get("lastScheduleTime")
    return since(last) if last else "<none>"


def job_status(obj: dict, _value: Any = None) -> str:
    conditions = (obj.get("status") or {}).get("conditions") or []
    for kind, text in (("Complete", "Complete"), ("Failed", "Failed"), ("Suspended", "Suspended")):
        if any(c.get("type") == kind and c.get("status") == "True" for c in conditions):
            return text
    return "Running"


def job_completions(obj: dict, _value: Any = None) -> str:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}"


def job_duration(obj: dict, _value: Any = None) -> str:
    status = obj.get("status") or {}
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    if start is None:
        return ""
    end = end or datetime.now(timezone.utc)
    return human_duration((end - start).total_seconds())


def pdb_min_available(obj: dict, _value: Any = None) -> str:
    value = (obj.get("spec") or {}).get("minAvailable")
    return "N/A" if value is None else str(value)


def pdb_max_unavailable(obj: dict, _value: Any = None) -> str:
    value = (obj.get("spec") or {}).get("maxUnavailable")
    return "N/A" if value is None else str(value)


def binding_role(obj: dict, _value: Any = None) -> str:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind')}/{ref.get('name')}"


def selector_string(selector: dict | None) -> str:
    """A metav1.LabelSelector as labels.Selector.String() prints it: requirements sorted by key, `k=v`,
    `k in (a,b)`, `k notin (a,b)`, `k`, `!k` (values sorted); empty for a selector that selects everything."""
    selector = selector or {}
    parts = [(key, f"{key}={value}") for key, value in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, values = expr.get("key", ""), ",".join(sorted(expr.get("values") or []))
        shown = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                 "DoesNotExist": f"!{key}"}.get(expr.get("operator"))
        if shown is not None:
            parts.append((key, shown))
    return ",".join(text for _key, text in sorted(parts))


def pod_selector(obj: dict, _value: Any = None) -> str:
    """NetworkPolicy Pod-Selector: metav1.FormatLabelSelector (`<none>` when it selects every Pod)."""
    return selector_string((obj.get("spec") or {}).get("podSelector")) or "<none>"


def ingress_class(obj: dict, _value: Any = None) -> str:
    return (obj.get("spec") or {}).get("ingressClassName") or "<none>"


def ingress_hosts(obj: dict, _value: Any = None) -> str:
    """formatHosts: the rules' hosts, at most three then `+ N more...`; `*` when no rule names a host."""
    hosts = [rule["host"] for rule in (obj.get("spec") or {}).get("rules") or [] if rule.get("host")]
    if not hosts:
        return "*"
    text = ",".join(hosts[:3])
    return text + (f" + {len(hosts) - 3} more..." if len(hosts) > 3 else "")


def ingress_address(obj: dict, _value: Any = None) -> str:
    """ingressLoadBalancerStatusStringer: each load balancer entry's IP, else its hostname, sorted and distinct.
    The server prints with `Wide` (its table convertor always does), so the text is never cut."""
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return ",".join(sorted({entry.get("ip") or entry.get("hostname") for entry in ingress
                            if entry.get("ip") or entry.get("hostname")}))


def ingress_ports(obj: dict, _value: Any = None) -> str:
    return "80, 443" if (obj.get("spec") or {}).get("tls") else "80"


def ingress_class_parameters(obj: dict, _value: Any = None) -> str:
    params = (obj.get("spec") or {}).get("parameters")
    if not params:
        return "<none>"
    kind = params.get("kind", "") + (f".{params['apiGroup']}" if params.get("apiGroup") else "")
    return f"{kind}/{params.get('name', '')}"
