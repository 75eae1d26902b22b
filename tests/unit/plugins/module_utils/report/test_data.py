"""What the report draws, derived from the document: the policy's LowNodeUtilization thresholds, each node's percents
before and after (requests_percent first), and the migrations in seconds from the first request."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report import data

from .page import document

POLICY_WITH_TWO_PROFILES = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: cleanup
  pluginConfig: [{name: DefaultEvictor}, {name: RemoveFailedPods}]
- name: vm-rebalance
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {memory: 55, nvidia.com/gpu: 10, cpu: "70"}
      targetThresholds: {memory: 68, pods: true}
"""


def test_thresholds_come_from_the_low_node_utilization_args_of_the_policy():
    found = data.policy_thresholds(document("rebalance")["policy"]["policy_text"])
    assert found == {"profile": "vm-rebalance", "thresholds": {"cpu": 70.0, "memory": 60.0, "pods": 20.0},
                     "targetThresholds": {"cpu": 75.0, "memory": 68.0, "pods": 30.0}}


def test_thresholds_take_the_profile_that_configures_the_plugin_and_only_numbers():
    found = data.policy_thresholds(POLICY_WITH_TWO_PROFILES)
    assert found == {"profile": "vm-rebalance", "thresholds": {"memory": 55.0, "nvidia.com/gpu": 10.0}, "targetThresholds": {"memory": 68.0}}


@pytest.mark.parametrize("text", [None, "", "profiles: [unclosed", "- a list", "profiles:\n- name: p\n  pluginConfig: [{name: DefaultEvictor}]\n"])
def test_no_thresholds_when_the_policy_is_missing_broken_or_without_the_plugin(text):
    assert data.policy_thresholds(text) == {"profile": None, "thresholds": {}, "targetThresholds": {}}


def test_requests_percent_is_preferred_over_the_usage_the_thresholds_count():
    node = {"name": "w", "usage_percent": {"memory": 70}, "requests_percent": {"cpu": 10, "memory": 71.5, "pods": 3}}
    assert data.node_percents(node) == {"cpu": 10.0, "memory": 71.5, "pods": 3.0}
    assert data.node_percents({"name": "w", "usage_percent": {"memory": 70, "cpu": None}}) == {"memory": 70.0}


def test_usage_rows_pair_nodes_before_and_after_by_name_in_order_of_first_appearance():
    classification = {"before": {"nodes": [{"node": "worker-b", "category": "underutilized", "usage_percent": {"cpu": 5}},
                                           {"name": "worker-a", "category": "overutilized", "usage_percent": {"cpu": 90}}]},
                      "after": {"nodes": [{"name": "worker-c", "category": "appropriately utilized", "usage_percent": {"cpu": 50}},
                                          {"name": "worker-a", "category": "appropriately utilized", "usage_percent": {"cpu": 60}}]}}
    rows = data.usage_rows(classification)
    assert [row["name"] for row in rows] == ["worker-b", "worker-a", "worker-c"]
    assert rows[0]["after"] is None and rows[2]["before"] is None
    assert rows[1] == {"name": "worker-a", "before": {"category": "overutilized", "percent": {"cpu": 90.0}},
                       "after": {"category": "appropriately utilized", "percent": {"cpu": 60.0}}}


@pytest.mark.parametrize("classification", [None, {}, {"before": None, "after": {"nodes": None}}, {"before": {"nodes": [{"category": "x"}, 3]}}])
def test_usage_rows_are_empty_for_a_document_without_nodes(classification):
    assert data.usage_rows(classification) == []


def test_chart_resources_are_cpu_memory_pods_then_the_extended_ones_named():
    rows = [{"name": "w", "before": {"category": None, "percent": {"cpu": 1.0, "ephemeral-storage": 2.0}}, "after": None}]
    assert data.chart_resources(rows, {"thresholds": {"nvidia.com/gpu": 10.0}, "targetThresholds": {}}) == \
        ["cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu"]


def test_timeline_is_in_seconds_from_the_first_request():
    timeline = data.migration_timeline(document("failed")["checks"])
    assert timeline["origin"] == "2026-12-01T12:37:07Z"
    failed, running = timeline["spans"]
    assert (failed["vm"], failed["migration"], failed["phase"]) == ("vm-1", "kubevirt-evacuation-5zxts", "Failed")
    assert (failed["requested"], failed["running"], failed["ended"]) == (0.0, 2.0, 4.0)
    assert (running["requested"], running["running"], running["ended"]) == (3.0, 6.0, None)
    assert failed["failure_reason"] == "target pod unschedulable: 0/2 nodes are available"


def test_timeline_leaves_out_vms_without_a_migration_or_a_request_time():
    checks = document("rebalance")["checks"] + [{"name": "vm-3", "migration": {"name": "m", "phase": "Pending"}}, "not a row"]
    spans = data.migration_timeline(checks)["spans"]
    assert [span["vm"] for span in spans] == ["vm-1"]
    assert data.migration_timeline(None) == {"origin": None, "spans": []}


def test_timeline_end_falls_back_to_the_final_phase_timestamp():
    migration = {"name": "m", "phase": "Succeeded", "created": "2026-12-01T10:00:00Z",
                 "phase_timestamps": {"Running": "2026-12-01T10:00:01.5Z", "Succeeded": "2026-12-01T10:00:09Z"}}
    (span,) = data.migration_timeline([{"name": "vm", "migration": migration}])["spans"]
    assert (span["requested"], span["running"], span["ended"]) == (0.0, 1.5, 9.0)
