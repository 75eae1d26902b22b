"""Run a module of the collection in the test process, the way its `main()` does: the module's argument spec
(connection options included) with its mutually_exclusive/required_if checked and defaults filled in by
ansible-core's ArgumentSpecValidator, parsed into the module's typed options, then the one service function, with `RebalanceError` turned into the
result `fail_json` would give. Fast enough for tables of cases; the ansible runs in other tests prove that the
module files wire the same pieces."""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple, Type

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.progress_action import call_until_done
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions, module_argument_spec
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_policy as policy
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_restart
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_storm_breaker as breaker
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_cluster_maintenance as rolling
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_eviction_facts as facts
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_node_drain as drain
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import run_backup
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_cooldown as cooldown
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_verify as verify
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_wait as wait

Service = Callable[[Any, bool], Dict[str, Any]]

# module name: (its own argument spec, its typed options, its service entry, the spec's checks), as its main() passes them
MODULES: Dict[str, Tuple[dict, Type[ModuleOptions], Service, dict]] = {
    "kubevirt_eviction_facts": (facts.ARG_SPEC, facts.KubevirtEvictionFactsOptions, facts.gather_eviction_facts, {}),
    "descheduler_policy": (policy.ARG_SPEC, policy.DeschedulerPolicyOptions, policy.run, policy.SPEC_CHECKS),
    "vm_migration_verify": (verify.ARG_SPEC, verify.VmMigrationVerifyOptions, verify.run, verify.SPEC_CHECKS),
    "descheduler_run": (descheduler_run.ARG_SPEC, descheduler_run.DeschedulerRunOptions, descheduler_run.run, {}),
    "descheduler_restart": (descheduler_restart.ARG_SPEC, descheduler_restart.DeschedulerRestartOptions, descheduler_restart.run, {}),
    "vm_migration_wait": (wait.ARG_SPEC, wait.VmMigrationWaitOptions, wait.run, {}),
    "kubevirt_node_drain": (drain.ARG_SPEC, drain.KubevirtNodeDrainOptions, drain.run, {}),
    "vm_migration_cooldown": (cooldown.ARG_SPEC, cooldown.VmMigrationCooldownOptions, cooldown.run, {}),
    "descheduler_storm_breaker": (breaker.ARG_SPEC, breaker.DeschedulerStormBreakerOptions, breaker.run, {}),
    "kubevirt_cluster_maintenance": (rolling.ARG_SPEC, rolling.KubevirtClusterMaintenanceOptions, rolling.run, {}),
    "run_backup": (run_backup.ARG_SPEC, run_backup.RunBackupOptions, run_backup.run, {"required_if": run_backup.REQUIRED_IF}),
}


def call_module_once(name: str, args: dict, check_mode: bool = False) -> dict:
    """One call of the module: its return values, or `failed`, `msg` (and `error` for the collection's errors)."""
    spec, options_type, service, checks = MODULES[name]
    validator = ArgumentSpecValidator(module_argument_spec(spec), **checks)
    validated = validator.validate(dict(args))
    if validated.error_messages:
        return {"failed": True, "msg": "; ".join(validated.error_messages), "stage": "arguments"}
    try:
        result = service(options_type.from_params(validated.validated_parameters), check_mode)
    except RebalanceError as error:
        return {"failed": True, "msg": error.message, "error": error.as_dict(), "stage": "service"}
    # a service that acted and ends unfinished returns failed=True with its whole state (run_module fails the module then)
    return dict(result, failed=bool(result.get("failed")))


def call_module(name: str, args: dict, check_mode: bool = False, show=None) -> dict:
    """The task's result as Ansible gives it: the module called again by its action plugin's loop while it reports
    progress (plugins/plugin_utils/progress_action.py), each line passed to `show`."""
    return call_until_done(lambda given: call_module_once(name, given, check_mode), args, show or (lambda _line: None))


def run_service(service: Service, options_type: Type[ModuleOptions], params: dict, check_mode: bool = False, show=None) -> dict:
    """A service called with `params` (spec_params) as its module is by the action plugin's loop: again with `resume`
    while it reports progress; the collection's errors raise as they do from the service."""
    return call_until_done(lambda given: service(options_type.from_params(given), check_mode), params, show or (lambda _line: None))
