#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: check_variables
short_description: Check a playbook's variables against its spec and cross-variable rules, naming only the wrong ones
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - Reads the task variables that I(spec) names (as M(ansible.builtin.validate_argument_spec) does), templates them and checks
    each with ansible-core's argument spec validator (C(type), C(elements), C(choices), C(required)), then the named I(rules)
    across variables, before anything is read or changed.
  - "Collects every problem and fails with one line per wrong variable, C(<variable>: <problem>. <fix, with an example>), and
    nothing about the variables that are right. Variables the spec does not name are not looked at (inventory variables)."
  - Sets nothing; the spec's C(default) values document the playbook and are not applied here.
  - Runs on the controller and talks to no cluster.
options:
  spec:
    description:
      - The spec, as the path of a spec file (relative paths are taken from the playbook's directory) or the loaded file.
      - A spec file has C(short_description) and C(options), in the format of a role's C(meta/argument_specs.yml) entry point
        (variable name to C(type), C(elements), C(choices), C(default), C(required), C(description)), as in C(playbooks/specs/).
    type: raw
    required: true
  rules:
    description:
      - The rule sets to check, in order, besides the spec.
      - C(rebalance) (two or more workers unless C(rebalance_policy), the label selector's shape, thresholds and targets with the
        same resources and each threshold below its target, cycles and timeouts of 1 or more), C(fleet) (C(fleet_serial) and
        C(fleet_canary_serial) batch sizes), C(rehearse) (two different C(rehearse_nodes), moves and timeout of 1 or more, labels not empty), C(maintenance)
        (nodes to drain from C(maintenance_nodes) or C(maintenance_nodes_text), batch size and timeout of 1 or more) and
        C(rollback) (C(rollback_method=backup) needs C(rollback_backup_file), an existing file).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reads variables only; the same checks run in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
notes:
  - An action plugin; the checks are in the collection's C(plugins/plugin_utils/variable_checks.py) and C(variable_rules.py).
seealso:
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the variables before anything is read or changed
  kubevirt_ops.rebalance.check_variables:
    spec: "{{ playbook_dir }}/specs/rebalance.yml"
    rules: [rebalance]

# rebalance.yml -e '{"rebalance_nodes": ["worker-a"], "rebalance_thresholds": {"cpu": 80}, "rebalance_target_thresholds": {"cpu": 70}}'
# fails with two lines, one per wrong variable:
#   rebalance_nodes: names one worker (worker-a); the policy balances between two or more workers. Give the workers ...
#   rebalance_thresholds.cpu: 80 is not below rebalance_target_thresholds.cpu (70); ... Lower the threshold or raise ...

- name: Check variables against a spec given inline
  kubevirt_ops.rebalance.check_variables:
    spec:
      short_description: The batch of a task file
      options:
        batch_size: {type: int, default: 1, description: Nodes at a time.}
"""

RETURN = r"""
msg:
  description: One line per wrong variable when the check fails; else how many variables were set and checked.
  returned: always
  type: str
  sample: "rebalance_timeout: \"soon\" is not an integer. Give an integer, e.g. -e rebalance_timeout=600"
"""
