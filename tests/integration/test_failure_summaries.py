"""What a person sees when a role refuses or fails, through ansible-playbook as in a terminal or an AWX job log: a few
lines (what was refused or failed, per VM the reason and the variable that fixes it, where the whole result is),
the whole result kept in the registered variable and the report file, written before the failure, into a report
directory the role creates. One simulator per scenario:

- `maintenance`: the refused drain of worker-1 (playbooks/maintenance.yml without the allow flags) changes nothing
  and names each refused VM, read from the preflight, with its fix; `-v` prints the whole preflight; then (last, it
  cordons worker-1) a drain whose live migration fails (a simulated failure) writes its report and stops short.
- `rebalance-two-workers`: a rendered policy whose threshold is above its target is refused naming the role's and the
  playbook's variable; backups go to directories the role creates with mode 0700 (a parent that exists keeps its
  mode); a migration that fails during rebalance_validate is summed up per VM, the evidence (in a directory the role
  creates) keeping the whole verification."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.simulator import kubectl_available

from .ansible_run import ROOT, run_playbook, run_role
from .test_descheduler_rollback_role import set_fault
from .test_descheduler_run import apply_page_policy

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

MAINTENANCE = ROOT / "playbooks" / "maintenance.yml"
NODE = "worker-1"
# the printed failure stays this short; every line but the fatal one (which repeats the message as one JSON line) this narrow
MAX_LINES, MAX_WIDTH = 15, 400
# the module options of a refusal and the variables a person sets for each (the role's; the playbook's where it passes one)
ROLE_OPTION = "node_maintenance_{0}"
PLAYBOOK_OPTION = {"allow_loss": "maintenance_allow_loss", "allow_shutdown": "maintenance_allow_shutdown",
                   "allow_blocked": "maintenance_allow_blocked"}


def printed_failure(stdout: str) -> list:
    """The failing task as printed: from its `TASK [` header through the `fatal:` line and what follows it, up to the
    next task or PLAY RECAP."""
    lines = stdout.splitlines()
    fatal = next(index for index, line in enumerate(lines) if line.startswith("fatal: ["))
    start = max(index for index in range(fatal) if lines[index].startswith("TASK ["))
    end = next((index for index in range(fatal + 1, len(lines)) if lines[index].startswith(("TASK [", "PLAY RECAP"))), len(lines))
    return lines[start:end]


def assert_short(printed: list) -> list:
    """The printed failure within MAX_LINES (blank lines not counted) and MAX_WIDTH; the summary lines of its message."""
    shown = [line for line in printed if line.strip()]
    assert len(shown) <= MAX_LINES, "\n".join(printed)
    assert all(len(line) <= MAX_WIDTH for line in shown if not line.startswith("fatal: [")), "\n".join(printed)
    error = next(index for index, line in enumerate(printed) if line.startswith("[ERROR]: Task failed: "))
    origin = next(index for index, line in enumerate(printed) if line.startswith("Origin: "))
    return [printed[error].split(": ", 3)[-1]] + printed[error + 1:origin]


def vmis(sim) -> dict:
    return {(v["metadata"]["namespace"], v["metadata"]["name"]): (v["metadata"]["uid"], v["status"].get("nodeName"))
            for v in sim.kubectl_json("get", "vmi", "-A")["items"]}


def cordoned(sim, node: str) -> bool:
    return bool(sim.kubectl_json("get", "node", node)["spec"].get("unschedulable"))


# ------------------------------------------------------------------------------------------ node maintenance
@pytest.fixture(scope="module")
def maintenance(kubesim_factory):
    return kubesim_factory("maintenance", suspend=True, settle=True)


def test_a_refused_drain_names_each_vm_with_its_fix_in_a_few_lines_and_changes_nothing(maintenance, tmp_path):
    before = vmis(maintenance)
    reports = tmp_path / "reports"
    run = run_playbook(maintenance, MAINTENANCE, {"maintenance_nodes": [NODE], "maintenance_report_dir": str(reports)},
                       expect_failure=True, name="refused")
    printed = printed_failure(run.stdout)
    summary = assert_short(printed)
    assert printed[0].startswith("TASK [kubevirt_ops.rebalance.node_maintenance : ")
    assert summary[0] == "Preflight refused to drain {0}, nothing was changed:".format(NODE)

    # the whole preflight is in the report, written before the failure: the refused VMs come from it
    report = json.loads((reports / "node-maintenance-{0}.json".format(NODE)).read_text())
    assert report["failure"]["step"] == "preflight" and report["failure"]["summary"] == summary
    preflight = report["failure"]["result"]["preflight"]
    assert sorted((vm["namespace"], vm["name"]) for vm in preflight["vms"]) == sorted(key for key, (_uid, node) in before.items() if node == NODE)
    refused = [(vm, problem["option"]) for problem in preflight["problems"] for vm in problem["vms"]]
    not_migrating = {"{0}/{1}".format(vm["namespace"], vm["name"]) for vm in preflight["vms"] if vm["action"] != "live_migrate"}
    assert refused and {vm for vm, _option in refused} == not_migrating
    for vm, option in refused:
        [line] = [line for line in summary if line.startswith("- {0}: ".format(vm))]
        assert " Fix: " in line and "set {0}: true".format(ROLE_OPTION.format(option)) in line, line
        assert "(playbook: {0})".format(PLAYBOOK_OPTION[option]) in line, line
    assert summary[-1] == "Full result: node_maintenance_preflight (-v prints it); {0}/node-maintenance-{1}.json".format(reports, NODE)
    assert len(summary) == len(refused) + 2
    # nothing changed in the cluster
    assert not cordoned(maintenance, NODE) and vmis(maintenance) == before

    verbose = run_playbook(maintenance, MAINTENANCE, {"maintenance_nodes": [NODE]}, expect_failure=True, name="refused-v", options=("-v",))
    shown = verbose.stdout.split("Show the whole result of the step that failed (-v)", 1)[1]
    assert '"problems": [' in shown and all('"{0}"'.format(vm) in shown for vm, _option in refused)
    assert not cordoned(maintenance, NODE)


def test_a_drain_whose_migration_fails_writes_its_report_first_and_stops_short(maintenance, tmp_path):
    """Last on this simulator: it cordons worker-1 and moves VMs."""
    for kind in ("vm", "vmi"):
        maintenance.kubectl("annotate", kind, "vm-live", "-n", "vms", "--overwrite", "kubesim.io/migration=fail")
    reports = tmp_path / "missing" / "reports"
    run = run_role(maintenance, "node_maintenance", {"node_maintenance_node": NODE, "node_maintenance_timeout": 60,
                                                     "node_maintenance_report_dir": str(reports),
                                                     **{ROLE_OPTION.format(option): True for option in PLAYBOOK_OPTION}},
                   expect_failure=True, fact="node_maintenance_result", name="drain-fails")
    summary = assert_short(printed_failure(run.stdout))
    assert summary[0] == "Drain of {0} did not finish; {0} stays cordoned:".format(NODE)
    [line] = [line for line in summary if line.startswith("- vms/vm-live: failed: migration kubevirt-evacuation-")]
    assert "simulated failure (kubesim.io/migration=fail)" in line  # KubeVirt's reason, libvirt's wrapper left out
    assert line.endswith("Fix: the cause, then run again (it waits for VMs KubeVirt still evacuates).")
    assert any(line.startswith("Moved: ") and "still on the node: " in line and "vms/vm-live" in line for line in summary)
    # the report directory was created, the report written before the failure with the drain's whole result
    report_file = reports / "node-maintenance-{0}.json".format(NODE)
    assert summary[-1] == "Full result: node_maintenance_drain (-v prints it); {0}".format(report_file)
    report = json.loads(report_file.read_text())
    assert report == run.result and report["failure"]["step"] == "drain" and report["drained"] is False
    drained = report["failure"]["result"]
    [live] = [vm for vm in drained["vms"] if vm["name"] == "vm-live"]
    assert live["result"] == "failed" and "simulated failure (kubesim.io/migration=fail)" in live["reason"]
    assert drained["resume"] and drained["msg"].startswith("Drain of {0} did not finish".format(NODE))
    assert cordoned(maintenance, NODE)


# ------------------------------------------------------------------------------------------ rebalance
@pytest.fixture(scope="module")
def two_workers_suspended(kubesim_factory):
    return kubesim_factory("rebalance-two-workers", suspend=True)


def policy_state(sim) -> tuple:
    configmap = sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")
    return configmap["metadata"]["resourceVersion"], len(sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"])


def test_a_threshold_above_its_target_is_refused_naming_the_variables_and_nothing_is_written(two_workers_suspended, tmp_path):
    sim = two_workers_suspended
    before = policy_state(sim)
    run = run_role(sim, "descheduler_rebalance", {
        "descheduler_rebalance_preflight": False, "descheduler_rebalance_nodes": ["worker-a", "worker-b"],
        "descheduler_rebalance_vm_labels": {"app": "desched-test"}, "descheduler_rebalance_backup_dir": str(tmp_path / "backups"),
        "descheduler_rebalance_thresholds": {"cpu": 80}, "descheduler_rebalance_target_thresholds": {"cpu": 70}},
        expect_failure=True, name="threshold-above-target")
    summary = assert_short(printed_failure(run.stdout))
    assert summary[0].startswith("The policy was refused, nothing was written (")
    [line] = [line for line in summary if "args.thresholds.cpu" in line]
    assert "(from descheduler_rebalance_thresholds; playbook: rebalance_thresholds)" in line and " Fix: " in line and "(80)" in line
    assert summary[-1] == "Full result: descheduler_rebalance_planned (-v prints it)"
    assert policy_state(sim) == before and not (tmp_path / "backups").exists()


def test_backups_go_to_directories_made_private_and_a_parent_that_exists_keeps_its_mode(two_workers_suspended, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    result = run_role(two_workers_suspended, "descheduler_backup", {"descheduler_backup_dir": str(shared / "backups"),
                                                                    "descheduler_backup_cluster_name": "lab"}, name="backup").result
    cluster_dir = shared / "backups" / "lab"
    assert Path(result["path"]).parent == cluster_dir and Path(result["path"]).is_file()
    modes = {path: path.stat().st_mode & 0o777 for path in (shared, shared / "backups", cluster_dir)}
    assert modes == {shared: 0o755, shared / "backups": 0o700, cluster_dir: 0o700}


def test_a_failed_migration_in_validation_is_summed_up_per_vm_and_the_evidence_keeps_it_whole(two_workers_suspended, tmp_path):
    sim = two_workers_suspended
    apply_page_policy(sim)
    set_fault(sim, "fail")
    evidence = tmp_path / "missing" / "evidence"
    run = run_role(sim, "rebalance_validate", {"rebalance_validate_trigger": "create", "rebalance_validate_timeout": 15,
                                               "rebalance_validate_evidence_dir": str(evidence)}, expect_failure=True, name="validate-fails")
    summary = assert_short(printed_failure(run.stdout))
    assert summary[0].startswith("Rebalance validation failed (migration_failed) in cycle 1: ") and "did not pass the checks" in summary[0]
    written = json.loads((evidence / "rebalance_validate.json").read_text())
    assert written == run.result and written["stopped_because"] == "migration_failed"
    failed = [vm for vm in written["cycles"][0]["verify"]["vms"] if vm["verdict"] not in ("pass", "not_moved")]
    assert failed and "simulated failure (kubesim.io/migration=fail)" in failed[0]["reason"]
    for vm in failed:
        [line] = [line for line in summary if line.startswith("- {0}/{1}: {2}: ".format(vm["namespace"], vm["name"], vm["verdict"]))]
        assert "simulated failure (kubesim.io/migration=fail)" in line or vm["verdict"] == "timeout", line
    assert "simulated failure" in written["failure"]   # the role's result keeps the whole reasons
    assert summary[-1] == "Full result: rebalance_validate_failed_result (-v prints it); {0}/rebalance_validate.json".format(evidence)
