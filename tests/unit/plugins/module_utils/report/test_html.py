"""The whole page: one self-contained HTML5 document (parsed here as XML) with a chart per resource, the migrations
timeline and table, the five checks, backup, rollback and rehearsal sections; values escaped; reports of failed,
check-mode and empty runs render with "nothing to show" where they have nothing."""
from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.html import CHECK_COLUMNS, render_html

from .page import NS, all_text, classes, document, parse, with_class

SECTIONS = ["rehearsal", "node-usage", "migrations", "five-checks", "backup", "rollback"]


def page(doc):
    return parse(render_html(doc))


def section(root, anchor):
    found = root.find(".//h:section[@id='{0}']".format(anchor), NS)
    assert found is not None, "no section {0}".format(anchor)
    return found


def table_rows(table):
    return [[all_text(cell) for cell in row] for row in table.iterfind(".//h:tbody/h:tr", NS)]


def test_page_is_html5_with_inline_css_and_the_run_in_its_header():
    markup = render_html(document("rebalance"))
    assert markup.startswith("<!DOCTYPE html>\n<html")
    root = parse(markup)
    assert root.find("h:head/h:meta[@charset='utf-8']", NS) is not None
    assert root.find("h:head/h:title", NS).text == "rebalance report: workload 20261201T123654Z"
    header = all_text(root.find(".//h:header", NS))
    for expected in ("cluster workload", "playbook rebalance", "run id 20261201T123654Z", "status passed"):
        assert expected in header
    assert "status-passed" in classes(root.find(".//h:span[@data-status='passed']", NS))


def test_page_refers_to_nothing_outside_itself():
    markup = render_html(document("failed"))
    root = parse(markup)
    assert root.find(".//h:script", NS) is None and root.find(".//h:link", NS) is None and root.find(".//h:img", NS) is None
    for element in root.iter():
        for name, value in element.attrib.items():
            assert name not in ("src", "href", "{http://www.w3.org/1999/xlink}href"), (element.tag, name)
            assert "://" not in value or name == "xmlns", (element.tag, name, value)
    style = root.find("h:head/h:style", NS).text
    assert "url(" not in style and "@import" not in style


def test_sections_in_order_and_a_chart_per_resource():
    root = page(document("failed"))
    assert [element.get("id") for element in root.iterfind(".//h:section", NS)] == SECTIONS
    usage = section(root, "node-usage")
    assert [figure.get("data-resource") for figure in usage.iterfind("h:figure", NS)] == ["cpu", "memory", "pods"]
    charts = [sorted(classes(chart)) for chart in usage.iterfind(".//s:svg", NS)]
    assert charts == [["chart", "cpu", "usage"], ["chart", "memory", "usage"], ["chart", "pods", "usage"]]
    assert len(list(section(root, "migrations").iterfind(".//s:svg", NS))) == 1


def test_usage_charts_draw_requests_percent_and_the_policy_thresholds():
    root = page(document("failed"))
    memory = section(root, "node-usage").find("h:figure[@data-resource='memory']/s:svg", NS)
    percents = {(rect.get("data-node"), rect.get("data-when")): rect.get("data-percent") for rect in with_class(memory, ".//s:rect", "bar")}
    assert percents == {("worker-a", "before"): "72", ("worker-a", "after"): "69.61", ("worker-b", "before"): "58.5", ("worker-b", "after"): "60.89"}
    cpu = section(root, "node-usage").find("h:figure[@data-resource='cpu']/s:svg", NS)
    assert len(with_class(cpu, ".//s:rect", "bar")) == 4  # cpu is in requests_percent only, not in usage_percent
    lines = {group.get("data-kind"): group.get("data-percent") for group in with_class(memory, ".//s:g", "threshold")}
    assert lines == {"thresholds": "55", "targetThresholds": "68"}
    pods = section(root, "node-usage").find("h:figure[@data-resource='pods']/s:svg", NS)
    assert [group.get("data-kind") for group in with_class(pods, ".//s:g", "threshold")] == ["targetThresholds"]
    categories = table_rows(section(root, "node-usage").find(".//h:table[@class='categories']", NS))
    assert categories == [["worker-a", "overutilized", "overutilized"], ["worker-b", "underutilized", "appropriately utilized"]]


