"""The failure summaries as Jinja sees them: module results shaped by the collection's own code (drain_plan's problems,
the error classes' `as_dict`) turned into a few short lines, per VM the reason and the variable that fixes it, then
where the full result is."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubevirt_ops.rebalance.plugins.filter.failure_summary import LINE_WIDTH, FilterModule
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import drain_plan as plan
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, RunFailed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import PolicyInvalid
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_wait import MigrationsUnfinished

FILTERS = FilterModule().filters()
ROLE_VARIABLES = {
    "allow_loss": ["node_maintenance_allow_loss", "maintenance_allow_loss"],
    "allow_shutdown": ["node_maintenance_allow_shutdown", "maintenance_allow_shutdown"],
    "allow_blocked": ["node_maintenance_allow_blocked", "maintenance_allow_blocked"],
    "require_capacity": ["node_maintenance_require_capacity"],
    "timeout": ["node_maintenance_timeout", "maintenance_timeout"],
}
SHUTDOWN = "the launcher Pod is deleted and the VM shuts down; "
POLICY = {"allow_shutdown": False, "allow_loss": False, "allow_blocked": False, "require_capacity": True}


def vm(name, action, reason, blocked_message=None, live_migratable=True, pdbs=()):
    """One VM of the preflight, as drain_plan.vm_plan returns it (the fields the summary reads)."""
    return {"namespace": "vms", "name": name, "action": action, "reason": reason, "blocked_message": blocked_message,
            "live_migratable": live_migratable, "pdbs": list(pdbs), "requests": {"memory": 512, "cpu": 10, "pods": 1}}


def maintenance_vms():
    """The maintenance scenario's refused VMs on worker-1, with the verdicts' words."""
    return [vm("bare-vmi", "lost", SHUTDOWN + "the VMI has no VirtualMachine or replica set, so nothing starts it again"),
            vm("vm-live", "live_migrate", "evictionStrategy LiveMigrate on a live-migratable VMI"),
            vm("vm-none", "restart", SHUTDOWN + "VirtualMachine vm-none with runStrategy Always starts it again on another node"),
            vm("vm-rwo", "blocked", "evictionStrategy LiveMigrate on a VMI that is not live-migratable",
               blocked_message=kv.WEBHOOK_DENIED + kv.NOT_MIGRATABLE.format(name="vm-rwo"), live_migratable=False)]


def refused(vms, pods=None, room=None, **policy):
    """A refused preflight as kubevirt_node_drain returns it, with drain_plan's own problems."""
    pods = pods or {"refused": []}
    room = room or {"fits": True, "nodes": ["worker-2", "worker-3"], "unplaced": []}
    preflight = {"vms": vms, "pods": pods, "capacity": room, "problems": plan.problems(vms, pods, room, **dict(POLICY, **policy))}
    return {"node": "worker-1", "changed": False, "drained": False, "preflight": preflight,
            "msg": "Preflight refused to drain worker-1, nothing was changed: " + " | ".join(p["message"] for p in preflight["problems"])}


def assert_short(lines):
    assert all(len(line) <= LINE_WIDTH and "\n" not in line for line in lines), lines


def test_filters_are_registered():
    assert set(FILTERS) == {"failure_lines", "module_failure_lines", "drain_failure_lines", "left_on_node_lines",
                            "verify_failure_lines", "preflight_failure_lines"}


