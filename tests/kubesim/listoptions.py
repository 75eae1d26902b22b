"""List and watch options as the apiserver reads them: the query parameters, the watch-list defaulting and the
`ListOptions.meta.k8s.io "" is invalid` checks (apimachinery `internalversion.SetListOptionsDefaults`,
`internalversion/validation.ValidateListOptions`), the etcd3 store's continue tokens (`storage.EncodeContinue`,
`DecodeContinue`) and the Status errors of lists and watches at a resourceVersion (too old, too large, expired
continue)."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from . import errors
from .errors import ApiError

NOT_OLDER_THAN, EXACT = "NotOlderThan", "Exact"
CONTINUE_VERSION = "meta.k8s.io/v1"
LATEST = -1   # a continue token's rv after compaction: continue at the latest state (handleCompactedErrorForPaging)
FRESH_WAIT_SECONDS = 3.0   # the watch cache's blockTimeout before "Too large resource version"

LIST_TOO_OLD = "The resourceVersion for the provided list is too old."
INCONSISTENT_CONTINUE = ("The provided continue parameter is too old to display a consistent list result. You can "
                         "start a new list without the continue parameter, or use the continue token in this "
                         "response to retrieve the remainder of the results. Continuing with the provided token "
                         "results in an inconsistent list - objects that were created, modified, or deleted "
                         "between the time the first chunk was returned and now may show up in the list.")


@dataclass
class ListOptions:
    """metav1.ListOptions of one list or watch request (after the watch-list defaulting)."""
    watch: bool = False
    label_selector: str | None = None
    field_selector: str | None = None
    resource_version: str | None = None
    resource_version_match: str = ""
    send_initial_events: bool | None = None
    allow_watch_bookmarks: bool = False
    limit: int | None = None
    continue_token: str = ""
    timeout_seconds: float | None = None

    @classmethod
    def from_query(cls, query: dict, watch: bool) -> "ListOptions":
        options = cls(watch=watch, label_selector=query.get("labelSelector") or None,
                      field_selector=query.get("fieldSelector") or None,
                      resource_version=query.get("resourceVersion"),
                      resource_version_match=query.get("resourceVersionMatch", ""),
                      send_initial_events=_bool(query, "sendInitialEvents"),
                      allow_watch_bookmarks=bool(_bool(query, "allowWatchBookmarks")),
                      limit=_int(query, "limit") or None, continue_token=query.get("continue", ""),
                      timeout_seconds=_int(query, "timeoutSeconds") or None)
        options.default_watch_list()
        options.validate()
        return options

    def default_watch_list(self) -> None:
        """With the WatchList feature (on in v1.35), a watch from "" or "0" that says nothing about initial events
        is a streaming list: it gets the initial events and, with bookmarks, the initial-events-end bookmark."""
        if self.send_initial_events is not None or self.resource_version_match:
            return
        if self.watch and self.resource_version in (None, "", "0"):
            self.send_initial_events = True
            self.resource_version_match = NOT_OLDER_THAN

    def validate(self) -> None:
        causes = self._watch_errors() if self.watch else self._list_errors()
        if causes:
            raise errors.invalid(None, "ListOptions", "", causes, group="meta.k8s.io")

    def _list_errors(self) -> list[tuple[str, str]]:
        causes, match = [], self.resource_version_match
        if match:
            if not self.resource_version:
                causes.append(_forbidden("resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if self.continue_token:
                causes.append(_forbidden("resourceVersionMatch is forbidden when continue is provided"))
            if match not in (EXACT, NOT_OLDER_THAN):
                causes.append(_unsupported(match, (EXACT, NOT_OLDER_THAN, "")))
            if match == EXACT and self.resource_version == "0":
                causes.append(_forbidden('resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if self.send_initial_events is not None:
            causes.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
        return causes

    def _watch_errors(self) -> list[tuple[str, str]]:
        causes, match = [], self.resource_version_match
        if self.send_initial_events is not None and match != NOT_OLDER_THAN:
            causes.append(_forbidden(f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
        if match:
            if self.send_initial_events is None:
                causes.append(_forbidden("resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                                         "provided"))
            if match != NOT_OLDER_THAN:
                causes.append(_unsupported(match, (NOT_OLDER_THAN,)))
            if self.continue_token:
                causes.append(_forbidden("resourceVersionMatch is forbidden when continue is provided"))
        return causes


def _forbidden(detail: str) -> tuple[str, str]:
    return "resourceVersionMatch", f"Forbidden: {detail}"


def _unsupported(value: str, supported: tuple[str, ...]) -> tuple[str, str]:
    shown = ", ".join(json.dumps(s) for s in supported)
    return "resourceVersionMatch", f"Unsupported value: {json.dumps(value)}: supported values: {shown}"


def _bool(query: dict, name: str) -> bool | None:
    if name not in query:
        return None
    value = query[name]
    if value in ("true", "1", "True", "t", "T", "TRUE"):
        return True
    if value in ("false", "0", "False", "f", "F", "FALSE", ""):
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def _int(query: dict, name: str) -> int:
    value = query.get(name) or ""
    try:
        return int(value) if value else 0
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None


def parse_resource_version(value: str) -> int:
    try:
        parsed = int(value)
        if parsed < 0:
            raise ValueError(value)
        return parsed
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{value}"') from None


# ----------------------------------------------------------------------------------------- continue tokens
def encode_continue(start: tuple[str, str], rv: int, across_namespaces: bool) -> str:
    """The token of the page after `start` = (namespace, name): the key relative to the list's prefix (`ns/name` for
    a list across namespaces, else `name`), plus NUL (the next key after it), and the list's resourceVersion."""
    key = f"{start[0]}/{start[1]}" if across_namespaces else start[1]
    token = {"v": CONTINUE_VERSION, "rv": rv, "start": key + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_continue(token: str, namespace: str, across_namespaces: bool) -> tuple[tuple[str, str], int]:
    """(the (namespace, name) key the page starts after, the token's resourceVersion); 400 for a bad token."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not isinstance(data, dict):
            raise ValueError("not a continue token")
    except (ValueError, TypeError) as exc:
        raise _bad_continue(f"continue key is not valid: {exc}") from None
    if data.get("v") != CONTINUE_VERSION:
        raise _bad_continue(f'continue key is not valid: server does not recognize this encoded version '
                            f'"{data.get("v", "")}"')
    rv, key = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or rv == 0:
        raise _bad_continue("continue key is not valid: incorrect encoded start resourceVersion (version "
                            "meta.k8s.io/v1)")
    if not isinstance(key, str) or not key:
        raise _bad_continue("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
    key = key.rstrip("\x00")
    if across_namespaces:
        ns, _sep, name = key.partition("/")
        return (ns, name), rv
    return (namespace, key), rv


def _bad_continue(reason: str) -> ApiError:
    return errors.bad_request(f"invalid continue token: {reason}")


# --------------------------------------------------------------------------------------------- errors
class ExpiredContinue(ApiError):
    """410 for a continue token older than the kept history, carrying a token that continues at the latest state
    (the etcd3 store's handleCompactedErrorForPaging)."""

    def __init__(self, token: str):
        super().__init__(410, "Expired", INCONSISTENT_CONTINUE)
        self.token = token

    def status(self) -> dict:
        body = super().status()
        body["metadata"] = {"continue": self.token}
        return body


def too_large(requested: int, current: int, retry_after: int = 1) -> ApiError:
    """504 from the watch cache when a resourceVersion is newer than what it has seen (storage
    NewTooLargeResourceVersionError)."""
    details: dict = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]}
    if retry_after:   # NewTimeoutError's retryAfterSeconds, omitted when 0 (the etcd3 store's answer)
        details["retryAfterSeconds"] = retry_after
    return ApiError(504, "Timeout", f"Timeout: Too large resource version: {requested}, current: {current}",
                    details)
