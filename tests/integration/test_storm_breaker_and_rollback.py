"""The issue's storm breaker acceptance on `flapping-close-thresholds` with its CronJob running (a run every 5 s, each
evicting vm-flap): the VM's live migrations fail (the simulator's `kubesim.io/migration: fail` on the VM), KubeVirt's
evacuation retries them, and the scheduled cooldown job (playbooks/cooldown.yml, as AWX runs it) suspends the CronJob
once `cooldown_max_failed_migrations` migrations failed and fails saying why; the next job, after the cause is fixed,
marks the VM that moved and still fails while the breaker holds; then the rollback (playbooks/rollback.yml) lifts
every cooldown mark and undoes the breaker. The failures are counted from a watch (support/churn.py)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import COOLDOWN_UNTIL, PREFER_NO_EVICTION
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.storm_breaker import BREAKER_RECORD, BREAKER_RESET
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_storm_breaker import (
    ARG_SPEC,
    DeschedulerStormBreakerOptions,
    run as breaker_service,
)

from support.churn import MigrationWatch, parse_time
from support.simulator import ROOT
from support.waiting import wait_for

from .ansible_run import run_playbook

pytestmark = pytest.mark.simulator

NAMESPACE = "desched-test"
VM = "vm-flap"
MAX_FAILED = 3
FAULT = "kubesim.io/migration"
COOLDOWN_VARS = {"cooldown_namespaces": [NAMESPACE], "cooldown_period": "10m", "cooldown_max_failed_migrations": MAX_FAILED}


@pytest.fixture(scope="module")
def flapping(kubesim_factory):
    """The CronJob running, vm-flap running on worker-a and every migration of it failing from the start."""
    sim = kubesim_factory("flapping-close-thresholds")
    sim.kubectl("annotate", "vm", VM, "-n", NAMESPACE, FAULT + "=fail")
    wait_for(lambda: (sim.kubectl_json("get", "vmi", VM, "-n", NAMESPACE).get("status") or {}).get("phase") == "Running", timeout=30,
             what="vm-flap to run")
    return sim


@pytest.fixture(scope="module")
def watch(flapping):
    with MigrationWatch(flapping, NAMESPACE) as watching:
        yield watching


def cronjob(sim) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")


def pausing_patches(sim) -> list:
    """The ACP ResourcePatches that hold the CronJob's suspend (kubectl's edits of a chart object are recorded so)."""
    return [p["metadata"]["name"] for p in sim.kubectl_json("-n", "descheduler", "get", "resourcepatches")["items"]
            if p["spec"]["target"]["kind"] == "CronJob" and [op["path"] for op in p["spec"]["jsonPatch"]] == ["/spec/suspend"]]


def marked_launchers(sim) -> dict:
    """Pod -> our cooldown annotations, for every Pod in the cluster that carries one."""
    found = {}
    for pod in sim.kubectl_json("get", "pods", "-A")["items"]:
        notes = pod["metadata"].get("annotations") or {}
        if COOLDOWN_UNTIL in notes:
            found["{0}/{1}".format(pod["metadata"]["namespace"], pod["metadata"]["name"])] = {k: notes[k] for k in (PREFER_NO_EVICTION, COOLDOWN_UNTIL)}
    return found


def reports(directory, pattern: str) -> list:
    return [json.loads(path.read_text()) for path in sorted((directory / "localhost").glob(pattern))]


def test_the_cooldown_job_suspends_the_cronjob_after_the_configured_failures_and_says_why(flapping, watch, tmp_path_factory):
    wait_for(lambda: len(watch.moves("Failed").get(VM, [])) >= MAX_FAILED, timeout=40, what=f"{MAX_FAILED} failed migrations of {VM}")
    failed = [m.name for m in watch.moves("Failed")[VM]]
    # below its limit the breaker leaves the Descheduler alone
    params = spec_params(ARG_SPEC, kubeconfig=flapping.kubeconfig, namespaces=[NAMESPACE], max_failed_migrations=len(failed) + 5, wait=False)
    below = breaker_service(DeschedulerStormBreakerOptions.from_params(params), False)
    assert below["tripped"] is False and below["changed"] is False and cronjob(flapping)["spec"]["suspend"] is False

    reports_dir = tmp_path_factory.mktemp("cooldown-reports")
    run = run_playbook(flapping, ROOT / "playbooks" / "cooldown.yml", dict(COOLDOWN_VARS, reports_dir=str(reports_dir)),
                       expect_failure=True, name="cooldown-trips")
    tripped_at = parse_time(json.loads(cronjob(flapping)["metadata"]["annotations"][BREAKER_RECORD])["tripped_at"])
    [written] = reports(reports_dir, "cooldown-*.json")
    breaker = written["result"]["breaker"]
    assert written["outcome"]["status"] == "failed" and breaker["tripped_now"] is True
    assert breaker["message"].startswith("Storm breaker tripped: {0} failed migrations within 1h (max_failed_migrations {1}): ".format(
        len(breaker["failed_migrations"]), MAX_FAILED)), breaker["message"]
    assert len(breaker["failed_migrations"]) >= MAX_FAILED and set(failed) <= {m["name"] for m in breaker["failed_migrations"]}
    assert all("simulated failure" in m["failure_reason"] for m in breaker["failed_migrations"])
    # the job's output says why and how to go on
    assert breaker["message"].split(": ")[0] in run.stdout and failed[0] in run.stdout and "descheduler_storm_breaker state=reset" in run.stdout
    paused = cronjob(flapping)
    record = json.loads(paused["metadata"]["annotations"][BREAKER_RECORD])
    assert paused["spec"]["suspend"] is True and record["suspend"] is False and "failed migrations" in record["reason"]
    assert len(pausing_patches(flapping)) == 1  # ACP keeps the pause as a ResourcePatch

    # the cause fixed: KubeVirt's evacuation retries the accepted eviction and the VM moves, while no run starts
    succeeded = len(watch.moves().get(VM, []))
    flapping.kubectl("annotate", "vm", VM, "-n", NAMESPACE, FAULT + "-")
    wait_for(lambda: len(watch.moves().get(VM, [])) > succeeded, timeout=40, what=f"a succeeded migration of {VM}")
    jobs = flapping.kubectl_json("-n", "descheduler", "get", "jobs")["items"]
    assert all(parse_time(job["metadata"]["creationTimestamp"]) <= tripped_at for job in jobs), [j["metadata"]["name"] for j in jobs]


def test_the_next_job_marks_the_vm_that_moved_and_fails_while_the_breaker_holds(flapping, watch, tmp_path_factory):
    reports_dir = tmp_path_factory.mktemp("cooldown-reports")
    run = run_playbook(flapping, ROOT / "playbooks" / "cooldown.yml", dict(COOLDOWN_VARS, reports_dir=str(reports_dir)),
                       expect_failure=True, name="cooldown-holds")
    [written] = reports(reports_dir, "cooldown-*.json")
    assert written["result"]["breaker"]["tripped"] is True and written["result"]["breaker"]["tripped_now"] is False
    assert "is paused" in written["result"]["breaker"]["message"] and "is paused" in run.stdout
    moved = watch.moves()[VM][-1]
    [mark] = written["result"]["marked"]
    assert (mark["vm"], mark["node"], mark["last_migration"]) == (VM, moved.target, moved.ended.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert list(marked_launchers(flapping)) == ["{0}/{1}".format(NAMESPACE, mark["pod"])]
    assert cronjob(flapping)["spec"]["suspend"] is True


def test_the_rollback_lifts_every_cooldown_mark_and_undoes_the_breaker(flapping, tmp_path_factory):
    before = marked_launchers(flapping)
    assert before
    # This policy does not honour the marks (no noEvictionPolicy: Mandatory), so the CronJob the rollback resumes evicts
    # vm-flap at once, and a finished migration takes the marked launcher away before the rollback's next step lifts its
    # mark (on a busy machine). Held, the migration keeps that launcher until the lift, however slow the machine is.
    flapping.kubectl("annotate", "vm", VM, "-n", NAMESPACE, FAULT + "=hang")
    reports_dir = tmp_path_factory.mktemp("rollback-reports")
    run_playbook(flapping, ROOT / "playbooks" / "rollback.yml", {"reports_dir": str(reports_dir), "backup_dir": str(reports_dir / "backups"),
                                                                 "rollback_timeout": 60}, name="rollback")
    [written] = reports(reports_dir, "rollback-*.json")
    rollback = written["rollback"]
    assert written["status"] == "passed" and rollback["storm_breaker_reset"] is True and rollback["resumed"] is True
    assert sorted(rollback["cooldown_marks_lifted"]) == ["{0}/{1}".format(NAMESPACE, VM)] * len(before)
    assert marked_launchers(flapping) == {}
    resumed = cronjob(flapping)
    notes = resumed["metadata"].get("annotations") or {}
    assert resumed["spec"]["suspend"] is False and BREAKER_RECORD not in notes and notes.get(BREAKER_RESET) and pausing_patches(flapping) == []
