"""ModuleInfo objects for scenarios: ACP's record, on the global (management) cluster, of a cluster plugin
installed on a cluster. Nothing is dynamic: a scenario declares them (or builds them with `module_info`).

Upstream: ACP (`cluster.alauda.io/v1alpha1`, cluster-scoped, plural `moduleinfoes`), served by the global
cluster only; the Descheduler page reads it with
`kubectl get moduleinfo -l cpaas.io/module-name=descheduler -o custom-columns=NAME:...,CLUSTER:...,PHASE:...,VERSION:...`.
The name is `<cluster>-<32 hex digits>` as ACP names them; labels `cpaas.io/cluster-name`,
`cpaas.io/module-name`, `cpaas.io/module-type: plugin`, `cpaas.io/product`; annotation
`cpaas.io/display-name`; `spec.version` and `spec.config`; `status.phase` (Running, Processing, ...) and
`status.version`.

Simplified: no `moduleinfo` finalizer and no owner Cluster object (nothing here would remove the finalizer);
the hash in the name is the simulator's (md5 of `<cluster>/<module>`).
"""
from __future__ import annotations

import hashlib

API_VERSION = "cluster.alauda.io/v1alpha1"
DESCHEDULER_VERSION = "v0.36.0-5"   # a package build newer than v0.36.0-4 renders the EvictionsInBackground gate


def module_info_name(cluster_name: str, module: str) -> str:
    digest = hashlib.md5(f"{cluster_name}/{module}".encode(), usedforsecurity=False).hexdigest()
    return f"{cluster_name}-{digest}"


def module_info(cluster_name: str = "workload", module: str = "descheduler", version: str = DESCHEDULER_VERSION,
                phase: str = "Running", display_name: str = "Alauda Container Platform Descheduler",
                config: dict | None = None) -> dict:
    """A ModuleInfo for a plugin installed on `cluster_name` (the workload cluster's name)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ModuleInfo",
        "metadata": {
            "name": module_info_name(cluster_name, module),
            "labels": {
                "cpaas.io/cluster-name": cluster_name,
                "cpaas.io/module-name": module,
                "cpaas.io/module-type": "plugin",
                "cpaas.io/product": "Platform-Center",
            },
            "annotations": {"cpaas.io/display-name": display_name},
        },
        "spec": {"version": version, "config": dict(config or {})},
        "status": {"phase": phase, "version": version},
    }
