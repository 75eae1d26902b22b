"""In-process simulated clusters for the KubeVirt tests (not a test module): a workload cluster with every
component, the given objects and the controllers running, plus small helpers to read objects, wait for
conditions and post Evictions."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from kubesim.api import Cluster, RequestContext
from kubesim.clock import Clock
from kubesim.components import COMPONENTS
from kubesim.controllers import ControllerManager
from kubesim.errors import ApiError
from kubesim.kubevirt import objects
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate
from kubesim.subresources import evict
from support.waiting import wait_for

VMI = "virtualmachineinstances.kubevirt.io"
VM = "virtualmachines.kubevirt.io"
VMIM = "virtualmachineinstancemigrations.kubevirt.io"
KUBEVIRT = "kubevirts.kubevirt.io"
HCO = "hyperconvergeds.hco.kubevirt.io"
NS = "vms"


class Sim:
    def __init__(self, extra_objects: list[dict], time_scale: float = 200, nodes: int = 3,
                 strategy: str | None = "LiveMigrate", live_migration: dict | None = None, hco: bool = True):
        self.cluster = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(time_scale))
        self.manager = ControllerManager(self.cluster)
        for register in COMPONENTS:
            register(self.cluster, self.manager)
        base = [objects.worker_node(f"worker-{chr(ord('a') + i)}") for i in range(nodes)]
        if hco:
            base.append(objects.hyperconverged(eviction_strategy=strategy, live_migration=live_migration))
        populate(self.cluster, {"namespaces": ["kubevirt", NS], "objects": base})
        self.manager.start()
        assert self.manager.wait_idle(30)
        for obj in extra_objects:
            self.create(obj)
        self.settle()

    # ---------------------------------------------------------------------------------------- access
    def rt(self, key: str):
        return self.cluster.registry.by_key(key)

    def create(self, obj: dict) -> dict:
        rt = self.cluster.registry.by_kind(obj["apiVersion"], obj["kind"])
        return self.cluster.create(rt, obj["metadata"].get("namespace", NS) if rt.namespaced else None, obj)

    def get(self, key: str, name: str, namespace: str | None = NS) -> dict | None:
        entry = self.cluster.store.get(key, namespace if self.rt(key).namespaced else "", name)
        return entry.obj if entry else None

    def list(self, key: str, namespace: str | None = NS, **label_equals) -> list[dict]:
        items = [e.obj for e in self.cluster.store.entries(key, namespace)]
        return [i for i in items if all((i["metadata"].get("labels") or {}).get(k) == v for k, v in label_equals.items())]

    def patch(self, key: str, name: str, body: dict, namespace: str | None = NS, subresource: str = "") -> dict:
        return self.cluster.patch(self.rt(key), namespace, name, "merge", body, subresource=subresource)

    def delete(self, key: str, name: str, namespace: str | None = NS) -> None:
        self.cluster.delete(self.rt(key), namespace, name)

    def launchers(self, vmi_name: str, namespace: str = NS) -> list[dict]:
        return [p for p in self.list("pods", namespace) if (p["metadata"].get("annotations") or {}).get(
            "kubevirt.io/domain") == vmi_name]

    def launcher(self, vmi_name: str, namespace: str = NS) -> dict:
        vmi = self.get(VMI, vmi_name, namespace)
        node = vmi["status"]["nodeName"]
        pods = [p for p in self.launchers(vmi_name, namespace) if p["spec"].get("nodeName") == node
                and p["status"].get("phase") == "Running"]
        assert len(pods) == 1, [p["metadata"]["name"] for p in self.launchers(vmi_name, namespace)]
        return pods[0]

    def events(self, kind: str, name: str, namespace: str = NS) -> list[tuple[str, str]]:
        return [(e["reason"], e["message"]) for e in self.list("events", namespace)
                if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]

    def wait_event(self, kind: str, name: str, reason: str, message: str, namespace: str = NS) -> None:
        """Wait for the event (reason, message) of an object: a controller records it after the write it tells of, so
        a test that saw the write may still be ahead of the event."""
        self.wait(lambda: (reason, message) in self.events(kind, name, namespace), what=f"event {reason} of {kind} {name}")

    def migrations(self, vmi_name: str, namespace: str = NS) -> list[dict]:
        return [m for m in self.list(VMIM, namespace) if m["spec"]["vmiName"] == vmi_name]

    # ------------------------------------------------------------------------------------------ time
    def settle(self, timeout: float = 30) -> None:
        assert self.manager.wait_idle(timeout)

    def wait(self, predicate, timeout: float = 30, *, what: str):
        """support.waiting.wait_for with the predicate under the cluster's lock (a consistent view of the store)."""
        def locked():
            with self.cluster.lock:
                return predicate()
        return wait_for(locked, timeout, 0.01, what)

    def wait_for(self, fetch, check, timeout: float = 30, *, what: str):
        """Wait until check(fetch()) is true; return what fetch() returned then."""
        return self.wait(lambda: (value := fetch()) and check(value) and value, timeout, what=what)

    def wait_running(self, vmi_name: str, namespace: str = NS) -> dict:
        return self.wait_for(lambda: self.get(VMI, vmi_name, namespace),
                             lambda v: v.get("status", {}).get("phase") == "Running", what=f"VMI {vmi_name} Running")

    # -------------------------------------------------------------------------------------- eviction
    def evict(self, pod_name: str, namespace: str = NS, annotations: dict | None = None,
              dry_run: bool = False) -> ApiError | None:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod_name, "namespace": namespace}}
        if annotations:
            body["metadata"]["annotations"] = annotations
        try:
            evict(self.cluster, namespace, pod_name, body, RequestContext(dry_run=dry_run))
        except ApiError as err:
            return err
        return None

    def cordon(self, node: str) -> None:
        self.patch("nodes", node, {"spec": {"unschedulable": True}}, namespace=None)

    def stop(self) -> None:
        self.manager.stop()


def put(sim, path: str, body=None, method: str = "PUT") -> tuple[int, object]:
    """A JSON request to the served simulator (a PUT unless told), its status code and decoded answer, errors included."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(sim.server.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else None
