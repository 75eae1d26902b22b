"""The forecast (runs planned one after the other, each run's migrations applied) and the scheduler's choice of the
destination, on the round nodes of test_plan (cpu 10 cores, memory 100, 100 Pods) with a tainted control plane, so
that only the workers take VMs."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy import forecast, placement
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.plan import active_pods

from .test_plan import node, pod, policy

CP_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def workers(*names, **extra):
    return [node(n, **extra.get(n, {})) for n in names] + [node("cp", control_plane=True, taints=[CP_TAINT])]


def vm(name, node_name, memory, cpu="100m", **kwargs):
    return pod(name, node_name, memory=memory, cpu=cpu, annotations={"kubevirt.io/domain": name}, **kwargs)


def filler(name, node_name, memory):
    return pod(name, node_name, memory=memory, labels={}, owner="ReplicaSet")


def moves(result):
    return [(c["cycle"], e["vm"], e["source"], e["destination"]) for c in result["cycles"] for e in c["evictions"]]


# ------------------------------------------------------------------------------------------ converging, flapping, no-op
def test_two_workers_converge_over_two_runs():
    # one VM per run (maxNoOfPodsToEvictPerNode 1): worker-a 90 -> 75 -> 60 (no longer above 60), worker-b 0 -> 15 -> 30
    pods = [vm("vm-{0}".format(i), "worker-a", 15) for i in range(1, 7)]
    result = forecast.forecast_policy(policy(thresholds={"memory": 30}, targets={"memory": 60}, per_node=1), workers("worker-a", "worker-b"), pods)
    assert moves(result) == [(1, "vm-1", "worker-a", "worker-b"), (2, "vm-2", "worker-a", "worker-b")]
    assert result["converged"] is True and result["cycles_to_converge"] == 2 and result["migrations"] == 2
    assert [c["categories"] for c in result["cycles"]] == [
        {"worker-a": "overutilized", "worker-b": "underutilized"}, {"worker-a": "overutilized", "worker-b": "underutilized"},
        {"worker-a": "appropriately utilized", "worker-b": "underutilized"}]
    assert result["cycles"][-1]["stop_reason"] == "All nodes are under target utilization, nothing to do here"
    assert result["swaps"] == [] and result["moved_back"] == [] and result["unplaced"] == [] and result["refusal"] is None


def test_close_thresholds_flap_and_the_refusal_names_the_first_swap_and_the_fix():
    # one VM of 25 moves worker-a 65 -> 40 and worker-b 25 -> 50: with thresholds 40 / targets 45 they swap, and it goes back
    pods = [vm("vm-1", "worker-a", 25), filler("a-base", "worker-a", 40), filler("b-base", "worker-b", 25)]
    result = forecast.forecast_policy(policy(thresholds={"memory": 40}, targets={"memory": 45}), workers("worker-a", "worker-b"), pods, max_cycles=4)
    assert moves(result) == [(1, "vm-1", "worker-a", "worker-b"), (2, "vm-1", "worker-b", "worker-a"), (3, "vm-1", "worker-a", "worker-b"),
                             (4, "vm-1", "worker-b", "worker-a")]
    assert result["converged"] is False and result["cycles_to_converge"] is None and result["migrations"] == 4
    assert result["swaps"][:2] == [{"node": "worker-a", "from": "overutilized", "to": "underutilized", "cycle": 1},
                                   {"node": "worker-b", "from": "underutilized", "to": "overutilized", "cycle": 1}]
    assert result["moved_back"][0] == {"vm": "vm-1", "namespace": "vms", "cycle": 2, "nodes": ["worker-a", "worker-b", "worker-a"]}
    assert result["refusal"] == ("the forecast swaps worker-a from overutilized to underutilized with run 1's migrations (vm-1 worker-a -> worker-b), "
                                 "so a later run moves VMs back: widen the gap between thresholds and targetThresholds "
                                 "(memory 5 points apart now and one VM weighs 25.0: make it at least 26).")
    calm = forecast.forecast_policy(policy(thresholds={"memory": 30}, targets={"memory": 60}), workers("worker-a", "worker-b"), pods)
    assert calm["refusal"] is None and calm["converged"] is True


def test_a_balanced_cluster_is_a_no_op():
    pods = [vm("vm-1", "worker-a", 40), vm("vm-2", "worker-b", 40)]
    result = forecast.forecast_policy(policy(), workers("worker-a", "worker-b"), pods)
    assert result["converged"] is True and result["cycles_to_converge"] == 0 and result["migrations"] == 0
    assert len(result["cycles"]) == 1 and result["cycles"][0]["evictions"] == [] and result["refusal"] is None
    assert result["cycles"][0]["stop_reason"] == "No node is underutilized, nothing to do here, you might tune your thresholds further"


def test_not_converging_within_max_cycles_is_refused():
    pods = [vm("vm-{0}".format(i), "worker-a", 15) for i in range(1, 7)]
    result = forecast.forecast_policy(policy(thresholds={"memory": 30}, targets={"memory": 60}, per_node=1), workers("worker-a", "worker-b"), pods,
                                      max_cycles=2)
    assert result["converged"] is False and result["migrations"] == 2 and result["swaps"] == []
    assert result["refusal"] == ("the forecast does not converge within 2 runs (2 migrations): a run moves at most 1 VMs here: forecast more runs "
                                 "(max_cycles) or raise the per-run limits.")


def test_a_vm_that_fits_no_other_node_stays_and_is_refused():
    # nodeFit off: the planner evicts a VM whose node selector only its own node matches
    nodes = workers("worker-a", "worker-b", **{"worker-a": {}})
    nodes[0]["metadata"]["labels"]["disk"] = "nvme"
    stuck = vm("vm-1", "worker-a", 70, nodeSelector={"disk": "nvme"})
    result = forecast.forecast_policy(policy(), nodes, [stuck], max_cycles=3)
    assert result["unplaced"][0] == {"vm": "vm-1", "namespace": "vms", "pod": "vm-1", "node": "worker-a", "cycle": 1}
    assert result["cycles"][0]["evictions"][0]["destination"] is None
    assert result["cycles"][0]["evictions"][0]["node_fit"]["worker-b"] == "pod node selector does not match the node label"
    assert result["migrations"] == 0 and result["refusal"].startswith("the forecast finds no node the scheduler would place vm-1 on")


def test_the_forecast_changes_nothing_it_is_given():
    nodes = workers("worker-a", "worker-b")
    pods = [vm("vm-1", "worker-a", 25), filler("a-base", "worker-a", 40), filler("b-base", "worker-b", 25)]
    usage = {"source": "KubernetesMetrics", "nodes": {"worker-a": {"cpu": 9000, "memory": 65}, "worker-b": {"cpu": 100, "memory": 25}},
             "pods": {"vms/vm-1": {"cpu": 5000, "memory": 25}}}
    before = copy.deepcopy((nodes, pods, usage))
    forecast.forecast_policy(policy(thresholds={"memory": 40}, targets={"memory": 45}), nodes, pods, max_cycles=3)
    forecast.forecast_policy(policy(thresholds={"cpu": 30}, targets={"cpu": 60}, lnu={"metricsUtilization": {"source": "KubernetesMetrics"}}),
                             nodes, pods, actual_usage=usage, max_cycles=3)
    assert (nodes, pods, usage) == before


def test_a_plan_that_cannot_be_made_is_no_forecast():
    result = forecast.forecast_policy(km_policy(), workers("worker-a", "worker-b"), [vm("vm-1", "worker-a", 70)])
    assert result["error"].startswith("actual usage not read: ") and result["cycles"] == []
    assert result["converged"] is False and result["refusal"] is None and result["migrations"] == 0


# ------------------------------------------------------------------------------------------ actual usage moves with the VM
def km_policy():
    return policy(thresholds={"cpu": 30}, targets={"cpu": 60}, lnu={"metricsUtilization": {"source": "KubernetesMetrics"}})


def test_metrics_server_usage_moves_with_the_vm():
    # requests are balanced; worker-a burns 7 cores, 3 of them in vm-hot: it moves, and worker-a (40 %) and its
    # destination (40 %) both end appropriately utilized, so the next run finds nothing to do
    pods = [vm("vm-hot", "worker-a", 10, cpu="1"), vm("vm-warm", "worker-a", 10, cpu="1"), vm("vm-b", "worker-b", 10, cpu="1"),
            vm("vm-c", "worker-c", 10, cpu="1"), vm("vm-c2", "worker-c", 10, cpu="1")]
    usage = {"source": "KubernetesMetrics", "nodes": {"worker-a": {"cpu": 7000, "memory": 20}, "worker-b": {"cpu": 1000, "memory": 10},
                                                      "worker-c": {"cpu": 1000, "memory": 20}},
             "pods": {"vms/vm-hot": {"cpu": 3000, "memory": 10}, "vms/vm-warm": {"cpu": 2000, "memory": 10}, "vms/vm-b": {"cpu": 1000, "memory": 10},
                      "vms/vm-c": {"cpu": 500, "memory": 10}, "vms/vm-c2": {"cpu": 500, "memory": 10}}}
    result = forecast.forecast_policy(km_policy(), workers("worker-a", "worker-b", "worker-c"), pods, actual_usage=usage)
    assert moves(result) == [(1, "vm-hot", "worker-a", "worker-b")]   # worker-b holds one VM's requests, worker-c two
    assert result["cycles"][0]["evictions"][0]["share_percent"] == {"cpu": 30.0, "memory": 10.0, "pods": 1.0}
    assert result["cycles"][1]["categories"] == {"worker-a": "appropriately utilized", "worker-b": "appropriately utilized",
                                                 "worker-c": "underutilized"}
    assert result["converged"] is True and result["cycles_to_converge"] == 1 and result["refusal"] is None


def test_a_swap_from_vms_stacking_on_one_node_asks_for_fewer_moves_per_run():
    # the gap (20 -> 50) is wider than a VM (10 points), but the scheduler sends all five to worker-b (worker-c has
    # its cpu requested), so worker-b goes from 10 to 60
    pods = [vm("vm-{0}".format(i), "worker-a", 1) for i in range(10)]
    pods += [filler("b-base", "worker-b", 1), pod("c-base", "worker-c", memory=1, cpu="8", labels={}, owner="ReplicaSet")]
    usage = {"source": "KubernetesMetrics", "nodes": {"worker-a": {"cpu": 10000, "memory": 10}, "worker-b": {"cpu": 1000, "memory": 1},
                                                      "worker-c": {"cpu": 1000, "memory": 1}},
             "pods": {"vms/vm-{0}".format(i): {"cpu": 1000, "memory": 1} for i in range(10)}}
    km = policy(thresholds={"cpu": 20}, targets={"cpu": 50}, lnu={"metricsUtilization": {"source": "KubernetesMetrics"}})
    result = forecast.forecast_policy(km, workers("worker-a", "worker-b", "worker-c"), pods, actual_usage=usage, max_cycles=3)
    assert [m[3] for m in moves(result) if m[0] == 1] == ["worker-b"] * 5
    assert result["swaps"][0] == {"node": "worker-b", "from": "underutilized", "to": "overutilized", "cycle": 1}
    assert result["refusal"].startswith("the forecast swaps worker-b from underutilized to overutilized with run 1's migrations (vm-0 worker-a -> worker-b")
    assert result["refusal"].endswith("so a later run moves VMs back: let fewer VMs land on one node in a run (maxNoOfPodsToEvictPerNode, "
                                      "maxNoOfPodsToEvictTotal) or widen the gap between thresholds and targetThresholds.")


def test_prometheus_share_from_pod_metrics_and_else_from_requests():
    prom = policy(thresholds={"MetricResource": 30}, targets={"MetricResource": 50},
                  lnu={"metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "instance:node_cpu_utilisation:rate1m"}}})
    pods = [vm("vm-hot", "worker-a", 30, cpu="1"), vm("vm-warm", "worker-a", 10, cpu="1"), vm("vm-b", "worker-b", 10, cpu="1")]
    values = {"worker-a": 0.8, "worker-b": 0.1}
    usage = {"source": "Prometheus", "query": "instance:node_cpu_utilisation:rate1m", "nodes": {n: {"MetricResource": int(v * 100)} for n, v in values.items()},
             "values": values, "pods": {"vms/vm-hot": {"cpu": 3000, "memory": 30}, "vms/vm-warm": {"cpu": 1000, "memory": 10}}}
    with_metrics = forecast.forecast_policy(prom, workers("worker-a", "worker-b"), pods, actual_usage=usage, max_cycles=2)
    first = with_metrics["cycles"][0]["evictions"][0]
    assert (first["vm"], first["destination"], first["share_percent"]["MetricResource"]) == ("vm-hot", "worker-b", 60.0)   # 0.8 * 3/4
    assert with_metrics["cycles"][1]["categories"] == {"worker-a": "underutilized", "worker-b": "overutilized"}   # 20 and 70: a swap
    assert with_metrics["swaps"][0] == {"node": "worker-a", "from": "overutilized", "to": "underutilized", "cycle": 1}
    assert "MetricResource 20 points apart now and one VM weighs 60.0: make it at least 61" in with_metrics["refusal"]
    del usage["pods"]
    by_requests = forecast.forecast_policy(prom, workers("worker-a", "worker-b"), pods, actual_usage=usage, max_cycles=2)
    # the mean of vm-hot's part of worker-a's requests: cpu 1/2, memory 30/40 -> 0.625 of 0.8 = 50 points
    assert by_requests["cycles"][0]["evictions"][0]["share_percent"]["MetricResource"] == 50.0
    assert by_requests["cycles"][1]["categories"] == {"worker-a": "underutilized", "worker-b": "overutilized"}


# ------------------------------------------------------------------------------------------ the scheduler's choice
def scheduler(nodes, pods):
    return placement.Placement(nodes, active_pods(pods))


def test_the_scheduler_scores_least_allocated_plus_balanced():
    # worker-b: 1 core and 10 of memory requested; with the VM (100m, 10): LeastAllocated cpu (10000 - 1100) * 100 // 10000
    # = 89, memory 80 -> 84; BalancedAllocation fractions 0.11 and 0.2 -> 100 * (1 - 0.045) -> 95
    pods = [vm("mover", "worker-a", 10), filler("b-base", "worker-b", 10)]
    pods[1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    chosen = scheduler(workers("worker-a", "worker-b"), pods).choose(pods[0], "worker-a")
    assert chosen["destination"] == "worker-b" and chosen["score"] == 84 + 95 and chosen["scores"] == {"worker-b": 179}
    assert chosen["errors"] == {"cp": "pod does not tolerate taints on the node"}
    assert placement.least_allocated_score({"cpu": 1100, "memory": 20}, {"cpu": 10000, "memory": 100}) == 84
    assert placement.balanced_allocation_score({"cpu": 1100, "memory": 20}, {"cpu": 10000, "memory": 100}) == 95


def test_the_scheduler_prefers_the_emptiest_fitting_node_and_breaks_ties_by_name():
    nodes = workers("worker-a", "worker-b", "worker-c", "worker-d", "worker-e")
    nodes[4]["spec"]["unschedulable"] = True
    pods = [vm("mover", "worker-a", 30), filler("b-base", "worker-b", 50), filler("c-base", "worker-c", 20), filler("d-base", "worker-d", 20)]
    chosen = scheduler(nodes, pods).choose(pods[0], "worker-a")
    assert chosen["destination"] == "worker-c" and chosen["tied"] == ["worker-d"]
    assert chosen["scores"]["worker-c"] > chosen["scores"]["worker-b"] and "worker-a" not in chosen["scores"]   # never its own node
    assert chosen["errors"]["worker-e"] == "node is not schedulable"
    pods.append(filler("c-more", "worker-c", 1))
    assert scheduler(nodes, pods).choose(pods[0], "worker-a")["destination"] == "worker-d"


def test_a_container_without_requests_counts_the_schedulers_defaults():
    bare = pod("bare", "worker-a")
    bare["spec"]["containers"][0]["resources"] = {}
    assert placement.non_zero_requests(bare) == {"cpu": 100, "memory": 200 * 1024 * 1024}
    explicit_zero = pod("zero", "worker-a", memory=0, cpu="0")
    assert placement.non_zero_requests(explicit_zero) == {"cpu": 0, "memory": 0}


@pytest.mark.parametrize("taken_by_move", [True, False])
def test_the_scheduler_sees_each_move_of_the_run(taken_by_move):
    # two VMs leave worker-a in one run: the first fills worker-b, so the second goes to worker-c
    nodes = workers("worker-a", "worker-b", "worker-c")
    pods = [vm("vm-1", "worker-a", 40), vm("vm-2", "worker-a", 40), filler("c-base", "worker-c", 5)]
    where = scheduler(nodes, pods)
    first = where.choose(pods[0], "worker-a")["destination"]
    assert first == "worker-b"
    if taken_by_move:
        where.move(pods[0], dict(pods[0], spec=dict(pods[0]["spec"], nodeName="worker-b")), "worker-a", "worker-b")
    assert where.choose(pods[1], "worker-a")["destination"] == ("worker-c" if taken_by_move else "worker-b")


def test_a_vm_that_migrated_before_is_placed_as_kubevirts_next_target_pod():
    # the launcher is a former target Pod: KubeVirt's `hostname NotIn [worker-b]` (the node it came from) is on it, but the
    # next target Pod is rendered from the VMI, so the forecast may send the VM back to worker-b (and the moved Pod
    # excludes worker-a, where it comes from)
    former_target = vm("vm-1", "worker-a", 25, labels={"app": "vm", "kubevirt.io/migrationJobUID": "u1"})
    former_target["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["worker-b"]}]}]}}}
    pods = [former_target, filler("a-base", "worker-a", 40), filler("b-base", "worker-b", 25)]
    result = forecast.forecast_policy(policy(thresholds={"memory": 40}, targets={"memory": 45}), workers("worker-a", "worker-b"), pods, max_cycles=2)
    assert moves(result)[:2] == [(1, "vm-1", "worker-a", "worker-b"), (2, "vm-1", "worker-b", "worker-a")]
    assert result["unplaced"] == []
    target = placement.migration_target(former_target, "worker-a")
    terms = target["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["worker-a"]}]}]
    assert former_target["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"][0]["values"] == ["worker-b"]   # the input is not changed