# ------------------------------------------------------------------------------------------ kubevirt_node_drain
def test_refused_preflight_names_each_vm_with_its_reason_and_the_variable_to_set():
    lines = FILTERS["drain_failure_lines"](refused(maintenance_vms()), ROLE_VARIABLES, full="node_maintenance_preflight",
                                           report="/r/node-maintenance-worker-1.json")
    assert lines[0] == "Preflight refused to drain worker-1, nothing was changed:"
    assert lines[1] == ("- vms/bare-vmi: would be shut down and never started again (the VMI has no VirtualMachine or replica set, so "
                        "nothing starts it again). Fix: stop it yourself, or set node_maintenance_allow_loss: true (playbook: "
                        "maintenance_allow_loss).")
    assert lines[2].startswith("- vms/vm-none: would be shut down and started again elsewhere (evictionStrategy None: a restart, not a live "
                               "migration). Fix: set evictionStrategy LiveMigrate on it, or set node_maintenance_allow_shutdown: true "
                               "(playbook: maintenance_allow_shutdown)")
    # KubeVirt's words without the webhook's prefix; the fix for storage that cannot follow the VM
    assert lines[3] == ("- vms/vm-rwo: VMI vm-rwo is configured with an eviction strategy but is not live-migratable. Fix: storage the "
                        "other nodes can use (RWX) for live migration, or set node_maintenance_allow_blocked: true (playbook: "
                        "maintenance_allow_blocked) to leave it on the cordoned node.")
    assert lines[4:] == ["Full result: node_maintenance_preflight (-v prints it); /r/node-maintenance-worker-1.json"]
    assert not any("vm-live" in line for line in lines)
    assert_short(lines)


def test_a_pdb_refusal_names_the_pdb_fix_and_capacity_names_the_nodes_and_require_capacity():
    vms = [vm("pool-a", "blocked", "PodDisruptionBudget pool-pdb allows no disruption", blocked_message=kv.PDB_VIOLATION, pdbs=["pool-pdb"]),
           vm("web", "live_migrate", "migrates")]
    room = {"fits": False, "nodes": ["worker-2"], "unplaced": ["vms/web"]}
    lines = FILTERS["drain_failure_lines"](refused(vms, room=room), ROLE_VARIABLES)
    assert lines[1] == ("- vms/pool-a: Cannot evict pod as it would violate the pod's disruption budget. Fix: a PDB that allows a disruption "
                        "(an integer minAvailable), or set node_maintenance_allow_blocked: true (playbook: maintenance_allow_blocked) to "
                        "leave it on the cordoned node.")
    assert lines[2] == ("- vms/web: the other schedulable nodes (worker-2) cannot hold it by requests. Fix: add or uncordon a node, or set "
                        "node_maintenance_require_capacity: false.")
    assert len(lines) == 3  # without full or report there is no "Full result" line


def test_refused_pods_keep_kubectl_drains_reasons_and_without_variables_the_module_options_are_named():
    pods = {"refused": [{"pod": "apps/debug", "reason": plan.UNMANAGED_REFUSED}]}
    lines = FILTERS["drain_failure_lines"](refused([vm("bare", "lost", "nothing starts it again")], pods=pods))
    assert lines[1] == "- vms/bare: would be shut down and never started again (nothing starts it again). Fix: stop it yourself, or " \
                       "set allow_loss: true."
    assert lines[2] == "- apps/debug: " + plan.UNMANAGED_REFUSED


def test_many_refused_vms_end_with_how_many_more():
    vms = [vm("vm-{0}".format(index), "lost", "nothing starts it again") for index in range(9)]
    lines = FILTERS["drain_failure_lines"](refused(vms), ROLE_VARIABLES, full="node_maintenance_preflight")
    assert len(lines) == 1 + 6 + 1 + 1 and lines[7] == "- ... and 3 more"
    assert [line.split(":")[0] for line in lines[1:7]] == ["- vms/vm-{0}".format(index) for index in range(6)]


