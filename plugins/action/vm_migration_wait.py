# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vm_migration_wait with progress lines while it waits (plugins/plugin_utils/progress_action.py)."""

from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.progress_action import ProgressActionModule


class ActionModule(ProgressActionModule):
    """The module, called again until its wait is done, its lines shown as they come."""
