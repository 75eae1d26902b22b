"""The eviction facts service against a fake cluster: what it returns for the rebalance procedure's setting, that the
number of requests does not grow with the number of VMIs, scoping, sections, kinds that are not served, options
refused before any request, and actual usage beside requests (metrics server, Prometheus through the service proxy or
directly with the policy's token) with the finding when they disagree."""
from __future__ import annotations

import base64
import json
import re

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster import metrics
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_eviction_facts as service
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import matches_selector_string, parse_label_selector

from .. import k8s_objects as k8s
from ..fake_api import FakeApi, connect, resource, status_error

RESOURCES = {
    "nodes": resource("Node", "nodes", namespaced=False), "pods": resource("Pod", "pods"),
    "persistentvolumeclaims": resource("PersistentVolumeClaim", "persistentvolumeclaims"),
    "configmaps": resource("ConfigMap", "configmaps"),
    "poddisruptionbudgets": resource("PodDisruptionBudget", "poddisruptionbudgets", "policy"),
    "cronjobs": resource("CronJob", "cronjobs", "batch"), "jobs": resource("Job", "jobs", "batch"),
    "deployments": resource("Deployment", "deployments", "apps"),
    "kubevirts": resource("KubeVirt", "kubevirts", "kubevirt.io"),
    "virtualmachineinstances": resource("VirtualMachineInstance", "virtualmachineinstances", "kubevirt.io"),
    "virtualmachines": resource("VirtualMachine", "virtualmachines", "kubevirt.io"),
    "virtualmachineinstancemigrations": resource("VirtualMachineInstanceMigration", "virtualmachineinstancemigrations", "kubevirt.io"),
    "hyperconvergeds": resource("HyperConverged", "hyperconvergeds", "hco.kubevirt.io", "v1beta1"),
    "resourcepatches": resource("ResourcePatch", "resourcepatches", "operator.alauda.io", "v1alpha1"),
}
KUBEVIRT_KINDS = ("kubevirts", "virtualmachineinstances", "virtualmachines", "virtualmachineinstancemigrations")
PATH_RE = re.compile(r"^/apis?/(?:[^/]+/)?[^/]+(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)$")


METRICS_RESOURCES = [resource("NodeMetrics", "nodes", "metrics.k8s.io", "v1beta1", namespaced=False),
                     resource("PodMetrics", "pods", "metrics.k8s.io", "v1beta1"), resource("Secret", "secrets")]


class FakeCluster:
    """Objects by plural; answers list paths with namespace, label selector, status.phase!= and paging. `answers`: bodies
    (or exceptions) for exact paths (metrics, Secrets, the service proxy), whose kinds `extra_served` serves."""

    def __init__(self, objects, served=None, answers=None, extra_served=()):
        self.answers = dict(answers or {})
        self.objects = {}
        for obj in objects:
            plural = {"Node": "nodes", "Pod": "pods", "PersistentVolumeClaim": "persistentvolumeclaims", "ConfigMap": "configmaps",
                      "PodDisruptionBudget": "poddisruptionbudgets", "CronJob": "cronjobs", "Job": "jobs", "Deployment": "deployments",
                      "KubeVirt": "kubevirts", "VirtualMachineInstance": "virtualmachineinstances", "VirtualMachine": "virtualmachines",
                      "VirtualMachineInstanceMigration": "virtualmachineinstancemigrations", "HyperConverged": "hyperconvergeds",
                      "ResourcePatch": "resourcepatches"}[obj["kind"]]
            self.objects.setdefault(plural, []).append(obj)
        served = [RESOURCES[p] for p in served or RESOURCES] + list(extra_served)
        self.api = FakeApi(default=self.answer, cached=served, served=served)

    def answer(self, path, params):
        if path in self.answers:
            if isinstance(self.answers[path], BaseException):
                raise self.answers[path]
            return self.answers[path]
        if path == "/version":
            return {"major": "1", "minor": "35", "gitVersion": "v1.35.0", "platform": "linux/amd64"}
        match = PATH_RE.match(path)
        assert match, path
        items = [o for o in self.objects.get(match["plural"], [])
                 if match["ns"] is None or o["metadata"].get("namespace") == match["ns"]]
        if params.get("label_selector"):
            requirements = parse_label_selector(params["label_selector"])
            items = [o for o in items if matches_selector_string(requirements, o["metadata"].get("labels"))]
        for term in (params.get("field_selector") or "").split(","):
            if term.startswith("status.phase!="):
                items = [o for o in items if o.get("status", {}).get("phase") != term.split("!=", 1)[1]]
        start = int(params.get("_continue") or 0)
        end = start + params["limit"]
        return {"items": items[start:end], "metadata": {"continue": str(end) if end < len(items) else ""}}

    def lists(self):
        counts = {}
        for path, _params in self.api.calls:
            counts[path] = counts.get(path, 0) + 1
        return counts


