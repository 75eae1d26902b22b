# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report's two charts as SVG strings, from the plain data of report/data.py: per resource, each node's percent of
allocatable before and after with the policy's thresholds as lines; and the migrations on a time axis. Colours are
presentation attributes, so a chart copied out of the page keeps them; every number drawn is also written as text,
and each chart carries a <title> and an aria-label for screen readers."""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import METRIC_RESOURCE
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.data import THRESHOLD_KINDS
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.markup import Markup, join, number, tag

SVG_NS = "http://www.w3.org/2000/svg"
COLOURS = {"before": "#9fb3c8", "after": "#1f5fa8", "thresholds": "#2e7d32", "targetThresholds": "#c62828",
           "requested": "#f0a202", "running": "#1f5fa8", "Succeeded": "#2e7d32", "Failed": "#c62828", "unfinished": "#9e9e9e",
           "axis": "#444444", "grid": "#dddddd", "text": "#222222"}
THRESHOLD_DASHES = {"thresholds": "6 4", "targetThresholds": "2 3"}
# Legend entries: (colour, label, dash pattern of a line swatch or None for a box)
USAGE_LEGEND = ((COLOURS["before"], "before", None), (COLOURS["after"], "after", None),
                (COLOURS["thresholds"], "thresholds (below: underutilized)", THRESHOLD_DASHES["thresholds"]),
                (COLOURS["targetThresholds"], "targetThresholds (above: overutilized)", THRESHOLD_DASHES["targetThresholds"]))
BY_REQUESTS = "by requests, percent of allocatable"   # what a usage chart's percents are, unless told otherwise

# Node usage chart: the 0..100 % axis spans PLOT_HEIGHT pixels from PLOT_TOP down.
PLOT_TOP = 40
PLOT_HEIGHT = 220
AXIS_LEFT = 52
GROUP_WIDTH = 190
BAR_WIDTH = 48
BAR_GAP = 12
LABEL_SPACE = 160
BELOW_PLOT = 66
PERCENT_TICKS = (0, 20, 40, 60, 80, 100)
LABEL_GAP = 13

# Migration timeline: one row per VM, seconds from the first request on the x axis.
TIMELINE_TOP = 40
ROW_HEIGHT = 30
SEGMENT_HEIGHT = 14
TIMELINE_WIDTH = 600
TIMELINE_RIGHT = 190
TIMELINE_BOTTOM = 46
MIN_SEGMENT = 2.0
TIMELINE_LEGEND = ((COLOURS["requested"], "requested", None), (COLOURS["running"], "running", None), (COLOURS["Succeeded"], "Succeeded", None),
                   (COLOURS["Failed"], "Failed", None), (COLOURS["unfinished"], "not final", None))
OUTCOME_WIDTH = 6.0
NICE_STEPS = (1, 2, 5)
MAX_TICKS = 8
MIN_AXIS_SECONDS = 1.0  # migrations that all took no measurable time still get a readable axis


def text(x: float, y: float, value, anchor: str = "start", size: int = 12, css: Optional[str] = None, weight: Optional[str] = None,
         halo: bool = False) -> Markup:
    """Text on the chart; a halo (a white outline under the glyphs) keeps it readable where it crosses a line."""
    attrs = {"x": float(x), "y": float(y), "text-anchor": anchor, "font-size": size, "fill": COLOURS["text"], "font-weight": weight, "class": css}
    if halo:
        attrs.update({"stroke": "#ffffff", "stroke-width": 3, "paint-order": "stroke", "stroke-linejoin": "round"})
    return tag("text", attrs, value)


def line(x1: float, y1: float, x2: float, y2: float, colour: str, css: str, dash: Optional[str] = None, width: float = 1.0) -> Markup:
    return tag("line", {"x1": float(x1), "y1": float(y1), "x2": float(x2), "y2": float(y2), "stroke": colour,
                        "stroke-width": float(width), "stroke-dasharray": dash, "class": css})


def rect(x: float, y: float, width: float, height: float, colour: str, css: str, tooltip: Optional[str] = None, **data) -> Markup:
    attrs = {"x": float(x), "y": float(y), "width": float(width), "height": float(height), "fill": colour, "class": css}
    attrs.update({"data-" + key.replace("_", "-"): value for key, value in data.items()})
    return tag("rect", attrs, tag("title", None, tooltip) if tooltip else None)


def chart(width: float, height: float, label: str, css: str, *children) -> Markup:
    """An accessible SVG: role img, the label as aria-label and as its <title>, sized in pixels with a viewBox."""
    attrs = {"xmlns": SVG_NS, "class": "chart " + css, "role": "img", "aria-label": label, "width": float(width),
             "height": float(height), "viewBox": "0 0 {0} {1}".format(number(width), number(height))}
    return tag("svg", attrs, tag("title", None, label), *children)


def legend_entry_width(label: str) -> float:
    """Swatch, gap and the label at about 6.5 px a character (11 px DejaVu Sans)."""
    return 32 + 6.5 * len(label)


def legend_width(entries: Sequence[Tuple[str, str, Optional[str]]]) -> float:
    return sum(legend_entry_width(label) for _colour, label, _dash in entries)


def legend(entries: Sequence[Tuple[str, str, Optional[str]]], x: float, y: float) -> Markup:
    """A row of (colour, label, dash) swatches, a dashed line where a dash pattern is given, else a box, starting at x on
    the baseline y."""
    parts = []
    for colour, label, dash in entries:
        if dash:
            parts.append(line(x, y - 4, x + 18, y - 4, colour, "legend-swatch", dash=dash, width=2.0))
        else:
            parts.append(rect(x, y - 10, 18, 10, colour, "legend-swatch"))
        parts.append(text(x + 22, y, label, size=11, css="legend-label"))
        x += legend_entry_width(label)
    return tag("g", {"class": "legend"}, parts)


def spread(positions: Sequence[float], gap: float) -> List[float]:
    """Label positions moved apart, in order, so that no two are closer than `gap`; a label only moves down."""
    order = sorted(range(len(positions)), key=lambda index: positions[index])
    placed = list(positions)
    previous = None
    for index in order:
        if previous is not None and placed[index] - previous < gap:
            placed[index] = previous + gap
        previous = placed[index]
    return placed


# ------------------------------------------------------------------------------------------ node usage
def percent_y(value: float) -> float:
    """The y of a percent on the usage axis; values beyond 0..100 are drawn at its ends."""
    return PLOT_TOP + PLOT_HEIGHT * (1 - min(max(value, 0.0), 100.0) / 100)


def percent_axis(plot_right: float) -> Markup:
    parts = [line(AXIS_LEFT, PLOT_TOP, AXIS_LEFT, percent_y(0), COLOURS["axis"], "axis")]
    for tick in PERCENT_TICKS:
        y = percent_y(tick)
        parts.append(line(AXIS_LEFT, y, plot_right, y, COLOURS["grid"], "grid"))
        parts.append(tag("g", {"class": "tick", "data-percent": tick}, line(AXIS_LEFT - 4, y, AXIS_LEFT, y, COLOURS["axis"], "tick-mark"),
                         text(AXIS_LEFT - 7, y + 4, "{0}%".format(tick), anchor="end", size=11)))
    return tag("g", {"class": "percent-axis"}, parts)


def usage_bar(x: float, when: str, node: str, resource: str, state: Optional[dict]) -> Markup:
    """One bar with its number above it; `n/a` on the baseline when the node has no value for the resource."""
    value = ((state or {}).get("percent") or {}).get(resource)
    if value is None:
        return text(x + BAR_WIDTH / 2, percent_y(0) - 4, "n/a", anchor="middle", size=10, css="bar-missing")
    top = percent_y(value)
    of_what = "of the query's scale" if resource == METRIC_RESOURCE else "of allocatable"
    tooltip = "{0} {1} {2}: {3}% {4} ({5})".format(node, resource, when, number(value), of_what, state.get("category") or "no category")
    return join([rect(x, top, BAR_WIDTH, percent_y(0) - top, COLOURS[when], "bar " + when, tooltip, node=node, resource=resource,
                      when=when, percent=number(value)),
                 text(x + BAR_WIDTH / 2, top - 4, "{0}%".format(number(value)), anchor="middle", size=10, css="bar-label", halo=True)])


def category_text(state: Optional[dict]) -> str:
    if state is None:
        return "not measured"
    return state.get("category") or "no category"


def node_group(index: int, row: dict, resource: str) -> Markup:
    left = AXIS_LEFT + index * GROUP_WIDTH + (GROUP_WIDTH - 2 * BAR_WIDTH - BAR_GAP) / 2
    middle = AXIS_LEFT + index * GROUP_WIDTH + GROUP_WIDTH / 2
    base = percent_y(0)
    return tag("g", {"class": "node", "data-node": row["name"]},
               usage_bar(left, "before", row["name"], resource, row["before"]),
               usage_bar(left + BAR_WIDTH + BAR_GAP, "after", row["name"], resource, row["after"]),
               text(middle, base + 17, row["name"], anchor="middle", size=12, css="node-name", weight="bold"),
               text(middle, base + 33, "before: " + category_text(row["before"]), anchor="middle", size=10, css="category before"),
               text(middle, base + 47, "after: " + category_text(row["after"]), anchor="middle", size=10, css="category after"))


def threshold_lines(thresholds: dict, resource: str, plot_right: float) -> Markup:
    """A horizontal line per threshold kind that names the resource, labelled on the right; none for the others."""
    drawn = [(kind, (thresholds.get(kind) or {}).get(resource)) for kind in THRESHOLD_KINDS]
    drawn = [(kind, value) for kind, value in drawn if value is not None]
    label_ys = spread([percent_y(value) + 4 for _kind, value in drawn], LABEL_GAP)
    parts = []
    for (kind, value), label_y in zip(drawn, label_ys):
        y = percent_y(value)
        parts.append(tag("g", {"class": "threshold " + kind, "data-kind": kind, "data-percent": number(value)},
                         line(AXIS_LEFT, y, plot_right, y, COLOURS[kind], "threshold-line", dash=THRESHOLD_DASHES[kind], width=2.0),
                         text(plot_right + 6, label_y, "{0} {1}%".format(kind, number(value)), size=11, css="threshold-label")))
    return tag("g", {"class": "thresholds"}, parts)


def shown_percent(state: Optional[dict], resource: str) -> str:
    value = ((state or {}).get("percent") or {}).get(resource)
    return "n/a" if value is None else number(value) + "%"


def usage_summary(resource: str, rows: List[dict], thresholds: dict, basis: str = BY_REQUESTS) -> str:
    """The chart as one sentence: every node's numbers and the threshold lines."""
    nodes = "; ".join("{0} before {1}, after {2}".format(row["name"], shown_percent(row["before"], resource), shown_percent(row["after"], resource))
                      for row in rows)
    lines = ", ".join("{0} {1}%".format(kind, number(thresholds[kind][resource]))
                      for kind in THRESHOLD_KINDS if resource in (thresholds.get(kind) or {}))
    return "{0} {1} per node, before and after: {2}. Lines: {3}.".format(resource, basis, nodes, lines or "none")


