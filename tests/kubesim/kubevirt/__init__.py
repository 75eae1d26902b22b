"""KubeVirt (v1.8) and its HyperConverged operator, simulated: what happens to VirtualMachines,
VirtualMachineInstances and their virt-launcher Pods, and how an eviction becomes a live migration.

One module per hook or controller, each with a `register(cluster, manager)` that registers nothing when
the cluster does not serve its kinds:

| module | simulates |
| --- | --- |
| `mutator.py` | virt-api's VMI mutating webhook (eviction strategy defaulted from the KubeVirt CR) |
| `interceptor.py` | the `virt-launcher-eviction-interceptor.kubevirt.io` webhook on `pods/eviction` |
| `hco_defaults.py` | the HyperConverged CRD defaults of `spec.liveMigrationConfig` |
| `operator.py` | virt-operator's KubeVirt CR status (Deployed, versions) |
| `hco.py` | HCO rendering `evictionStrategy`/`liveMigrationConfig` into the KubeVirt CR |
| `vmi.py` | the VMI controller: launcher Pod, VMI status from the Pod, LiveMigratable |
| `vm.py` | the VM controller: run strategies, restarts, printableStatus |
| `replicaset.py` | VirtualMachineInstanceReplicaSet |
| `pool.py` | VirtualMachinePool (pool.kubevirt.io) |
| `evacuation.py` | marked VMIs -> `kubevirt-evacuation-` migrations, parallel limits |
| `migration.py` | VirtualMachineInstanceMigration phases, target Pod, backoff, faults |
| `peaks.py` | test instrumentation: peak of running migrations in the cluster and per source node (`/_kubesim/counters`) |

Helpers: `common.py` (names, read-modify-write), `defaults.py` (cluster config, effective strategy),
`launcher.py` (the launcher Pod and its memory overhead), `migratable.py` (LiveMigratable reasons),
`handler.py` (virt-handler DaemonSet manifest), `objects.py` (manifest builders for scenarios/tests),
`instancetype.py` (instance types applied to a VM's VMI), `subresources.py` (virt-api's `subresources.kubevirt.io`
API, routed by `server.py`; `evacuate/cancel` from KubeVirt v1.7.0, as the KubeVirt CR's `observedKubeVirtVersion` says).
Each module's docstring gives its upstream source and what it simplifies.

Simulator-only annotations: `kubesim.io/migration: fail|hang|slow` on a VM or VMI (see `migration.py`; a
`virt-handler` fault rule of the admin endpoint does the same for the next matching migrations),
and `kubesim.io/unmanaged: "true"` on a VM, VMI, replica set, pool or migration, which the controllers
then leave alone (for tests that use these kinds as plain custom objects)."""
from __future__ import annotations

from . import evacuation, hco, hco_defaults, interceptor, migration, mutator, operator, peaks, pool, replicaset, vm, vmi

MODULES = (mutator, interceptor, hco_defaults, operator, hco, vmi, vm, replicaset, pool, evacuation, migration, peaks)


def register(cluster, manager) -> None:
    """Register every KubeVirt hook and controller the cluster's kinds allow."""
    for module in MODULES:
        module.register(cluster, manager)
