"""What a person sees when a playbook's input is wrong, through ansible-playbook: every playbook names exactly the
wrong variables, each with its fix, and nothing about the right ones (the variable check is the first task, so these
runs need no cluster: the kubeconfig points nowhere and nothing else runs); the issue's rebalance example answers with
its two lines; a role's own argument spec names only the wrong role variable. And the output paths: the report and
backup directories are created when missing, relative to the directory ansible-playbook runs in, backups 0700, before
anything is read from the cluster (a directory that cannot be created fails first). A drain that writes its reports
into a directory that did not exist: test_progress.py."""
from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from .ansible_run import run_playbook_file, run_role
from .conftest import ROOT

PLAYBOOKS = ROOT / "playbooks"
SIMULATOR_INVENTORY = ROOT / "inventories" / "simulator"
ISSUE_EXAMPLE = {"rebalance_nodes": ["worker-a"], "rebalance_thresholds": {"cpu": 80}, "rebalance_target_thresholds": {"cpu": 70}}
FAILED_TASK = re.compile(r"\[ERROR\]: Task failed: Action failed: (?P<message>.*?)\nOrigin:", re.DOTALL)
FATAL = re.compile(r"^fatal: \[[^]]+\]: FAILED! => (?P<result>\{.*\})$", re.MULTILINE)
RECAP = re.compile(r"^(?P<host>\S+)\s+: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)", re.MULTILINE)

# playbook -> (extra vars, the lines expected: (how the line starts, a fix it must give)), in the order printed (the
# spec's order, then the rules'). The simulator inventory gives right values for everything else.
WRONG_VARIABLES = {
    "rebalance": (ISSUE_EXAMPLE, [
        ("rebalance_nodes: names one worker (worker-a); the policy balances between two or more workers.",
         "Give the workers to balance, e.g. -e '{\"rebalance_nodes\": [\"worker-a\", \"worker-b\"]}'"),
        ("rebalance_thresholds.cpu: 80 is not below rebalance_target_thresholds.cpu (70);",
         "Lower the threshold or raise the target, e.g. -e '{\"rebalance_thresholds\": {\"cpu\": 60}, \"rebalance_target_thresholds\": {\"cpu\": 70}}'"),
    ]),
    "fleet_rollout": ({"fleet_serial": 0, "rebalance_trigger": "later"}, [
        ('rebalance_trigger: "later" is not one of wait, create, auto.', "Give one of them, e.g. -e rebalance_trigger=wait"),
        ("fleet_serial: 0 is not a batch size.", "e.g. -e fleet_serial=2 or -e fleet_serial=25%"),
    ]),
    "rehearse": ({"rehearse_nodes": ["worker-a"], "rehearse_timeout": "soon"}, [
        ('rehearse_timeout: "soon" is not an integer.', "Give an integer, e.g. -e rehearse_timeout=600"),
        ("rehearse_nodes: names 1 worker; the rehearsal needs two different workers", "e.g. -e '{\"rehearse_nodes\": [\"worker-a\", \"worker-b\"]}'"),
    ]),
    "maintenance": ({"maintenance_pods": "vms", "maintenance_batch_size": 0}, [
        ('maintenance_pods: "vms" is not one of launchers, all.', "Give one of them, e.g. -e maintenance_pods=launchers"),
        ("maintenance_nodes: is empty or not given; nothing to drain.", "e.g. -e '{\"maintenance_nodes\": [\"worker-1\"]}'"),
        ("maintenance_batch_size: 0 is less than 1.", "Give 1 or more, e.g. -e maintenance_batch_size=1"),
    ]),
    "rollback": ({"rollback_method": "backup", "rollback_resume": "perhaps"}, [
        ('rollback_resume: "perhaps" is not true or false.', "Give true or false, e.g. -e rollback_resume=true"),
        ("rollback_backup_file: is not given; rollback_method=backup re-applies a backup file.",
         "e.g. -e rollback_backup_file=backups/<cluster>/<file>.yaml, or leave rollback_method at auto"),
    ]),
    "compat_check": ({"compat_fail_on_error": "sometimes"}, [
        ('compat_fail_on_error: "sometimes" is not true or false.', "Give true or false, e.g. -e compat_fail_on_error=true"),
    ]),
}


def failure_lines(stdout: str) -> list[str]:
    """The lines of the failed task's message as printed, checked against the printed result: only the message."""
    match = FAILED_TASK.search(stdout)
    assert match, stdout
    lines = match.group("message").splitlines()
    results = [json.loads(found.group("result")) for found in FATAL.finditer(stdout)]
    assert results == [{"changed": False, "msg": "\n".join(lines)}], stdout
    return lines


