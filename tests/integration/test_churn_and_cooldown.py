"""The issue's churn acceptance on `flapping-close-thresholds` (memory thresholds 50 / 52 with a VM worth 3.54 points:
vm-flap ping-pongs between worker-a and worker-b, one migration per run): descheduler_policy's forecast predicts the
flapping and refuses the policy before anything is written; forced, with noEvictionPolicy Mandatory and the migration
cooldown between runs, no VM migrates twice within its cooldown over 10 Descheduler runs, while the same 10 runs
without the cooldown move vm-flap every run, back and forth as the forecast said.

The CronJob is suspended and the test starts each run (descheduler_run trigger=create) every CYCLE_SECONDS, with
vm_migration_cooldown just before it, as a schedule between the CronJob's runs would; COOLDOWN stands for the
15 minutes of a real cluster. The migrations are counted from what a watch saw (support/churn.py), not from a list at
the end: KubeVirt keeps only the five newest finished migrations of a VMI."""
from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import COOLDOWN_UNTIL
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_cooldown import ARG_SPEC, VmMigrationCooldownOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_cooldown import run as cooldown_service

from support.churn import MigrationWatch, gaps, parse_time
from support.simulator import with_descheduler_suspended
from support.waiting import wait_for

from .module_call import call_module, run_service

pytestmark = pytest.mark.simulator

NAMESPACE = "desched-test"
VM = "vm-flap"
CYCLES = 10
CYCLE_SECONDS = 2.0  # one Descheduler run every 2 s: the scenario's */2 CronJob at timeScale 24 runs every 5 s
COOLDOWN = 4  # seconds, doubled for each further migration within the history window
# the scenario's ConfigMap policy, as descheduler_policy renders it, with the cooldown's noEvictionPolicy
FLAPPING = {"nodes": ["worker-a", "worker-b"], "vm_labels": {"app": "desched-test"}, "thresholds": {"memory": 50},
            "target_thresholds": {"memory": 52}, "node_fit": False, "max_pods_to_evict_per_node": 1, "max_pods_to_evict_per_namespace": 1,
            "max_pods_to_evict_total": 1, "min_threshold_gap": 2, "no_eviction_policy": "Mandatory"}
ALTERNATING = [("worker-a", "worker-b"), ("worker-b", "worker-a")]


@pytest.fixture(scope="module")
def flapping(kubesim_factory, tmp_path_factory):
    """The CronJob suspended from the start (the tests start every run themselves), vm-flap running on worker-a."""
    sim = kubesim_factory(with_descheduler_suspended(tmp_path_factory.mktemp("flapping"), "flapping-close-thresholds"))
    wait_for(lambda: (sim.kubectl_json("get", "vmi", VM, "-n", NAMESPACE).get("status") or {}).get("phase") == "Running", timeout=30,
             what="vm-flap to run")
    sim.settle()
    assert sim.kubectl_json("get", "vmi", VM, "-n", NAMESPACE)["status"]["nodeName"] == "worker-a"
    return sim


def policy_args(sim, backups: Path, **more) -> dict:
    return {"kubeconfig": sim.kubeconfig, "backup_dir": str(backups), "cluster_name": "workload", **FLAPPING, **more}


def configmap(sim) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")


def forecast_path(forecast: dict) -> list:
    """(source, destination) of each planned migration of the VM, run after run."""
    return [(e["source"], e["destination"]) for cycle in forecast["cycles"] for e in cycle["evictions"] if e["vm"] == VM]


def cooldown(sim, state: str = "present") -> dict:
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, namespaces=[NAMESPACE], cooldown=COOLDOWN, state=state)
    return run_service(cooldown_service, VmMigrationCooldownOptions, params)


def requested(run: dict) -> int:
    return run["totals"]["eviction_requests"] + run["totals"]["total_evicted"]


def descheduler_cycles(sim, watch: MigrationWatch, with_cooldown: bool) -> list:
    """CYCLES runs, one every CYCLE_SECONDS, each after its cooldown (with_cooldown); per run: the VM's mark before it
    (vm_migration_cooldown's entry, None when unmarked) and how many evictions it requested."""
    cycles = []
    for _cycle in range(CYCLES):
        began = time.monotonic()
        marked = None
        if with_cooldown:
            result = cooldown(sim)
            marked = next((entry for entry in result["marked"] + result["kept"] if entry["vm"] == VM), None)
        before = len(watch.objects())
        run = call_module("descheduler_run", {"kubeconfig": sim.kubeconfig, "trigger": "create", "timeout": 60})
        assert not run["failed"], run.get("msg")
        watch.wait_final(at_least=before + requested(run))
        cycles.append({"mark": marked, "requested": requested(run)})
        time.sleep(max(0.0, began + CYCLE_SECONDS - time.monotonic()))
    return cycles


