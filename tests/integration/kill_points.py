"""A controller that dies at a chosen point (issue 19's kill points): ansible-playbook and everything it started
SIGKILLed when a named task starts, through tests/integration/callback_plugins/kill_at_task.py; as an AWX job cancelled
hard, or its execution environment lost: no rescue, no always, no release of the lease."""
from __future__ import annotations

from pathlib import Path

from .ansible_run import playbook_command, playbook_in_background

KILLER = Path(__file__).parent / "callback_plugins"


def killed_run(sim, playbook: Path, variables: dict, tmp_path: Path, task: str, after: float = 0, occurrence: int = 1,
               may_be_refused: bool = False) -> str:
    """`playbook` run until the start of the `occurrence`-th task named like `task` (and `after` seconds more), then
    SIGKILLed with everything it started; its output. `may_be_refused`: or refused before any change (a dead run's
    lease record says to roll it back first)."""
    log = tmp_path / "killed.log"
    env = {"ANSIBLE_CALLBACK_PLUGINS": str(KILLER), "ANSIBLE_CALLBACKS_ENABLED": "kill_at_task", "KILL_AT_TASK": task,
           "KILL_AT_OCCURRENCE": str(occurrence), "KILL_AFTER_SECONDS": str(after)}
    with playbook_in_background(playbook_command(sim, playbook, variables, tmp_path / "killed"), tmp_path, log, env=env) as process:
        returncode = process.wait(timeout=400)
    output = log.read_text()
    if may_be_refused and returncode not in (0, -9) and "Nothing was changed by this run" in output:
        return output
    assert returncode == -9 and "KILL POINT: SIGKILL" in output, f"not killed at {task!r} (exit {returncode}):\n{output[-8000:]}"
    return output
