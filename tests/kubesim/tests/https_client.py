"""Requests to a simulator running in this process: JSON in and out, over TLS verified against the run's CA for a
Simulator, over plain HTTP for a bare KubeSimServer (raw_http.py), with an optional bearer token, client certificate,
Accept header or User-Agent; and kubectl with a kubeconfig written for a Simulator's run."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from kubesim.simulator import Simulator


@contextmanager
def started(scenario: str, workdir: Path | None = None, settle: bool = False) -> Iterator[Simulator]:
    """The Simulator of `scenario`, started; with `workdir`, a kubeconfig for it there (`kubeconfig_path`); with
    `settle`, once its controllers have done their start-up writes (the kubelet's Pod status) and have nothing queued."""
    simulator = Simulator(scenario).start()
    try:
        if settle:
            assert all(manager.wait_idle() for manager in simulator.managers.values())
        if workdir is not None:
            simulator.kubeconfig_path = str(workdir / "kubeconfig")
            simulator.write_kubeconfig(simulator.kubeconfig_path)
        yield simulator
    finally:
        simulator.stop()


def stored_since(sim, resource: str, start: int, cluster: str = "workload") -> list[tuple[str, dict]]:
    """(event type, object) of each write of `resource` (a store key: `configmaps`, `deployments.apps`) stored after
    resourceVersion `start`, as a watch from `start` replays them: what a dry run must not add to. Unlike the
    cluster's resourceVersion, writes of other resources (a controller's) do not count."""
    store = sim.clusters[cluster].store
    watcher = store.watch(resource, None, lambda _obj: True, since_rv=start)
    store.stop_watch(watcher)   # ends the replay with None
    return [(event.type, event.obj) for event in iter(watcher.events.get_nowait, None)]


def call(sim, method: str, path: str, body: Any = None, content_type: str = "application/json", *,
         token: str | None = None, pair=None, accept: str | None = None, user_agent: str | None = None,
         context=None) -> tuple[int, Any]:
    """The status and body (JSON parsed, other types as text) of one request to `sim` (a Simulator, or a plain
    KubeSimServer); `pair` is a client certificate of the run, `context` an SSL context that replaces the run's."""
    headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {token}"} if token else {}),
               **({"Accept": accept} if accept else {}), **({"User-Agent": user_agent} if user_agent else {})}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(sim.url + path, data=data, method=method, headers=headers)
    if context is None and isinstance(sim, Simulator):
        context = sim.client_context(pair)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, _body(response)
    except urllib.error.HTTPError as err:
        return err.code, _body(err)


def _body(response) -> Any:
    raw = response.read()
    return json.loads(raw or b"null") if "json" in (response.headers.get("Content-Type") or "") else raw.decode()


def kubectl_run(sim, *args: str) -> subprocess.CompletedProcess:
    """kubectl with the run's kubeconfig (started with a workdir), whatever its exit code."""
    return subprocess.run(["kubectl", "--kubeconfig", sim.kubeconfig_path, *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "KUBECACHEDIR": os.path.dirname(sim.kubeconfig_path)},
                          check=False)


def kubectl(sim, *args: str) -> str:
    """kubectl's standard output with the run's kubeconfig (started with a workdir); fails the test on an error."""
    result = kubectl_run(sim, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout
