"""The HTML report as a person sees it: report documents (a real demo run, a failed rehearsal, a check-mode rehearsal)
rendered through Ansible with the `kubevirt_ops.rebalance.report_html` filter, and the rebalance_report role writing
`.html` beside `.json` and `.md` (also in check mode), each page opened in headless Chromium: a full-page screenshot,
the text a reader sees (nodes, the five checks' headers, VMs, migrations), every chart drawn with a box and shapes, no
console error and no request for anything outside the file. No cluster is involved: the role only reads facts."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import yaml

from support.browser import open_report

from .ansible_run import localhost_inventory, run_playbook_file
from .conftest import ROOT

DATA = ROOT / "tests" / "unit" / "data"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHECK_HEADERS = ("node_changed", "migration_succeeded", "uid_unchanged", "running_ready", "old_launcher_gone", "trigger")
NODES = ("worker-a", "worker-b")

RENDER_PLAY = [{
    "name": "Render report documents with the report_html filter",
    "hosts": "localhost",
    "gather_facts": False,
    "tasks": [{
        "name": "Write the HTML report of each document",
        "ansible.builtin.copy": {"content": "{{ lookup('ansible.builtin.file', item.source) | from_json | kubevirt_ops.rebalance.report_html }}",
                                 "dest": "{{ item.dest }}", "mode": "0644"},
        "loop": "{{ report_documents }}",
    }],
}]

# The other roles' result facts as they set them, taken from the demo run's report, so the role builds its document.
ROLE_PLAY = [{
    "name": "Write one cluster's report from stand-in role results",
    "hosts": "localhost",
    "gather_facts": False,
    "tasks": [
        {"name": "Stand in for the other roles' results",
         "ansible.builtin.set_fact": {
             "descheduler_backup_result": "{{ sample.backup }}",
             "descheduler_rebalance_result": {"changed": True, "backup_path": "{{ sample.policy.backup_path }}",
                                              "resource_patch": "{{ sample.policy.resource_patch }}", "policy_text": "{{ sample.policy.policy_text }}",
                                              "plan": {"nodes": "{{ sample.classification.before.nodes }}",
                                                       "evictions": "{{ sample.policy.planned_evictions }}", "warnings": []}},
             "rebalance_validate_result": {"passed": True, "stopped_because": "{{ sample.validation.stopped_because }}", "swaps": [],
                                           "moved": "{{ sample.moved }}",
                                           "cycles": [{"cycle": 1, "run": "{{ sample.validation.cycles[0] }}", "verify": {"vms": "{{ sample.checks }}"}}]},
             "descheduler_rollback_result": "{{ sample.rollback }}"}},
        {"name": "Write the report",
         "ansible.builtin.include_role": {"name": "kubevirt_ops.rebalance.rebalance_report"},
         "vars": {"rebalance_report_dir": "{{ report_dir }}", "rebalance_report_cluster": "workload", "rebalance_report_run_id": "{{ sample.run_id }}",
                  "rebalance_report_classification_after": "{{ sample.classification.after.nodes }}", "rebalance_report_show": False}},
        {"name": "Save the role's result for the test",
         "ansible.builtin.copy": {"content": "{{ rebalance_report_result | to_json }}", "dest": "{{ result_file }}", "mode": "0600"},
         "check_mode": False},
    ],
    "vars": {"sample": "{{ lookup('ansible.builtin.file', sample_file) | from_json }}"},
}]


def write_play(workdir: Path, name: str, plays: list) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    playbook = workdir / name
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    return playbook


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    """name -> the HTML file the filter wrote for tests/unit/data/report_<name>.json, all in one ansible-playbook run."""
    workdir = tmp_path_factory.mktemp("report-html")
    pages = {name: workdir / "{0}.html".format(name) for name in ("rebalance", "failed", "check_mode")}
    documents = [{"source": str(DATA / "report_{0}.json".format(name)), "dest": str(path)} for name, path in pages.items()]
    run_playbook_file(write_play(workdir, "render.yml", RENDER_PLAY), localhost_inventory(workdir), workdir, {"report_documents": documents})
    return pages


def png_size(path: Path) -> tuple:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, "{0} is not a PNG".format(path)
    return struct.unpack(">II", data[16:24])


def assert_renders_cleanly(page, charts: int) -> None:
    """What every report page must do in the browser, whatever it holds."""
    width, height = png_size(page.screenshot)
    assert page.screenshot.stat().st_size > 20000 and width >= 1000 and height > 800, (page.screenshot, width, height)
    assert page.console_errors == [], page.console_errors
    assert page.outside_requests == [], page.outside_requests
    assert len(page.svgs) == charts, [svg.css for svg in page.svgs]
    for svg in page.svgs:
        assert svg.shapes > 0 and svg.texts > 0 and svg.width > 0 and svg.height > 0, svg
        assert svg.shown_width >= svg.width and svg.label, svg


def assert_text_has(text: str, expected) -> None:
    missing = [item for item in expected if item not in text]
    assert not missing, "not in the rendered text: {0}\n{1}".format(missing, text)


def test_report_of_a_rebalance_shows_charts_checks_and_the_migration(rendered, tmp_path):
    page = open_report(rendered["rebalance"], tmp_path / "rebalance.png")
    assert_renders_cleanly(page, charts=4)
    assert [svg.css for svg in page.svgs] == ["chart usage cpu", "chart usage memory", "chart usage pods", "chart timeline"]
    assert page.title == "rebalance report: workload 20261201T123654Z"
    sections = ("Node usage", "Migrations", "Five checks", "Backup", "Rollback")
    assert_text_has(page.text, NODES + CHECK_HEADERS + sections + ("vm-1", "vm-2", "kubevirt-evacuation-5zxts", "passed", "resource_patch", "rp-6srjl"))


def test_report_of_a_failed_rehearsal_shows_the_error_and_what_was_left(rendered, tmp_path):
    page = open_report(rendered["failed"], tmp_path / "failed.png")
    assert_renders_cleanly(page, charts=4)
    error = json.loads((DATA / "report_failed.json").read_text())["error"]
    expected = (error, "failed step", "validate", "Rehearsal", "differs from the prediction", "kubevirt-evacuation-5zxts", "kubevirt-evacuation-q8w2e",
                "Left behind: Namespace kubevirt-ops-rehearsal (Terminating)")
    assert_text_has(page.text, NODES + CHECK_HEADERS + expected)


def test_report_of_a_check_mode_rehearsal_renders_with_nothing_to_show(rendered, tmp_path):
    page = open_report(rendered["check_mode"], tmp_path / "check_mode.png")
    assert_renders_cleanly(page, charts=3)
    assert_text_has(page.text, NODES + ("planned", "nothing to show: no migration was verified (check mode)", "not rolled back",
                                        "Nothing was left behind."))


@pytest.mark.parametrize("check", [False, True], ids=["run", "check-mode"])
def test_role_writes_the_html_report_beside_json_and_markdown(tmp_path, check):
    result_file = tmp_path / "result.json"
    run_playbook_file(write_play(tmp_path, "role.yml", ROLE_PLAY), localhost_inventory(tmp_path), tmp_path,
                      {"report_dir": str(tmp_path / "reports"), "sample_file": str(DATA / "report_rebalance.json"), "result_file": str(result_file)},
                      check=check)
    result = json.loads(result_file.read_text())
    base = tmp_path / "reports" / "workload" / "rebalance-20261201T123654Z"
    assert (result["json_path"], result["markdown_path"], result["html_path"]) == (str(base) + ".json", str(base) + ".md", str(base) + ".html")
    html = Path(result["html_path"])
    assert oct(html.stat().st_mode & 0o777) == "0o644"
    page = open_report(html, tmp_path / "role.png")
    assert_renders_cleanly(page, charts=4)
    assert_text_has(page.text, NODES + CHECK_HEADERS + ("vm-1", "kubevirt-evacuation-5zxts", "rp-6srjl"))