def test_a_drain_that_did_not_finish_lists_the_failed_and_timed_out_vms_with_their_fix():
    result = {"node": "worker-1", "drained": False, "moved": ["vms/vm-a", "vms/vm-b"], "left": ["vms/vm-live", "vms/vm-rwo"],
              "resume": "Node worker-1 stays cordoned. Run the task again to continue.",
              "vms": [{"namespace": "vms", "name": "vm-a", "result": "migrated", "reason": None},
                      {"namespace": "vms", "name": "vm-rwo", "result": "blocked", "reason": "not live-migratable"},
                      {"namespace": "vms", "name": "vm-live", "result": "failed",
                       "reason": "migration m-1 failed: " + "Live migration failed error encountered during MigrateToURI3 " * 4},
                      {"namespace": "vms", "name": "vm-slow", "result": "timeout", "reason": "still migrating at the timeout"}],
              "pods": [{"namespace": "apps", "name": "web", "result": "timeout", "reason": "a PodDisruptionBudget still refuses the eviction"}]}
    lines = FILTERS["drain_failure_lines"](result, ROLE_VARIABLES, full="node_maintenance_drain")
    assert lines[0] == "Drain of worker-1 did not finish; worker-1 stays cordoned:"
    # a long KubeVirt reason is cut so that the fix stays on the line
    assert lines[1].startswith("- vms/vm-live: failed: migration m-1 failed: Live migration") and " [...]. Fix: the cause, then run again" in lines[1]
    assert lines[2] == "- vms/vm-slow: timeout: still migrating at the timeout. Fix: raise node_maintenance_timeout (playbook: " \
                       "maintenance_timeout), or run again to continue."
    assert lines[3].startswith("- apps/web (Pod): timeout: a PodDisruptionBudget still refuses the eviction. Fix: raise node_maintenance_timeout")
    assert lines[4] == "Moved: 2 VM(s); still on the node: vms/vm-live, vms/vm-rwo. Run again to continue, or uncordon worker-1 to give up."
    assert lines[5] == "Full result: node_maintenance_drain (-v prints it)"
    assert_short(lines)


def test_a_drain_error_is_the_errors_field_problem_and_fix():
    error = ApiFailure("evict vms/virt-launcher-vm-live-x", 403, "Forbidden",
                       'pods "virt-launcher-vm-live-x" is forbidden: User "reduced" cannot create resource "pods/eviction" in API group "" '
                       'in the namespace "vms"')
    lines = FILTERS["drain_failure_lines"]({"node": "worker-1", "msg": error.message, "error": error.as_dict()}, ROLE_VARIABLES)
    assert lines[0] == "Drain of worker-1 failed:"
    assert lines[1].startswith("- evict vms/virt-launcher-vm-live-x: 403 Forbidden: ") and 'cannot create resource "pods/eviction"' in lines[1]
    assert lines[2].startswith('Fix: Grant the user verb "create" on resource "pods/eviction"')


def test_vmis_left_on_the_node_are_listed_with_the_fix():
    result = {"node": "worker-1", "safe_to_shutdown": {"safe": False, "vmis": ["vms/vm-rwo"]}}
    assert FILTERS["left_on_node_lines"](result, ROLE_VARIABLES, full="node_maintenance_safe") == [
        "worker-1 is not safe to shut down: 1 VMI(s) still run on it:", "- vms/vm-rwo: still runs on worker-1",
        "Fix: move or stop them, or set node_maintenance_allow_blocked: true (playbook: maintenance_allow_blocked) to accept VMs left on "
        "the cordoned node.", "Full result: node_maintenance_safe (-v prints it)"]
    assert FILTERS["left_on_node_lines"]({"node": "worker-1", "msg": "boom"})[:2] == ["Checking what is left on worker-1 failed:", "- boom"]


# ------------------------------------------------------------------------------------------ vm_migration_verify
def verified(*vms, min_moved=1):
    """A vm_migration_verify result that did not pass (passed, failed_vms and counts as migration.finish makes them)."""
    moved = sum(1 for v in vms if v["verdict"] == "pass")
    failed = [v for v in vms if v["verdict"] in ("fail", "timeout") or (moved < min_moved and v["verdict"] == "not_moved")]
    return {"passed": False, "failed_vms": ["{0}/{1}".format(v["namespace"], v["name"]) for v in failed],
            "counts": {"vms": len(vms), "moved": moved, "min_moved": min_moved, "failed": len(failed)}, "vms": list(vms)}


def verdict(name, value, reason=None):
    return {"namespace": "desched-test", "name": name, "verdict": value, "reason": reason}


VALIDATE_VARIABLES = {"timeout": ["rebalance_validate_timeout", "rebalance_timeout"],
                      "min_moved": ["rebalance_validate_min_moved", "rebalance_min_moved"]}
