# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of progress while waiting (plugins/module_utils/progress.py has the module's side).

A module that waits returns early with `progress.done: false`, the lines to show and a `resume` state; the action
plugin of the same name shows the lines and calls the module again with that state until `progress.done`. Lines go
through Ansible's Display, so they appear in the terminal as they come, and in AWX job output (ansible-runner turns
Display output into job events). Why not async with polling: a module run with `async` goes on in the background
when the person stops the run (Ctrl-C, an AWX cancel), and a drain that goes on evicting after a stop is not what
anyone expects; here each call is an ordinary module run that stops with the run.

Between two calls the run's lease is renewed (`LeaseRenewal`), when this host holds one: run_lease.yml keeps it in the
fact `run_lease_holding` (run id, Lease, duration, when it was renewed). The renewal is the run_lease module itself with
`state: renewed`, every third of the lease's duration (the module is then asked to return at least that often); when
another run holds the lease, or the renewals failed past the renew deadline, the task fails before the next call, so
before the next write. Check mode renews nothing (a check-mode run holds no lease).

A task also stops before its next call when the ansible-playbook process that runs it is gone: ansible-core's workers
are process groups of their own, so a SIGKILL of ansible-playbook's group (a killed run) leaves the worker of the
running task behind, and it would go on calling the module (evicting, renewing the lease of a dead run) until the
work is done. The worker sees its parent change (`orphaned`) and stops.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Dict, List, Optional

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_lease as rl
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import connection_argument_spec
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import PROGRESS_SPEC

display = Display()
RUN_LEASE = "kubevirt_ops.rebalance.run_lease"
HOLDING_FACT = "run_lease_holding"


def call_until_done(call: Callable[[dict], dict], args: dict, show: Callable[[str], None],
                    between: Optional[Callable[[], Optional[dict]]] = None) -> dict:
    """Call the module (`call(args)`) until its `progress` says done, showing each call's lines; the last call's result,
    with every line of the task in `progress.lines`. A failed call ends the loop with its result. `between` runs before
    each next call; what it returns (a failure) ends the loop instead of that call, merged into the last result."""
    shown = []
    result = call(dict(args))
    while True:
        progress = result.get("progress") if isinstance(result.get("progress"), dict) else {}
        for line in progress.get("lines") or []:
            show(line)
            shown.append(line)
        if result.get("failed") or progress.get("done", True) or not isinstance(progress.get("resume"), dict):
            break
        stop = between() if between else None
        if stop:
            result = dict(result, **stop)
            break
        result = call(dict(args, resume=progress["resume"]))
    if progress:
        result["progress"] = dict({k: v for k, v in progress.items() if k != "resume"}, lines=shown)
    return result


def orphaned(parent: int, current_parent: Callable[[], int] = os.getppid) -> Optional[dict]:
    """The failure of a task whose ansible-playbook process (`parent`, the worker's parent when the task started) has
    ended, or None while it runs."""
    if current_parent() == parent:
        return None
    return {"failed": True, "msg": "Stopped before the next call: the ansible-playbook process (pid {0}) that ran this task has ended, "
                                   "so this task does not go on alone. Run the playbook again to continue.".format(parent)}


