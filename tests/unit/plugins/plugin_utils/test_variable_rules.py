"""The playbooks' cross-variable rules by set, through check_variables with the playbooks' own specs (playbooks/specs/),
as the action plugin runs them: each wrong variable named once with its fix, the right ones never."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_checks import check_variables, spec_options
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_rules import RULE_SETS, node_names, rules_named

SPECS = Path(__file__).resolve().parents[4] / "playbooks" / "specs"
# The simulator inventory's rebalance variables: right, so only what a test changes can be named.
GOOD_REBALANCE = {"rebalance_nodes": ["worker-a", "worker-b"], "rebalance_label_selector": "app=desched-test",
                  "rebalance_thresholds": {"cpu": 70, "memory": 60, "pods": 20},
                  "rebalance_target_thresholds": {"cpu": 75, "memory": 68, "pods": 30}}


def problems(playbook: str, values: dict, *sets: str) -> dict:
    """variable -> its line, for `values` checked against playbooks/specs/<playbook>.yml and the rule `sets`."""
    options = spec_options(yaml.safe_load((SPECS / f"{playbook}.yml").read_text()))
    return {p.variable: p.line for p in check_variables(options, values, rules_named(sets or (playbook,)))}


def example_of(line: str) -> dict:
    """The JSON of the first -e '{...}' example in a line."""
    start = line.index("-e '") + 4
    return json.loads(line[start:line.index("'", start)])


def test_the_issue_example_names_exactly_the_two_wrong_variables():
    found = problems("rebalance", {**GOOD_REBALANCE, "rebalance_nodes": ["worker-a"], "rebalance_thresholds": {"cpu": 80},
                                   "rebalance_target_thresholds": {"cpu": 70}})
    assert list(found) == ["rebalance_nodes", "rebalance_thresholds.cpu"]
    assert found["rebalance_nodes"].startswith("rebalance_nodes: names one worker (worker-a); the policy balances between two or more workers. "
                                               "Give the workers to balance, e.g. -e '{\"rebalance_nodes\": [\"worker-a\", \"worker-b\"]}'")
    line = found["rebalance_thresholds.cpu"]
    assert line.startswith("rebalance_thresholds.cpu: 80 is not below rebalance_target_thresholds.cpu (70); ")
    fixed = example_of(line)
    assert fixed["rebalance_thresholds"]["cpu"] < fixed["rebalance_target_thresholds"]["cpu"], line


def test_right_rebalance_variables_pass_and_a_whole_policy_needs_no_workers():
    assert problems("rebalance", GOOD_REBALANCE) == {}
    assert problems("rebalance", {"rebalance_policy": "apiVersion: descheduler/v1alpha2\n"}) == {}
    assert problems("rebalance", {"rebalance_label_selector": "app in (a)", "rebalance_vm_labels": {"app": "a"}, **{
        k: v for k, v in GOOD_REBALANCE.items() if k != "rebalance_label_selector"}}) == {}


@pytest.mark.parametrize("change, variable, words", [
    ({"rebalance_nodes": []}, "rebalance_nodes", "is empty"),
    ({"rebalance_nodes": "worker-a,worker-a"}, "rebalance_nodes", "names one worker (worker-a)"),
    ({"rebalance_label_selector": "app in (a,b)"}, "rebalance_label_selector", '"app in (a,b)" is not key=value[,key=value]'),
    ({"rebalance_thresholds": {"cpu": 70, "memory": 60}}, "rebalance_target_thresholds",
     "names cpu, memory, pods and rebalance_thresholds names cpu, memory: thresholds and targetThresholds configured different resources"),
    ({"rebalance_thresholds": {"cpu": 70, "memory": "high", "pods": 20}}, "rebalance_thresholds.memory", '"high" is not a percentage from 0 to 100'),
    ({"rebalance_target_thresholds": {"cpu": 170, "memory": 68, "pods": 30}}, "rebalance_target_thresholds.cpu", "170 is not a percentage"),
    ({"rebalance_thresholds": {"cpu": 75, "memory": 60, "pods": 20}}, "rebalance_thresholds.cpu", "75 is not below rebalance_target_thresholds.cpu (75)"),
    ({"rebalance_cycles": 0}, "rebalance_cycles", "0 is less than 1"),
    ({"rebalance_timeout": "0"}, "rebalance_timeout", "0 is less than 1"),
])
def test_each_rebalance_rule_names_its_variable_only(change, variable, words):
    found = problems("rebalance", {**GOOD_REBALANCE, **change})
    assert list(found) == [variable], found
    assert found[variable].startswith(f"{variable}: {words}"), found[variable]
    assert ". " in found[variable] and "e.g." in found[variable], "a fix with an example"


def test_a_gap_fix_keeps_the_other_resources_and_raises_a_target_too_low_to_go_under():
    found = problems("rebalance", {**GOOD_REBALANCE, "rebalance_thresholds": {"cpu": 80, "memory": 9, "pods": 20},
                                   "rebalance_target_thresholds": {"cpu": 75, "memory": 5, "pods": 30}})
    assert list(found) == ["rebalance_thresholds.cpu", "rebalance_thresholds.memory"]
    fixed = example_of(found["rebalance_thresholds.cpu"])
    assert fixed == {"rebalance_thresholds": {"cpu": 65, "memory": 9, "pods": 20}, "rebalance_target_thresholds": {"cpu": 75, "memory": 19, "pods": 30}}
    assert all(fixed["rebalance_thresholds"][r] < fixed["rebalance_target_thresholds"][r] for r in fixed["rebalance_thresholds"])


def test_fleet_serial_takes_numbers_percentages_and_lists_of_them():
    for good in (1, "2", "25%", [1, "50%", "100%"]):
        assert problems("fleet_rollout", {**GOOD_REBALANCE, "fleet_serial": good}, "rebalance", "fleet") == {}, good
    for bad in (0, "0%", "all", [], True):
        found = problems("fleet_rollout", {**GOOD_REBALANCE, "fleet_serial": bad}, "rebalance", "fleet")
        assert list(found) == ["fleet_serial"] and "is not a batch size" in found["fleet_serial"], (bad, found)


@pytest.mark.parametrize("change, variable, words", [
    ({"rehearse_nodes": ["worker-a"]}, "rehearse_nodes", "names 1 worker"),
    ({"rehearse_nodes": ["worker-a", "worker-a"]}, "rehearse_nodes", "names the same worker twice"),
    ({"rehearse_moves": 0}, "rehearse_moves", "0 is less than 1"),
    ({"rehearse_timeout": -5}, "rehearse_timeout", "-5 is less than 1"),
    ({"rehearse_vm_labels": {}}, "rehearse_vm_labels", "is empty"),
    ({"rehearse_cleanup": "sometimes"}, "rehearse_cleanup", '"sometimes" is not one of always, only, never'),
])
def test_each_rehearse_rule_names_its_variable_only(change, variable, words):
    found = problems("rehearse", {"rehearse_nodes": ["worker-a", "worker-b"], "rehearse_moves": 1, **change})
    assert list(found) == [variable] and found[variable].startswith(f"{variable}: {words}"), found


def test_maintenance_nodes_come_from_the_list_or_the_text():
    assert node_names("worker-1\nworker-2, worker-3,\n") == ["worker-1", "worker-2", "worker-3"]
    assert problems("maintenance", {"maintenance_nodes": ["worker-1"]}) == {}
    assert problems("maintenance", {"maintenance_nodes": [], "maintenance_nodes_text": "worker-1\nworker-2"}) == {}
    found = problems("maintenance", {"maintenance_nodes": [], "maintenance_batch_size": 0})
    assert list(found) == ["maintenance_nodes", "maintenance_batch_size"]
    assert found["maintenance_nodes"].startswith("maintenance_nodes: is empty or not given; nothing to drain. Give the nodes to drain")
    assert list(problems("maintenance", {"maintenance_nodes": [], "maintenance_nodes_text": " , "})) == ["maintenance_nodes_text"]


def test_rollback_backup_file_is_needed_for_the_backup_method_and_must_exist(tmp_path):
    backup = tmp_path / "descheduler.yaml"
    backup.write_text("kind: ConfigMap\n")
    assert problems("rollback", {}) == {}
    assert problems("rollback", {"rollback_method": "auto", "rollback_backup_file": ""}) == {}, "a blank AWX answer is no file"
    assert problems("rollback", {"rollback_method": "backup", "rollback_backup_file": str(backup)}) == {}
    missing = problems("rollback", {"rollback_method": "backup"})
    assert missing["rollback_backup_file"].startswith("rollback_backup_file: is not given; rollback_method=backup re-applies a backup file. "
                                                      "Give a file written by the descheduler_backup role")
    absent = problems("rollback", {"rollback_backup_file": str(tmp_path / "gone.yaml")})
    assert list(absent) == ["rollback_backup_file"] and f"{tmp_path / 'gone.yaml'} is not a file" in absent["rollback_backup_file"]


def test_unknown_rule_sets_are_refused_by_name():
    with pytest.raises(KeyError, match="unknown rule set rebalnce; known: " + ", ".join(RULE_SETS)):
        rules_named(["rebalnce"])


@pytest.mark.parametrize("playbook, good", [
    ("rebalance", GOOD_REBALANCE), ("fleet_rollout", GOOD_REBALANCE), ("maintenance", {"maintenance_nodes": ["worker-1"]}),
    ("cluster_maintenance", {"cluster_maintenance_nodes": ["worker-1"]}), ("rollback", {}),
    ("rehearse", {"rehearse_nodes": ["worker-a", "worker-b"]}),
])
def test_every_playbook_that_takes_the_lease_checks_its_duration(playbook, good):
    sets = ("rebalance", "fleet") if playbook == "fleet_rollout" else (playbook,)
    assert "run_lease_duration" not in problems(playbook, {**good, "run_lease_duration": 20}, *sets)
    found = problems(playbook, {**good, "run_lease_duration": 10}, *sets)
    assert found["run_lease_duration"] == "run_lease_duration: 10 is less than 15. Give 15 or more seconds, e.g. -e run_lease_duration=1800"


def test_rollback_backup_object_stands_for_a_backup_file_that_is_not_on_this_controller(tmp_path):
    """The run's copy in the cluster: method backup with the object only, or with a file from another controller, is accepted."""
    cluster_copy = "kube-system/kubevirt-ops-backup-20261207t152652z-1a2b3c4d"
    assert problems("rollback", {"rollback_method": "backup", "rollback_backup_object": cluster_copy}) == {}
    assert problems("rollback", {"rollback_backup_file": str(tmp_path / "gone.yaml"), "rollback_backup_object": cluster_copy}) == {}
