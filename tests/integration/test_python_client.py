"""The `kubernetes` Python client (typed APIs, the dynamic client, watch) against the simulator: CRUD of
built-in and custom kinds, the three patch types, selectors, pagination, optimistic concurrency, dry runs,
error Status bodies, garbage collection, graceful Pod deletion, namespace deletion and 410 on old watches.

The tests share one simulator per module; each works in namespaces and objects of its own."""
from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from support.waiting import wait_for

pytestmark = pytest.mark.simulator

MERGE = "application/merge-patch+json"


# ------------------------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def sim(two_workers):
    return two_workers


@pytest.fixture(scope="module")
def api(sim):
    return config.new_client_from_config(config_file=sim.kubeconfig, context="workload")


@pytest.fixture(scope="module")
def global_api(sim):
    return config.new_client_from_config(config_file=sim.kubeconfig, context="global")


@pytest.fixture(scope="module")
def core(api):
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def custom(api):
    return client.CustomObjectsApi(api)


@pytest.fixture(scope="module")
def dyn(api, tmp_path_factory):
    return DynamicClient(api, cache_file=str(tmp_path_factory.mktemp("dyn") / "discovery.json"))


@pytest.fixture(scope="module")
def global_dyn(global_api, tmp_path_factory):
    return DynamicClient(global_api, cache_file=str(tmp_path_factory.mktemp("dyn-global") / "discovery.json"))


@pytest.fixture
def ns(core, request):
    """A namespace of the test's own."""
    name = "pc-" + request.node.name.removeprefix("test_").replace("_", "-")[:50].rstrip("-")
    core.create_namespace({"metadata": {"name": name}})
    return name


def status_body(exc: ApiException) -> dict:
    return json.loads(exc.body)


def exists(read, *args) -> bool:
    try:
        read(*args)
        return True
    except ApiException as exc:
        assert exc.status == 404, exc
        return False


def pod_manifest(name: str, node: str | None = "worker-a", labels: dict | None = None, grace: int | None = None,
                 owner: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
    if node:
        spec["nodeName"] = node
    else:   # no scheduler serves this name: the Pod stays Pending and unbound, as with a real cluster
        spec["schedulerName"] = "manual"
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    meta: dict = {"name": name, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def vmi_manifest(name: str, node: str = "worker-a", labels: dict | None = None) -> dict:
    # kubesim.io/unmanaged: a plain custom object here, not run by the simulated KubeVirt controllers
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "labels": labels or {"kubevirt.io/vm": name},
                         "annotations": {"kubesim.io/unmanaged": "true"}},
            "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}}}},
            "status": {"phase": "Running", "nodeName": node}}


# ------------------------------------------------------------------------------ typed CRUD: ConfigMaps
def test_configmap_create_get_list_replace_delete(core, ns):
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg", "labels": {"app": "x"}},
                                                     "data": {"a": "1"}})
    assert isinstance(created, client.V1ConfigMap)
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert int(created.metadata.resource_version) > 0
    got = core.read_namespaced_config_map("cfg", ns)
    assert got.data == {"a": "1"} and got.metadata.uid == created.metadata.uid
    listed = core.list_namespaced_config_map(ns)
    assert [c.metadata.name for c in listed.items] == ["cfg"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)

    got.data = {"b": "2"}
    replaced = core.replace_namespaced_config_map("cfg", ns, got)
    assert replaced.data == {"b": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert core.read_namespaced_config_map("cfg", ns).data == {"b": "2"}

    core.delete_namespaced_config_map("cfg", ns)
    assert not exists(core.read_namespaced_config_map, "cfg", ns)


def test_configmap_patch_strategic_merge_and_json(core, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "p", "labels": {"keep": "1", "drop": "1"}},
                                           "data": {"a": "1", "b": "2"}})
    # A dict body is sent as a strategic merge patch by the typed client.
    strategic = core.patch_namespaced_config_map("p", ns, {"data": {"c": "3"}})
    assert strategic.data == {"a": "1", "b": "2", "c": "3"}
    merged = core.patch_namespaced_config_map("p", ns, {"metadata": {"labels": {"drop": None}}, "data": {"a": None}},
                                              _content_type=MERGE)
    assert merged.metadata.labels == {"keep": "1"} and merged.data == {"b": "2", "c": "3"}
    json_patched = core.patch_namespaced_config_map("p", ns, [
        {"op": "replace", "path": "/data/b", "value": "20"},
        {"op": "remove", "path": "/data/c"},
        {"op": "add", "path": "/metadata/annotations", "value": {"note": "json"}}])
    assert json_patched.data == {"b": "20"} and json_patched.metadata.annotations == {"note": "json"}
    with pytest.raises(ApiException) as failed:     # a failing `test` operation changes nothing
        core.patch_namespaced_config_map("p", ns, [{"op": "test", "path": "/data/b", "value": "nope"},
                                                   {"op": "remove", "path": "/data/b"}])
    assert failed.value.status == 422 and "test failed" in status_body(failed.value)["message"]
    assert core.read_namespaced_config_map("p", ns).data == {"b": "20"}


