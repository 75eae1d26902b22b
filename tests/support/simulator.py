"""The simulator as a separate process (`tests/kubesim/kubesim serve`), as users and CI run it: its URL,
kubeconfig, CA, admin endpoint, raw HTTPS requests and a kubectl runner, and the setup blocks the integration
tests share."""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Iterator

import yaml

from .waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tests" / "kubesim" / "kubesim"
# The simulator's admin bearer token (tests/kubesim/kubeconfig.py TOKEN): `kubernetes-admin` in `system:masters`.
ADMIN_TOKEN = "kubesim-admin-token"


@dataclass
class KubeSim:
    """A running simulator: its URL, kubeconfig, CA file (None over plain HTTP), raw requests, admin calls and a
    kubectl runner."""
    url: str
    kubeconfig: str
    home: Path
    process: subprocess.Popen
    env: dict = field(default_factory=dict)
    ca_file: str | None = None

    # --------------------------------------------------------------------------------- raw requests
    @cached_property
    def ssl_context(self) -> ssl.SSLContext | None:
        """Verifies the simulator's serving certificate against the run's CA."""
        return ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None

    def request(self, method: str, path: str, data: bytes | None = None, headers: dict | None = None,
                token: str | None = ADMIN_TOKEN, timeout: float = 30):
        """`urlopen` of `path` on the simulator (an open response; HTTPError for 4xx/5xx), as the admin, or with
        another bearer `token` (None: anonymous)."""
        headers = {"Content-Type": "application/json", **(headers or {})}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        return urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context)

    def request_json(self, method: str, path: str, body=None, **options):
        """`request` with a JSON body, answering the decoded JSON."""
        data = json.dumps(body).encode() if body is not None else None
        with self.request(method, path, data, **options) as response:
            return json.loads(response.read())

    # ------------------------------------------------------------------------------------ admin API
    def admin(self, method: str, path: str, body: dict | None = None) -> dict:
        return self.request_json(method, f"/_kubesim/{path.lstrip('/')}", body)

    def info(self) -> dict:
        """Scenario, URLs and the paths of the kubeconfig and of the PEM files (`credentials`)."""
        return self.admin("GET", "info")

    def counters(self, cluster: str = "workload") -> dict:
        return self.admin("GET", f"counters?cluster={cluster}")[cluster]["requests"]

    def reset_counters(self) -> None:
        self.admin("DELETE", "counters")

    def wait_for_watches(self, wanted: dict, timeout: float = 60) -> None:
        """Wait until at least `wanted[resource]` watch requests of each resource (plural) came since the counters were
        reset: the watchers started before are listening, so what the test changes next reaches them however busy the
        machine is (instead of a sleep that guesses how long they take to start)."""
        def opened() -> bool:
            counters = self.counters()
            return all(counters.get("watch " + resource, 0) >= count for resource, count in wanted.items())
        wait_for(opened, timeout=timeout, what=f"the watches {wanted} to be open")

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


def start_kubesim(scenario: str, workdir: Path, plain_http: bool = False) -> KubeSim:
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = workdir / "kubeconfig"
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    command = [str(LAUNCHER), "serve", "--scenario", scenario, "--kubeconfig", str(kubeconfig)]
    process = subprocess.Popen(command + (["--plain-http"] if plain_http else []),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "KUBESIM_PYTHON": sys.executable})
    line = process.stdout.readline().strip()
    if not line.startswith("ready "):
        process.kill()
        raise RuntimeError(f"kubesim did not start: {line!r}\n{process.stderr.read()}")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home), "KUBECACHEDIR": str(workdir / "cache")}
    env.pop("KUBECTL_EXTERNAL_DIFF", None)
    url = line.split(" ", 1)[1]
    # the CA is written next to the kubeconfig (tests/kubesim/README.md, "Running it")
    ca_file = str(workdir / "ca.crt") if url.startswith("https://") else None
    return KubeSim(url=url, kubeconfig=str(kubeconfig), home=home, process=process, env=env, ca_file=ca_file)


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


def suspended_cronjob(scenario: str, cluster: str = "workload") -> dict:
    """The scenario's Descheduler CronJob with `suspend: true`, for `objects`: set in the scenario itself, so no run
    starts between two snapshots (a kubectl patch would be recorded by ACP as a ResourcePatch)."""
    document = yaml.safe_load((ROOT / "tests" / "kubesim" / "scenarios" / "{0}.yaml".format(scenario)).read_text())
    objects = ((document.get("clusters") or {}).get(cluster) or {}).get("objects") or []
    found = [o for o in objects if o.get("kind") == "CronJob"]
    if not found:   # the scenario it extends has it
        return suspended_cronjob(document["extends"], cluster)
    cronjob = copy.deepcopy(found[-1])
    cronjob["spec"]["suspend"] = True
    return cronjob


def with_descheduler_suspended(workdir: Path, scenario: str) -> str:
    """A scenario file extending `scenario` whose Descheduler CronJob starts suspended, so that no scheduled run happens
    before the test is ready (`suspend=True` patches it after the start, when a first run may have begun)."""
    path = Path(workdir) / "{0}-suspended.yaml".format(scenario)
    path.write_text(yaml.safe_dump({"extends": scenario, "name": "{0}-suspended".format(scenario),
                                    "clusters": {"workload": {"objects": [suspended_cronjob(scenario)]}}}))
    return str(path)


@contextmanager
def running_kubesim(scenario: str, workdir: Path, suspend: bool = False, settle: bool = False,
                    plain_http: bool = False) -> Iterator[KubeSim]:
    """A simulator for `scenario` in `workdir`, stopped on exit; `suspend` suspends its descheduler CronJob, then
    `settle` waits until its controllers are idle; `plain_http` serves HTTP instead of HTTPS."""
    sim = start_kubesim(scenario, workdir, plain_http)
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
    try:
        sim.request("POST", "/api/v1/namespaces/{0}/pods/{1}/eviction".format(namespace, pod), json.dumps(body).encode()).close()
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
