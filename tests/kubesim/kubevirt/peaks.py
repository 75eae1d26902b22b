"""Test instrumentation, not a KubeVirt behaviour: the peak number of migrations running at the same time,
in the cluster and per source node, so that tests and benchmarks can prove that a client kept within
`parallelMigrationsPerCluster` / `parallelOutboundMigrationsPerNode`.

"Running" is what the limits count (`RUNNING_MIGRATION_PHASES`: Scheduling to Running, a target Pod exists).
The source node is `status.migrationState.sourceNode`, else the `kubevirt.io/evacuationMigration`
annotation, else the VMI's node when the migration starts. Also the peak of VMIs marked for evacuation
(`status.evacuationNodeName`) at the same time per node: what a drain asks for at once, which KubeVirt then
queues. Served under `/_kubesim/counters` as `migrations: {running, running_per_node, peak, peak_per_node,
started, marked_peak_per_node}`; a counter reset sets the peaks to what runs now."""
from __future__ import annotations

import threading

from ..controllers import Controller
from ..store import DELETED, Event
from .common import EVACUATION_MIGRATION_ANNOTATION, RUNNING_MIGRATION_PHASES, VMI, VMIM, annotations, find, meta, serves, status


class MigrationPeaks(Controller):
    keys = (VMIM, VMI)

    def __init__(self, cluster):
        super().__init__(cluster)
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], str] = {}   # (ns, vmim) -> source node
        self._peak = 0
        self._peak_per_node: dict[str, int] = {}
        self._started = 0
        self._marked: dict[tuple[str, str], str] = {}    # (ns, vmi) -> evacuation node
        self._marked_peak: dict[str, int] = {}

    def on_event(self, event: Event) -> None:
        obj = event.obj
        ident = (event.namespace, meta(obj).get("name", ""))
        if event.key == VMI:
            node = status(obj).get("evacuationNodeName") if event.type != DELETED else None
            with self._lock:
                if not node:
                    self._marked.pop(ident, None)
                elif self._marked.get(ident) != node:
                    self._marked[ident] = node
                    self._record()
            return
        running = event.type != DELETED and status(obj).get("phase") in RUNNING_MIGRATION_PHASES
        with self._lock:
            if not running:
                self._running.pop(ident, None)
                return
            if ident in self._running:
                return
            self._running[ident] = self._source(obj, event.namespace)
            self._started += 1
            self._record()

    def _source(self, migration: dict, namespace: str) -> str:
        node = (status(migration).get("migrationState") or {}).get("sourceNode") or \
            annotations(migration).get(EVACUATION_MIGRATION_ANNOTATION)
        if not node:
            vmi = find(self.cluster, VMI, namespace, (migration.get("spec") or {}).get("vmiName", ""))
            node = status(vmi).get("nodeName", "") if vmi else ""
        return node or ""

    def _record(self) -> None:
        self._peak = max(self._peak, len(self._running))
        per_node: dict[str, int] = {}
        for node in self._running.values():
            per_node[node] = per_node.get(node, 0) + 1
        for node, count in per_node.items():
            self._peak_per_node[node] = max(self._peak_per_node.get(node, 0), count)
        marked: dict[str, int] = {}
        for node in self._marked.values():
            marked[node] = marked.get(node, 0) + 1
        for node, count in marked.items():
            self._marked_peak[node] = max(self._marked_peak.get(node, 0), count)

    def report(self) -> dict:
        with self._lock:
            per_node: dict[str, int] = {}
            for node in self._running.values():
                per_node[node] = per_node.get(node, 0) + 1
            return {"running": len(self._running), "running_per_node": dict(sorted(per_node.items())),
                    "peak": self._peak, "peak_per_node": dict(sorted(self._peak_per_node.items())), "started": self._started,
                    "marked_peak_per_node": dict(sorted(self._marked_peak.items()))}

    def reset(self) -> None:
        with self._lock:
            self._peak, self._peak_per_node, self._started, self._marked_peak = 0, {}, 0, {}
            self._record()


def register(cluster, manager) -> None:
    if serves(cluster, VMI, VMIM):
        peaks = MigrationPeaks(cluster)
        manager.add(peaks)
        cluster.migration_peaks = peaks
