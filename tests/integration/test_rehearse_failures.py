"""playbooks/rehearse.yml when things go wrong, on the simulator (its faults and scenarios): a migration that fails, a
burst of 503s during the cleanup, SIGINT to ansible-playbook during the validation; the refusals that need a cluster
shaped for them (one schedulable worker, full workers, OpenShift's operator); plain Kubernetes with the upstream
chart; a Descheduler Deployment, held at 0 replicas until the apply. After each, the cluster is as it was, or the report
names what is left and `-e rehearse_cleanup=only` removes it."""
from __future__ import annotations

import json

import pytest

from support.waiting import wait_for

from .ansible_run import interrupt, playbook_command, playbook_in_background
from .rehearsal_run import NAMESPACE, REHEARSE, assert_as_before, cluster_state, rehearse

pytestmark = [pytest.mark.simulator, pytest.mark.kubectl]
FILLER = """\
apiVersion: v1
kind: Pod
metadata: {{name: filler-{node}, namespace: workloads}}
spec:
  nodeName: {node}
  containers:
  - name: app
    image: registry.example/app:1.0
    resources: {{requests: {{cpu: 100m, memory: {memory}}}}}
"""


def fired(sim) -> int:
    """How often the faults still armed have fired (a rule with a count is removed when it is used up)."""
    return sum(rule["fired"] for rule in sim.admin("GET", "faults")["faults"])


def test_a_failed_migration_fails_the_rehearsal_and_the_cleanup_still_restores_the_cluster(fresh_kubesim):
    sim = fresh_kubesim("rehearsal", settle=True)
    before = cluster_state(sim)
    sim.add_fault(component="virt-handler", verb="migrate", resource="virtualmachineinstances", namespace=NAMESPACE, migration="fail",
                  count=100)
    rehearsal = rehearse(sim, "failed-migration", {"rehearse_timeout": 30}, expect_failure=True)
    assert fired(sim) >= 1
    report = rehearsal.report
    assert report["status"] == "failed" and report["failed_step"] == "rebalance"
    assert "migration" in str(report["error"]).lower()
    assert report["rehearsal"]["cleanup"]["done"], report["rehearsal"]["cleanup"]
    sim.clear_faults()
    assert_as_before(sim, before)


