"""The API semantics without HTTP: resourceVersions, conflicts, dry runs, finalizers, garbage collection,
watches and compaction."""
import pytest

from kubesim.api import Cluster, RequestContext
from kubesim.clock import Clock
from kubesim.components import COMPONENTS
from kubesim.controllers import ControllerManager
from kubesim.errors import ApiError
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate
from support.waiting import wait_for


@pytest.fixture
def cluster():
    c = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(100), history=50)
    populate(c, {})
    return c


@pytest.fixture
def running(cluster):
    manager = ControllerManager(cluster)
    for register in COMPONENTS:
        register(cluster, manager)
    manager.start()
    yield cluster, manager
    manager.stop()


def rt(cluster, key):
    return cluster.registry.by_key(key)


def cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_resource_versions_are_monotonic_and_noop_updates_keep_them(cluster):
    cms = rt(cluster, "configmaps")
    a = cluster.create(cms, "default", cm("a", k="1"))
    b = cluster.create(cms, "default", cm("b"))
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    same = cluster.update(cms, "default", "a", a)
    assert same["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
    changed = cluster.update(cms, "default", "a", {**a, "data": {"k": "2"}})
    assert int(changed["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])


def test_stale_update_is_a_conflict(cluster):
    cms = rt(cluster, "configmaps")
    first = cluster.create(cms, "default", cm("a", k="1"))
    cluster.update(cms, "default", "a", {**first, "data": {"k": "2"}})
    with pytest.raises(ApiError) as err:
        cluster.update(cms, "default", "a", {**first, "data": {"k": "3"}})
    assert err.value.code == 409 and err.value.reason == "Conflict"
    assert 'Operation cannot be fulfilled on configmaps "a"' in err.value.message


def test_dry_run_changes_nothing(cluster):
    cms = rt(cluster, "configmaps")
    rv = cluster.store.rv
    cluster.create(cms, "default", cm("dry"), RequestContext(dry_run=True))
    assert cluster.find(cms, "default", "dry") is None and cluster.store.rv == rv
    cluster.create(cms, "default", cm("real"))
    rv = cluster.store.rv
    cluster.delete(cms, "default", "real", {}, RequestContext(dry_run=True))
    assert cluster.find(cms, "default", "real") is not None and cluster.store.rv == rv


def test_generation_bumps_on_spec_changes_only(cluster):
    nodes = rt(cluster, "nodes")
    node = cluster.create(nodes, None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert node["metadata"]["generation"] == 1
    labelled = cluster.patch(nodes, None, "n1", "merge", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["generation"] == 1
    cordoned = cluster.patch(nodes, None, "n1", "strategic", {"spec": {"unschedulable": True}})
    assert cordoned["metadata"]["generation"] == 2


def test_status_subresource_separates_spec_and_status(cluster):
    nodes = rt(cluster, "nodes")
    cluster.create(nodes, None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                 "status": {"phase": "ignored"}})
    assert "status" not in cluster.get(nodes, None, "n1")
    cluster.patch(nodes, None, "n1", "merge", {"status": {"capacity": {"cpu": "4"}}}, subresource="status")
    cluster.patch(nodes, None, "n1", "merge", {"status": {"capacity": {"cpu": "99"}}, "spec": {"podCIDR": "x"}})
    node = cluster.get(nodes, None, "n1")
    # SetDefaults_NodeStatus: a status without allocatable gets the capacity as allocatable
    assert node["status"] == {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}} and node["spec"]["podCIDR"] == "x"


def test_generate_name_and_name_validation(cluster):
    cms = rt(cluster, "configmaps")
    made = cluster.create(cms, "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"generateName": "kubevirt-evacuation-"}})
    assert made["metadata"]["name"].startswith("kubevirt-evacuation-") and len(made["metadata"]["name"]) == 25
    with pytest.raises(ApiError) as err:
        cluster.create(cms, "default", cm("Bad_Name"))
    assert err.value.code == 422 and "RFC 1123" in err.value.message
    with pytest.raises(ApiError) as err:
        cluster.create(cms, "missing-ns", cm("x"))
    assert err.value.code == 404 and err.value.message == 'namespaces "missing-ns" not found'


def test_finalizers_hold_deletion_until_removed(cluster):
    cms = rt(cluster, "configmaps")
    cluster.create(cms, "default", {**cm("held"), "metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    deleted = cluster.delete(cms, "default", "held")
    assert deleted["metadata"]["deletionTimestamp"]
    held = cluster.get(cms, "default", "held")
    held["metadata"]["finalizers"] = []
    cluster.update(cms, "default", "held", held)
    assert cluster.find(cms, "default", "held") is None


def test_watch_replays_from_a_resource_version_and_410_after_compaction(cluster):
    cms = rt(cluster, "configmaps")
    start = cluster.list(cms, "default").resource_version
    cluster.create(cms, "default", cm("w1"))
    cluster.patch(cms, "default", "w1", "merge", {"data": {"a": "b"}})
    watcher = cluster.watch(cms, "default", None, None, str(start))
    events = [watcher.events.get_nowait() for _index in range(2)]
    assert [e.type for e in events] == ["ADDED", "MODIFIED"]
    cluster.store.compact()
    with pytest.raises(ApiError) as err:
        cluster.watch(cms, "default", None, None, str(start))
    assert err.value.code == 410 and err.value.reason == "Expired"


def test_watch_with_selector_sees_objects_enter_and_leave(cluster):
    cms = rt(cluster, "configmaps")
    cluster.create(cms, "default", cm("sel"))
    watcher = cluster.watch(cms, "default", "team=a", None, str(cluster.store.rv))
    cluster.patch(cms, "default", "sel", "merge", {"metadata": {"labels": {"team": "a"}}})
    cluster.patch(cms, "default", "sel", "merge", {"metadata": {"labels": {"team": "b"}}})
    assert [watcher.events.get_nowait().type for _index in range(2)] == ["ADDED", "DELETED"]


def test_history_is_bounded_and_compacts_itself(cluster):
    cms = rt(cluster, "configmaps")
    start = cluster.store.rv
    for i in range(60):   # history holds 50 events in this fixture
        cluster.create(cms, "default", cm(f"many-{i}"))
    with pytest.raises(ApiError) as err:
        cluster.watch(cms, "default", None, None, str(start))
    assert err.value.code == 410


def test_pagination_returns_every_item_once(cluster):
    cms = rt(cluster, "configmaps")
    for i in range(23):
        cluster.create(cms, "default", cm(f"p-{i:02d}"))
    seen, token = [], None
    while True:
        page = cluster.list(cms, "default", limit=5, continue_token=token)
        seen += [e.obj["metadata"]["name"] for e in page.items]
        if not page.continue_token:
            break
        assert page.remaining == 23 - len(seen)
        token = page.continue_token
    assert seen == [f"p-{i:02d}" for i in range(23)]
    # ListMeta.remainingItemCount "is not set when the list request contains label or field selectors"
    page = cluster.list(cms, "default", label_selector="!absent", limit=5)
    assert len(page.items) == 5 and page.continue_token and page.remaining is None
    rest = cluster.list(cms, "default", label_selector="!absent", limit=100, continue_token=page.continue_token)
    assert [e.obj["metadata"]["name"] for e in rest.items] == [f"p-{i:02d}" for i in range(5, 23)] and not rest.continue_token


def test_garbage_collection_and_orphaning(running):
    cluster, manager = running
    cms = rt(cluster, "configmaps")
    owner = cluster.create(cms, "default", cm("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    for name in ("dep-1", "dep-2"):
        cluster.create(cms, "default", {**cm(name), "metadata": {"name": name, "ownerReferences": [ref]}})
    cluster.delete(cms, "default", "owner", {"propagationPolicy": "Background"})
    assert manager.wait_idle()
    assert cluster.find(cms, "default", "dep-1") is None and cluster.find(cms, "default", "dep-2") is None

    owner = cluster.create(cms, "default", cm("owner2"))
    ref = {**ref, "name": "owner2", "uid": owner["metadata"]["uid"]}
    cluster.create(cms, "default", {**cm("kept"), "metadata": {"name": "kept", "ownerReferences": [ref]}})
    cluster.delete(cms, "default", "owner2", {"propagationPolicy": "Orphan"})
    assert manager.wait_idle()
    kept = cluster.get(cms, "default", "kept")
    assert "ownerReferences" not in kept["metadata"]


def test_graceful_pod_deletion_and_namespace_termination(running):
    cluster, manager = running
    pods, nss = rt(cluster, "pods"), rt(cluster, "namespaces")
    cluster.create(nss, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    cluster.create(pods, "doomed", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}})
    assert manager.wait_idle()
    assert cluster.get(pods, "doomed", "p")["status"]["phase"] == "Running"
    cluster.delete(nss, None, "doomed")
    assert cluster.get(nss, None, "doomed")["metadata"]["deletionTimestamp"]
    assert manager.wait_idle()
    pod = cluster.find(pods, "doomed", "p")
    assert pod is None or pod["metadata"]["deletionTimestamp"]
    # 30 s grace at timeScale 100 = 0.3 s
    wait_for(lambda: cluster.find(nss, None, "doomed") is None, interval=0.05, what="namespace doomed removed after the Pod's grace")
    assert cluster.find(pods, "doomed", "p") is None
    assert cluster.find(nss, None, "doomed") is None
