# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the modules that wait and print progress while they do (plugins/module_utils/progress.py)."""

from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    """Progress lines while waiting, and the state passed between the calls of one task."""

    DOCUMENTATION = r"""
options:
  progress_every:
    description:
      - While it waits, the task prints a line for each VM (or Pod, or run) as it finishes, and a status line of what is still
        awaited at least every I(progress_every) seconds, in the terminal and in AWX job output.
      - The module returns to the controller that often; the collection's action plugin of the same name prints the lines and
        calls the module again, going on from where it was, until the work is done or the I(timeout). The task's result is
        the same as one call's, with the lines in RV(progress).
      - C(0) waits in one call and prints nothing until the end.
      - While the run holds the cluster's run lease (the collection's playbooks), the action plugin renews it between the calls and
        lowers I(progress_every) to a third of the lease's duration when it is longer or C(0) (see M(kubevirt_ops.rebalance.run_lease)).
    type: int
    default: 25
  resume:
    description:
      - The state one call of the task hands to the next; set by the action plugin. Leave it unset.
    type: dict
"""