def rebalance_cluster(vm_count=3, strategy="LiveMigrate", extra=()):
    """The rebalance procedure's setting (Prerequisites): a control plane, two workers, test VMs with the scoping label, the ACP package."""
    objects = [k8s.node("control-plane-1", cpu="8", memory="32Gi", control_plane=True,
                        taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
               k8s.node("worker-a"), k8s.node("worker-b"), k8s.pod("web-1", node="worker-a"),
               k8s.kubevirt_cr("LiveMigrateIfPossible"), k8s.hyperconverged(), k8s.cronjob(), k8s.configmap(k8s.VM_POLICY),
               k8s.job("descheduler-29000000", "2026-11-30T10:00:00Z"), k8s.resource_patch("rp-abcde")]
    for index in range(vm_count):
        name = "vm-{0:03d}".format(index)
        vmi = k8s.vmi(name, strategy=strategy, owner=("VirtualMachine", name), labels={"app": "desched-test"},
                      node="worker-a" if index % 2 == 0 else "worker-b", claims=[name + "-root"])
        objects += [vmi, k8s.launcher(vmi), k8s.vm(name), k8s.pvc(name + "-root")]
    return list(objects) + list(extra)


def gather(cluster, page_size=500, **params):
    client, _clock = connect(cluster.api, page_size=page_size)
    options = service.KubevirtEvictionFactsOptions.from_params(spec_params(service.ARG_SPEC, **params))
    return service.gather_eviction_facts(options, False, client)


# ------------------------------------------------------------------------------------------ results
def test_facts_for_the_rebalance_setting():
    result = gather(FakeCluster(rebalance_cluster()))
    assert result["changed"] is False
    cluster = result["cluster"]
    assert cluster["kubevirt"]["version"] == "v1.8.4" and cluster["hyperconverged"]["version"] == "1.18.1"
    assert cluster["eviction_strategy"] == "LiveMigrateIfPossible" and cluster["migration_limits"]["parallel_migrations_per_cluster"] == 5
    nodes = {n["name"]: n for n in result["nodes"]}
    assert nodes["control-plane-1"]["control_plane"] and nodes["worker-a"]["vmis"] == 2 and nodes["worker-b"]["vmis"] == 1
    assert nodes["worker-a"]["requested"] == {"cpu": 700, "memory": 2 * 782 * 2 ** 20 + 2 ** 30, "pods": 3}
    assert nodes["worker-a"]["usage_percent"]["cpu"] == 4.38
    vmis = result["vmis"]
    assert [v["name"] for v in vmis] == ["vm-000", "vm-001", "vm-002"]
    assert {v["verdict"] for v in vmis} == {"migrate"}
    assert vmis[0]["pvcs"][0]["read_write_many"] and vmis[0]["owner_kind"] == "VirtualMachine" and vmis[0]["run_strategy"] == "Always"
    assert vmis[0]["launcher"]["request_evict_only"]
    descheduler = result["descheduler"]
    assert descheduler["found"] and descheduler["evictions_in_background"] and descheduler["verbosity"] == 3
    assert descheduler["policy"]["profiles"][0]["name"] == "vm-rebalance"
    assert [p["name"] for p in descheduler["resource_patches"]] == ["rp-abcde"]
    assert descheduler["module_info"]["served"] is False and descheduler["kube_descheduler"]["served"] is False
    # the VMIs recorded LiveMigrate while the cluster default is LiveMigrateIfPossible
    assert result["summary"]["findings"] == {"strategy_differs_from_cluster": 3}
    assert result["summary"]["verdicts"]["migrate"] == 3 and result["summary"]["warnings"] == 3
    assert result["served"]["ModuleInfo"] is False and result["served"]["VirtualMachineInstance"] is True


def test_default_package_policy_and_non_migratable_vm():
    broken = k8s.vmi("vm-rwo", strategy=None, migratable=False, reason="DisksNotLiveMigratable", owner=("VirtualMachine", "vm-rwo"))
    objects = [o for o in rebalance_cluster(1) if o["kind"] != "ConfigMap"]
    objects += [k8s.configmap(), broken, k8s.launcher(broken), k8s.vm("vm-rwo", run_strategy="Always")]
    result = gather(FakeCluster(objects))
    by_name = {v["name"]: v for v in result["vmis"]}
    assert by_name["vm-rwo"]["verdict"] == "shutdown_restart"        # LiveMigrateIfPossible from the cluster, not migratable
    assert set(result["summary"]["findings"]) == {"strategy_differs_from_cluster", "not_migratable_with_migrating_strategy",
                                                  "policy_protects_pvc_pods"}


# ------------------------------------------------------------------------------------------ request counts
def test_requests_do_not_depend_on_the_number_of_vmis():
    small, large = FakeCluster(rebalance_cluster(3)), FakeCluster(rebalance_cluster(300))
    assert len(gather(small)["vmis"]) == 3
    assert len(gather(large)["vmis"]) == 300
    assert small.lists() == large.lists()
    assert sum(small.lists().values()) == 15     # /version + 14 lists (nothing cached is missing)


def test_pages_grow_with_size_only_by_page():
    cluster = FakeCluster(rebalance_cluster(300))
    gather(cluster, page_size=100)
    counts = cluster.lists()
    assert counts["/apis/kubevirt.io/v1/virtualmachineinstances"] == 3
    assert counts["/api/v1/pods"] == 4          # 300 launchers + web-1 in pages of 100


def test_namespaces_scope_lists_per_namespace():
    cluster = FakeCluster(rebalance_cluster(2))
    result = gather(cluster, namespaces=["desched-test", "other"], include=["vmis"])
    assert len(result["vmis"]) == 2
    counts = cluster.lists()
    assert counts["/apis/kubevirt.io/v1/namespaces/other/virtualmachineinstances"] == 1
    assert "/apis/kubevirt.io/v1/virtualmachineinstances" not in counts
    pod_calls = [params for path, params in cluster.api.calls if path.endswith("/pods")]
    assert pod_calls[0]["label_selector"] == "kubevirt.io=virt-launcher"      # no node section: only launchers
    assert "nodes" not in result and "descheduler" not in result and "cluster" not in result


def test_label_selector_and_names_filter_vmis():
    extra = k8s.vmi("other-vm", labels={"app": "other"})
    cluster = FakeCluster(rebalance_cluster(3, extra=[extra, k8s.launcher(extra)]))
    assert [v["name"] for v in gather(cluster, label_selector="app=desched-test")["vmis"]] == ["vm-000", "vm-001", "vm-002"]
    assert [v["name"] for v in gather(cluster, names=["vm-001", "other-vm"])["vmis"]] == ["other-vm", "vm-001"]


def test_descheduler_section_alone_reads_only_its_namespace():
    cluster = FakeCluster(rebalance_cluster(3))
    result = gather(cluster, include=["descheduler"])
    assert set(cluster.lists()) == {"/version", "/api/v1/namespaces/descheduler/configmaps",
                                    "/apis/batch/v1/namespaces/descheduler/cronjobs", "/apis/batch/v1/namespaces/descheduler/jobs",
                                    "/apis/apps/v1/namespaces/descheduler/deployments",
                                    "/apis/operator.alauda.io/v1alpha1/namespaces/descheduler/resourcepatches"}
    assert result["descheduler"]["last_jobs"][0]["result"] == "Complete"


# ------------------------------------------------------------------------------------------ not served, faults
def test_cluster_without_kubevirt_is_reported_not_a_crash():
    served = [p for p in RESOURCES if p not in KUBEVIRT_KINDS + ("hyperconvergeds",)]
    result = gather(FakeCluster([k8s.node("worker-a")], served=served))
    assert result["vmis"] == [] and result["cluster"]["kubevirt"]["served"] is False
    assert "kubevirt_not_served" in result["summary"]["findings"]
    assert result["served"]["VirtualMachineInstance"] is False


def test_cluster_without_resource_patch_kind():
    served = [p for p in RESOURCES if p != "resourcepatches"]
    result = gather(FakeCluster(rebalance_cluster(1), served=served))
    assert result["descheduler"]["resource_patch_served"] is False and result["descheduler"]["resource_patches"] == []


def test_a_503_on_the_vmi_list_is_retried():
    cluster = FakeCluster(rebalance_cluster(2))
    original = cluster.answer
    failures = []

    def flaky(path, params):
        if path.endswith("/virtualmachineinstances") and not failures:
            failures.append(path)
            raise status_error(503, "ServiceUnavailable")
        return original(path, params)
    cluster.api.default = flaky
    result = gather(cluster)
    assert len(result["vmis"]) == 2 and result["api"]["retries"] == 1
    assert result["api"]["retried"][0]["request"] == "list virtualmachineinstances.kubevirt.io"


# ------------------------------------------------------------------------------------------ options
@pytest.mark.parametrize("params, path, words", [
    ({"namespaces": ["ok", "Bad_NS"]}, "namespaces[1]", "not a valid namespace name"),
    ({"label_selector": "app in (a,b"}, "label_selector", "invalid label key"),
    ({"label_selector": "app=,=x"}, "label_selector", "invalid label key"),
    ({"names": ["UPPER"]}, "names[0]", "not a valid VMI name"),
    ({"descheduler_namespace": "no/slash"}, "descheduler_namespace", "not a valid namespace name"),
    ({"include": ["vmis", "everything"]}, "include", "unknown section(s) everything"),
    ({"include": []}, "include", "an empty list reads no section. Leave include out to read every section"),
])
def test_bad_options_fail_before_any_request(params, path, words):
    cluster = FakeCluster([])
    with pytest.raises(InvalidOption) as caught:
        gather(cluster, **params)
    assert caught.value.path == path and words in caught.value.message
    assert caught.value.message.startswith(path + ": ")
    assert cluster.api.calls == []


# ------------------------------------------------------------------------------------------ actual usage
NODE_METRICS_PATH, POD_METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods"
PROMETHEUS_URL = "https://prometheus-k8s.monitoring.svc:9091"
PROXY_PATH = "/api/v1/namespaces/monitoring/services/https:prometheus-k8s:9091/proxy/api/v1/query"
CPU_QUERY = "instance:node_cpu_utilisation:rate1m"
TOKEN = "t0ken-never-shown"
# requests small (100m per VM, web-1 500m on worker-a), one worker hot: 12 of 16 cores used
HOT_WORKER = {"control-plane-1": ("1", "8Gi"), "worker-a": ("12", "20Gi"), "worker-b": ("2", "8Gi")}


def metrics_answers(usage=None):
    usage = HOT_WORKER if usage is None else usage
    nodes = [{"metadata": {"name": name}, "usage": {"cpu": cpu, "memory": memory}} for name, (cpu, memory) in usage.items()]
    pods = [{"metadata": {"name": "virt-launcher-vm-000-x", "namespace": "desched-test"},
             "containers": [{"name": "compute", "usage": {"cpu": "11", "memory": "8Gi"}}]}]
    return {NODE_METRICS_PATH: {"items": nodes, "metadata": {}}, POD_METRICS_PATH: {"items": pods, "metadata": {}}}


def prometheus_answer(values):
    return {"status": "success", "data": {"resultType": "vector",
                                          "result": [{"metric": {"instance": node}, "value": [1.0, str(value)]} for node, value in values.items()]}}


def metrics_cluster(vm_count=3, answers=None, objects_extra=()):
    return FakeCluster(rebalance_cluster(vm_count, extra=objects_extra), answers=metrics_answers() if answers is None else answers,
                       extra_served=METRICS_RESOURCES)


@pytest.fixture
def no_dns(monkeypatch):
    """In-cluster Service names do not resolve here, so their URLs go through the API server's service proxy."""
    monkeypatch.setattr(metrics, "host_resolves", lambda host: False)


def test_auto_puts_the_metrics_servers_usage_beside_requests_and_reports_the_hot_worker():
    result = gather(metrics_cluster())
    nodes = {n["name"]: n for n in result["nodes"]}
    hot = nodes["worker-a"]
    assert hot["actual_usage"] == {"cpu": 12000, "memory": 20 * 2 ** 30}
    assert hot["actual_percent"] == {"cpu": 75.0, "memory": 31.25} and hot["usage_percent"]["cpu"] == 4.38
    assert hot["usage_deviation_points"] == {"cpu": 70.62, "memory": round(31.25 - hot["usage_percent"]["memory"], 2)}
    assert hot["prometheus_value"] is None and hot["prometheus_percent"] is None
    assert result["actual_usage"] == {"source": "auto", "disagreement_points": 20, "metrics_server": {"served": True, "error": None},
                                      "prometheus": None}
    assert result["served"]["NodeMetrics"] is True
    disagree = [f for f in result["findings"] if f["code"] == "requests_disagree_with_usage"]
    assert len(disagree) == 1 and disagree[0]["severity"] == "warning"
    message = disagree[0]["message"]
    assert "worker-a actual cpu 75% against cpu requests 4.4% (+70.6 points)" in message
    assert "worker-b" not in message and "control-plane-1" not in message          # within 20 points; no VMs on the control plane
    assert "metrics_source KubernetesMetrics or Prometheus" in message and "already balances" not in message   # the installed policy: requests
    assert result["summary"]["findings"]["requests_disagree_with_usage"] == 1 and result["summary"]["warnings"] == 3 + 1


def test_metrics_add_two_list_calls_whatever_the_number_of_vmis():
    small, large = metrics_cluster(3), metrics_cluster(300)
    gather(small)
    gather(large)
    assert small.lists() == large.lists()
    assert small.lists()[NODE_METRICS_PATH] == 1 and small.lists()[POD_METRICS_PATH] == 1 and sum(small.lists().values()) == 15 + 2


def test_auto_without_a_metrics_server_reads_requests_only_and_does_not_fail():
    cluster = FakeCluster(rebalance_cluster(3))
    result = gather(cluster)
    assert result["actual_usage"]["metrics_server"] == {"served": False, "error": None} and result["served"]["NodeMetrics"] is False
    assert all(n["actual_usage"] is None and n["actual_percent"] is None and n["usage_deviation_points"] is None for n in result["nodes"])
    assert "requests_disagree_with_usage" not in result["summary"]["findings"]
    assert not [path for path, _params in cluster.api.calls if "metrics.k8s.io" in path]


def test_auto_with_a_failing_metrics_server_says_why_and_does_not_fail():
    denied = status_error(403, "Forbidden", 'User "u" cannot list resource "nodes" in API group "metrics.k8s.io"')
    answers = dict(metrics_answers(), **{NODE_METRICS_PATH: denied})
    result = gather(metrics_cluster(answers=answers))
    error = result["actual_usage"]["metrics_server"]["error"]
    assert error.startswith("list nodes.metrics.k8s.io: 403 Forbidden") and 'Grant the user verb "list" on resource "nodes"' in error
    assert all(n["actual_usage"] is None for n in result["nodes"])


def test_requests_read_no_metrics_and_add_empty_columns():
    cluster = metrics_cluster()
    result = gather(cluster, usage_source="requests")
    assert "actual_usage" not in result and all(n["actual_percent"] is None for n in result["nodes"])
    assert NODE_METRICS_PATH not in cluster.lists()


def test_kubernetes_metrics_without_a_metrics_server_fails_with_the_fix():
    with pytest.raises(RebalanceError) as caught:
        gather(FakeCluster(rebalance_cluster(3)), usage_source="KubernetesMetrics")
    assert caught.value.path == "usage_source" and "Install metrics-server" in caught.value.fix


def test_prometheus_through_the_service_proxy(no_dns):
    answers = {PROXY_PATH: prometheus_answer({"control-plane-1": 0.05, "worker-a": 0.9, "worker-b": 0.1})}
    cluster = FakeCluster(rebalance_cluster(3), answers=answers, extra_served=METRICS_RESOURCES)
    result = gather(cluster, usage_source="Prometheus", prometheus_url=PROMETHEUS_URL, prometheus_query=CPU_QUERY, prometheus_token=TOKEN)
    nodes = {n["name"]: n for n in result["nodes"]}
    assert nodes["worker-a"]["prometheus_value"] == 0.9 and nodes["worker-a"]["prometheus_percent"] == 90
    assert nodes["worker-a"]["usage_deviation_points"] == {"prometheus": round(90 - 4.38, 2)} and nodes["worker-a"]["actual_usage"] is None
    assert result["actual_usage"]["prometheus"] == {"url": PROMETHEUS_URL, "query": CPU_QUERY, "via": "service_proxy", "token_sent": False,
                                                    "error": None}
    assert result["actual_usage"]["metrics_server"] is None
    message = [f for f in result["findings"] if f["code"] == "requests_disagree_with_usage"][0]["message"]
    assert "worker-a the Prometheus query 90% against cpu requests 4.4% (+85.6 points)" in message
    assert [params for path, params in cluster.api.calls if path == PROXY_PATH] == [{"query_params": [("query", CPU_QUERY)]}]
    assert TOKEN not in json.dumps(result) and TOKEN not in json.dumps(cluster.api.calls)


def test_prometheus_missing_a_node_fails_when_asked_for_and_is_reported_in_auto(no_dns):
    answers = {PROXY_PATH: prometheus_answer({"worker-a": 0.9, "worker-b": 0.1})}
    params = {"prometheus_url": PROMETHEUS_URL, "prometheus_query": CPU_QUERY}
    with pytest.raises(RebalanceError) as caught:
        gather(FakeCluster(rebalance_cluster(3), answers=answers), usage_source="Prometheus", **params)
    assert caught.value.message.startswith("prometheus_query: unable to find metric entry for control-plane-1. ")
    result = gather(FakeCluster(rebalance_cluster(3), answers=answers), **params)
    assert result["actual_usage"]["prometheus"]["error"].startswith("prometheus_query: unable to find metric entry for control-plane-1")
    assert {n["name"]: n["prometheus_percent"] for n in result["nodes"]} == {"control-plane-1": None, "worker-a": 90, "worker-b": 10}


PROMETHEUS_POLICY = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "https://prometheus.example.com:9091",
                                                                 "authToken": {"secretReference": {"namespace": "descheduler", "name": "prom-token"}}}}],
    "profiles": [{"name": "vm-load", "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]}}},
        {"name": "LowNodeUtilization", "args": {"thresholds": {"MetricResource": 20}, "targetThresholds": {"MetricResource": 70},
                                                "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": CPU_QUERY}}}}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}],
}


