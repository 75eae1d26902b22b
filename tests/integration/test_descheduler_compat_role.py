"""The `descheduler_compat` role on the simulator: the page's compatibility checks pass on rebalance-two-workers
(JSON and JUnit contents, versions incl. the package from ModuleInfo on the global context), the feature-gate check
fails on old-package (and the role fails at the end, after writing the reports), KubeDescheduler is checked on openshift."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from .test_kubevirt_eviction_facts import simulator  # noqa: F401  # pylint: disable=unused-import  # the fixture, shared
from .ansible_run import run_role

pytestmark = pytest.mark.simulator

ROLE = "descheduler_compat"
CHECKS = ["policy_configmap", "feature_gate", "kube_descheduler_schema", "kubevirt_eviction_strategy_path", "hco_eviction_strategy_path",
          "vm_eviction_strategy_path"]


def compat(sim, tmp_path, expect_failure=False, **extra):
    reports = tmp_path / "reports"
    run = run_role(sim, ROLE, {"descheduler_compat_report_dir": str(reports), "descheduler_compat_global_context": "global", **extra},
                   expect_failure=expect_failure)
    record = json.loads((reports / "localhost-compat.json").read_text())
    junit = ET.parse(reports / "localhost-compat.junit.xml").getroot()
    return run, record, junit


def results(record) -> dict:
    return {c["name"]: c["result"] for c in record["checks"]}


def test_compat_passes_on_the_page_setting_with_versions_and_junit(simulator, tmp_path):
    sim = simulator("rebalance-two-workers")
    run, record, junit = compat(sim, tmp_path)
    assert run.result == record
    assert [c["name"] for c in record["checks"]] == CHECKS
    assert results(record) == {**{name: "pass" for name in CHECKS}, "kube_descheduler_schema": "skip"}
    assert record["versions"]["kubernetes"] == "v1.35.0" and record["versions"]["kubevirt"] == "v1.8.4"
    assert record["versions"]["hco"] == "1.18.1" and record["versions"]["descheduler_package"] == "v0.36.0-5"
    assert "on context global" in record["versions"]["descheduler_package_source"]
    assert (junit.get("tests"), junit.get("failures"), junit.get("skipped")) == ("6", "0", "1")
    cases = {case.get("name"): case for case in junit.iter("testcase")}
    assert list(cases) == CHECKS
    assert cases["kube_descheduler_schema"].find("skipped") is not None
    assert "EvictionsInBackground=true" in cases["feature_gate"].find("system-out").text
    properties = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert properties["descheduler_package"] == "v0.36.0-5"


def test_feature_gate_check_fails_on_the_old_package(simulator, tmp_path):
    sim = simulator("old-package")
    run, record, junit = compat(sim, tmp_path, expect_failure=True)
    assert results(record)["feature_gate"] == "fail" and record["failed"] == ["feature_gate"]
    assert "Compatibility checks failed" in run.stdout and "lacks --feature-gates=EvictionsInBackground=true" in run.stdout
    failure = next(case for case in junit.iter("testcase") if case.get("name") == "feature_gate").find("failure")
    assert failure is not None and "upgrade the Alauda Container Platform Descheduler plugin" in failure.get("message")
    assert junit.get("failures") == "1"


def test_kube_descheduler_is_checked_when_served(simulator, tmp_path):
    sim = simulator("openshift")
    _run, record, _junit = compat(sim, tmp_path, descheduler_compat_global_context="")
    check = next(c for c in record["checks"] if c["name"] == "kube_descheduler_schema")
    assert check["result"] == "pass" and "DevKubeVirtRelieveAndMigrate" in check["message"]
    assert record["versions"]["descheduler_package"] is None
    assert "descheduler_compat_global_context is empty" in record["versions"]["descheduler_package_source"]
