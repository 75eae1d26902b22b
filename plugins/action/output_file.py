# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""output_file: a report, evidence or backup file, or its directory, written on the controller by this process (the
file operations are in plugins/plugin_utils/output_files.py). Every host of this collection is a cluster reached from
the controller (`ansible_connection: local`), so the controller is where these files belong and no module process is
started for them."""

from __future__ import annotations

import os
from typing import Dict

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.output_files import (
    OutputFileError, ensure_directory, parse_mode, write_file)

FILE_DEFAULT_MODE = "0644"
DIRECTORY_DEFAULT_MODE = "0755"


class ActionModule(ActionBase):
    """Write a file (`content`) or make a directory (`state: directory`) on the controller, with check mode and diff."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("path", "state", "content", "mode", "force", "verify", "existing_mode"))

    def run(self, tmp=None, task_vars=None) -> Dict:
        result = super().run(tmp, task_vars)
        del tmp  # nothing runs on a target
        args = self._task.args
        state = args.get("state", "file")
        path = args.get("path")
        try:
            if not isinstance(path, str) or not path:
                raise OutputFileError("path is required: the file or directory to write on the controller.")
            path = os.path.expanduser(path)   # a `path` option, as the builtin file modules take it
            if state == "directory":
                self._refuse(args, ("content", "force", "verify"), "state: directory")
                done = ensure_directory(path, parse_mode(args.get("mode", DIRECTORY_DEFAULT_MODE)),
                                        args.get("existing_mode", "keep"), check=self._play_context.check_mode)
            elif state == "file":
                self._refuse(args, ("existing_mode",), "state: file")
                if not isinstance(args.get("content"), str):
                    raise OutputFileError("content is required with state: file, as text (use to_nice_json or to_nice_yaml for data).")
                done = write_file(path, args["content"], parse_mode(args.get("mode", FILE_DEFAULT_MODE)),
                                  force=boolean(args.get("force", True), strict=True), verify=boolean(args.get("verify", False), strict=True),
                                  check=self._play_context.check_mode)
            else:
                raise OutputFileError("state {0!r} is neither file nor directory.".format(state))
        except (OutputFileError, TypeError) as error:
            raise AnsibleActionFail("output_file: {0}".format(to_text(error))) from None
        diff = done.pop("diff", None)
        if self._play_context.diff and diff:
            result["diff"] = diff
        result.update(done)
        return result

    @staticmethod
    def _refuse(args: Dict, names, where: str) -> None:
        given = [name for name in names if name in args]
        if given:
            raise OutputFileError("{0} do(es) not apply with {1}. Fix: remove {0}.".format(", ".join(given), where))