class Pool:
    def __init__(self, body):
        self.body, self.requests = body, []

    def request(self, method, url, headers=None, **_options):
        self.requests.append((url, dict(headers or {})))
        return type("Answer", (), {"status": 200, "reason": "OK", "headers": {}, "data": json.dumps(self.body).encode()})()


def test_auto_queries_the_installed_policys_prometheus_with_the_token_of_its_secret():
    objects = [o for o in rebalance_cluster(3) if o["kind"] != "ConfigMap"] + [k8s.configmap(PROMETHEUS_POLICY)]
    secret = {"metadata": {"name": "prom-token", "namespace": "descheduler"}, "data": {"prometheusAuthToken": base64.b64encode(TOKEN.encode()).decode()}}
    cluster = FakeCluster(objects, answers={"/api/v1/namespaces/descheduler/secrets/prom-token": secret}, extra_served=METRICS_RESOURCES[2:])
    pool = Pool(prometheus_answer({"control-plane-1": 0.1, "worker-a": 0.3, "worker-b": 0.25}))
    client, _clock = connect(cluster.api)
    client._http_pool_factory = lambda url: pool   # pylint: disable=protected-access
    options = service.KubevirtEvictionFactsOptions.from_params(spec_params(service.ARG_SPEC))
    result = service.gather_eviction_facts(options, False, client)
    (url, headers), = pool.requests
    assert url.startswith("https://prometheus.example.com:9091/api/v1/query?query=instance") and headers["Authorization"] == "Bearer " + TOKEN
    assert result["actual_usage"]["prometheus"] == {"url": "https://prometheus.example.com:9091", "query": CPU_QUERY, "via": "direct",
                                                    "token_sent": True, "error": None}
    assert result["actual_usage"]["metrics_server"] == {"served": False, "error": None}
    assert {n["name"]: n["prometheus_percent"] for n in result["nodes"]} == {"control-plane-1": 10, "worker-a": 30, "worker-b": 25}
    assert TOKEN not in json.dumps(result)
    # 30% and 25% of load against 4.4% and 0.6% of cpu requests: both more than 20 points off
    message = [f for f in result["findings"] if f["code"] == "requests_disagree_with_usage"][0]["message"]
    assert "worker-a the Prometheus query 30% against cpu requests 4.4% (+25.6 points); worker-b the Prometheus query 25%" in message
    assert message.endswith("The installed policy already balances by Prometheus: this concerns a request-based policy only.")


