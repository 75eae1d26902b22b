"""What the kubelets of the simulated nodes do to Pods: start a bound Pod (Running, Ready, `hostIP`/`hostIPs`
from its node's addresses as upstream kubelet_pods.go reports them), hand it to the
program that runs in it (`cluster.programs`, e.g. the descheduler), let a batch Pod nobody claims finish
successfully after `kubesim.io/run-seconds` (default 1) simulated seconds, and finish a graceful deletion
when its grace period (scaled by the scenario's timeScale) is over.

A node reboot (`Kubelet.reboot`, the admin endpoint `POST /_kubesim/nodes/<name>/reboot`), the stand-in for a
user's maintenance work: the node's Ready condition turns False with the kubelet's reason and message
(`KubeletNotReady`, `[container runtime status check may not have completed yet, PLEG is not healthy: pleg
has yet to be successful]`, what a starting kubelet reports), and after the given simulated seconds True again
(`KubeletReady`, `kubelet is posting ready status`) with `status.nodeInfo.kubeletVersion` set to the new version
when one is given. Simplified: nothing else of the node or its Pods changes (no node lifecycle controller:
no `node.kubernetes.io/not-ready` taints, no Pod restarts); a second reboot before the first ends replaces it."""
from __future__ import annotations

import copy
import ipaddress
from datetime import datetime, timedelta, timezone

from ..api import RequestContext, now_iso
from ..errors import ApiError
from ..store import ADDED, MODIFIED, Event
from . import Controller


NOT_READY_REASON = "KubeletNotReady"
NOT_READY_MESSAGE = ("[container runtime status check may not have completed yet, PLEG is not healthy: "
                     "pleg has yet to be successful]")
READY_REASON = "KubeletReady"
READY_MESSAGE = "kubelet is posting ready status"


