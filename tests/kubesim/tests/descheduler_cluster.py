"""Helpers for the descheduler tests: an in-process workload cluster with nodes and Pods placed directly."""
from __future__ import annotations

import textwrap

from kubesim.api import Cluster
from kubesim.clock import Clock
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate

GIB = 2 ** 30


def make_cluster(time_scale: float = 1000) -> Cluster:
    cluster = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(time_scale))
    populate(cluster, {})
    for name in ("descheduler", "apps"):
        add(cluster, "namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return cluster


def add(cluster, key: str, namespace: str | None, obj: dict) -> dict:
    return cluster.create(cluster.registry.by_key(key), namespace, obj, keep_status=True)


def node(cluster, name: str, cpu: str = "10", memory: str = "10Gi", pods: str = "100", labels: dict | None = None,
         taints: list | None = None, unschedulable: bool = False) -> dict:
    spec = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return add(cluster, "nodes", None, {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                   "conditions": [{"type": "Ready", "status": "True"}]}})


def pod(cluster, name: str, node_name: str, cpu: str = "1", memory: str = "1Gi", namespace: str = "apps",
        labels: dict | None = None, annotations: dict | None = None, owner: str | None = "ReplicaSet",
        volumes: list | None = None, priority: int | None = None, limits: bool = False, phase: str = "Running",
        **spec_extra) -> dict:
    resources = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = {"cpu": cpu, "memory": memory}
    meta = {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                    "uid": f"uid-{name}-owner", "controller": True}]
    spec = {"nodeName": node_name, "containers": [{"name": "c", "image": "i", "resources": resources}],
            **spec_extra}
    if volumes:
        spec["volumes"] = volumes
    if priority is not None:
        spec["priority"] = priority
    return add(cluster, "pods", namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                                            "status": {"phase": phase, "startTime": "2020-01-01T00:00:00Z"}})


def policy(body: str) -> str:
    return 'apiVersion: "descheduler/v1alpha2"\nkind: "DeschedulerPolicy"\n' + textwrap.dedent(body)


def lnu_policy(thresholds: str = "{cpu: 20, memory: 20, pods: 20}", targets: str = "{cpu: 50, memory: 50, pods: 50}",
               evictor_args: str = "{}", top: str = "", lnu_extra: str = "") -> str:
    return policy(f"""\
        {top}
        profiles:
        - name: test
          pluginConfig:
          - name: DefaultEvictor
            args: {evictor_args}
          - name: LowNodeUtilization
            args:
              thresholds: {thresholds}
              targetThresholds: {targets}
              {lnu_extra}
          plugins:
            balance:
              enabled: [LowNodeUtilization]
        """)


def messages(lines: list[str]) -> list[str]:
    """The part of each klog line after the header."""
    return [line.split("] ", 1)[1] if "] " in line else line for line in lines]