@pytest.mark.parametrize("params, path, words", [
    ({"usage_source": "requests", "prometheus_query": "up"}, "usage_source", "prometheus_query given, but usage_source is requests"),
    ({"usage_source": "KubernetesMetrics", "prometheus_url": "http://p:9090"}, "usage_source", "given, but usage_source is KubernetesMetrics"),
    ({"usage_source": "Prometheus", "include": ["vmis"]}, "usage_source", "include leaves out"),
    ({"prometheus_url": "prometheus:9090"}, "prometheus_url", "is not an http or https URL with a host"),
    ({"prometheus_query": "  "}, "prometheus_query", "an empty query"),
    ({"prometheus_auth_secret": {"namespace": "Bad_NS", "name": "t"}}, "prometheus_auth_secret.namespace", "not a valid namespace name"),
    ({"prometheus_auth_secret": {"namespace": "ns", "name": "t"}, "prometheus_token": "x"}, "prometheus_token", "mutually exclusive"),
    ({"usage_disagreement_points": 0}, "usage_disagreement_points", "must be between 1 and 100"),
    ({"usage_disagreement_points": 101}, "usage_disagreement_points", "must be between 1 and 100"),
])
def test_bad_usage_options_fail_before_any_request(params, path, words):
    cluster = FakeCluster([])
    with pytest.raises(InvalidOption) as caught:
        gather(cluster, **params)
    assert caught.value.path == path and words in caught.value.message
    assert cluster.api.calls == []


def test_the_token_is_not_in_the_options_repr():
    options = service.KubevirtEvictionFactsOptions.from_params(spec_params(service.ARG_SPEC, prometheus_token=TOKEN))
    assert TOKEN not in repr(options) and TOKEN not in repr(service.validate_options(options))
