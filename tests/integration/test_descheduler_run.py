"""`kubevirt_ops.rebalance.descheduler_run` run by the venv's `ansible` against `rebalance-two-workers`: after the
page's bounded policy, the next scheduled run requests one background eviction and a VM moves; trigger=create makes
one Job with the manual annotation and the CronJob as owner; a policy the descheduler rejects fails the run with the
upstream message; check mode creates no Job; a suspended CronJob with trigger=wait is refused; in Deployment mode the
next complete cycle in the Pod's log is parsed."""
from __future__ import annotations

import pytest

from support.policy import PAGE_OPTIONS, PAGE_POLICY

from .ansible_run import run_ansible_module
from .conftest import kubectl_available, start_kubesim, stop_kubesim
from .module_call import call_module

MODULE = "kubevirt_ops.rebalance.descheduler_run"
pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]


@pytest.fixture
def sim(tmp_path):
    started = start_kubesim("rebalance-two-workers", tmp_path / "sim")
    yield started
    stop_kubesim(started)


def apply_page_policy(sim) -> dict:
    """The page's bounded policy, applied by descheduler_policy's service in this process (an ansible start costs
    seconds; test_descheduler_policy runs the module itself); its result, with backup_path and resource_patch."""
    result = call_module("descheduler_policy", dict(PAGE_OPTIONS, kubeconfig=sim.kubeconfig, backup_dir=str(sim.home / "backups"),
                                                    cluster_name="workload"))
    assert result["changed"] and not result["failed"], result
    return result


def manual_jobs(sim) -> list:
    return [j for j in sim.kubectl_json("-n", "descheduler", "get", "jobs")["items"]
            if (j["metadata"].get("annotations") or {}).get("cronjob.kubernetes.io/instantiate") == "manual"]


def test_next_scheduled_run_requests_one_background_eviction_and_a_vm_moves(sim):
    apply_page_policy(sim)
    run = run_ansible_module(sim, MODULE, {"trigger": "wait", "timeout": 60})
    assert run["changed"] is False and run["trigger"] == "wait", run
    assert run["job"]["result"] == "Complete" and run["job"]["manual"] is False
    categories = {c["node"]: c["category"] for c in run["classification"]}
    assert categories == {"worker-a": "overutilized", "worker-b": "underutilized"}
    assert run["pods_on_node"][0]["node"] == "worker-a" and run["pods_on_node"][0]["removable"] >= 1
    assert run["totals"] == {"total_evicted": 0, "eviction_requests": 1}
    [eviction] = run["background_evictions"]
    assert eviction["namespace"] == "desched-test" and eviction["name"].startswith("virt-launcher-vm-")
    assert run["nothing_to_do"] is False and run["errors"] == []
    assert any("Eviction in background assumed" in line for line in run["log_lines"])
    # the cluster agrees: the Job exists, and the VM whose launcher was named moves to worker-b
    job = sim.kubectl_json("-n", "descheduler", "get", "job", run["job"]["name"])
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    vm = "-".join(eviction["name"].split("-")[2:-1])  # virt-launcher-<vm>-<suffix>
    sim.kubectl("wait", "--for=jsonpath={.status.nodeName}=worker-b", "vmi/" + vm, "-n", "desched-test", "--timeout=30s")
    # another run (created, not waited for) compared with the first: no category swap
    second = run_ansible_module(sim, MODULE, {"trigger": "create", "timeout": 60, "previous_run": run})
    assert second["totals"]["eviction_requests"] in (0, 1) and second["category_swaps"] == []


def test_create_makes_one_manual_job_owned_by_the_cronjob(sim):
    cronjob = sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")
    run = run_ansible_module(sim, MODULE, {"trigger": "create", "timeout": 60})
    assert run["changed"] and run["trigger"] == "create" and run["job"]["created"] is True, run
    [job] = manual_jobs(sim)
    assert job["metadata"]["name"] == run["job"]["name"] and job["metadata"]["name"].startswith("descheduler-manual-")
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("CronJob", "descheduler", cronjob["metadata"]["uid"], True)
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == \
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert run["job"]["result"] == "Complete" and run["classification"], run
    # the package's default policy protects PVC-backed launchers: nothing is requested
    assert run["totals"] == {"total_evicted": 0, "eviction_requests": 0}