class LeaseRenewal:
    """The run's lease renewed between the calls of one task: `between` renews through `renew` (a call of run_lease with
    `state: renewed`) when checks.run_lease says it is due, and returns the task's failure when the lease is lost or the
    renew deadline is past. `holding` is run_lease.yml's fact: run_id, namespace, name, duration and renewed_at (epoch
    seconds)."""

    def __init__(self, holding: dict, renew: Callable[[dict], dict], show: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.holding = holding
        self.duration = int(holding["duration"])
        self.renew = renew
        self.show = show
        self.clock = clock
        self.started = clock()
        renewed_at = holding.get("renewed_at")
        # the last renewal on this task's clock: the step's renewal before the task, else none yet (renew at the first chance)
        self.last: Optional[float] = self.started - max(0.0, wall() - float(renewed_at)) if renewed_at not in (None, "") else None
        self.renewals = 0
        self.failures: List[str] = []

    @classmethod
    def from_task_vars(cls, task_vars: dict, check_mode: bool, renew: Callable[[dict], dict],
                       show: Callable[[str], None]) -> Optional["LeaseRenewal"]:
        """The renewal of the lease this host holds, or None (check mode, no lease, a lease released)."""
        holding = task_vars.get(HOLDING_FACT)
        if check_mode or not isinstance(holding, dict) or not holding.get("run_id") or not holding.get("duration"):
            return None
        return cls(holding, renew, show)

    def args(self) -> dict:
        return {"state": "renewed", "run_id": self.holding["run_id"], "duration": self.duration,
                "lease_namespace": self.holding.get("namespace") or None, "lease_name": self.holding.get("name") or None}

    def between(self) -> Optional[dict]:
        """Renew when due; the failure that stops the task, or None to go on."""
        before = self.clock()
        if not rl.renew_due(self.last, before, self.duration):
            return None
        answer = self.renew({key: value for key, value in self.args().items() if value is not None})
        if not answer.get("failed"):
            self.last = before
            self.renewals += 1
            return None
        message = str(answer.get("msg") or "the renewal failed")
        if (answer.get("error") or {}).get("type") == "LeaseLost":
            return self.failure(message)
        self.failures.append(message)
        since = self.last if self.last is not None else self.started
        if rl.renew_deadline_past(since, self.clock(), self.duration):
            return self.failure("Could not renew the run's lease for {0:.0f} s, past its renew deadline ({1:.0f} s of a {2} s lease): {3} "
                                "This run stopped before its next write: another run may take the cluster over when the lease "
                                "expires.".format(self.clock() - since, rl.renew_deadline(self.duration), self.duration, message))
        self.show("renewing the run's lease failed, trying again at the next call: {0}".format(message))
        return None

    def failure(self, message: str) -> dict:
        return {"failed": True, "msg": "Stopped before the next call: {0}".format(message), "lease_lost": True}

    def call_every(self, args: dict) -> dict:
        """The task's arguments with a `progress_every` short enough to renew between the calls."""
        given = args.get("progress_every", PROGRESS_SPEC["progress_every"]["default"])
        try:
            every = int(given)
        except (TypeError, ValueError):
            return args   # the module refuses it with its own message
        return dict(args, progress_every=rl.call_every(every, self.duration))


class ProgressActionModule(ActionBase):
    """Runs the module of the same name through call_until_done; everything else is the normal action."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None) -> Dict:
        result = super().run(tmp, task_vars)
        del tmp  # the module runs in its own temporary directory, as with the normal action
        host = (task_vars or {}).get("inventory_hostname", "localhost")
        module = self._task.resolved_action or self._task.action

        def call(args: dict) -> dict:
            return self._execute_module(module_name=module, module_args=args, task_vars=task_vars)

        def show(line: str) -> None:
            display.display("[{0}] {1}".format(host, line))

        def renew(args: dict) -> dict:
            connection = {name: self._task.args[name] for name in connection_argument_spec() if name in self._task.args}
            return self._execute_module(module_name=RUN_LEASE, module_args=dict(connection, **args), task_vars=task_vars)

        args = dict(self._task.args)
        renewal = LeaseRenewal.from_task_vars(task_vars or {}, bool(self._play_context.check_mode), renew, show)
        if renewal is not None:
            args = renewal.call_every(args)
        parent = os.getppid()

        def between() -> Optional[dict]:
            return orphaned(parent) or (renewal.between() if renewal else None)

        result.update(call_until_done(call, args, show, between))
        if renewal is not None and isinstance(result.get("progress"), dict):
            result["progress"]["lease_renewals"] = renewal.renewals
        # the state between the calls is the module's business, not the task's result
        ((result.get("invocation") or {}).get("module_args") or {}).pop("resume", None)
        return result
