# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rehearsal; the logic is in module_utils/policy/rehearsal.py, shared with the modules."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.rehearsal import compare


def rehearsal_compare_filter(prediction, moved, namespace):
    if not isinstance(prediction, dict) or "candidates" not in prediction:
        raise AnsibleFilterError("rehearsal_compare expects the prediction of rehearsal_plan (sizing.prediction)")
    if not isinstance(moved, list):
        raise AnsibleFilterError("rehearsal_compare expects the moved VMs as a list (rebalance_validate_result.moved)")
    return compare(prediction, moved, namespace)


class FilterModule:
    """kubevirt_ops.rebalance rehearsal filters."""

    def filters(self):
        return {"rehearsal_compare": rehearsal_compare_filter}
