"""What runs in the descheduler's containers: a `cluster.programs` entry (see controllers/kubelet.py) that
claims every started Pod with a container whose arguments include `--policy-config-file=...` (or
`--policy-config-file <path>`), as the ACP package's CronJob, a Job created from it, or its Deployment run
the descheduler image.

- At container start the process reads its flags and the policy file. The file comes from the ConfigMap
  volume mounted at the file's directory (or mounted with `subPath` at the file itself): the key is the
  file name, or the `items` entry whose `path` is the file name. Missing ConfigMap or key: `failed to read
  policy config file "<path>": open <path>: no such file or directory`.
- A policy that fails to decode or validate ends the process with exit code 1 after the two upstream error
  lines (`"failed to run descheduler server" err=...`, `"command failed" err=...`), so `kubectl logs` shows the
  upstream message; a flag error prints `Error: <message>`.
- Otherwise one cycle runs a simulated second after the start; with `--descheduling-interval` a cycle runs
  every interval while the Pod lives (the process, and its EvictionsInBackground memory, lives as long as the
  container), without it the process exits 0 after the cycle.
- The policy is read once per process, as upstream's `Run` (pkg/descheduler/descheduler.go) calls
  `LoadPolicyConfig` before its `--descheduling-interval` loop and every cycle runs that policy: a change of the
  ConfigMap reaches a Deployment's cycles only through a Pod created after it (the ReplicaSet's replacement of a
  deleted Pod) or a restarted container. A deleted Pod's process runs no further cycle (upstream: SIGTERM cancels
  the loop's context).
- Exit: a Job Pod (`restartPolicy` Never or OnFailure) ends with `controllers.kubelet.finish_pod` (Succeeded for
  exit code 0, Failed for 1; the Job controller retries); a Deployment Pod's container (`Always`) is started
  again after the kubelet's back-off (10 s doubling to 300 s, simulated) with `restartCount` increased,
  re-reading the ConfigMap: a new process.
- The log lines go to the container's log (`cluster.append_log`), filtered by `--v`.
- A process whose policy enables the metrics collector collects node metrics at its start and, while a
  long-running process lives, every 5 simulated seconds (metricscollector.py).
- Each process breaks ties among equally ranked Pods and nodes in its own random order (upstream: map
  order). `KUBESIM_DESCHEDULER_SEED` (or `DeschedulerProgram.seed`) seeds it, per Pod and start, so a run
  repeats; unset, every process draws a fresh order.

Simplified: OnFailure Pods are not restarted in place (as the simulated Job controller treats OnFailure like
Never); no usage text on flag errors; the kubelet would not start a Pod whose ConfigMap is missing
(here the process starts and fails to read the file); the restarted container's log is appended to the
same log (no `--previous`)."""
from __future__ import annotations

import copy
import os
import posixpath

from ..api import now_iso
from ..controllers.kubelet import finish_pod
from ..errors import ApiError
from .klog import Logger
from .metricscollector import COLLECT_SECONDS
from .run import ArgsError, Descheduler, container_args, parse_args, start

POLICY_FLAG = "--policy-config-file"
START_SECONDS = 1.0
BACKOFF_START, BACKOFF_MAX = 10.0, 300.0


def descheduler_container(pod: dict) -> dict | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        argv = container_args(container)
        if any(str(arg) == POLICY_FLAG or str(arg).startswith(POLICY_FLAG + "=") for arg in argv):
            return container
    return None


def read_policy(cluster, pod: dict, container: dict, path: str) -> tuple[str | None, str | None]:
    """(text, error) of the policy file as the container sees it."""
    missing = f'failed to read policy config file "{path}": open {path}: no such file or directory'
    directory, filename = posixpath.split(path)
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        mount_path = str(mount.get("mountPath", "")).rstrip("/") or "/"
        if mount.get("subPath"):
            if mount_path != path:
                continue
            key_path = mount["subPath"]
        elif mount_path == (directory.rstrip("/") or "/"):
            key_path = filename
        else:
            continue
        source = (volumes.get(mount.get("name")) or {}).get("configMap")
        if not source:
            continue
        configmaps = cluster.registry.by_key("configmaps")
        configmap = cluster.find(configmaps, pod["metadata"]["namespace"], source.get("name", ""))
        if configmap is None:
            return None, missing
        key = key_path
        if source.get("items"):
            key = next((item.get("key") for item in source["items"] if item.get("path") == key_path), None)
        data = configmap.get("data") or {}
        if key is None or key not in data:
            return None, missing
        return str(data[key]), None
    return None, missing


