"""The behaviour plugged into every cluster, in order. Each entry is a `register(cluster, manager)` that
adds controllers (`manager.add`), admission hooks (`cluster.admission_hooks`), eviction guards
(`cluster.eviction_guards`) or subresource handlers (`cluster.subresources`). A component whose kinds a
cluster does not serve registers nothing there."""
from __future__ import annotations

from . import subresources
from .controllers import garbage_collector, kubelet, namespace, scheduler, serviceaccounts
from .acp import chart as acp_chart, resourcepatch as acp_resourcepatch
from .controllers import disruption
from .controllers import cronjobs, daemonsets, deployments, jobs, replicasets, statefulsets, volumes
from .descheduler import program as descheduler_program
from . import kubevirt

COMPONENTS = [
    subresources.register,
    garbage_collector.register,
    namespace.register,
    serviceaccounts.register,
    scheduler.register,
    kubelet.register,
    jobs.register, cronjobs.register, deployments.register, replicasets.register, daemonsets.register,
    statefulsets.register,
    volumes.register,
    acp_chart.register,
    acp_resourcepatch.register,
    disruption.register,
    descheduler_program.register,
    kubevirt.register,
]
