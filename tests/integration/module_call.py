"""Run a module of the collection in the test process, the way its `main()` does: the module's argument spec
(connection options included) with its mutually_exclusive/required_if checked and defaults filled in by
ansible-core's ArgumentSpecValidator, then the one service function, with `RebalanceError` turned into the
result `fail_json` would give. Fast enough for tables of cases; the ansible runs in other tests prove that the
module files wire the same pieces."""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_run import RUN_ARG_SPEC, run as run_descheduler
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import DRAIN_ARG_SPEC, run as drain_run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_eviction_facts import FACTS_ARG_SPEC, gather_eviction_facts
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_wait import WAIT_ARG_SPEC, wait
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import module_argument_spec
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_policy import (
    POLICY_ARG_SPEC,
    POLICY_MUTUALLY_EXCLUSIVE,
    POLICY_REQUIRED_IF,
    run as policy_run,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_verify import VERIFY_ARG_SPEC, record, verify

Service = Callable[[Dict[str, Any], bool], Dict[str, Any]]

MODULES: Dict[str, Tuple[dict, Service, dict]] = {
    "kubevirt_eviction_facts": (FACTS_ARG_SPEC, lambda params, check: gather_eviction_facts(params), {}),
    "descheduler_policy": (POLICY_ARG_SPEC, policy_run,
                           {"mutually_exclusive": [list(m) for m in POLICY_MUTUALLY_EXCLUSIVE],
                            "required_if": [list(r) for r in POLICY_REQUIRED_IF]}),
    "vm_migration_verify": (VERIFY_ARG_SPEC, lambda params, check: record(params) if params["mode"] == "record" else verify(params),
                            {"required_if": [["mode", "verify", ["baseline"]]]}),
    "descheduler_run": (RUN_ARG_SPEC, lambda params, check: run_descheduler(params, check_mode=check), {}),
    "vm_migration_wait": (WAIT_ARG_SPEC, lambda params, check: wait(params), {}),
    "kubevirt_node_drain": (DRAIN_ARG_SPEC, drain_run, {}),
}


def call_module(name: str, args: dict, check_mode: bool = False) -> dict:
    """The module's result: its return values, or `failed`, `msg` (and `error` for the collection's errors)."""
    spec, service, checks = MODULES[name]
    validator = ArgumentSpecValidator(module_argument_spec(spec), **checks)
    validated = validator.validate(dict(args))
    if validated.error_messages:
        return {"failed": True, "msg": "; ".join(validated.error_messages), "stage": "arguments"}
    try:
        result = service(validated.validated_parameters, check_mode)
    except RebalanceError as error:
        return {"failed": True, "msg": error.message, "error": error.as_dict(), "stage": "service"}
    # a service that acted and ends unfinished returns failed=True with its whole state (run_module fails the module then)
    return dict(result, failed=bool(result.get("failed")))