def test_sigint_during_validation_leaves_a_report_naming_what_is_left_and_cleanup_only_removes_it(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("rehearsal", settle=True)
    before = cluster_state(sim)
    reports, backups = tmp_path / "reports", tmp_path / "backups"
    command = playbook_command(sim, REHEARSE, {"reports_dir": str(reports), "backup_dir": str(backups)}, tmp_path)
    log = tmp_path / "ansible.log"   # the log as it happens
    with playbook_in_background(command, tmp_path, log) as process:
        wait_for(lambda: "Wait for or start the run, cycle 1" in log.read_text(), timeout=180, what="the validation to start")
        assert interrupt(process) != 0
    report = json.loads(next(reports.glob("*/rehearse-*.json")).read_text())
    assert report["status"] == "in_progress"
    left = report["rehearsal"]["cleanup"]["left"]
    assert any(item.startswith(f"Namespace/{NAMESPACE}") for item in left)
    assert any("the policy override in ConfigMap descheduler/descheduler (ResourcePatch " in item for item in left)
    assert "rehearse_cleanup=only" in " ".join(report["rehearsal"]["cleanup"]["lines"])
    state = cluster_state(sim)
    assert NAMESPACE in state["namespaces"] and state["resource_patches"], "the interrupted run left what its report names"

    cleanup = rehearse(sim, "cleanup-only", {"rehearse_cleanup": "only", "reports_dir": str(reports), "backup_dir": str(backups)})
    section = cleanup.report["rehearsal"]
    assert cleanup.report["status"] == "passed" and section["cleanup_only"] and section["cleanup"]["done"]
    assert f"Namespace/{NAMESPACE}" in section["cleanup"]["removed"]
    assert any(item.startswith("ResourcePatch/") for item in section["cleanup"]["removed"])
    assert_as_before(sim, before)
    again = rehearse(sim, "cleanup-only-again", {"rehearse_cleanup": "only"})
    assert again.report["status"] == "passed" and again.report["rehearsal"]["cleanup"]["removed"] == []


def assert_refused_before_anything(sim, name: str, variables: dict, message: str) -> None:
    before = cluster_state(sim)
    rehearsal = rehearse(sim, name, variables, expect_failure=True)
    assert message in rehearsal.output, rehearsal.output[-3000:]
    assert rehearsal.report["rehearsal"]["vms"] == []
    assert cluster_state(sim) == before


def test_refusals_before_anything_is_created_one_worker_and_full_workers(fresh_kubesim):
    sim = fresh_kubesim("rehearsal", settle=True)
    sim.kubectl("cordon", "worker-b")
    assert_refused_before_anything(sim, "one-worker", {}, "worker")
    sim.kubectl("uncordon", "worker-b")
    for node, memory in (("worker-a", "33Gi"), ("worker-b", "38Gi")):
        sim.kubectl("apply", "-f", "-", input=FILLER.format(node=node, memory=memory))
    assert_refused_before_anything(sim, "full", {}, "not enough free allocatable on worker-")


def test_refuses_a_policy_owned_by_the_openshift_descheduler_operator(fresh_kubesim):
    sim = fresh_kubesim("openshift", settle=True)
    assert_refused_before_anything(sim, "openshift", {"rehearse_descheduler_namespace": "openshift-kube-descheduler-operator",
                                                      "rehearse_descheduler_name": "descheduler"},
                                   "the Descheduler here is OpenShift's operator")


def test_plain_kubernetes_with_the_upstream_chart_is_restored_from_the_backup_through_a_503_burst_in_the_cleanup(fresh_kubesim):
    sim = fresh_kubesim("rehearsal-upstream-chart", settle=True)
    sim.extra_vars = {"rehearse_descheduler_namespace": "kube-system"}
    before = cluster_state(sim)
    assert before["resource_patches"] == []
    # from the namespace's DELETE on, the next 8 requests for it and its content answer 503: more than one call's retries
    sim.add_fault(armedBy={"verb": "delete", "resource": "namespaces", "name": NAMESPACE}, namespace=NAMESPACE, status=503, count=8)
    rehearsal = rehearse(sim, "upstream-chart")
    assert rehearsal.report["status"] == "passed", rehearsal.output[-3000:]
    assert rehearsal.report["rehearsal"]["comparison"]["matches"]
    assert rehearsal.report["rollback"]["method"] == "backup"
    assert sim.admin("GET", "faults")["faults"] == [], "a rule with a count is removed once it has fired that often"
    assert "FAILED - RETRYING" in rehearsal.output and "Delete the namespace and wait until it is gone" in rehearsal.output
    assert rehearsal.report["rehearsal"]["cleanup"]["done"]
    assert_as_before(sim, before)


def test_a_descheduler_deployment_is_held_at_zero_then_runs_the_rehearsals_policy_and_is_restored(fresh_kubesim):
    """Issue 28: the refusal of Deployment installs is gone. The Deployment is scaled to 0 before the test VMs exist, scaled
    back after the apply (its new Pod reads the rehearsal's policy at start), and scaled back again by the cleanup."""
    sim = fresh_kubesim("rehearsal-deployment", settle=True)
    before = cluster_state(sim)
    assert before["replicas"] == 1
    rehearsal = rehearse(sim, "deployment")
    report = rehearsal.report
    assert report["status"] == "passed", (report["error"], rehearsal.output[-3000:])
    assert report["rehearsal"]["hold"]["kind"] == "Deployment" and report["rehearsal"]["hold"]["suspended_before"] is False
    assert report["rehearsal"]["comparison"]["matches"], report["rehearsal"]["comparison"]
    moved = [m for m in report["moved"] if m["namespace"] == NAMESPACE]
    assert len(moved) == report["rehearsal"]["prediction"]["moves"]
    assert_as_before(sim, before)
