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
"""

from __future__ import annotations

from typing import Callable, Dict

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


def call_until_done(call: Callable[[dict], dict], args: dict, show: Callable[[str], None]) -> dict:
    """Call the module (`call(args)`) until its `progress` says done, showing each call's lines; the last call's result,
    with every line of the task in `progress.lines`. A failed call ends the loop with its result."""
    shown = []
    result = call(dict(args))
    while True:
        progress = result.get("progress") if isinstance(result.get("progress"), dict) else {}
        for line in progress.get("lines") or []:
            show(line)
            shown.append(line)
        if result.get("failed") or progress.get("done", True) or not isinstance(progress.get("resume"), dict):
            break
        result = call(dict(args, resume=progress["resume"]))
    if progress:
        result["progress"] = dict({k: v for k, v in progress.items() if k != "resume"}, lines=shown)
    return result


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

        result.update(call_until_done(call, self._task.args, show))
        # the state between the calls is the module's business, not the task's result
        ((result.get("invocation") or {}).get("module_args") or {}).pop("resume", None)
        return result
