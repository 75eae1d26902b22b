"""An outage of the API server, armed through the admin endpoint (`/_kubesim/outage`): the server goes away for a
while, as a real one does during an upgrade or a restart, and comes back on the same host and port with the same
state.

While it lasts, the listening socket is closed, so new connections are refused (ECONNREFUSED), and the connections
open when it began (watch streams, keep-alive connections) are shut down, so their clients read EOF; when it ends,
the server listens on the same address again (`KubeSimServer.go_away` and `come_back` do the socket work). The store
and the simulated controllers go on meanwhile: only the API's network side is gone, and resourceVersions continue.
All clusters share the one listening socket, so an outage is the whole server's.

An outage begins at once, `after` seconds later, or, with `armedBy` (a fault rule's match, `faults.arms`), when the
first real HTTP request matching it arrives: that request goes unanswered and is not carried out (with `after` as
well, it is answered and the outage begins `after` seconds later). It ends by itself after `seconds`, since the admin
endpoint is on the socket that is gone. One outage at a time."""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .api import now_iso
from .faults import arms, parse_armed_by, seconds_value, show_armed_by

FIELDS = ("seconds", "after", "armedBy")
RETRY_LISTEN = 0.2   # seconds between attempts to listen again while the address is taken


class Busy(Exception):
    """An outage is armed or going on already."""


@dataclass
class Plan:
    seconds: float
    after: float = 0.0
    armed_by: dict | None = None
    armed: bool = True     # False while it waits for its armedBy request


def parse(spec: Any) -> Plan:
    """The outage a `POST /_kubesim/outage` body asks for; ValueError naming what is wrong."""
    if not isinstance(spec, dict):
        raise ValueError(f"an outage is a mapping of {list(FIELDS)}")
    unknown = set(spec) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown outage field(s) {sorted(unknown)}; known: {list(FIELDS)}")
    if spec.get("seconds") is None:
        raise ValueError("seconds is required: how long the server is gone")
    armed_by = parse_armed_by(spec.get("armedBy"))
    return Plan(seconds_value("seconds", spec["seconds"]), seconds_value("after", spec.get("after", 0), zero=True),
                armed_by, armed=armed_by is None)


class Outage:
    """The outages of one server: the one armed or going on, and how many began and how many connections they cut
    (connections refused meanwhile are the kernel's: the simulator never sees them)."""

    def __init__(self, server):
        self._server = server    # KubeSimServer: go_away(keep) -> connections cut, come_back(), stopping
        self._lock = threading.Lock()
        self._plan: Plan | None = None
        self._timer: threading.Timer | None = None
        self.active = False
        self.outages = 0
        self.cut = 0
        self._times: dict[str, str] = {}   # beganAt, endsAt, endedAt of the latest

    def arm(self, spec: Any, keep=None) -> dict:
        """Arm the outage of `spec` (ValueError, Busy); one that begins at once spares the connection `keep` (the
        admin request's, still to be answered). Answers the report."""
        plan = parse(spec)
        with self._lock:
            if self._plan is not None:
                raise Busy("an outage is armed or going on already")
            self._plan = plan
            if plan.armed:
                self._start(keep)
            return self._report()

    def observe(self, request: dict) -> bool:
        """For each HTTP request: True when it arms an outage that begins at once; its own connection is then
        cut already, so it goes unanswered."""
        with self._lock:
            plan = self._plan
            if plan is None or plan.armed or not arms(plan.armed_by, request):
                return False
            plan.armed = True
            self._start()
            return self.active

    def cancel(self) -> bool:
        """Drop an armed outage that has not begun (one going on ends by its timer only)."""
        with self._lock:
            if self._plan is None or self.active:
                return False
            self._cancel_timer()
            self._plan = None
            return True

    def stop(self) -> None:
        """The server stops: no timer fires any more."""
        with self._lock:
            self._cancel_timer()

    def report(self) -> dict:
        with self._lock:
            return self._report()

    # ----------------------------------------------------------------------------------- under the lock
    def _start(self, keep=None) -> None:
        if self._plan.after:
            self._timer = _timer(self._plan.after, self._begin_later)
        else:
            self._begin(keep)

    def _begin_later(self) -> None:
        with self._lock:
            if self._plan is not None and not self.active:    # not cancelled meanwhile
                self._begin()

    def _begin(self, keep=None) -> None:
        if self._server.stopping.is_set():
            return
        self.cut += self._server.go_away(keep)
        self.active = True
        self.outages += 1
        self._times = {"beganAt": now_iso(), "endsAt": now_iso(self._plan.seconds)}
        self._timer = _timer(self._plan.seconds, self._end)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _report(self) -> dict:
        plan = self._plan
        data: dict[str, Any] = {"active": self.active, "pending": plan is not None and not self.active,
                                "outages": self.outages, "cut": self.cut, **self._times}
        if plan is not None:
            data.update(seconds=plan.seconds, after=plan.after)
            if plan.armed_by is not None:
                data.update(armedBy=show_armed_by(plan.armed_by), armed=plan.armed)
        return data

    # ------------------------------------------------------------------------------------ timer thread
    def _end(self) -> None:
        """Listen again; while another process holds the port (it was free during the outage), retry."""
        complained = False
        while not self._server.stopping.is_set():
            try:
                self._server.come_back()
                break
            except OSError as exc:
                if not complained:
                    sys.stderr.write(f"kubesim: cannot listen again after the outage: {exc}; retrying\n")
                    complained = True
                self._server.stopping.wait(RETRY_LISTEN)
        with self._lock:
            self.active, self._plan, self._timer = False, None, None
            self._times["endedAt"] = now_iso()


def _timer(seconds: float, function: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, function)
    timer.daemon = True
    timer.start()
    return timer