def test_generate_name_gives_distinct_names(core, ns):
    names = {core.create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}}).metadata.name
             for _index in range(3)}
    assert len(names) == 3
    assert all(n.startswith("gen-") and len(n) == len("gen-") + 5 for n in names)
    assert {c.metadata.name for c in core.list_namespaced_config_map(ns).items} == names


# ------------------------------------------------------------------------------------- Pods and Nodes
def test_pod_crud_and_kubelet_marks_bound_pod_running(core, ns):
    pod = core.create_namespaced_pod(ns, pod_manifest("app", labels={"app": "a"}))
    assert isinstance(pod, client.V1Pod) and pod.spec.node_name == "worker-a"
    running = wait_for(lambda: (p := core.read_namespaced_pod("app", ns)).status.phase == "Running" and p,
                       timeout=10, interval=0.05, what="the pod to run")
    ready = {c.type: c.status for c in running.status.conditions}
    assert ready["Ready"] == "True"
    assert running.status.container_statuses[0].ready is True
    patched = core.patch_namespaced_pod("app", ns, {"metadata": {"labels": {"tier": "web"}}})
    assert patched.metadata.labels == {"app": "a", "tier": "web"}
    # Strategic merge keeps the other containers fields and merges containers by name.
    new_image = {"spec": {"containers": [{"name": "main", "image": "registry.example/app:2"}]}}
    patched = core.patch_namespaced_pod("app", ns, new_image)
    assert [c.image for c in patched.spec.containers] == ["registry.example/app:2"]
    core.delete_namespaced_pod("app", ns, grace_period_seconds=0)
    wait_for(lambda: not exists(core.read_namespaced_pod, "app", ns), timeout=10, interval=0.05, what="the pod to go")


def test_nodes_list_patch_replace_create_delete(core):
    names = {n.metadata.name for n in core.list_node().items}
    assert {"control-plane-1", "worker-a", "worker-b"} <= names
    worker = core.read_node("worker-b")
    assert worker.status.node_info.kubelet_version == "v1.35.0"
    cordoned = core.patch_node("worker-b", {"spec": {"unschedulable": True}})
    assert cordoned.spec.unschedulable is True
    uncordoned = core.patch_node("worker-b", {"spec": {"unschedulable": None}})
    assert not uncordoned.spec.unschedulable
    labelled = core.patch_node("worker-b", {"metadata": {"labels": {"pc-test": "yes"}}}, _content_type=MERGE)
    assert labelled.metadata.labels["pc-test"] == "yes"

    created = core.create_node({"metadata": {"name": "pc-node", "labels": {"pool": "a"}}})
    assert created.metadata.namespace is None
    created.metadata.labels["pool"] = "b"
    assert core.replace_node("pc-node", created).metadata.labels["pool"] == "b"
    core.delete_node("pc-node")
    assert not exists(core.read_node, "pc-node")
    core.patch_node("worker-b", {"metadata": {"labels": {"pc-test": None}}}, _content_type=MERGE)


