# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling maintenance report as Markdown and as a self-contained HTML page (the rehearsal report's style and
timeline chart, report/html.py and report/svg.py): the totals, per node its steps, per VM every migration."""

from __future__ import annotations

from typing import List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report import html as page
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.data import migration_timeline
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.markup import Markup, tag
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.svg import timeline_chart

STEPS = ("drain", "hook", "ready", "uncordon")


def _seconds(value: Optional[float]) -> str:
    return "" if value is None else "{0:.0f} s".format(value)


def _step(steps: dict, name: str) -> str:
    step = steps.get(name) or {}
    return _seconds(step.get("seconds")) if isinstance(step, dict) else ""


def _cell(text: object) -> str:
    return str("" if text is None else text).replace("|", "\\|").replace("\n", " ")


def evacuation_rows(report: dict) -> List[List[str]]:
    """The VMs KubeVirt was evacuating when a node was given back (the uncordon step's `evacuations`: cancelled, or going
    on) and, for a stopped run, those it is still evacuating: node, VM, what became of it, why."""
    rows = []
    for node in report.get("nodes") or []:
        uncordon = (node.get("steps") or {}).get("uncordon") or {}
        evacuations = uncordon.get("evacuations") if isinstance(uncordon, dict) else None
        for vm in (evacuations or {}).get("vms") or []:
            rows.append([node.get("node"), "{0}/{1}".format(vm.get("namespace"), vm.get("name")), vm.get("result"), vm.get("reason")])
    rows += [[entry.get("node"), entry.get("vm"), entry.get("result"), entry.get("reason")] for entry in report.get("still_evacuating") or []]
    return rows


def markdown(report: dict) -> str:
    totals = report.get("totals") or {}
    lines: List[str] = [
        "# Rolling maintenance {0}: {1}".format(_cell(report.get("run_id")), _cell(report.get("status"))), "",
        "Started {0}, ended {1}; {2} of {3} nodes done in {4}.".format(
            _cell(report.get("started_at")), _cell(report.get("ended_at") or "-"), totals.get("nodes_done", 0), totals.get("nodes", 0),
            _seconds(totals.get("seconds")) or "-"), "",
        "| VMs migrated | migrations | per VM | most of one VM | moved twice or more | failed migrations | peak at once |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        "| {0} | {1} | {2} | {3} | {4} | {5} | {6} |".format(
            totals.get("vms_migrated", 0), totals.get("migrations", 0), totals.get("migrations_per_vm", 0),
            totals.get("max_migrations_of_a_vm", 0), len(totals.get("vms_migrated_twice_or_more") or []),
            totals.get("failed_migrations", 0), totals.get("peak_concurrent_migrations", 0)),
    ]
    if report.get("stopped"):
        lines += ["", "**Stopped** at {0}: {1}".format(_cell(report["stopped"].get("at")), _cell(report["stopped"].get("reason")))]
    lines += ["", "## Nodes", "", "| node | state | started | done | drain | hook | ready | uncordon |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for node in report.get("nodes") or []:
        steps = node.get("steps") or {}
        lines.append("| {0} | {1} | {2} | {3} | {4} |".format(
            _cell(node.get("node")), _cell(node.get("state")), _cell(node.get("started_at")), _cell(node.get("done_at")),
            " | ".join(_step(steps, name) for name in STEPS)))
    evacuations = evacuation_rows(report)
    if evacuations:
        lines += ["", "## Evacuations when a node was given back or the run stopped", "", "| node | VM | result | why |",
                  "| --- | --- | --- | --- |"]
        lines += ["| {0} |".format(" | ".join(_cell(cell) for cell in row)) for row in evacuations]
    lines += ["", "## Migrations", "", "| VM | migration | from | to | seconds | phase |", "| --- | --- | --- | --- | --- | --- |"]
    for vm in report.get("vms") or []:
        for move in vm.get("migrations") or []:
            lines.append("| {0} | {1} | {2} | {3} | {4} | {5} |".format(
                _cell(vm.get("vm")), _cell(move.get("name")), _cell(move.get("source_node")), _cell(move.get("target_node")),
                "" if move.get("duration_seconds") is None else "{0:.0f}".format(move["duration_seconds"]),
                _cell(move.get("phase")) + (" ({0})".format(_cell(move["failure_reason"])) if move.get("failure_reason") else "")))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ HTML
TOTALS = (("nodes_done", "nodes done"), ("vms_migrated", "VMs migrated"), ("migrations", "migrations"),
          ("migrations_per_vm", "migrations per VM"), ("max_migrations_of_a_vm", "most migrations of one VM"),
          ("vms_migrated_twice_or_more", "VMs migrated twice or more"), ("failed_migrations", "failed migrations"),
          ("peak_concurrent_migrations", "peak of migrations at once"), ("seconds", "seconds"))
STATUS_CSS = {"complete": "passed", "stopped": "failed", "in_progress": "in_progress"}


def html(report: dict) -> str:
    """The whole page; every value is escaped (report/markup.py)."""
    totals = report.get("totals") or {}
    title = "Rolling maintenance {0}".format(page.shown(report.get("run_id")))
    status = tag("span", {"class": "badge status-" + STATUS_CSS.get(report.get("status") or "", "unknown"),
                          "data-status": report.get("status")}, page.shown(report.get("status")))
    facts = [("run id", page.shown(report.get("run_id"))), ("status", status), ("started", page.shown(report.get("started_at"))),
             ("ended", page.shown(report.get("ended_at")))]
    stopped = report.get("stopped") or {}
    reason = tag("pre", {"class": "error"}, stopped.get("reason")) if stopped.get("reason") else None
    header = tag("header", None, tag("h1", None, title), page.facts_table(facts), reason)
    totals_part = page.section("totals", "Totals", page.facts_table([(label, page.shown(totals.get(key))) for key, label in TOTALS]))
    node_rows = [[node.get("node"), page.shown(node.get("state")), page.shown(node.get("started_at")), page.shown(node.get("done_at"))]
                 + [_step(node.get("steps") or {}, name) or "-" for name in STEPS] for node in report.get("nodes") or []]
    nodes_part = page.section("nodes", "Nodes, in the order maintained",
                              page.table(["node", "state", "started", "done"] + list(STEPS), node_rows, css="nodes"))
    return "<!DOCTYPE html>\n" + tag("html", {"xmlns": "http://www.w3.org/1999/xhtml", "lang": "en"},
                                     tag("head", None, tag("meta", {"charset": "utf-8"}), tag("title", None, title),
                                         tag("style", None, Markup(page.STYLE))),
                                     tag("body", None, header, tag("main", None, totals_part, nodes_part, evacuations_part(report),
                                                                   migrations_part(report)))) + "\n"


def evacuations_part(report: dict) -> Optional[Markup]:
    rows = evacuation_rows(report)
    if not rows:
        return None
    return page.section("evacuations", "Evacuations when a node was given back or the run stopped",
                        page.table(["node", "VM", "result", "why"], rows, css="evacuations"))


def migrations_part(report: dict) -> Markup:
    moves = [{"name": vm["vm"].split("/", 1)[-1], "namespace": vm["vm"].split("/", 1)[0], "migration": move}
             for vm in report.get("vms") or [] for move in vm.get("migrations") or []]
    timeline = migration_timeline(moves)
    if not timeline["spans"]:
        return page.section("migrations", "Migrations", page.nothing("no migration since the run began"))
    origin = tag("p", None, "Time 0 s is the first migration request, {0}.".format(timeline["origin"]))
    return page.section("migrations", "Migrations", origin, tag("figure", {"class": "timeline"}, timeline_chart(timeline)),
                        page.migrations_table(timeline["spans"]))