def test_policy_the_descheduler_rejects_fails_the_run_with_the_upstream_message(sim, tmp_path):
    bad = PAGE_POLICY.replace("    args:\n      thresholds:", "    args:\n      evictableNamespaces:\n        include: [desched-test]\n"
                              "      thresholds:")
    assert "include" in bad
    policy = tmp_path / "policy.yaml"
    policy.write_text(bad)
    manifest = sim.kubectl("-n", "descheduler", "create", "configmap", "descheduler", "--from-file=policy.yaml=" + str(policy),
                           "--dry-run=client", "-o", "yaml").stdout
    sim.kubectl("apply", "-f", "-", input=manifest)
    result = run_ansible_module(sim, MODULE, {"trigger": "create", "timeout": 60}, expect_failure=True)
    assert "only Exclude namespaces can be set, inclusion is not supported" in result["msg"]
    assert result["error"]["type"] == "RunFailed" and result["error"]["run"]["job"]["result"] == "Failed"
    assert any('"command failed"' in line for line in result["error"]["run"]["errors"])
    job = sim.kubectl_json("-n", "descheduler", "get", "job", result["error"]["run"]["job"]["name"])
    assert (job["status"].get("failed") or 0) >= 1


def test_check_mode_creates_no_job(sim):
    run = run_ansible_module(sim, MODULE, {"trigger": "create", "job_name": "checked"}, check=True)
    assert run["changed"] and run["would_create"]["metadata"]["name"] == "checked", run
    assert run["would_create"]["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert manual_jobs(sim) == []
    assert sim.kubectl("-n", "descheduler", "get", "job", "checked", check=False).returncode != 0


def test_wait_on_a_suspended_cronjob_is_refused_with_the_fix(sim):
    sim.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    result = run_ansible_module(sim, MODULE, {"trigger": "wait", "timeout": 30}, expect_failure=True)
    assert "is suspended" in result["msg"] and "trigger=create" in result["msg"]
    assert manual_jobs(sim) == []


def test_deployment_mode_waits_for_the_next_cycle_in_the_pod_log(tmp_path):
    sim = start_kubesim("deployment-mode", tmp_path / "sim")
    try:
        apply_page_policy(sim)
        # a Deployment's descheduler reads its policy at container start: restart it, as after a policy change
        sim.kubectl("-n", "descheduler", "delete", "pod", "-l", "app.kubernetes.io/name=descheduler", "--wait=false")
        run = run_ansible_module(sim, MODULE, {"trigger": "auto", "timeout": 60})
        assert run["trigger"] == "wait" and "Deployment" in run["trigger_reason"] and run["changed"] is False, run
        assert run["descheduler"]["kind"] == "Deployment" and run["job"] is None
        pods = sim.kubectl_json("-n", "descheduler", "get", "pods", "-l", "app.kubernetes.io/name=descheduler")["items"]
        assert run["pod"] in [p["metadata"]["name"] for p in pods]
        # the cycle parsed is in that Pod's log, and it is a cycle with the page's policy
        log = sim.kubectl("-n", "descheduler", "logs", run["pod"]).stdout
        assert run["log_lines"] and all(line in log for line in run["log_lines"])
        assert {c["node"]: c["category"] for c in run["classification"]} == {"worker-a": "overutilized", "worker-b": "underutilized"}
        assert run["totals"] == {"total_evicted": 0, "eviction_requests": 1}
        [eviction] = run["background_evictions"]
        vm = "-".join(eviction["name"].split("-")[2:-1])  # virt-launcher-<vm>-<suffix>
        sim.kubectl("wait", "--for=jsonpath={.status.nodeName}=worker-b", "vmi/" + vm, "-n", "desched-test", "--timeout=30s")
    finally:
        stop_kubesim(sim)
