"""The StatefulSet controller: Pods `<set>-<ordinal>` with their identity, labels and claims, OrderedReady and
Parallel creation, scale down from the highest ordinal, replacement under the same name, rolling updates and
the status fields, as pkg/controller/statefulset does them."""
import copy

import pytest

from kubesim import events
from kubesim.controllers import (garbage_collector, kubelet, namespace, scheduler, serviceaccounts,
                                 statefulsets)

import in_process
from support.waiting import wait_for

USED = [garbage_collector.register, namespace.register, serviceaccounts.register, scheduler.register,
        kubelet.register, statefulsets.register]
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-a"},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
HOLD = {"kubesim.io/hold-pending": "true"}   # the simulated kubelet does not start such a Pod


@pytest.fixture
def started():
    with in_process.running(in_process.bare_cluster(), USED, {"namespaces": ["db"], "objects": [NODE]}) as pair:
        yield pair


@pytest.fixture
def cluster(started):
    return started[0]


def rt(cluster, key):
    return cluster.registry.by_key(key)


def statefulset(replicas=3, policy=None, annotations=None, claims=True):
    spec = {"replicas": replicas, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"},
                                      **({"annotations": annotations} if annotations else {})},
                         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                                  "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx"}]}],
                                  "volumes": [{"name": "config", "configMap": {"name": "web"}}]}}}
    if policy:
        spec["podManagementPolicy"] = policy
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "www", "labels": {"tier": "storage"}},
                                         "spec": {"accessModes": ["ReadWriteOnce"],
                                                  "resources": {"requests": {"storage": "1Gi"}}}}]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"}, "spec": spec}


def pods(cluster):
    return {e.obj["metadata"]["name"]: e.obj for e in cluster.store.entries("pods", "db")}


def live_pods(cluster):
    return sorted(name for name, pod in pods(cluster).items() if not pod["metadata"].get("deletionTimestamp"))


def running_ready(cluster, names):
    current = pods(cluster)
    return all(n in current and current[n]["status"].get("phase") == "Running" for n in names)


def release(cluster, name):
    """Let the kubelet start a held Pod."""
    cluster.patch(rt(cluster, "pods"), "db", name, "merge",
                  {"metadata": {"annotations": {"kubesim.io/hold-pending": None}}})


