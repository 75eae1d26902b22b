"""The run lease's pure decisions on Lease objects as the API returns them: when a Lease expires (renewTime, else
acquireTime, plus leaseDurationSeconds, MicroTime parsed), who may take it, which record is an unfinished run (and which
one a rollback that died too still points at), and the bodies written: transitions counted on a change of holder only,
the resourceVersion of the Lease read, the release clearing the holder as client-go's does."""
from __future__ import annotations

import datetime
import json

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_lease as rl

NOW = datetime.datetime(2026, 12, 5, 8, 0, 0, tzinfo=datetime.timezone.utc)
ME = {"user": "alice", "host": "ctl-1", "pid": 101, "process_started": "5000"}


def lease(identity="bob@ctl-2/pid-202/r0", renewed="2026-12-05T07:50:00.123456Z", duration=1800, **record) -> dict:
    annotations = {rl.RECORD: json.dumps(record)} if record else {}
    spec = {"leaseDurationSeconds": duration, "acquireTime": "2026-12-05T07:00:00.000000Z", "renewTime": renewed, "leaseTransitions": 2}
    if identity:
        spec["holderIdentity"] = identity
    return {"metadata": {"name": "kubevirt-ops-run", "namespace": "kube-system", "resourceVersion": "42", "annotations": annotations},
            "spec": spec}


def alive(pid, started):
    return True


def test_expiry_is_the_renew_time_plus_the_duration_read_from_micro_time():
    assert rl.expires_at(lease()) == datetime.datetime(2026, 12, 5, 8, 20, 0, 123456, tzinfo=datetime.timezone.utc)
    assert rl.expires_at(lease(renewed=None)) == datetime.datetime(2026, 12, 5, 7, 30, tzinfo=datetime.timezone.utc)   # acquireTime
    assert rl.micro_time(NOW) == "2026-12-05T08:00:00.000000Z"


@pytest.mark.parametrize("found, action", [
    (None, "create"),
    (lease(identity=None, run_id="r0", status="complete"), "acquire"),
    (lease(run_id="r0", holder=ME), "refuse"),                          # same user and host, another run: a second run
    (lease(run_id="r1", holder=ME), "renew"),                           # this run
    (lease(run_id="r1", holder=dict(ME, pid=9)), "refuse"),             # the same run id from another process is not this run
    (lease(renewed="2026-12-05T07:29:59.000000Z", run_id="r0"), "take_over"),
    (lease(renewed="not a time", run_id="r0"), "take_over"),            # a Lease that says nothing of its time holds nothing
])
def test_who_may_take_the_lease(found, action):
    assert rl.decide(found, "r1", ME, NOW, alive)["action"] == action


def test_a_dead_holder_on_another_host_is_not_judged_by_its_pid():
    seen = []
    found = lease(run_id="r0", holder={"user": "bob", "host": "ctl-2", "pid": 202})
    assert rl.decide(found, "r1", ME, NOW, lambda pid, started: seen.append(pid) or False)["action"] == "refuse" and seen == []


def test_unfinished_runs_and_the_run_a_dead_rollback_still_points_at():
    died = {"run_id": "r1", "playbook": "rebalance", "status": "in_progress", "step": "validate", "backup": {"policy_file": "/b"}}
    assert rl.unfinished_run(died, holder_gone=True) == died
    assert rl.unfinished_run(died, holder_gone=False) is None
    assert rl.unfinished_run(dict(died, step="preflight"), holder_gone=True) is None
    assert rl.unfinished_run(dict(died, status="failed"), holder_gone=True) is None
    dead_rollback = {"run_id": "r2", "playbook": "rollback", "status": "in_progress", "step": "rollback", "unfinished_run": died}
    assert rl.unfinished_run(dead_rollback, holder_gone=True) == died
    assert rl.may_take_unfinished("resume", died, "rebalance") and not rl.may_take_unfinished("resume", died, "maintenance")
    assert rl.may_take_unfinished("take", died, "rollback") and not rl.may_take_unfinished("refuse", died, "rollback")


def test_the_bodies_count_transitions_only_on_a_new_holder_and_carry_the_version_read():
    current = lease(run_id="r0")
    taken = rl.lease_body("kubevirt-ops-run", "kube-system", "alice@ctl-1/pid-101/r1", 600, NOW, {"run_id": "r1"}, current, new_holder=True)
    assert taken["metadata"]["resourceVersion"] == "42" and taken["spec"]["leaseTransitions"] == 3
    assert taken["spec"]["acquireTime"] == taken["spec"]["renewTime"] == "2026-12-05T08:00:00.000000Z"
    assert json.loads(taken["metadata"]["annotations"][rl.RECORD]) == {"run_id": "r1"}
    renewed = rl.lease_body("kubevirt-ops-run", "kube-system", "x", 600, NOW, {}, current, new_holder=False)
    assert renewed["spec"]["leaseTransitions"] == 2 and renewed["spec"]["acquireTime"] == "2026-12-05T07:00:00.000000Z"
    first = rl.lease_body("kubevirt-ops-run", "kube-system", "x", 600, NOW, {}, None, new_holder=True)
    assert first["spec"]["leaseTransitions"] == 0 and "resourceVersion" not in first["metadata"]
    released = rl.released_body(current, {"status": "complete"}, NOW)
    assert "holderIdentity" not in released["spec"] and released["spec"]["leaseDurationSeconds"] == 1
    assert json.loads(released["metadata"]["annotations"][rl.RECORD]) == {"status": "complete"} and current["spec"]["holderIdentity"]


