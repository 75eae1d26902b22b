"""metrics.k8s.io/v1beta1 as metrics-server serves it (metrics/api.py), over HTTP on the actual-load-hot-worker
scenario: discovery, NodeMetrics and PodMetrics shapes, selectors, errors, Table, counters, RBAC, the admin endpoint
that changes a VM's load, and the real `kubectl top`."""
import shutil
import threading
from contextlib import contextmanager

import pytest

from descheduler_cluster import node, pod
from https_client import call, kubectl, started
from kubesim import kubeconfig
from kubesim.rbac import Authorizer
from kubesim.server import KubeSimServer
from metrics_cluster import metrics_cluster

GROUP = "/apis/metrics.k8s.io/v1beta1"
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with started("actual-load-hot-worker", tmp_path_factory.mktemp("metrics")) as simulator:
        for manager in simulator.managers.values():
            assert manager.wait_idle(20)
        yield simulator


def test_discovery_lists_the_group_and_its_two_resources(sim):
    code, groups = call(sim, "GET", "/apis")
    assert code == 200
    entry = next(g for g in groups["groups"] if g["name"] == "metrics.k8s.io")
    assert entry["preferredVersion"] == {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}
    code, resources = call(sim, "GET", GROUP)
    assert code == 200 and resources["groupVersion"] == "metrics.k8s.io/v1beta1"
    assert resources["resources"] == [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]}]
    assert call(sim, "GET", "/apis/metrics.k8s.io")[1]["preferredVersion"]["version"] == "v1beta1"


def test_node_metrics_list_and_get_as_metrics_server_prints_them(sim):
    code, listed = call(sim, "GET", f"{GROUP}/nodes")
    assert code == 200 and listed["kind"] == "NodeMetricsList" and listed["apiVersion"] == "metrics.k8s.io/v1beta1"
    by_name = {item["metadata"]["name"]: item for item in listed["items"]}
    assert list(by_name) == ["control-plane-1", "worker-a", "worker-b"]
    worker_a = by_name["worker-a"]
    assert "kind" not in worker_a and worker_a["window"] == "15s" and worker_a["timestamp"].endswith("Z")
    assert worker_a["usage"] == {"cpu": "12010m", "memory": "42275840Ki"}          # 75.06% of 16 cpu, 41285Mi
    assert worker_a["metadata"]["labels"]["kubernetes.io/hostname"] == "worker-a"
    code, one = call(sim, "GET", f"{GROUP}/nodes/worker-b")
    assert code == 200 and one["kind"] == "NodeMetrics" and one["usage"] == {"cpu": "5010m", "memory": "40178688Ki"}


def test_pod_metrics_in_a_namespace_across_namespaces_and_by_name(sim):
    code, listed = call(sim, "GET", f"{GROUP}/namespaces/desched-test/pods")
    assert code == 200 and listed["kind"] == "PodMetricsList"
    loads = {item["metadata"]["name"].rsplit("-", 1)[0]: item["containers"] for item in listed["items"]}
    assert loads["virt-launcher-vm-hot"] == [{"name": "compute", "usage": {"cpu": "4500m", "memory": "3145728Ki"}}]
    assert loads["virt-launcher-vm-steady-a"] == [{"name": "compute", "usage": {"cpu": "3", "memory": "3145728Ki"}}]
    code, everywhere = call(sim, "GET", f"{GROUP}/pods")
    namespaces = sorted({item["metadata"]["namespace"] for item in everywhere["items"]})
    assert code == 200 and namespaces == ["desched-test", "kubevirt", "workloads"]
    name = next(i["metadata"]["name"] for i in listed["items"] if "vm-idle-b1" in i["metadata"]["name"])
    code, one = call(sim, "GET", f"{GROUP}/namespaces/desched-test/pods/{name}")
    assert code == 200 and one["kind"] == "PodMetrics" and one["metadata"]["namespace"] == "desched-test"
    assert one["containers"][0]["usage"] == {"cpu": "250m", "memory": "2097152Ki"}