def test_pods_get_ordinal_names_identity_labels_owner_and_claim_volumes(cluster):
    sts = cluster.create(rt(cluster, "statefulsets.apps"), "db", statefulset(replicas=1))
    wait_for(lambda: running_ready(cluster, ["web-0"]), interval=0.01, what="web-0 running")
    pod = pods(cluster)["web-0"]
    revision = pod["metadata"]["labels"]["controller-revision-hash"]
    assert revision.startswith("web-") and len(revision) > len("web-")
    assert pod["metadata"]["generateName"] == "web-"
    assert pod["metadata"]["labels"] == {"app": "web", "controller-revision-hash": revision,
                                         "statefulset.kubernetes.io/pod-name": "web-0",
                                         "apps.kubernetes.io/pod-index": "0"}
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                                   "uid": sts["metadata"]["uid"], "controller": True,
                                                   "blockOwnerDeletion": True}]
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-0", "web")
    volumes = pod["spec"]["volumes"]   # the claims' volumes first, then the template's others
    assert volumes[0] == {"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}}
    assert [v["name"] for v in volumes] == ["www", "config"]
    claim = cluster.get(rt(cluster, "persistentvolumeclaims"), "db", "www-web-0")
    assert claim["metadata"]["labels"] == {"tier": "storage", "app": "web"}
    assert "ownerReferences" not in claim["metadata"]   # the default Retain policy
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    messages = {(e["reason"], e["message"]) for e in events.for_object(cluster, "db", "StatefulSet", "web")}
    assert {("SuccessfulCreate", "create Claim www-web-0 Pod web-0 in StatefulSet web success"),
            ("SuccessfulCreate", "create Pod web-0 in StatefulSet web successful")} <= messages


def test_status_reports_replicas_revisions_and_collision_count(cluster):
    cluster.create(rt(cluster, "statefulsets.apps"), "db", statefulset(replicas=2))
    wait_for(lambda: (cluster.get(rt(cluster, "statefulsets.apps"), "db", "web").get("status") or {})
             .get("readyReplicas") == 2, 5, 0.01, "two ready replicas")
    sts = cluster.get(rt(cluster, "statefulsets.apps"), "db", "web")
    revision = pods(cluster)["web-0"]["metadata"]["labels"]["controller-revision-hash"]
    assert sts["status"] == {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "currentReplicas": 2,
                             "updatedReplicas": 2, "availableReplicas": 2, "currentRevision": revision,
                             "updateRevision": revision, "collisionCount": 0}


def test_ordered_ready_creates_the_next_pod_only_when_its_predecessor_runs(started):
    cluster, manager = started
    cluster.create(rt(cluster, "statefulsets.apps"), "db", statefulset(annotations=HOLD, claims=False))
    wait_for(lambda: "web-0" in pods(cluster), interval=0.01, what="web-0")
    assert manager.wait_idle() and live_pods(cluster) == ["web-0"]   # web-0 stays Pending: nothing follows
    release(cluster, "web-0")
    wait_for(lambda: "web-1" in pods(cluster), interval=0.01, what="web-1 after web-0 runs")
    assert manager.wait_idle() and live_pods(cluster) == ["web-0", "web-1"]
    release(cluster, "web-1")
    wait_for(lambda: "web-2" in pods(cluster), interval=0.01, what="web-2 after web-1 runs")


def test_parallel_creates_every_pod_at_once(cluster):
    cluster.create(rt(cluster, "statefulsets.apps"), "db",
                   statefulset(policy="Parallel", annotations=HOLD, claims=False))
    wait_for(lambda: live_pods(cluster) == ["web-0", "web-1", "web-2"], interval=0.01, what="three pods while none runs")


def test_scale_down_removes_the_highest_ordinal_first_and_a_deleted_pod_comes_back_under_its_name(cluster):
    sets = rt(cluster, "statefulsets.apps")
    cluster.create(sets, "db", statefulset(claims=False))
    wait_for(lambda: running_ready(cluster, ["web-0", "web-1", "web-2"]), interval=0.01, what="three running pods")
    old_uid = pods(cluster)["web-1"]["metadata"]["uid"]
    cluster.delete(rt(cluster, "pods"), "db", "web-1", {"gracePeriodSeconds": 0})
    wait_for(lambda: "web-1" in pods(cluster) and pods(cluster)["web-1"]["metadata"]["uid"] != old_uid, interval=0.01, what="web-1 again")
    seen = []
    cluster.add_listener(lambda e: seen.append(e.obj["metadata"]["name"]) if e.key == "pods" and
                         e.obj["metadata"].get("deletionTimestamp") and e.obj["metadata"]["name"] not in seen else None)
    wait_for(lambda: running_ready(cluster, ["web-0", "web-1", "web-2"]), interval=0.01, what="three running pods again")
    body = copy.deepcopy(cluster.get(sets, "db", "web"))
    body["spec"]["replicas"] = 1
    cluster.update(sets, "db", "web", body)
    wait_for(lambda: sorted(pods(cluster)) == ["web-0"], interval=0.01, what="scaled down to web-0")
    assert seen == ["web-2", "web-1"]


def test_rolling_update_replaces_pods_from_the_highest_ordinal_and_moves_the_current_revision(cluster):
    sets = rt(cluster, "statefulsets.apps")
    cluster.create(sets, "db", statefulset(replicas=2, claims=False))
    wait_for(lambda: running_ready(cluster, ["web-0", "web-1"]), interval=0.01, what="two running pods")
    old = pods(cluster)["web-0"]["metadata"]["labels"]["controller-revision-hash"]
    body = copy.deepcopy(cluster.get(sets, "db", "web"))
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    cluster.update(sets, "db", "web", body)

    def rolled():
        status = cluster.get(sets, "db", "web").get("status") or {}
        return status if status.get("currentRevision") == status.get("updateRevision") != old and \
            status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 2 else None
    status = wait_for(rolled, interval=0.01, what="rolled to the new revision")
    assert {p["spec"]["containers"][0]["image"] for p in pods(cluster).values()} == {"nginx:1.28"}
    assert status["observedGeneration"] == 2 and status["currentReplicas"] == 2
    deleted = [e["message"] for e in events.for_object(cluster, "db", "StatefulSet", "web")
               if e["reason"] == "SuccessfulDelete"]
    assert deleted[:2] == ["delete Pod web-1 in StatefulSet web successful",
                           "delete Pod web-0 in StatefulSet web successful"]