LIBVIRT = ("migration m-1 failed: Live migration failed error encountered during MigrateToURI3 libvirt api call: virError(Code=1, "
           "Domain=10, Message='operation failed: migration out job: simulated failure (kubesim.io/migration=fail)')")


def test_verification_lists_the_vms_that_failed_first_with_their_verdict_and_reason():
    result = verified(verdict("vm-0", "not_moved", "not moved before the timeout: the VMI still runs on its baseline node worker-a"),
                      verdict("vm-1", "fail", LIBVIRT), verdict("vm-2", "pass"),
                      verdict("vm-3", "timeout", "timed out with node_changed open"), min_moved=2)
    lines = FILTERS["verify_failure_lines"](result, "Rebalance validation failed in cycle 1", VALIDATE_VARIABLES, full="v", report="/e/v.json")
    assert lines == [
        "Rebalance validation failed in cycle 1: 3 of 4 VM(s) did not pass the checks (moved 1, at least 2):",
        # KubeVirt's reason with libvirt's wrapper reduced to libvirt's message
        "- desched-test/vm-1: fail: migration m-1 failed: Live migration failed: operation failed: migration out job: simulated failure "
        "(kubesim.io/migration=fail).",
        "- desched-test/vm-3: timeout: timed out with node_changed open. Fix: raise rebalance_validate_timeout (playbook: rebalance_timeout).",
        "- desched-test/vm-0: not_moved: not moved before the timeout: the VMI still runs on its baseline node worker-a.",
        "Full result: v (-v prints it); /e/v.json"]
    # an error instead of verdicts is summed up as an error
    assert FILTERS["verify_failure_lines"]({"msg": "no VM"}, "Verification failed.") == ["Verification failed:", "- no VM"]


def test_too_few_moves_without_a_failed_vm_names_the_min_moved_variable():
    result = verified(verdict("vm-1", "not_moved", "not moved: the VMI still runs on its baseline node worker-a"))
    lines = FILTERS["verify_failure_lines"](result, "Verification failed", VALIDATE_VARIABLES)
    assert lines[1:] == ["- desched-test/vm-1: not_moved: not moved: the VMI still runs on its baseline node worker-a.",
                         "Fix: fewer VMs moved than required: lower rebalance_validate_min_moved (playbook: rebalance_min_moved) if fewer "
                         "moves are expected."]


# ------------------------------------------------------------------------------------------ any module
def test_each_policy_problem_names_the_variable_that_renders_its_field():
    error = PolicyInvalid([
        {"path": "profiles[0].pluginConfig[1].args.thresholds.cpu", "problem": "thresholds' cpu percentage is greater than targetThresholds'",
         "fix": "Lower thresholds.cpu (80) below targetThresholds.cpu (70)."},
        {"path": "profiles[0].name", "problem": "no profile", "fix": None}])
    result = {"msg": error.message, "error": error.as_dict(), "changed": False}
    variables = {"thresholds": ["descheduler_rebalance_thresholds", "rebalance_thresholds"]}
    lines = FILTERS["module_failure_lines"](result, "The policy was refused:", variables, full="descheduler_rebalance_planned")
    assert lines == [
        "The policy was refused:",
        "- profiles[0].pluginConfig[1].args.thresholds.cpu (from descheduler_rebalance_thresholds; playbook: rebalance_thresholds): "
        "thresholds' cpu percentage is greater than targetThresholds'. Fix: Lower thresholds.cpu (80) below targetThresholds.cpu (70).",
        "- profiles[0].name: no profile.",
        "Full result: descheduler_rebalance_planned (-v prints it)"]


def test_a_failed_run_lists_the_descheduler_error_lines_and_the_fix():
    run = {"errors": ['E0101 descheduler.go:1 "Failed to run descheduler" err="only Exclude namespaces can be set, inclusion is not '
                      'supported"'], "totals": None}
    error = RunFailed("Job descheduler/x failed: " + run["errors"][0], "Fix the policy in ConfigMap descheduler/descheduler.",
                      path="descheduler run", run=run)
    lines = FILTERS["module_failure_lines"]({"msg": error.message, "error": error.as_dict()}, "The run failed:")
    assert lines[1].startswith('- E0101 descheduler.go:1 "Failed to run descheduler" err="only Exclude namespaces can be set')
    assert lines[2] == "Fix: Fix the policy in ConfigMap descheduler/descheduler."


