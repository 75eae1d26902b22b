"""playbooks/rehearse.yml on any cluster (cluster-safe: `make test-cluster` runs these against a staging cluster, and
the suite against the simulator's rehearsal scenario): it predicts, creates, moves exactly the predicted VMs by live
migration, reports, and leaves the cluster as it found it; a second run does the same; check mode creates nothing;
unsafe input is refused before anything is created."""
from __future__ import annotations

import pytest

from .rehearsal_run import NAMESPACE, assert_as_before, cluster_state, rehearse
from support.browser import open_report

pytestmark = pytest.mark.kubectl


def assert_rehearsed_as_predicted(rehearsal) -> None:
    report = rehearsal.report
    assert report["status"] == "passed", rehearsal.output[-3000:]
    section = report["rehearsal"]
    prediction, comparison = section["prediction"], section["comparison"]
    assert prediction["holds"] and prediction["moves"] >= 1
    assert comparison["matches"], comparison["problems"]
    moved = [m for m in report["moved"] if m["namespace"] == NAMESPACE]
    assert len(moved) == prediction["moves"]
    for move in moved:
        assert move["vm"] in prediction["candidates"]
        assert (move["from"], move["to"]) == (prediction["from"], prediction["to"])
    verified = {c["name"]: c for c in report["checks"]}
    for move in moved:   # a live migration, proven by the five checks
        assert verified[move["vm"]]["verdict"] == "pass"
        assert verified[move["vm"]]["uid_before"] == verified[move["vm"]]["uid_after"]
    assert {vm["node"] for vm in section["vms"]} == {prediction["from"]}   # the imbalance: every test VM on worker A
    assert section["cleanup"]["done"] and section["cleanup"]["left"] == []
    assert f"Namespace/{NAMESPACE}" in section["cleanup"]["removed"]
    assert report["rollback"]["policy_restored"] is True


def test_rehearsal_moves_exactly_the_predicted_vms_and_leaves_the_cluster_as_before_twice(cluster, tmp_path):
    before = cluster_state(cluster)
    assert NAMESPACE not in before["namespaces"]
    for run in ("first", "second"):
        rehearsal = rehearse(cluster, run)
        assert "predicted:" in rehearsal.output
        assert_rehearsed_as_predicted(rehearsal)
        assert_as_before(cluster, before)
    page = open_report(rehearsal.report_path.with_suffix(".html"), tmp_path / "rehearsal.png")
    assert page.console_errors == []
    assert "Rehearsal" in page.text and rehearsal.report["moved"][0]["vm"] in page.text
    assert page.svgs and all(svg.width > 0 and svg.height > 0 and svg.shapes > 0 for svg in page.svgs)
    assert page.outside_requests == []


def test_check_mode_prints_the_prediction_and_creates_nothing(cluster):
    before = cluster_state(cluster)
    rehearsal = rehearse(cluster, "check", check=True)
    assert "predicted:" in rehearsal.output
    assert rehearsal.report["status"] == "planned"
    assert rehearsal.report["rehearsal"]["prediction"]["holds"]
    assert rehearsal.report["rehearsal"]["vms"] == []
    assert cluster_state(cluster) == before


def test_refuses_a_namespace_that_is_not_its_own_before_creating_anything(cluster):
    cluster.kubectl("create", "namespace", NAMESPACE)
    try:
        before = cluster_state(cluster)
        rehearsal = rehearse(cluster, "foreign-namespace", expect_failure=True)
        assert f"namespace {NAMESPACE} exists and is not the rehearsal's" in rehearsal.output
        assert "rehearse_namespace" in rehearsal.output
        assert cluster_state(cluster) == before
        assert cluster.kubectl_json("-n", NAMESPACE, "get", "vm")["items"] == []
        assert rehearsal.report["rehearsal"]["vms"] == []
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=true")


def test_refuses_when_the_descheduler_is_not_found_before_creating_anything(cluster):
    before = cluster_state(cluster)
    rehearsal = rehearse(cluster, "no-descheduler", {"rehearse_descheduler_namespace": "no-descheduler-here"}, expect_failure=True)
    assert "Namespace no-descheduler-here: the Descheduler plugin was not found" in rehearsal.output
    assert rehearsal.report["failed_step"] == "preflight"
    assert cluster_state(cluster) == before


def test_refuses_test_vms_larger_than_the_free_memory_before_creating_anything(cluster):
    before = cluster_state(cluster)
    rehearsal = rehearse(cluster, "too-big", {"rehearse_vm_memory_min": "64Ti"}, expect_failure=True)
    assert "not enough free allocatable on" in rehearsal.output
    assert "Free memory on" in rehearsal.output
    assert cluster_state(cluster) == before