class DeschedulerProgram:
    """The descheduler binary, for every Pod that runs it in one cluster."""

    def __init__(self, cluster, manager):
        self.cluster = cluster
        self.manager = manager
        self.processes: dict[str, Descheduler] = {}   # by Pod UID: one process per running container
        self.backoff: dict[str, float] = {}
        self.seed = os.environ.get("KUBESIM_DESCHEDULER_SEED")
        self.starts = 0

    def _process_seed(self, pod: dict) -> str | None:
        self.starts += 1
        if self.seed is None:
            return None
        return f"{self.seed}:{pod['metadata']['namespace']}/{pod['metadata']['name']}:{self.starts}"

    # ------------------------------------------------------------------------------------- kubelet hook
    def __call__(self, pod: dict) -> bool:
        container = descheduler_container(pod)
        if container is None:
            return False
        self._start_process(pod, container)
        return True

    def _alive(self, namespace: str, name: str, uid: str) -> dict | None:
        pods = self.cluster.registry.by_key("pods")
        pod = self.cluster.find(pods, namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp") or \
                (pod.get("status") or {}).get("phase") != "Running":
            return None
        return pod

    def _start_process(self, pod: dict, container: dict) -> None:
        meta = pod["metadata"]
        ident = (meta["namespace"], meta["name"], meta["uid"], container["name"])
        user = f"system:serviceaccount:{meta['namespace']}:{(pod.get('spec') or {}).get('serviceAccountName') or 'default'}"
        try:
            options = parse_args(container_args(container))
        except ArgsError as err:
            self._log(ident, [f"Error: {err.message}"])
            self._after(START_SECONDS, lambda: self._exit(ident, 1))
            return
        log = Logger(options.verbosity)
        text, error = read_policy(self.cluster, pod, container, options.policy_file or "")
        with self.cluster.lock:
            process = start(self.cluster, options, text, log, user, read_error=error, seed=self._process_seed(pod))
        self._log(ident, log.take())
        if isinstance(process, int):
            self._after(START_SECONDS, lambda: self._exit(ident, process))
            return
        self.processes[meta["uid"]] = process
        self._after(START_SECONDS, lambda: self._cycle(ident))
        if process.providers.collector is not None and process.options.interval > 0:
            self._after(COLLECT_SECONDS, lambda: self._collect(ident))

    def _collect(self, ident: tuple[str, str, str, str]) -> None:
        """The metrics collector's 5 s loop, while the process lives (a CronJob's ends after its one cycle)."""
        namespace, name, uid, _container = ident
        process = self.processes.get(uid)
        if process is None or self._alive(namespace, name, uid) is None:
            return
        process.providers.collector.collect()
        self._log(ident, process.log.take())
        self._after(COLLECT_SECONDS, lambda: self._collect(ident))

    def _cycle(self, ident: tuple[str, str, str, str]) -> None:
        namespace, name, uid, _container = ident
        process = self.processes.get(uid)
        if process is None or self._alive(namespace, name, uid) is None:
            self.processes.pop(uid, None)
            return
        process.run_cycle()
        self._log(ident, process.log.take())
        if process.options.interval > 0:
            self._after(process.options.interval, lambda: self._cycle(ident))
        else:
            self._exit(ident, 0)

    def _exit(self, ident: tuple[str, str, str, str], code: int) -> None:
        namespace, name, uid, container_name = ident
        self.processes.pop(uid, None)
        pod = self._alive(namespace, name, uid)
        if pod is None:
            return
        if (pod.get("spec") or {}).get("restartPolicy", "Always") == "Always":
            delay = self.backoff.get(uid, BACKOFF_START / 2) * 2
            self.backoff[uid] = min(delay, BACKOFF_MAX)
            self._record_exit(pod, container_name, code)
            self._after(self.backoff[uid], lambda: self._restart(ident))
            return
        self.backoff.pop(uid, None)
        finish_pod(self.cluster, namespace, name, code, uid=uid)

    def _record_exit(self, pod: dict, container_name: str, code: int) -> None:
        pods = self.cluster.registry.by_key("pods")
        updated = copy.deepcopy(pod)
        now = now_iso()
        for status in (updated.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != container_name:
                continue
            started = ((status.get("state") or {}).get("running") or {}).get("startedAt", now)
            status["lastState"] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                                  "startedAt": started, "finishedAt": now}}
            status["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
            status["ready"] = False
            status["restartCount"] = int(status.get("restartCount", 0)) + 1
        try:
            self.cluster.update(pods, pod["metadata"]["namespace"], pod["metadata"]["name"], updated,
                                subresource="status")
        except ApiError:
            pass

    def _restart(self, ident: tuple[str, str, str, str]) -> None:
        namespace, name, uid, container_name = ident
        pod = self._alive(namespace, name, uid)
        if pod is None:
            return
        pods = self.cluster.registry.by_key("pods")
        updated = copy.deepcopy(pod)
        for status in (updated.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") == container_name:
                status["state"] = {"running": {"startedAt": now_iso()}}
                status["ready"] = True
        try:
            pod = self.cluster.update(pods, namespace, name, updated, subresource="status")
        except ApiError:
            return
        container = next((c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == container_name),
                         None)
        if container is not None:
            self._start_process(pod, container)

    # ---------------------------------------------------------------------------------------- helpers
    def _after(self, seconds: float, action) -> None:
        self.manager.after_simulated(seconds, action)

    def _log(self, ident: tuple[str, str, str, str], lines: list[str]) -> None:
        if lines:
            self.cluster.append_log(ident[0], ident[1], ident[3], lines)


def register(cluster, manager) -> None:
    if cluster.registry.by_key("pods") is None or cluster.registry.by_key("configmaps") is None:
        return
    cluster.programs.append(DeschedulerProgram(cluster, manager))
