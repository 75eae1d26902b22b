"""RBAC for bearer tokens (`rbac: true`): rule matching as upstream, the 403 message shape, subresources and
verbs, RoleBinding scope, ServiceAccount and Group subjects, 401 for unknown tokens, and requests without
credentials being `system:anonymous`. Runs the HTTPS server in-process."""
import pytest
import yaml

from https_client import call
from kubesim import kubeconfig
from kubesim.rbac import Attributes, User, forbidden, rule_allows
from kubesim.simulator import Simulator

USERS = [{"name": "alice", "token": "alice-token"},
         {"name": "system:serviceaccount:ops:runner", "token": "sa-token"},
         {"name": "bob", "token": "bob-token", "groups": ["auditors"]}]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    path = tmp_path_factory.mktemp("rbac") / "rbac.yaml"
    path.write_text(yaml.safe_dump({"extends": "api-basics", "name": "rbac", "rbac": True, "users": USERS}))
    simulator = Simulator(str(path)).start()
    yield simulator
    simulator.stop()


def admin(sim, method, path, body=None):
    status, doc = call(sim, method, path, token=kubeconfig.TOKEN, body=body)
    assert status in (200, 201), doc
    return doc


def role(kind, name, rules, namespace=None):
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules}


def binding(kind, name, role_kind, role_name, subjects, namespace=None):
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name}}


RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def granted(sim):
    """alice: read nodes cluster-wide; in `default` read Pods and their logs and evict them; patch one ConfigMap.
    The runner service account: read pods/status in ops only (via a ClusterRole in a RoleBinding).
    Group auditors: list everything in every group, get nothing."""
    admin(sim, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}})
    node_reader = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    admin(sim, "POST", f"{RBAC}/clusterroles", role("ClusterRole", "node-reader", node_reader))
    admin(sim, "POST", f"{RBAC}/clusterrolebindings", binding("ClusterRoleBinding", "alice-nodes", "ClusterRole", "node-reader",
                                                              [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]))
    admin(sim, "POST", f"{RBAC}/namespaces/default/roles", role("Role", "pod-ops", [
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"], "resourceNames": ["allowed"]}],
        "default"))
    admin(sim, "POST", f"{RBAC}/namespaces/default/rolebindings", binding("RoleBinding", "alice-pods", "Role", "pod-ops",
                                                                          [{"kind": "User", "name": "alice"}], "default"))
    status_reader = [{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]}]
    admin(sim, "POST", f"{RBAC}/clusterroles", role("ClusterRole", "status-reader", status_reader))
    admin(sim, "POST", f"{RBAC}/namespaces/ops/rolebindings", binding("RoleBinding", "runner", "ClusterRole", "status-reader",
                                                                      [{"kind": "ServiceAccount", "name": "runner"}], "ops"))
    admin(sim, "POST", f"{RBAC}/clusterroles", role("ClusterRole", "lister", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}]))
    admin(sim, "POST", f"{RBAC}/clusterrolebindings", binding("ClusterRoleBinding", "auditors", "ClusterRole", "lister",
                                                              [{"kind": "Group", "name": "auditors"}]))
    for name in ("allowed", "other"):
        admin(sim, "POST", "/api/v1/namespaces/default/configmaps",
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
    admin(sim, "POST", "/api/v1/namespaces/ops/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                                       "spec": {"containers": [{"name": "c", "image": "x"}]}})
    return sim


def test_the_admin_token_is_admin_and_no_credentials_is_anonymous(granted):
    assert call(granted, "GET", "/api/v1/secrets", token=kubeconfig.TOKEN)[0] == 200
    status, doc = call(granted, "GET", "/api/v1/secrets")
    assert (status, doc["message"]) == (403, 'secrets is forbidden: User "system:anonymous" cannot list resource "secrets" '
                                             'in API group "" at the cluster scope')


def test_an_unknown_token_is_unauthorized(granted):
    status, doc = call(granted, "GET", "/api/v1/nodes", token="nobody")
    assert (status, doc["reason"], doc["message"]) == (401, "Unauthorized", "Unauthorized")


def test_discovery_is_open_to_every_authenticated_user(granted):
    for path in ("/version", "/api", "/apis", "/api/v1", "/apis/kubevirt.io/v1"):
        assert call(granted, "GET", path, token="bob-token")[0] == 200, path


def test_cluster_role_binding_grants_cluster_wide_and_the_denial_names_verb_resource_and_scope(granted):
    assert call(granted, "GET", "/api/v1/nodes", token="alice-token")[0] == 200
    assert call(granted, "GET", "/api/v1/nodes/worker-a", token="alice-token")[0] == 200
    status, doc = call(granted, "DELETE", "/api/v1/nodes/worker-a", token="alice-token")
    assert status == 403 and doc["reason"] == "Forbidden"
    assert doc["message"] == ('nodes "worker-a" is forbidden: User "alice" cannot delete resource "nodes" in API group "" '
                              'at the cluster scope')
    assert doc["details"] == {"kind": "nodes", "name": "worker-a"}
    status, doc = call(granted, "GET", "/apis/kubevirt.io/v1/virtualmachineinstances", token="alice-token")
    assert doc["message"] == ('virtualmachineinstances.kubevirt.io is forbidden: User "alice" cannot list resource '
                              '"virtualmachineinstances" in API group "kubevirt.io" at the cluster scope')


def test_role_binding_grants_only_in_its_namespace(granted):
    assert call(granted, "GET", "/api/v1/namespaces/default/pods", token="alice-token")[0] == 200
    status, doc = call(granted, "GET", "/api/v1/namespaces/ops/pods", token="alice-token")
    assert status == 403
    assert doc["message"] == ('pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
                              'in the namespace "ops"')
    status, doc = call(granted, "GET", "/api/v1/pods", token="alice-token")
    assert status == 403 and doc["message"].endswith('cannot list resource "pods" in API group "" at the cluster scope')


def test_verbs_are_told_apart(granted):
    assert call(granted, "GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1", token="alice-token")[0] == 403
    status, doc = call(granted, "POST", "/api/v1/namespaces/default/pods", token="alice-token",
                       body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}})
    assert status == 403 and 'cannot create resource "pods"' in doc["message"]
    status, doc = call(granted, "DELETE", "/api/v1/namespaces/default/pods", token="alice-token")
    assert status == 403 and 'cannot deletecollection resource "pods"' in doc["message"]