def usage_chart(resource: str, rows: List[dict], thresholds: dict, basis: str = BY_REQUESTS) -> Markup:
    """Bars of every node's percent for `resource` before and after (`basis`: what the percent is of, for the label),
    on a 0..100 axis, with the thresholds and targetThresholds for the resource as dashed lines."""
    plot_right = AXIS_LEFT + max(len(rows), 1) * GROUP_WIDTH
    width = max(plot_right + LABEL_SPACE, AXIS_LEFT + legend_width(USAGE_LEGEND))
    return chart(width, PLOT_TOP + PLOT_HEIGHT + BELOW_PLOT, usage_summary(resource, rows, thresholds, basis), "usage " + resource,
                 legend(USAGE_LEGEND, AXIS_LEFT, 16), percent_axis(plot_right),
                 [node_group(index, row, resource) for index, row in enumerate(rows)],
                 threshold_lines(thresholds, resource, plot_right))


# ------------------------------------------------------------------------------------------ migrations
def time_ticks(end: float) -> List[float]:
    """Ticks from 0 to at least `end` seconds (and one second) at a step of 1, 2 or 5 times a power of ten, at most
    MAX_TICKS + 1 of them."""
    end = max(end, MIN_AXIS_SECONDS)
    magnitude = 10 ** math.floor(math.log10(end / MAX_TICKS))
    step = next(magnitude * factor for factor in NICE_STEPS + (10,) if end / (magnitude * factor) <= MAX_TICKS)
    count = int(math.ceil(end / step - 1e-9))
    return [round(step * index, 6) for index in range(count + 1)]


