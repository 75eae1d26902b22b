"""Running Ansible against the simulator from a test, one way for each shape: a module ad hoc (`run_ansible_module`),
a role in a generated one-play playbook (`run_role`), or a playbook file (`run_playbook`). Every run uses the venv's
ansible, this checkout's collections path, a per-run ANSIBLE_HOME, and a TMPDIR with a short path under the system
temp directory (ansible-core's RPC socket lives there and Unix socket paths are limited to about 100 bytes; pytest's
tmp paths can be longer). A list of tasks runs with `run_tasks`, which records every task result as JSON through a
small callback (RECORDER) so tests read results and facts by task. Also the page's way of editing the policy
ConfigMap (`kubectl edit`)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Only there to stop a hung run: a run that takes ~100 s on an idle machine takes several times that on 2 busy cores.
HUNG_RUN_SECONDS = 1200
RESULT_LINE = re.compile(r"^localhost \| (SUCCESS|CHANGED|FAILED!) => ", re.MULTILINE)

RECORDER = textwrap.dedent('''\
    """Record every task result and the stats of a run as JSON in $RECORD_RESULTS_FILE."""
    import json
    import os

    from ansible.plugins.callback import CallbackBase


    class CallbackModule(CallbackBase):
        CALLBACK_VERSION = 2.0
        CALLBACK_TYPE = "aggregate"
        CALLBACK_NAME = "record_results"
        CALLBACK_NEEDS_ENABLED = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.results = []

        def _record(self, status, result):
            self.results.append({"task": result.task.get_name(), "host": result.host.get_name(),
                                 "status": status, "result": result.result})

        def v2_runner_on_ok(self, result):
            self._record("ok", result)

        def v2_runner_on_failed(self, result, ignore_errors=False):
            self._record("failed", result)

        def v2_runner_on_skipped(self, result):
            self._record("skipped", result)

        def v2_runner_on_unreachable(self, result):
            self._record("unreachable", result)

        def v2_playbook_on_stats(self, stats):
            summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
            with open(os.environ["RECORD_RESULTS_FILE"], "w", encoding="utf-8") as handle:
                json.dump({"tasks": self.results, "stats": summary}, handle, default=str)
    ''')

# The role's result fact is saved in `always`, so a test sees what the role recorded before it failed.
ROLE_PLAY = """\
- name: Run the role under test
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/kubevirt_ops.rebalance.kubevirt_ops:
      kubeconfig: "{{ kubeconfig }}"
      context: "{{ context | default(omit) }}"
  tasks:
    - name: Run the role and keep its result fact for the test, also when it fails
      block:
        - name: Run the role
          ansible.builtin.include_role:
            name: kubevirt_ops.rebalance.%(role)s
      always:
        - name: Save the result fact
          ansible.builtin.copy:
            content: "{{ %(fact)s | default(None) | to_json }}"
            dest: "{{ ansible_run_result_file }}"
            mode: "0600"
          check_mode: false  # the test's own file, written in check mode too
          delegate_to: localhost
