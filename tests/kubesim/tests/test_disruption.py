"""The PDB disruption controller and the eviction REST's PDB check: integer minAvailable counts healthy Pods,
maxUnavailable and percentages need the owners' /scale (which a VirtualMachineInstance does not serve),
and evictions honour the budget with the upstream messages."""
import pytest

from kubesim import events, subresources
from kubesim.api import Cluster, RequestContext
from kubesim.clock import Clock
from kubesim.controllers import ControllerManager, disruption, garbage_collector, kubelet, namespace
from kubesim.errors import ApiError
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate

import in_process
from support.waiting import wait_for

USED = [subresources.register, garbage_collector.register, namespace.register, kubelet.register, disruption.register]
SCALE_ERROR = ("Failed to calculate the number of expected pods: virtualmachineinstances.kubevirt.io does not "
               "implement the scale subresource")


@pytest.fixture
def running():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-a"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}
    with in_process.running(in_process.bare_cluster(), USED, {"namespaces": ["vms"], "objects": [node]}) as started:
        yield started


def rt(cluster, key):
    return cluster.registry.by_key(key)


def vmi_with_launcher(cluster, name, labels=None):
    vmi = cluster.create(rt(cluster, "virtualmachineinstances.kubevirt.io"), "vms", {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": name},
        "spec": {"domain": {"devices": {}}}})
    return cluster.create(rt(cluster, "pods"), "vms", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"virt-launcher-{name}-abcde", "labels": {"kubevirt.io": "virt-launcher", **(labels or {})},
                     "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                          "name": name, "uid": vmi["metadata"]["uid"], "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"nodeName": "worker-a", "containers": [{"name": "compute", "image": "virt-launcher"}]}})


def pdb(cluster, name, selector, **spec):
    return cluster.create(rt(cluster, "poddisruptionbudgets.policy"), "vms", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": selector}, **spec}})


def status_of(cluster, name):
    return cluster.get(rt(cluster, "poddisruptionbudgets.policy"), "vms", name).get("status") or {}


def condition(status):
    return next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")


def evict(cluster, pod, dry_run=False):
    return subresources.evict(cluster, "vms", pod, {"apiVersion": "policy/v1", "kind": "Eviction",
                                                    "metadata": {"name": pod}}, RequestContext(dry_run=dry_run))


def pool(cluster, count=3):
    for index in range(count):
        vmi_with_launcher(cluster, f"pool-vm-{index}", {"kubevirt.io/vmpool": "my-pool"})


def test_integer_min_available_counts_healthy_launchers(running):
    cluster, manager = running
    pool(cluster)
    pdb(cluster, "vmpool-pdb", {"kubevirt.io/vmpool": "my-pool"}, minAvailable=2)
    assert manager.wait_idle()
    status = status_of(cluster, "vmpool-pdb")
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"],
            status["disruptionsAllowed"], status["observedGeneration"]) == (3, 2, 3, 1, 1)
    assert condition(status)["status"] == "True" and condition(status)["reason"] == "SufficientPods"


@pytest.mark.parametrize("spec", [{"maxUnavailable": 1}, {"minAvailable": "75%"}, {"maxUnavailable": "50%"}])
def test_scale_based_budget_over_vmi_launchers_fails_and_allows_nothing(running, spec):
    cluster, manager = running
    pool(cluster)
    pdb(cluster, "vmpool-pdb", {"kubevirt.io/vmpool": "my-pool"}, **spec)
    assert manager.wait_idle()
    status = status_of(cluster, "vmpool-pdb")
    assert status["expectedPods"] == 0 and status["disruptionsAllowed"] == 0
    cond = condition(status)
    assert (cond["status"], cond["reason"]) == ("False", "SyncFailed")
    assert cond["message"] == "virtualmachineinstances.kubevirt.io does not implement the scale subresource"
    recorded = events.for_object(cluster, "vms", "PodDisruptionBudget", "vmpool-pdb")
    warning = [e for e in recorded if e["reason"] == "CalculateExpectedPodCountFailed"]
    assert warning and warning[0]["type"] == "Warning" and warning[0]["message"] == SCALE_ERROR
    with pytest.raises(ApiError) as err:
        evict(cluster, "virt-launcher-pool-vm-0-abcde")
    assert err.value.code == 429 and err.value.reason == "TooManyRequests"
    assert err.value.message == "Cannot evict pod as it would violate the pod's disruption budget."
    # The budget never synced, so its observedGeneration is behind and the cause says so (upstream failSafe).
    assert err.value.details["causes"] == [{"reason": "DisruptionBudget", "message": "The disruption budget "
                                            "vmpool-pdb is still being processed by the server."}]


