"""evacuation_cancel: which VMs a stopped drain left marked, what the cancel deletes or leaves, the outcome of each VM
and the advice where KubeVirt does not serve evacuate/cancel, from upstream-shaped objects."""
from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import evacuation_cancel as cancel


def vmi(name, node="worker-1", marked="worker-1", phase="Running", source=None):
    status = {"nodeName": node, "phase": phase}
    if marked:
        status["evacuationNodeName"] = marked
    metadata = {"name": name, "namespace": "vms", "uid": "uid-" + name}
    if source:
        metadata["annotations"] = {"kubevirt.io/eviction-source": source}
    return {"metadata": metadata, "status": status}


def vmim(name, vmi_name, phase=None, evacuation=True):
    metadata = {"name": name, "namespace": "vms", "uid": "uid-" + name, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if evacuation:
        metadata["annotations"] = {"kubevirt.io/evacuationMigration": "worker-1"}
    return {"metadata": metadata, "spec": {"vmiName": vmi_name}, "status": {"phase": phase} if phase else {}}


def test_served_reads_virt_apis_resource_list():
    listed = {"resources": [{"name": "virtualmachines/migrate"}, {"name": "virtualmachineinstances/evacuate/cancel"}]}
    assert cancel.served(listed) is True
    assert cancel.served({"resources": [{"name": "virtualmachines/migrate"}]}) is False
    assert cancel.served(None) is False


def test_path_and_options_as_virtctl_sends_them():
    assert cancel.path("vms", "vm-1") == "/apis/subresources.kubevirt.io/v1/namespaces/vms/virtualmachineinstances/vm-1/evacuate/cancel"
    assert cancel.options("worker-1") == {"kind": "EvacuateCancelOptions", "apiVersion": "kubevirt.io/v1", "evacuationNodeName": "worker-1"}


def test_plan_takes_the_vms_marked_for_the_node_and_sorts_their_migrations():
    vmis = [vmi("b"), vmi("a"), vmi("other", marked="worker-2", node="worker-2"), vmi("free", marked=None),
            vmi("gone", phase="Failed"), vmi("rebalanced", source="descheduler")]
    vmims = [vmim("m-pending", "a", "Pending"), vmim("m-new", "a"), vmim("m-old", "a", "Failed"), vmim("m-run", "b", "Running"),
             vmim("m-other", "other", "Pending")]
    entries = cancel.plan(vmis, vmims, "worker-1")
    assert [e["name"] for e in entries] == ["a", "b"]
    assert [m["name"] for m in entries[0]["pending"]] == ["m-new", "m-pending"] and entries[0]["started"] is None
    assert entries[0]["pending"][0]["uid"] == "uid-m-new"
    assert entries[1]["pending"] == [] and entries[1]["started"] == {"name": "m-run", "phase": "Running"}


def test_outcomes_say_what_became_of_each_vm_and_why():
    entries = cancel.plan([vmi("a"), vmi("b")], [vmim("m-pending", "a", "Pending"), vmim("m-run", "b", "Scheduling")], "worker-1")
    stayed = cancel.outcome(entries[0], cancelled=True)
    assert stayed["result"] == "stayed" and stayed["deleted_migrations"] == ["m-pending"]
    assert stayed["reason"] == "evacuation cancelled, pending migration m-pending deleted; the VM stays on worker-1"
    moving = cancel.outcome(entries[1], cancelled=True)
    assert moving["result"] == "moving" and "migration m-run was already Scheduling" in moving["reason"]
    refused = cancel.outcome(entries[0], cancelled=False, error="500 InternalError: test failed")
    assert refused["result"] == "failed" and refused["deleted_migrations"] == [] and refused["reason"].endswith("test failed")
    older = cancel.outcome(entries[0], cancelled=False, is_served=False)
    assert older["result"] == "continuing" and "does not serve evacuate/cancel" in older["reason"]


def test_summary_and_the_advice_for_a_kubevirt_without_the_cancel():
    entries = cancel.plan([vmi("a"), vmi("b")], [vmim("m-pending", "a", "Pending")], "worker-1")
    done = cancel.summary("worker-1", True, [cancel.outcome(e, cancelled=True) for e in entries])
    assert done["stayed"] == ["vms/a", "vms/b"] and done["marked"] == ["vms/a", "vms/b"] and done["served"] is True
    assert done["deleted_migrations"] == ["vms/m-pending"] and done["advice"] is None and done["continuing"] == []
    older = cancel.summary("worker-1", False, [cancel.outcome(e, cancelled=False, is_served=False) for e in entries])
    assert older["continuing"] == ["vms/a", "vms/b"] and older["stayed"] == [] and older["served"] is False
    advice = older["advice"]
    assert advice.startswith("KubeVirt goes on evacuating vms/a, vms/b from worker-1")
    assert "virtctl evacuate-cancel node worker-1" in advice
    assert ("kubectl patch vmi a -n vms --type=json -p '[{\"op\":\"test\",\"path\":\"/status/evacuationNodeName\",\"value\":\"worker-1\"},"
            "{\"op\":\"remove\",\"path\":\"/status/evacuationNodeName\"}]'") in advice
    assert "virtctl migrate-cancel b -n vms" in advice
    nothing = cancel.summary("worker-1", None, [])
    assert nothing["marked"] == [] and nothing["advice"] is None and nothing["served"] is None
