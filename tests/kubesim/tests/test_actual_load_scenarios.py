"""The scenarios of issue 17 behave as their headers say: actual-load-hot-worker (requests balanced, one hot
worker: a request-based policy moves nothing, the actual-usage policies move vm-hot once, by live migration) and
flapping-close-thresholds (vm-flap ping-pongs between the workers, one migration per cycle)."""
from __future__ import annotations

import re
from contextlib import contextmanager

from kubesim import scenario
from kubesim.clock import Clock
from kubesim.components import COMPONENTS
from kubesim.controllers import ControllerManager, cronjobs
from kubesim.controllers.jobs import finished_condition
from kubesim.descheduler.run import run_once
from support.waiting import wait_for

VMI = "virtualmachineinstances.kubevirt.io"
VMIM = "virtualmachineinstancemigrations.kubevirt.io"
ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--feature-gates=EvictionsInBackground=true", "--v=3"]
PAGE_THRESHOLDS = """      thresholds:
        cpu: 70
        memory: 60
        pods: 20
      targetThresholds:
        cpu: 75
        memory: 68
        pods: 30"""
KUBERNETES_METRICS = """metricsProviders:
- source: KubernetesMetrics
profiles:"""
PROMETHEUS = """metricsProviders:
- source: Prometheus
  prometheus:
    url: https://prometheus-k8s.monitoring.svc:9091
    authToken:
      secretReference: {namespace: descheduler, name: prometheus-auth}
profiles:"""


@contextmanager
def scenario_cluster(name: str, time_scale: float = 100, with_cronjob: bool = False):
    """The workload cluster of a bundled scenario with its controllers (the CronJob's only when asked), settled."""
    spec = scenario.load(name).clusters["workload"]
    cluster = scenario.build_cluster("workload", spec, Clock(time_scale))
    manager = ControllerManager(cluster)
    for register in COMPONENTS:
        if with_cronjob or register is not cronjobs.register:
            register(cluster, manager)
    scenario.populate(cluster, spec)
    manager.start()
    try:
        assert manager.wait_idle(20)
        wait_for(lambda: all(e.obj.get("status", {}).get("phase") == "Running" for e in cluster.store.entries(VMI)),
                 interval=0.02, what="the VMIs Running")
        yield cluster, manager
    finally:
        manager.stop()


def configmap_policy(cluster) -> str:
    return cluster.store.get("configmaps", "descheduler", "descheduler").obj["data"]["policy.yaml"]


def node_of(cluster, vm: str) -> str:
    return cluster.store.get(VMI, "desched-test", vm).obj["status"]["nodeName"]


def evictions(lines) -> list[str]:
    return re.findall(r'"Eviction in background assumed" pod="([^"]+)"', "\n".join(lines))


def settle_migrations(cluster, manager, count: int) -> list[dict]:
    def finished():
        migrations = [e.obj for e in cluster.store.entries(VMIM, "desched-test")]
        done = [m for m in migrations if (m.get("status") or {}).get("phase") in ("Succeeded", "Failed")]
        return done if len(done) >= count and len(done) == len(migrations) else None
    done = wait_for(finished, interval=0.02, what=f"{count} finished migrations")
    assert manager.wait_idle(30)
    return done


def actual_policy(cluster, provider: str, metrics: str, thresholds: str) -> str:
    text = configmap_policy(cluster).replace("profiles:", provider, 1)
    return text.replace(PAGE_THRESHOLDS, f"      metricsUtilization: {metrics}\n{thresholds}")


def test_the_request_based_policy_moves_nothing_on_the_hot_worker():
    with scenario_cluster("actual-load-hot-worker") as (cluster, _manager):
        code, lines = run_once(cluster, ARGS, configmap_policy(cluster))
        text = "\n".join(lines)
        assert code == 0 and evictions(lines) == []
        for name in ("worker-a", "worker-b"):
            assert f'"Node is appropriately utilized" plugin="LowNodeUtilization" ExtensionPoint="Balance" ' \
                   f'node="{name}" usage={{"cpu":"8010m","memory":"41839Mi","pods":"5"}} ' \
                   f'usagePercentage={{"cpu":50,"memory":64,"pods":5}}' in text
        assert '"No node is underutilized, nothing to do here, you might tune your thresholds further"' in text


def test_kubernetes_metrics_moves_exactly_the_hot_vm_once():
    with scenario_cluster("actual-load-hot-worker") as (cluster, manager):
        uid = cluster.store.get(VMI, "desched-test", "vm-hot").obj["metadata"]["uid"]
        text = actual_policy(cluster, KUBERNETES_METRICS, "{source: KubernetesMetrics}",
                             "      thresholds: {cpu: 40}\n      targetThresholds: {cpu: 60}")
        _code, lines = run_once(cluster, ARGS, text)
        assert [p.rsplit("-", 1)[0] for p in evictions(lines)] == ["desched-test/virt-launcher-vm-hot"]
        assert '"Updated node usage" node="worker-a" CPU=7510' in "\n".join(lines)
        (migration,) = settle_migrations(cluster, manager, 1)
        assert migration["status"]["phase"] == "Succeeded"
        vmi = cluster.store.get(VMI, "desched-test", "vm-hot").obj
        assert vmi["status"]["nodeName"] == "worker-b" and vmi["metadata"]["uid"] == uid   # live: same VMI
        _code, again = run_once(cluster, ARGS, text)
        assert evictions(again) == []
        assert '"No node is underutilized, nothing to do here, you might tune your thresholds further"' in \
            "\n".join(again)


