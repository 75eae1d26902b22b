"""Fixtures that run the simulator (`tests/kubesim/kubesim serve`) as a separate process, as users and CI
do, and give tests its URL, kubeconfig, admin endpoint and a kubectl runner."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tests" / "kubesim" / "kubesim"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

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


@dataclass
class KubeSim:
    """A running simulator: its URL, kubeconfig, admin calls and a kubectl runner."""
    url: str
    kubeconfig: str
    home: Path
    process: subprocess.Popen
    env: dict = field(default_factory=dict)

    # ------------------------------------------------------------------------------------ admin API
    def admin(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}/_kubesim/{path.lstrip('/')}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def counters(self, cluster: str = "workload") -> dict:
        return self.admin("GET", f"counters?cluster={cluster}")[cluster]["requests"]

    def reset_counters(self) -> None:
        self.admin("DELETE", "counters")

    def add_fault(self, **rule) -> dict:
        return self.admin("POST", "faults", rule)

    def clear_faults(self) -> None:
        self.admin("DELETE", "faults")

    def settle(self, timeout: float = 10) -> None:
        assert self.admin("GET", f"settle?timeout={timeout}")["idle"]

    # -------------------------------------------------------------------------------------- kubectl
    def kubectl(self, *args: str, input: str | None = None, check: bool = True, context: str | None = None,
                env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        command = ["kubectl", *(["--context", context] if context else []), *args]
        result = subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout,
                                env={**self.env, **(env or {})}, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    def kubectl_json(self, *args: str, context: str | None = None) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json", context=context).stdout)


def start_kubesim(scenario: str, workdir: Path) -> KubeSim:
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = workdir / "kubeconfig"
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    process = subprocess.Popen([str(LAUNCHER), "serve", "--scenario", scenario, "--kubeconfig", str(kubeconfig)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "KUBESIM_PYTHON": sys.executable})
    line = process.stdout.readline().strip()
    if not line.startswith("ready "):
        process.kill()
        raise RuntimeError(f"kubesim did not start: {line!r}\n{process.stderr.read()}")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home), "KUBECACHEDIR": str(workdir / "cache")}
    env.pop("KUBECTL_EXTERNAL_DIFF", None)
    return KubeSim(url=line.split(" ", 1)[1], kubeconfig=str(kubeconfig), home=home, process=process, env=env)


def stop_kubesim(sim: KubeSim) -> None:
    sim.process.send_signal(signal.SIGTERM)
    try:
        sim.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        sim.process.kill()
        sim.process.wait()


@pytest.fixture(scope="module")
def kubesim_factory(tmp_path_factory):
    """Start simulators for named scenarios; all are stopped at the end of the module."""
    started: list[KubeSim] = []

    def start(scenario: str) -> KubeSim:
        sim = start_kubesim(scenario, tmp_path_factory.mktemp(scenario))
        started.append(sim)
        return sim
    yield start
    for sim in started:
        stop_kubesim(sim)


@pytest.fixture(scope="module")
def two_workers(kubesim_factory) -> KubeSim:
    """The `api-basics` scenario (two workers, plain Pods), shared by the tests of one module."""
    return kubesim_factory("api-basics")


@pytest.fixture
def fresh_two_workers(tmp_path) -> KubeSim:
    """A simulator of its own for a test that changes the cluster in ways others must not see."""
    sim = start_kubesim("api-basics", tmp_path / "sim")
    yield sim
    stop_kubesim(sim)


def kubectl_available() -> bool:
    return shutil.which("kubectl") is not None


# ---------------------------------------------------------------------------------------- playbooks
@dataclass
class PlaybookRun:
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


def run_playbook(sim: KubeSim, tasks: list, *, check: bool = False, diff: bool = False, extra_vars: dict | None = None,
                 expect_failure: bool = False, context: str = "workload", timeout: float = 300) -> PlaybookRun:
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
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"), "ANSIBLE_HOME": str(work / "home"),
           "ANSIBLE_CALLBACK_PLUGINS": str(work / "callback_plugins"), "ANSIBLE_CALLBACKS_ENABLED": "record_results",
           "ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "0",
           "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_LOCAL_TEMP": str(work / "tmp"), "RECORD_RESULTS_FILE": str(record_file),
           # kubernetes.core caches discovery in the temp dir; keep it per simulator
           "TMPDIR": str(work), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    for key in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "ANSIBLE_CONFIG"):
        env.pop(key, None)
    command = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook)] + (["--check"] if check else []) + (["--diff"] if diff else [])
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    process = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, cwd=work, check=False)
    record = json.loads(record_file.read_text()) if record_file.exists() else {}
    run = PlaybookRun(process.returncode, process.stdout, process.stderr, record.get("tasks", []), record.get("stats", {}))
    if expect_failure:
        assert process.returncode != 0, f"ansible-playbook passed, a failure was expected:\n{process.stdout}"
    else:
        assert process.returncode == 0, f"ansible-playbook failed ({process.returncode}):\n{process.stdout}\n{process.stderr}"
    return run
