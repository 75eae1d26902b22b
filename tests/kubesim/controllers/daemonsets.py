"""The DaemonSet controller: one Pod per eligible node, named `<daemonset>-<5 random chars>`, controlled by
the DaemonSet, with the labels `controller-revision-hash` and `pod-template-generation`.

A node is eligible when the template's nodeSelector and required node affinity match it and its
NoSchedule/NoExecute taints are tolerated (a NotReady node counts as tainted
`node.kubernetes.io/not-ready:NoSchedule`, as the node lifecycle controller taints it). A Pod already on a
node stays while its NoExecute taints are tolerated and the selectors still match. DaemonSet Pods get the
upstream automatic tolerations (not-ready and unreachable NoExecute; disk-pressure, memory-pressure,
pid-pressure, unschedulable NoSchedule; network-unavailable NoSchedule with hostNetwork), so a cordoned
node keeps and gets its daemon Pods.

Placement follows upstream (since 1.12): the Pod carries a required node affinity
`matchFields metadata.name In [<node>]` and the default scheduler binds it, so a daemon Pod that does not
fit (resources) stays Pending with FailedScheduling, as on a real cluster. New nodes get Pods; deleted,
evicted or failed Pods are replaced (a terminating Pod is replaced at once); Pods on nodes that went away
or no longer qualify are deleted; orphan Pods matching the selector are adopted. Status:
`desiredNumberScheduled`, `currentNumberScheduled`, `numberMisscheduled`, `numberReady`,
`updatedNumberScheduled`, `numberAvailable`, `numberUnavailable`, `observedGeneration`. Events
`SuccessfulCreate` "Created pod: <name>", `SuccessfulDelete` "Deleted pod: <name>", `FailedDaemonPod`.

Upstream: pkg/controller/daemon. Simplified: a template change replaces every outdated Pod at once
(RollingUpdate without maxUnavailable/maxSurge pacing; OnDelete waits for the user as upstream); no
ControllerRevision objects; `minReadySeconds` is ignored (a ready Pod is available); no backoff for
failed Pods."""
from __future__ import annotations

import copy

from .. import events
from ..store import DELETED, MODIFIED, Event
from .scheduler import _match_node_selector_term, _tolerates
from .workloads import (OwnerController, adopt_orphans, create_pod, delete_pod, is_active, is_ready, owned,
                        pod_from_template, template_hash, write_status)

COMPONENT = "daemonset-controller"
_KEY = "daemonsets.apps"
_AUTO_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


