"""Kubernetes `Status` errors, with the reasons and codes the real API server uses."""
from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API failure that the HTTP layer turns into a `Status` object."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(rt, name: str | None) -> dict:
    details: dict[str, Any] = {"kind": rt.plural}
    if rt.group:
        details["group"] = rt.group
    if name:
        details["name"] = name
    return details


def qualified(rt) -> str:
    """`configmaps` for the core group, `virtualmachineinstances.kubevirt.io` otherwise."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def not_found(rt, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(rt)} "{name}" not found', _details(rt, name))


def already_exists(rt, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{qualified(rt)} "{name}" already exists', _details(rt, name))


def conflict(rt, name: str, why: str = "the object has been modified; please apply your changes to "
             "the latest version and try again") -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(rt)} "{name}": {why}',
                    _details(rt, name))


_CAUSE_TYPES = {"Required value": "FieldValueRequired", "Invalid value": "FieldValueInvalid",
                "Too long": "FieldValueTooLong", "Forbidden": "FieldValueForbidden",
                "Unsupported value": "FieldValueNotSupported", "Duplicate value": "FieldValueDuplicate",
                "Not found": "FieldValueNotFound", "Too many": "FieldValueTooMany"}


def cause_type(message: str) -> str:
    """The StatusCause type of a field error, from its body (`Required value: ...` -> FieldValueRequired)."""
    for prefix, reason in _CAUSE_TYPES.items():
        if message == prefix or message.startswith(prefix + ":"):
            return reason
    return "FieldValueInvalid"


def invalid(rt, kind: str, name: str, causes: list[tuple[str, str]], group: str | None = None) -> ApiError:
    """422 Invalid, as apimachinery's NewInvalid builds it: causes are (field, error body) pairs such as
    ("metadata.name", 'Invalid value: "x": ...'); the message names the group-qualified kind (`ConfigMap`,
    `Deployment.apps`, `PatchOptions.meta.k8s.io`) and aggregates the distinct causes."""
    group = (rt.group if rt is not None else "") if group is None else group
    details = _details(rt, name) if rt is not None else ({"name": name} if name else {})
    details["kind"] = kind
    details.pop("group", None)
    if group:
        details["group"] = group
    details["causes"] = [{"reason": cause_type(msg), "message": msg, "field": field} for field, msg in causes]
    shown: list[str] = []
    for field, msg in causes:
        line = f"{field}: {msg}"
        if line not in shown:
            shown.append(line)
    qualified_kind = f"{kind}.{group}" if group else kind
    summary = shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource"
                       ) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{', '.join(accepted)}")


def too_many_requests(message: str, retry_after: int | None = None) -> ApiError:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    details = {"retryAfterSeconds": retry_after} if retry_after is not None else None
    return ApiError(429, "TooManyRequests", message, details, headers)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def page_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")