"""


@dataclass
class PlaybookRun:
    rc: int
    stdout: str
    stderr: str
    result: Optional[dict]  # the role's result fact (run_role), else None

    @property
    def failed(self) -> bool:
        return self.rc != 0


def ansible_env(workdir: Path, temp: str, **extra: str) -> dict:
    """The environment of an ansible command run for a test in `workdir`, with TMPDIR `temp` (a short path)."""
    return {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"), "ANSIBLE_HOME": str(workdir / "ansible"),
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
            "TMPDIR": temp, "PATH": "{0}:{1}".format(BIN, os.environ.get("PATH", "")), **extra}


def short_temp_dir(path: Path) -> str:
    """A short, stable stand-in for `path` to use as TMPDIR: kubernetes.core keeps its discovery cache there between
    runs, and ansible-core puts its RPC socket there, whose path must stay under ~100 bytes (pytest's and xdist's
    tmp paths are longer)."""
    short = Path(tempfile.gettempdir()) / "kvo-{0}".format(hashlib.sha1(str(path).encode()).hexdigest()[:12])
    short.mkdir(parents=True, exist_ok=True)
    return str(short)


def localhost_inventory(workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    inventory = workdir / "inventory"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter={0}\n".format(sys.executable))
    return inventory


def _run(command: list, workdir: Path, env: Optional[dict] = None, timeout: float = HUNG_RUN_SECONDS) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="ans-", ignore_cleanup_errors=True) as temp:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ansible_env(workdir, temp, **(env or {})), check=False)


def _assert_outcome(failed: bool, expect_failure: Optional[bool], process: subprocess.CompletedProcess) -> None:
    if expect_failure is not None:
        assert failed == expect_failure, "expected {0}:\n{1}\n{2}".format(
            "a failure" if expect_failure else "success", process.stdout, process.stderr)


def run_ansible_module(sim, module: str, args: dict, check: bool = False, diff: bool = False,
                       expect_failure: Optional[bool] = False) -> dict:
    """Run `module` once on localhost with `args` (kubeconfig defaults to the simulator's) and return its result,
    with the text printed before the result in `_output`. `expect_failure` True/False asserts the outcome;
    None accepts either."""
    workdir = Path(sim.kubeconfig).parent
    args = {"kubeconfig": sim.kubeconfig, **args}
    command = [str(BIN / "ansible"), "-i", str(localhost_inventory(workdir)), "localhost", "-m", module, "-a", json.dumps(args)]
    command += (["--check"] if check else []) + (["--diff"] if diff else [])
    process = _run(command, workdir)
    match = RESULT_LINE.search(process.stdout)
    assert match, "no module result:\n{0}\n{1}".format(process.stdout, process.stderr)
    result = json.loads(process.stdout[match.end():])
    result["_output"] = process.stdout[:match.start()]
    _assert_outcome(match.group(1) == "FAILED!", expect_failure, process)
    if expect_failure:
        assert process.returncode != 0 and result.get("msg"), process.stdout
    return result


def target_workdir(target) -> Path:
    """Where runs against `target` keep their files: a Cluster's `workdir` (a real kubeconfig sits among the user's
    files), else the folder of the simulator's kubeconfig."""
    return Path(getattr(target, "workdir", None) or Path(target.kubeconfig).parent)


def connection_vars(target, variables: Optional[dict]) -> dict:
    """`variables` with the target's `kubeconfig`, and its `context` when it has one, unless they set them."""
    defaults = {"kubeconfig": target.kubeconfig}
    if getattr(target, "context", None):
        defaults["context"] = target.context
    return {**defaults, **(variables or {})}


