"""A controller that dies at a chosen point (issue 19's kill points): when a task whose name contains
$KILL_AT_TASK starts (its $KILL_AT_OCCURRENCE-th such start, 1 by default), SIGKILL to ansible-playbook's whole
process group, at once or $KILL_AFTER_SECONDS later (a kill during the task; if the task ends sooner, at its end,
before the next task starts, so that the kill stays inside the step whatever the machine's load). As an AWX job
cancelled hard or an execution environment lost: no handler, no rescue, no always runs. Enabled by
ANSIBLE_CALLBACKS_ENABLED=kill_at_task."""
from __future__ import annotations

import os
import signal
import threading

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: kill_at_task
type: aggregate
short_description: SIGKILL ansible-playbook's process group when a named task starts (tests only)
description: [The kill points of tests/integration/test_kill_points.py.]
"""


def kill_process_group() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kill_at_task"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.task_name = os.environ.get("KILL_AT_TASK", "")
        self.occurrence = int(os.environ.get("KILL_AT_OCCURRENCE", "1"))
        self.delay = float(os.environ.get("KILL_AFTER_SECONDS", "0"))
        self.seen = 0
        self.timer = None

    def kill_now_if_armed(self):
        """The armed task ended before its delay: the kill comes now, still inside its step."""
        if self.timer is not None:
            self.timer.cancel()
            self._display.display("KILL POINT: the task ended before {0}s; SIGKILL at its end".format(self.delay))
            kill_process_group()

    def v2_playbook_on_stats(self, stats):
        self.kill_now_if_armed()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.kill_now_if_armed()
        if not self.task_name or self.task_name not in task.get_name():
            return
        self.seen += 1
        if self.seen != self.occurrence:
            return
        self._display.display("KILL POINT: SIGKILL {0} at the start of TASK [{1}]".format(
            "{0}s after".format(self.delay) if self.delay else "right", task.get_name()))
        if self.delay:
            self.timer = threading.Timer(self.delay, kill_process_group)
            self.timer.start()
        else:
            kill_process_group()
