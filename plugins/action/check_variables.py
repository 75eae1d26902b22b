# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""check_variables: the task variables a spec names, checked on the controller (as ansible.builtin.validate_argument_spec
reads task vars), failing with one line per wrong variable. The checks are in plugins/plugin_utils/variable_checks.py
and variable_rules.py."""

from __future__ import annotations

from typing import Dict

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_checks import check_variables, problem_lines, spec_options
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_rules import rules_named


class ActionModule(ActionBase):
    """Validate the variables a playbook spec names; only the wrong ones are named in the failure."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("spec", "rules"))

    def run(self, tmp=None, task_vars=None) -> Dict:
        result = super().run(tmp, task_vars)
        del tmp  # nothing runs on the target
        task_vars = task_vars or {}
        try:
            options = spec_options(self._load_spec(self._task.args.get("spec")))
            names = self._task.args.get("rules") or []
            rules = rules_named([names] if isinstance(names, str) else list(names))
        except (KeyError, ValueError) as error:
            raise AnsibleActionFail("check_variables: {0}".format(to_text(error).strip("'\""))) from None

        values, unreadable = {}, {}
        for name in options:
            if name not in task_vars:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError as error:
                unreadable[name] = to_text(getattr(error, "message", error)).splitlines()[0]
        problems = check_variables(options, values, rules, unreadable)
        result["changed"] = False
        if problems:
            # the lines alone: the failure prints the result as JSON too, so it stays as short as the message
            result.update(failed=True, msg="\n".join(problem_lines(problems)))
        else:
            result["msg"] = "{0} variables checked".format(len(values))
        return result

    def _load_spec(self, spec):
        """A spec as given (the loaded file) or the file at `spec`, a relative path taken from the playbook's directory."""
        if isinstance(spec, dict):
            return spec
        if not isinstance(spec, str) or not spec:
            raise ValueError("spec is a spec file's path or the loaded spec (a mapping with options)")
        path = self._loader.path_dwim(spec)
        try:
            return self._loader.load_from_file(path)
        except AnsibleError as error:
            raise ValueError("cannot read the spec {0}: {1}".format(path, to_text(error).splitlines()[0])) from error
