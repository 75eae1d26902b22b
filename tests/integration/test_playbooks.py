"""The collection's playbooks run with ansible-playbook against the simulator, as an operator runs them: the
happy path of playbooks/rebalance.yml on `rebalance-two-workers` (a VM moved from worker-a to worker-b, the
five checks in the report, rolled back at the end); refusals before any change (missing feature gate on
`old-package`, a policy the module refuses, variables that contradict each other); the fleet rollout over three
simulated clusters where the second one's migrations fail (rolled back, policy restored, the CronJob resumed only
once the migrations were final; the rollout stops before the third); and `--check` on every playbook changing
nothing."""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
import yaml

from .ansible_run import run_playbook_file
from .conftest import ROOT

pytestmark = pytest.mark.simulator

PLAYBOOKS = ROOT / "playbooks"
SIMULATOR_VARS = yaml.safe_load((ROOT / "inventories" / "simulator" / "group_vars" / "all.yml").read_text())
VMS = ("vm-1", "vm-2")


@pytest.fixture
def clusters(fresh_kubesim):
    """Start simulators by scenario; all are stopped at the end of the test."""
    return lambda scenario="rebalance-two-workers": fresh_kubesim(scenario)


def inventory(tmp_path: Path, hosts: dict, groups: dict | None = None, drop: tuple = (), host_extra: dict | None = None,
              **extra) -> Path:
    """An inventory of clusters (name -> simulator) with the simulator inventory's rebalance variables (less
    `drop`, plus `extra`)."""
    host_vars = {name: {"kubeconfig": sim.kubeconfig, "context": "workload", "global_context": "global",
                        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
                 for name, sim in hosts.items()}
    for name, more in (host_extra or {}).items():
        host_vars[name].update(more)
    variables = {key: value for key, value in {**SIMULATOR_VARS, **extra}.items() if key not in drop}
    doc = {"all": {"vars": variables, "hosts": host_vars,
                   "children": {group: {"hosts": {name: None for name in names}} for group, names in (groups or {}).items()}}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def snapshot(sim) -> dict:
    """What a change would touch: the policy ConfigMap, the CronJob's spec, ResourcePatches, migrations, VMIs."""
    cronjob = sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")
    configmap = sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")
    return {"configmap": configmap["metadata"]["resourceVersion"], "policy": configmap["data"]["policy.yaml"],
            "cronjob": (cronjob["metadata"]["generation"], cronjob["spec"].get("suspend")),
            "resourcepatches": names(sim, "resourcepatch", "-n", "descheduler"),
            "vmims": names(sim, "vmim", "-A"),
            "vmis": {i["metadata"]["name"]: (i["metadata"]["uid"], i["status"].get("nodeName"))
                     for i in sim.kubectl_json("-n", "desched-test", "get", "vmi")["items"]}}


def names(sim, kind: str, *scope: str) -> list:
    return sorted(item["metadata"]["name"] for item in sim.kubectl_json("get", kind, *scope)["items"])


def report(tmp_path: Path, cluster: str, playbook: str = "rebalance") -> dict:
    found = sorted((tmp_path / "reports" / cluster).glob(f"{playbook}-*.json"))
    assert found, f"no {playbook} report for {cluster} under {tmp_path / 'reports'}"
    return json.loads(found[-1].read_text())


def test_rebalance_moves_a_vm_proves_it_and_rolls_back_at_the_end(tmp_path, clusters):
    sim = clusters()
    chart_policy = snapshot(sim)["policy"]
    run_playbook_file(PLAYBOOKS / "rebalance.yml", inventory(tmp_path, {"lab": sim}), tmp_path,
                      extra_vars={"rebalance_rollback_at_end": True, "rebalance_trigger": "create"})

    result = report(tmp_path, "lab")
    assert result["status"] == "passed" and not result["check_mode"]
    before = {n.get("name", n.get("node")): n["category"] for n in result["classification"]["before"]["nodes"]}
    assert before["worker-a"] == "overutilized" and before["worker-b"] == "underutilized"
    assert {n["name"] for n in result["classification"]["after"]["nodes"]} == {"worker-a", "worker-b"}
    assert result["moved"], result
    move = result["moved"][0]
    assert move["vm"] in VMS and move["from"] == "worker-a" and move["to"] == "worker-b"
    migration = sim.kubectl_json("-n", "desched-test", "get", "vmim", move["migration"])
    assert migration["status"]["phase"] == "Succeeded" and migration["spec"]["vmiName"] == move["vm"]
    proved = [vm for vm in result["checks"] if vm["name"] == move["vm"]][-1]
    assert proved["verdict"] == "pass"
    assert all(proved["checks"][check]["result"] == "pass" for check in
               ("node_changed", "migration_succeeded", "uid_unchanged", "running_ready", "old_launcher_gone"))
    assert Path(result["backup"]["path"]).is_file()
    assert result["rollback"]["changed"] and result["policy"]["resource_patch"]

    after = snapshot(sim)
    assert after["resourcepatches"] == [] and after["policy"] == chart_policy and after["cronjob"][1] is False
    markdown = Path(str(next((tmp_path / "reports" / "lab").glob("rebalance-*.md")))).read_text()
    for text in ("## Node classification", "| worker-a | overutilized", "## VMs moved", move["migration"], "## The five checks"):
        assert text in markdown


def test_missing_feature_gate_stops_at_preflight_before_any_change(tmp_path, clusters):
    sim = clusters("old-package")
    before = snapshot(sim)
    process = run_playbook_file(PLAYBOOKS / "rebalance.yml", inventory(tmp_path, {"old": sim}), tmp_path, expect_failure=True)
    assert "EvictionsInBackground" in process.stdout
    assert snapshot(sim) == before
    result = report(tmp_path, "old")
    assert result["status"] == "failed" and result["failed_step"] == "preflight" and not result["rollback"]


def test_refused_policy_changes_nothing(tmp_path, clusters):
    sim = clusters()
    before = snapshot(sim)
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [{
        "name": "vm-rebalance",
        "pluginConfig": [
            {"name": "DefaultEvictor", "args": {"labelSelector": {"matchLabels": {"app": "desched-test"}},
                                                "podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]}}},
            {"name": "LowNodeUtilization", "args": {"thresholds": {"memory": 60}, "targetThresholds": {"memory": 68},
                                                    "evictableNamespaces": {"include": ["desched-test"]}}}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    hosts = inventory(tmp_path, {"lab": sim})
    process = run_playbook_file(PLAYBOOKS / "rebalance.yml", hosts, tmp_path, expect_failure=True,
                                extra_vars={"rebalance_policy": policy})
    assert "only Exclude namespaces can be set" in process.stdout
    assert snapshot(sim) == before
    result = report(tmp_path, "lab")
    assert result["failed_step"] == "apply" and not result["rollback"]


def test_contradictory_variables_are_refused_before_anything_is_read(tmp_path, clusters):
    sim = clusters()
    sim.reset_counters()
    process = run_playbook_file(PLAYBOOKS / "rebalance.yml", inventory(tmp_path, {"lab": sim}), tmp_path, expect_failure=True,
                                extra_vars={"rebalance_thresholds": {"cpu": 80, "memory": 60, "pods": 20}})
    assert "rebalance_thresholds.cpu: 80 is not below rebalance_target_thresholds.cpu (75)" in process.stdout
    assert sim.counters() == {}


class CronJobWatch:
    """Watches the Descheduler CronJob in a thread and records, at each suspend and resume, the phase of every
    migration at that very change (listed at the CronJob event's resourceVersion, so a busy machine that reads late
    reads the same), so that a test can tell whether the CronJob was resumed before the migrations were final. The
    watch is reopened from where it was until `stop()`, however long the run takes; a failure is kept in `error`."""

    REOPEN_SECONDS = 5  # the longest stop() waits for the thread to notice

    def __init__(self, sim, on_suspend=None):
        from kubernetes import client, config, watch
        self.on_suspend = on_suspend
        api = config.new_client_from_config(config_file=sim.kubeconfig, context="workload")
        self.batch, self.custom, self.watch = client.BatchV1Api(api), client.CustomObjectsApi(api), watch.Watch()
        self.transitions: list = []
        self.error: Exception | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _phases(self, resource_version: str) -> dict:
        items = self.custom.list_cluster_custom_object("kubevirt.io", "v1", "virtualmachineinstancemigrations",
                                                       resource_version=resource_version, resource_version_match="Exact")["items"]
        return {item["metadata"]["name"]: (item.get("status") or {}).get("phase") for item in items}

    def _run(self):
        suspended, since = None, None
        try:
            while not self.stopped.is_set():
                for event in self.watch.stream(self.batch.list_namespaced_cron_job, "descheduler", timeout_seconds=self.REOPEN_SECONDS,
                                               **({"resource_version": since} if since else {})):
                    since = event["object"].metadata.resource_version
                    now = bool(event["object"].spec.suspend)
                    if suspended is not None and now != suspended:
                        self.transitions.append(("suspend" if now else "resume", self._phases(since)))
                        if now and self.on_suspend and len(self.transitions) == 1:
                            self.on_suspend()
                    suspended = now
        except Exception as error:  # pylint: disable=broad-exception-caught  # kept for the test's assertion message
            if not self.stopped.is_set():
                self.error = error

    def stop(self):
        self.stopped.set()
        self.watch.stop()
        self.thread.join(timeout=2 * self.REOPEN_SECONDS)


def test_fleet_rollout_stops_at_the_failed_migration_rolls_it_back_and_leaves_the_rest(tmp_path, clusters):
    """Three clusters: the canary passes, the second one's migrations fail (`kubesim.io/migration=fail`): it is
    rolled back (policy restored, the CronJob resumed only once its migrations were final) and the rollout stops
    before the third, which stays untouched."""
    canary, failing, untouched = clusters(), clusters(), clusters()
    failing.kubectl("-n", "desched-test", "annotate", "vmi", *VMS, "kubesim.io/migration=fail")
    chart_policy, before = snapshot(failing)["policy"], snapshot(untouched)
    hosts = inventory(tmp_path, {"east": canary, "west": failing, "north": untouched},
                      groups={"canary": ["east"], "fleet": ["east", "west", "north"]},
                      host_extra={"west": {"rebalance_timeout": 15, "rebalance_rollback_timeout": 90}},
                      rebalance_trigger="create", rebalance_timeout=120)
    # A VMI marked for evacuation stays marked while its migrations fail, and KubeVirt keeps creating new ones (held
    # Pending during the backoff), so "every migration final" only comes once a retry can succeed: the cause is
    # fixed when the rollback suspends the Descheduler, and the rollback must wait for that retry before resuming.
    watcher = CronJobWatch(failing, on_suspend=lambda: failing.kubectl(
        "-n", "desched-test", "annotate", "vmi", *VMS, "kubesim.io/migration-"))
    try:
        # three clusters one after another: over 4 minutes alone, more with a busy core (the timeout only stops a hung run)
        process = run_playbook_file(PLAYBOOKS / "fleet_rollout.yml", hosts, tmp_path, expect_failure=True)
    finally:
        watcher.stop()
    assert "The rollout stops" in process.stdout

    assert report(tmp_path, "east")["status"] == "passed"
    assert snapshot(canary)["resourcepatches"], "the canary keeps its bounded policy"
    failed = report(tmp_path, "west")
    assert failed["status"] == "rolled_back" and failed["failed_step"] == "validate"
    assert "kubesim.io/migration=fail" in failed["error"] and failed["rollback"]["resumed"]
    rolled_back = snapshot(failing)
    assert rolled_back["resourcepatches"] == [] and rolled_back["policy"] == chart_policy and rolled_back["cronjob"][1] is False
    assert [transition[0] for transition in watcher.transitions][:2] == ["suspend", "resume"], (watcher.transitions, watcher.error)
    at_suspend, at_resume = watcher.transitions[0][1], watcher.transitions[1][1]
    assert at_suspend, "a migration was requested before the rollback"
    # KubeVirt garbage-collects finished migrations beyond a few per VMI: gone is final too.
    assert all(at_resume.get(name, "Failed") in ("Succeeded", "Failed") for name in at_suspend), watcher.transitions
    assert snapshot(untouched) == before and not (tmp_path / "reports" / "north").exists()

    summary = json.loads(next((tmp_path / "reports").glob("fleet-*.json")).read_text())
    statuses = {c["cluster"]: c["status"] for c in summary["clusters"]}
    assert statuses == {"east": "passed", "west": "rolled_back", "north": "not reached"}
    assert [c["cluster"] for c in summary["clusters"]] == ["east", "west", "north"]
    assert summary["counts"]["not_reached"] == 1


def test_check_mode_changes_nothing_on_every_playbook(tmp_path, clusters):
    sim = clusters()
    hosts = inventory(tmp_path, {"lab": sim}, groups={"fleet": ["lab"]})
    before = snapshot(sim)
    for playbook in ("rebalance", "rollback", "compat_check", "fleet_rollout"):
        run_playbook_file(PLAYBOOKS / f"{playbook}.yml", hosts, tmp_path / playbook, check=True)
        assert snapshot(sim) == before, playbook
    planned = report(tmp_path / "rebalance", "lab")
    assert planned["status"] == "planned" and planned["check_mode"] and not planned["moved"]
    assert [e["vm"] for e in planned["policy"]["planned_evictions"]][0] in VMS