def test_budget_synced_before_the_launchers_appeared_keeps_its_counters(running):
    cluster, manager = running
    pdb(cluster, "vmpool-pdb", {"kubevirt.io/vmpool": "my-pool"}, maxUnavailable=1)
    assert manager.wait_idle()
    assert status_of(cluster, "vmpool-pdb")["observedGeneration"] == 1
    recorded = events.for_object(cluster, "vms", "PodDisruptionBudget", "vmpool-pdb")
    assert [(e["type"], e["reason"], e["message"]) for e in recorded] == [("Normal", "NoPods", "No matching pods found")]
    pool(cluster)
    assert manager.wait_idle()
    status = status_of(cluster, "vmpool-pdb")
    assert (status["expectedPods"], status["disruptionsAllowed"], condition(status)["reason"]) == (0, 0, "SyncFailed")
    with pytest.raises(ApiError) as err:
        evict(cluster, "virt-launcher-pool-vm-0-abcde")
    assert err.value.code == 429 and err.value.headers == {}
    assert err.value.details["causes"] == [{"reason": "DisruptionBudget", "message": "The disruption budget "
                                            "vmpool-pdb needs 0 healthy pods and has 0 currently"}]


def test_eviction_decrements_the_budget_then_refuses(running):
    cluster, manager = running
    pool(cluster)
    pdb(cluster, "vmpool-pdb", {"kubevirt.io/vmpool": "my-pool"}, minAvailable=2)
    assert manager.wait_idle()
    evict(cluster, "virt-launcher-pool-vm-0-abcde", dry_run=True)
    assert status_of(cluster, "vmpool-pdb")["disruptionsAllowed"] == 1
    evict(cluster, "virt-launcher-pool-vm-0-abcde")
    status = status_of(cluster, "vmpool-pdb")   # written by the eviction itself, before the controller runs
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["virt-launcher-pool-vm-0-abcde"]
    assert condition(status)["reason"] == "InsufficientPods"
    assert manager.wait_idle()
    with pytest.raises(ApiError) as err:
        evict(cluster, "virt-launcher-pool-vm-1-abcde")
    assert err.value.code == 429
    assert err.value.details["causes"][0]["message"] == ("The disruption budget vmpool-pdb needs 2 healthy pods and "
                                                         "has 2 currently")
    wait_for(lambda: cluster.find(rt(cluster, "pods"), "vms", "virt-launcher-pool-vm-0-abcde") is None, interval=0.02,
             what="the evicted launcher virt-launcher-pool-vm-0-abcde gone")
    assert manager.wait_idle()
    status = status_of(cluster, "vmpool-pdb")
    assert (status["currentHealthy"], status["expectedPods"], status["disruptionsAllowed"]) == (2, 2, 0)
    assert condition(status)["reason"] == "InsufficientPods"
    assert "disruptedPods" not in status


def test_pod_selected_by_two_budgets_cannot_be_evicted(running):
    cluster, manager = running
    pool(cluster, 2)
    pdb(cluster, "one", {"kubevirt.io/vmpool": "my-pool"}, minAvailable=1)
    pdb(cluster, "two", {"kubevirt.io": "virt-launcher"}, minAvailable=1)
    assert manager.wait_idle()
    with pytest.raises(ApiError) as err:
        evict(cluster, "virt-launcher-pool-vm-0-abcde")
    assert err.value.code == 500
    assert err.value.message == ("This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                 "does not support.")


def test_budget_not_yet_observed_asks_to_retry():
    cluster = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(100))
    manager = ControllerManager(cluster)
    for register in USED:
        register(cluster, manager)
    populate(cluster, {"namespaces": ["vms"]})
    pods = rt(cluster, "pods")
    cluster.create(pods, "vms", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
                                 "spec": {"nodeName": "n", "containers": [{"name": "c"}]}})
    cluster.update(pods, "vms", "p", {**cluster.get(pods, "vms", "p"), "status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}, subresource="status")
    pdb(cluster, "fresh", {"a": "b"}, minAvailable=0)
    with pytest.raises(ApiError) as err:
        evict(cluster, "p")
    assert err.value.code == 429 and err.value.headers == {"Retry-After": "10"}
    assert err.value.details["causes"][0]["message"] == ("The disruption budget fresh is still being processed by "
                                                         "the server.")


def test_deployment_pods_use_the_deployment_replicas(running):
    cluster, manager = running
    deployment = cluster.create(rt(cluster, "deployments.apps"), "vms", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w"}]}}}})
    rs = cluster.create(rt(cluster, "replicasets.apps"), "vms", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                           "uid": deployment["metadata"]["uid"], "controller": True}]},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w"}]}}}})
    for index in range(3):   # one replica is missing
        cluster.create(rt(cluster, "pods"), "vms", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"web-1-{index}", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                              "uid": rs["metadata"]["uid"], "controller": True}]},
            "spec": {"nodeName": "worker-a", "containers": [{"name": "w"}]}})
    pdb(cluster, "web", {"app": "web"}, maxUnavailable=1)
    pdb(cluster, "web-pct", {"app": "web"}, minAvailable="50%")
    assert manager.wait_idle()
    status = status_of(cluster, "web")
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"],
            status["disruptionsAllowed"]) == (4, 3, 3, 0)
    status = status_of(cluster, "web-pct")
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (4, 2, 1)


