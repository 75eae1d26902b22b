"""The five pass criteria, the trigger classification and the overall outcome, on upstream-shaped objects."""
from __future__ import annotations

import copy

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import klog
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import migration as mc

from .. import k8s_objects as k

ENTRY = {"namespace": "desched-test", "name": "vm-a", "uid": "uid-vm-a", "node": "worker-a", "launcher": "virt-launcher-vm-a-abcde",
         "recorded_at": None}


def moved_vmi(**extra):
    return k.vmi(node="worker-b", **extra)


def running_vm(ready=True):
    obj = k.vm()
    obj["status"] = {"printableStatus": "Running", "ready": ready}
    return obj


def succeeded(name="kubevirt-evacuation-abcde", created="2026-11-30T22:11:23Z", **extra):
    obj = k.vmim(name, phase="Succeeded", created=created, **extra)
    obj["status"]["phaseTransitionTimestamps"] = [{"phase": "Pending", "phaseTransitionTimestamp": "2026-11-30T22:11:23Z"},
                                                  {"phase": "Succeeded", "phaseTransitionTimestamp": "2026-11-30T22:11:33Z"}]
    return obj


def failed(reason="Live migration failed: target virt-handler not ready"):
    obj = k.vmim("kubevirt-evacuation-abcde", phase="Failed")
    obj["status"]["migrationState"]["failureReason"] = reason
    obj["status"]["migrationState"]["failed"] = True
    return obj


def result_of(vmi, vm=None, vmims=(), pods=(), **kwargs):
    return mc.evaluate(ENTRY, vmi, vm if vm is not None else running_vm(), list(vmims), list(pods), **kwargs)


# ------------------------------------------------------------------------------------------ criteria
def test_all_five_hold_is_a_pass():
    result = result_of(moved_vmi(), vmims=[succeeded()])
    assert result["verdict"] == "pass" and result["open_checks"] == [] and result["reason"] is None
    assert result["migration"]["duration_seconds"] == 10.0
    assert result["migration"]["phase_timestamps"]["Succeeded"] == "2026-11-30T22:11:33Z"


def test_1_still_on_the_baseline_node_is_open():
    check = mc.check_node_changed(ENTRY, k.vmi())
    assert check["result"] == "open" and "worker-a" in check["reason"]
    assert mc.check_node_changed(ENTRY, moved_vmi())["result"] == "pass"


def test_2_migration_must_succeed_between_the_expected_nodes():
    assert mc.check_migration_succeeded(ENTRY, moved_vmi(), None)["result"] == "open"
    assert mc.check_migration_succeeded(ENTRY, moved_vmi(), k.vmim("m", phase="Running"))["result"] == "open"
    wrong_source = mc.check_migration_succeeded(ENTRY, k.vmi(node="worker-c"), succeeded(source="worker-b", target="worker-c"))
    assert wrong_source["result"] == "fail" and "not from the baseline node worker-a" in wrong_source["reason"]
    wrong_target = mc.check_migration_succeeded(ENTRY, k.vmi(node="worker-c"), succeeded())
    assert wrong_target["result"] == "fail" and "runs on worker-c" in wrong_target["reason"]
    not_yet = mc.check_migration_succeeded(ENTRY, k.vmi(), succeeded())  # the VMI's update arrives after the migration's
    assert not_yet["result"] == "open"


def test_2_a_failed_migration_fails_at_once_with_its_reason():
    result = result_of(k.vmi(), vmims=[failed()])
    assert result["verdict"] == "fail" and result["failed_checks"] == ["migration_succeeded"]
    assert "target virt-handler not ready" in result["reason"]
    assert mc.decided([result], 1)
    retried = result_of(k.vmi(), vmims=[failed(), k.vmim("kubevirt-evacuation-zzzzz", phase="Pending", created="2026-11-30T10:06:00Z")])
    assert retried["verdict"] == "fail" and retried["migration"]["name"] == "kubevirt-evacuation-abcde"


def test_migrations_before_the_baseline_do_not_count():
    entry = dict(ENTRY, recorded_at="2026-11-30T22:00:00Z")
    old = failed()  # created 10:05
    assert mc.evaluate(entry, k.vmi(), running_vm(), [old], [])["migration"] is None


def test_the_migration_that_brought_the_vmi_into_its_recorded_launcher_does_not_count():
    # a baseline recorded within the slack of the last cycle's migration: its whole-second creationTimestamp is not
    # "before the record", but its target Pod is the launcher the baseline found the VMI in
    entry = dict(ENTRY, node="worker-b", recorded_at="2026-11-30T22:11:24Z")
    last_cycle = succeeded(source="worker-a", target="worker-b")
    last_cycle["status"]["migrationState"]["targetPod"] = ENTRY["launcher"]
    assert mc.relevant_migrations(entry, [last_cycle]) == []
    assert mc.evaluate(entry, k.vmi(node="worker-b"), running_vm(), [last_cycle], [])["migration"] is None
    another = copy.deepcopy(last_cycle)
    another["status"]["migrationState"]["targetPod"] = "virt-launcher-vm-a-fghij"
    assert mc.relevant_migrations(entry, [another]) == [another]