def test_migrations_table_names_each_migration():
    root = page(document("failed"))
    rows = table_rows(section(root, "migrations").find(".//h:table", NS))
    assert rows == [["vm-1", "kubevirt-evacuation-5zxts", "worker-a", "worker-b", "4 s", "Failed", "target pod unschedulable: 0/2 nodes are available"],
                    ["vm-2", "kubevirt-evacuation-q8w2e", "worker-a", "worker-b", "-", "Running", "-"]]
    assert "Time 0 s is the first migration request, 2026-12-01T12:37:07Z." in all_text(section(root, "migrations"))


def test_five_checks_table_has_a_column_per_check_with_result_and_reason():
    root = page(document("rebalance"))
    table = section(root, "five-checks").find("h:table", NS)
    headers = [all_text(th) for th in table.iterfind("h:thead/h:tr/h:th", NS)]
    assert headers == ["VM", "namespace", "node_changed", "migration_succeeded", "uid_unchanged", "running_ready", "old_launcher_gone", "trigger",
                       "verdict"]
    rows = list(table.iterfind("h:tbody/h:tr", NS))
    assert [all_text(row[0]) for row in rows] == ["vm-1", "vm-2"]
    node_changed = rows[1][2 + CHECK_COLUMNS.index("node_changed")]
    assert node_changed.get("data-check-result") == "open" and "open" in classes(node_changed)
    assert all_text(node_changed) == "open the VMI still runs on its baseline node worker-a"
    assert [cell.get("data-check-result") for cell in rows[0][2:-1]] == ["pass"] * len(CHECK_COLUMNS)


def test_failed_run_shows_the_step_and_the_error_escaped():
    markup = render_html(document("failed"))
    root = parse(markup)
    header = all_text(root.find(".//h:header", NS))
    assert "failed step validate" in header and "status failed" in header
    assert root.find(".//h:pre[@class='error']", NS).text == document("failed")["error"]
    assert "is &lt;none&gt; &amp; unschedulable" in markup


def test_hostile_values_stay_text():
    doc = copy.deepcopy(document("rebalance"))
    doc["cluster"] = "</title><script>alert(1)</script>"
    doc["checks"][0]["name"] = 'vm-<b onclick="x">'
    doc["checks"][0]["migration"]["name"] = "m&<i>"
    doc["classification"]["before"]["nodes"][0]["name"] = "<node>"
    root = page(doc)
    assert root.find(".//h:script", NS) is None and root.find(".//h:b", NS) is None and root.find(".//h:i", NS) is None
    assert root.find("h:head/h:title", NS).text == "rebalance report: </title><script>alert(1)</script> 20261201T123654Z"
    assert 'vm-<b onclick="x">' in all_text(section(root, "five-checks")) and "m&<i>" in all_text(section(root, "migrations"))
    assert "<node>" in all_text(section(root, "node-usage"))


def test_backup_and_rollback_list_what_was_saved_and_undone():
    root = page(document("failed"))
    backup = all_text(section(root, "backup"))
    assert "policy ConfigMap backup /work/main/.cache/demo/run/backups/workload/20261201T123654Z_configmap_descheduler_descheduler.yaml" in backup
    assert "ResourcePatch rp-6srjl" in backup
    rollback = dict((row[0], row[1]) for row in table_rows(section(root, "rollback").find("h:table", NS)))
    assert rollback["method"] == "resource_patch" and rollback["ResourcePatches deleted"] == "rp-6srjl"
    assert rollback["failed migrations"] == "kubevirt-evacuation-5zxts" and rollback["Descheduler resumed"] == "yes"


def test_rehearsal_shows_prediction_test_vms_storage_and_what_cleanup_left():
    root = page(document("failed"))
    rehearsal = section(root, "rehearsal")
    text = all_text(rehearsal)
    assert "Namespace kubevirt-ops-rehearsal: test VMs placed on worker-a, to move to worker-b." in text
    assert "does not exercise the PVC protection" in all_text(rehearsal.find("h:p[@class='note']", NS))
    assert rehearsal.find(".//h:span[@data-matches='no']", NS).text == "differs from the prediction"
    assert [row[0] for row in table_rows(rehearsal.find(".//h:table[@class='rehearsal-vms']", NS))] == ["vm-1", "vm-2"]
    (left,) = with_class(rehearsal, ".//h:div", "attention")
    assert all_text(left) == ("Left behind: Namespace kubevirt-ops-rehearsal (Terminating), "
                              "VirtualMachineInstanceMigration kubevirt-evacuation-q8w2e (Running)")
    assert "run with -e rehearse_cleanup=only to finish" in text


