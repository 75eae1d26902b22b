"""The `rebalance_validate` role in a playbook against `rebalance-two-workers` with the page's bounded policy. The
CronJob is suspended so that every run is the role's own (trigger=create): one cycle moves one VM and proves it; three
cycles move both VMs (each proved by the five checks) and the third stops with "No node is underutilized"; a policy the descheduler rejects fails the
play after the result is set; check mode creates no Job."""
from __future__ import annotations

import json

import pytest

from support.simulator import kubectl_available, running_kubesim

from .ansible_run import run_role
from .test_descheduler_run import apply_page_policy

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]


@pytest.fixture
def sim(tmp_path):
    with running_kubesim("rebalance-two-workers", tmp_path / "sim", suspend=True) as started:
        yield started


def validate(sim, check: bool = False, expect_failure: bool = False, **variables):
    return run_role(sim, "rebalance_validate", {"rebalance_validate_trigger": "create", "rebalance_validate_timeout": 60, **variables},
                    check=check, expect_failure=expect_failure)


def vmis(sim) -> dict:
    return {v["metadata"]["name"]: v for v in sim.kubectl_json("get", "vmi", "-n", "desched-test")["items"]}


def test_three_cycles_move_both_vms_and_the_third_stops_balanced(sim):
    before = vmis(sim)
    assert {v["status"]["nodeName"] for v in before.values()} == {"worker-a"}
    apply_page_policy(sim)
    result = validate(sim, rebalance_validate_cycles=3, rebalance_validate_min_total_moved=2).result
    assert result["passed"] is True and result["stopped_because"] == "balanced", result
    assert [c["cycle"] for c in result["cycles"]] == [1, 2, 3]
    first, second, third = result["cycles"]
    assert first["run"]["totals"] == {"total_evicted": 0, "eviction_requests": 1}
    assert {c["node"]: c["category"] for c in first["run"]["classification"]} == {"worker-a": "overutilized", "worker-b": "underutilized"}
    assert first["run"]["job"]["manual"] is True and first["verify"]["passed"] is True
    [proved] = [v for v in first["verify"]["vms"] if v["verdict"] == "pass"]
    assert all(check["result"] == "pass" for check in proved["checks"].values()) and proved["trigger"] == "descheduler"
    assert second["verify"]["passed"] is True
    assert third["verify"] is None and third["run"]["stop_reason"].startswith("No node is underutilized, nothing to do here")
    assert sorted(m["vm"] for m in result["moved"]) == ["vm-1", "vm-2"]
    assert all((m["from"], m["to"]) == ("worker-a", "worker-b") and m["migration"].startswith("kubevirt-evacuation-")
               for m in result["moved"])
    assert result["swaps"] == []
    # the cluster agrees: both VMIs on worker-b with the UIDs they had
    after = vmis(sim)
    for name, vmi in after.items():
        assert vmi["status"]["nodeName"] == "worker-b" and vmi["metadata"]["uid"] == before[name]["metadata"]["uid"]
        assert next(m for m in result["moved"] if m["vm"] == name)["uid"] == vmi["metadata"]["uid"]


def test_rejected_policy_fails_the_play_after_setting_the_result(sim, tmp_path):
    apply_page_policy(sim)
    configmap = sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")
    configmap["data"]["policy.yaml"] = configmap["data"]["policy.yaml"].replace(
        "    args:\n      thresholds:", "    args:\n      evictableNamespaces:\n        include: [desched-test]\n      thresholds:")
    assert "include" in configmap["data"]["policy.yaml"]
    sim.kubectl("replace", "-f", "-", input=json.dumps(configmap))
    result = validate(sim, expect_failure=True, rebalance_validate_cycles=2).result
    assert result["passed"] is False and result["stopped_because"] == "run_failed"
    assert "only Exclude namespaces can be set, inclusion is not supported" in result["failure"]
    assert len(result["cycles"]) == 1 and "error" in result["cycles"][0]
    assert {v["status"]["nodeName"] for v in vmis(sim).values()} == {"worker-a"}


def test_check_mode_creates_no_job(sim):
    apply_page_policy(sim)
    result = validate(sim, check=True, rebalance_validate_cycles=2).result
    assert result["stopped_because"] == "check_mode" and result["moved"] == []
    assert sim.kubectl_json("-n", "descheduler", "get", "jobs")["items"] == []