def test_3_a_new_uid_is_a_restart():
    restarted = k.vmi(uid="uid-new")
    result = result_of(restarted)
    assert result["verdict"] == "fail" and "uid_unchanged" in result["failed_checks"]
    assert "restarted, not migrated" in result["reason"] and result["moving"]
    stopped = mc.check_uid_unchanged(ENTRY, k.vmi(phase="Failed"))
    assert stopped["result"] == "fail" and "phase Failed" in stopped["reason"]
    assert mc.check_uid_unchanged(ENTRY, None)["result"] == "open"


def test_4_running_and_ready():
    assert mc.check_running_ready(running_vm(), moved_vmi())["result"] == "pass"
    assert mc.check_running_ready(running_vm(ready=False), moved_vmi())["result"] == "open"
    bare = moved_vmi()
    assert mc.check_running_ready(None, bare)["result"] == "pass"
    bare["status"]["conditions"][0]["status"] = "False"
    assert mc.check_running_ready(None, bare)["result"] == "open"


def test_5_the_old_launcher_must_be_gone():
    old = k.launcher(k.vmi())
    assert mc.check_old_launcher_gone(ENTRY, [old])["result"] == "open"
    terminating = copy.deepcopy(old)
    terminating["metadata"]["deletionTimestamp"] = "2026-11-30T22:11:34Z"
    assert "terminating" in mc.check_old_launcher_gone(ENTRY, [terminating])["reason"]
    assert mc.check_old_launcher_gone(ENTRY, [k.launcher(k.vmi(), phase="Succeeded")])["result"] == "pass"
    target = k.launcher(moved_vmi(), name="virt-launcher-vm-a-zzzzz")
    assert mc.check_old_launcher_gone(ENTRY, [target])["result"] == "pass"
    without_name = dict(ENTRY, launcher=None)
    assert mc.check_old_launcher_gone(without_name, [old])["result"] == "open"
    assert mc.check_old_launcher_gone(without_name, [target])["result"] == "pass"


# ------------------------------------------------------------------------------------------ trigger
def test_trigger_descheduler_while_in_flight():
    vmi = k.vmi()
    vmi["metadata"]["annotations"] = {"kubevirt.io/eviction-source": "descheduler"}
    result = result_of(vmi, vmims=[k.vmim("kubevirt-evacuation-abcde")])
    assert result["trigger"] == "descheduler"


def test_trigger_descheduler_after_completion_from_the_log():
    line = 'I1130 22:11:23.400000       1 evictions.go:221] "Eviction in background assumed" pod="desched-test/virt-launcher-vm-a-abcde"'
    records = klog.parse_lines([line], year=2026)
    result = result_of(moved_vmi(), vmims=[succeeded()], log_records=records, require_trigger="descheduler")
    assert result["trigger"] == "descheduler" and result["descheduler_log"] == [line]
    assert result["verdict"] == "pass"
    late = result_of(moved_vmi(), vmims=[succeeded(created="2026-11-30T22:30:00Z")], log_records=records)
    # a line far from the migration is no evidence, and neither of a drain: unknown (was "drain" before issue 28)
    assert late["trigger"] == "unknown" and late["descheduler_log"] == []


def cordoned(name="worker-a", taint=None):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}
    if taint:
        node["spec"]["taints"] = [{"key": taint, "effect": "NoSchedule"}]
    else:
        node["spec"]["unschedulable"] = True
    return node


def test_trigger_drain_only_with_evidence_of_a_drain_and_manual():
    seen = {"worker-a": mc.drain_evidence(cordoned())}
    drained = result_of(moved_vmi(), vmims=[succeeded()], drain_seen=seen, require_trigger="drain")
    assert drained["trigger"] == "drain" and drained["verdict"] == "pass"
    assert drained["trigger_reason"] == "an evacuation while node worker-a is cordoned (spec.unschedulable)"
    # a drain of another node is no evidence for this one
    assert result_of(moved_vmi(), vmims=[succeeded()], drain_seen={"worker-b": seen["worker-a"]})["trigger"] == "unknown"
    manual = succeeded(name="my-migration", evacuation=False)
    assert result_of(moved_vmi(), vmims=[manual])["trigger"] == "manual"
    assert result_of(k.vmi())["trigger"] is None


