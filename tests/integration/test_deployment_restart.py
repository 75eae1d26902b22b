"""A Descheduler installed as a Deployment (`deployment-mode`: ACP's chart-managed Deployment, `--descheduling-interval`)
reads its policy only when its process starts. One run of playbooks/rebalance.yml with the rollback at the end proves that
the collection makes it read each change: the Pod running at the start is replaced after the apply, the Pod that requested
the eviction started after it and its log classifies by the applied thresholds, the VM the plan predicted moved; after the
rollback a Pod started after the restore runs the chart's policy; the Deployment's template was never edited and no
ResourcePatch is left. descheduler_restart on its own: a second call changes nothing, check mode deletes nothing; as a
user bound only to docs/rbac/descheduler_restart.yaml it succeeds, and without one of those permissions it fails naming
it (before deleting anything, but for the watch that follows the delete)."""
from __future__ import annotations

import threading
import time
import urllib.error

import pytest

from support.rbac import as_user, assert_denied, grant, manifests, rbac_kubesim, without
from support.waiting import wait_for

from .ansible_run import run_ansible_module, run_playbook_file
from .module_call import call_module
from .conftest import ROOT
from .test_playbooks import inventory, report

pytestmark = pytest.mark.simulator

PLAYBOOKS = ROOT / "playbooks"
MODULE = "kubevirt_ops.rebalance.descheduler_restart"
PODS = "/api/v1/namespaces/descheduler/pods?labelSelector=app.kubernetes.io%2Fname%3Ddescheduler"
# LowNodeUtilization's V(1) line of its thresholds: the chart's policy (20 %) and the applied one (the simulator inventory's)
CRITERIA = '"Criteria for a node under utilization" plugin="LowNodeUtilization" ExtensionPoint="Balance" '
CHART_CRITERIA = CRITERIA + 'cpu="20.00%" memory="20.00%" pods="20.00%"'
APPLIED_CRITERIA = CRITERIA + 'cpu="70.00%" memory="60.00%" pods="20.00%"'