# ------------------------------------------------------------------------------------------ renewal while a step works
def test_a_working_run_renews_every_third_of_the_duration_and_gives_up_at_two_thirds():
    assert rl.renew_interval(1800) == 600 and rl.renew_deadline(1800) == 1200 and rl.renew_interval(20) == pytest.approx(6.667, abs=0.01)
    assert rl.renew_due(None, 5.0, 1800)                      # not renewed in this step yet
    assert not rl.renew_due(100.0, 699.0, 1800) and rl.renew_due(100.0, 700.0, 1800)
    assert not rl.renew_deadline_past(100.0, 1299.0, 1800) and rl.renew_deadline_past(100.0, 1300.0, 1800)


@pytest.mark.parametrize("every, duration, expected", [
    (25, 1800, 25),    # the module returns often enough already
    (25, 20, 6),       # a short lease: at least every renew interval
    (0, 20, 6),        # one call would never return to renew
    (0, 1800, 600),
])
def test_a_progress_module_returns_at_least_every_renew_interval_while_a_lease_is_held(every, duration, expected):
    assert rl.call_every(every, duration) == expected


BOB = {"user": "bob", "host": "ctl-2", "pid": 202, "process_started": "6000"}


@pytest.mark.parametrize("found, me, action, why", [
    (lease(identity="alice@ctl-1/pid-101/r1", run_id="r1", holder=ME, step="drain"), ME, "renew", ""),
    (lease(identity="alice@ctl-1/pid-101/r1", run_id="r1", holder=ME, step="drain"), None, "renew", ""),   # a keepalive
    (None, ME, "lost", "the Lease was deleted"),
    (lease(identity=None, run_id="r1", holder=ME, status="failed"), ME, "lost", "released (failed)"),
    (lease(run_id="r2", holder=BOB, took_over={"run_id": "r1", "why": "its lease expired at 2026-12-05T07:59:00Z"}), ME, "lost",
     "taken over (its lease expired at 2026-12-05T07:59:00Z)"),
    (lease(run_id="r2", holder=BOB), ME, "lost", "held by another run"),
    # the worker of a killed run: same run and host, another process
    (lease(identity="alice@ctl-1/pid-101/r1", run_id="r1", holder=ME), dict(ME, pid=555), "lost",
     "held by its ansible-playbook process pid 101, not by pid 555"),
], ids=["held", "held, keepalive", "deleted", "released", "taken over", "another run", "another process"])
def test_a_renewal_renews_only_the_lease_its_run_holds(found, me, action, why):
    decision = rl.renewal(found, "r1", me)
    assert decision["action"] == action and decision["why"] == why


def test_a_lost_lease_is_said_with_the_run_that_holds_it_now():
    found = lease(run_id="r2", playbook="maintenance", holder=BOB, started="2026-12-05T07:59:30Z", step="maintain worker-2",
                  took_over={"run_id": "r1", "why": "its lease expired at 2026-12-05T07:59:00Z"})
    message = rl.lost_message("r1", rl.renewal(found, "r1", ME))
    assert message == ("no longer held by run r1: taken over (its lease expired at "
                       "2026-12-05T07:59:00Z); maintenance run r2 by bob@ctl-2 pid 202 holds it since 2026-12-05T07:59:30Z "
                       "(step maintain worker-2)")
    released = rl.renewal(lease(identity=None, run_id="r1", holder=ME, status="complete"), "r1", ME)
    assert rl.lost_message("r1", released) == "no longer held by run r1: released (complete)"


@pytest.mark.parametrize("found, action, why", [
    (lease(identity="alice@ctl-1/pid-101/r1", run_id="r1", holder=ME, step="hook worker-1", status="in_progress"), "renew", ""),
    (lease(identity="alice@ctl-1/pid-101/r1", run_id="r1", holder=ME, step="uncordon worker-1", status="in_progress"), "stop",
     "the run moved on to step uncordon worker-1"),
    (lease(identity=None, run_id="r1", holder=ME, step="end", status="failed"), "stop", "the run released the lease (failed)"),
    (lease(run_id="r2", holder=BOB, step="hook worker-1", status="in_progress"), "lost", "held by another run"),
], ids=["same step", "next step", "released", "another run"])
def test_a_keepalive_renews_while_its_step_lasts_and_stops_when_the_run_moves_on(found, action, why):
    decision = rl.keepalive_action(found, "r1", "hook worker-1")
    assert decision["action"] == action and decision["why"] == why
