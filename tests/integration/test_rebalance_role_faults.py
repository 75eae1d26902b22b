"""Faults on the descheduler_rebalance role (rebalance-two-workers): a 503 burst and a 429 with Retry-After on the
reads are retried and the page's policy lands; a 409 on the ConfigMap update fails the role with the conflict, the
ConfigMap and its ResourcePatches are exactly as before, and the backup taken before the apply exists."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from support.policy import PAGE_POLICY
from support.simulator import running_kubesim

from .ansible_run import run_role

pytestmark = pytest.mark.simulator

ROLE = "descheduler_rebalance"


@pytest.fixture
def sim(tmp_path):
    with running_kubesim("rebalance-two-workers", tmp_path / "sim") as started:
        yield started


def role_vars(tmp_path: Path) -> dict:
    return {"descheduler_rebalance_namespace": "desched-test", "descheduler_rebalance_nodes": ["worker-a", "worker-b"],
            "descheduler_rebalance_vm_labels": {"app": "desched-test"}, "descheduler_rebalance_backup_dir": str(tmp_path / "backups"),
            "descheduler_rebalance_cluster_name": "workload-1"}


def policy_objects(sim) -> dict:
    """The ConfigMap (whole) and the ResourcePatches, as the API has them."""
    return {"configmap": sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler"),
            "resource_patches": sorted(rp["metadata"]["name"] for rp in sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"])}


def fired(sim, rules: list) -> bool:
    listed = {rule["id"]: rule for rule in sim.admin("GET", "faults")["faults"]}  # a used-up rule may be gone
    return all(rule["id"] not in listed or listed[rule["id"]]["fired"] >= 1 for rule in rules)


def test_a_503_burst_and_a_429_with_retry_after_are_retried_and_the_policy_lands(sim, tmp_path):
    rules = [sim.add_fault(verb="list", resource="nodes", status=503, count=3),
             sim.add_fault(verb="list", resource="pods", status=429, retryAfter=1, count=2)]
    result = run_role(sim, ROLE, role_vars(tmp_path)).result
    assert result["changed"] and policy_objects(sim)["configmap"]["data"]["policy.yaml"] == PAGE_POLICY
    assert policy_objects(sim)["resource_patches"] == [result["resource_patch"]["name"]]
    assert fired(sim, rules)


def test_a_conflict_on_the_configmap_update_fails_clearly_and_changes_nothing(sim, tmp_path):
    before = policy_objects(sim)
    # on the real update only: the role's check-mode plan sends the same update as a server-side dry run first
    rules = [sim.add_fault(verb="update", resource="configmaps", name="descheduler", dryRun=False, status=409, reason="Conflict",
                           message='Operation cannot be fulfilled on configmaps "descheduler": the object has been modified', count=1)]
    run = run_role(sim, ROLE, role_vars(tmp_path), expect_failure=True)
    assert "409" in run.stdout and "Conflict" in run.stdout, run.stdout[-3000:]
    assert policy_objects(sim) == before and fired(sim, rules)
    backups = list((tmp_path / "backups").rglob("*.yaml"))
    assert backups and any(yaml.safe_load(path.read_text()).get("data", {}).get("policy.yaml") == before["configmap"]["data"]["policy.yaml"]
                           for path in backups), backups