def span_label(span: dict) -> str:
    return "{0}/{1}".format(span["namespace"], span["vm"]) if span.get("namespace") else str(span.get("vm"))


def label_width(spans: List[dict]) -> float:
    longest = max(len(span_label(span)) for span in spans)
    return float(min(320, max(110, 7 * longest + 16)))


def span_end(span: dict, last: float) -> float:
    return span["ended"] if span["ended"] is not None else last


def segments(span: dict, last: float) -> List[Tuple[str, float, float]]:
    """(kind, start, end) in seconds: requested until Running (or the end, when it never ran), then running until the end;
    a migration not final yet runs on to `last`, the latest moment the report knows."""
    end = span_end(span, last)
    running = span["running"]
    if running is None:
        return [("requested", span["requested"], end)]
    return [("requested", span["requested"], running), ("running", running, end)]


def outcome(span: dict) -> str:
    return span["phase"] if span.get("phase") in ("Succeeded", "Failed") and span["ended"] is not None else "unfinished"


def timeline_row(index: int, span: dict, scale, left: float, last: float) -> Markup:
    top = TIMELINE_TOP + index * ROW_HEIGHT
    y = top + (ROW_HEIGHT - SEGMENT_HEIGHT) / 2
    parts = [text(left - 8, y + SEGMENT_HEIGHT - 3, span_label(span), anchor="end", size=12, css="vm-name")]
    for kind, start, end in segments(span, last):
        x = scale(start)
        tooltip = "{0} {1}: {2} s to {3} s".format(span_label(span), kind, number(start), number(end))
        parts.append(rect(x, y, max(scale(end) - x, MIN_SEGMENT), SEGMENT_HEIGHT, COLOURS[kind], "segment " + kind, tooltip,
                          kind=kind, start=number(start), end=number(end)))
    final = outcome(span)
    end_x = scale(span_end(span, last))
    parts.append(rect(end_x, y - 2, OUTCOME_WIDTH, SEGMENT_HEIGHT + 4, COLOURS[final], "outcome " + final,
                      "{0}: {1}".format(span_label(span), final), kind=final))
    duration = span.get("duration_seconds")
    summary = "{0}{1}".format(span.get("phase") or "unknown phase", "" if duration is None else ", {0} s".format(number(duration)))
    parts.append(text(end_x + OUTCOME_WIDTH + 6, y + SEGMENT_HEIGHT - 3, summary, size=11, css="span-summary"))
    return tag("g", {"class": "migration", "data-vm": span.get("vm"), "data-migration": span.get("migration")}, parts)


