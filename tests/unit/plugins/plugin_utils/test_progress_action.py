"""plugin_utils/progress_action: the action plugin's loop over a module that reports progress (call_until_done), the
run's lease renewed between the calls (LeaseRenewal, with a fake run_lease and clock), and the stop of a task whose
ansible-playbook died (orphaned)."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.progress_action import LeaseRenewal, call_until_done, orphaned


def scripted(*results):
    """A module that answers `results` in turn and records the arguments of each call."""
    calls = []

    def call(args):
        calls.append(args)
        return dict(results[len(calls) - 1])
    return call, calls


def test_calls_again_with_the_state_and_shows_every_line_in_order():
    call, calls = scripted(
        {"changed": True, "progress": {"done": False, "lines": ["vm-1 migrated"], "resume": {"state": 1}}},
        {"changed": True, "progress": {"done": False, "lines": ["awaiting vm-2"], "resume": {"state": 2}}},
        {"changed": True, "moved": ["vm-1", "vm-2"], "progress": {"done": True, "lines": ["vm-2 migrated"], "elapsed_seconds": 40}})
    shown = []
    result = call_until_done(call, {"node": "worker-1"}, shown.append)
    assert shown == ["vm-1 migrated", "awaiting vm-2", "vm-2 migrated"]
    assert calls == [{"node": "worker-1"}, {"node": "worker-1", "resume": {"state": 1}}, {"node": "worker-1", "resume": {"state": 2}}]
    assert result["moved"] == ["vm-1", "vm-2"]
    assert result["progress"] == {"done": True, "lines": shown, "elapsed_seconds": 40}


def test_a_failed_call_ends_the_loop_with_its_result():
    call, calls = scripted({"progress": {"done": False, "lines": ["vm-1 migrated"], "resume": {}}},
                           {"failed": True, "msg": "API down"})
    shown = []
    result = call_until_done(call, {}, shown.append)
    assert len(calls) == 2 and result["failed"] and result["msg"] == "API down" and shown == ["vm-1 migrated"]


def test_a_module_without_progress_is_called_once():
    call, calls = scripted({"changed": False, "node": "worker-1"})
    assert call_until_done(call, {"node": "worker-1"}, lambda line: None) == {"changed": False, "node": "worker-1"}
    assert len(calls) == 1


def test_the_state_between_calls_stays_out_of_the_result():
    call, _calls = scripted({"progress": {"done": True, "lines": [], "resume": {"big": "state"}}})
    assert "resume" not in call_until_done(call, {}, lambda line: None)["progress"]


# ------------------------------------------------------------------------------------------ the lease between the calls
def test_what_runs_between_the_calls_can_stop_the_task_before_the_next_call():
    call, calls = scripted({"changed": True, "progress": {"done": False, "lines": ["vm-1 migrated"], "resume": {"state": 1}}},
                           {"changed": True, "progress": {"done": False, "lines": ["awaiting vm-2"], "resume": {"state": 2}}},
                           {"changed": True, "progress": {"done": True, "lines": []}})
    stops = iter([None, {"failed": True, "msg": "lease lost", "lease_lost": True}])
    result = call_until_done(call, {"node": "worker-1"}, lambda line: None, lambda: next(stops))
    assert len(calls) == 2 and result["failed"] and result["msg"] == "lease lost" and result["changed"]
    assert result["progress"] == {"done": False, "lines": ["vm-1 migrated", "awaiting vm-2"]}


class Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


HOLDING = {"run_id": "r1", "namespace": "kube-system", "name": "kubevirt-ops-run", "duration": 30, "renewed_at": 1000}


def renewal(answers, clock, holding=None, wall=None):
    """A LeaseRenewal whose run_lease calls answer `answers` in turn; the calls' arguments and the lines shown."""
    calls, shown = [], []

    def renew(args):
        calls.append(args)
        return dict(answers[len(calls) - 1])
    return LeaseRenewal(dict(holding or HOLDING), renew, shown.append, clock=clock, wall=wall or clock), calls, shown


