# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling maintenance report as Markdown: the totals, per node its steps, per VM every migration."""

from __future__ import annotations

from typing import List, Optional

STEPS = ("drain", "hook", "ready", "uncordon")


def _seconds(value: Optional[float]) -> str:
    return "" if value is None else "{0:.0f} s".format(value)


def _step(steps: dict, name: str) -> str:
    step = steps.get(name) or {}
    return _seconds(step.get("seconds")) if isinstance(step, dict) else ""


def _cell(text: object) -> str:
    return str("" if text is None else text).replace("|", "\\|").replace("\n", " ")


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
    lines += ["", "## Migrations", "", "| VM | migration | from | to | seconds | phase |", "| --- | --- | --- | --- | --- | --- |"]
    for vm in report.get("vms") or []:
        for move in vm.get("migrations") or []:
            lines.append("| {0} | {1} | {2} | {3} | {4} | {5} |".format(
                _cell(vm.get("vm")), _cell(move.get("name")), _cell(move.get("source_node")), _cell(move.get("target_node")),
                "" if move.get("duration_seconds") is None else "{0:.0f}".format(move["duration_seconds"]),
                _cell(move.get("phase")) + (" ({0})".format(_cell(move["failure_reason"])) if move.get("failure_reason") else "")))
    return "\n".join(lines) + "\n"
