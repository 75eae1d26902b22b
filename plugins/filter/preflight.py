# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the descheduler_preflight role; the checks themselves are in module_utils/checks/preflight.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.preflight import preflight, problem_lines


def descheduler_preflight(facts, nodes=None, min_workers=2, require_vms=True, namespace=None, label_selector=None):
    if not isinstance(facts, dict):
        raise AnsibleFilterError("descheduler_preflight expects the registered result of kubevirt_eviction_facts")
    if nodes is not None and not isinstance(nodes, list):
        raise AnsibleFilterError("descheduler_preflight: nodes must be a list of node names")
    return preflight(facts, nodes=list(nodes) if nodes else None, min_workers=int(min_workers), require_vms=bool(require_vms),
                     namespace=namespace or None, label_selector=label_selector or None)


def preflight_problem_lines(problems):
    return problem_lines(list(problems or []))


class FilterModule:
    """kubevirt_ops.rebalance preflight filters."""

    def filters(self):
        return {"descheduler_preflight": descheduler_preflight, "preflight_problem_lines": preflight_problem_lines}
