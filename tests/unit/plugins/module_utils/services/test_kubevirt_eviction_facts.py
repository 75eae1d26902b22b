"""The eviction facts service against a fake cluster: what it returns for the rebalance procedure's setting, that the
number of requests does not grow with the number of VMIs, scoping, sections, kinds that are not served, and
options refused before any request."""
from __future__ import annotations

import re

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_eviction_facts as service
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
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


class FakeCluster:
    """Objects by plural; answers list paths with namespace, label selector, status.phase!= and paging."""

    def __init__(self, objects, served=None):
        self.objects = {}
        for obj in objects:
            plural = {"Node": "nodes", "Pod": "pods", "PersistentVolumeClaim": "persistentvolumeclaims", "ConfigMap": "configmaps",
                      "PodDisruptionBudget": "poddisruptionbudgets", "CronJob": "cronjobs", "Job": "jobs", "Deployment": "deployments",
                      "KubeVirt": "kubevirts", "VirtualMachineInstance": "virtualmachineinstances", "VirtualMachine": "virtualmachines",
                      "VirtualMachineInstanceMigration": "virtualmachineinstancemigrations", "HyperConverged": "hyperconvergeds",
                      "ResourcePatch": "resourcepatches"}[obj["kind"]]
            self.objects.setdefault(plural, []).append(obj)
        served = list(served or RESOURCES)
        self.api = FakeApi(default=self.answer, cached=[RESOURCES[p] for p in served], served=[RESOURCES[p] for p in served])

    def answer(self, path, params):
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
