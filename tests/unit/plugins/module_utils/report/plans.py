"""Report documents built from real plans and forecasts (policy/plan.py, policy/forecast.py), shaped as
roles/rebalance_report/vars/main.yml builds them from descheduler_policy's result, on the round nodes of the planner's
tests (cpu 10 cores, memory 100, 100 Pods): a hot worker by actual usage (metrics server, deviation thresholds), the
same cluster through a Prometheus query, and a request-based plan that moves nothing."""
from __future__ import annotations

import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.forecast import forecast_policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import plan_policy

from ..policy.test_plan import node, pod, policy

CP_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
QUERY = "instance:node_cpu_utilisation:rate1m"


def cluster():
    """Three workers with one VM each (1 cpu, 10 memory requested: 10 % by requests everywhere) and a tainted control
    plane; by actual usage worker-a is hot (8 of 10 cores), worker-b and worker-c are not (1 and 2)."""
    nodes = [node("worker-a"), node("worker-b"), node("worker-c"), node("cp", control_plane=True, taints=[CP_TAINT])]
    pods = [pod(name, worker, memory=10, cpu="1", annotations={"kubevirt.io/domain": name})
            for name, worker in (("vm-hot", "worker-a"), ("vm-1", "worker-b"), ("vm-2", "worker-c"))]
    return nodes, pods


METRICS = {"source": "KubernetesMetrics",
           "nodes": {"worker-a": {"cpu": 8000, "memory": 20}, "worker-b": {"cpu": 1000, "memory": 20}, "worker-c": {"cpu": 2000, "memory": 20}},
           "pods": {"vms/vm-hot": {"cpu": 6000, "memory": 10}, "vms/vm-1": {"cpu": 500, "memory": 10}, "vms/vm-2": {"cpu": 1500, "memory": 10}}}
PROMETHEUS = {"source": "Prometheus", "query": QUERY, "nodes": {"worker-a": {"MetricResource": 80}, "worker-b": {"MetricResource": 10},
                                                                "worker-c": {"MetricResource": 20}},
              "values": {"worker-a": 0.8, "worker-b": 0.1, "worker-c": 0.2}}


def document(wanted: dict, usage=None, with_forecast: bool = True) -> dict:
    """The report document of a rebalance whose plan (and forecast) are those of `wanted` on cluster()."""
    nodes, pods = cluster()
    plan = plan_policy(wanted, nodes, pods, actual_usage=usage)
    source = plan["usage_source"] or "requests"
    result = {"cluster": "lab", "playbook": "rebalance", "run_id": "r1", "status": "planned",
              "policy": {"policy_text": yaml.safe_dump(wanted), "planned_evictions": plan["evictions"], "plan_warnings": plan["warnings"],
                         "stop_reason": plan["stop_reason"],
                         "forecast": forecast_policy(wanted, nodes, pods, actual_usage=usage) if with_forecast else None},
              "classification": {"before": {"source": "the plan before the change (by {0})".format(source), "nodes": plan["nodes"]},
                                 "after": {"source": "the plan after the moves (by {0})".format(source), "nodes": []}, "first_run": []},
              "moved": [], "checks": []}
    return result


def metrics_deviation_document(with_forecast: bool = True) -> dict:
    """KubernetesMetrics with deviation thresholds 10/10 around the mean cpu (36.67 %): worker-a (80 %) is
    overutilized, the others underutilized; the hot VM weighs 60 points, so the forecast flaps and refuses."""
    wanted = policy(thresholds={"cpu": 10}, targets={"cpu": 10}, lnu={"useDeviationThresholds": True, "metricsUtilization": {"source": "KubernetesMetrics"}})
    return document(wanted, METRICS, with_forecast)


def prometheus_document() -> dict:
    wanted = policy(thresholds={"MetricResource": 30}, targets={"MetricResource": 50},
                    lnu={"metricsUtilization": {"source": "Prometheus", "prometheus": {"query": QUERY}}})
    return document(wanted, PROMETHEUS)


def requests_document() -> dict:
    """By requests every worker is at 10 %: all underutilized, nothing to do."""
    return document(policy(thresholds={"cpu": 20}, targets={"cpu": 50}))
