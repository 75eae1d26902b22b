# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place where a module meets its service: build the module, run, turn errors into fail_json.

Every module of the collection has the same `main()`: kubernetes.core's auth options plus the retry
options plus its own spec, check mode supported, one service function from module_utils that takes the
module's parameters (and check mode) and returns the result, and the collection's exception family
(`RebalanceError`) reported with its field path, problem and fix in `error`; an error that carries a partial
`result` in its details (a wait that timed out lists what it saw) reports those keys beside `error`. A result
with `failed: true` (and `msg`) fails the task with the whole result, for services that report a partial outcome
(a drain that stopped halfway says what moved and what is left).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict

from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import connection_argument_spec
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError


def module_argument_spec(own_spec: Dict[str, Any]) -> Dict[str, Any]:
    """The connection options followed by a deep copy of the module's own options."""
    spec = connection_argument_spec()
    spec.update(copy.deepcopy(own_spec))
    return spec


def run_module(own_spec: Dict[str, Any], service: Callable[[Dict[str, Any], bool], Dict[str, Any]], **module_kwargs: Any) -> None:
    """Build the module, call `service(params, check_mode)` and exit with its result or the error."""
    module = AnsibleK8SModule(argument_spec=module_argument_spec(own_spec), supports_check_mode=True, **module_kwargs)
    try:
        result = service(module.params, module.check_mode)
    except RebalanceError as error:
        details = error.as_dict()
        module.fail_json(msg=error.message, error=details, **(details.pop("result", None) or {}))
    if result.pop("failed", False):  # a service that acted and ends unfinished reports its whole state with the failure
        module.fail_json(**result)
    module.exit_json(**result)
