"""The descheduler program in Pods: a Job Pod runs one cycle from the policy ConfigMap mounted at the
directory of `--policy-config-file`, writes its klog lines to the container log and ends with exit code 0,
or 1 on a policy error; a Deployment Pod runs a cycle every `--descheduling-interval`."""
import time

import pytest

from kubesim.components import COMPONENTS
from kubesim.controllers import ControllerManager
from descheduler_cluster import add, lnu_policy, make_cluster, node, pod
from support.waiting import wait_for

ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--feature-gates=EvictionsInBackground=true", "--v=3"]


@pytest.fixture
def running():
    cluster = make_cluster(time_scale=1000)
    manager = ControllerManager(cluster)
    for register in COMPONENTS:
        register(cluster, manager)
    manager.start()
    add(cluster, "serviceaccounts", "descheduler", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                    "metadata": {"name": "descheduler"}})   # its Pods name it
    node(cluster, "worker-a")
    node(cluster, "worker-b")
    for index in range(6):
        pod(cluster, f"app-{index}", "worker-a")
    yield cluster, manager
    manager.stop()


def policy_configmap(cluster, text: str) -> None:
    add(cluster, "configmaps", "descheduler", {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "descheduler"}, "data": {"policy.yaml": text}})


def descheduler_pod(cluster, name: str, args=None, restart: str = "Never") -> dict:
    return cluster.create(cluster.registry.by_key("pods"), "descheduler", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": "worker-b", "restartPolicy": restart, "serviceAccountName": "descheduler",
                 "containers": [{"name": "descheduler", "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
                                 "command": ["/bin/descheduler"], "args": args or ARGS,
                                 "volumeMounts": [{"name": "policy-volume", "mountPath": "/policy-dir"}]}],
                 "volumes": [{"name": "policy-volume", "configMap": {"name": "descheduler"}}]}})


def wait_phase(cluster, name: str) -> dict:
    pods = cluster.registry.by_key("pods")

    def finished():
        current = cluster.get(pods, "descheduler", name)
        return current if (current.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None
    return wait_for(finished, interval=0.02, what=f"pod {name} Succeeded or Failed")


def test_a_job_pod_runs_one_cycle_and_succeeds(running):
    cluster, _manager = running
    policy_configmap(cluster, lnu_policy())
    descheduler_pod(cluster, "descheduler-29000000-abcde")
    done = wait_phase(cluster, "descheduler-29000000-abcde")
    assert done["status"]["phase"] == "Succeeded"
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    log = cluster.read_log("descheduler", "descheduler-29000000-abcde", "descheduler")
    assert any('"Node has been classified" plugin="LowNodeUtilization" ExtensionPoint="Balance" category="overutilized" '
               'node="worker-a"' in line for line in log)
    assert log[-1].endswith('"Number of evictions/requests" totalEvicted=1 evictionRequests=0')
    pods = cluster.registry.by_key("pods")
    gone = [f"app-{index}" for index in range(6) if cluster.find(pods, "apps", f"app-{index}") is None or
            cluster.get(pods, "apps", f"app-{index}")["metadata"].get("deletionTimestamp")]
    assert len(gone) == 1   # one of the six equal Pods: which one upstream does not define


def test_a_policy_error_fails_the_pod_with_the_upstream_message(running):
    cluster, _manager = running
    policy_configmap(cluster, lnu_policy(lnu_extra="evictableNamespaces: {include: [apps]}"))
    descheduler_pod(cluster, "descheduler-bad")
    done = wait_phase(cluster, "descheduler-bad")
    assert done["status"]["phase"] == "Failed"
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    log = cluster.read_log("descheduler", "descheduler-bad", "descheduler")
    assert len(log) == 2 and all(line.startswith("E") for line in log)
    assert log[0].endswith('"failed to run descheduler server" err="in profile test: only Exclude namespaces can be '
                           'set, inclusion is not supported"')


def test_a_missing_policy_key_and_a_bad_flag(running):
    cluster, _manager = running
    add(cluster, "configmaps", "descheduler", {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "descheduler"}, "data": {"other.yaml": "x"}})
    descheduler_pod(cluster, "no-key")
    descheduler_pod(cluster, "bad-gate", args=["--policy-config-file=/policy-dir/policy.yaml",
                                               "--feature-gates=EvictionInBackground=true"])
    assert wait_phase(cluster, "no-key")["status"]["phase"] == "Failed"
    assert cluster.read_log("descheduler", "no-key", "descheduler")[0].endswith(
        'err="failed to read policy config file \\"/policy-dir/policy.yaml\\": open /policy-dir/policy.yaml: no such '
        'file or directory"')
    assert wait_phase(cluster, "bad-gate")["status"]["phase"] == "Failed"
    assert cluster.read_log("descheduler", "bad-gate", "descheduler") == [
        'Error: invalid argument "EvictionInBackground=true" for "--feature-gates" flag: unrecognized feature gate: '
        'EvictionInBackground']