def test_drain_evidence_is_a_cordon_or_a_drain_taint():
    assert mc.drain_evidence(cordoned()) == "node worker-a is cordoned (spec.unschedulable)"
    assert mc.drain_evidence(cordoned(taint="kubevirt.io/drain")) == "node worker-a has the taint kubevirt.io/drain:NoSchedule"
    assert "node.kubernetes.io/unschedulable" in mc.drain_evidence(cordoned(taint="node.kubernetes.io/unschedulable"))
    assert mc.drain_evidence(cordoned(taint="example.com/other")) is None
    assert mc.drain_evidence({"metadata": {"name": "worker-a"}, "spec": {}}) is None
    assert mc.drain_evidence(None) is None   # the node is gone


def test_an_evacuation_whose_evidence_is_gone_is_unknown_with_the_reason_never_drain():
    """The descheduler's Job deleted by its history limit while the watch was cut: no eviction-source seen, no log line,
    the node not cordoned. Before issue 28 this was reported as drain."""
    gone = result_of(moved_vmi(), vmims=[succeeded()])
    assert gone["trigger"] == "unknown" and gone["verdict"] == "pass"   # the move itself is proven; only its trigger is not
    assert "no evidence left" in gone["trigger_reason"] and "worker-a" in gone["trigger_reason"]
    assert "not taken for a drain" in gone["trigger_reason"]
    for required in ("drain", "descheduler"):
        result = result_of(moved_vmi(), vmims=[succeeded()], require_trigger=required)
        assert result["trigger"] == "unknown" and result["verdict"] == "fail" and result["failed_checks"] == ["trigger"]
        assert result["checks"]["trigger"]["reason"].startswith("the trigger is unknown, not proven to be the " + required)
        assert "no evidence left" in result["reason"]


def test_required_trigger_mismatch_fails_once_finished():
    seen = {"worker-a": mc.drain_evidence(cordoned())}
    result = result_of(moved_vmi(), vmims=[succeeded()], require_trigger="descheduler", drain_seen=seen)
    assert result["verdict"] == "fail" and result["failed_checks"] == ["trigger"]
    assert result["checks"]["trigger"]["reason"] == "triggered by drain, not by the descheduler"
    in_flight = result_of(k.vmi(), vmims=[k.vmim("kubevirt-evacuation-abcde")], require_trigger="descheduler")
    assert in_flight["checks"]["trigger"]["result"] == "open"


def test_a_finished_evacuation_without_a_readable_log_keeps_its_trigger_open():
    """No line from a log that could not be read (an API outage) is no evidence of a drain."""
    unread = result_of(moved_vmi(), vmims=[succeeded()], require_trigger="descheduler", log_read=False)
    assert unread["verdict"] == "open" and unread["checks"]["trigger"]["result"] == "open" and unread["trigger"] == "unknown"
    assert "could not be read" in unread["trigger_reason"]


# ------------------------------------------------------------------------------------------ outcome
def test_untouched_vms_wait_until_enough_moved():
    untouched = result_of(k.vmi())
    assert untouched["verdict"] == "open" and not untouched["moving"]
    assert not mc.decided([untouched], 1)
    passed = result_of(moved_vmi(), vmims=[succeeded()])
    assert mc.decided([passed, untouched], 1)
    overall = mc.finish([passed, untouched], 1, timed_out=False)
    assert overall["passed"] and untouched["verdict"] == "not_moved" and overall["counts"]["moved"] == 1


def test_timeout_names_the_open_check():
    hung = result_of(k.vmi(), vmims=[k.vmim("kubevirt-evacuation-abcde", phase="Running")])
    assert not mc.decided([hung], 1)
    overall = mc.finish([hung], 1, timed_out=True)
    assert hung["verdict"] == "timeout" and "migration_succeeded" in hung["reason"] and "is Running" in hung["reason"]
    assert overall["failed_vms"] == ["desched-test/vm-a"] and not overall["passed"]


def test_not_moved_fails_when_too_few_moved():
    untouched = result_of(k.vmi())
    overall = mc.finish([untouched], 1, timed_out=True)
    assert untouched["verdict"] == "not_moved" and not overall["passed"] and overall["counts"]["failed"] == 1


def test_baseline_from_record_and_from_eviction_facts():
    from_record = mc.normalize_baseline({"vm-a": ENTRY})
    facts = {"vmis": [{"namespace": "desched-test", "name": "vm-a", "uid": "uid-vm-a", "node": "worker-a",
                       "launcher": {"name": "virt-launcher-vm-a-abcde", "node": "worker-a"}, "verdict": "migrate"}]}
    assert mc.normalize_baseline(facts) == from_record == {"desched-test/vm-a": ENTRY}
    assert mc.baseline_entry(k.vmi(), "virt-launcher-vm-a-abcde") == ENTRY
