"""Progress while waiting, as a person sees it. `playbooks/maintenance.yml` draining six VMs, run by ansible-runner as AWX
runs a job (its awx_display callback prints what ansible-playbook prints, and turns each line into a job event):
one line per migration as it finishes (from, to, seconds) in the order they finished, one line per verified VM,
each a job event of its own during its task; the nodes from AWX's textarea, the reports in a directory that did
not exist. A long drain prints what it still awaits at least every `progress_every` seconds; the task's result is
the one a single call gives."""
from __future__ import annotations

import json
import re
import time

import ansible_runner

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import ARG_SPEC, KubevirtNodeDrainOptions, run

from .ansible_run import ansible_env, connection_vars, localhost_inventory, short_temp_dir
from .conftest import ROOT, running_kubesim
from .drain_scenario import write_scenario
from .module_call import run_service

pytestmark = pytest.mark.simulator

MIGRATED = re.compile(r"^\[localhost\] worker-1: vms/(vm-\d+) migrated worker-1 -> (worker-[23]) in [\d.]+ s \((\d) of 6 done\)$")
VERIFIED = re.compile(r"^\[localhost\] vms/(vm-\d+) passed the checks: worker-1 -> (worker-[23]) .*\((\d) of 6 decided\)$")


@pytest.fixture(scope="module")
def six_vms(tmp_path_factory):
    home = tmp_path_factory.mktemp("six-vms")
    with running_kubesim(str(write_scenario(home / "six.yaml", count=6, time_scale=20)), home / "sim") as sim:
        yield sim


@pytest.fixture(scope="module")
def maintenance_run(six_vms, tmp_path_factory):
    """The maintenance playbook through ansible-runner: the runner, its events, and where the reports were to go."""
    home = tmp_path_factory.mktemp("runner")
    data, workdir, reports = home / "data", home / "work", home / "not" / "there" / "yet"
    data.mkdir()
    env = ansible_env(workdir, short_temp_dir(home))
    variables = {"maintenance_nodes_text": "worker-1\n", "maintenance_report_dir": str(reports)}  # as AWX's textarea gives it
    runner = ansible_runner.run(private_data_dir=str(data), playbook=str(ROOT / "playbooks" / "maintenance.yml"),
                                inventory=str(localhost_inventory(workdir)), quiet=True, extravars=connection_vars(six_vms, variables),
                                envvars={k: env[k] for k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_HOME", "ANSIBLE_NOCOLOR", "TMPDIR", "PATH")})
    return {"runner": runner, "stdout": runner.stdout.read(), "events": list(runner.events), "reports": reports}


@pytest.fixture(scope="module")
def maintenance_output(maintenance_run) -> str:
    assert maintenance_run["runner"].rc == 0, maintenance_run["stdout"]
    return maintenance_run["stdout"]


def task_output(stdout: str, task: str) -> list:
    """The lines printed under the task whose header contains `task`, up to the next header."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("TASK [") and task in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("TASK [", "PLAY RECAP"))), len(lines))
    return lines[start + 1:end]


def test_a_drain_of_six_vms_prints_six_migration_lines_in_the_order_they_finished(six_vms, maintenance_output):
    lines = [line for line in task_output(maintenance_output, "Drain (cordon") if MIGRATED.match(line)]
    assert len(lines) == 6, maintenance_output
    found = [MIGRATED.match(line).groups() for line in lines]
    assert [int(number) for _vm, _to, number in found] == [1, 2, 3, 4, 5, 6]
    vmis = {v["metadata"]["name"]: v for v in six_vms.kubectl_json("get", "vmi", "-n", "vms")["items"]}
    assert sorted(vm for vm, _to, _n in found) == sorted(vmis)
    for vm, to, _number in found:
        assert vmis[vm]["status"]["nodeName"] == to  # the line says where the VM is now
    ends = {}
    for vmim in six_vms.kubectl_json("get", "vmim", "-n", "vms")["items"]:
        if vmim["status"].get("phase") == "Succeeded":
            ends[vmim["spec"]["vmiName"]] = vmim["status"]["migrationState"]["endTimestamp"]
    order = [ends[vm] for vm, _to, _n in found]
    assert order == sorted(order), "lines not in the order the migrations ended: {0}".format(list(zip(found, order)))


def test_the_verification_prints_one_line_per_vm_and_the_play_says_nothing_else_while_waiting(maintenance_output):
    verified = [VERIFIED.match(line) for line in task_output(maintenance_output, "Verify the migrated VMs")]
    assert sorted(int(m.group(3)) for m in verified if m) == [1, 2, 3, 4, 5, 6], maintenance_output
    # the drain task shows its lines and its one result line, no JSON
    drain = task_output(maintenance_output, "Drain (cordon")
    assert [line for line in drain if line.strip() and not MIGRATED.match(line)] == ["changed: [localhost]"]


def test_awx_job_output_carries_each_line_as_an_event_while_the_drain_runs(maintenance_run, maintenance_output):
    events = maintenance_run["events"]
    drain_start = next(i for i, e in enumerate(events) if e["event"] == "playbook_on_task_start"
                       and "Drain (cordon" in e["event_data"].get("task", ""))
    drain_end = next(i for i, e in enumerate(events) if i > drain_start and e["event"] == "runner_on_ok")
    lines = [e for e in events[drain_start:drain_end] if MIGRATED.match(e.get("stdout", ""))]
    assert [MIGRATED.match(e["stdout"]).group(3) for e in lines] == ["1", "2", "3", "4", "5", "6"], [e.get("stdout") for e in events]
    assert all(e["event"] == "verbose" for e in lines)


def test_the_nodes_from_the_survey_textarea_are_drained_and_reported_into_a_new_directory(maintenance_run, maintenance_output):
    reports = maintenance_run["reports"]
    cluster = json.loads((reports / "maintenance-localhost.json").read_text())
    node = json.loads((reports / "node-maintenance-worker-1.json").read_text())
    assert node["drained"] and len(node["moved"]) == 6 and cluster["nodes"]["worker-1"]["moved"] == node["moved"]
    assert "does not exist" not in maintenance_output


def test_a_long_drain_says_what_it_awaits_at_least_every_progress_every_seconds(tmp_path):
    # three VMs, one migration at a time, each a few seconds long: 2 s between status lines, checked over ~10 s
    with running_kubesim(str(write_scenario(tmp_path / "three.yaml", count=3, time_scale=3)), tmp_path / "sim") as sim:
        shown = []
        params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, node="worker-1", timeout=120, max_parallel=1, progress_every=2)
        started = time.monotonic()
        result = run_service(run, KubevirtNodeDrainOptions, params, show=lambda line: shown.append((time.monotonic(), line)))
    assert result["drained"] and sorted(result["migrated"]) == ["vms/vm-00", "vms/vm-01", "vms/vm-02"], result
    assert result["peak_in_flight"] == 1 and result["waited_seconds"] > 5  # the wait spanned many calls
    times = [started] + [when for when, _line in shown]
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    assert max(gaps) < 2 + 2, list(zip(gaps, [line for _w, line in shown]))  # the interval, and a call's start-up
    awaiting = [line for _w, line in shown if " awaiting " in line]
    assert len(awaiting) >= 2, shown
    assert all(re.match(r"^worker-1: \d+ of 120 s; awaiting [123] of 3: vms/vm-0\d \((migrating|queued)", line) for line in awaiting), awaiting
    assert [line for _w, line in shown if " migrated " in line] == [line for line in result["progress"]["lines"] if " migrated " in line]
    assert "resume" not in result and "resume" not in result["progress"]
