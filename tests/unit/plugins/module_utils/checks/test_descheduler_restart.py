"""The restart's pure decisions: which installations need none (a CronJob, a Deployment at 0), when the policy ConfigMap
was written (its newest managedFields time), which Pods started before it (same second counts as before), readiness,
and when a restart is done (old Pods gone, a new one Ready)."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import descheduler_restart as rs

from .. import k8s_objects as k8s

WRITTEN = "2026-11-30T10:05:00Z"


def pod(name, created, uid=None, phase="Running", ready=True, deleting=False) -> dict:
    metadata = {"name": name, "namespace": "descheduler", "uid": uid or "uid-" + name, "creationTimestamp": created,
                "labels": {"app.kubernetes.io/name": "descheduler"}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-30T10:06:30Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def configmap_written(*times) -> dict:
    body = k8s.configmap()
    body["metadata"]["managedFields"] = [{"manager": "m{0}".format(i), "operation": "Update", "time": t} for i, t in enumerate(times)]
    return body


def test_a_cronjob_and_a_deployment_at_zero_need_no_restart():
    assert rs.skip_reason("CronJob", k8s.cronjob()) == rs.CRONJOB
    stopped = k8s.deployment()
    stopped["spec"]["replicas"] = 0
    assert rs.skip_reason("Deployment", stopped) == rs.SCALED_TO_ZERO
    assert rs.skip_reason("Deployment", k8s.deployment()) is None
    unset = k8s.deployment()
    del unset["spec"]["replicas"]  # defaulted to 1 by the API server
    assert rs.skip_reason("Deployment", unset) is None and rs.replicas(unset) == 1
    assert rs.skip_reason(None, None) == rs.NO_WORKLOAD


def test_the_policy_was_written_at_the_newest_managed_fields_time():
    assert rs.written_at(configmap_written("2026-11-30T09:00:00Z", WRITTEN, "2026-11-30T10:01:00Z")) == \
        datetime.datetime(2026, 11, 30, 10, 5, tzinfo=datetime.timezone.utc)
    assert rs.written_at(k8s.configmap()) is None
    assert rs.written_at(None) is None


def test_pods_created_before_or_in_the_same_second_as_the_write_are_stale():
    changed = rs.written_at(configmap_written(WRITTEN))
    before, same, after = pod("a", "2026-11-30T10:00:00Z"), pod("b", WRITTEN), pod("c", "2026-11-30T10:05:01Z")
    going = pod("d", "2026-11-30T09:00:00Z", deleting=True)
    evicted = pod("e", "2026-11-30T09:00:00Z", phase="Failed", ready=False)  # no process runs in it: left alone
    to_delete, terminating = rs.stale_pods([before, same, after, going, evicted], changed)
    assert [p["metadata"]["name"] for p in to_delete] == ["a", "b"]
    assert [p["metadata"]["name"] for p in terminating] == ["d"]


def test_without_a_write_time_every_pod_is_stale():
    to_delete = rs.stale_pods([pod("a", "2026-11-30T10:00:00Z"), pod("c", "2030-01-01T00:00:00Z")], None)[0]
    assert len(to_delete) == 2


@pytest.mark.parametrize("obj, ready", [
    (pod("a", WRITTEN), True),
    (pod("a", WRITTEN, ready=False), False),
    (pod("a", WRITTEN, phase="Pending"), False),
    (pod("a", WRITTEN, deleting=True), False),
])
def test_a_pod_is_ready_when_running_with_ready_true_and_not_deleted(obj, ready):
    assert rs.pod_ready(obj) is ready


def test_a_restart_is_done_when_the_old_pods_are_gone_and_a_new_one_is_ready():
    old = pod("old", "2026-11-30T10:00:00Z", deleting=True)
    new = pod("new", "2026-11-30T10:05:02Z", ready=False)
    waiting = rs.restart_progress([old, new], ["uid-old"])
    assert not waiting.done and waiting.old_left == ["old"] and waiting.new == ["new"] and waiting.ready == []
    assert rs.awaiting(waiting) == "Pod(s) old to be gone and a new Pod to be Ready (new not Ready)"
    gone_not_ready = rs.restart_progress([new], ["uid-old"])
    assert not gone_not_ready.done and rs.awaiting(gone_not_ready) == "a new Pod to be Ready (new not Ready)"
    ready_old_left = rs.restart_progress([old, pod("new", "2026-11-30T10:05:02Z")], ["uid-old"])
    assert not ready_old_left.done and rs.awaiting(ready_old_left) == "Pod(s) old to be gone"
    done = rs.restart_progress([pod("new", "2026-11-30T10:05:02Z")], ["uid-old"])
    assert done.done and done.ready == ["new"]
    assert rs.awaiting(rs.restart_progress([], ["uid-old"])) == "a new Pod to be Ready (none created yet)"
