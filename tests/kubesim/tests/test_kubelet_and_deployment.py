"""The kubelet's host addresses (`status.hostIP`/`hostIPs` from the node's addresses), graceful Pod deletion
on the simulated clock, and a paused Deployment's Progressing condition, as upstream reports them."""
import copy
import time
from datetime import datetime, timezone

import pytest

from kubesim.controllers import (deployments, garbage_collector, kubelet, namespace, replicasets, scheduler,
                                 serviceaccounts)

import in_process
from support.waiting import wait_for

USED = [garbage_collector.register, namespace.register, serviceaccounts.register, scheduler.register,
        kubelet.register, deployments.register, replicasets.register]


def node(name, addresses):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}], "addresses": addresses}}


NODES = [node("v4", [{"type": "Hostname", "address": "v4"}, {"type": "ExternalIP", "address": "203.0.113.7"},
                     {"type": "InternalIP", "address": "192.0.2.21"}]),
         node("dual", [{"type": "InternalIP", "address": "192.0.2.22"}, {"type": "InternalIP", "address": "192.0.2.23"},
                       {"type": "InternalIP", "address": "2001:db8::22"}]),
         node("external", [{"type": "ExternalIP", "address": "203.0.113.9"}]),
         node("bare", [])]


@pytest.fixture
def started():
    with in_process.running(in_process.bare_cluster(), USED, {"namespaces": ["apps"], "objects": NODES}) as pair:
        yield pair


def rt(cluster, key):
    return cluster.registry.by_key(key)


def running_pod(cluster, name, node_name, **spec):
    cluster.create(rt(cluster, "pods"), "apps", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                                 "spec": {"nodeName": node_name, **spec,
                                                          "containers": [{"name": "c", "image": "busybox:1.37"}]}})

    def running():
        pod = cluster.find(rt(cluster, "pods"), "apps", name)
        return pod if pod and pod["status"].get("phase") == "Running" else None
    return wait_for(running, interval=0.01, what=f"{name} running")


# ----------------------------------------------------------------------------------------- hostIP
@pytest.mark.parametrize(("node_name", "host_ips"), [
    ("v4", ["192.0.2.21"]),                      # InternalIP before ExternalIP
    ("dual", ["192.0.2.22", "2001:db8::22"]),    # the first, then the first of the other family
    ("external", ["203.0.113.9"]),               # no InternalIP: the ExternalIP
])
def test_the_kubelet_reports_the_node_addresses_as_host_ips(started, node_name, host_ips):
    status = running_pod(started[0], "p", node_name)["status"]
    assert status["hostIP"] == host_ips[0]
    assert status["hostIPs"] == [{"ip": ip} for ip in host_ips]
    assert status["podIPs"] == [{"ip": status["podIP"]}] and status["podIP"] not in host_ips


def test_a_node_without_addresses_gives_no_host_ip(started):
    status = running_pod(started[0], "p", "bare")["status"]
    assert "hostIP" not in status and "hostIPs" not in status


def test_a_host_network_pod_has_the_node_addresses_as_pod_ips(started):
    status = running_pod(started[0], "p", "dual", hostNetwork=True)["status"]
    assert (status["podIP"], status["podIPs"]) == ("192.0.2.22", [{"ip": "192.0.2.22"}, {"ip": "2001:db8::22"}])


# ------------------------------------------------------------------------------ graceful deletion
def parse(timestamp):
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def seconds_from_now(timestamp):
    return parse(timestamp) - time.time()


def test_a_pod_goes_after_its_termination_grace_period_in_simulated_time(started):
    cluster = started[0]   # the clock runs 100 times faster: 30 s of grace last 0.3 s
    running_pod(cluster, "p", "v4")
    began = time.monotonic()
    deleting = cluster.delete(rt(cluster, "pods"), "apps", "p")
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 30
    assert 28 <= seconds_from_now(deleting["metadata"]["deletionTimestamp"]) <= 31   # wall clock: now + 30 s
    assert cluster.find(rt(cluster, "pods"), "apps", "p") is not None
    wait_for(lambda: cluster.find(rt(cluster, "pods"), "apps", "p") is None, interval=0.01, what="p removed by its kubelet")
    assert time.monotonic() - began >= 0.29


def test_the_delete_option_overrides_the_spec_and_a_negative_grace_period_means_one_second(started):
    cluster = started[0]
    running_pod(cluster, "p", "v4", terminationGracePeriodSeconds=600)
    assert cluster.delete(rt(cluster, "pods"), "apps", "p", {"gracePeriodSeconds": -5})["metadata"][
        "deletionGracePeriodSeconds"] == 1
    # gone long before the spec's 600 s: the kubelet honours the 1 s (at any machine speed, 1 s is a hundredth of that)
    wait_for(lambda: cluster.find(rt(cluster, "pods"), "apps", "p") is None, cluster.clock.real_seconds(600) / 2, 0.01,
             "p gone after 1 s")


