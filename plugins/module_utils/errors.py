# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception family of the collection.

Every error names where the problem is (an option, a policy field, or the API request that failed),
what the problem is (in upstream words where there are some) and what to do about it. `main()` of each
module turns these into `fail_json` in one place, with `message` as `msg` and `as_dict()` as `error`.
"""

from __future__ import annotations

import re
from typing import Any, Optional

# The apiserver's 403 text: `<resource> ["<name>"] is forbidden: User "<u>" cannot <verb> resource "<r>" in API group "<g>" ...`
FORBIDDEN_RE = re.compile(r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)" in API group "(?P<group>[^"]*)"'
                          r'(?: in the namespace "(?P<namespace>[^"]*)")?')


class RebalanceError(Exception):
    """Base class: `path: problem. fix` as a sentence a person can act on."""

    def __init__(self, problem: str, fix: Optional[str] = None, path: Optional[str] = None, **details: Any) -> None:
        self.problem = problem
        self.fix = fix
        self.path = path
        self.details = details
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = "{0}: {1}".format(self.path, self.problem) if self.path else self.problem
        if self.fix:
            text = "{0}{1} {2}".format(text.rstrip(), "" if text.rstrip().endswith((".", "!", "?")) else ".", self.fix)
        return text

    def as_dict(self) -> dict:
        """The error as data for the module result (`error` key)."""
        result = {"type": type(self).__name__, "path": self.path, "problem": self.problem, "fix": self.fix}
        result.update(self.details)
        return result


class InvalidOption(RebalanceError):
    """A module option (or a combination of options) that cannot work; `path` is the option name."""


class KindNotServed(RebalanceError):
    """The API server does not serve a kind the caller cannot do without."""

    def __init__(self, kind: str, group: Optional[str] = None, fix: Optional[str] = None, path: Optional[str] = None) -> None:
        self.kind = kind
        self.group = group
        where = "{0} (group {1})".format(kind, group) if group else kind
        super().__init__(
            "the server doesn't serve the kind {0}".format(where),
            fix or "Install the component that provides it, or point the connection at the cluster that serves it.",
            path=path,
            kind=kind,
            group=group,
        )


class ApiFailure(RebalanceError):
    """An API request that failed for good (after retries where retrying made sense).

    `status` is the HTTP code (0 for a connection that never got an answer), `reason` the Kubernetes
    Status reason (`Forbidden`, `TooManyRequests`, ...), `api_message` the Status message.
    """

    def __init__(self, request: str, status: int, reason: str, api_message: str, fix: Optional[str] = None,
                 attempts: int = 1) -> None:
        self.status = status
        self.reason = reason
        self.api_message = api_message
        self.attempts = attempts
        if status:
            problem = "{0} {1}: {2}".format(status, reason, api_message) if api_message else "{0} {1}".format(status, reason)
        else:
            problem = "no answer from the API server: {0}".format(api_message or reason)
        if attempts > 1:
            problem = "{0} (gave up after {1} attempts)".format(problem, attempts)
        denied = forbidden_details(api_message) if status == 403 else {}
        super().__init__(problem, fix or fix_for_status(status, denied), path=request, status=status, reason=reason,
                         api_message=api_message, attempts=attempts, **({"forbidden": denied} if denied else {}))


def forbidden_details(api_message: str) -> dict:
    """user, verb, resource, group and namespace (None: cluster scope) from a 403 message; {} when it has another shape."""
    match = FORBIDDEN_RE.search(api_message or "")
    return match.groupdict() if match else {}


def fix_for_status(status: int, denied: Optional[dict] = None) -> str:
    """What a person can do about an API answer with this HTTP status (`denied`: forbidden_details of a 403)."""
    if status == 0:
        return "Check host, kubeconfig and context, and that the API server is reachable from where the module runs."
    if status == 401:
        return "The credentials were refused: check api_key, the kubeconfig user, or the token's expiry."
    if status == 403:
        if denied:
            scope = 'in namespace "{0}" (Role)'.format(denied["namespace"]) if denied.get("namespace") else "cluster-wide (ClusterRole)"
            return ('Grant the user verb "{0}" on resource "{1}" in API group "{2}" {3}: docs/rbac.md lists what each module '
                    "and role needs.".format(denied["verb"], denied["resource"], denied["group"], scope))
        return "Grant the user the permission this request needs (RBAC): docs/rbac.md lists what each module and role needs."
    if status == 429 or status >= 500:
        return "The API server is overloaded or failing: try again later, or raise api_retries and api_timeout."
    return "Check the options that shape this request."


class RunFailed(RebalanceError):
    """A Descheduler run that could not be started, observed or completed (not found, suspended, failed, timed out);
    `details` may carry what was observed (`run`)."""
