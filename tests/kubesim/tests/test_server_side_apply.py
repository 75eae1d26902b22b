"""Server-side apply and field management: every write records its manager in `metadata.managedFields`
(FieldsV1), an apply that changes a field another manager owns answers the fieldmanager's 409 unless forced,
an applier's dropped fields go, and an unchanged apply is a no-op (structured-merge-diff `merge/update.go`,
apimachinery `util/managedfields/internal`)."""
import copy
import json
import re

import pytest

import in_process
from kubesim.api import RequestContext
from kubesim.errors import ApiError
from kubesim.scenario import populate
from https_client import call, started

KEYS = {"deployments": "deployments.apps"}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def cluster():
    c = in_process.bare_cluster()
    populate(c, {"namespaces": ["ops"]})
    return c


def by(manager, **options):
    return RequestContext(field_manager=manager, **options)


def entries(obj):
    """managedFields without their times (checked to be RFC 3339 seconds)."""
    rows = copy.deepcopy(obj["metadata"]["managedFields"])
    for row in rows:
        if "time" in row:
            assert TIME.match(row.pop("time"))
    return rows


def entry(manager, operation, fields, api_version="v1", **extra):
    return {"manager": manager, "operation": operation, "apiVersion": api_version, "fieldsType": "FieldsV1",
            "fieldsV1": fields, **extra}


