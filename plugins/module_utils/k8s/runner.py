# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place where a module meets its service: build the module, parse its options once, run, turn errors
into fail_json.

Every module of the collection has the same `main()`: kubernetes.core's auth options plus the retry options plus
its own spec, check mode supported, the module's params turned once into the service's typed options (a frozen
dataclass next to the spec, `ModuleOptions`), one service function from module_utils that takes those options and
check mode and returns the result, and the collection's exception family (`RebalanceError`) reported with its field
path, problem and fix in `error`; an error that carries a partial `result` in its details (a wait that timed out
lists what it saw) reports those keys beside `error`. A result with `failed: true` (and `msg`) fails the task with
the whole result, for services that report a partial outcome (a drain that stopped halfway says what moved and what
is left).

Defaults live only in the argument spec: `ModuleOptions.from_params` takes every field from the params the module
parsed (defaults applied; ansible-core refuses null for an option with a default), and tests build params the same
way with `spec_params`.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Dict, Type, TypeVar

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import ConnectionOptions, connection_argument_spec

OptionsT = TypeVar("OptionsT", bound="ModuleOptions")


@dataclasses.dataclass(frozen=True)
class ModuleOptions:
    """Base of every module's typed options: a field per option of the module's own spec (same name), plus
    `connection` for the connection options. Subclasses add no defaults: those are the spec's."""

    connection: ConnectionOptions

    @classmethod
    def from_params(cls: Type[OptionsT], params: Dict[str, Any]) -> OptionsT:
        """The options from a module's parsed params (every option present, defaults applied)."""
        values = {field.name: params[field.name] for field in dataclasses.fields(cls) if field.name != "connection"}
        return cls(connection=ConnectionOptions.from_params(params), **values)


def module_argument_spec(own_spec: Dict[str, Any]) -> Dict[str, Any]:
    """The connection options followed by a deep copy of the module's own options."""
    spec = connection_argument_spec()
    spec.update(copy.deepcopy(own_spec))
    return spec


def spec_params(own_spec: Dict[str, Any], **given: Any) -> Dict[str, Any]:
    """Params as the module would parse them when only `given` is set: every option of the connection spec and
    `own_spec` with its spec default (None without one), then `given`. For tests and for callers inside the
    collection that build another module's options, so that no default is written twice."""
    params = {name: copy.deepcopy(option.get("default")) for name, option in module_argument_spec(own_spec).items()}
    unknown = sorted(set(given) - set(params))
    if unknown:
        raise KeyError("not options of this spec: {0}".format(", ".join(unknown)))
    params.update(given)
    return params


def run_module(own_spec: Dict[str, Any], options_type: Type[ModuleOptions], service: Callable[[Any, bool], Dict[str, Any]],
               **module_kwargs: Any) -> None:
    """Build the module, parse its params into `options_type`, call `service(options, check_mode)` and exit with
    its result or the error."""
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule  # only a module run needs it

    # No dependency checks: each imports the whole kubernetes package (kubernetes.core's gather_versions), a third of a
    # module's CPU, which the native client does not need; the fallback to kubernetes.core's client says itself when
    # the kubernetes package is missing, and a kubeconfig file without PyYAML goes to that fallback.
    module = AnsibleK8SModule(argument_spec=module_argument_spec(own_spec), supports_check_mode=True, check_k8s=False, check_pyyaml=False,
                              **module_kwargs)
    try:
        result = service(options_type.from_params(module.params), module.check_mode)
    except RebalanceError as error:
        details = error.as_dict()
        module.fail_json(msg=error.message, error=details, **(details.pop("result", None) or {}))
    if result.pop("failed", False):  # a service that acted and ends unfinished reports its whole state with the failure
        module.fail_json(**result)
    module.exit_json(**result)
