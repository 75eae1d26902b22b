# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: run_id
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
short_description: A new run id, unique per run and sortable by time
description:
  - Returns one new run id, C(<UTC start time to the second>-<suffix>), for example C(20261207T152652Z-awx1234) or
    C(20261207T152652Z-k3x9q2). The suffix is the AWX job id (C(awx_job_id), or C(tower_job_id), read from the play's
    variables, or I(job_id)) prefixed with C(awx), else six random lowercase letters and digits, so two runs started in the
    same second get different ids, and so different backup files and Lease records.
  - The time comes first, so ids sort by start time as text. Set the id once per run (M(ansible.builtin.set_fact)); each
    lookup makes a new one.
options:
  job_id:
    description: The AWX job id to use as the suffix; by default C(awx_job_id) or C(tower_job_id) when AWX sets it.
    type: str
"""

EXAMPLES = r"""
- name: Name the run once
  ansible.builtin.set_fact:
    rebalance_run_id: "{{ rebalance_run_id | default(lookup('kubevirt_ops.rebalance.run_id')) }}"
"""

RETURN = r"""
_raw:
  description: One run id, C(YYYYMMDDTHHMMSSZ-<suffix>).
  type: list
  elements: str
"""

from ansible.plugins.lookup import LookupBase
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.run_id import new_run_id


class LookupModule(LookupBase):
    """kubevirt_ops.rebalance.run_id: one new run id."""

    def run(self, terms, variables=None, **kwargs):
        job_id = kwargs.get("job_id")
        if job_id is None:
            variables = variables or {}
            job_id = variables.get("awx_job_id", variables.get("tower_job_id"))
        return [new_run_id(job_id=job_id)]
