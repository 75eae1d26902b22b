"""The charts as drawn: bar heights and threshold lines measured against the chart's own 0..100 % axis, time spans
against its own seconds axis, the numbers as text, and an accessible name."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report import data, svg

from .page import NS, all_text, document, parse, percent_scale, seconds_scale, with_class

THRESHOLDS = {"profile": "p", "thresholds": {"cpu": 20.0, "memory": 60.0}, "targetThresholds": {"cpu": 50.0, "memory": 68.0}}
ROWS = [{"name": "worker-a", "before": {"category": "overutilized", "percent": {"cpu": 72.0, "memory": 120.0}},
         "after": {"category": "appropriately utilized", "percent": {"cpu": 35.5}}},
        {"name": "worker-b", "before": {"category": "underutilized", "percent": {"cpu": 0.0}}, "after": None}]


def bars(chart):
    return {(rect.get("data-node"), rect.get("data-when")): rect for rect in with_class(chart, ".//s:rect", "bar")}


def test_bar_heights_are_the_percent_of_the_axis_and_stand_on_zero():
    chart = parse(svg.usage_chart("cpu", ROWS, THRESHOLDS))
    zero, per_percent = percent_scale(chart)
    drawn = bars(chart)
    assert set(drawn) == {("worker-a", "before"), ("worker-a", "after"), ("worker-b", "before")}
    for (node, when), percent in {("worker-a", "before"): 72.0, ("worker-a", "after"): 35.5, ("worker-b", "before"): 0.0}.items():
        rect = drawn[node, when]
        assert float(rect.get("height")) == pytest.approx(percent * per_percent)
        assert float(rect.get("y")) + float(rect.get("height")) == pytest.approx(zero)
    assert per_percent > 1  # the axis is drawn, not collapsed


def test_before_and_after_bars_have_their_own_colours_and_labels():
    chart = parse(svg.usage_chart("cpu", ROWS, THRESHOLDS))
    drawn = bars(chart)
    assert drawn["worker-a", "before"].get("fill") != drawn["worker-a", "after"].get("fill")
    labels = [text.text for text in with_class(chart, ".//s:text", "bar-label")]
    assert labels == ["72%", "35.5%", "0%"]


def test_a_value_above_100_is_drawn_at_the_top_and_labelled_with_its_number():
    chart = parse(svg.usage_chart("memory", ROWS, THRESHOLDS))
    zero, per_percent = percent_scale(chart)
    rect = bars(chart)["worker-a", "before"]
    assert float(rect.get("height")) == pytest.approx(100 * per_percent)
    assert "120%" in all_text(chart)


def test_a_node_without_a_value_shows_n_a_instead_of_a_bar():
    chart = parse(svg.usage_chart("memory", ROWS, THRESHOLDS))
    assert set(bars(chart)) == {("worker-a", "before")}
    assert len(with_class(chart, ".//s:text", "bar-missing")) == 3


def test_threshold_lines_are_at_their_percent_and_labelled():
    chart = parse(svg.usage_chart("cpu", ROWS, THRESHOLDS))
    zero, per_percent = percent_scale(chart)
    groups = {group.get("data-kind"): group for group in with_class(chart, ".//s:g", "threshold")}
    assert set(groups) == {"thresholds", "targetThresholds"}
    for kind, percent in (("thresholds", 20.0), ("targetThresholds", 50.0)):
        line = groups[kind].find("s:line", NS)
        assert float(line.get("y1")) == float(line.get("y2")) == pytest.approx(zero - percent * per_percent)
        assert all_text(groups[kind]) == "{0} {1}%".format(kind, int(percent))


def test_a_resource_missing_from_the_thresholds_gets_no_line():
    chart = parse(svg.usage_chart("pods", ROWS, THRESHOLDS))
    assert with_class(chart, ".//s:g", "threshold") == []
    assert "Lines: none" in chart.get("aria-label")


def test_close_threshold_labels_are_moved_apart():
    chart = parse(svg.usage_chart("cpu", ROWS, {"thresholds": {"cpu": 60.0}, "targetThresholds": {"cpu": 61.0}}))
    label_ys = sorted(float(text.get("y")) for text in with_class(chart, ".//s:text", "threshold-label"))
    assert label_ys[1] - label_ys[0] >= svg.LABEL_GAP


def test_the_chart_is_accessible_and_names_every_number():
    chart = parse(svg.usage_chart("cpu", ROWS, THRESHOLDS))
    assert chart.get("role") == "img"
    label = chart.get("aria-label")
    assert chart.find("s:title", NS).text == label
    for expected in ("worker-a before 72%, after 35.5%", "worker-b before 0%, after n/a", "thresholds 20%", "targetThresholds 50%"):
        assert expected in label
    categories = [all_text(text) for text in with_class(chart, ".//s:text", "category")]
    assert categories == ["before: overutilized", "after: appropriately utilized", "before: underutilized", "after: not measured"]


def test_every_node_gets_room_and_the_chart_is_wide_enough_for_its_legend():
    one = parse(svg.usage_chart("cpu", ROWS[:1], THRESHOLDS))
    two = parse(svg.usage_chart("cpu", ROWS * 2, THRESHOLDS))
    assert float(two.get("width")) > float(one.get("width")) >= svg.AXIS_LEFT + svg.legend_width(svg.USAGE_LEGEND)


@pytest.mark.parametrize("positions, gap, expected", [([10, 12], 5, [10, 15]), ([12, 10], 5, [15, 10]), ([0, 20, 21, 22], 4, [0, 20, 24, 28]),
                                                      ([], 3, [])])
def test_spread_moves_close_labels_down_in_order(positions, gap, expected):
    assert svg.spread(positions, gap) == expected


@pytest.mark.parametrize("end, expected", [(1.0, [0, 0.2, 0.4, 0.6, 0.8, 1.0]), (4.0, [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]),
                                           (6.0, [0, 1, 2, 3, 4, 5, 6]), (95.0, [0, 20, 40, 60, 80, 100]), (0.0, [0, 0.2, 0.4, 0.6, 0.8, 1.0])])
def test_time_ticks_use_round_steps_and_cover_the_end(end, expected):
    assert svg.time_ticks(end) == pytest.approx(expected)


def timeline_of(name):
    return parse(svg.timeline_chart(data.migration_timeline(document(name)["checks"])))


def test_timeline_segments_start_and_end_at_their_seconds():
    chart = timeline_of("failed")
    origin, per_second = seconds_scale(chart)
    rows = {group.get("data-vm"): group for group in with_class(chart, ".//s:g", "migration")}
    assert set(rows) == {"vm-1", "vm-2"}
    segments = {(vm, rect.get("data-kind")): rect for vm, row in rows.items() for rect in with_class(row, "s:rect", "segment")}
    for (vm, kind), (start, end) in {("vm-1", "requested"): (0, 2), ("vm-1", "running"): (2, 4), ("vm-2", "requested"): (3, 6)}.items():
        rect = segments[vm, kind]
        assert float(rect.get("x")) == pytest.approx(origin + start * per_second)
        assert float(rect.get("width")) == pytest.approx((end - start) * per_second)
    assert segments["vm-1", "requested"].get("fill") != segments["vm-1", "running"].get("fill")


def test_timeline_outcome_is_coloured_by_phase_and_unfinished_is_grey():
    chart = timeline_of("failed")
    outcomes = {rect.get("data-kind"): rect.get("fill") for rect in with_class(chart, ".//s:rect", "outcome")}
    assert outcomes == {"Failed": svg.COLOURS["Failed"], "unfinished": svg.COLOURS["unfinished"]}
    text = all_text(chart)
    assert "Failed, 4 s" in text and "Running" in text and "desched-test/vm-1" in text


def test_timeline_of_a_zero_second_phase_stays_visible_and_has_a_legend():
    chart = timeline_of("rebalance")
    requested = with_class(chart, ".//s:rect", "requested")
    assert requested and all(float(rect.get("width")) >= svg.MIN_SEGMENT for rect in requested)
    legend = all_text(chart.find("s:g[@class='legend']", NS))
    assert legend == "requested running Succeeded Failed not final"
    assert "kubevirt-evacuation-5zxts Succeeded" in chart.get("aria-label")