def test_a_deployment_pod_runs_a_cycle_every_interval_while_it_lives(running):
    cluster, _manager = running
    policy_configmap(cluster, lnu_policy("{cpu: 5, memory: 5, pods: 1}"))
    descheduler_pod(cluster, "descheduler-7d9f-x", args=ARGS + ["--descheduling-interval=60s"], restart="Always")
    wait_for(lambda: sum('"Number of evictions/requests"' in line
                         for line in cluster.read_log("descheduler", "descheduler-7d9f-x", "descheduler")) >= 3,
             interval=0.02, what="three cycles of the Deployment Pod")
    pods = cluster.registry.by_key("pods")
    assert cluster.get(pods, "descheduler", "descheduler-7d9f-x")["status"]["phase"] == "Running"
    cluster.delete(pods, "descheduler", "descheduler-7d9f-x", {"gracePeriodSeconds": 0})
    time.sleep(0.2)
    count = len(cluster.read_log("descheduler", "descheduler-7d9f-x", "descheduler"))
    time.sleep(0.2)
    assert len(cluster.read_log("descheduler", "descheduler-7d9f-x", "descheduler")) == count


def test_a_deployment_container_with_a_bad_policy_restarts_and_rereads_the_configmap(running):
    cluster, _manager = running
    policy_configmap(cluster, lnu_policy(thresholds="{cpu: 90}", targets="{cpu: 50}"))
    descheduler_pod(cluster, "descheduler-crash", args=ARGS + ["--descheduling-interval=5m"], restart="Always")
    pods, configmaps = cluster.registry.by_key("pods"), cluster.registry.by_key("configmaps")

    def restarted():
        status = (cluster.get(pods, "descheduler", "descheduler-crash")["status"].get("containerStatuses") or [{}])[0]
        return status if status.get("restartCount", 0) >= 1 else None
    status = wait_for(restarted, interval=0.01, what="a restart of the container after its policy error")
    assert status["restartCount"] >= 1 and status["lastState"]["terminated"]["exitCode"] == 1
    cluster.patch(configmaps, "descheduler", "descheduler", "merge", {"data": {"policy.yaml": lnu_policy()}})

    def log_with_a_cycle():
        log = cluster.read_log("descheduler", "descheduler-crash", "descheduler")
        return log if any('"Number of evictions/requests"' in line for line in log) else None
    log = wait_for(log_with_a_cycle, interval=0.01, what="a cycle with the fixed policy")
    assert any("thresholds' cpu percentage is greater than targetThresholds'" in line for line in log)
    assert any('"Number of evictions/requests" totalEvicted=1' in line for line in log)
    assert cluster.get(pods, "descheduler", "descheduler-crash")["status"]["phase"] == "Running"


def _criteria(log: list) -> list:
    return [line.split('"Criteria for a node under utilization" ', 1)[1] for line in log
            if '"Criteria for a node under utilization"' in line]


def test_a_deployment_keeps_the_policy_it_started_with_until_its_pod_is_replaced(running):
    """Upstream reads --policy-config-file once, in Run (cmd/descheduler/app/server.go -> pkg/descheduler/descheduler.go),
    and every cycle of the interval runs with it: a ConfigMap change reaches only a Pod started after it."""
    cluster, _manager = running
    policy_configmap(cluster, lnu_policy("{cpu: 5, memory: 5, pods: 1}"))
    labels = {"app.kubernetes.io/name": "descheduler"}
    add(cluster, "deployments.apps", "descheduler", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "descheduler", "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "serviceAccountName": "descheduler", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "descheduler", "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
                            "command": ["/bin/descheduler"], "args": ARGS + ["--descheduling-interval=60s"],
                            "volumeMounts": [{"name": "policy-volume", "mountPath": "/policy-dir"}]}],
            "volumes": [{"name": "policy-volume", "configMap": {"name": "descheduler"}}]}}}})
    pods, configmaps = cluster.registry.by_key("pods"), cluster.registry.by_key("configmaps")

    def running_pods() -> list:
        return [p for p in (entry.obj for entry in cluster.list(pods, "descheduler").items)
                if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]

    [first] = wait_for(running_pods, interval=0.02, what="a running descheduler Pod")
    name = first["metadata"]["name"]
    wait_for(lambda: len(_criteria(cluster.read_log("descheduler", name, "descheduler"))) >= 2, interval=0.02, what="two cycles")
    old = _criteria(cluster.read_log("descheduler", name, "descheduler"))[0]
    cluster.patch(configmaps, "descheduler", "descheduler", "merge", {"data": {"policy.yaml": lnu_policy("{cpu: 7, memory: 7, pods: 2}")}})
    seen = len(_criteria(cluster.read_log("descheduler", name, "descheduler")))
    wait_for(lambda: len(_criteria(cluster.read_log("descheduler", name, "descheduler"))) >= seen + 3, interval=0.02,
             what="three cycles after the change")
    # the running process still classifies with the policy it read at start
    assert set(_criteria(cluster.read_log("descheduler", name, "descheduler"))) == {old}
    # the ReplicaSet replaces the deleted Pod at once (the old one takes its grace period); the new process reads the change
    cluster.delete(pods, "descheduler", name, {"gracePeriodSeconds": 30})
    [second] = wait_for(lambda: [p for p in running_pods() if p["metadata"]["name"] != name], interval=0.02, what="a replacement Pod")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert any(c.get("type") == "Ready" and c.get("status") == "True" for c in second["status"]["conditions"])
    new = wait_for(lambda: _criteria(cluster.read_log("descheduler", second["metadata"]["name"], "descheduler")), interval=0.02,
                   what="a cycle of the new Pod")
    assert old != new[0] and "7" in new[0] and "7" not in old, (old, new[0])
    wait_for(lambda: cluster.find(pods, "descheduler", name) is None, interval=0.02, what="the old Pod gone")