def daemon_tolerations(pod_spec: dict) -> list[dict]:
    """The template's tolerations plus the automatic DaemonSet ones it does not already have."""
    tolerations = copy.deepcopy(pod_spec.get("tolerations") or [])
    wanted = list(_AUTO_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
    for key, effect in wanted:
        if not any(t.get("key") == key and t.get("effect") == effect for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    return tolerations


def _node_taints(node: dict) -> list[dict]:
    taints = list((node.get("spec") or {}).get("taints") or [])
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") != "True":
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    return taints


def _selectors_match(pod_spec: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_match_node_selector_term(term, node) for term in terms)


def node_should_run(pod_spec: dict, node: dict) -> tuple[bool, bool]:
    """(should run a new daemon Pod, may keep a running one) for this node (upstream
    NodeShouldRunDaemonPod)."""
    if not _selectors_match(pod_spec, node):
        return False, False
    tolerations = daemon_tolerations(pod_spec)
    taints = _node_taints(node)
    keep = all(_tolerates(tolerations, t) for t in taints if t.get("effect") == "NoExecute")
    run = keep and all(_tolerates(tolerations, t) for t in taints if t.get("effect") == "NoSchedule")
    return run, keep


def target_node(pod: dict) -> str:
    """The node a daemon Pod is for: spec.nodeName, or the `metadata.name` of its required affinity."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and expr.get("operator") == "In" and len(expr.get("values") or []) == 1:
                return expr["values"][0]
    return ""


def _pin_to_node(pod_spec: dict, node_name: str) -> None:
    """Replace the matchFields of the required node affinity with `metadata.name In [node]` (upstream
    ReplaceDaemonSetPodNodeNameNodeAffinity)."""
    node_field = [{"key": "metadata.name", "operator": "In", "values": [node_name]}]
    affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        required["nodeSelectorTerms"] = [{"matchFields": node_field}]
        return
    for term in terms:
        term["matchFields"] = copy.deepcopy(node_field)


def _node_changed(event: Event) -> bool:
    if event.type != MODIFIED or event.old is None:
        return True

    def view(node: dict) -> tuple:
        ready = [c.get("status") for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        return (node["metadata"].get("labels"), (node.get("spec") or {}).get("taints"), ready)
    return view(event.obj) != view(event.old)


class DaemonSetController(OwnerController):
    resource_key = _KEY
    owner_kind = "DaemonSet"
    owner_group = "apps"
    keys = (_KEY, "pods", "nodes")

    def on_other_event(self, event: Event) -> bool:
        if event.key != "nodes":
            return False
        if event.type == DELETED or _node_changed(event):
            self.sync_all()
        return True

    def reconcile(self, owner: dict) -> None:
        ds = owner
        cluster = self.cluster
        namespace, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        pod_spec = template.get("spec") or {}
        revision = template_hash(template)
        rolling = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
        by_node: dict[str, list[dict]] = {}
        for pod in owned(cluster, ds["metadata"]["uid"], "pods") + adopt_orphans(cluster, ds, spec.get("selector")):
            by_node.setdefault(target_node(pod), []).append(pod)
        counts = {"desired": 0, "current": 0, "misscheduled": 0, "ready": 0, "updated": 0}
        for node_entry in list(cluster.store.entries("nodes")):
            node = node_entry.obj
            node_name = node["metadata"]["name"]
            run, keep = node_should_run(pod_spec, node)
            live = self._live_pods(ds, node_name, by_node.pop(node_name, []))
            if not keep:
                for pod in live:
                    delete_pod(cluster, ds, pod, COMPONENT)
                live = []
            elif live:
                if len(live) > 1:       # keep the oldest
                    live.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
                    for extra in live[1:]:
                        delete_pod(cluster, ds, extra, COMPONENT)
                    live = live[:1]
                if rolling and run and self._revision_of(live[0]) != revision:
                    delete_pod(cluster, ds, live[0], COMPONENT)
                    live = []
            if run and not live:
                created = self._create(ds, template, node_name, revision)
                live = [created] if created else []
            if run:
                counts["desired"] += 1
                if live:
                    counts["current"] += 1
                    counts["ready"] += 1 if is_ready(live[0]) else 0
                    counts["updated"] += 1 if self._revision_of(live[0]) == revision else 0
            elif live:
                counts["misscheduled"] += 1
        for pods in by_node.values():      # Pods for nodes that do not exist (any more)
            for pod in pods:
                if is_active(pod):
                    delete_pod(cluster, ds, pod, COMPONENT)
        self._write_status(namespace, name, counts)

    def _live_pods(self, ds: dict, node_name: str, pods: list[dict]) -> list[dict]:
        """Active Pods on the node; failed ones are deleted (to be replaced) as upstream does."""
        live = []
        for pod in pods:
            if (pod.get("status") or {}).get("phase") == "Failed" and not pod["metadata"].get("deletionTimestamp"):
                events.record(self.cluster, ds, "Warning", "FailedDaemonPod",
                              f"Found failed daemon pod {pod['metadata']['namespace']}/{pod['metadata']['name']} on "
                              f"node {node_name}, will try to kill it", COMPONENT)
                delete_pod(self.cluster, ds, pod, COMPONENT)
            elif is_active(pod):
                live.append(pod)
        return live

    @staticmethod
    def _revision_of(pod: dict) -> str:
        return (pod["metadata"].get("labels") or {}).get("controller-revision-hash", "")

    def _create(self, ds: dict, template: dict, node_name: str, revision: str) -> dict | None:
        meta = ds["metadata"]
        body = pod_from_template(template, meta["namespace"], ds, f"{meta['name']}-", {
            "controller-revision-hash": revision, "pod-template-generation": str(meta.get("generation", 1))})
        body["spec"]["tolerations"] = daemon_tolerations(body["spec"])
        _pin_to_node(body["spec"], node_name)
        return create_pod(self.cluster, ds, body, COMPONENT)

    def _write_status(self, namespace: str, name: str, counts: dict) -> None:
        entry = self.cluster.store.get(_KEY, namespace, name)
        if entry is None:
            return
        ds = entry.obj
        status = {k: v for k, v in (ds.get("status") or {}).items() if k in ("collisionCount", "conditions")}
        status.update(currentNumberScheduled=counts["current"], numberMisscheduled=counts["misscheduled"],
                      desiredNumberScheduled=counts["desired"], numberReady=counts["ready"],
                      observedGeneration=ds["metadata"].get("generation", 1))
        for field, value in (("updatedNumberScheduled", counts["updated"]), ("numberAvailable", counts["ready"]),
                             ("numberUnavailable", counts["desired"] - counts["ready"])):
            if value:
                status[field] = value
        write_status(self.cluster, self.cluster.registry.by_key(_KEY), ds, status)


def register(cluster, manager) -> None:
    if all(cluster.registry.by_key(key) is not None for key in (_KEY, "pods", "nodes")):
        manager.add(DaemonSetController(cluster))
