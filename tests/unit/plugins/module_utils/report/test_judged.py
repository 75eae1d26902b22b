"""The report shows what the plan judged the nodes by: actual usage (metrics server, Prometheus) with the request
figures beside it, the deviation thresholds the plan computed around the mean, the plan's stop reason, and the
forecast (verdict, refusal, moves run by run, categories per run, swaps and moves back). Documents from real plans
and forecasts (plans.py)."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report import data
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.html import render_html

from .page import NS, all_text, document, parse, with_class
from .plans import metrics_deviation_document, prometheus_document, requests_document
from .test_html import section, table_rows


def bars(svg):
    return {(rect.get("data-node"), rect.get("data-when")): rect.get("data-percent") for rect in with_class(svg, ".//s:rect", "bar")}


def lines(svg):
    return {group.get("data-kind"): group.get("data-percent") for group in with_class(svg, ".//s:g", "threshold")}


# ------------------------------------------------------------------------------------------ data
def test_a_node_judged_by_actual_usage_shows_that_usage_and_keeps_its_requests_beside_it():
    row = metrics_deviation_document()["classification"]["before"]["nodes"][0]
    assert data.node_percents(row) == {"cpu": 80.0}   # not requests_percent (cpu 10)
    assert data.node_state(row) == {"category": "overutilized", "percent": {"cpu": 80.0}, "source": "KubernetesMetrics",
                                    "requests": {"cpu": 10.0, "memory": 10.0, "pods": 1.0},
                                    "thresholds": {"thresholds": {"cpu": 26.67}, "targetThresholds": {"cpu": 46.67}}}


def test_a_node_judged_by_requests_has_no_request_figures_beside_it():
    row = requests_document()["classification"]["before"]["nodes"][0]
    assert data.node_state(row) == {"category": "underutilized", "percent": {"cpu": 10.0, "memory": 10.0, "pods": 1.0}, "source": "requests"}


def test_judged_thresholds_are_the_plans_in_deviation_mode_and_none_without_them():
    doc = metrics_deviation_document()
    rows = data.usage_rows(doc["classification"])
    policy = data.policy_thresholds(doc["policy"]["policy_text"])
    assert policy["thresholds"] == {"cpu": 10.0}   # a distance from the mean, not a percent to draw
    assert data.deviation_policy(doc["policy"]["policy_text"]) is True
    assert data.judged_thresholds(rows, policy, True) == {"profile": "vm-rebalance", "deviation": True, "thresholds": {"cpu": 26.67},
                                                          "targetThresholds": {"cpu": 46.67}}
    logged = [{"name": "worker-a", "before": {"category": "overutilized", "percent": {"cpu": 80.0}}, "after": None}]
    assert data.judged_thresholds(logged, policy, True) == {"profile": "vm-rebalance", "deviation": True, "thresholds": {}, "targetThresholds": {}}
    assert data.judged_thresholds(logged, policy, False) == dict(policy, deviation=False)


def test_forecast_is_found_where_the_document_carries_it():
    forecast = metrics_deviation_document()["policy"]["forecast"]
    for doc in ({"policy": {"forecast": forecast}}, {"forecast": forecast}, {"policy": {"plan": {"forecast": forecast}}}, {"plan": {"forecast": forecast}}):
        assert data.forecast_of(doc) is forecast
    assert data.forecast_of({"policy": {"forecast": None}}) is None and data.forecast_summary({}) is None


def test_forecast_summary_of_a_flapping_policy():
    forecast = metrics_deviation_document()["policy"]["forecast"]
    summary = data.forecast_summary({"policy": {"forecast": forecast}})
    assert summary["runs"] == len(forecast["cycles"]) == 10 and summary["converged"] is False and summary["migrations"] == forecast["migrations"]
    assert summary["verdict"] == "does not converge in 10 run(s): {0} migration(s) planned".format(forecast["migrations"])
    assert summary["moves"][0] == {"cycle": 1, "vm": "vm-hot", "namespace": "vms", "source": "worker-a", "destination": "worker-b"}
    assert summary["categories"][0] == {"name": "worker-a", "by_cycle": [c["categories"]["worker-a"] for c in forecast["cycles"]]}
    assert summary["refusal"] == forecast["refusal"] and summary["refusal"].startswith("the forecast swaps worker-a")


@pytest.mark.parametrize("forecast, verdict", [
    ({"converged": True, "cycles_to_converge": 0, "migrations": 0, "cycles": [{"cycle": 1}]}, "nothing moves: the first run finds nothing to do"),
    ({"converged": True, "cycles_to_converge": 2, "migrations": 3, "cycles": [{}, {}, {}]}, "converges after 2 run(s) with 3 migration(s)"),
    ({"error": "actual usage not read: ...", "cycles": []}, "no forecast: actual usage not read: ..."),
])
def test_forecast_verdict(forecast, verdict):
    assert data.forecast_summary({"forecast": forecast})["verdict"] == verdict


# ------------------------------------------------------------------------------------------ HTML
def test_charts_of_an_actual_usage_plan_draw_the_judged_usage_against_the_computed_thresholds():
    usage = section(parse(render_html(metrics_deviation_document())), "node-usage")
    assert [figure.get("data-resource") for figure in usage.iterfind("h:figure", NS)] == ["cpu"]   # the resources judged
    cpu = usage.find("h:figure[@data-resource='cpu']/s:svg", NS)
    assert bars(cpu) == {("worker-a", "before"): "80", ("worker-b", "before"): "10", ("worker-c", "before"): "20"}
    assert lines(cpu) == {"thresholds": "26.67", "targetThresholds": "46.67"}
    assert "cpu by actual usage (metrics server), percent of allocatable per node" in cpu.get("aria-label")
    text = all_text(usage)
    assert "Judged by: actual usage from the metrics server (KubernetesMetrics: NodeMetrics and PodMetrics)." in text
    assert "Lines: the deviation thresholds of profile vm-rebalance as the plan computed them" in text


def test_judged_table_puts_the_request_figures_beside_actual_usage():
    usage = section(parse(render_html(metrics_deviation_document())), "node-usage")
    table = usage.find(".//h:table[@class='judged-usage']", NS)
    headers = [all_text(th) for th in table.iterfind("h:thead/h:tr/h:th", NS)]
    assert headers == ["node", "judged by", "before: judged usage", "before: thresholds (low..high)", "before: by requests",
                       "after: judged usage", "after: thresholds (low..high)", "after: by requests"]
    assert table_rows(table)[0] == ["worker-a", "KubernetesMetrics", "cpu 80%", "cpu 26.67..46.67%", "cpu 10%, memory 10%, pods 1%",
                                    "not measured", "-", "(judged by requests)"]


def test_a_prometheus_plan_is_charted_by_metric_resource():
    usage = section(parse(render_html(prometheus_document())), "node-usage")
    assert [figure.get("data-resource") for figure in usage.iterfind("h:figure", NS)] == ["MetricResource"]
    chart = usage.find("h:figure[@data-resource='MetricResource']/s:svg", NS)
    assert bars(chart) == {("worker-a", "before"): "80", ("worker-b", "before"): "10", ("worker-c", "before"): "20"}
    assert lines(chart) == {"thresholds": "30", "targetThresholds": "50"}
    assert "the query's value per node, in percent" in all_text(usage.find("h:figure/h:figcaption", NS))
    rows = table_rows(usage.find(".//h:table[@class='judged-usage']", NS))
    assert rows[0][:4] == ["worker-a", "Prometheus", "MetricResource 80%", "cpu 10%, memory 10%, pods 1%"]


def test_a_requests_plan_keeps_its_charts_and_has_no_judged_table():
    root = parse(render_html(requests_document()))
    usage = section(root, "node-usage")
    assert [figure.get("data-resource") for figure in usage.iterfind("h:figure", NS)] == ["cpu", "memory", "pods"]
    assert usage.find(".//h:table[@class='judged-usage']", NS) is None
    assert "Judged by: requests (the sum of the Pods' resource requests)." in all_text(usage)
    stop = section(root, "migrations").find(".//h:p[@class='stop-reason']", NS)
    assert all_text(stop) == "The plan moves nothing: All nodes are underutilized, nothing to do here."


def test_forecast_section_shows_the_verdict_the_refusal_and_the_runs():
    doc = metrics_deviation_document()
    forecast = doc["policy"]["forecast"]
    root = parse(render_html(doc))
    assert [element.get("id") for element in root.iterfind(".//h:section", NS)] == ["node-usage", "forecast", "migrations", "five-checks",
                                                                                    "backup", "rollback"]
    part = section(root, "forecast")
    facts = dict(row for row in table_rows(part.find("h:table[@class='facts']", NS)))
    assert facts == {"verdict": "does not converge in 10 run(s): {0} migration(s) planned".format(forecast["migrations"]), "runs planned": "10",
                     "converged": "no", "runs to converge": "-", "migrations": str(forecast["migrations"]), "refused": "yes"}
    assert all_text(with_class(part, ".//h:div", "attention")[0]) == "Refused: " + forecast["refusal"]
    moves = table_rows(part.find(".//h:table[@class='forecast-moves']", NS))
    assert moves[0] == ["1", "vm-hot", "vms", "worker-a", "worker-b"] and len(moves) == forecast["migrations"]
    categories = table_rows(part.find(".//h:table[@class='forecast-categories']", NS))
    assert categories[0][:3] == ["worker-a", "overutilized", "underutilized"] and len(categories[0]) == 11
    findings = [all_text(item) for item in part.iterfind(".//h:ul/h:li", NS)]
    assert findings[0] == "run 1: worker-a goes from overutilized to underutilized"
    assert "run 2: vms/vm-hot moves back (worker-a -> worker-b -> worker-a)" in findings


def test_a_forecast_of_nothing_to_move_has_no_moves_table():
    part = section(parse(render_html(requests_document())), "forecast")
    facts = dict(table_rows(part.find("h:table[@class='facts']", NS)))
    assert facts["verdict"] == "nothing moves: the first run finds nothing to do" and facts["refused"] == "no"
    assert part.find(".//h:table[@class='forecast-moves']", NS) is None and with_class(part, ".//h:div", "attention") == []


def test_no_forecast_section_without_a_forecast():
    for doc in (metrics_deviation_document(with_forecast=False), document("rebalance")):
        assert parse(render_html(doc)).find(".//h:section[@id='forecast']", NS) is None