def test_batch_job_crud(api, ns):
    batch = client.BatchV1Api(api)
    job = {"metadata": {"name": "once", "labels": {"run": "1"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    created = batch.create_namespaced_job(ns, job)
    assert isinstance(created, client.V1Job) and created.spec.backoff_limit == 6
    assert [j.metadata.name for j in batch.list_namespaced_job(ns, label_selector="run=1").items] == ["once"]
    patched = batch.patch_namespaced_job("once", ns, {"spec": {"suspend": True}})
    assert patched.spec.suspend is True
    assert any(j.metadata.name == "once" for j in batch.list_job_for_all_namespaces().items)
    batch.delete_namespaced_job("once", ns, propagation_policy="Background")
    assert not exists(batch.read_namespaced_job, "once", ns)


# --------------------------------------------------------------------------------------- custom kinds
def test_custom_objects_api_vmi_crud(custom, ns):
    args = ("kubevirt.io", "v1", ns, "virtualmachineinstances")
    created = custom.create_namespaced_custom_object(*args, vmi_manifest("vm-a"))
    assert created["kind"] == "VirtualMachineInstance" and created["metadata"]["uid"]
    assert "status" not in created or created["status"] == {} or "phase" not in created["status"], \
        "clients cannot set the status of a kind with a status subresource"
    got = custom.get_namespaced_custom_object(*args, "vm-a")
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    listed = custom.list_namespaced_custom_object(*args)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["vm-a"]
    assert listed["kind"] == "VirtualMachineInstanceList"
    patched = custom.patch_namespaced_custom_object(*args, "vm-a", {"metadata": {"labels": {"x": "y"}}})
    assert patched["metadata"]["labels"] == {"kubevirt.io/vm": "vm-a", "x": "y"}
    status = custom.patch_namespaced_custom_object_status(*args, "vm-a", {"status": {"phase": "Running"}})
    assert status["status"]["phase"] == "Running"
    status["spec"]["domain"]["resources"]["requests"]["memory"] = "2Gi"
    replaced = custom.replace_namespaced_custom_object(*args, "vm-a", status)
    assert replaced["spec"]["domain"]["resources"]["requests"]["memory"] == "2Gi"
    assert replaced["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as strategic:
        custom.patch_namespaced_custom_object(*args, "vm-a", {"metadata": {"labels": {"z": "1"}}},
                                              _content_type="application/strategic-merge-patch+json")
    assert strategic.value.status == 415
    all_ns = custom.list_cluster_custom_object("kubevirt.io", "v1", "virtualmachineinstances")
    assert "vm-a" in [i["metadata"]["name"] for i in all_ns["items"]]
    custom.delete_namespaced_custom_object(*args, "vm-a")
    with pytest.raises(ApiException) as gone:
        custom.get_namespaced_custom_object(*args, "vm-a")
    assert gone.value.status == 404
    assert status_body(gone.value)["details"] == {"name": "vm-a", "group": "kubevirt.io",
                                                  "kind": "virtualmachineinstances"}


def test_dynamic_client_configmap_and_vmi(dyn, ns):
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    created = cms.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"},
                               "data": {"a": "1"}}, namespace=ns)
    assert created.metadata.name == "d" and created.data.a == "1"
    assert cms.get(name="d", namespace=ns).metadata.uid == created.metadata.uid
    assert [i.metadata.name for i in cms.get(namespace=ns).items] == ["d"]
    patched = cms.patch(name="d", namespace=ns, body={"data": {"b": "2"}})      # strategic by default
    assert dict(patched.data) == {"a": "1", "b": "2"}
    patched = cms.patch(name="d", namespace=ns, body={"data": {"a": None}}, content_type=MERGE)
    assert dict(patched.data) == {"b": "2"}
    patched = cms.patch(name="d", namespace=ns, body=[{"op": "add", "path": "/data/c", "value": "3"}],
                        content_type="application/json-patch+json")
    assert dict(patched.data) == {"b": "2", "c": "3"}
    body = patched.to_dict()
    body["data"] = {"only": "this"}
    assert dict(cms.replace(body=body, namespace=ns).data) == {"only": "this"}
    cms.delete(name="d", namespace=ns)
    with pytest.raises(ApiException) as missing:
        cms.get(name="d", namespace=ns)
    assert missing.value.status == 404

    vmis = dyn.resources.get(api_version="kubevirt.io/v1", kind="VirtualMachineInstance")
    assert vmis.namespaced and vmis.name == "virtualmachineinstances"
    assert "vmi" in vmis.short_names
    vmis.create(body=vmi_manifest("dyn-vm"), namespace=ns)
    patched = vmis.patch(name="dyn-vm", namespace=ns, body={"metadata": {"labels": {"d": "1"}}},
                         content_type=MERGE)
    assert patched.metadata.labels.d == "1"
    assert [i.metadata.name for i in vmis.get(namespace=ns, label_selector="d=1").items] == ["dyn-vm"]
    vmis.delete(name="dyn-vm", namespace=ns)
    assert vmis.get(namespace=ns).items == []


def test_dynamic_lookup_by_kind_per_cluster(dyn, global_dyn):
    # Lookup by kind alone walks every served group-version of the cluster.
    assert dyn.resources.get(kind="VirtualMachineInstance").group == "kubevirt.io"
    with pytest.raises(ResourceNotFoundError):
        dyn.resources.get(kind="ModuleInfo")
    module_info = global_dyn.resources.get(kind="ModuleInfo")
    assert module_info.group == "cluster.alauda.io" and module_info.namespaced is False
    with pytest.raises(ResourceNotFoundError):
        global_dyn.resources.get(kind="VirtualMachineInstance")
    created = module_info.create(body={"apiVersion": module_info.group_version, "kind": "ModuleInfo",
                                       "metadata": {"name": "pc-module"}, "spec": {}})
    assert created.metadata.name == "pc-module"
    assert "pc-module" in [i.metadata.name for i in module_info.get().items]
    module_info.delete(name="pc-module")


# ------------------------------------------------------------------------------------------- watches
def test_watch_sees_added_modified_deleted_from_another_thread(core, ns):
    rv = core.list_namespaced_config_map(ns).metadata.resource_version

    def writer():
        time.sleep(0.3)
        core.create_namespaced_config_map(ns, {"metadata": {"name": "w"}, "data": {"v": "1"}})
        core.patch_namespaced_config_map("w", ns, {"data": {"v": "2"}})
        core.delete_namespaced_config_map("w", ns)

    thread = threading.Thread(target=writer)
    thread.start()
    events = []
    w = watch.Watch()
    try:
        for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=10):
            events.append((event["type"], event["object"].metadata.name, (event["object"].data or {}).get("v")))
            assert isinstance(event["object"], client.V1ConfigMap)
            if event["type"] == "DELETED":
                w.stop()
    finally:
        thread.join()
    assert events == [("ADDED", "w", "1"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")]


def test_watch_custom_objects_with_label_selector(custom, ns):
    args = ("kubevirt.io", "v1", ns, "virtualmachineinstances")
    rv = custom.list_namespaced_custom_object(*args)["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(*args, vmi_manifest("other", labels={"watch": "no"}))
    custom.create_namespaced_custom_object(*args, vmi_manifest("seen", labels={"watch": "yes"}))
    w = watch.Watch()
    events = []
    for event in w.stream(custom.list_namespaced_custom_object, *args, label_selector="watch=yes",
                          resource_version=rv, timeout_seconds=3):
        events.append((event["type"], event["object"]["metadata"]["name"]))
        w.stop()
    assert events == [("ADDED", "seen")]


def test_watch_from_compacted_resource_version_gets_410(sim, core, ns):
    old_rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "after"}})
    compacted = sim.admin("POST", "compact?cluster=workload")["compactedResourceVersion"]
    assert int(compacted) > int(old_rv)
    # The simulator answers with an ERROR event carrying a 410 Expired Status; the client retries once from
    # the same version and then raises it as an ApiException (or at once when timeout_seconds is set).
    for kwargs in ({"timeout_seconds": 5}, {}):
        with pytest.raises(ApiException) as expired:
            for _event in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=old_rv, **kwargs):
                pass
        assert expired.value.status == 410
        assert expired.value.reason.startswith("Expired: too old resource version")
    # A watch from a fresh list works again.
    fresh = core.list_namespaced_config_map(ns).metadata.resource_version
    assert list(watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=fresh,
                                     timeout_seconds=1)) == []