def test_unready_and_pending_pods_pass_a_met_budget(running):
    cluster, manager = running
    pool(cluster, 3)
    pdb(cluster, "vmpool-pdb", {"kubevirt.io/vmpool": "my-pool"}, minAvailable=2)
    assert manager.wait_idle()
    pods = rt(cluster, "pods")
    sick = cluster.get(pods, "vms", "virt-launcher-pool-vm-2-abcde")
    sick["status"]["conditions"] = [dict(c, status="False") if c["type"] == "Ready" else c
                                    for c in sick["status"]["conditions"]]
    cluster.update(pods, "vms", sick["metadata"]["name"], sick, subresource="status")
    assert manager.wait_idle()
    assert status_of(cluster, "vmpool-pdb")["disruptionsAllowed"] == 0
    evict(cluster, "virt-launcher-pool-vm-2-abcde")   # not Ready, and 2 healthy >= 2 desired
    assert cluster.get(pods, "vms", "virt-launcher-pool-vm-2-abcde")["metadata"].get("deletionTimestamp")


def test_each_drop_below_the_budget_is_recorded_until_the_counters_reset(running):
    cluster, manager = running
    pool(cluster, 3)
    pdb(cluster, "vmpool-pdb", {"kubevirt.io/vmpool": "my-pool"}, minAvailable=2)
    assert manager.wait_idle()
    recorder = cluster.disruption
    assert status_of(cluster, "vmpool-pdb")["currentHealthy"] == 3
    assert recorder.violations() == {"violations": [], "count": 0}      # starting up is no violation
    pods = rt(cluster, "pods")
    cluster.delete(pods, "vms", "virt-launcher-pool-vm-0-abcde", {"gracePeriodSeconds": 0})
    assert manager.wait_idle()
    assert recorder.violations()["count"] == 0                          # 2 healthy, 2 desired: still met
    cluster.delete(pods, "vms", "virt-launcher-pool-vm-1-abcde", {"gracePeriodSeconds": 0})
    assert manager.wait_idle()
    report = recorder.violations()
    assert report["count"] == 1
    (violation,) = report["violations"]
    assert {k: violation[k] for k in ("namespace", "name", "healthy", "min_available")} == \
        {"namespace": "vms", "name": "vmpool-pdb", "healthy": 1, "min_available": 2}
    assert violation["at"].endswith("Z")
    vmi_with_launcher(cluster, "pool-vm-3", {"kubevirt.io/vmpool": "my-pool"})    # back to 2 healthy
    assert manager.wait_idle()
    assert status_of(cluster, "vmpool-pdb")["currentHealthy"] == 2
    cluster.delete(pods, "vms", "virt-launcher-pool-vm-2-abcde", {"gracePeriodSeconds": 0})
    assert manager.wait_idle()
    assert recorder.violations()["count"] == 2                          # a second drop below
    cluster.delete(pods, "vms", "virt-launcher-pool-vm-3-abcde", {"gracePeriodSeconds": 0})
    assert manager.wait_idle()
    assert recorder.violations()["count"] == 2                          # no Pods left: nothing to count
    recorder.reset_violations()
    assert recorder.violations() == {"violations": [], "count": 0}