def test_the_forecast_predicts_the_flapping_and_refuses_the_policy_before_anything_is_written(flapping, tmp_path):
    before = configmap(flapping)
    refused = call_module("descheduler_policy", policy_args(flapping, tmp_path / "backups"))
    assert refused["failed"] and refused["error"]["type"] == "ForecastRefused", refused
    assert refused["msg"].startswith("forecast: the forecast swaps worker-a from overutilized to underutilized with run 1's migrations "
                                     "(vm-flap worker-a -> worker-b), so a later run moves VMs back")
    assert "make it at least 4" in refused["msg"] and refused["msg"].endswith("set force: true to apply anyway")
    forecast = refused["error"]["result"]["forecast"]
    assert (forecast["converged"], forecast["cycles_to_converge"], forecast["migrations"], len(forecast["cycles"])) == (False, None, 10, 10)
    assert forecast_path(forecast) == ALTERNATING * 5
    assert forecast["moved_back"][0] == {"vm": VM, "namespace": NAMESPACE, "cycle": 2, "nodes": ["worker-a", "worker-b", "worker-a"]}
    assert {(s["node"], s["cycle"]) for s in forecast["swaps"]} >= {("worker-a", 1), ("worker-b", 1)}
    after = configmap(flapping)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"] and after["data"] == before["data"]
    assert not (tmp_path / "backups").exists()
    assert [p for p in flapping.kubectl_json("-n", "descheduler", "get", "resourcepatches")["items"] if p["spec"]["target"]["kind"] == "ConfigMap"] == []


def test_forced_with_the_cooldown_no_vm_migrates_twice_within_its_cooldown_over_ten_runs(flapping, tmp_path):
    forced = call_module("descheduler_policy", policy_args(flapping, tmp_path / "backups", force=True))
    assert not forced["failed"] and forced["changed"] and Path(forced["backup_path"]).is_file()
    assert "forecast_refusal_forced" in [f["code"] for f in forced["findings"]]
    assert "noEvictionPolicy: Mandatory" in configmap(flapping)["data"]["policy.yaml"]

    with MigrationWatch(flapping, NAMESPACE) as watch:
        cycles = descheduler_cycles(flapping, watch, with_cooldown=True)
    moves = watch.moves()[VM]
    # a cooldown, not a ban: the VM moved again once each cooldown was over, fewer times than there were runs
    assert 2 <= len(moves) < CYCLES, moves
    assert [(m.source, m.target) for m in moves] == (ALTERNATING * CYCLES)[:len(moves)]
    # a run that started while the VM was marked requested nothing
    assert all(c["requested"] == 0 for c in cycles if c["mark"]), cycles
    # each move started at or after the end of the cooldown the move before it earned: COOLDOWN, doubled for each one more
    earned = [COOLDOWN * 2 ** n for n in range(len(moves) - 1)]
    assert all(gap >= cooldown for gap, cooldown in zip(gaps(moves), earned)), (gaps(moves), earned)
    # and the marks said so: until = the migration's end + its cooldown
    ends = {m.ended.strftime("%Y-%m-%dT%H:%M:%SZ"): index for index, m in enumerate(moves)}
    marks = [c["mark"] for c in cycles if c["mark"] and c["mark"]["last_migration"] in ends]
    assert marks, cycles
    for mark in marks:
        index = ends[mark["last_migration"]]
        assert mark["cooldown_seconds"] == COOLDOWN * 2 ** index
        assert parse_time(mark["until"]) == moves[index].ended + datetime.timedelta(seconds=mark["cooldown_seconds"])


def test_without_the_cooldown_the_same_runs_move_the_vm_back_and_forth_every_run(flapping):
    """After the test above: the same policy (Mandatory) in place, the marks lifted, no cooldown between the runs."""
    assert [entry["vm"] for entry in cooldown(flapping, state="absent")["lifted"]] in ([], [VM])
    assert not any(COOLDOWN_UNTIL in (pod["metadata"].get("annotations") or {}) for pod in flapping.kubectl_json("get", "pods", "-A")["items"])
    start = flapping.kubectl_json("get", "vmi", VM, "-n", NAMESPACE)["status"]["nodeName"]
    with MigrationWatch(flapping, NAMESPACE) as watch:
        cycles = descheduler_cycles(flapping, watch, with_cooldown=False)
    moves = watch.moves()[VM]
    # one migration per run, back and forth, as the forecast of the first test planned them (10 in 10 runs)
    assert [c["requested"] for c in cycles] == [1] * CYCLES and len(moves) == CYCLES
    first = ALTERNATING.index(next(pair for pair in ALTERNATING if pair[0] == start))
    assert [(m.source, m.target) for m in moves] == (ALTERNATING * CYCLES)[first:first + CYCLES]
    # every move came sooner after the one before than the first cooldown would have allowed
    assert max(gaps(moves)) < COOLDOWN, gaps(moves)