def test_a_wait_that_timed_out_lists_the_unfinished_migrations_and_names_the_timeout_variable():
    migrations = [{"namespace": "ns", "name": "m-1", "vmi": "vm-1", "phase": "Running", "final": False},
                  {"namespace": "ns", "name": "m-2", "vmi": "vm-2", "phase": "Succeeded", "final": True}]
    error = MigrationsUnfinished("1 of 2 migrations still unfinished after 60s: ns/m-1 (Running, VMI vm-1)",
                                 "Wait longer (raise timeout), or look at them with `kubectl get vmim -A`.", path="timeout")
    variables = {"timeout": ["descheduler_rollback_timeout", "rollback_timeout"]}
    lines = FILTERS["module_failure_lines"]({"msg": error.message, "error": error.as_dict(), "migrations": migrations}, "Waited:", variables)
    assert lines == ["Waited:", "- timeout (from descheduler_rollback_timeout; playbook: rollback_timeout): 1 of 2 migrations still unfinished "
                     "after 60s", "- ns/m-1 (VMI vm-1): Running",
                     "Fix: Wait longer (raise timeout), or look at them with `kubectl get vmim -A`."]


def test_a_failure_of_another_collection_is_its_message_line_by_line():
    lines = FILTERS["module_failure_lines"]({"msg": "Resource creation timed out\n", "result": {"kind": "Pod"}}, "The probe failed:", full="p")
    assert lines == ["The probe failed:", "- Resource creation timed out", "Full result: p (-v prints it)"]
    assert FILTERS["module_failure_lines"]({}, "x")[1] == "- the module failed without a message"


def test_input_that_is_not_a_result_is_refused():
    calls = [lambda: FILTERS["module_failure_lines"]("failed", "title"), lambda: FILTERS["drain_failure_lines"]("failed"),
             lambda: FILTERS["left_on_node_lines"]("failed"), lambda: FILTERS["verify_failure_lines"]("failed")]
    for call in calls:
        with pytest.raises(AnsibleFilterError, match="expects a registered module result"):
            call()
    with pytest.raises(AnsibleFilterError, match="expects a list of items"):
        FILTERS["failure_lines"]("one string", "title")


# ------------------------------------------------------------------------------------------ any list, the preflight
def test_failure_lines_cut_long_items_and_count_what_is_left_out():
    lines = FILTERS["failure_lines"](["x" * 500, "second\nline", None, ""], "Title:", limit=1, fix="do this.", note="a note")
    assert lines[0] == "Title:" and lines[1].endswith(" [...]") and len(lines[1]) == 2 + LINE_WIDTH
    assert lines[2:] == ["- ... and 1 more", "a note", "Fix: do this."]


def test_preflight_problems_take_two_lines_each_with_the_fix_whole():
    fix = ("The installed package predates the change: upgrade the Alauda Container Platform Descheduler plugin (a package newer than "
           "v0.36.0-4). Do not hand-edit the generated CronJob or Deployment: the chart reconciles it.")
    problem = {"code": "feature_gate_missing", "text": "CronJob descheduler/descheduler: --feature-gates=EvictionsInBackground=true is not "
               "rendered (observed: [--v=3]). Fix: " + fix}
    lines = FILTERS["preflight_failure_lines"]([problem] * 4, full="descheduler_preflight_result")
    assert lines[:3] == ["Preflight: 4 prerequisite(s) of the Descheduler VM rebalance missing:",
                         "1. CronJob descheduler/descheduler: --feature-gates=EvictionsInBackground=true is not rendered (observed: [--v=3])",
                         "   Fix: " + fix]
    assert lines[7:] == ["... and 1 more", "Full result: descheduler_preflight_result (-v prints it)"]
    with pytest.raises(AnsibleFilterError, match="problems list"):
        FILTERS["preflight_failure_lines"]({"code": "x"})
