"""Server-side dry run (`dryRun=All`) on every write, in process: create, update, every patch type (server-side
apply included, with create-if-absent), status writes, delete (immediate, graceful, finalizers, Foreground,
Orphan, a Namespace), deletecollection and pods/eviction (PDB check). Each test asserts that the dry run
changes neither the objects nor the resourceVersion nor the event stream (the store's listeners and a watch),
and that its answer is what the real write then answers."""
import copy

import pytest

from kubesim import subresources
from kubesim.api import RequestContext
from kubesim.components import COMPONENTS
from kubesim.errors import ApiError
from kubesim.scenario import populate

import in_process

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-a"},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.fixture
def cluster():
    c = in_process.bare_cluster()
    populate(c, {"namespaces": ["ops"], "objects": [NODE]})
    return c


@pytest.fixture
def running():
    with in_process.running(in_process.bare_cluster(), COMPONENTS, {"namespaces": ["ops"], "objects": [NODE]}, settle=True) as started:
        yield started


def rt(cluster, key):
    return cluster.registry.by_key(key)


def dry():
    return RequestContext(dry_run=True)


def cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def pod(name, node="worker-a", **meta):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}


class Unchanged:
    """Snapshot of a cluster (every object, the resourceVersion) plus a recorder of store events and a watch
    on one resource; `check()` asserts nothing changed since."""

    def __init__(self, cluster, watched="configmaps"):
        self.cluster = cluster
        self.rv = cluster.store.rv
        self.objects = self._objects()
        self.events = []
        cluster.add_listener(self.events.append)
        self.watch = cluster.watch(rt(cluster, watched), None, None, None, str(self.rv))

    def _objects(self):
        with self.cluster.lock:
            return {(t.key, e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"]): copy.deepcopy(e.obj)
                    for t in self.cluster.registry.types for e in self.cluster.store.entries(t.key)}

    def check(self):
        assert self.cluster.store.rv == self.rv
        assert self.events == []
        assert self.watch.events.empty()
        assert self._objects() == self.objects


def without(obj, *paths):
    """A copy of obj without the given metadata keys (values that differ between any two writes)."""
    obj = copy.deepcopy(obj)
    for key in paths:
        obj["metadata"].pop(key, None)
    return obj


# ------------------------------------------------------------------------------------------- create
def test_dry_run_create_answers_the_object_with_generated_name_and_uid_and_stores_nothing(cluster):
    cms = rt(cluster, "configmaps")
    rng_state = cluster.rng.getstate()
    unchanged = Unchanged(cluster)
    answer = cluster.create(cms, "ops", {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"generateName": "plan-"}, "data": {"k": "v"}}, dry())
    assert answer["metadata"]["name"].startswith("plan-") and len(answer["metadata"]["name"]) == 10
    assert answer["metadata"]["uid"] and answer["metadata"]["creationTimestamp"]
    assert "resourceVersion" not in answer["metadata"]          # nothing was written
    assert cluster.find(cms, "ops", answer["metadata"]["name"]) is None
    assert cluster.rng.getstate() == rng_state                  # the cluster's generated names are untouched
    unchanged.check()
    real = cluster.create(cms, "ops", {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"generateName": "plan-"}, "data": {"k": "v"}})
    volatile = ("name", "uid", "creationTimestamp")
    assert without(answer, *volatile) == without(real, *volatile, "resourceVersion")


def test_dry_run_create_applies_defaults_like_the_real_create(cluster):
    pods = rt(cluster, "pods")
    unchanged = Unchanged(cluster, "pods")
    answer = cluster.create(pods, "ops", pod("p"), dry())
    assert answer["spec"]["restartPolicy"] == "Always" and answer["status"]["phase"] == "Pending"
    unchanged.check()
    real = cluster.create(pods, "ops", pod("p"))
    assert without(answer, "uid", "creationTimestamp") == without(real, "uid", "creationTimestamp", "resourceVersion")


