# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Progress while a module waits: the wait is cut into calls of at most `progress_every` seconds.

A module prints nothing while it runs; Ansible shows its result when it returns. So a module that waits for minutes
(a drain, a verification, a Descheduler run) returns early instead: as soon as something finished (a VM migrated) or
when a status line is due, with the lines to show and the state to go on from (`resume`). The collection's action
plugin of the same name (plugins/plugin_utils/progress_action.py) prints the lines and calls the module again with that
state until the work is done; the last call returns the module's whole result, as one call without slices would.

The whole wait keeps one deadline across the calls (`started_at` is wall-clock time, carried in `resume`); a status
line says what is still awaited at least every `progress_every` seconds (`status_due_at`, also carried). With
`progress_every: 0` the module waits in one call, as before. `resume` is the module's own state; nothing a person
sets.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption

PROGRESS_SPEC = {
    "progress_every": {"type": "int", "default": 25},
    "resume": {"type": "dict"},
}
# how many of the awaited items a status line names before "and N more"
NAMED_IN_STATUS = 5
# A call that saw something finish returns once it is this old: a line shows at most this late, and finishes close
# together share one call (each call is a module run on the target, about a second).
LINGER_SECONDS = 2.0


def check_every(every: int) -> None:
    if every < 0:
        raise InvalidOption("must be 0 or more seconds", "Give how often to report progress while waiting, e.g. 25, or 0 to wait in one call.",
                            path="progress_every")


class Progress:
    """One call's share of a wait: its deadline, the lines it found, and the state it hands to the next call."""

    def __init__(self, every: int, resume: Optional[dict], clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        check_every(every)
        self.every = every
        self.resume = resume or {}
        self.clock = clock
        self.wall = wall
        now = wall()
        self.started_at = float(self.resume.get("started_at", now))
        self.status_due_at = float(self.resume.get("status_due_at", now + every))
        self._mono_start = clock()
        self._earlier = max(0.0, now - self.started_at)  # seconds spent by the calls before this one
        self.lines: List[str] = []
        self.finished_something = False

    @property
    def resumed(self) -> bool:
        return bool(self.resume)

    @property
    def state(self) -> Dict[str, Any]:
        """The service's own state from the call before (empty on the first call)."""
        return self.resume.get("state") or {}

    def require_state(self, *keys: str) -> None:
        """A `resume` that is not what this module returned before is refused (a person does not set it)."""
        if self.resumed and not (isinstance(self.resume.get("state"), dict) and set(keys) <= set(self.resume["state"])
                                 and "started_at" in self.resume):
            raise InvalidOption("is not the state this module returned from an earlier call",
                                "Leave resume unset: the collection's action plugin passes it between the calls of one task.", path="resume")

    def elapsed(self) -> float:
        """Seconds since the first call started."""
        return self._earlier + (self.clock() - self._mono_start)

    def deadline(self, timeout: float) -> float:
        """The whole wait's deadline on this call's clock."""
        return self._mono_start - self._earlier + timeout

    def call_deadline(self, timeout: float) -> float:
        """When this call returns at the latest: the whole deadline, or when the next status line is due."""
        if self.every <= 0:
            return self.deadline(timeout)
        return min(self.deadline(timeout), self.clock() + max(0.5, self.status_due_at - self.wall()))

    def finished(self, line: str) -> None:
        """Something finished: its line, and this call ends at the next chance so that the line shows now."""
        self.lines.append(line)
        self.finished_something = True

    def call_over(self) -> bool:
        """Whether this call should return now: something finished (and the call is LINGER_SECONDS old), or a status
        line is due."""
        if self.every <= 0:
            return False
        lingered = self.clock() - self._mono_start >= LINGER_SECONDS
        return (self.finished_something and lingered) or self.wall() >= self.status_due_at

    def out_of_time(self, timeout: float) -> bool:
        return self.clock() >= self.deadline(timeout) - 0.01

    def unfinished(self, awaiting: str, state: Dict[str, Any]) -> dict:
        """The `progress` of a call that returns before the work is done: its lines (plus the status line when it is
        due) and what the next call resumes from."""
        lines = list(self.lines)
        due = self.status_due_at
        if self.wall() >= due - 0.5:
            lines.append(awaiting)
            due = self.wall() + self.every
        return {"done": False, "lines": lines, "elapsed_seconds": round(self.elapsed(), 1),
                "resume": {"started_at": self.started_at, "status_due_at": due, "state": state}}

    def done(self) -> dict:
        """The `progress` of the call that ends the work."""
        return {"done": True, "lines": list(self.lines), "elapsed_seconds": round(self.elapsed(), 1)}


def named(items: List[str], limit: int = NAMED_IN_STATUS) -> str:
    """`a, b, c and 4 more`: the first few of a long list, for a status line."""
    shown = ", ".join(items[:limit])
    return shown + (" and {0} more".format(len(items) - limit) if len(items) > limit else "")


def seconds(value: Optional[float]) -> str:
    """`12 s`, `0.4 s` below ten seconds, `? s` when unknown."""
    if value is None:
        return "? s"
    return "{0:.1f} s".format(value) if value < 10 else "{0:.0f} s".format(value)
