# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run's report as a self-contained HTML5 page (inline CSS and SVG; no script, font, image or any other URL): the
run and its status, node usage before and after against the thresholds, judged as the plan judged it (requests, or
actual usage with the request figures beside it; deviation thresholds as the plan computed them), the forecast of the
policy over many runs, the migrations on a timeline, the five checks per VM, the backup, the rollback and, for a
rehearsal, its prediction, test VMs and cleanup. Built from the report document of roles/rebalance_report; every
value from it is escaped (report/markup.py)."""

from __future__ import annotations

import json
from typing import Any, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.migration import CHECKS, TRIGGER_CHECK
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import METRIC_RESOURCE
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.data import (
    REQUESTS,
    RESOURCES,
    SOURCE_TEXT,
    chart_resources,
    deviation_policy,
    forecast_summary,
    items,
    judged_sources,
    judged_thresholds,
    mapping,
    migration_timeline,
    policy_thresholds,
    usage_rows,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.markup import Markup, join, number, tag
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.svg import BY_REQUESTS, category_text, timeline_chart, usage_chart

CHECK_COLUMNS = CHECKS + (TRIGGER_CHECK,)
CHECK_RESULTS = ("pass", "fail", "open")
STATUSES = ("passed", "failed", "planned", "rolled_back", "in_progress")
BACKUP_FIELDS = (("path", "policy ConfigMap backup"), ("workload_path", "Descheduler workload backup"), ("run_id", "run id"),
                 ("workload_kind", "workload kind"), ("matches_live", "backup matches the live objects"))
ROLLBACK_FIELDS = (("method", "method"), ("resource_patches_deleted", "ResourcePatches deleted"), ("backup_file", "restored from backup"),
                   ("policy_restored", "policy restored"), ("migrations_waited", "migrations waited for"),
                   ("failed_migrations", "failed migrations"), ("suspended", "Descheduler suspended meanwhile"), ("resumed", "Descheduler resumed"))
NOTHING = "nothing to show"
COMPARISON_VERDICTS = {True: ("matches the prediction", "status-passed"), False: ("differs from the prediction", "status-failed"),
                       None: ("not compared", "status-unknown")}
# What a usage chart's percents are, by the usage source the plan judged the nodes by.
BASIS = {REQUESTS: BY_REQUESTS, "KubernetesMetrics": "by actual usage (metrics server), percent of allocatable",
         "Prometheus": "by the Prometheus query's value per node, in percent"}
MIXED_BASIS = "by what each node was judged by (table below), in percent"

# Trusted text, inserted as it is: a <style> element's content is not entity-decoded by HTML parsers.
STYLE = """
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #222; margin: 24px auto; max-width: 1200px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 8px; }
h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 32px; }
h3 { font-size: 15px; margin: 16px 0 4px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
table.facts th { width: 260px; }
figure { margin: 8px 0 16px; overflow-x: auto; }
figcaption { font-size: 13px; color: #555; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 10px; color: #fff; font-weight: bold; }
.status-passed { background: #2e7d32; }
.status-failed { background: #c62828; }
.status-planned { background: #1f5fa8; }
.status-rolled_back { background: #ef6c00; }
.status-in_progress { background: #f0a202; }
.status-unknown { background: #757575; }
.result { font-weight: bold; }
td.pass { background: #e8f5e9; }
td.fail { background: #ffebee; }
td.open { background: #fff8e1; }
.reason { display: block; font-size: 12px; color: #444; }
.nothing { color: #666; font-style: italic; }
.attention { border: 2px solid #c62828; background: #ffebee; padding: 6px 10px; }
.note { border-left: 4px solid #ef6c00; background: #fff3e0; padding: 6px 10px; }
pre { white-space: pre-wrap; background: #f7f7f7; padding: 8px; border: 1px solid #ddd; }
"""


# ------------------------------------------------------------------------------------------ values
def shown(value: Any) -> str:
    """A document value as a person reads it: `-` for nothing, yes/no, a list joined, anything else as JSON."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return number(value)
    if isinstance(value, list):
        return ", ".join(shown(item) for item in value) if value else "none"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def nothing(reason: str) -> Markup:
    return tag("p", {"class": "nothing"}, "{0}: {1}.".format(NOTHING, reason))


def table_cell(cell: Any) -> Markup:
    """A value (text or Markup) in a plain cell, or an `(attributes, content)` pair for a cell with attributes."""
    if isinstance(cell, tuple):
        return tag("td", cell[0], cell[1])
    return tag("td", None, cell)


def table(headers: List[str], rows: List[List[Any]], css: Optional[str] = None) -> Markup:
    head = tag("thead", None, tag("tr", None, [tag("th", {"scope": "col"}, header) for header in headers]))
    body = tag("tbody", None, [tag("tr", None, [table_cell(cell) for cell in row]) for row in rows])
    return tag("table", {"class": css}, head, body)


def facts_table(pairs: List[tuple]) -> Markup:
    rows = [tag("tr", None, tag("th", {"scope": "row"}, label), tag("td", None, value)) for label, value in pairs]
    return tag("table", {"class": "facts"}, tag("tbody", None, rows))


def section(anchor: str, title: str, *children: Any) -> Markup:
    return tag("section", {"id": anchor}, tag("h2", None, title), *children)


def lines_list(lines: Any) -> Optional[Markup]:
    lines = [line for line in items(lines) if line not in (None, "")]
    return tag("ul", None, [tag("li", None, line) for line in lines]) if lines else None


# ------------------------------------------------------------------------------------------ header
def status_badge(status: Any) -> Markup:
    css = "status-" + (status if status in STATUSES else "unknown")
    return tag("span", {"class": "badge " + css, "data-status": status}, shown(status))


def header(document: dict) -> Markup:
    pairs = [("cluster", shown(document.get("cluster"))), ("playbook", shown(document.get("playbook"))),
             ("run id", shown(document.get("run_id"))), ("status", status_badge(document.get("status")))]
    if document.get("check_mode"):
        pairs.append(("check mode", "yes: nothing was changed; the report is the plan"))
    if document.get("failed_step") or document.get("status") == "failed":
        pairs.append(("failed step", shown(document.get("failed_step"))))
    if mapping(document.get("lease")).get("message"):   # taken over from a dead or expired run
        pairs.append(("lease", shown(document["lease"]["message"])))
    error = tag("pre", {"class": "error"}, document.get("error")) if document.get("error") else None
    title = "{0} report: {1}".format(shown(document.get("playbook")), shown(document.get("cluster")))
    return tag("header", None, tag("h1", None, title), facts_table(pairs), error)


# ------------------------------------------------------------------------------------------ node usage
def usage_figure(resource: str, rows: List[dict], thresholds: dict, basis: str) -> Markup:
    caption = "{0}: {1}, before and after".format(resource, "the query's value per node, in percent" if resource == METRIC_RESOURCE else basis)
    return tag("figure", {"class": "usage", "data-resource": resource}, tag("h3", None, resource),
               usage_chart(resource, rows, thresholds, basis), tag("figcaption", None, caption))


def categories_table(rows: List[dict]) -> Markup:
    return table(["node", "category before", "category after"],
                 [[row["name"], category_text(row["before"]), category_text(row["after"])] for row in rows], css="categories")


def percent_list(values: Any) -> str:
    """`cpu 80%, memory 40%` in the order of RESOURCES, then by name; `-` for none."""
    values = mapping(values)
    names = [r for r in RESOURCES if r in values] + sorted(set(values) - set(RESOURCES))
    return ", ".join("{0} {1}%".format(name, number(values[name])) for name in names) or "-"


def band_list(thresholds: Any) -> str:
    """Deviation thresholds as `cpu 20..60%` (low..high) per resource; `-` for none."""
    thresholds = mapping(thresholds)
    low, high = mapping(thresholds.get("thresholds")), mapping(thresholds.get("targetThresholds"))
    names = [r for r in RESOURCES if r in low or r in high] + sorted((set(low) | set(high)) - set(RESOURCES))
    return ", ".join("{0} {1}..{2}%".format(name, shown(low.get(name)), shown(high.get(name))) for name in names) or "-"


def judged_table(rows: List[dict], actual: bool, deviation: bool) -> Markup:
    """Per node and time (before, after): the source the plan judged it by, the percents it judged, the deviation
    thresholds it was judged against, and by requests beside actual usage."""
    headers = ["node", "judged by"]
    for when in ("before", "after"):
        headers.append("{0}: judged usage".format(when))
        if deviation:
            headers.append("{0}: thresholds (low..high)".format(when))
        if actual:
            headers.append("{0}: by requests".format(when))
    body = []
    for row in rows:
        states = [row["before"] or {}, row["after"] or {}]
        sources = sorted({state.get("source") for state in states if state.get("source")})
        cells: List[Any] = [row["name"], ", ".join(sources) or "-"]
        for state in states:
            cells.append(percent_list(state.get("percent")) if state else "not measured")
            if deviation:
                cells.append(band_list(state.get("thresholds")))
            if actual:
                cells.append(percent_list(state.get("requests")) if state.get("source") not in (None, REQUESTS) else "(judged by requests)")
        body.append(cells)
    return table(headers, body, css="judged-usage")


def judged_text(sources: List[str]) -> Optional[str]:
    if not sources:
        return None
    return "Judged by: {0}.".format("; ".join(SOURCE_TEXT.get(source, source) for source in sources))


def lines_text(thresholds: dict) -> str:
    profile = thresholds.get("profile")
    if thresholds.get("deviation"):
        if thresholds.get("thresholds") or thresholds.get("targetThresholds"):
            return ("Lines: the deviation thresholds of profile {0} as the plan computed them, the mean usage minus thresholds and plus "
                    "targetThresholds.".format(profile))
        return "No lines: profile {0} uses deviation thresholds (distances from the mean usage) and no node row has the computed ones.".format(profile)
    if profile:
        return "Lines: the LowNodeUtilization thresholds and targetThresholds of profile {0}.".format(profile)
    return "No LowNodeUtilization thresholds in the report's policy."


def usage_section(document: dict) -> Markup:
    classification = mapping(document.get("classification"))
    rows = usage_rows(classification)
    if not rows:
        return section("node-usage", "Node usage", nothing("the report has no node classification"))
    policy_text = mapping(document.get("policy")).get("policy_text")
    thresholds = judged_thresholds(rows, policy_thresholds(policy_text), deviation_policy(policy_text))
    sources = judged_sources(rows)
    actual = any(source != REQUESTS for source in sources)
    basis = BASIS.get(sources[0], MIXED_BASIS) if len(sources) == 1 else (MIXED_BASIS if sources else BY_REQUESTS)
    intro = "Before: {0}. After: {1}.".format(shown(mapping(classification.get("before")).get("source")),
                                              shown(mapping(classification.get("after")).get("source")))
    judged = judged_table(rows, actual, thresholds["deviation"]) if actual or thresholds["deviation"] else None
    return section("node-usage", "Node usage", tag("p", None, join([intro, " ", judged_text(sources), " " if sources else None, lines_text(thresholds)])),
                   [usage_figure(resource, rows, thresholds, basis) for resource in chart_resources(rows, thresholds, () if actual else RESOURCES)],
                   tag("h3", None, "Categories"), categories_table(rows),
                   [tag("h3", None, "What each node was judged by"), judged] if judged else None)


# ------------------------------------------------------------------------------------------ forecast
def forecast_moves_table(moves: List[dict]) -> Markup:
    rows = [[shown(move["cycle"]), shown(move["vm"]), shown(move["namespace"]), shown(move["source"]),
             shown(move["destination"]) if move["destination"] else "fits no other node"] for move in moves]
    return table(["run", "VM", "namespace", "from", "to"], rows, css="forecast-moves")


def forecast_categories_table(summary: dict) -> Markup:
    rows = [[node["name"]] + [shown(category) for category in node["by_cycle"]] for node in summary["categories"]]
    return table(["node"] + ["run {0}".format(shown(cycle)) for cycle in summary["cycles"]], rows, css="forecast-categories")


def forecast_findings(summary: dict) -> Optional[Markup]:
    """One line per swap (`run 1: worker-a goes from overutilized to underutilized`) and per VM moved back."""
    lines = ["run {0}: {1} goes from {2} to {3}".format(shown(swap.get("cycle")), shown(swap.get("node")), shown(swap.get("from")), shown(swap.get("to")))
             for swap in summary["swaps"]]
    for back in summary["moved_back"]:
        vm = "/".join(str(part) for part in (back.get("namespace"), back.get("vm")) if part)
        path = " -> ".join(str(node) for node in items(back.get("nodes")))
        lines.append("run {0}: {1} moves back ({2})".format(shown(back.get("cycle")), vm, path))
    return lines_list(lines)


def forecast_section(document: dict) -> Optional[Markup]:
    """The forecast of descheduler_policy, when the document has one: the verdict, the refusal, the moves run by run and
    each node's category per run; None without a forecast."""
    summary = forecast_summary(document)
    if summary is None:
        return None
    facts = facts_table([("verdict", summary["verdict"]), ("runs planned", shown(summary["runs"])), ("converged", shown(summary["converged"])),
                         ("runs to converge", shown(summary["cycles_to_converge"])), ("migrations", shown(summary["migrations"])),
                         ("refused", shown(bool(summary["refusal"])))])
    refusal = tag("div", {"class": "attention"}, "Refused: ", summary["refusal"]) if summary["refusal"] else None
    findings = forecast_findings(summary)
    return section("forecast", "Forecast", facts, refusal,
                   [tag("h3", None, "Planned moves, run by run"), forecast_moves_table(summary["moves"])] if summary["moves"] else None,
                   [tag("h3", None, "Categories per run"), forecast_categories_table(summary)] if summary["categories"] else None,
                   [tag("h3", None, "Swaps and moves back"), findings] if findings else None)


# ------------------------------------------------------------------------------------------ migrations
def migrations_table(spans: List[dict]) -> Markup:
    rows = [[span["vm"], span["migration"], shown(span["source_node"]), shown(span["target_node"]),
             "-" if span["duration_seconds"] is None else "{0} s".format(number(span["duration_seconds"])), shown(span["phase"]),
             shown(span["failure_reason"])] for span in spans]
    return table(["VM", "migration", "from", "to", "duration", "phase", "failure reason"], rows, css="migrations")


def planned_text(policy: dict) -> Optional[Markup]:
    planned = [entry for entry in items(policy.get("planned_evictions")) if isinstance(entry, dict)]
    stop = policy.get("stop_reason")
    stopped = ("The plan moves nothing: {0}." if not planned else "The first profile stopped before any eviction: {0}.").format(stop) if stop else None
    if not planned:
        return tag("p", {"class": "stop-reason"}, stopped) if stopped else None
    names = ", ".join("{0} from {1}".format(entry.get("vm") or entry.get("pod"), entry.get("node")) for entry in planned)
    return join([tag("p", None, "Planned by the policy: {0}.".format(names)), tag("p", {"class": "stop-reason"}, stopped) if stopped else None])


def migrations_section(document: dict) -> Markup:
    timeline = migration_timeline(document.get("checks"))
    planned = planned_text(mapping(document.get("policy")))
    if not timeline["spans"]:
        why = "no migration was verified" + (" (check mode)" if document.get("check_mode") else "")
        return section("migrations", "Migrations", nothing(why), planned)
    origin = tag("p", None, "Time 0 s is the first migration request, {0}.".format(timeline["origin"]))
    return section("migrations", "Migrations", origin, tag("figure", {"class": "timeline"}, timeline_chart(timeline)),
                   migrations_table(timeline["spans"]), planned)


# ------------------------------------------------------------------------------------------ five checks
def check_cell(check: Any) -> tuple:
    """The result in bold, coloured by class, and the reason below it."""
    check = mapping(check)
    result = check.get("result") or "-"
    css = result if result in CHECK_RESULTS else None
    return ({"class": css, "data-check-result": result},
            join([tag("span", {"class": "result"}, result), tag("span", {"class": "reason"}, check.get("reason")) if check.get("reason") else None]))


def checks_row(vm: dict) -> List[Any]:
    checks = mapping(vm.get("checks"))
    return [vm.get("name") or vm.get("vm"), shown(vm.get("namespace"))] + [check_cell(checks.get(name)) for name in CHECK_COLUMNS] \
        + [shown(vm.get("verdict"))]


def validation_text(validation: dict) -> Optional[Markup]:
    if not validation or validation.get("passed") is None:
        return None
    return tag("p", None, "Validation passed: {0}; stopped because: {1}; category swaps: {2}.".format(
        shown(validation.get("passed")), shown(validation.get("stopped_because")), len(items(validation.get("swaps")))))


def checks_section(document: dict) -> Markup:
    vms = [vm for vm in items(document.get("checks")) if isinstance(vm, dict)]
    validation = validation_text(mapping(document.get("validation")))
    if not vms:
        why = "no migration was verified" + (" (check mode)" if document.get("check_mode") else "")
        return section("five-checks", "Five checks", nothing(why), validation)
    return section("five-checks", "Five checks", table(["VM", "namespace"] + list(CHECK_COLUMNS) + ["verdict"], [checks_row(vm) for vm in vms],
                                                       css="checks"), validation)


# ------------------------------------------------------------------------------------------ backup, rollback
def backup_section(document: dict) -> Markup:
    backup = mapping(document.get("backup"))
    policy = mapping(document.get("policy"))
    pairs = [(label, shown(backup.get(key))) for key, label in BACKUP_FIELDS if key in backup]
    if policy.get("backup_path") and policy.get("backup_path") != backup.get("path"):
        pairs.append(("policy backup (descheduler_policy)", shown(policy["backup_path"])))
    patch = policy.get("resource_patch")
    if patch:
        pairs.append(("ResourcePatch", shown(mapping(patch).get("name") or patch)))
    if not pairs:
        return section("backup", "Backup", nothing("no backup was taken"))
    return section("backup", "Backup", facts_table(pairs))


def rollback_section(document: dict) -> Markup:
    rollback = document.get("rollback")
    if not isinstance(rollback, dict):
        return section("rollback", "Rollback", tag("p", {"class": "nothing"}, "not rolled back"))
    pairs = [(label, shown(rollback.get(key))) for key, label in ROLLBACK_FIELDS if key in rollback]
    return section("rollback", "Rollback", facts_table(pairs))


# ------------------------------------------------------------------------------------------ rehearsal
def storage_text(storage: dict) -> Optional[Markup]:
    if not storage:
        return None
    kind = storage.get("kind")
    what = "a PVC of StorageClass {0}".format(shown(storage.get("storage_class"))) if kind == "pvc" else shown(kind)
    note = storage.get("note")
    return tag("p", {"class": "note" if kind != "pvc" or note else None}, "Storage: ", what, ". " if note else None, note)


def prediction_part(prediction: dict, comparison: dict) -> Markup:
    verdict, css = COMPARISON_VERDICTS[comparison.get("matches") if isinstance(comparison.get("matches"), bool) else None]
    facts = facts_table([("predicted moves", shown(prediction.get("moves"))), ("candidates", shown(prediction.get("candidates"))),
                         ("from", shown(prediction.get("from"))), ("to", shown(prediction.get("to"))),
                         ("what happened", tag("span", {"class": "badge " + css, "data-matches": shown(comparison.get("matches"))}, verdict))])
    predicted = lines_list(prediction.get("lines"))
    happened = lines_list(comparison.get("lines"))
    return join([tag("h3", None, "Prediction and what happened"), facts, tag("p", None, "Predicted:") if predicted else None, predicted,
                 tag("p", None, "Happened:") if happened else None, happened])


def cleanup_part(cleanup: dict) -> Markup:
    left = [item for item in items(cleanup.get("left")) if item]
    left_part = tag("div", {"class": "attention"}, "Left behind: ", ", ".join(str(item) for item in left)) if left \
        else tag("p", None, "Nothing was left behind.")
    return join([tag("h3", None, "Cleanup"), facts_table([("done", shown(cleanup.get("done"))), ("removed", shown(cleanup.get("removed")))]),
                 left_part, lines_list(cleanup.get("lines"))])


def rehearsal_section(document: dict) -> Optional[Markup]:
    rehearsal = document.get("rehearsal")
    if not isinstance(rehearsal, dict):
        return None
    vms = [vm for vm in items(rehearsal.get("vms")) if isinstance(vm, dict)]
    hold = mapping(rehearsal.get("hold"))
    held = " The Descheduler {0} {1}/{2} was held ({3}) from before the test VMs were created until the rehearsal's policy was applied.".format(
        shown(hold.get("kind")), shown(hold.get("namespace")), shown(hold.get("name")),
        "paused already" if hold.get("suspended_before") else "suspended" if hold.get("kind") == "CronJob" else "scaled to 0") if hold else ""
    intro = tag("p", None, "Namespace {0}: test VMs placed on {1}, to move to {2}.{3}".format(
        shown(rehearsal.get("namespace")), shown(rehearsal.get("source_node")), shown(rehearsal.get("destination_node")), held))
    vm_rows = [[vm.get("name"), shown(vm.get("uid")), shown(vm.get("node")), shown(vm.get("memory"))] for vm in vms]
    vm_table = table(["VM", "UID", "node", "memory"], vm_rows, css="rehearsal-vms") if vms else nothing("no test VM was created")
    return section("rehearsal", "Rehearsal", intro, storage_text(mapping(rehearsal.get("storage"))),
                   prediction_part(mapping(rehearsal.get("prediction")), mapping(rehearsal.get("comparison"))),
                   tag("h3", None, "Test VMs"), vm_table, cleanup_part(mapping(rehearsal.get("cleanup"))))


# ------------------------------------------------------------------------------------------ page
def render_html(document: Any) -> str:
    """The whole page for one report document (any parts may be missing: they read `nothing to show`)."""
    document = mapping(document)
    title = "{0} report: {1} {2}".format(shown(document.get("playbook")), shown(document.get("cluster")), shown(document.get("run_id")))
    head = tag("head", None, tag("meta", {"charset": "utf-8"}), tag("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
               tag("title", None, title), tag("style", None, Markup(STYLE)))
    body = tag("body", None, header(document),
               tag("main", None, rehearsal_section(document), usage_section(document), forecast_section(document), migrations_section(document),
                   checks_section(document), backup_section(document), rollback_section(document)))
    return "<!DOCTYPE html>\n" + tag("html", {"xmlns": "http://www.w3.org/1999/xhtml", "lang": "en"}, head, body) + "\n"