# -------------------------------------------------------------------------------- lists and selectors
def test_pagination_covers_every_item_exactly_once(core, ns):
    for i in range(23):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"page-{i:02d}"}})
    seen, token, pages, remaining = [], None, 0, []
    while True:
        page = core.list_namespaced_config_map(ns, limit=5, _continue=token)
        pages += 1
        seen += [c.metadata.name for c in page.items]
        assert len(page.items) <= 5
        token = page.metadata._continue
        if not token:
            assert page.metadata.remaining_item_count is None
            break
        remaining.append(page.metadata.remaining_item_count)
    assert pages == 5
    assert sorted(seen) == [f"page-{i:02d}" for i in range(23)] and len(seen) == len(set(seen))
    assert remaining == [18, 13, 8, 3]
    with pytest.raises(ApiException) as bad:
        core.list_namespaced_config_map(ns, limit=5, _continue="not-a-token")
    assert bad.value.status == 400


def test_label_selectors(core, ns):
    labelled = {"a": {"app": "web", "tier": "fe"}, "b": {"app": "db", "tier": "be"}, "c": {"app": "cache"},
                "d": {}}
    for name, labels in labelled.items():
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": labels}})

    def names(selector: str) -> list[str]:
        return sorted(c.metadata.name for c in core.list_namespaced_config_map(ns, label_selector=selector).items)

    assert names("app=web") == ["a"]
    assert names("app==db") == ["b"]
    assert names("app!=web") == ["b", "c", "d"]
    assert names("app in (web,cache)") == ["a", "c"]
    assert names("app notin (web,cache)") == ["b", "d"]
    assert names("tier") == ["a", "b"]
    assert names("!tier") == ["c", "d"]
    assert names("app,!tier") == ["c"]
    assert names("app=web,tier=be") == []
    with pytest.raises(ApiException) as bad:
        names("app in web")
    assert bad.value.status == 400


