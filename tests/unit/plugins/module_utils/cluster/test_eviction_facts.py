"""The comparison of requests with actual usage behind finding requests_disagree_with_usage, on node rows as the
facts read assembles them: a node far from its requests, two nodes ranked the other way round, the tolerance that
keeps noise out, and the nodes that count (those that can take VMs)."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.eviction_facts import add_actual_usage, installed_usage_sources, usage_disagreement


def row(name, requested, used=None, prometheus=None, control_plane=False, vmis=1, schedulable=True, memory=(10.0, 10.0)):
    """A node row with cpu `requested` and `used` percent (None: not read) and memory at `memory` (requested, used)."""
    return {"name": name, "ready": schedulable, "schedulable": schedulable, "control_plane": control_plane, "vmis": vmis,
            "usage_percent": {"cpu": requested, "memory": memory[0], "pods": 5.0},
            "actual_percent": {"cpu": used, "memory": memory[1]} if used is not None else None, "prometheus_percent": prometheus}


def test_no_finding_when_actual_usage_follows_requests():
    assert usage_disagreement([row("worker-a", 40.0, 52.0), row("worker-b", 30.0, 38.0)], 20) is None


def test_a_node_far_from_its_requests_is_named_with_both_numbers():
    found = usage_disagreement([row("worker-a", 40.0, 85.0), row("worker-b", 40.0, 35.0)], 20)
    assert found["code"] == "requests_disagree_with_usage" and found["severity"] == "warning"
    assert "worker-a actual cpu 85% against cpu requests 40% (+45 points)" in found["message"]
    assert "worker-b" not in found["message"].split(". A request-based")[0]


def test_below_its_requests_counts_too():
    found = usage_disagreement([row("worker-a", 60.0, 10.0), row("worker-b", 60.0, 55.0)], 20)
    assert "worker-a actual cpu 10% against cpu requests 60% (-50 points)" in found["message"]


def test_two_nodes_ranked_the_other_way_round_without_a_large_deviation():
    rows = [row("worker-a", 50.0, 35.0), row("worker-b", 40.0, 55.0)]
    found = usage_disagreement(rows, 20)
    assert "by cpu requests worker-a is above worker-b, by actual cpu worker-b is above worker-a" in found["message"]
    assert "points)" not in found["message"]          # neither node is 20 points off


@pytest.mark.parametrize("requested_b, used_b", [(48.0, 55.0), (40.0, 38.0)])
def test_orders_within_the_tolerance_are_noise(requested_b, used_b):
    assert usage_disagreement([row("worker-a", 50.0, 40.0), row("worker-b", requested_b, used_b)], 20) is None


def test_the_points_option_is_the_limit():
    rows = [row("worker-a", 40.0, 55.0), row("worker-b", 40.0, 41.0)]
    assert usage_disagreement(rows, 20) is None
    assert "worker-a actual cpu 55% against cpu requests 40% (+15 points)" in usage_disagreement(rows, 10)["message"]


def test_only_nodes_that_can_take_vms_count():
    rows = [row("control-plane-1", 5.0, 90.0, control_plane=True, vmis=0), row("worker-c", 5.0, 90.0, schedulable=False),
            row("worker-a", 40.0, 45.0), row("worker-b", 40.0, 42.0)]
    assert usage_disagreement(rows, 20) is None
    rows[0]["vmis"] = 2                                  # VMs run on the control plane: it counts
    assert "control-plane-1 actual cpu 90%" in usage_disagreement(rows, 20)["message"]


def test_prometheus_is_compared_with_cpu_requests_and_long_lists_are_cut():
    rows = [row("worker-{0}".format(i), 10.0, prometheus=80) for i in range(8)]
    found = usage_disagreement(rows, 20)
    assert "worker-0 the Prometheus query 80% against cpu requests 10% (+70 points)" in found["message"]
    assert "(and 3 more)" in found["message"]


def test_add_actual_usage_sets_every_column_and_none_where_nothing_was_read():
    rows = [{"name": "worker-a", "allocatable": {"cpu": 16000, "memory": 64 * 2 ** 30, "pods": 110},
             "usage_percent": {"cpu": 4.38, "memory": 2.5, "pods": 2.73}},
            {"name": "worker-b", "allocatable": {"cpu": None, "memory": 64 * 2 ** 30, "pods": 110},
             "usage_percent": {"cpu": None, "memory": 2.5, "pods": 1.0}},
            {"name": "worker-c", "allocatable": {"cpu": 16000, "memory": 64 * 2 ** 30, "pods": 110},
             "usage_percent": {"cpu": 1.0, "memory": 1.0, "pods": 1.0}}]
    server = {"source": "KubernetesMetrics", "nodes": {"worker-a": {"cpu": 12000, "memory": 16 * 2 ** 30}, "worker-b": {"cpu": 500, "memory": 2 ** 30}},
              "pods": {}}
    prometheus = {"source": "Prometheus", "query": "q", "nodes": {"worker-a": {"MetricResource": 80}}, "values": {"worker-a": 0.8}}
    add_actual_usage(rows, server, prometheus)
    assert rows[0]["actual_percent"] == {"cpu": 75.0, "memory": 25.0} and rows[0]["prometheus_percent"] == 80
    assert rows[0]["usage_deviation_points"] == {"cpu": 70.62, "memory": 22.5, "prometheus": 75.62}
    assert rows[1]["actual_percent"] == {"cpu": None, "memory": 1.56} and rows[1]["usage_deviation_points"] == {"memory": -0.94}
    assert rows[2]["actual_usage"] is None and rows[2]["actual_percent"] is None and rows[2]["prometheus_value"] is None
    assert rows[2]["usage_deviation_points"] is None


def test_the_installed_policys_sources():
    def profile(metrics_utilization):
        args = {} if metrics_utilization is None else {"metricsUtilization": metrics_utilization}
        return {"name": "p", "pluginConfig": [{"name": "LowNodeUtilization", "args": args}]}
    assert installed_usage_sources(None) == set()
    assert installed_usage_sources({"profiles": [{"name": "d", "pluginConfig": [{"name": "RemoveFailedPods"}]}]}) == set()
    assert installed_usage_sources({"profiles": [profile(None)]}) == {None}
    assert installed_usage_sources({"profiles": [profile({"metricsServer": True}), profile({"source": "Prometheus"})]}) == {
        "KubernetesMetrics", "Prometheus"}
    assert installed_usage_sources({"profiles": [profile({})]}) == set()          # "metrics source is empty": not a source