class Kubelet(Controller):
    keys = ("pods",)

    def __init__(self, cluster):
        super().__init__(cluster)
        self._terminating: dict[tuple[str, str, str], int] = {}   # Pods being deleted -> their grace period
        self._pod_ips = 0
        self._reboots: dict[str, int] = {}                          # node -> the number of its latest reboot

    # -------------------------------------------------------------------------------------- node reboot
    def reboot(self, node_name: str, seconds: float = 10, kubelet_version: str | None = None) -> str:
        """The node NotReady now and Ready again after `seconds` simulated seconds (with `kubelet_version`, if
        given); answers the wall-clock time (RFC 3339) it will be Ready. ApiError 404 for an unknown node."""
        count = self._reboots.get(node_name, 0) + 1
        self._set_ready(node_name, False)
        self._reboots[node_name] = count
        real = self.cluster.clock.real_seconds(seconds)
        ready_at = (datetime.now(timezone.utc) + timedelta(seconds=real)).strftime("%Y-%m-%dT%H:%M:%SZ")

        def back() -> None:
            if self._reboots.get(node_name) == count:
                try:
                    self._set_ready(node_name, True, kubelet_version)
                except ApiError:      # the node was deleted meanwhile
                    pass
        self.manager.after(real, back)
        return ready_at

    def _set_ready(self, node_name: str, ready: bool, kubelet_version: str | None = None) -> None:
        rt = self.cluster.registry.by_key("nodes")
        with self.cluster.lock:
            node = self.cluster.get(rt, None, node_name)
            now = now_iso()
            status = node.setdefault("status", {})
            conditions = status.setdefault("conditions", [])
            condition = next((c for c in conditions if c.get("type") == "Ready"), None)
            if condition is None:
                condition = {"type": "Ready"}
                conditions.append(condition)
            wanted = "True" if ready else "False"
            if condition.get("status") != wanted:
                condition["lastTransitionTime"] = now
            condition.update(status=wanted, reason=READY_REASON if ready else NOT_READY_REASON,
                             message=READY_MESSAGE if ready else NOT_READY_MESSAGE, lastHeartbeatTime=now)
            if kubelet_version:
                status.setdefault("nodeInfo", {})["kubeletVersion"] = kubelet_version
            self.cluster.update(rt, None, node_name, node, RequestContext(user=f"system:node:{node_name}",
                                                                          default_field_manager="kubelet"),
                                subresource="status")

    def on_event(self, event: Event) -> None:
        pod = event.obj
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        if event.type not in (ADDED, MODIFIED):
            return
        if meta.get("deletionTimestamp"):
            self._schedule_removal(pod)
        elif spec.get("nodeName") and not (meta.get("annotations") or {}).get("kubesim.io/hold-pending") and (
                status.get("phase", "Pending") == "Pending" or
                (status.get("phase") == "Running" and "containerStatuses" not in status)):
            self._start(pod)

    def _start(self, pod: dict) -> None:
        rt = self.cluster.registry.by_key("pods")
        self._pod_ips += 1
        started = copy.deepcopy(pod)
        now = now_iso()
        status = started.setdefault("status", {})
        host_ips = self._host_ips(started["spec"]["nodeName"])
        if host_ips:
            status.update(hostIP=host_ips[0], hostIPs=[{"ip": ip} for ip in host_ips])
        if host_ips and started["spec"].get("hostNetwork"):   # a host-network Pod has the node's addresses
            status.update(podIP=host_ips[0], podIPs=[{"ip": ip} for ip in host_ips])
        status.update({
            "phase": "Running", "startTime": now,
            "podIP": status.get("podIP") or f"10.244.{(self._pod_ips // 250) % 250}.{self._pod_ips % 250 + 2}",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                     "PodScheduled")],
            "containerStatuses": [{"name": c["name"], "image": c.get("image", ""), "ready": True, "started": True,
                                   "imageID": "", "restartCount": 0, "state": {"running": {"startedAt": now}}}
                                  for c in (started.get("spec") or {}).get("containers") or []],
        })
        status.setdefault("podIPs", [{"ip": status["podIP"]}])
        try:
            running = self.cluster.update(rt, pod["metadata"]["namespace"], pod["metadata"]["name"], started,
                                          subresource="status")
        except ApiError:
            return
        if any(program(running) for program in list(self.cluster.programs)):
            return
        if (running.get("spec") or {}).get("restartPolicy", "Always") != "Always":
            seconds = float((running["metadata"].get("annotations") or {}).get("kubesim.io/run-seconds", 1))
            meta = running["metadata"]
            self.manager.after_simulated(seconds, lambda: finish_pod(self.cluster, meta["namespace"], meta["name"],
                                                                     0, uid=meta["uid"]))

    def _host_ips(self, node_name: str) -> list[str]:
        """The node's InternalIPs, then ExternalIPs: the first, and the first of the other IP family (upstream
        GetNodeHostIPs); none when the node reports no address, and then the Pod gets no hostIP."""
        node = self.cluster.store.get("nodes", "", node_name)
        addresses = ((node.obj.get("status") or {}).get("addresses") or []) if node else []
        ips = []
        for kind in ("InternalIP", "ExternalIP"):
            for address in addresses:
                if address.get("type") == kind:
                    try:
                        ips.append(ipaddress.ip_address(address.get("address", "")))
                    except ValueError:
                        continue
        if not ips:
            return []
        other_family = next((ip for ip in ips if ip.version != ips[0].version), None)
        return [str(ips[0])] + ([str(other_family)] if other_family else [])

    def _schedule_removal(self, pod: dict) -> None:
        meta = pod["metadata"]
        ident = (meta["namespace"], meta["name"], meta["uid"])
        grace = meta.get("deletionGracePeriodSeconds", 0)
        if ident in self._terminating and self._terminating[ident] <= grace:
            return
        # A first deletion, or a shorter grace period (a second delete): the containers get that long from now.
        self._terminating[ident] = grace
        self.manager.after_simulated(grace, lambda: self._remove(ident))

    def _remove(self, ident: tuple[str, str, str]) -> None:
        self._terminating.pop(ident, None)
        namespace, name, uid = ident
        rt = self.cluster.registry.by_key("pods")
        try:
            self.cluster.delete(rt, namespace, name, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except ApiError:
            pass


def register(cluster, manager) -> None:
    kubelet = Kubelet(cluster)
    manager.add(kubelet)
    cluster.kubelet = kubelet


def finish_pod(cluster, namespace: str, name: str, exit_code: int, message: str = "", uid: str | None = None
               ) -> dict | None:
    """End a running Pod as its containers exited: Succeeded for exit code 0, Failed otherwise."""
    rt = cluster.registry.by_key("pods")
    with cluster.lock:
        pod = cluster.find(rt, namespace, name)
        if pod is None or (uid and pod["metadata"]["uid"] != uid) or \
                (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return None
        now = now_iso()
        status = pod.setdefault("status", {})
        status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        for condition in status.get("conditions") or []:
            if condition.get("type") in ("Ready", "ContainersReady"):
                condition.update(status="False", reason="PodCompleted", lastTransitionTime=now)
        for container in status.get("containerStatuses") or []:
            started = ((container.get("state") or {}).get("running") or {}).get("startedAt", now)
            container.update(ready=False, started=False, state={"terminated": {
                "exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": started, "finishedAt": now, **({"message": message} if message else {})}})
        try:
            return cluster.update(rt, namespace, name, pod, subresource="status")
        except ApiError:
            return None