def test_dry_run_create_refuses_what_the_real_create_refuses(cluster):
    cms = rt(cluster, "configmaps")
    cluster.create(cms, "ops", cm("taken"))
    unchanged = Unchanged(cluster)
    with pytest.raises(ApiError) as err:
        cluster.create(cms, "ops", cm("taken"), dry())
    assert err.value.code == 409 and err.value.message == 'configmaps "taken" already exists'
    with pytest.raises(ApiError) as err:
        cluster.create(cms, "missing", cm("x"), dry())
    assert err.value.code == 404
    unchanged.check()


# ------------------------------------------------------------------------------------ update, patch
def test_dry_run_update_answers_the_new_object_at_the_current_resource_version(cluster):
    cms = rt(cluster, "configmaps")
    stored = cluster.create(cms, "ops", cm("u", k="1"))
    unchanged = Unchanged(cluster)
    answer = cluster.update(cms, "ops", "u", {**stored, "data": {"k": "2"}}, dry())
    assert answer["data"] == {"k": "2"}
    assert answer["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    unchanged.check()
    assert cluster.get(cms, "ops", "u")["data"] == {"k": "1"}
    real = cluster.update(cms, "ops", "u", {**stored, "data": {"k": "2"}})
    assert int(real["metadata"]["resourceVersion"]) > int(stored["metadata"]["resourceVersion"])
    assert without(answer, "resourceVersion") == without(real, "resourceVersion")


def test_dry_run_update_still_conflicts_on_a_stale_resource_version(cluster):
    cms = rt(cluster, "configmaps")
    first = cluster.create(cms, "ops", cm("c", k="1"))
    cluster.update(cms, "ops", "c", {**first, "data": {"k": "2"}})
    unchanged = Unchanged(cluster)
    with pytest.raises(ApiError) as err:
        cluster.update(cms, "ops", "c", {**first, "data": {"k": "3"}}, dry())
    assert err.value.code == 409
    unchanged.check()


PATCHES = [
    ("merge", {"data": {"k": "2"}, "metadata": {"labels": {"team": "ops"}}}),
    ("json", [{"op": "replace", "path": "/data/k", "value": "2"}, {"op": "add", "path": "/data/extra", "value": "x"}]),
    ("strategic", {"data": {"k": "2"}}),
    ("apply", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"k": "2"}}),
]


@pytest.mark.parametrize("patch_type,patch", PATCHES, ids=[p[0] for p in PATCHES])
def test_dry_run_patch_of_every_type(cluster, patch_type, patch):
    cms = rt(cluster, "configmaps")
    stored = cluster.create(cms, "ops", cm("p", k="1"))
    unchanged = Unchanged(cluster)
    force = patch_type == "apply"   # data.k belongs to the creator: an apply changing it must force (or conflict)
    answer = cluster.patch(cms, "ops", "p", patch_type, patch, RequestContext(dry_run=True, field_manager="me"),
                           force=force)
    assert answer["data"]["k"] == "2"
    assert answer["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    unchanged.check()
    real = cluster.patch(cms, "ops", "p", patch_type, patch, RequestContext(field_manager="me"), force=force)
    assert without(answer, "resourceVersion") == without(real, "resourceVersion")


def test_dry_run_server_side_apply_of_an_absent_object_creates_nothing(cluster):
    cms = rt(cluster, "configmaps")
    unchanged = Unchanged(cluster)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}, "data": {"k": "v"}}
    answer = cluster.patch(cms, "ops", "new", "apply", body, RequestContext(dry_run=True, field_manager="me"))
    assert answer["metadata"]["name"] == "new" and "resourceVersion" not in answer["metadata"]
    unchanged.check()
    with pytest.raises(ApiError) as err:       # the fieldManager is still required
        cluster.patch(cms, "ops", "new", "apply", body, dry())
    assert err.value.message == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
                                 "for apply patch")
    unchanged.check()


def test_dry_run_spec_change_shows_the_generation_bump(cluster):
    nodes = rt(cluster, "nodes")
    before = cluster.get(nodes, None, "worker-a")
    unchanged = Unchanged(cluster, "nodes")
    answer = cluster.patch(nodes, None, "worker-a", "strategic", {"spec": {"unschedulable": True}}, dry())
    assert answer["metadata"]["generation"] == before["metadata"]["generation"] + 1
    unchanged.check()


