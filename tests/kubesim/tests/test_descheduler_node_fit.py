"""The simulated DefaultEvictor's nodeFit as descheduler v0.36 NodeFit has it (required node affinity, missing
extended resources, taints, cordon, anti-affinity, with upstream's per-node errors at V(4)), and the Pod QoS
class the API server stores (ComputePodQOS: zero requests are BestEffort)."""
import pytest

from kubesim.defaults import qos_class
from kubesim.descheduler.evictor import DefaultEvictor
from kubesim.descheduler.klog import Logger
from descheduler_cluster import add, make_cluster, messages, node, pod

NOT_FIT = ('"pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as '
           'unschedulable" pod="apps/vm"')


@pytest.fixture
def cluster():
    c = make_cluster()
    node(c, "worker-a")
    return c


def fits(cluster, mover, verbosity=4):
    log = Logger(verbosity)
    result = DefaultEvictor(cluster, {"nodeFit": True}, log).pre_eviction_filter(mover)
    return result, messages(log.lines)


def does_not_fit_on(error: str) -> str:
    return f'"Pod does not fit on node" pod="apps/vm" node="worker-b" err="{error}"'


def test_required_node_affinity_no_other_node_matches(cluster):
    node(cluster, "worker-b", labels={"zone": "west"})
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["east"]}]}]}}}
    ok, lines = fits(cluster, pod(cluster, "vm", "worker-a", affinity=affinity))
    assert not ok
    assert does_not_fit_on("pod node selector does not match the node label") in lines and NOT_FIT in lines


def test_an_empty_node_selector_term_matches_no_node(cluster):
    node(cluster, "worker-b")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}
    assert not fits(cluster, pod(cluster, "vm", "worker-a", affinity=affinity))[0]


def test_an_extended_resource_the_other_node_lacks(cluster):
    node(cluster, "worker-b")
    mover = pod(cluster, "vm", "worker-a")
    mover["spec"]["containers"][0]["resources"]["requests"]["devices.kubevirt.io/kvm"] = "1"
    ok, lines = fits(cluster, mover)
    assert not ok and does_not_fit_on("insufficient devices.kubevirt.io/kvm") in lines


def test_an_extended_resource_used_up_by_the_nodes_pods(cluster):
    add(cluster, "nodes", None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-b"},
                                 "status": {"allocatable": {"cpu": "10", "memory": "10Gi", "pods": "100", "nvidia.com/gpu": "1"}}})
    gpu = [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]
    mover = pod(cluster, "vm", "worker-a", containers=gpu)
    assert fits(cluster, mover)[0]
    pod(cluster, "holder", "worker-b", containers=gpu)
    ok, lines = fits(cluster, mover)
    assert not ok and does_not_fit_on("insufficient nvidia.com/gpu") in lines


@pytest.mark.parametrize("effect, fit", [("NoSchedule", False), ("NoExecute", False), ("PreferNoSchedule", True)])
def test_taints(cluster, effect, fit):
    node(cluster, "worker-b", taints=[{"key": "maintenance", "effect": effect}])
    ok, lines = fits(cluster, pod(cluster, "vm", "worker-a"))
    assert ok == fit
    if not fit:
        assert does_not_fit_on("pod does not tolerate taints on the node") in lines


def test_a_cordoned_node_does_not_fit_even_with_the_unschedulable_toleration(cluster):
    node(cluster, "worker-b", unschedulable=True)
    tolerant = pod(cluster, "vm", "worker-a", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    ok, lines = fits(cluster, tolerant)
    assert not ok and does_not_fit_on("node is not schedulable") in lines


def test_required_pod_anti_affinity_against_the_nodes_pods(cluster):
    node(cluster, "worker-b", labels={"kubernetes.io/hostname": "worker-b"})
    pod(cluster, "db", "worker-b", labels={"app": "db"})
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    ok, lines = fits(cluster, pod(cluster, "vm", "worker-a", affinity=anti))
    assert not ok and does_not_fit_on("pod matches inter-pod anti-affinity rule of other pod on node") in lines


def test_pods_slot(cluster):
    node(cluster, "worker-b", pods="1")
    pod(cluster, "other", "worker-b", cpu="0", memory="0")
    ok, lines = fits(cluster, pod(cluster, "vm", "worker-a"))
    assert not ok and does_not_fit_on("insufficient pods") in lines


@pytest.mark.parametrize("resources, expected", [
    ({"requests": {"cpu": "0", "memory": "0"}}, "BestEffort"),
    ({"requests": {"ephemeral-storage": "1Gi"}}, "BestEffort"),           # only cpu and memory count
    ({"requests": {"cpu": "1"}}, "Burstable"),
    ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
    ({"requests": {"cpu": "1", "memory": "1Gi", "memory-ignored": "0"}, "limits": {"cpu": "1000m", "memory": "1024Mi"}}, "Guaranteed"),
])
def test_qos_class_as_compute_pod_qos(resources, expected):
    assert qos_class({"containers": [{"name": "c", "resources": resources}]}) == expected


def test_qos_best_effort_and_guaranteed_containers_make_a_burstable_pod():
    guaranteed = {"name": "g", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
    assert qos_class({"containers": [guaranteed, {"name": "e", "resources": {}}]}) == "Burstable"


def test_a_zero_request_pod_is_stored_best_effort(cluster):
    stored = cluster.create(cluster.registry.by_key("pods"), "apps", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "zero"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "0", "memory": "0"}}}]}})
    assert stored["status"]["qosClass"] == "BestEffort"
