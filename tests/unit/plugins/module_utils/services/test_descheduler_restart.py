"""descheduler_restart's service on an in-memory cluster: a Deployment's Pods that started before the policy ConfigMap
was written are deleted (UID precondition, no edit of the Deployment) and the new Pod is waited for by watching; Pods
that started after it are kept; a CronJob and a Deployment at 0 replicas are no change; check mode sends dry runs and
waits for nothing; a resumed call does not delete again; a restart that does not finish fails naming timeout."""
from __future__ import annotations

import time

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, RunFailed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_restart as svc

from .. import k8s_objects as k8s
from ..checks.test_descheduler_restart import WRITTEN, configmap_written, pod
from .memory_cluster import MemoryCluster

SELECTOR = {"matchLabels": {"app.kubernetes.io/name": "descheduler"}}


def options(**given) -> svc.DeschedulerRestartOptions:
    return svc.DeschedulerRestartOptions.from_params(spec_params(svc.ARG_SPEC, **dict({"progress_every": 0, "timeout": 5}, **given)))


def deployment(replicas=1) -> dict:
    body = k8s.deployment()
    body["spec"].update(replicas=replicas, selector=SELECTOR)
    return body


def cluster(*pods, workload=None, watches=None) -> MemoryCluster:
    return MemoryCluster([workload or deployment(), configmap_written(WRITTEN)] + list(pods), watches=watches)


def added(obj) -> dict:
    return {"type": "ADDED", "object": obj}


def test_bad_options_are_refused_before_any_request():
    api = cluster()
    for given, path in (({"timeout": 0}, "timeout"), ({"descheduler_namespace": "A"}, "descheduler_namespace"),
                        ({"progress_every": -1}, "progress_every")):
        with pytest.raises(InvalidOption) as error:
            svc.run(options(**given), False, client=api)
        assert error.value.path == path
    assert api.requests == []


def test_a_pod_older_than_the_policy_is_deleted_and_its_replacement_awaited():
    old = pod("descheduler-old", "2026-11-30T10:00:00Z")
    new = pod("descheduler-new", "2026-11-30T10:05:03Z")
    api = cluster(old, watches=[[added(new)]])
    result = svc.run(options(), False, client=api)
    assert result["changed"] and not result["skipped"]
    assert result["deleted_pods"] == ["descheduler-old"] and result["kept_pods"] == []
    assert result["ready_pod"] == "descheduler-new" and result["new_pods"] == ["descheduler-new"]
    assert result["policy_configmap"] == "descheduler" and result["policy_written_at"] == WRITTEN
    assert "descheduler-old deleted; Pod descheduler-new reads the policy now" in result["summary"]
    # the only write is the Pod's delete: the Deployment (chart-managed on ACP) is never edited
    assert api.writes() == [("delete", "Pod", "descheduler", "descheduler-old", False)]
    assert ("watch", "Pod", "descheduler", "100") in api.requests


def test_pods_started_after_the_policy_are_kept_and_nothing_is_deleted():
    api = cluster(pod("descheduler-fresh", "2026-11-30T10:07:00Z"))
    result = svc.run(options(), False, client=api)
    assert not result["changed"] and result["deleted_pods"] == [] and result["kept_pods"] == ["descheduler-fresh"]
    assert result["ready_pod"] == "descheduler-fresh" and "nothing to restart" in result["summary"]
    assert api.writes() == []


@pytest.mark.parametrize("workload, reason", [(k8s.cronjob(), "cronjob"), (deployment(replicas=0), "scaled_to_zero")])
def test_a_cronjob_or_a_deployment_at_zero_is_no_change(workload, reason):
    api = cluster(pod("descheduler-old", "2026-11-30T10:00:00Z"), workload=workload)
    result = svc.run(options(), False, client=api)
    assert result["skipped"] and result["skip_reason"] == reason and not result["changed"]
    assert ("scaled to 0" if reason == "scaled_to_zero" else "nothing to restart") in result["summary"]
    assert api.writes() == []


def test_check_mode_sends_dry_run_deletes_and_waits_for_nothing():
    api = cluster(pod("descheduler-old", "2026-11-30T10:00:00Z"))
    result = svc.run(options(), True, client=api)
    assert result["changed"] and result["dry_run"] and result["deleted_pods"] == ["descheduler-old"]
    assert result["summary"].startswith("check mode: would delete Pod(s) descheduler-old")
    assert api.writes() == [("delete", "Pod", "descheduler", "descheduler-old", True)]
    assert api.find("Pod", "descheduler-old", "descheduler") is not None
    assert not any(r[0] == "watch" for r in api.requests)


def test_a_resumed_call_deletes_nothing_and_goes_on_waiting():
    new = pod("descheduler-new", "2026-11-30T10:05:03Z")
    api = cluster(new)
    state = {"old": ["uid-descheduler-old"], "deleted": ["descheduler-old"], "kept": [], "configmap": "descheduler", "written_at": WRITTEN}
    result = svc.run(options(progress_every=25, resume={"started_at": time.time() - 3, "status_due_at": time.time() + 20, "state": state}),
                     False, client=api)
    assert result["changed"] and result["deleted_pods"] == ["descheduler-old"] and result["ready_pod"] == "descheduler-new"
    assert result["progress"]["done"] and api.writes() == []


def test_a_restart_that_does_not_finish_fails_naming_timeout():
    api = cluster(pod("descheduler-old", "2026-11-30T10:00:00Z"))
    with pytest.raises(RunFailed) as error:
        svc.run(options(timeout=1), False, client=api)
    assert error.value.path == "timeout"
    assert "still awaiting a new Pod to be Ready (none created yet)" in error.value.message
    assert error.value.details["result"]["deleted_pods"] == ["descheduler-old"]


def test_with_progress_a_call_returns_what_it_awaits_and_the_next_goes_on_from_its_state():
    old = pod("descheduler-old", "2026-11-30T10:00:00Z")
    api = cluster(old)
    first = svc.run(options(progress_every=1, timeout=30), False, client=api)
    assert first["changed"] and not first["progress"]["done"] and first["deleted_pods"] == ["descheduler-old"]
    assert any("awaiting a new Pod to be Ready (none created yet)" in line for line in first["progress"]["lines"]), first["progress"]
    state = first["progress"]["resume"]["state"]
    assert state["old"] == ["uid-descheduler-old"] and state["deleted"] == ["descheduler-old"]
    api.objects["Pod"].append(pod("descheduler-new", "2026-11-30T10:05:03Z"))  # the ReplicaSet's replacement
    last = svc.run(options(progress_every=1, timeout=30, resume=first["progress"]["resume"]), False, client=api)
    assert last["progress"]["done"] and last["ready_pod"] == "descheduler-new" and last["deleted_pods"] == ["descheduler-old"]
    assert [w for w in api.writes() if w[0] == "delete"] == [("delete", "Pod", "descheduler", "descheduler-old", False)]