def configmap(name="c", labels=None, **data):
    meta = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def deployment(replicas=None, labels=None, image="nginx:1.27"):
    spec = {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": image}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    meta = {"name": "web", **({"labels": labels} if labels else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def apply(c, kind, body, manager, **kwargs):
    rt = c.registry.by_key(KEYS.get(kind, kind))
    return c.patch(rt, "ops", body["metadata"]["name"], "apply", body, by(manager), **kwargs)


DEPLOYMENT_FIELDS = {"f:spec": {"f:selector": {}, "f:template": {
    "f:metadata": {"f:labels": {"f:app": {}}},
    "f:spec": {"f:containers": {'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}}}}}}


def with_replicas(fields):
    return {"f:spec": {"f:replicas": {}, **fields["f:spec"]}}


# ------------------------------------------------------------------------------------- Update managers
def test_create_records_the_creator_as_an_update_manager_of_every_field(cluster):
    cms = cluster.registry.by_key("configmaps")
    made = cluster.create(cms, "ops", configmap(labels={"app": "web"}, k="1"), by("kubectl-create"))
    assert entries(made) == [entry("kubectl-create", "Update", {
        "f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})]
    assert cluster.get(cms, "ops", "c")["metadata"]["managedFields"] == made["metadata"]["managedFields"]


def test_an_update_takes_the_fields_it_changes_and_controllers_default_to_kube_controller_manager(cluster):
    cms = cluster.registry.by_key("configmaps")
    made = cluster.create(cms, "ops", configmap(labels={"app": "web"}, k="1"), by("kubectl-create"))
    edited = cluster.update(cms, "ops", "c", {**made, "data": {"k": "2", "new": "x"}}, by("kubectl-edit"))
    assert entries(edited) == [
        entry("kubectl-create", "Update", {"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
        entry("kubectl-edit", "Update", {"f:data": {"f:k": {}, "f:new": {}}})]
    relabelled = cluster.patch(cms, "ops", "c", "merge", {"metadata": {"labels": {"app": "db"}}}, RequestContext())
    # Update entries sort by time, then manager: the controller's comes first within the same second
    assert sorted(entries(relabelled), key=lambda e: e["manager"]) == [
        entry("kube-controller-manager", "Update", {"f:metadata": {"f:labels": {"f:app": {}}}}),
        entry("kubectl-create", "Update", {"f:data": {}, "f:metadata": {"f:labels": {}}}),
        entry("kubectl-edit", "Update", {"f:data": {"f:k": {}, "f:new": {}}})]


def test_a_status_write_is_its_own_manager_with_the_status_subresource(cluster):
    deployments = cluster.registry.by_key("deployments.apps")
    cluster.create(deployments, "ops", deployment(replicas=1), by("kubectl-create"))
    live = cluster.get(deployments, "ops", "web")
    written = cluster.update(deployments, "ops", "web", {**live, "status": {"replicas": 1}}, by("deployment"),
                             subresource="status")
    status_entry = [e for e in entries(written) if e["manager"] == "deployment"]
    assert status_entry == [entry("deployment", "Update", {"f:status": {"f:replicas": {}}}, "apps/v1",
                                  subresource="status")]
    assert all("f:status" not in e["fieldsV1"] for e in entries(written) if e["manager"] == "kubectl-create")


def test_managed_fields_reset_by_a_single_empty_entry_and_the_first_apply_hands_the_rest_to_before_first_apply(
        cluster):
    cms = cluster.registry.by_key("configmaps")
    made = cluster.create(cms, "ops", configmap(k="1", other="o"), by("kubectl-create"))
    meta = {**made["metadata"], "managedFields": [{}]}
    reset = cluster.update(cms, "ops", "c", {**made, "metadata": meta}, by("kubectl-replace"))
    assert "managedFields" not in reset["metadata"]
    applied = apply(cluster, "configmaps", configmap(k="1"), "ssa")
    assert entries(applied) == [entry("ssa", "Apply", {"f:data": {"f:k": {}}}),
                                entry("before-first-apply", "Update", {"f:data": {".": {}, "f:k": {}, "f:other": {}}})]


# -------------------------------------------------------------------------------------------- apply
def test_apply_creates_with_only_the_configured_fields_owned(cluster):
    created = apply(cluster, "deployments", deployment(replicas=2), "kubectl")
    assert entries(created) == [entry("kubectl", "Apply", with_replicas(DEPLOYMENT_FIELDS), "apps/v1")]


def test_a_conflicting_apply_answers_409_with_the_field_and_its_manager(cluster):
    apply(cluster, "deployments", deployment(replicas=2), "kubectl")
    before = cluster.get(cluster.registry.by_key("deployments.apps"), "ops", "web")
    with pytest.raises(ApiError) as err:
        apply(cluster, "deployments", deployment(replicas=3), "other")
    assert err.value.status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict", "code": 409,
        "message": 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas',
        "details": {"causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"',
                                "field": ".spec.replicas"}]}}
    assert cluster.get(cluster.registry.by_key("deployments.apps"), "ops", "web") == before


def test_several_conflicts_are_listed_per_manager_and_an_update_manager_shows_its_api_version(cluster):
    deployments = cluster.registry.by_key("deployments.apps")
    apply(cluster, "deployments", deployment(replicas=2, labels={"app": "web"}), "kubectl")
    with pytest.raises(ApiError) as err:
        apply(cluster, "deployments", deployment(replicas=3, labels={"app": "db"}), "other")
    assert err.value.message == ('Apply failed with 2 conflicts: conflicts with "kubectl":\n'
                                 "- .metadata.labels.app\n- .spec.replicas")
    assert [cause["field"] for cause in err.value.details["causes"]] == [".metadata.labels.app", ".spec.replicas"]
    cluster.patch(deployments, "ops", "web", "merge", {"spec": {"replicas": 5}}, by("kubectl-edit"))
    with pytest.raises(ApiError) as err:
        apply(cluster, "deployments", deployment(replicas=4, labels={"app": "web"}), "kubectl")
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: ' \
                                ".spec.replicas"
    assert err.value.details["causes"] == [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
                                            "message": 'conflict with "kubectl-edit" using apps/v1'}]


def test_applying_the_live_value_shares_the_field_without_a_conflict(cluster):
    apply(cluster, "deployments", deployment(replicas=2), "kubectl")
    shared = apply(cluster, "deployments", {**deployment(replicas=2), "spec": {"replicas": 2}}, "other")
    # the object did not change, so the new entry has no time and sorts first
    assert shared["metadata"]["managedFields"][0] == entry("other", "Apply", {"f:spec": {"f:replicas": {}}}, "apps/v1")
    assert entries(shared)[1:] == [entry("kubectl", "Apply", with_replicas(DEPLOYMENT_FIELDS), "apps/v1")]


def test_force_takes_the_field_over_from_its_manager(cluster):
    apply(cluster, "deployments", deployment(replicas=2), "kubectl")
    forced = apply(cluster, "deployments", {**deployment(), "spec": {"replicas": 3}}, "other", force=True)
    assert forced["spec"]["replicas"] == 3
    assert entries(forced) == [entry("kubectl", "Apply", DEPLOYMENT_FIELDS, "apps/v1"),
                               entry("other", "Apply", {"f:spec": {"f:replicas": {}}}, "apps/v1")]


def test_fields_the_applier_drops_go_unless_another_manager_owns_them(cluster):
    cms = cluster.registry.by_key("configmaps")
    apply(cluster, "configmaps", configmap(labels={"a": "1", "b": "2"}, k="1", gone="x", kept="y"), "ssa")
    cluster.patch(cms, "ops", "c", "merge", {"data": {"kept": "y2"}}, by("kubectl-patch"))
    dropped = apply(cluster, "configmaps", configmap(labels={"a": "1"}, k="1"), "ssa")
    assert dropped["data"] == {"k": "1", "kept": "y2"}
    assert dropped["metadata"]["labels"] == {"a": "1"}
    assert entries(dropped) == [
        entry("ssa", "Apply", {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}}),
        entry("kubectl-patch", "Update", {"f:data": {"f:kept": {}}})]


def test_dropping_an_item_of_a_merging_list_removes_it(cluster):
    two = deployment()
    two["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    apply(cluster, "deployments", two, "kubectl")
    one = apply(cluster, "deployments", deployment(), "kubectl")
    assert [c["name"] for c in one["spec"]["template"]["spec"]["containers"]] == ["web"]
    assert entries(one) == [entry("kubectl", "Apply", DEPLOYMENT_FIELDS, "apps/v1")]


def test_an_unchanged_apply_is_a_no_op(cluster):
    first = apply(cluster, "deployments", deployment(replicas=2), "kubectl")
    rv = cluster.store.rv
    again = apply(cluster, "deployments", deployment(replicas=2), "kubectl")
    assert again == first and cluster.store.rv == rv


def test_a_dry_run_apply_answers_the_managed_fields_and_stores_nothing(cluster):
    apply(cluster, "deployments", deployment(replicas=2), "kubectl")
    rv = cluster.store.rv
    answer = cluster.patch(cluster.registry.by_key("deployments.apps"), "ops", "web", "apply",
                           {**deployment(), "spec": {"replicas": 3}}, by("other", dry_run=True), force=True)
    assert entries(answer) == [entry("kubectl", "Apply", DEPLOYMENT_FIELDS, "apps/v1"),
                               entry("other", "Apply", {"f:spec": {"f:replicas": {}}}, "apps/v1")]
    assert cluster.store.rv == rv
    assert cluster.get(cluster.registry.by_key("deployments.apps"), "ops", "web")["spec"]["replicas"] == 2


def test_an_apply_configuration_may_not_carry_managed_fields(cluster):
    body = configmap(k="1")
    body["metadata"]["managedFields"] = []
    with pytest.raises(ApiError) as err:
        apply(cluster, "configmaps", body, "ssa")
    assert (err.value.code, err.value.reason, err.value.message) == (400, "BadRequest",
                                                                     "metadata.managedFields must be nil")


# --------------------------------------------------------------------------------------------- HTTP
@pytest.fixture(scope="module")
def sim():
    with started("api-basics") as simulator:
        yield simulator


def test_http_writes_without_field_manager_are_named_after_the_user_agent(sim):
    cms = "/api/v1/namespaces/default/configmaps"
    code, made = call(sim, "POST", cms, configmap("ua", k="1"), user_agent="my-tool/1.2.3 (linux/amd64)")
    assert code == 201 and [e["manager"] for e in made["metadata"]["managedFields"]] == ["my-tool"]
    code, status = call(sim, "PATCH", cms + "/ua?fieldManager=ssa", configmap("ua", k="2"),
                        "application/apply-patch+yaml")
    assert code == 409 and status["message"] == \
        'Apply failed with 1 conflict: conflict with "my-tool" using v1: .data.k'
    code, forced = call(sim, "PATCH", cms + "/ua?fieldManager=ssa&force=true", configmap("ua", k="2"),
                        "application/apply-patch+yaml")
    assert code == 200 and forced["data"] == {"k": "2"}
    # my-tool keeps the data map it added (`f:data: {}`), ssa owns the key it forced
    assert [(e["manager"], e["operation"], e["fieldsV1"]) for e in forced["metadata"]["managedFields"]] == [
        ("ssa", "Apply", {"f:data": {"f:k": {}}}), ("my-tool", "Update", {"f:data": {}})]


def test_the_create_shortcut_writes_what_the_field_set_encoder_writes():
    """A create's FieldsV1 is written straight from the object; it must equal the general path's encoding."""
    from kubesim import generate, managed_fields
    scope = managed_fields.Scope(builtin=True, status_subresource=True)
    for obj in generate.objects({"nodes": 1, "vms": 2, "namespaces": 1, "seed": 1}):
        direct = managed_fields._Walk(True, marks=True).fields_v1(scope.sections(obj))
        general = managed_fields.encode_fields(managed_fields.compare(None, obj, scope).added)
        assert json.dumps(direct) == json.dumps(general), obj["kind"]