def test_field_selectors(core, ns):
    core.create_namespaced_pod(ns, pod_manifest("bound-a", node="worker-a"))
    core.create_namespaced_pod(ns, pod_manifest("bound-b", node="worker-b"))
    core.create_namespaced_pod(ns, pod_manifest("pending", node=None))
    wait_for(lambda: all(p.status.phase == "Running" for p in
                         core.list_namespaced_pod(ns, field_selector="spec.nodeName!=").items),
             timeout=10, interval=0.05, what="bound pods to run")

    def names(selector: str, namespace: str | None = ns) -> list[str]:
        pods = (core.list_namespaced_pod(namespace, field_selector=selector) if namespace else
                core.list_pod_for_all_namespaces(field_selector=selector))
        return sorted(f"{p.metadata.namespace}/{p.metadata.name}" if not namespace else p.metadata.name
                      for p in pods.items)

    assert names("spec.nodeName=worker-a") == ["bound-a"]
    assert names("spec.nodeName=") == ["pending"]
    assert names("status.phase=Pending") == ["pending"]
    assert names("status.phase=Running") == ["bound-a", "bound-b"]
    assert names("status.phase!=Running,spec.nodeName!=worker-a") == ["pending"]
    assert names("metadata.name=bound-b") == ["bound-b"]
    assert names(f"metadata.namespace={ns}", namespace=None) == [f"{ns}/bound-a", f"{ns}/bound-b", f"{ns}/pending"]
    assert "default/web-1" in names("spec.nodeName=worker-a", namespace=None)
    assert names("metadata.namespace=default,metadata.name=web-2", namespace=None) == ["default/web-2"]
    with pytest.raises(ApiException) as bad:
        names("spec.unknown=x")
    assert bad.value.status == 400 and "field label not supported" in status_body(bad.value)["message"]


