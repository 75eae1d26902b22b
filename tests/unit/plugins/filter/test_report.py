"""The report filter as Jinja sees it: `report_html` registered under its name, rendering the page of a report
document, and refusing what is not one."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubevirt_ops.rebalance.plugins.filter.report import FilterModule
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.html import render_html

FILTERS = FilterModule().filters()


def test_report_html_renders_the_document():
    doc = {"cluster": "lab", "playbook": "rebalance", "run_id": "r1", "status": "passed"}
    page = FILTERS["report_html"](doc)
    assert page == render_html(doc) and page.startswith("<!DOCTYPE html>") and "rebalance report: lab" in page


@pytest.mark.parametrize("value", [None, "text", [{"cluster": "lab"}]])
def test_report_html_refuses_what_is_not_a_document(value):
    with pytest.raises(AnsibleFilterError, match="expects the report document"):
        FILTERS["report_html"](value)