def test_dry_run_status_subresource(cluster):
    nodes = rt(cluster, "nodes")
    unchanged = Unchanged(cluster, "nodes")
    patch = {"status": {"capacity": {"cpu": "32"}}}
    answer = cluster.patch(nodes, None, "worker-a", "merge", patch, dry(), subresource="status")
    assert answer["status"]["capacity"] == {"cpu": "32"}
    update = cluster.update(nodes, None, "worker-a", answer, dry(), subresource="status")
    assert update["status"]["capacity"] == {"cpu": "32"}
    unchanged.check()
    real = cluster.patch(nodes, None, "worker-a", "merge", patch, subresource="status")
    assert without(answer, "resourceVersion") == without(real, "resourceVersion")


# ------------------------------------------------------------------------------------------- delete
def test_dry_run_delete_of_an_object_that_would_go_at_once(cluster):
    cms = rt(cluster, "configmaps")
    stored = cluster.create(cms, "ops", cm("gone"))
    unchanged = Unchanged(cluster)
    answer = cluster.delete(cms, "ops", "gone", {}, dry())
    assert answer["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    answer = cluster.delete(cms, "ops", "gone", {"dryRun": ["All"]})     # dryRun in the DeleteOptions
    unchanged.check()
    real = cluster.delete(cms, "ops", "gone", {})
    assert without(answer, "resourceVersion", "deletionTimestamp") == without(real, "resourceVersion",
                                                                              "deletionTimestamp")
    assert cluster.find(cms, "ops", "gone") is None


def test_dry_run_delete_of_a_running_pod_answers_the_graceful_deletion(running):
    cluster, manager = running
    pods = rt(cluster, "pods")
    cluster.create(pods, "ops", pod("web"))
    assert manager.wait_idle()
    unchanged = Unchanged(cluster, "pods")
    answer = cluster.delete(pods, "ops", "web", {"gracePeriodSeconds": 60}, dry())
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 60 and answer["metadata"]["deletionTimestamp"]
    assert manager.wait_idle()
    unchanged.check()                       # the kubelet saw nothing to stop
    assert cluster.get(pods, "ops", "web")["status"]["phase"] == "Running"


def test_dry_run_delete_with_finalizers_and_foreground_runs_nothing(running):
    cluster, manager = running
    cms = rt(cluster, "configmaps")
    owner = cluster.create(cms, "ops", {**cm("owner"), "metadata": {"name": "owner", "finalizers": ["example.com/x"]}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    cluster.create(cms, "ops", {**cm("dep"), "metadata": {"name": "dep", "ownerReferences": [ref]}})
    assert manager.wait_idle()
    unchanged = Unchanged(cluster)
    answer = cluster.delete(cms, "ops", "owner", {"propagationPolicy": "Foreground"}, dry())
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["finalizers"] == ["example.com/x", "foregroundDeletion"]
    for policy in ("Background", "Orphan"):
        cluster.delete(cms, "ops", "owner", {"propagationPolicy": policy}, dry())
    assert manager.wait_idle()
    unchanged.check()                       # no deletionTimestamp, dependents keep their ownerReferences
    assert cluster.get(cms, "ops", "dep")["metadata"]["ownerReferences"] == [ref]


def test_dry_run_delete_without_finalizers_runs_no_garbage_collection(running):
    cluster, manager = running
    cms = rt(cluster, "configmaps")
    owner = cluster.create(cms, "ops", cm("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    cluster.create(cms, "ops", {**cm("dep"), "metadata": {"name": "dep", "ownerReferences": [ref]}})
    assert manager.wait_idle()
    unchanged = Unchanged(cluster)
    cluster.delete(cms, "ops", "owner", {"propagationPolicy": "Background"}, dry())
    assert manager.wait_idle()
    unchanged.check()


def test_dry_run_namespace_delete_answers_terminating_and_empties_nothing(running):
    cluster, manager = running
    nss, cms = rt(cluster, "namespaces"), rt(cluster, "configmaps")
    cluster.create(cms, "ops", cm("kept"))
    assert manager.wait_idle()
    unchanged = Unchanged(cluster, "namespaces")
    answer = cluster.delete(nss, None, "ops", {}, dry())
    assert answer["status"]["phase"] == "Terminating" and answer["metadata"]["deletionTimestamp"]
    assert manager.wait_idle()
    unchanged.check()


def test_dry_run_delete_collection(cluster):
    cms = rt(cluster, "configmaps")
    for name in ("a", "b"):
        cluster.create(cms, "ops", {**cm(name), "metadata": {"name": name, "labels": {"batch": "1"}}})
    unchanged = Unchanged(cluster)
    answer = cluster.delete_collection(cms, "ops", "batch=1", None, {}, dry())
    assert [o["metadata"]["name"] for o in answer] == ["a", "b"]
    cluster.delete_collection(cms, "ops", "batch=1", None, {"dryRun": ["All"]})
    unchanged.check()


def test_dry_run_delete_checks_preconditions(cluster):
    cms = rt(cluster, "configmaps")
    cluster.create(cms, "ops", cm("pre"))
    unchanged = Unchanged(cluster)
    with pytest.raises(ApiError) as err:
        cluster.delete(cms, "ops", "pre", {"preconditions": {"uid": "other"}}, dry())
    assert err.value.code == 409 and "Precondition failed: UID in precondition: other" in err.value.message
    unchanged.check()


# ----------------------------------------------------------------------------------------- eviction
def eviction(name, dry_options=False):
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "ops"}}
    if dry_options:
        body["deleteOptions"] = {"dryRun": ["All"]}
    return body


@pytest.mark.parametrize("where", ["query", "deleteOptions"])
def test_dry_run_eviction_deletes_no_pod(running, where):
    cluster, manager = running
    pods = rt(cluster, "pods")
    cluster.create(pods, "ops", pod("web"))
    assert manager.wait_idle()
    unchanged = Unchanged(cluster, "pods")
    ctx = dry() if where == "query" else RequestContext()
    answer = subresources.evict(cluster, "ops", "web", eviction("web", where == "deleteOptions"), ctx)
    assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    assert manager.wait_idle()
    unchanged.check()


def test_dry_run_eviction_with_conflicting_dry_runs_is_an_error(running):
    cluster, manager = running
    cluster.create(rt(cluster, "pods"), "ops", pod("web"))
    assert manager.wait_idle()
    body = {**eviction("web"), "deleteOptions": {"dryRun": ["Other"]}}
    with pytest.raises(ApiError) as err:
        subresources.evict(cluster, "ops", "web", body, dry())
    assert err.value.code == 500
    assert err.value.message == ("Internal error occurred: DryRun in DeleteOptions ([Other]) doesn't match DryRun in "
                                 "CreateOptions ([All])")


@pytest.mark.parametrize("where", ["query", "deleteOptions"])
def test_dry_run_eviction_changes_no_pdb_status(running, where):
    cluster, manager = running
    pods, pdbs = rt(cluster, "pods"), rt(cluster, "poddisruptionbudgets.policy")
    for name in ("web-1", "web-2"):
        cluster.create(pods, "ops", pod(name, labels={"app": "web"}))
    cluster.create(pdbs, "ops", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                                 "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    assert manager.wait_idle()
    assert cluster.get(pdbs, "ops", "web")["status"]["disruptionsAllowed"] == 1
    unchanged = Unchanged(cluster, "poddisruptionbudgets.policy")
    ctx = dry() if where == "query" else RequestContext()
    for _again in range(2):     # a budget of one, yet every dry run passes: nothing is spent
        subresources.evict(cluster, "ops", "web-1", eviction("web-1", where == "deleteOptions"), ctx)
    assert manager.wait_idle()
    unchanged.check()
    subresources.evict(cluster, "ops", "web-1", eviction("web-1"), RequestContext())   # the real one spends it
    status = cluster.get(pdbs, "ops", "web")["status"]
    assert status["disruptionsAllowed"] == 0 and "web-1" in status["disruptedPods"]
    with pytest.raises(ApiError) as err:        # and a dry run now gets the real refusal
        subresources.evict(cluster, "ops", "web-2", eviction("web-2", True), RequestContext())
    assert err.value.code == 429 and err.value.message == ("Cannot evict pod as it would violate the pod's "
                                                           "disruption budget.")