def test_prometheus_with_the_token_secret_moves_exactly_the_hot_vm_once():
    with scenario_cluster("actual-load-hot-worker") as (cluster, manager):
        text = actual_policy(cluster, PROMETHEUS,
                             "{source: Prometheus, prometheus: {query: 'instance:node_cpu_utilisation:rate1m'}}",
                             "      thresholds: {MetricResource: 40}\n      targetThresholds: {MetricResource: 60}")
        _code, lines = run_once(cluster, ARGS, text)
        joined = "\n".join(lines)
        assert 'node="worker-a" usage={"MetricResource":"75"}' in joined and \
            'node="worker-b" usage={"MetricResource":"31"}' in joined
        assert [p.rsplit("-", 1)[0] for p in evictions(lines)] == ["desched-test/virt-launcher-vm-hot"]
        settle_migrations(cluster, manager, 1)
        assert node_of(cluster, "vm-hot") == "worker-b"
        _code, again = run_once(cluster, ARGS, text)
        joined = "\n".join(again)
        assert evictions(again) == [] and 'node="worker-a" usage={"MetricResource":"46"}' in joined and \
            'node="worker-b" usage={"MetricResource":"59"}' in joined


def test_the_cronjob_with_a_kubernetes_metrics_policy_migrates_vm_hot_and_then_stays():
    # the shipped CronJob (*/2, EvictionsInBackground) at a faster clock: the ratio of migration time to period holds
    with scenario_cluster("actual-load-hot-worker", time_scale=300, with_cronjob=True) as (cluster, _manager):
        text = actual_policy(cluster, KUBERNETES_METRICS, "{source: KubernetesMetrics}",
                             "      thresholds: {cpu: 40}\n      targetThresholds: {cpu: 60}")
        configmaps = cluster.registry.by_key("configmaps")
        cluster.patch(configmaps, "descheduler", "descheduler", "merge", {"data": {"policy.yaml": text}})
        wait_for(lambda: node_of(cluster, "vm-hot") == "worker-b", interval=0.05, what="vm-hot on worker-b")
        seen_at_the_move = {e.obj["metadata"]["name"] for e in cluster.store.entries("jobs.batch", "descheduler")}

        def runs_completed_since_the_move():
            # Jobs by name (each carries its scheduled minute), not a count: successfulJobsHistoryLimit (3) deletes
            # the oldest finished Jobs meanwhile, so the count stops growing once the history is full
            return [e.obj for e in cluster.store.entries("jobs.batch", "descheduler")
                    if e.obj["metadata"]["name"] not in seen_at_the_move and finished_condition(e.obj) == "Complete"]
        wait_for(lambda: len(runs_completed_since_the_move()) >= 2, interval=0.05,
                 what="two more descheduler runs completed")
        migrations = [e.obj for e in cluster.store.entries(VMIM, "desched-test")]
        assert len(migrations) == 1 and node_of(cluster, "vm-hot") == "worker-b"


def test_close_thresholds_ping_pong_the_vm_every_cycle():
    with scenario_cluster("flapping-close-thresholds") as (cluster, manager):
        text = configmap_policy(cluster)
        nodes = [node_of(cluster, "vm-flap")]
        for cycle in range(1, 4):
            _code, lines = run_once(cluster, ARGS, text)
            assert len(evictions(lines)) == 1, lines
            settle_migrations(cluster, manager, cycle)
            nodes.append(node_of(cluster, "vm-flap"))
        assert nodes == ["worker-a", "worker-b", "worker-a", "worker-b"]


def test_the_flapping_scenarios_cronjob_moves_the_vm_back_and_forth():
    # timeScale 1200 keeps the scenario's ratio of a CronJob period (120 simulated s) to a migration (about 40 s)
    with scenario_cluster("flapping-close-thresholds", time_scale=1200, with_cronjob=True) as (cluster, _manager):
        seen = [node_of(cluster, "vm-flap")]

        def moved_four_times():
            now = node_of(cluster, "vm-flap")
            if now != seen[-1]:
                seen.append(now)
            return len(seen) >= 5
        # four descheduler runs and migrations: their CPU time, not the 480 simulated seconds, sets the pace under load
        wait_for(moved_four_times, 60, 0.005, "vm-flap to change nodes four times")
        assert len(seen) == 5 and all(a != b and {a, b} == {"worker-a", "worker-b"} for a, b in zip(seen, seen[1:]))
        assert scenario.load("flapping-close-thresholds").time_scale == 24