def time_axis(ticks: List[float], scale, y: float, left: float) -> Markup:
    parts = [line(left, y, scale(ticks[-1]), y, COLOURS["axis"], "axis")]
    for tick in ticks:
        x = scale(tick)
        parts.append(tag("g", {"class": "tick", "data-seconds": number(tick)}, line(x, TIMELINE_TOP - 4, x, y, COLOURS["grid"], "grid"),
                         text(x, y + 15, "{0} s".format(number(tick)), anchor="middle", size=11)))
    parts.append(text(left, y + 34, "seconds from the first migration request", size=11, css="axis-title"))
    return tag("g", {"class": "time-axis"}, parts)


def timeline_chart(timeline: dict) -> Markup:
    """One row per migration: requested, running, then the outcome (Succeeded or Failed; grey while not final), on an
    axis of seconds from the first request, with a legend."""
    spans = timeline["spans"]
    last = max(max(value for value in (span["requested"], span["running"], span["ended"]) if value is not None) for span in spans)
    ticks = time_ticks(last)
    left = label_width(spans)

    def scale(seconds: float) -> float:
        return left + TIMELINE_WIDTH * seconds / ticks[-1] if ticks[-1] else left

    axis_y = TIMELINE_TOP + len(spans) * ROW_HEIGHT + 4
    label = "Migrations on a time axis in seconds from the first request at {0}: {1}.".format(
        timeline["origin"], "; ".join("{0} {1} {2}".format(span_label(span), span.get("migration"), outcome(span)) for span in spans))
    return chart(left + TIMELINE_WIDTH + TIMELINE_RIGHT, axis_y + TIMELINE_BOTTOM, label, "timeline",
                 legend(TIMELINE_LEGEND, left, 16), time_axis(ticks, scale, axis_y, left),
                 [timeline_row(index, span, scale, left, last) for index, span in enumerate(spans)])
