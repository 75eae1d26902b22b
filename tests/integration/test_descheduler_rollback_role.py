"""The `descheduler_rollback` role on the simulator (the page's "Stop and Roll Back"): after a bounded policy was
applied with descheduler_policy and migrations are running, it suspends the CronJob, deletes the ResourcePatch so
that the chart's policy comes back, resumes the CronJob only after every migration is final, and a second run
changes nothing; check mode changes nothing. The backup method re-applies descheduler_policy's backup (the policy
parses equal to it) and the CronJob runs again; in Deployment mode the Deployment is at 0 replicas while the role waits
for the migrations, and its replicas come back after."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config, watch

from support.simulator import running_kubesim
from support.waiting import wait_for

from .ansible_run import run_role
from .test_descheduler_policy import policy_text, resource_patches
from .test_descheduler_run import apply_page_policy

pytestmark = pytest.mark.simulator

ROLE = "descheduler_rollback"


@pytest.fixture
def sim(tmp_path):
    with running_kubesim("rebalance-two-workers", tmp_path / "sim") as started:
        yield started


def cronjob(sim) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")


def rollback_vars(tmp_path, **extra) -> dict:
    return {"descheduler_rollback_backup_dir": str(tmp_path / "backups"), "descheduler_rollback_timeout": 60, **extra}


class Timeline:
    """Watches the CronJob's suspend flag and the migrations' phases, with the time each change was seen."""

    def __init__(self, sim):
        self.api = client.ApiClient(config.load_kube_config(sim.kubeconfig) or client.Configuration.get_default_copy())
        self.suspend: list = []      # (time, suspend)
        self.final: dict = {}        # migration -> time it was first seen Succeeded or Failed
        self.seen: dict = {}         # migration -> time it was first seen
        self.unfinished: set = set()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._cronjobs, daemon=True), threading.Thread(target=self._migrations, daemon=True)]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()

    def _cronjobs(self):
        batch = client.BatchV1Api(self.api)
        while not self.stop.is_set():
            for event in watch.Watch().stream(batch.list_namespaced_cron_job, "descheduler", timeout_seconds=5):
                value = bool(event["object"].spec.suspend)
                if not self.suspend or self.suspend[-1][1] != value:
                    self.suspend.append((time.monotonic(), value))

    def _migrations(self):
        custom = client.CustomObjectsApi(self.api)
        while not self.stop.is_set():
            for event in watch.Watch().stream(custom.list_cluster_custom_object, "kubevirt.io", "v1", "virtualmachineinstancemigrations",
                                              timeout_seconds=5):
                name = event["object"]["metadata"]["name"]
                self.seen.setdefault(name, time.monotonic())
                if (event["object"].get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    self.final.setdefault(name, time.monotonic())
                    self.unfinished.discard(name)
                elif name not in self.final:
                    self.unfinished.add(name)


def set_fault(sim, fault: str) -> None:
    for vm in ("vm-1", "vm-2"):
        for kind in ("vm", "vmi"):
            sim.kubectl("annotate", kind, vm, "-n", "desched-test", "--overwrite", "kubesim.io/migration" + ("=" + fault if fault else "-"))


def test_rollback_restores_the_chart_policy_and_resumes_only_after_the_migrations_are_final(sim, tmp_path):
    chart_policy = policy_text(sim)
    set_fault(sim, "hang")  # the Descheduler's evacuations hang until the test cancels them
    applied = apply_page_policy(sim)
    assert applied["changed"] and applied["resource_patch"]["name"] in resource_patches(sim)
    sim.kubectl("-n", "descheduler", "create", "job", "--from=cronjob/descheduler", "run-now")  # no wait for the schedule
    runs = {}
    with Timeline(sim) as timeline:
        wait_for(lambda: timeline.unfinished, timeout=30, what="a migration in flight")
        role = threading.Thread(target=lambda: runs.setdefault("first", run_role(sim, ROLE, rollback_vars(tmp_path))))
        role.start()
        wait_for(lambda: timeline.suspend and timeline.suspend[-1][1], timeout=60, what="the CronJob suspended")
        time.sleep(1.0)
        assert role.is_alive() and cronjob(sim)["spec"]["suspend"] is True  # waiting on the hanging migrations
        set_fault(sim, "")  # KubeVirt's retries of the evacuation succeed
        sim.kubectl("delete", "vmim", "--all", "-n", "desched-test", "--wait=false")
        role.join(60)
    result = runs["first"].result
    assert result["method"] == "resource_patch" and result["changed"] is True
    assert result["suspended"] is True and result["resumed"] is True and result["paused"] is False
    assert result["resource_patches_deleted"] == [applied["resource_patch"]["name"]] and result["policy_restored"] is True
    # cluster state: the chart's policy, no ResourcePatch at all (the policy's and the suspend's are gone), resumed
    assert policy_text(sim) == chart_policy
    assert resource_patches(sim) == []
    assert cronjob(sim)["spec"]["suspend"] is False
    # order: suspended, the migrations in flight then became final, and only then resumed
    assert [value for _at, value in timeline.suspend][-3:] == [False, True, False], timeline.suspend
    suspended_at, resumed_at = timeline.suspend[-2][0], timeline.suspend[-1][0]
    in_flight = [name for name, at in timeline.seen.items() if at < suspended_at and timeline.final.get(name, float("inf")) > suspended_at]
    assert in_flight, (timeline.seen, timeline.final)
    assert all(timeline.final.get(name, float("inf")) <= resumed_at for name in in_flight), (timeline.final, resumed_at)
    # a second run has nothing to do: it does not even suspend
    again = run_role(sim, ROLE, rollback_vars(tmp_path), name="again").result
    assert again["changed"] is False and again["suspended"] is False and again["resumed"] is False
    assert again["resource_patches_deleted"] == [] and again["policy_restored"] is True
    assert cronjob(sim)["spec"]["suspend"] is False and resource_patches(sim) == []


def test_check_mode_changes_nothing(sim, tmp_path):
    applied = apply_page_policy(sim)
    page_policy = policy_text(sim)
    run = run_role(sim, ROLE, rollback_vars(tmp_path), check=True)
    assert run.result["method"] == "resource_patch"
    assert policy_text(sim) == page_policy
    assert resource_patches(sim) == [applied["resource_patch"]["name"]]
    assert cronjob(sim)["spec"]["suspend"] is False
    assert not (tmp_path / "backups").exists() or not list((tmp_path / "backups").iterdir())


def test_a_cronjob_suspended_by_hand_is_resumed_without_a_new_resource_patch(sim, tmp_path):
    sim.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    assert len(resource_patches(sim)) == 1  # ACP recorded the page's suspend
    result = run_role(sim, ROLE, rollback_vars(tmp_path)).result
    assert result["changed"] is True and result["resumed"] is True and result["suspended"] is False
    assert result["resource_patches_deleted"] == []
    assert cronjob(sim)["spec"]["suspend"] is False and resource_patches(sim) == []


def job_names(sim) -> set:
    return {job["metadata"]["name"] for job in sim.kubectl_json("-n", "descheduler", "get", "jobs")["items"]}


def test_backup_method_reapplies_the_backup_and_the_cronjob_runs_again(sim, tmp_path):
    applied = apply_page_policy(sim)
    backup = applied["backup_path"]
    wanted = yaml.safe_load(yaml.safe_load(Path(backup).read_text())["data"]["policy.yaml"])
    assert yaml.safe_load(policy_text(sim)) != wanted  # the page's policy is in force, the backup holds the chart's
    with Timeline(sim) as timeline:
        result = run_role(sim, ROLE, rollback_vars(tmp_path, descheduler_rollback_method="backup", descheduler_rollback_backup_file=backup)).result
        assert [value for _at, value in timeline.suspend][-3:] == [False, True, False], timeline.suspend
    assert result["method"] == "backup" and result["backup_file"] == backup and result["changed"] is True
    assert result["suspended"] is True and result["resumed"] is True and result["policy_restored"] is True
    # the backup is the chart's rendering under the page's ResourcePatch: the restore deletes the override (ACP renders
    # the chart's policy again) rather than pinning the chart's text in a second ResourcePatch
    assert result["resource_patches_deleted"] == [applied["resource_patch"]["name"]] and result["configmap_backup"]  # the page's policy was saved first
    assert resource_patches(sim) == []
    # cluster state: the ConfigMap's policy parses equal to the backup's, the CronJob is resumed and runs again
    assert yaml.safe_load(policy_text(sim)) == wanted
    assert cronjob(sim)["spec"]["suspend"] is False
    assert "CronJob" not in [p["spec"]["target"]["kind"] for p in sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"]]
    known = job_names(sim)
    wait_for(lambda: job_names(sim) - known, timeout=30, what="a Job of the resumed CronJob")


def deployment(sim) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", "deployment", "descheduler")


def descheduler_pods(sim) -> list:
    return sim.kubectl_json("-n", "descheduler", "get", "pods", "-l", "app.kubernetes.io/name=descheduler")["items"]


def test_deployment_mode_scales_to_zero_while_waiting_and_restores_the_replicas(tmp_path):
    with running_kubesim("deployment-mode", tmp_path / "sim") as sim:
        assert deployment(sim)["spec"]["replicas"] == 1
        set_fault(sim, "hang")
        applied = apply_page_policy(sim)
        assert applied["resource_patch"]["name"] in resource_patches(sim)
        # a Deployment's descheduler reads its policy at container start: restart it, as after a policy change
        sim.kubectl("-n", "descheduler", "delete", "pod", "-l", "app.kubernetes.io/name=descheduler", "--wait=false")
        wait_for(lambda: any((m.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                             for m in sim.kubectl_json("get", "vmim", "-n", "desched-test")["items"]),
                 timeout=30, what="a migration in flight")
        runs = {}
        role = threading.Thread(target=lambda: runs.setdefault("first", run_role(sim, ROLE, rollback_vars(tmp_path))))
        role.start()
        wait_for(lambda: deployment(sim)["spec"]["replicas"] == 0, timeout=60, what="the Deployment scaled to 0")
        paused = deployment(sim)
        assert role.is_alive()  # waiting on the hanging migration, the Deployment at 0
        assert paused["metadata"]["annotations"]["kubevirt-ops.io/rollback-replicas"] == "1"
        wait_for(lambda: not descheduler_pods(sim), timeout=30, what="no descheduler Pod")
        set_fault(sim, "")
        sim.kubectl("delete", "vmim", "--all", "-n", "desched-test", "--wait=false")
        role.join(90)
        result = runs["first"].result
        assert result["workload"]["kind"] == "Deployment" and result["suspended"] is True and result["resumed"] is True
        assert result["policy_restored"] is True and result["resource_patches_deleted"] == [applied["resource_patch"]["name"]]
        # cluster state: the replicas are back, the annotation and every ResourcePatch are gone, the descheduler runs
        after = deployment(sim)
        assert after["spec"]["replicas"] == 1
        assert "kubevirt-ops.io/rollback-replicas" not in (after["metadata"].get("annotations") or {})
        assert resource_patches(sim) == []
        wait_for(lambda: descheduler_pods(sim), timeout=30, what="a descheduler Pod again")