def test_rehearsal_says_which_descheduler_it_held():
    doc = copy.deepcopy(document("failed"))
    doc["rehearsal"]["hold"] = {"kind": "CronJob", "namespace": "descheduler", "name": "descheduler", "suspended_before": False}
    assert ("The Descheduler CronJob descheduler/descheduler was held (suspended) from before the test VMs were created until the "
            "rehearsal's policy was applied.") in all_text(section(page(doc), "rehearsal"))
    doc["rehearsal"]["hold"] = {"kind": "Deployment", "namespace": "descheduler", "name": "descheduler", "suspended_before": True}
    assert "Deployment descheduler/descheduler was held (paused already)" in all_text(section(page(doc), "rehearsal"))
    assert "was held" not in all_text(section(page(document("failed")), "rehearsal"))   # a report without a hold


def test_check_mode_report_says_what_it_has_not():
    root = page(document("check_mode"))
    assert "check mode yes" in all_text(root.find(".//h:header", NS))
    assert all_text(section(root, "migrations")) == ("Migrations nothing to show: no migration was verified (check mode). "
                                                     "Planned by the policy: vm-1 from worker-a.")
    assert all_text(section(root, "five-checks")) == "Five checks nothing to show: no migration was verified (check mode)."
    assert all_text(section(root, "rollback")) == "Rollback not rolled back"
    cpu = section(root, "node-usage").find("h:figure[@data-resource='cpu']/s:svg", NS)
    assert {rect.get("data-when") for rect in with_class(cpu, ".//s:rect", "bar")} == {"before"}
    rehearsal = section(root, "rehearsal")
    assert with_class(rehearsal, ".//h:div", "attention") == [] and "Nothing was left behind." in all_text(rehearsal)
    assert rehearsal.find(".//h:span[@data-matches='-']", NS).text == "not compared"
    assert "nothing to show: no test VM was created." in all_text(rehearsal)


@pytest.mark.parametrize("doc", [{}, None, {"classification": None, "checks": None, "policy": None, "backup": None, "rehearsal": None},
                                 {"classification": {"before": {"nodes": []}, "after": {"nodes": []}}, "checks": [], "rollback": None}])
def test_empty_report_renders_every_section_with_nothing_to_show(doc):
    root = page(doc)
    assert root.find(".//s:svg", NS) is None
    assert [element.get("id") for element in root.iterfind(".//h:section", NS)] == SECTIONS[1:]
    for anchor in ("node-usage", "migrations", "five-checks", "backup"):
        assert "nothing to show" in all_text(section(root, anchor))
    assert all_text(section(root, "rollback")) == "Rollback not rolled back"


def test_page_parses_with_its_doctype():
    assert ET.fromstring(render_html(document("rebalance"))).tag == "{http://www.w3.org/1999/xhtml}html"


@pytest.mark.parametrize("status, css", [("passed", "status-passed"), ("failed", "status-failed"), ("planned", "status-planned"),
                                         ("rolled_back", "status-rolled_back"), ("in_progress", "status-in_progress"), ("odd", "status-unknown"),
                                         (None, "status-unknown")])
def test_status_badge_is_coloured_by_status(status, css):
    root = page({"status": status})
    badge = with_class(root, ".//h:span", "badge")[0]
    assert css in classes(badge)
    assert ".{0} {{".format(css) in root.find("h:head/h:style", NS).text


def test_a_lease_taken_over_from_a_dead_run_is_in_the_header():
    doc = copy.deepcopy(document("rebalance"))
    doc["lease"] = {"took_over": {"run_id": "old"}, "unfinished_run": None,
                    "message": "Took over lease kube-system/kubevirt-ops-run from rebalance run old by erin@ctl pid 7: its process has ended"}
    header = all_text(parse(render_html(doc)).find(".//h:header", NS))
    assert "lease Took over lease kube-system/kubevirt-ops-run from rebalance run old by erin@ctl pid 7" in header
    assert "lease" not in all_text(parse(render_html(document("rebalance"))).find(".//h:header", NS))