def nowhere(path: Path) -> dict:
    """Extra vars that point the cluster's kubeconfig at a file that does not exist: any request would fail."""
    return {"kubeconfig": str(path / "no-cluster" / "kubeconfig")}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("playbook", WRONG_VARIABLES)
def test_wrong_variables_are_named_alone_with_their_fix_before_anything_runs(tmp_path, playbook):
    variables, expected = WRONG_VARIABLES[playbook]
    process = run_playbook_file(PLAYBOOKS / f"{playbook}.yml", SIMULATOR_INVENTORY, tmp_path,
                                {**nowhere(tmp_path), **variables}, expect_failure=True)
    lines = failure_lines(process.stdout)
    assert len(lines) == len(expected), lines
    for line, (start, fix) in zip(lines, expected):
        assert line.startswith(start) and fix in line, (line, start, fix)
    assert [m.group("ok", "changed") for m in RECAP.finditer(process.stdout)] == [("0", "0")], "the check is the first task"
    assert not (tmp_path / "reports").exists() and not (tmp_path / "backups").exists()


def test_the_issue_rebalance_example_answers_with_exactly_its_two_lines(tmp_path):
    command_line = ["-e", json.dumps(ISSUE_EXAMPLE)]
    assert command_line[1] == '{"rebalance_nodes": ["worker-a"], "rebalance_thresholds": {"cpu": 80}, "rebalance_target_thresholds": {"cpu": 70}}'
    process = run_playbook_file(PLAYBOOKS / "rebalance.yml", SIMULATOR_INVENTORY, tmp_path, {**nowhere(tmp_path), **ISSUE_EXAMPLE},
                                expect_failure=True)
    assert failure_lines(process.stdout) == [
        "rebalance_nodes: names one worker (worker-a); the policy balances between two or more workers. Give the workers to balance, "
        "e.g. -e '{\"rebalance_nodes\": [\"worker-a\", \"worker-b\"]}', or a whole policy in rebalance_policy",
        "rebalance_thresholds.cpu: 80 is not below rebalance_target_thresholds.cpu (70); a node between the two is appropriately utilized. "
        "Lower the threshold or raise the target, e.g. -e '{\"rebalance_thresholds\": {\"cpu\": 60}, \"rebalance_target_thresholds\": {\"cpu\": 70}}'",
    ]


def test_a_wrong_role_variable_is_the_only_one_the_role_names(tmp_path):
    role_spec = yaml.safe_load((ROOT / "roles" / "node_maintenance" / "meta" / "argument_specs.yml").read_text())
    role_variables = set(role_spec["argument_specs"]["main"]["options"])
    target = SimpleNamespace(kubeconfig=nowhere(tmp_path)["kubeconfig"])
    run = run_role(target, "node_maintenance", {"node_maintenance_node": "worker-1", "node_maintenance_timeout": "soon"}, expect_failure=True)
    match = FAILED_TASK.search(run.stdout)
    assert match, run.stdout
    message = match.group("message")
    assert {name for name in role_variables if name in message} == {"node_maintenance_timeout"}, message
    assert "argument 'node_maintenance_timeout' is of type str and we were unable to convert to int" in message


def test_output_directories_are_created_relative_to_the_run_directory_before_the_cluster_is_read(tmp_path):
    """No cluster: the preflight fails on the kubeconfig, after the directories were made; the report is still written."""
    process = run_playbook_file(PLAYBOOKS / "rebalance.yml", SIMULATOR_INVENTORY, tmp_path,
                                {**nowhere(tmp_path), "reports_dir": "state/reports", "backup_dir": "state/backups"}, expect_failure=True)
    assert "failed at preflight" in process.stdout
    assert mode(tmp_path / "state" / "backups") == 0o700
    assert mode(tmp_path / "state" / "reports") == 0o750
    report = json.loads(next((tmp_path / "state" / "reports" / "workload").glob("rebalance-*.json")).read_text())
    assert report["failed_step"] == "preflight"


def test_a_report_directory_that_cannot_be_created_fails_before_the_drain(tmp_path):
    (tmp_path / "a-file").write_text("not a directory\n")
    process = run_playbook_file(PLAYBOOKS / "maintenance.yml", SIMULATOR_INVENTORY, tmp_path,
                                {**nowhere(tmp_path), "maintenance_nodes": ["worker-1"], "maintenance_report_dir": "a-file/reports"},
                                expect_failure=True)
    lines = failure_lines(process.stdout)
    assert len(lines) == 1 and lines[0].startswith(f"maintenance_report_dir: cannot create {tmp_path / 'a-file' / 'reports'} ("), lines
    assert "Give a directory this user can create or write" in lines[0]
    assert "TASK [Audit" not in process.stdout, "nothing of the maintenance ran"