def test_subresources_need_their_own_rule(granted):
    status, doc = call(granted, "POST", "/api/v1/namespaces/ops/pods/p/eviction", token="alice-token",
                       body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ops"}})
    assert status == 403
    assert doc["message"] == ('pods "p" is forbidden: User "alice" cannot create resource "pods/eviction" in API group "" '
                              'in the namespace "ops"')
    status, doc = call(granted, "GET", "/api/v1/namespaces/ops/pods/p/status", token="sa-token")
    assert status == 200 and doc["metadata"]["name"] == "p"
    status, doc = call(granted, "GET", "/api/v1/namespaces/ops/pods/p", token="sa-token")
    assert status == 403 and 'User "system:serviceaccount:ops:runner" cannot get resource "pods"' in doc["message"]
    status, doc = call(granted, "PUT", "/api/v1/namespaces/ops/pods/p/status", token="sa-token", body={})
    assert status == 403 and 'cannot update resource "pods/status"' in doc["message"]


def test_resource_names_limit_a_rule_to_named_objects(granted):
    patch = {"data": {"k": "new"}}
    status = call(granted, "PATCH", "/api/v1/namespaces/default/configmaps/allowed", token="alice-token", body=patch,
                  content_type="application/merge-patch+json")[0]
    assert status == 200
    status, doc = call(granted, "PATCH", "/api/v1/namespaces/default/configmaps/other", token="alice-token", body=patch,
                       content_type="application/merge-patch+json")
    assert status == 403 and doc["message"].startswith('configmaps "other" is forbidden: User "alice" cannot patch')
    assert admin(granted, "GET", "/api/v1/namespaces/default/configmaps/other")["data"] == {"k": "v"}
    assert call(granted, "GET", "/api/v1/namespaces/default/configmaps", token="alice-token")[0] == 403


def test_resource_names_allow_a_list_or_watch_of_the_one_named_object(granted):
    # requestinfo.go: a list or watch whose fieldSelector requires metadata.name=<name> is asked about that name
    status, doc = call(granted, "GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dallowed", token="alice-token")
    assert status == 200 and [item["metadata"]["name"] for item in doc["items"]] == ["allowed"]
    status, doc = call(granted, "GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3D%3Dallowed&watch=true"
                                       "&timeoutSeconds=1", token="alice-token")
    assert status == 200 and doc["type"] == "ADDED" and doc["object"]["metadata"]["name"] == "allowed"
    status, doc = call(granted, "GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dother", token="alice-token")
    assert status == 403 and doc["message"].startswith('configmaps "other" is forbidden: User "alice" cannot list')
    status, doc = call(granted, "GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%21%3Dother", token="alice-token")
    assert status == 403 and doc["message"].startswith('configmaps is forbidden: User "alice" cannot list')


def test_group_subjects_and_wildcards(granted):
    assert call(granted, "GET", "/apis/kubevirt.io/v1/virtualmachineinstances", token="bob-token")[0] == 200
    assert call(granted, "GET", "/api/v1/namespaces/default/configmaps", token="bob-token")[0] == 200
    status, doc = call(granted, "GET", "/api/v1/namespaces/default/configmaps/other", token="bob-token")
    assert status == 403 and 'User "bob" cannot get resource "configmaps"' in doc["message"]


def test_a_binding_to_a_missing_role_says_so(granted):
    admin(granted, "POST", f"{RBAC}/clusterrolebindings", binding("ClusterRoleBinding", "dangling", "ClusterRole", "gone",
                                                                  [{"kind": "User", "name": "alice"}]))
    status, doc = call(granted, "GET", "/api/v1/secrets", token="alice-token")
    assert status == 403
    assert doc["message"].endswith('at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found')


def test_users_added_at_run_time_and_kubeconfig_contexts(granted, tmp_path):
    added = admin(granted, "POST", "/_kubesim/users", {"name": "carol", "token": "carol-token"})
    assert added["rbac"] is True and "system:authenticated" in added["groups"]
    status, doc = call(granted, "GET", "/api/v1/nodes", token="carol-token")
    assert status == 403 and 'User "carol"' in doc["message"]
    config = kubeconfig.build({"workload": "http://x", "global": "http://x/clusters/global"}, users=USERS[:1])
    contexts = {c["name"]: c["context"]["user"] for c in config["contexts"]}
    assert contexts == {"workload": "kubesim-admin", "global": "kubesim-admin", "alice@workload": "alice",
                        "alice@global": "alice"}
    assert {"name": "alice", "user": {"token": "alice-token"}} in config["users"]


def test_rule_matching_table():
    pods_get = Attributes(verb="get", resource="pods", namespace="n", name="p")
    assert rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}, pods_get)
    assert not rule_allows({"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get"]}, pods_get)
    assert not rule_allows({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}, pods_get)
    log = Attributes(verb="get", resource="pods", subresource="log", namespace="n", name="p")
    assert not rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, log)
    assert rule_allows({"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]}, log)
    listing = Attributes(verb="list", resource="pods", namespace="n")
    assert not rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"], "resourceNames": ["p"]}, listing)
    err = forbidden(User("u"), Attributes(verb="get", path="/logs"))
    assert err.code == 403 and err.message == 'forbidden: User "u" cannot get path "/logs"'


def test_without_rbac_everyone_is_allowed_but_an_unknown_token_is_still_unauthorized(tmp_path):
    simulator = Simulator("api-basics").start()
    try:
        assert call(simulator, "GET", "/api/v1/secrets")[0] == 200
        assert call(simulator, "GET", "/api/v1/secrets", token=kubeconfig.TOKEN)[0] == 200
        status, doc = call(simulator, "GET", "/api/v1/secrets", token="whatever")
        assert (status, doc["reason"], doc["message"]) == (401, "Unauthorized", "Unauthorized")
    finally:
        simulator.stop()
