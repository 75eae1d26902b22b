"""The ServiceAccount controller (`default` in every namespace, at once, recreated when deleted) and the
ServiceAccount admission plugin (defaulting, the 403 for a missing account, mirror Pods)."""
import pytest

from kubesim.api import RequestContext
from kubesim.controllers import garbage_collector, namespace, serviceaccounts
from kubesim.errors import ApiError

import in_process
from support import waiting

USED = [garbage_collector.register, namespace.register, serviceaccounts.register]


@pytest.fixture
def cluster():
    with in_process.running(in_process.bare_cluster(), USED, {"namespaces": ["apps"]}) as (started, _manager):
        yield started


def rt(cluster, key):
    return cluster.registry.by_key(key)


def pod(name, **spec):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def test_every_namespace_has_its_default_service_account_as_the_controller_creates_it(cluster):
    accounts = {(e.obj["metadata"]["namespace"], e.obj["metadata"]["name"])
                for e in cluster.store.entries("serviceaccounts")}
    assert accounts == {(ns, "default") for ns in ("default", "kube-system", "kube-public", "kube-node-lease", "apps")}
    account = cluster.get(rt(cluster, "serviceaccounts"), "apps", "default")
    # managedFields are the API machinery's (the controller's create), not this controller's
    assert set(account["metadata"]) - {"managedFields"} == {"name", "namespace", "uid", "resourceVersion",
                                                            "creationTimestamp"}
    assert {k: v for k, v in account.items() if k != "metadata"} == {"apiVersion": "v1", "kind": "ServiceAccount"}


def test_a_pod_created_right_after_its_namespace_is_admitted_with_the_default_account(cluster):
    cluster.create(rt(cluster, "namespaces"), None,
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "new"}})
    created = cluster.create(rt(cluster, "pods"), "new", pod("p"))
    assert (created["spec"]["serviceAccountName"], created["spec"]["serviceAccount"]) == ("default", "default")


def test_a_deleted_default_service_account_is_recreated(cluster):
    sas = rt(cluster, "serviceaccounts")
    old_uid = cluster.get(sas, "apps", "default")["metadata"]["uid"]
    cluster.delete(sas, "apps", "default")
    assert cluster.get(sas, "apps", "default")["metadata"]["uid"] != old_uid


def test_a_terminating_namespace_gets_no_new_default_service_account(cluster):
    nss, sas = rt(cluster, "namespaces"), rt(cluster, "serviceaccounts")
    cluster.delete(nss, None, "apps")
    waiting.wait_for(lambda: cluster.find(nss, None, "apps") is None, interval=0.01, what="namespace apps gone")
    assert cluster.find(sas, "apps", "default") is None


def test_a_pod_naming_a_missing_service_account_is_forbidden_as_the_admission_plugin_answers(cluster):
    for ctx in (RequestContext(dry_run=True), RequestContext()):
        with pytest.raises(ApiError) as refused:
            cluster.create(rt(cluster, "pods"), "apps", pod("p", serviceAccountName="sa"), ctx)
        assert refused.value.status() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'pods "p" is forbidden: error looking up service account apps/sa: serviceaccount "sa" not found',
            "reason": "Forbidden", "details": {"name": "p", "kind": "pods"}, "code": 403}
    assert cluster.find(rt(cluster, "pods"), "apps", "p") is None


def test_the_deprecated_service_account_field_names_the_account(cluster):
    cluster.create(rt(cluster, "serviceaccounts"), "apps", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                            "metadata": {"name": "builder"}})
    created = cluster.create(rt(cluster, "pods"), "apps", pod("p", serviceAccount="builder"))
    assert (created["spec"]["serviceAccountName"], created["spec"]["serviceAccount"]) == ("builder", "builder")
    with pytest.raises(ApiError) as refused:
        cluster.create(rt(cluster, "pods"), "apps", pod("q", serviceAccount="nobody"))
    assert refused.value.message == ('pods "q" is forbidden: error looking up service account apps/nobody: '
                                     'serviceaccount "nobody" not found')


def test_a_mirror_pod_may_not_name_a_service_account(cluster):
    mirror = {"annotations": {"kubernetes.io/config.mirror": "hash"}}
    cluster.create(rt(cluster, "pods"), "apps", {**pod("static-web"), "metadata": {"name": "static-web", **mirror}})
    with pytest.raises(ApiError) as refused:
        cluster.create(rt(cluster, "pods"), "apps", {**pod("static-db", serviceAccountName="db"),
                                                     "metadata": {"name": "static-db", **mirror}})
    assert (refused.value.code, refused.value.message) == (
        403, 'pods "static-db" is forbidden: a mirror pod may not reference service accounts')