def test_the_lease_is_renewed_through_run_lease_every_third_of_its_duration():
    clock = Clock(1005.0)   # the step renewed it 5 s before the task started
    lease_renewal, calls, _shown = renewal([{"changed": True}, {"changed": True}], clock)
    assert lease_renewal.between() is None and calls == []          # 5 s after the step's renewal
    clock.now = 1010.0
    assert lease_renewal.between() is None and calls == [{"state": "renewed", "run_id": "r1", "duration": 30,
                                                          "lease_namespace": "kube-system", "lease_name": "kubevirt-ops-run"}]
    clock.now = 1019.0
    assert lease_renewal.between() is None and len(calls) == 1
    clock.now = 1020.0
    assert lease_renewal.between() is None and len(calls) == 2 and lease_renewal.renewals == 2


def test_a_lease_taken_over_stops_the_task_at_once_with_the_holder_named():
    clock = Clock(1010.0)
    lost = {"failed": True, "msg": "lease kube-system/kubevirt-ops-run: no longer held by run r1: held by another run; maintenance run r2 "
                                   "by bob@ctl-2 pid 202 holds it since 2026-12-05T08:00:00Z (step maintain worker-2)",
            "error": {"type": "LeaseLost"}}
    lease_renewal, _calls, _shown = renewal([lost], clock)
    stop = lease_renewal.between()
    assert stop["failed"] and stop["lease_lost"] and stop["msg"].startswith("Stopped before the next call: lease kube-system/kubevirt-ops-run")
    assert "maintenance run r2 by bob@ctl-2 pid 202" in stop["msg"]


def test_a_renewal_that_fails_is_tried_again_until_the_renew_deadline():
    clock = Clock(1010.0)
    down = {"failed": True, "msg": "get lease: no answer from the API server: connection refused", "error": {"type": "ApiFailure"}}
    lease_renewal, calls, shown = renewal([down] * 5, clock)
    assert lease_renewal.between() is None and shown == ["renewing the run's lease failed, trying again at the next call: get lease: "
                                                         "no answer from the API server: connection refused"]
    clock.now = 1019.0
    assert lease_renewal.between() is None and len(calls) == 2      # 19 s since the last good renewal: within 20 s
    clock.now = 1020.0
    stop = lease_renewal.between()
    assert stop["failed"] and "Could not renew the run's lease for 20 s, past its renew deadline (20 s of a 30 s lease)" in stop["msg"]


@pytest.mark.parametrize("task_vars, check_mode", [
    ({}, False),                                          # no lease taken (a role run on its own)
    ({"run_lease_holding": {}}, False),                   # released
    ({"run_lease_holding": HOLDING}, True),               # check mode holds no lease
])
def test_nothing_is_renewed_without_a_lease_or_in_check_mode(task_vars, check_mode):
    assert LeaseRenewal.from_task_vars(task_vars, check_mode, lambda args: {}, lambda line: None) is None


def test_a_lease_held_makes_the_module_return_at_least_every_renew_interval():
    lease_renewal = LeaseRenewal.from_task_vars({"run_lease_holding": dict(HOLDING, duration=20)}, False, lambda args: {}, lambda line: None)
    assert lease_renewal.call_every({"node": "w"}) == {"node": "w", "progress_every": 6}
    assert lease_renewal.call_every({"progress_every": 0}) == {"progress_every": 6}
    assert LeaseRenewal(HOLDING, lambda args: {}, lambda line: None).call_every({"progress_every": 5}) == {"progress_every": 5}


def test_a_task_whose_ansible_playbook_died_stops_before_its_next_call():
    assert orphaned(4242, lambda: 4242) is None
    stop = orphaned(4242, lambda: 1)
    assert stop["failed"] and "the ansible-playbook process (pid 4242) that ran this task has ended" in stop["msg"]