def test_label_and_field_selectors(sim):
    code, workers = call(sim, "GET", f"{GROUP}/nodes?labelSelector=node-role.kubernetes.io/worker")
    assert code == 200 and [i["metadata"]["name"] for i in workers["items"]] == ["worker-a", "worker-b"]
    code, one = call(sim, "GET", f"{GROUP}/nodes?fieldSelector=metadata.name%3Dworker-b")
    assert [i["metadata"]["name"] for i in one["items"]] == ["worker-b"]
    code, vms = call(sim, "GET", f"{GROUP}/pods?labelSelector=app%3Ddesched-test")
    assert code == 200 and len(vms["items"]) == 4
    assert {i["metadata"]["namespace"] for i in vms["items"]} == {"desched-test"}
    code, status = call(sim, "GET", f"{GROUP}/nodes?fieldSelector=spec.unschedulable%3Dtrue")
    assert code == 400 and status["message"] == "field label not supported: spec.unschedulable"


def test_errors_of_metrics_server(sim):
    code, status = call(sim, "GET", f"{GROUP}/nodes/worker-z")
    assert code == 404 and status["message"] == 'node "worker-z" not found'
    code, status = call(sim, "GET", f"{GROUP}/namespaces/desched-test/pods/nope")
    assert code == 404 and status["message"] == 'pod "nope" not found'
    code, status = call(sim, "GET", f"{GROUP}/nodes?watch=true")
    assert code == 405 and status["reason"] == "MethodNotAllowed"
    code, _status = call(sim, "DELETE", f"{GROUP}/nodes/worker-a")
    assert code == 405
    assert call(sim, "GET", "/apis/metrics.k8s.io/v1/nodes")[0] == 404


def test_table_answer_for_kubectl_get(sim):
    code, table = call(sim, "GET", f"{GROUP}/nodes", accept="application/json;as=Table;g=meta.k8s.io;v=v1")
    assert code == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "cpu", "memory", "Window"]
    assert table["rows"][1]["cells"] == ["worker-a", "12010m", "42275840Ki", "15s"]


def test_counters_name_the_metrics_resources_apart_from_the_core_ones(sim):
    call(sim, "DELETE", "/_kubesim/counters")
    call(sim, "GET", f"{GROUP}/nodes")
    call(sim, "GET", f"{GROUP}/namespaces/desched-test/pods")
    requests = call(sim, "GET", "/_kubesim/counters")[1]["workload"]["requests"]
    assert requests.get("list nodes.metrics.k8s.io") == 1 and requests.get("list pods.metrics.k8s.io") == 1
    assert "list nodes" not in requests


def test_a_fault_rule_names_the_metrics_resource(sim):
    code, rule = call(sim, "POST", "/_kubesim/faults", {"verb": "list", "resource": "nodes.metrics.k8s.io",
                                                        "status": 503, "count": 1})
    assert code == 201
    try:
        assert call(sim, "GET", "/api/v1/nodes")[0] == 200            # the core kind is another resource
        assert call(sim, "GET", f"{GROUP}/nodes")[0] == 503
        assert call(sim, "GET", f"{GROUP}/nodes")[0] == 200
    finally:
        call(sim, "DELETE", f"/_kubesim/faults/{rule['id']}")


def test_admin_endpoint_changes_a_vms_load_and_answers_the_snapshot(sim):
    code, answer = call(sim, "POST", "/_kubesim/usage", {"vm": "desched-test/vm-idle-b1", "cpu": "1500m"})
    assert code == 200 and answer == {"cluster": "workload", "vm": "desched-test/vm-idle-b1", "cpu": 1500,
                                      "memory": 2 ** 31}
    try:
        usage = call(sim, "GET", "/_kubesim/usage")[1]
        assert usage["nodes"]["worker-b"] == {"cpu": 6260, "memory": 41142976512}
        node_b = call(sim, "GET", f"{GROUP}/nodes/worker-b")[1]
        assert node_b["usage"]["cpu"] == "6260m"
    finally:
        call(sim, "POST", "/_kubesim/usage", {"vm": "desched-test/vm-idle-b1", "cpu": "250m"})
    code, status = call(sim, "POST", "/_kubesim/usage", {"vm": "no-slash", "cpu": "1"})
    assert code == 400 and "vm: expected <namespace>/<name>" in status["message"]