# ------------------------------------------------------------------------- concurrency, dry run, errors
def test_replace_with_stale_resource_version_is_409_conflict(core, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"v": "0"}})
    stale = core.read_namespaced_config_map("c", ns)
    fresh = core.read_namespaced_config_map("c", ns)
    fresh.data = {"v": "1"}
    core.replace_namespaced_config_map("c", ns, fresh)
    stale.data = {"v": "stale"}
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("c", ns, stale)
    assert conflict.value.status == 409
    body = status_body(conflict.value)
    assert body["reason"] == "Conflict" and body["code"] == 409 and body["kind"] == "Status"
    assert 'Operation cannot be fulfilled on configmaps "c"' in body["message"]
    assert core.read_namespaced_config_map("c", ns).data == {"v": "1"}
    # A patch carrying a stale resourceVersion is refused the same way.
    with pytest.raises(ApiException) as patch_conflict:
        core.patch_namespaced_config_map("c", ns, {"metadata": {"resourceVersion": stale.metadata.resource_version},
                                                   "data": {"v": "x"}}, _content_type=MERGE)
    assert patch_conflict.value.status == 409


def test_dry_run_all_changes_nothing(core, ns):
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}, "data": {"v": "1"}},
                                                dry_run="All")
    assert created.metadata.name == "dry"
    assert not exists(core.read_namespaced_config_map, "dry", ns)
    real = core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}, "data": {"v": "1"}})
    rv = real.metadata.resource_version
    patched = core.patch_namespaced_config_map("dry", ns, {"data": {"v": "2"}}, dry_run="All")
    assert patched.data == {"v": "2"}
    real.data = {"v": "3"}
    assert core.replace_namespaced_config_map("dry", ns, real, dry_run="All").data == {"v": "3"}
    core.delete_namespaced_config_map("dry", ns, dry_run="All")
    after = core.read_namespaced_config_map("dry", ns)
    assert after.data == {"v": "1"} and after.metadata.resource_version == rv
    with pytest.raises(ApiException) as bad:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "x"}}, dry_run="Some")
    # the apiserver's answer (handlers/create.go validates CreateOptions): 422, naming the value and what is supported
    assert bad.value.status == 422
    assert 'dryRun: Unsupported value: ["Some"]: supported values: "All"' in json.loads(bad.value.body)["message"]


def test_not_found_is_a_status_with_reason(core, ns):
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("nope", ns)
    err = missing.value
    assert err.status == 404
    body = status_body(err)
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'configmaps "nope" not found', "reason": "NotFound",
                    "details": {"name": "nope", "kind": "configmaps"}, "code": 404}
    with pytest.raises(ApiException) as no_ns:
        core.create_namespaced_config_map("no-such-namespace", {"metadata": {"name": "x"}})
    assert no_ns.value.status == 404 and status_body(no_ns.value)["details"]["kind"] == "namespaces"
    with pytest.raises(ApiException) as duplicate:
        core.create_namespace({"metadata": {"name": ns}})
    assert duplicate.value.status == 409 and status_body(duplicate.value)["reason"] == "AlreadyExists"