def test_a_shorter_grace_period_moves_the_deadline_and_the_kubelet_honours_it(started):
    cluster = started[0]
    running_pod(cluster, "p", "v4", terminationGracePeriodSeconds=3000)   # 30 s real
    first = cluster.delete(rt(cluster, "pods"), "apps", "p")
    second = cluster.delete(rt(cluster, "pods"), "apps", "p", {"gracePeriodSeconds": 10})
    assert second["metadata"]["deletionGracePeriodSeconds"] == 10
    assert parse(first["metadata"]["deletionTimestamp"]) - parse(second["metadata"]["deletionTimestamp"]) == 2990
    # gone long before the first deadline (3000 s): the kubelet honours the shorter one
    wait_for(lambda: cluster.find(rt(cluster, "pods"), "apps", "p") is None, cluster.clock.real_seconds(3000) / 2, 0.01,
             "p gone after 10 s")


# ------------------------------------------------------------------------------ paused Deployment
def deployment(paused):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {
        "replicas": 1, "paused": paused, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}


def conditions(cluster):
    status = cluster.get(rt(cluster, "deployments.apps"), "apps", "web").get("status") or {}
    return [{k: c[k] for k in ("type", "status", "reason", "message")} for c in status.get("conditions") or []]


PAUSED = {"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused", "message": "Deployment is paused"}


def test_a_paused_deployment_reports_deployment_paused_and_rolls_nothing_out(started):
    cluster, manager = started
    cluster.create(rt(cluster, "deployments.apps"), "apps", deployment(paused=True))
    wait_for(lambda: conditions(cluster) and conditions(cluster)[0] == PAUSED, interval=0.01, what="the DeploymentPaused condition")
    assert manager.wait_idle()
    assert conditions(cluster) == [PAUSED, {"type": "Available", "status": "False",
                                            "reason": "MinimumReplicasUnavailable",
                                            "message": "Deployment does not have minimum availability."}]
    assert list(cluster.store.entries("replicasets.apps", "apps")) == []
    condition = cluster.get(rt(cluster, "deployments.apps"), "apps", "web")["status"]["conditions"][0]
    assert set(condition) == {"type", "status", "reason", "message", "lastUpdateTime", "lastTransitionTime"}


def test_resuming_reports_deployment_resumed_then_the_rollout(started):
    cluster, _manager = started
    deployments_rt = rt(cluster, "deployments.apps")
    cluster.create(deployments_rt, "apps", deployment(paused=True))
    wait_for(lambda: PAUSED in conditions(cluster), interval=0.01, what="the DeploymentPaused condition")
    seen = []
    cluster.add_listener(lambda e: seen.append(copy.deepcopy((e.obj.get("status") or {}).get("conditions")))
                         if e.key == "deployments.apps" else None)
    cluster.patch(deployments_rt, "apps", "web", "merge", {"spec": {"paused": False}})
    wait_for(lambda: {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}.items()
             <= next((c for c in conditions(cluster) if c["type"] == "Progressing"), {}).items(), 5, 0.01, "rolled out")
    progressing = [(c["status"], c["reason"], c["message"]) for conds in seen for c in conds or []
                   if c["type"] == "Progressing"]
    assert ("Unknown", "DeploymentResumed", "Deployment is resumed") in progressing
    assert progressing.index(("Unknown", "DeploymentResumed", "Deployment is resumed")) < \
        next(i for i, c in enumerate(progressing) if c[1] == "NewReplicaSetAvailable")


def test_a_paused_deployment_still_scales_its_replica_set_but_does_not_roll_a_new_template(started):
    cluster, manager = started
    deployments_rt = rt(cluster, "deployments.apps")
    cluster.create(deployments_rt, "apps", deployment(paused=False))
    wait_for(lambda: len(list(cluster.store.entries("replicasets.apps", "apps"))) == 1, interval=0.01, what="first ReplicaSet")
    cluster.patch(deployments_rt, "apps", "web", "merge", {"spec": {"paused": True, "replicas": 3, "template": {
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}})
    wait_for(lambda: [e.obj["spec"]["replicas"] for e in cluster.store.entries("replicasets.apps", "apps")] == [3], interval=0.01,
             what="the one ReplicaSet scaled to 3")
    assert manager.wait_idle()
    sets = [e.obj for e in cluster.store.entries("replicasets.apps", "apps")]
    assert len(sets) == 1 and sets[0]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert PAUSED in conditions(cluster)
