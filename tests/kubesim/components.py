"""The behaviour plugged into every cluster, in order. Each entry is a `register(cluster, manager)` that
adds controllers (`manager.add`), admission hooks (`cluster.admission_hooks`), eviction guards
(`cluster.eviction_guards`) or subresource handlers (`cluster.subresources`). A component whose kinds a
cluster does not serve registers nothing there."""
from __future__ import annotations

from . import subresources
from .controllers import garbage_collector, kubelet, namespace, scheduler

COMPONENTS = [
    subresources.register,
    garbage_collector.register,
    namespace.register,
    scheduler.register,
    kubelet.register,
]