class PodLogs:
    """Every descheduler Pod seen while the playbook runs, with the last log read of each (a deleted Pod's log is gone
    from the API, so it is read while the Pod lives)."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.pods: dict = {}
        self.logs: dict = {}
        self.applied_at = None  # when the policy ConfigMap first held the applied policy (its newest managedFields time)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> None:
        configmap = self.sim.request_json("GET", "/api/v1/namespaces/descheduler/configmaps/descheduler")
        if self.applied_at is None and "vm-rebalance" in configmap["data"]["policy.yaml"]:
            self.applied_at = max(entry["time"] for entry in configmap["metadata"]["managedFields"])
        for pod in self.sim.request_json("GET", PODS)["items"]:
            name = pod["metadata"]["name"]
            self.pods.setdefault(name, pod)
            try:
                with self.sim.request("GET", f"/api/v1/namespaces/descheduler/pods/{name}/log?container=descheduler") as answer:
                    self.logs[name] = answer.read().decode()
            except urllib.error.HTTPError:
                pass

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._read()
            except (OSError, ValueError):
                pass
            self.stop.wait(0.3)

    def __enter__(self) -> "PodLogs":
        self._read()
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join(5)
        self._read()


def running_pods(sim) -> list:
    return [p for p in sim.request_json("GET", PODS)["items"]
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def test_a_deployment_install_reads_the_applied_policy_and_the_restored_one(tmp_path, fresh_kubesim):
    sim = fresh_kubesim("deployment-mode")
    deployment = sim.kubectl_json("-n", "descheduler", "get", "deployment", "descheduler")
    [first] = wait_for(lambda: running_pods(sim), timeout=30, what="the Descheduler's Pod")
    with PodLogs(sim) as seen:
        run_playbook_file(PLAYBOOKS / "rebalance.yml", inventory(tmp_path, {"lab": sim}), tmp_path,
                          extra_vars={"rebalance_rollback_at_end": True}, timeout=600)
    result = report(tmp_path, "lab")
    assert result["status"] == "passed", result.get("error")
    # the VM the plan predicted moved, by a request of a Pod that started after the apply and read the applied policy
    [predicted] = result["policy"]["planned_evictions"]
    assert predicted["vm"] in [m["vm"] for m in result["moved"]] and result["moved"][0]["from"] == "worker-a"
    requesters = [name for name, log in seen.logs.items()
                  if "Eviction in background assumed" in log and f'pod="desched-test/virt-launcher-{predicted["vm"]}-' in log]
    assert requesters and first["metadata"]["name"] not in requesters, requesters
    requester = requesters[0]
    assert seen.applied_at and seen.pods[requester]["metadata"]["creationTimestamp"] > seen.applied_at  # RFC 3339 UTC, whole seconds
    assert APPLIED_CRITERIA in seen.logs[requester] and CHART_CRITERIA not in seen.logs[requester]
    # the first Pod only ever ran the chart's policy: it was replaced, not left running the old policy
    assert CHART_CRITERIA in seen.logs[first["metadata"]["name"]] and APPLIED_CRITERIA not in seen.logs[first["metadata"]["name"]]
    # after the rollback: a Pod that started after the restore runs the chart's policy, Ready
    [last] = running_pods(sim)
    assert last["metadata"]["name"] not in (first["metadata"]["name"], requester)
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in last["status"]["conditions"])
    log = sim.kubectl("-n", "descheduler", "logs", last["metadata"]["name"]).stdout
    assert CHART_CRITERIA in log and APPLIED_CRITERIA not in log
    configmap = sim.request_json("GET", "/api/v1/namespaces/descheduler/configmaps/descheduler")  # with its managedFields
    assert "vm-rebalance" not in configmap["data"]["policy.yaml"]
    assert last["metadata"]["creationTimestamp"] > max(entry["time"] for entry in configmap["metadata"]["managedFields"])
    # the Deployment's Pod template was never edited (no rollout restart), and nothing is left recorded by ACP
    after = sim.kubectl_json("-n", "descheduler", "get", "deployment", "descheduler")
    assert after["spec"]["template"] == deployment["spec"]["template"] and after["spec"]["replicas"] == 1
    assert sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"] == []

    # descheduler_restart alone: the Pods started after the policy was written, so a second call changes nothing
    again = run_ansible_module(sim, MODULE, {"timeout": 60})
    assert not again["changed"] and again["deleted_pods"] == [] and again["ready_pod"] == last["metadata"]["name"], again
    # a policy written after the Pod started: check mode names the Pod and deletes nothing
    time.sleep(1.1)  # managedFields times are whole seconds: the write below is a second after the Pod's creation
    sim.kubectl("-n", "descheduler", "annotate", "configmap", "descheduler", "kubevirt-ops.io/touched=now")
    checked = run_ansible_module(sim, MODULE, {}, check=True)
    assert checked["changed"] and checked["deleted_pods"] == [last["metadata"]["name"]] and checked["dry_run"], checked
    assert [p["metadata"]["uid"] for p in running_pods(sim)] == [last["metadata"]["uid"]]


def test_restart_runs_as_a_user_bound_only_to_its_documented_role(tmp_path):
    with rbac_kubesim(tmp_path, "deployment-mode", "deployment-restart-rbac", ["restart", "reduced"],
                      {"restart": manifests("descheduler_restart")}) as sim:
        [first] = wait_for(lambda: running_pods(sim), timeout=30, what="the Descheduler's Pod")
        sim.kubectl("-n", "descheduler", "annotate", "configmap", "descheduler", "kubevirt-ops.io/touched=now")  # the policy is newer
        for kind, resource, verb in (("Role", "pods", "delete"), ("Role", "configmaps", "get"), ("Role", "pods", "watch")):
            grant(sim, "reduced", without(manifests("descheduler_restart"), kind, resource, verb))
            assert_denied(call_module("descheduler_restart", as_user(sim, "reduced", timeout=30, progress_every=0)), verb, resource)
            if verb != "watch":  # refused before the delete; the watch comes after it
                assert [p["metadata"]["uid"] for p in running_pods(sim)] == [first["metadata"]["uid"]]
        result = call_module("descheduler_restart", as_user(sim, "restart", timeout=60))
        assert not result["failed"], result
        assert result["ready_pod"] and result["ready_pod"] != first["metadata"]["name"]
        assert [p["metadata"]["name"] for p in running_pods(sim)] == [result["ready_pod"]]
