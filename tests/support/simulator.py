"""The simulator as a separate process (`tests/kubesim/kubesim serve`), as users and CI run it: its URL,
kubeconfig, admin endpoint and a kubectl runner, and the setup blocks the integration tests share."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

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

    @contextmanager
    def without_faults(self) -> Iterator[KubeSim]:
        """For one test on a shared simulator: no faults and zeroed counters before it, no faults after it."""
        self.clear_faults()
        self.reset_counters()
        try:
            yield self
        finally:
            self.clear_faults()

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


def suspend_descheduler(sim: KubeSim) -> None:
    """Suspend the scenario's descheduler CronJob (it runs every 6 s), so that only the test moves Pods."""
    sim.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge", "-p", '{"spec":{"suspend":true}}')


@contextmanager
def running_kubesim(scenario: str, workdir: Path, suspend: bool = False, settle: bool = False) -> Iterator[KubeSim]:
    """A simulator for `scenario` in `workdir`, stopped on exit; `suspend` suspends its descheduler CronJob, then
    `settle` waits until its controllers are idle."""
    sim = start_kubesim(scenario, workdir)
    try:
        if suspend:
            suspend_descheduler(sim)
        if settle:
            sim.settle()
        yield sim
    finally:
        stop_kubesim(sim)


def evict(sim: KubeSim, namespace: str, pod: str) -> None:
    """POST an Eviction for a virt-launcher Pod as the admin; KubeVirt answers 429 and live-migrates the VM instead."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
    request = urllib.request.Request("{0}/api/v1/namespaces/{1}/pods/{2}/eviction".format(sim.url, namespace, pod),
                                     data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError as error:
        assert error.code == 429, error.read()


def kubectl_available() -> bool:
    return shutil.which("kubectl") is not None


def columns(output: str) -> list[dict]:
    """The rows of a kubectl table (`get` without -o, or custom-columns) as dicts by header."""
    lines = output.strip().splitlines()
    if not lines:
        return []
    header = lines[0].split()
    return [dict(zip(header, line.split())) for line in lines[1:]]
