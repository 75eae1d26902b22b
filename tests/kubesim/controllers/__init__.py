"""Controllers react to store events and write through the cluster API, as real controllers do. Each runs
in its cluster's single controller thread, so they never race each other."""
from __future__ import annotations

import heapq
import itertools
import queue
import sys
import threading
import time
import traceback
from typing import Callable

from ..store import Event


class Controller:
    """Base class: override `on_event`; use `self.manager.after()` for timers."""
    keys: tuple[str, ...] = ()     # resource keys this controller wants events for; empty = all

    def __init__(self, cluster):
        self.cluster = cluster
        self.manager: "ControllerManager | None" = None

    def start(self) -> None:
        """Called once in the controller thread before events flow."""

    def on_event(self, event: Event) -> None:
        """React to one store event."""


class ControllerManager:
    def __init__(self, cluster):
        self.cluster = cluster
        self.controllers: list[Controller] = []
        self._events: "queue.Queue[Event | None]" = queue.Queue()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._timer_lock = threading.Lock()
        self._busy = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"controllers-{cluster.name}", daemon=True)
        self._stopping = False
        cluster.add_listener(self._events.put)

    def add(self, controller: Controller) -> None:
        controller.manager = self
        self.controllers.append(controller)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._events.put(None)
        self._thread.join(timeout=5)

    def after(self, real_seconds: float, action: Callable[[], None]) -> None:
        with self._timer_lock:
            heapq.heappush(self._timers, (time.monotonic() + real_seconds, next(self._seq), action))
        self._events.put(_WAKE)

    def after_simulated(self, simulated_seconds: float, action: Callable[[], None]) -> None:
        self.after(self.cluster.clock.real_seconds(simulated_seconds), action)

    def idle(self) -> bool:
        """True when no event is queued or being handled and no timer is due. Counts unfinished events rather than
        a queue that is empty as soon as the thread took the last one out, before it handled it (under load the
        thread can wait long between the two)."""
        with self._timer_lock:
            due = bool(self._timers) and self._timers[0][0] <= time.monotonic()
        return self._events.unfinished_tasks == 0 and not due and not self._busy.is_set()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.idle():
                time.sleep(0.02)
                if self.idle():
                    return True
            time.sleep(0.01)
        return False

    def _run(self) -> None:
        for controller in self.controllers:
            self._guard(controller.start)
        while not self._stopping:
            with self._timer_lock:
                wait = self._timers[0][0] - time.monotonic() if self._timers else 0.5
            try:
                event = self._events.get(timeout=max(min(wait, 0.5), 0))
                taken = True
            except queue.Empty:
                event, taken = _WAKE, False
            if event is None:
                return
            self._busy.set()
            try:
                if event is not _WAKE:
                    for controller in self.controllers:
                        if not controller.keys or event.key in controller.keys:
                            self._guard(controller.on_event, event)
                self._run_due_timers()
            finally:
                self._busy.clear()
                if taken:
                    self._events.task_done()

    def _run_due_timers(self) -> None:
        while True:
            with self._timer_lock:
                if not self._timers or self._timers[0][0] > time.monotonic():
                    return
                action = heapq.heappop(self._timers)[2]
            self._guard(action)

    @staticmethod
    def _guard(action: Callable, *args) -> None:
        try:
            action(*args)
        except Exception:  # a controller bug must not stop the others
            print(f"kubesim: controller error:\n{traceback.format_exc()}", file=sys.stderr, flush=True)


_WAKE = object()
