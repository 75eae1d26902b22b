"""ModuleInfo on the global cluster only, as the scenario declares it and `module_info()` builds it; the
OpenShift KubeDescheduler example object for the `openshift` variant."""
import pytest

from kubesim import scenario
from kubesim.acp.moduleinfo import module_info, module_info_name
from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.openshift import kube_descheduler
from kubesim.resources import Registry, resolve_bundles
from kubesim.api import Cluster


def test_scenario_moduleinfo_is_the_builders():
    loaded = scenario.load("acp-plugin-basics")
    assert loaded.clusters["global"]["objects"] == [module_info("workload")]
    assert module_info_name("workload", "descheduler").startswith("workload-")
    assert len(module_info_name("workload", "descheduler")) == len("workload-") + 32


def test_moduleinfo_is_served_by_the_global_cluster_only():
    loaded = scenario.load("acp-plugin-basics")
    clusters = {}
    for name, spec in loaded.clusters.items():
        clusters[name] = scenario.build_cluster(name, spec, Clock(100))
        scenario.populate(clusters[name], spec)
    assert clusters["workload"].registry.by_key("moduleinfoes.cluster.alauda.io") is None
    infos = clusters["global"].registry.by_key("moduleinfoes.cluster.alauda.io")
    found = clusters["global"].list(infos, None, "cpaas.io/module-name=descheduler").items
    assert [e.obj["metadata"]["labels"]["cpaas.io/cluster-name"] for e in found] == ["workload"]
    assert found[0].obj["status"]["phase"] == "Running" and found[0].obj["spec"]["version"] == "v0.36.0-5"


def test_kube_descheduler_example_fits_the_openshift_bundle():
    cluster = Cluster("workload", Registry(resolve_bundles(["core", "openshift"])), Clock(100))
    scenario.populate(cluster, {"namespaces": ["openshift-kube-descheduler-operator"]})
    kinds = cluster.registry.by_key("kubedeschedulers.operator.openshift.io")
    created = cluster.create(kinds, None, kube_descheduler(), keep_status=True)
    assert created["metadata"]["namespace"] == "openshift-kube-descheduler-operator"
    assert created["spec"]["profiles"] == ["DevKubeVirtRelieveAndMigrate"]
    assert created["spec"]["mode"] == "Automatic" and created["spec"]["deschedulingIntervalSeconds"] == 60
    assert created["spec"]["evictionLimits"] == {"total": 5, "node": 2}
    with pytest.raises(ApiError):
        cluster.create(kinds, None, kube_descheduler())   # one `cluster` per namespace
