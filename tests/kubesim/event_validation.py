"""What the Event strategy validates on create, by the version the request was sent to (kubernetes
`pkg/apis/core/validation/events.go` ValidateEventCreate), on the storage (core) form, so field paths are the
internal Event's (`message`, `involvedObject.namespace`, `reportingController`):

- every Event (legacy): without `eventTime`, `involvedObject.namespace` must be the Event's namespace (or empty
  for an Event in `default`); with `eventTime`, `reportingController` (a qualified name), `reportingInstance`
  (at most 128 characters), `action` and `reason` (at most 128) are required, `message` at most 1024
  characters, and an empty `involvedObject.namespace` needs an Event in `default` or `kube-system`;
- through events.k8s.io/v1 also (strict): `eventTime` required, `type` `Normal` or `Warning`, the deprecated
  `firstTimestamp`, `lastTimestamp`, `count`, `source` unset, a `series` with `count` >= 2 and
  `lastObservedTime`.

The error names the internal kind, `Event` (no group), whichever API was used.
Simplified: ValidateEventUpdate's immutable fields are not checked."""
from __future__ import annotations

import re

from . import errors
from .validation import dns_subdomain_errors, quote, regex_error

_LIMIT_128 = 128
_NOTE_LIMIT = 1024
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")


def qualified_name_errors(value: str) -> list[str]:
    """apimachinery IsQualifiedName: `[prefix/]name`, the prefix a DNS subdomain, the name at most 63."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                  "123-abc") +
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        errs += ["prefix part " + msg for msg in dns_subdomain_errors(parts[0])] if parts[0] else \
            ["prefix part must be non-empty"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                               "123-abc"))
    return errs


def _required(field: str) -> tuple[str, str]:
    return field, "Required value"


def _invalid(field: str, value: str, message: str) -> tuple[str, str]:
    return field, f"Invalid value: {quote(value)}: {message}"


def legacy_errors(event: dict) -> list[tuple[str, str]]:
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    involved_ns = (event.get("involvedObject") or {}).get("namespace") or ""
    mismatch = _invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not event.get("eventTime"):
        if (involved_ns and namespace != involved_ns) or (not involved_ns and namespace not in ("", "default")):
            return [mismatch]
        return []
    errs = [mismatch] if not involved_ns and namespace not in ("default", "kube-system") else []
    controller = event.get("reportingComponent") or ""
    if not controller:
        errs.append(_required("reportingController"))
    errs += [_invalid("reportingController", controller, msg) for msg in qualified_name_errors(controller)]
    for field, limit in (("reportingInstance", _LIMIT_128), ("action", _LIMIT_128), ("reason", _LIMIT_128)):
        value = event.get(field) or ""
        if not value:
            errs.append(_required(field))
        if len(value) > limit:
            errs.append(_invalid(field, "", f"can have at most {limit} characters"))
    if len(event.get("message") or "") > _NOTE_LIMIT:
        errs.append(_invalid("message", "", f"can have at most {_NOTE_LIMIT} characters"))
    return errs


def strict_errors(event: dict) -> list[tuple[str, str]]:
    """The events.k8s.io/v1 create rules (ValidateObjectMeta's name rules run in validation.py)."""
    errs: list[tuple[str, str]] = []
    series = event.get("series")
    if series is not None:
        if int(series.get("count") or 0) < 2:
            errs.append(_invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            errs.append(_required("series.lastObservedTime"))
    if not event.get("eventTime"):
        errs.append(_required("eventTime"))
    if event.get("type") not in ("Normal", "Warning"):
        errs.append(_invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for field in ("firstTimestamp", "lastTimestamp"):
        if event.get(field):
            errs.append(_invalid(field, "", "needs to be unset"))
    if event.get("count"):
        errs.append(_invalid("count", "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        errs.append(_invalid("source", "", "needs to be unset"))
    return errs


def validate_create(rt, event: dict) -> None:
    """Raise 422 Invalid when an Event (in storage form) may not be created through `rt`'s version."""
    if rt.kind != "Event" or rt.storage_api_version != "v1":
        return
    errs = legacy_errors(event)
    if rt.api_version != "v1":
        errs += strict_errors(event)
    if errs:
        raise errors.invalid(rt, "Event", (event.get("metadata") or {}).get("name") or "", errs, group="")
