"""Counting live migrations over many Descheduler runs. KubeVirt keeps only the five newest finished migrations of a
VMI, so a test that runs more cycles than that watches the VirtualMachineInstanceMigrations while they happen
(`MigrationWatch`, the Python client's watch from a list's resourceVersion, in a thread) and reads the moves from
every version it saw (`moves`), then measures how soon a VM moved again (`gaps`)."""
from __future__ import annotations

import datetime
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional

from kubernetes import client, config, watch

from support.waiting import wait_for

GROUP, VERSION, PLURAL = "kubevirt.io", "v1", "virtualmachineinstancemigrations"
FINAL_PHASES = ("Succeeded", "Failed")


def parse_time(value: Optional[str]) -> Optional[datetime.datetime]:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def phase_time(vmim: dict, phase: str) -> Optional[datetime.datetime]:
    """When the migration entered `phase` (its status.phaseTransitionTimestamps)."""
    for item in (vmim.get("status") or {}).get("phaseTransitionTimestamps") or []:
        if item.get("phase") == phase:
            return parse_time(item.get("phaseTransitionTimestamp"))
    return None


@dataclass(frozen=True)
class Move:
    """One migration of a VM, from what the watch saw last of it."""
    vm: str
    name: str
    phase: str
    source: Optional[str]
    target: Optional[str]
    started: datetime.datetime  # created (KubeVirt's Pending transition at the same second)
    ended: Optional[datetime.datetime]  # the Succeeded or Failed transition

    @classmethod
    def of(cls, vmim: dict) -> "Move":
        status = vmim.get("status") or {}
        state = status.get("migrationState") or {}
        phase = status.get("phase") or ""
        return cls(vm=vmim["spec"]["vmiName"], name=vmim["metadata"]["name"], phase=phase, source=state.get("sourceNode"),
                   target=state.get("targetNode"), started=phase_time(vmim, "Pending") or parse_time(vmim["metadata"]["creationTimestamp"]),
                   ended=phase_time(vmim, phase) if phase in FINAL_PHASES else None)


class MigrationWatch:
    """The migrations of `namespace` created while it watches: a list, then a watch from its resourceVersion (again
    from a new list when the server ends it), keeping the last version of each migration, also of the ones KubeVirt
    deletes. The migrations the first list found are older and left out."""

    def __init__(self, sim, namespace: str) -> None:
        self.api = client.CustomObjectsApi(config.new_client_from_config(config_file=sim.kubeconfig, context="workload"))
        self.namespace = namespace
        self.seen: Dict[str, dict] = {}
        self.older: set = set()
        self.started = ""  # the first list's resourceVersion
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.watch: Optional[watch.Watch] = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "MigrationWatch":
        self.started = self._list()
        self.older = set(self.seen)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        if self.watch:
            self.watch.stop()
        self.thread.join(timeout=10)

    def _keep(self, vmim: dict) -> None:
        with self.lock:
            self.seen[vmim["metadata"]["uid"]] = vmim

    def _list(self) -> str:
        listed = self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        for vmim in listed["items"]:
            self._keep(vmim)
        return listed["metadata"]["resourceVersion"]

    def _run(self) -> None:
        version = self.started
        while not self.stopping.is_set():
            self.watch = watch.Watch()
            try:
                for event in self.watch.stream(self.api.list_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL,
                                               resource_version=version, timeout_seconds=5):
                    if event["type"] == "ERROR":  # 410 Gone: list again
                        break
                    self._keep(event["object"])
                    version = event["object"]["metadata"]["resourceVersion"]
                else:
                    continue
                version = self._list()
            except Exception:  # pylint: disable=broad-exception-caught  # the simulator stopped, or the connection dropped
                if self.stopping.is_set():
                    return
                version = self._list()

    def objects(self) -> List[dict]:
        with self.lock:
            return [vmim for uid, vmim in self.seen.items() if uid not in self.older]

    def moves(self, phase: str = "Succeeded") -> Dict[str, List[Move]]:
        """VM name -> its migrations that ended in `phase`, oldest first."""
        found: Dict[str, List[Move]] = {}
        for vmim in self.objects():
            move = Move.of(vmim)
            if move.phase == phase:
                found.setdefault(move.vm, []).append(move)
        return {vm: sorted(items, key=lambda m: (m.started, m.ended, m.name)) for vm, items in found.items()}

    def wait_final(self, at_least: int = 0, timeout: float = 30) -> None:
        """Until the watch saw `at_least` migrations in all and every one is Succeeded or Failed (a run's evictions become
        migrations a moment after the run, which `at_least` waits for)."""
        def final() -> bool:
            seen = self.objects()
            return len(seen) >= at_least and all((m.get("status") or {}).get("phase") in FINAL_PHASES for m in seen)
        wait_for(final, timeout=timeout, interval=0.1, what="{0} migrations, each Succeeded or Failed".format(at_least))


def gaps(moves: List[Move]) -> List[float]:
    """Seconds from the end of each move to the start of the VM's next one (whole seconds, as KubeVirt writes them)."""
    return [(later.started - earlier.ended).total_seconds() for earlier, later in zip(moves, moves[1:])]
