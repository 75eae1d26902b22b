# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rebalance_report role; the page itself is built in module_utils/report/html.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.html import render_html


def report_html(document):
    if not isinstance(document, dict):
        raise AnsibleFilterError("report_html expects the report document (a dict), for example rebalance_report_result.report")
    return render_html(document)


class FilterModule:
    """kubevirt_ops.rebalance report filters."""

    def filters(self):
        return {"report_html": report_html}
