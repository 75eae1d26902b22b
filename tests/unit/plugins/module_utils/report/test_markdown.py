"""The Markdown report (roles/rebalance_report/templates/report.md.j2), rendered by Ansible's own templar as the role's
template task renders it, on documents shaped as the role's vars/main.yml builds them: what the plan judged each node
by (actual usage with the requests beside it, deviation thresholds as the plan computed them), the plan's stop reason,
and the forecast, with the same verdict as the HTML page."""
from __future__ import annotations

from pathlib import Path

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report import data

from .page import document
from .plans import metrics_deviation_document, prometheus_document, requests_document

TEMPLATE = Path(__file__).resolve().parents[5] / "roles" / "rebalance_report" / "templates" / "report.md.j2"
CHECK_NAMES = ["node_changed", "migration_succeeded", "uid_unchanged", "running_ready", "old_launcher_gone"]
# What vars/main.yml always sets, so that the template sees every key it reads.
ROLE_KEYS = {"check_mode": False, "failed_step": "", "error": "", "preflight": None, "backup": None, "compat": None, "rollback": None,
             "rehearsal": None, "validation": {"passed": None, "stopped_because": None, "swaps": [], "cycles": []}}
POLICY_KEYS = {"changed": None, "backup_path": None, "resource_patch": None, "policy_text": None, "planned_evictions": [], "plan_warnings": [],
               "stop_reason": None, "forecast": None}


def render(doc: dict) -> str:
    doc = dict(ROLE_KEYS, **doc)
    doc["policy"] = dict(POLICY_KEYS, **doc.get("policy", {}))
    templar = Templar(loader=DataLoader(), variables={"rebalance_report_data": doc, "rebalance_report_check_names": CHECK_NAMES})
    return templar.template(trust_as_template(TEMPLATE.read_text()))


def row(markdown: str, node: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith("| {0} |".format(node)))


def test_a_node_judged_by_actual_usage_shows_that_usage_with_its_requests_beside_it():
    markdown = render(metrics_deviation_document())
    assert row(markdown, "worker-a") == "| worker-a | overutilized | cpu 80.0 (KubernetesMetrics; requests 10.0 / 10.0 / 1.0) | - | - | - |"
    assert "Judged by: KubernetesMetrics." in markdown
    assert "Deviation thresholds as the plan computed them (the mean usage minus thresholds, plus targetThresholds): cpu 26.67..46.67%." in markdown


def test_a_prometheus_plan_shows_metric_resource():
    markdown = render(prometheus_document())
    assert row(markdown, "worker-a") == "| worker-a | overutilized | MetricResource 80.0 (Prometheus; requests 10.0 / 10.0 / 1.0) | - | - | - |"
    assert "Judged by: Prometheus." in markdown and "Deviation thresholds" not in markdown


def test_a_requests_plan_keeps_the_request_columns_and_says_why_nothing_moves():
    markdown = render(requests_document())
    assert row(markdown, "worker-a") == "| worker-a | underutilized | 10.0 / 10.0 / 1.0 | - | - | - |"
    assert "Judged by: requests." in markdown
    assert "The plan moves nothing: All nodes are underutilized, nothing to do here." in markdown
    assert "Verdict: nothing moves: the first run finds nothing to do." in markdown and "| run | VM | from | to |" not in markdown


def test_forecast_of_a_flapping_policy_with_its_refusal_moves_and_swaps():
    doc = metrics_deviation_document()
    forecast = doc["policy"]["forecast"]
    markdown = render(doc)
    assert "## Forecast" in markdown
    assert "Verdict: {0}.".format(data.forecast_summary(doc)["verdict"]) in markdown   # the HTML page's verdict
    assert "**Refused:** " + forecast["refusal"] in markdown
    moves = [line for line in markdown.splitlines() if line.startswith("| ") and line.split(" | ")[0][2:].isdigit()]
    assert moves[0] == "| 1 | vm-hot | worker-a | worker-b |" and len(moves) == forecast["migrations"]
    assert "- run 1: worker-a goes from overutilized to underutilized" in markdown
    assert "- run 2: vms/vm-hot moves back (worker-a -> worker-b -> worker-a)" in markdown


def test_a_report_without_usage_sources_or_forecast_reads_as_before():
    markdown = render(document("rebalance"))
    assert row(markdown, "worker-a") == "| worker-a | overutilized | 66.0 / 72.0 / 18.18 | overutilized | overutilized | 64.75 / 69.61 / 16.36 |"
    assert "Judged by" not in markdown and "## Forecast" not in markdown and "The plan moves nothing" not in markdown


def test_a_lease_taken_over_is_a_row_of_the_summary_and_absent_otherwise():
    doc = dict(requests_document(), lease={"took_over": None, "unfinished_run": {"run_id": "old"},
                                           "message": "Took over lease kube-system/kubevirt-ops-run: the rebalance run old had died"})
    assert "| lease | Took over lease kube-system/kubevirt-ops-run: the rebalance run old had died |" in render(doc)
    assert "| lease |" not in render(requests_document())