@needs_kubectl
def test_kubectl_top_nodes_and_pods(sim):
    rows = [line.split() for line in kubectl(sim, "top", "nodes").splitlines()]
    assert rows[0] == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    assert rows[2] == ["worker-a", "12010m", "75%", "41285Mi", "62%"]
    assert rows[3] == ["worker-b", "5010m", "31%", "39237Mi", "59%"]
    pods = [line.split() for line in kubectl(sim, "top", "pods", "-A").splitlines()]
    assert pods[0] == ["NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    hot = next(row for row in pods if row[1].startswith("virt-launcher-vm-hot-"))
    assert hot[0] == "desched-test" and hot[2:] == ["4500m", "3072Mi"]
    assert ["workloads", "worker-a-app-1", "2000m", "16384Mi"] in pods
    containers = [line.split() for line in kubectl(sim, "top", "pods", "-n", "desched-test", "-l",
                                                   "app=desched-test", "--containers").splitlines()]
    assert containers[0] == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"] and {r[1] for r in containers[1:]} == {"compute"}


# ------------------------------------------------------------------------------------------------- RBAC
@contextmanager
def rbac_server():
    """A plain-HTTP server with RBAC over a cluster with metrics, a user `viewer` allowed only nodes.metrics.k8s.io."""
    cluster = metrics_cluster({"pods": "requests"})
    node(cluster, "n1")
    pod(cluster, "web", "n1")
    rbac = "rbac.authorization.k8s.io"
    cluster.create(cluster.registry.by_key(f"clusterroles.{rbac}"), None, {
        "apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": "node-metrics"},
        "rules": [{"apiGroups": ["metrics.k8s.io"], "resources": ["nodes"], "verbs": ["get", "list"]}]})
    cluster.create(cluster.registry.by_key(f"clusterrolebindings.{rbac}"), None, {
        "apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "viewer-node-metrics"},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "node-metrics"},
        "subjects": [{"kind": "User", "name": "viewer", "apiGroup": rbac}]})
    server = KubeSimServer(("127.0.0.1", 0), {"workload": cluster}, {"gitVersion": "v1.35.0"},
                           authorizer=Authorizer(True, [{"name": "viewer", "token": "viewer-token"}], kubeconfig.TOKEN))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown_all()


def test_rbac_authorizes_the_metrics_resources_as_any_other():
    with rbac_server() as server:
        code, listed = call(server, "GET", f"{GROUP}/nodes", token="viewer-token")
        assert code == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["n1"]
        code, status = call(server, "GET", f"{GROUP}/namespaces/apps/pods", token="viewer-token")
        assert code == 403 and status["message"] == (
            'pods.metrics.k8s.io is forbidden: User "viewer" cannot list resource "pods" in API group '
            '"metrics.k8s.io" in the namespace "apps"')
        assert call(server, "GET", f"{GROUP}/namespaces/apps/pods", token=kubeconfig.TOKEN)[0] == 200


def test_a_cluster_without_a_metrics_section_serves_no_metrics_api():
    with started("api-basics") as simulator:
        groups = call(simulator, "GET", "/apis")[1]["groups"]
        assert "metrics.k8s.io" not in [g["name"] for g in groups]
        assert call(simulator, "GET", f"{GROUP}/nodes")[0] == 404
        code, status = call(simulator, "POST", "/_kubesim/usage", {"vm": "a/b", "cpu": "1"})
        assert code == 400 and "has no metrics: section" in status["message"]
