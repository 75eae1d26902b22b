"""Fixtures that run the simulator (`tests/kubesim/kubesim serve`) as a separate process, as users and CI
do, and give tests its URL, kubeconfig, admin endpoint and a kubectl runner."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tests" / "kubesim" / "kubesim"


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