# ------------------------------------------------------------------------------- deletion semantics
def test_garbage_collection_of_configmap_and_deployment_dependents(api, core, ns):
    apps = client.AppsV1Api(api)
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dep-cm", "ownerReferences": [ref]}})
    core.create_namespaced_pod(ns, pod_manifest("dep-pod", node=None, owner=ref))
    deployment = apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}})
    dref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": deployment.metadata.uid,
            "controller": True, "blockOwnerDeletion": True}
    core.create_namespaced_pod(ns, pod_manifest("web-pod", node=None, owner=dref))
    core.create_namespaced_config_map(ns, {"metadata": {"name": "web-cm", "ownerReferences": [dref]}})
    keeper = core.create_namespaced_config_map(ns, {"metadata": {"name": "keeper"}})
    both = [ref, {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": keeper.metadata.uid}]
    core.create_namespaced_config_map(ns, {"metadata": {"name": "two-owners", "ownerReferences": both}})

    core.delete_namespaced_config_map("owner", ns)
    wait_for(lambda: not exists(core.read_namespaced_config_map, "dep-cm", ns)
             and not exists(core.read_namespaced_pod, "dep-pod", ns), timeout=10, interval=0.05, what="ConfigMap dependents to go")
    assert exists(core.read_namespaced_config_map, "two-owners", ns), "a dependent with a live owner stays"

    apps.delete_namespaced_deployment("web", ns)
    wait_for(lambda: not exists(core.read_namespaced_pod, "web-pod", ns)
             and not exists(core.read_namespaced_config_map, "web-cm", ns), timeout=10, interval=0.05, what="Deployment dependents to go")
    assert exists(core.read_namespaced_config_map, "keeper", ns)


def test_orphan_and_foreground_propagation(core, ns):
    orphan_owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "o-owner"}})
    oref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o-owner", "uid": orphan_owner.metadata.uid}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "o-dep", "ownerReferences": [oref]}})
    core.delete_namespaced_config_map("o-owner", ns, propagation_policy="Orphan")
    # the garbage collector orphans it (a read of a deleted dependent raises 404 and fails the test)
    orphan = wait_for(lambda: not (d := core.read_namespaced_config_map("o-dep", ns)).metadata.owner_references and d,
                      timeout=10, interval=0.05, what="the dependent orphaned")
    assert not orphan.metadata.owner_references

    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "f-owner"}})
    fref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "f-owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "f-dep", "ownerReferences": [fref],
                                                        "finalizers": ["example.com/hold"]}})
    core.delete_namespaced_config_map("f-owner", ns, propagation_policy="Foreground")
    held = core.read_namespaced_config_map("f-owner", ns)
    assert held.metadata.deletion_timestamp is not None and "foregroundDeletion" in held.metadata.finalizers
    dep = wait_for(lambda: (d := core.read_namespaced_config_map("f-dep", ns)).metadata.deletion_timestamp and d,
                   timeout=10, interval=0.05, what="the dependent to be deleted")
    assert exists(core.read_namespaced_config_map, "f-owner", ns), "the owner waits for its dependents"
    core.patch_namespaced_config_map("f-dep", ns, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    assert dep.metadata.name == "f-dep"
    wait_for(lambda: not exists(core.read_namespaced_config_map, "f-owner", ns), timeout=10, interval=0.05, what="the owner to go")


def test_graceful_pod_deletion_waits_for_scaled_grace_period(sim, core, ns):
    time_scale = sim.admin("GET", "info")["timeScale"]
    assert time_scale == 10
    core.create_namespaced_pod(ns, pod_manifest("slow", grace=20))
    wait_for(lambda: core.read_namespaced_pod("slow", ns).status.phase == "Running", timeout=10, interval=0.05, what="the pod to run")
    started = time.monotonic()
    deleted = core.delete_namespaced_pod("slow", ns)
    assert deleted.metadata.deletion_timestamp is not None
    terminating = core.read_namespaced_pod("slow", ns)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 20
    wait_for(lambda: not exists(core.read_namespaced_pod, "slow", ns), timeout=10, interval=0.05, what="the pod to go")
    elapsed = time.monotonic() - started
    assert 20 / time_scale - 0.3 <= elapsed <= 20 / time_scale + 2.0, elapsed
    # An explicit grace period of 0 removes the pod at once.
    core.create_namespaced_pod(ns, pod_manifest("fast", grace=20))
    core.delete_namespaced_pod("fast", ns, grace_period_seconds=0)
    assert not exists(core.read_namespaced_pod, "fast", ns)


def test_namespace_deletion_removes_its_content(core, custom):
    name = "pc-doomed"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_config_map(name, {"metadata": {"name": "cm"}})
    core.create_namespaced_pod(name, pod_manifest("pod", grace=5))
    custom.create_namespaced_custom_object("kubevirt.io", "v1", name, "virtualmachineinstances", vmi_manifest("vm"))
    core.delete_namespace(name)
    terminating = core.read_namespace(name)
    assert terminating.metadata.deletion_timestamp is not None
    wait_for(lambda: core.read_namespace(name).status.phase == "Terminating", timeout=10, interval=0.05, what="Terminating")
    with pytest.raises(ApiException) as forbidden:
        core.create_namespaced_config_map(name, {"metadata": {"name": "late"}})
    assert forbidden.value.status == 403 and status_body(forbidden.value)["reason"] == "Forbidden"
    wait_for(lambda: not exists(core.read_namespace, name), timeout=10, interval=0.05, what="the namespace to go")
    assert core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={name}").items == []
    assert core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={name}").items == []
    assert custom.list_cluster_custom_object("kubevirt.io", "v1", "virtualmachineinstances",
                                             field_selector=f"metadata.namespace={name}")["items"] == []
