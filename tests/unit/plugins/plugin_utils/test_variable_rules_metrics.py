"""The rebalance playbooks' variables for balancing by actual usage, through check_variables with the playbooks' specs:
a Prometheus source names its query, URL and MetricResource thresholds; its variables and MetricResource only with it;
the token Secret by namespace and name (a token given there is never shown); deviation thresholds are not ordered; the
forecast's runs 1 or more."""
from __future__ import annotations

import pytest

from .test_variable_rules import GOOD_REBALANCE, example_of, problems

PROMETHEUS = {**GOOD_REBALANCE, "rebalance_metrics_source": "Prometheus", "rebalance_prometheus_query": "instance:node_cpu_utilisation:rate1m",
              "rebalance_prometheus_url": "https://prometheus-k8s.monitoring.svc:9091",
              "rebalance_prometheus_auth_secret": {"namespace": "descheduler", "name": "prometheus-token"},
              "rebalance_thresholds": {"MetricResource": 20}, "rebalance_target_thresholds": {"MetricResource": 40}}


@pytest.mark.parametrize("playbook, sets", [("rebalance", ("rebalance",)), ("fleet_rollout", ("rebalance", "fleet"))])
def test_right_actual_usage_variables_pass(playbook, sets):
    assert problems(playbook, PROMETHEUS, *sets) == {}
    assert problems(playbook, {**GOOD_REBALANCE, "rebalance_metrics_source": "KubernetesMetrics", "rebalance_no_eviction_policy": "Mandatory",
                               "rebalance_forecast_cycles": 3, "rebalance_force": True}, *sets) == {}


def test_a_prometheus_source_names_its_query_url_and_metric_resource_thresholds():
    given = {**GOOD_REBALANCE, "rebalance_metrics_source": "Prometheus"}
    found = problems("rebalance", given)
    assert list(found) == ["rebalance_prometheus_query", "rebalance_prometheus_url", "rebalance_thresholds", "rebalance_target_thresholds"]
    assert "-e rebalance_prometheus_query=instance:node_cpu_utilisation:rate1m" in found["rebalance_prometheus_query"]
    assert found["rebalance_thresholds"].startswith("rebalance_thresholds: names cpu, memory, pods; with rebalance_metrics_source=Prometheus")
    assert example_of(found["rebalance_thresholds"]) == {"rebalance_thresholds": {"MetricResource": 20},
                                                         "rebalance_target_thresholds": {"MetricResource": 40}}


@pytest.mark.parametrize("change, variable, words", [
    ({"rebalance_metrics_source": "prometheus"}, "rebalance_metrics_source", "is not one of requests, KubernetesMetrics, Prometheus"),
    ({"rebalance_prometheus_query": "up"}, "rebalance_prometheus_query", "only used with rebalance_metrics_source=Prometheus (it is requests)"),
    ({"rebalance_metrics_source": "KubernetesMetrics", "rebalance_prometheus_url": "https://p:9091"}, "rebalance_prometheus_url",
     "(it is KubernetesMetrics)"),
    ({"rebalance_target_thresholds": {"cpu": 75, "memory": 68, "pods": 30, "MetricResource": 40}}, "rebalance_target_thresholds",
     "names MetricResource, which only a Prometheus query measures"),
    ({"rebalance_no_eviction_policy": "mandatory"}, "rebalance_no_eviction_policy", "is not one of Preferred, Mandatory"),
    ({"rebalance_forecast_cycles": 0}, "rebalance_forecast_cycles", "0 is less than 1"),
])
def test_wrong_actual_usage_variables_are_named_once(change, variable, words):
    found = problems("rebalance", {**GOOD_REBALANCE, **change})
    assert list(found) == [variable] and words in found[variable], found


def test_the_token_secret_is_a_reference_and_a_token_given_there_is_never_shown():
    found = problems("rebalance", {**PROMETHEUS, "rebalance_prometheus_auth_secret": {"namespace": "descheduler", "token": "s3cr3t-t0k3n"}})
    assert list(found) == ["rebalance_prometheus_auth_secret"]
    assert "has the keys namespace, token; it names the token's Secret by namespace and name only" in found["rebalance_prometheus_auth_secret"]
    assert "s3cr3t-t0k3n" not in found["rebalance_prometheus_auth_secret"]


def test_deviation_thresholds_are_not_ordered():
    deviation = {**PROMETHEUS, "rebalance_thresholds": {"MetricResource": 10}, "rebalance_target_thresholds": {"MetricResource": 5}}
    assert list(problems("rebalance", deviation)) == ["rebalance_thresholds.MetricResource"]
    assert problems("rebalance", {**deviation, "rebalance_use_deviation_thresholds": True}) == {}


def test_a_whole_policy_wins_over_the_rendering_variables():
    assert problems("rebalance", {"rebalance_policy": "apiVersion: descheduler/v1alpha2\n", "rebalance_metrics_source": "Prometheus"}) == {}
