#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: output_file
short_description: Write a report, evidence or backup file, or its directory, on the controller
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - Writes I(content) to the file I(path) with I(mode), or makes the directory I(path) (C(state=directory)), on the controller,
    in the process that runs the task. The collection's hosts are clusters reached from the controller
    (C(ansible_connection=local)), and its reports, evidence and backups are the controller's files; M(ansible.builtin.copy)
    and M(ansible.builtin.file) would start one or two module processes for each of them.
  - A file is written to a temporary file in its directory and renamed over I(path), so a reader sees the old file or the new
    one, never half of one. A file that already holds I(content) with I(mode) is left alone, so a second run changes nothing.
  - A missing directory is created with I(mode), and so is each missing parent. An existing directory keeps its mode unless
    I(existing_mode=set).
  - Fails with the path, the problem and the fix when the path cannot be written.
options:
  path:
    description: The file or directory on the controller.
    type: path
    required: true
  state:
    description: C(file) writes I(content) to I(path); C(directory) makes I(path) a directory.
    type: str
    choices: [file, directory]
    default: file
  content:
    description: The text of the file (UTF-8), required with C(state=file). Use C(to_nice_json) or C(to_nice_yaml) for data.
    type: str
  mode:
    description:
      - The permission bits, as a quoted octal string.
      - The default is C("0644") for a file and C("0755") for a directory.
    type: raw
  force:
    description: With C(false), an existing file is never written over (a backup of this run that is already there is kept).
    type: bool
    default: true
  verify:
    description: Read a file written now back and fail unless it holds exactly I(content) (a backup that does not read back is none).
    type: bool
    default: false
  existing_mode:
    description:
      - With C(state=directory), what happens to the mode of a directory that exists.
      - C(keep) leaves it (a directory such as C(/tmp) is not the run's own); C(set) gives it I(mode) (a directory of backups).
    type: str
    choices: [keep, set]
    default: keep
attributes:
  check_mode:
    support: full
    description: Check mode reports what would be written and writes nothing; a task with C(check_mode=false) writes.
  diff_mode:
    support: full
    description: The file's text before and after.
notes:
  - An action plugin; the file operations are in the collection's C(plugins/plugin_utils/output_files.py).
seealso:
  - module: ansible.builtin.copy
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: Create the report directory (an existing one keeps its mode)
  kubevirt_ops.rebalance.output_file:
    path: /var/lib/kubevirt-ops/reports
    state: directory
    mode: "0750"

- name: Write the JSON report
  kubevirt_ops.rebalance.output_file:
    path: /var/lib/kubevirt-ops/reports/rebalance.json
    content: "{{ report | to_nice_json }}\n"
    mode: "0644"
  check_mode: false  # the report of a dry run is its plan

- name: Write a backup, never over an existing one, and read it back
  kubevirt_ops.rebalance.output_file:
    path: /var/lib/kubevirt-ops/backups/run_configmap.yaml
    content: "{{ configmap | to_nice_yaml(indent=2) }}"
    mode: "0600"
    force: false
    verify: true
"""

RETURN = r"""
path:
  description: The file or directory.
  returned: always
  type: str
  sample: /var/lib/kubevirt-ops/reports/rebalance.json
state:
  description: C(file) or C(directory).
  returned: always
  type: str
  sample: file
mode:
  description: The mode the file or directory has (or would have in check mode), as an octal string.
  returned: always
  type: str
  sample: "0644"
existed:
  description: Whether the file was there before the task (with C(force=false) it is then left as it was).
  returned: state is file
  type: bool
  sample: false
written:
  description: Whether the file's text was written by this task.
  returned: state is file
  type: bool
  sample: true
size:
  description: The size of the file in bytes.
  returned: state is file
  type: int
  sample: 2048
created:
  description: The directories created (or that would be), outermost first.
  returned: state is directory
  type: list
  elements: str
  sample: [/var/lib/kubevirt-ops, /var/lib/kubevirt-ops/reports]
mode_before:
  description: The mode an existing file or directory had when this task changed it.
  returned: when the mode was changed
  type: str
  sample: "0755"
"""
