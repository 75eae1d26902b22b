"""Scenario builders for drains at scale (not a test module), written as kubesim scenario files with the default
migration limits. `write_scenario`: `count` LiveMigrate VMs preferring worker-1 of three workers (used by
test_kubevirt_node_drain.py and tests/bench/bench_drain.py); `write_cluster_scenario`: a whole cluster to maintain
node by node (tests/bench/bench_cluster_maintenance.py). The migration time is the simulator's (9 simulated seconds
per 512Mi, about 10 s in all for 512Mi) divided by `time_scale`."""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kubesim.kubevirt import objects  # noqa: E402  # pylint: disable=wrong-import-position


def write_scenario(path: Path, count: int = 20, time_scale: float = 20, namespace: str = "vms") -> Path:
    nodes = [objects.worker_node("worker-{0}".format(i)) for i in (1, 2, 3)]
    vms = [objects.vm("vm-{0:02d}".format(i), namespace, eviction_strategy="LiveMigrate", preferred_node="worker-1",
                      labels={"app": "drain-bench"}) for i in range(count)]
    workload = {"namespaces": ["kubevirt", namespace], "objects": nodes + [objects.hyperconverged()] + vms}
    scenario = {"name": "drain-{0}-vms".format(count), "description": "{0} LiveMigrate VMs on worker-1".format(count),
                "timeScale": time_scale, "clusters": {"workload": workload}}
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


# Guest memory of the cluster scenario's VMs and the workers' memory: a 2Gi guest's launcher requests 2321Mi
# (tests/kubesim/kubevirt/launcher.py: 245Mi + 2Gi/512 + 8Mi per vCPU + 16Mi graphics), so a 28Gi worker holds 12
# of them and not 13: each full worker (10 VMs and one of the pool) keeps room for one more.
CLUSTER_VM_MEMORY = "2Gi"
CLUSTER_WORKER_MEMORY = "28Gi"


def write_cluster_scenario(path: Path, workers: int = 6, vms_per_worker: int = 10, pool_replicas: int = 6,
                           time_scale: float = 20, namespace: str = "vms") -> Path:
    """A whole cluster to maintain: `workers` full workers worker-1.. with `vms_per_worker` LiveMigrate VMs each (their
    first placement pinned by a preferred node), a LiveMigrate VM pool `pool` of `pool_replicas` with a PDB of
    integer minAvailable replicas - 1, and one more worker, empty (the spare capacity of one worker). The spare starts
    cordoned so that the pool's VMs spread over the full workers; the caller uncordons it once the VMs run."""
    spare = "worker-{0}".format(workers + 1)
    nodes = [objects.worker_node("worker-{0}".format(i), memory=CLUSTER_WORKER_MEMORY) for i in range(1, workers + 1)]
    nodes.append(objects.worker_node(spare, memory=CLUSTER_WORKER_MEMORY, unschedulable=True))
    vms = [objects.vm("vm-{0}-{1:02d}".format(node, i), namespace, memory=CLUSTER_VM_MEMORY, eviction_strategy="LiveMigrate",
                      preferred_node="worker-{0}".format(node), labels={"app": "cluster-bench"})
           for node in range(1, workers + 1) for i in range(vms_per_worker)]
    pool = objects.vm_pool("pool", namespace, replicas=pool_replicas, memory=CLUSTER_VM_MEMORY, eviction_strategy="LiveMigrate")
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pool-pdb", "namespace": namespace},
           "spec": {"minAvailable": pool_replicas - 1, "selector": {"matchLabels": {"kubevirt.io/vmpool": "pool"}}}}
    workload = {"namespaces": ["kubevirt", namespace], "objects": nodes + [objects.hyperconverged()] + vms + [pool, pdb]}
    scenario = {"name": "cluster-{0}-workers".format(workers),
                "description": "{0} workers with {1} LiveMigrate VMs each, a pool of {2} with a PDB, {3} empty".format(
                    workers, vms_per_worker, pool_replicas, spare),
                "timeScale": time_scale, "clusters": {"workload": workload}}
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def write_batch_scenario(path: Path, drained: tuple = ("worker-1", "worker-2"), vms_per_node: int = 4, spare: str = "worker-3",
                         per_cluster: int = 3, time_scale: float = 5, namespace: str = "vms") -> Path:
    """Nodes drained at once in one call: `vms_per_node` LiveMigrate VMs preferring each node of `drained` (`vm-<node>-<i>`),
    the worker `spare` empty for them to land on, and parallelMigrationsPerCluster `per_cluster` (through HyperConverged's
    liveMigrationConfig; per node the default 2)."""
    nodes = [objects.worker_node(name) for name in (*drained, spare)]
    vms = [objects.vm("vm-{0}-{1}".format(node, i), namespace, eviction_strategy="LiveMigrate", preferred_node=node, labels={"app": "drain-batch"})
           for node in drained for i in range(vms_per_node)]
    hco = objects.hyperconverged(live_migration={"parallelMigrationsPerCluster": per_cluster})
    workload = {"namespaces": ["kubevirt", namespace], "objects": nodes + [hco] + vms}
    scenario = {"name": "drain-batch", "description": "{0} LiveMigrate VMs on each of {1}, {2} empty".format(vms_per_node, ", ".join(drained), spare),
                "timeScale": time_scale, "clusters": {"workload": workload}}
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def write_queued_scenario(path: Path, time_scale: float = 20, namespace: str = "vms") -> Path:
    """A drain that cannot finish: vm-a and vm-b (LiveMigrate) on worker-1, and `blocker` on worker-2 whose migrations
    hang (`kubesim.io/migration: hang`), with parallelMigrationsPerCluster 1: once a migration of the blocker runs, an
    evacuation of worker-1 is marked but queued in KubeVirt's evacuation controller until the blocker's migration ends."""
    nodes = [objects.worker_node("worker-{0}".format(i)) for i in (1, 2, 3)]
    vms = [objects.vm(name, namespace, eviction_strategy="LiveMigrate", preferred_node="worker-1") for name in ("vm-a", "vm-b")]
    vms.append(objects.vm("blocker", namespace, eviction_strategy="LiveMigrate", preferred_node="worker-2",
                          annotations={"kubesim.io/migration": "hang"}))
    hco = objects.hyperconverged(live_migration={"parallelMigrationsPerCluster": 1})
    workload = {"namespaces": ["kubevirt", namespace], "objects": nodes + [hco] + vms}
    scenario = {"name": "drain-queued", "description": "vm-a and vm-b on worker-1, blocker's migration hangs, one migration at a time",
                "timeScale": time_scale, "clusters": {"workload": workload}}
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path