def playbook_command(target, playbook: Path, variables: Optional[dict], workdir: Path) -> list:
    """ansible-playbook for `playbook` on localhost against `target`, its extra vars (connection_vars) in a file under
    `workdir`, for callers that run it themselves (run_playbook, a test that interrupts it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    extra = workdir / "vars.json"
    extra.write_text(json.dumps(connection_vars(target, variables)))
    return [str(BIN / "ansible-playbook"), "-i", str(localhost_inventory(workdir)), str(playbook), "-e", "@" + str(extra)]


@contextmanager
def playbook_in_background(command: list, workdir: Path, log: Path, env: Optional[dict] = None) -> Iterator[subprocess.Popen]:
    """`command` (playbook_command) started in a session of its own, as a terminal's foreground process group, its
    output in `log` as it comes, with more environment `env`; killed at the end when it still runs."""
    with tempfile.TemporaryDirectory(prefix="ans-") as temp, open(log, "w", encoding="utf-8") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=ansible_env(workdir, temp, PYTHONUNBUFFERED="1", **(env or {})))
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


def interrupt(process: subprocess.Popen, timeout: float = 60, again_after: float = 15) -> int:
    """What a person does with Ctrl-C: SIGINT to the whole foreground process group, and once more when the run still
    goes on after `again_after` seconds (a first SIGINT that landed while ansible-playbook started a task was seen to
    leave it waiting, its log ending at the task's header); the exit status."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        return process.wait(timeout=again_after)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGINT)
        return process.wait(timeout=timeout)


def run_playbook(target, playbook: Path, variables: Optional[dict] = None, check: bool = False, expect_failure: Optional[bool] = False,
                 name: str = "run", options: tuple = (), env: Optional[dict] = None) -> PlaybookRun:
    """Run the playbook file `playbook` on localhost against `target` (a KubeSim or a support.cluster.Cluster) with
    `variables` as extra vars (the target's `kubeconfig` and `context` unless given), ansible-playbook `options` and
    more environment `env`. `expect_failure` True/False asserts the outcome; None accepts either."""
    workdir = target_workdir(target) / "ansible-runs" / name
    command = playbook_command(target, playbook, variables, workdir) + (["--check"] if check else []) + list(options)
    process = _run(command, workdir, env)
    _assert_outcome(process.returncode != 0, expect_failure, process)
    return PlaybookRun(process.returncode, process.stdout, process.stderr, None)


def run_role(target, role: str, variables: dict, check: bool = False, expect_failure: Optional[bool] = False, fact: Optional[str] = None,
             name: str = "run") -> PlaybookRun:
    """Run the collection's `role` against `target` (as run_playbook) with `variables` (extra vars) in a generated play
    with the connection in `module_defaults`; the run's `result` is the role's result fact (`<role>_result` unless
    `fact`), null when unset."""
    workdir = target_workdir(target) / "ansible-runs" / name
    workdir.mkdir(parents=True, exist_ok=True)
    playbook = workdir / "play.yml"
    playbook.write_text(ROLE_PLAY % {"role": role, "fact": fact or role + "_result"})
    result_file = workdir / "result.json"
    result_file.unlink(missing_ok=True)
    run = run_playbook(target, playbook, {"ansible_run_result_file": str(result_file), **variables}, check=check,
                       expect_failure=expect_failure, name=name)
    run.result = json.loads(result_file.read_text()) if result_file.exists() else None
    return run


def edit_policy_as_page(sim, tmp_path: Path, policy: str) -> subprocess.CompletedProcess:
    """`kubectl -n descheduler edit configmap descheduler`, as the page does, with an editor that writes
    `policy` into data.policy.yaml."""
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(policy)
    editor = tmp_path / "editor.py"
    editor.write_text(textwrap.dedent(f"""\
        import sys, yaml
        doc = yaml.safe_load(open(sys.argv[1]))
        doc["data"]["policy.yaml"] = open({str(policy_file)!r}).read()
        yaml.safe_dump(doc, open(sys.argv[1], "w"))
        """))
    return sim.kubectl("-n", "descheduler", "edit", "configmap", "descheduler", env={"EDITOR": f"{sys.executable} {editor}"})


@dataclass
class RecordedRun:
    """One ansible-playbook run: its exit code and output, and every task result the recorder saw."""
    returncode: int
    stdout: str
    stderr: str
    tasks: list
    stats: dict

    def results(self, task: str) -> list:
        """The results of the tasks whose name ends with `task` (roles prefix their name), in order."""
        return [t["result"] for t in self.tasks if t["task"] == task or t["task"].endswith(" : " + task)]

    def result(self, task: str) -> dict:
        found = self.results(task)
        assert found, f"task {task!r} did not run; ran {[t['task'] for t in self.tasks]}\n{self.stdout}"
        return found[-1]

    def fact(self, name: str):
        """The last value a task set for the fact `name` (set_fact or a module's ansible_facts)."""
        values = [t["result"]["ansible_facts"][name] for t in self.tasks if name in (t["result"].get("ansible_facts") or {})]
        assert values, f"no task set {name}:\n{self.stdout}"
        return values[-1]

    def failed(self) -> list:
        return [t for t in self.tasks if t["status"] == "failed"]

    def changed(self, host: str = "localhost") -> int:
        return self.stats.get(host, {}).get("changed", 0)


def run_tasks(sim, tasks: list, *, check: bool = False, diff: bool = False, extra_vars: dict | None = None,
              expect_failure: bool = False, context: str = "workload", timeout: float = HUNG_RUN_SECONDS) -> RecordedRun:
    """Write `tasks` into a one-play playbook on localhost whose module_defaults point this collection's group
    (and kubernetes.core's) at the simulator, run it with the venv's ansible-playbook, and return the recorded
    results. A list of plays (dicts with `hosts`) is written as given. Asserts the run passed, or with
    `expect_failure` that it failed."""
    work = Path(sim.kubeconfig).parent / "ansible"
    (work / "callback_plugins").mkdir(parents=True, exist_ok=True)
    (work / "callback_plugins" / "record_results.py").write_text(RECORDER)
    runs = sorted(work.glob("run-*.yml"))
    playbook = work / f"run-{len(runs):03d}.yml"
    record_file = playbook.with_suffix(".json")
    if tasks and all(isinstance(play, dict) and "hosts" in play for play in tasks):
        plays = tasks
    else:
        plays = [{"name": "Run against the simulator", "hosts": "localhost", "gather_facts": False,
                  "module_defaults": {"group/kubevirt_ops.rebalance.kubevirt_ops": {"kubeconfig": "{{ kubeconfig }}", "context": "{{ context }}"}},
                  "tasks": tasks}]
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    inventory = work / "inventory"
    inventory.write_text(f"localhost ansible_connection=local ansible_python_interpreter={sys.executable} "
                         f"kubeconfig={sim.kubeconfig} context={context}\n")
    short_temp = tempfile.mkdtemp(prefix="ans-")
    env = ansible_env(work, short_temp, ANSIBLE_CALLBACK_PLUGINS=str(work / "callback_plugins"), ANSIBLE_CALLBACKS_ENABLED="record_results",
                      ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_RETRY_FILES_ENABLED="0", RECORD_RESULTS_FILE=str(record_file))
    for key in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "ANSIBLE_CONFIG"):
        env.pop(key, None)
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)] + (["--check"] if check else []) + (["--diff"] if diff else [])
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    process = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, cwd=work, check=False)
    record = json.loads(record_file.read_text()) if record_file.exists() else {}
    shutil.rmtree(short_temp, ignore_errors=True)
    run = RecordedRun(process.returncode, process.stdout, process.stderr, record.get("tasks", []), record.get("stats", {}))
    if expect_failure:
        assert process.returncode != 0, f"ansible-playbook passed, a failure was expected:\n{process.stdout}"
    else:
        assert process.returncode == 0, f"ansible-playbook failed ({process.returncode}):\n{process.stdout}\n{process.stderr}"
    return run


def run_playbook_file(playbook, inventory: Path, workdir: Path, extra_vars: Optional[dict] = None, check: bool = False,
                      expect_failure: Optional[bool] = False, timeout: float = HUNG_RUN_SECONDS) -> subprocess.CompletedProcess:
    """Run one of the collection's playbooks (a path, or `kubevirt_ops.rebalance.<name>`) with `inventory`, from
    `workdir` (relative report and backup directories land there). `expect_failure` True/False asserts the
    outcome; None accepts either."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)] + (["--check"] if check else [])
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    # A short TMPDIR: ansible-core's local RPC server puts a Unix socket there (108-byte path limit).
    with tempfile.TemporaryDirectory(prefix="ap-") as temp:
        env = ansible_env(workdir, temp, PWD=str(workdir), ANSIBLE_RETRY_FILES_ENABLED="0")
        for key in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "ANSIBLE_CONFIG"):
            env.pop(key, None)
        process = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir, check=False)
    if expect_failure is not None:
        assert (process.returncode != 0) == expect_failure, "expected {0} ({1}):\n{2}\n{3}".format(
            "a failure" if expect_failure else "success", process.returncode, process.stdout[-20000:], process.stderr[-5000:])
    return process
