"""kubevirt_cluster_maintenance's pure parts: the option checks (before any request), the nodes chosen by name or label,
the VMs and PDBs the plan reads from the facts, the run's report from upstream-shaped migrations, and its Markdown."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import evacuation_cancel
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report import maintenance as report_text
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_cluster_maintenance as svc


def options(**given):
    return svc.KubevirtClusterMaintenanceOptions.from_params(spec_params(svc.ARG_SPEC, **given))


@pytest.mark.parametrize("given, path", [
    ({}, "nodes"),
    ({"nodes": ["a"], "node_selector": "x=y"}, "node_selector"),
    ({"node_selector": "a in (b"}, "node_selector"),
    ({"nodes": ["a"], "max_nodes_in_parallel": 0}, "max_nodes_in_parallel"),
    ({"state": "started"}, "nodes"),
    ({"state": "node_done"}, "node"),
])
def test_bad_options_are_refused_before_any_request(given, path):
    with pytest.raises(InvalidOption) as caught:
        svc.run(options(**given), False, client=object())
    assert caught.value.path == path and caught.value.fix


def node(name, labels=None):
    return {"metadata": {"name": name, "labels": labels or {}}}


def test_nodes_by_name_keep_their_order_and_unknown_ones_are_named():
    nodes = [node("w1"), node("w2")]
    assert svc.select_nodes(options(nodes=["w2", "w1", "w2"]), nodes) == ["w2", "w1"]
    with pytest.raises(InvalidOption) as caught:
        svc.select_nodes(options(nodes=["w1", "w9"]), nodes)
    assert caught.value.path == "nodes" and "w9" in caught.value.message


def test_nodes_by_label_and_a_selector_that_selects_none():
    nodes = [node("w1", {"role": "worker"}), node("cp", {"role": "control"}), node("w2", {"role": "worker"})]
    assert svc.select_nodes(options(node_selector="role=worker"), nodes) == ["w1", "w2"]
    with pytest.raises(InvalidOption) as caught:
        svc.select_nodes(options(node_selector="role=gpu"), nodes)
    assert caught.value.path == "node_selector" and "kubectl get nodes -l" in caught.value.message


def test_vm_entries_take_the_action_the_requests_and_the_pdbs():
    facts = {"vmis": [
        {"namespace": "vms", "name": "a", "node": "w1", "verdict": "migrate", "launcher": {"name": "virt-launcher-a-x"}, "pdbs": ["pool"]},
        {"namespace": "vms", "name": "b", "node": "w1", "verdict": "shutdown_restart", "launcher": None, "pdbs": []},
        {"namespace": "vms", "name": "c", "node": None, "verdict": "not_running"},
    ], "pdbs": [{"namespace": "vms", "name": "pool", "disruptions_allowed": 1}]}
    launcher = {"metadata": {"name": "virt-launcher-a-x", "namespace": "vms"},
                "spec": {"containers": [{"resources": {"requests": {"memory": "1Gi", "cpu": "1"}}}]}}
    entries = svc.vm_entries(facts, [launcher])
    assert [(e["key"], e["action"]) for e in entries] == [("vms/a", "live_migrate"), ("vms/b", "restart")]
    assert entries[0]["requests"]["memory"] == 1024 ** 3 and entries[0]["pdbs"] == ["vms/pool"]
    assert svc.pdb_allowances(facts) == {"vms/pool": 1}


def vmim(name, vmi, created, source, target, start, end, phase="Succeeded"):
    return {"metadata": {"name": name, "namespace": "vms", "creationTimestamp": created}, "spec": {"vmiName": vmi},
            "status": {"phase": phase, "migrationState": {"sourceNode": source, "targetNode": target, "startTimestamp": start,
                                                          "endTimestamp": end}}}


def test_the_report_lists_every_migration_since_the_run_began():
    record = {"run_id": "r1", "status": "complete", "started_at": "2026-12-01T10:00:00Z", "finished_at": "2026-12-01T10:10:00Z",
              "nodes": ["w1", "w2"], "plan": {"order": ["w2", "w1"]},
              "node_states": {"w2": {"state": "done", "steps": {"drain": {"seconds": 30}}}, "w1": {"state": "started"}}}
    vmims = [
        vmim("old", "a", "2026-12-01T09:00:00Z", "w0", "w1", "2026-12-01T09:00:01Z", "2026-12-01T09:00:09Z"),
        vmim("m1", "a", "2026-12-01T10:01:00Z", "w1", "w2", "2026-12-01T10:01:01Z", "2026-12-01T10:01:11Z"),
        vmim("m2", "b", "2026-12-01T10:01:00Z", "w1", "w2", "2026-12-01T10:01:05Z", "2026-12-01T10:01:15Z"),
        vmim("m3", "a", "2026-12-01T10:05:00Z", "w2", "w1", "2026-12-01T10:05:01Z", "2026-12-01T10:05:21Z"),
        vmim("m4", "c", "2026-12-01T10:06:00Z", "w1", "w2", "2026-12-01T10:06:01Z", "2026-12-01T10:06:02Z", phase="Failed"),
    ]
    report = svc.run_report(record, vmims, datetime.datetime(2026, 12, 1, 10, 10, tzinfo=datetime.timezone.utc))
    assert [v["vm"] for v in report["vms"]] == ["vms/a", "vms/b", "vms/c"]
    assert [m["name"] for m in report["vms"][0]["migrations"]] == ["m1", "m3"]
    assert report["vms"][0]["migrations"][1]["duration_seconds"] == 20
    totals = report["totals"]
    assert totals["migrations"] == 3 and totals["vms_migrated"] == 2 and totals["failed_migrations"] == 1
    assert totals["vms_migrated_twice_or_more"] == ["vms/a"] and totals["max_migrations_of_a_vm"] == 2
    assert totals["migrations_per_vm"] == 1.5 and totals["peak_concurrent_migrations"] == 2
    assert totals["nodes_done"] == 1 and totals["seconds"] == 600.0
    assert [n["node"] for n in report["nodes"]] == ["w2", "w1"] and report["nodes"][1]["state"] == "started"
    text = report_text.markdown(report)
    assert "| vms/a | m3 | w2 | w1 | 20 | Succeeded |" in text
    assert "| w2 | done |" in text and "30 s" in text
    page = report_text.html(dict(report, stopped={"at": "t", "reason": "<b>vms/c</b> failed"}))
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and page.count("kubevirt-evacuation") == 0
    assert "&lt;b&gt;vms/c&lt;/b&gt; failed" in page and "<b>vms/c" not in page   # every value escaped
    assert ">m3<" in page and ">w2<" in page and "migrations per VM" in page


def test_peak_overlap_counts_migrations_running_at_once():
    moves = [{"start": "t1", "end": "t3"}, {"start": "t2", "end": "t4"}, {"start": "t3", "end": "t5"}, {"start": None, "end": "t2"}]
    assert svc.peak_overlap(moves) == 2


def test_the_report_names_the_vms_kubevirt_was_evacuating_when_a_node_was_given_back_or_the_run_stopped():
    uncordon = {"seconds": 1, "evacuations": {"vms": [{"namespace": "vms", "name": "a", "node": "w2", "result": "stayed",
                                                       "reason": "evacuation cancelled; the VM stays on w2"}]}}
    record = {"run_id": "r1", "status": "stopped", "started_at": "2026-12-01T10:00:00Z", "nodes": ["w1", "w2"],
              "node_states": {"w2": {"state": "done", "steps": {"uncordon": uncordon}}, "w1": {"state": "started"}}}
    report = svc.run_report(record, [], datetime.datetime(2026, 12, 1, 10, 10, tzinfo=datetime.timezone.utc))
    vmis = [{"metadata": {"name": "b", "namespace": "vms"}, "status": {"nodeName": "w1", "evacuationNodeName": "w1", "phase": "Running"}},
            {"metadata": {"name": "c", "namespace": "vms"}, "status": {"nodeName": "w1", "phase": "Running"}}]
    report["still_evacuating"] = evacuation_cancel.left_marked(vmis, ["w1"])
    assert [e["vm"] for e in report["still_evacuating"]] == ["vms/b"] and "state=uncordon" in report["still_evacuating"][0]["reason"]
    text = report_text.markdown(report)
    assert "## Evacuations when a node was given back or the run stopped" in text
    assert "| w2 | vms/a | stayed | evacuation cancelled; the VM stays on w2 |" in text
    assert "| w1 | vms/b | evacuating | KubeVirt is still evacuating it from w1" in text
    page = report_text.html(report)
    assert 'id="evacuations"' in page and ">vms/b<" in page and ">stayed<" in page
    quiet = svc.run_report(dict(record, node_states={}), [], datetime.datetime(2026, 12, 1, 10, 10, tzinfo=datetime.timezone.utc))
    assert "## Evacuations" not in report_text.markdown(quiet) and 'id="evacuations"' not in report_text.html(quiet)
