"""run_lease's service on an in-memory cluster: the first run creates the Lease, a second run is refused with the holder
named and changes nothing, a release leaves the record for the next run, an expired lease and the lease of a process
that ended on this host are taken over (and say so), a run that died past its preflight is refused until a rollback
takes it over with its backup, a write that loses a race is read again and refused, renewals move the step and add the
backup, check mode writes as a dry run, and bad options are refused before any request."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_lease as rl
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import run_lease as svc

from .memory_cluster import MemoryCluster

NOW = datetime.datetime(2026, 12, 5, 8, 0, 0, tzinfo=datetime.timezone.utc)
ALICE = {"user": "alice", "host": "ctl-1", "pid": 101, "process_started": "5000"}
BOB = {"user": "bob", "host": "ctl-2", "pid": 202, "process_started": "6000"}
AWX = {"user": "carol", "host": "awx-ee-1", "pid": 7, "process_started": "10", "awx_job_id": "4711", "awx_host": "https://awx.example"}


def options(**given) -> svc.RunLeaseOptions:
    return svc.RunLeaseOptions.from_params(spec_params(svc.ARG_SPEC, **dict({"playbook": "rebalance"}, **given)))


def dead(pid, started):
    """No process is alive: every holder on this host was killed."""
    return False


def run(api, me, run_id, check_mode=False, now=NOW, alive=lambda pid, started: True, **given):
    return svc.run(options(run_id=run_id, **given), check_mode, client=api, me=me, now=lambda: now, alive=alive)


def lease(api) -> dict:
    return api.find("Lease", "kubevirt-ops-run", "kube-system")


def later(seconds: int) -> datetime.datetime:
    return NOW + datetime.timedelta(seconds=seconds)


def test_the_first_run_creates_the_lease_with_its_record():
    api = MemoryCluster([])
    result = run(api, ALICE, "r1", step="preflight")
    stored = lease(api)
    assert result["action"] == "create" and result["changed"]
    assert stored["spec"]["holderIdentity"] == "alice@ctl-1/pid-101/r1" and stored["spec"]["leaseDurationSeconds"] == 1800
    assert stored["spec"]["acquireTime"] == stored["spec"]["renewTime"] == "2026-12-05T08:00:00.000000Z"
    assert rl.read_record(stored) == result["record"]
    assert result["record"]["holder"] == ALICE and result["record"]["status"] == "in_progress" and result["record"]["step"] == "preflight"
    assert result["lease"]["expires"] == "2026-12-05T08:30:00Z" and result["previous"] is None


def test_a_second_run_is_refused_with_the_holder_when_it_started_and_when_the_lease_expires():
    api = MemoryCluster([])
    run(api, AWX, "r1", step="apply")
    before = lease(api)
    with pytest.raises(svc.LeaseHeld) as refused:
        run(api, BOB, "r2", now=later(60))
    message = refused.value.message
    assert "AWX job 4711 on https://awx.example (carol@awx-ee-1, pid 7)" in message, message
    assert "since 2026-12-05T08:00:00Z" in message and "held until 2026-12-05T08:30:00Z" in message and "step apply" in message
    assert "Nothing was changed" in message and refused.value.path == "lease kube-system/kubevirt-ops-run"
    assert lease(api) == before


def test_after_the_release_the_next_run_takes_the_lease_and_sees_how_the_last_ended():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="validate")
    released = run(api, ALICE, "r1", state="absent", outcome="complete")
    assert released["action"] == "release" and "holderIdentity" not in lease(api)["spec"]
    assert rl.read_record(lease(api))["status"] == "complete"
    assert run(api, ALICE, "r1", state="absent")["changed"] is False   # a second release changes nothing
    taken = run(api, BOB, "r2", now=later(10))
    assert taken["action"] == "acquire" and taken["previous"]["status"] == "complete" and taken["unfinished_run"] is None
    assert lease(api)["spec"]["leaseTransitions"] == 1


def test_a_release_by_another_run_leaves_the_lease_alone():
    api = MemoryCluster([])
    run(api, ALICE, "r1")
    result = run(api, BOB, "r2", state="absent")
    assert result["changed"] is False and "not held by run r2" in result["message"] and lease(api)["spec"]["holderIdentity"]


def test_an_expired_lease_is_taken_over_and_the_result_says_from_whom():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="preflight", duration=60)
    taken = run(api, BOB, "r2", now=later(61))
    assert taken["action"] == "take_over" and taken["took_over"]["run_id"] == "r1"
    assert "expired at 2026-12-05T08:01:00Z" in taken["took_over"]["why"] and "Took over" in taken["message"]
    assert lease(api)["spec"]["holderIdentity"] == "bob@ctl-2/pid-202/r2" and lease(api)["spec"]["leaseTransitions"] == 1


def test_the_lease_of_a_killed_process_on_this_host_is_taken_over_at_once():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="preflight")
    again = dict(ALICE, pid=303, process_started="7000")
    seen = []
    taken = run(api, again, "r2", now=later(5), alive=lambda pid, started: seen.append((pid, started)) or False)
    assert seen == [(101, "5000")] and taken["action"] == "take_over" and "pid 101 on ctl-1" in taken["took_over"]["why"]
    with pytest.raises(svc.LeaseHeld):   # on another host the process cannot be seen: the lease holds until it expires
        run(MemoryCluster([lease(api)]), BOB, "r3", now=later(6), alive=dead)


def test_a_run_that_died_past_its_preflight_is_refused_until_a_rollback_takes_it_over_with_its_backup():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="backup", backup={"policy_file": "/b/policy.yaml"})
    run(api, ALICE, "r1", step="apply")
    with pytest.raises(svc.UnfinishedRun) as refused:
        run(api, dict(ALICE, pid=9), "r2", now=later(5), alive=dead)
    assert "the last rebalance run r1 by alice@ctl-1 pid 101 stopped at step apply" in refused.value.message
    assert "policy_file /b/policy.yaml" in refused.value.message and "playbooks/rollback.yml" in refused.value.message
    assert rl.read_record(lease(api))["run_id"] == "r1"   # refused before any write

    rollback = run(api, dict(ALICE, pid=10), "r3", playbook="rollback", unfinished="take", now=later(6), alive=dead)
    assert rollback["unfinished_run"]["run_id"] == "r1" and rollback["unfinished_run"]["backup"] == {"policy_file": "/b/policy.yaml"}
    # the rollback dies too: the next rollback still finds the first run's backup
    again = run(api, dict(ALICE, pid=11), "r4", playbook="rollback", unfinished="take", now=later(7), alive=dead)
    assert again["unfinished_run"]["run_id"] == "r1"
    run(api, dict(ALICE, pid=11), "r4", state="absent", outcome="rolled_back")
    assert run(api, BOB, "r5", now=later(8))["unfinished_run"] is None


def test_a_maintenance_rerun_resumes_its_own_unfinished_run_but_not_a_half_finished_rebalance():
    api = MemoryCluster([])
    run(api, ALICE, "m1", playbook="maintenance", step="drain")
    resumed = run(api, dict(ALICE, pid=9), "m2", playbook="maintenance", step="drain", unfinished="resume", now=later(5), alive=dead)
    assert resumed["unfinished_run"]["run_id"] == "m1"
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="validate")
    with pytest.raises(svc.UnfinishedRun):
        run(api, dict(ALICE, pid=9), "m3", playbook="maintenance", unfinished="resume", now=later(5), alive=dead)


def test_a_run_that_died_in_its_preflight_changed_nothing_and_is_not_in_the_way():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="preflight")
    taken = run(api, dict(ALICE, pid=9), "r2", now=later(5), alive=dead)
    assert taken["action"] == "take_over" and taken["unfinished_run"] is None


def test_two_runs_that_read_the_free_lease_together_end_with_one_holder():
    api = MemoryCluster([])
    original_get = api.get
    raced = []

    def get_then_bob_writes(res, name, namespace=None):
        found = original_get(res, name, namespace)
        if found is None and not raced:   # Bob reads and writes between Alice's read and her write
            raced.append(True)
            run(api, BOB, "r-bob")
        return found
    api.get = get_then_bob_writes
    with pytest.raises(svc.LeaseHeld) as refused:
        run(api, ALICE, "r-alice")
    assert "bob@ctl-2" in refused.value.message and lease(api)["spec"]["holderIdentity"].startswith("bob@")
    assert [r[0] for r in api.requests if r[0] in ("create", "replace")] == ["create", "create"]


def test_each_step_renews_the_lease_and_adds_to_the_backup():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="backup", backup={"policy_file": "/b/p.yaml"})
    renewed = run(api, ALICE, "r1", step="apply", backup={"workload_file": "/b/w.yaml"}, now=later(100))
    assert renewed["action"] == "renew" and renewed["record"]["step"] == "apply"
    assert renewed["record"]["backup"] == {"policy_file": "/b/p.yaml", "workload_file": "/b/w.yaml"}
    assert lease(api)["spec"]["renewTime"] == "2026-12-05T08:01:40.000000Z" and renewed["lease"]["expires"] == "2026-12-05T08:31:40Z"
    assert lease(api)["spec"]["acquireTime"] == "2026-12-05T08:00:00.000000Z" and lease(api)["spec"]["leaseTransitions"] == 0


def test_check_mode_decides_as_a_real_run_and_writes_as_a_dry_run():
    api = MemoryCluster([])
    result = run(api, ALICE, "r1", check_mode=True)
    assert result["dry_run"] and result["action"] == "create" and lease(api) is None
    assert [r[-1] for r in api.writes()] == [True]


@pytest.mark.parametrize("given, path", [
    ({"lease_namespace": "Kube System"}, "lease_namespace"),
    ({"lease_name": "Bad_Name"}, "lease_name"),
    ({"run_id": " "}, "run_id"),
    ({"duration": 5}, "duration"),
])
def test_bad_options_are_refused_before_any_request(given, path):
    api = MemoryCluster([])
    with pytest.raises(InvalidOption) as refused:
        run(api, ALICE, given.pop("run_id", "r1"), **given)
    assert refused.value.path == path and api.requests == []


def test_the_holder_is_named_by_its_awx_job_or_its_user_and_host():
    assert rl.holder_text(AWX) == "AWX job 4711 on https://awx.example (carol@awx-ee-1, pid 7)"
    assert rl.holder_text(ALICE) == "alice@ctl-1 pid 101"
    assert rl.holder_identity(AWX, "r1") == "awx-job-4711/pid-7/r1"


def test_this_run_reads_awx_from_the_environment():
    me = svc.this_run("dave", environ={"JOB_ID": "42", "AWX_HOST": "https://awx"})
    assert me["user"] == "dave" and me["awx_job_id"] == "42" and me["awx_host"] == "https://awx" and isinstance(me["pid"], int)
    assert "awx_job_id" not in svc.this_run(None, environ={})
    assert svc.process_alive(me["pid"], me["process_started"]) and not svc.process_alive(me["pid"], "not-its-start")


# ------------------------------------------------------------------------------------------ renewed and keepalive
def test_a_renewal_keeps_the_step_and_never_takes_a_lease():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="maintain worker-1", duration=20)
    renewed = run(api, ALICE, "r1", state="renewed", duration=20, now=later(7))
    assert renewed["action"] == "renew" and renewed["record"]["step"] == "maintain worker-1"
    assert lease(api)["spec"]["renewTime"] == "2026-12-05T08:00:07.000000Z" and lease(api)["spec"]["leaseDurationSeconds"] == 20
    with pytest.raises(svc.LeaseLost):
        run(MemoryCluster([]), ALICE, "r1", state="renewed")   # no Lease: nothing is created
    assert [r[0] for r in api.requests if r[0] in ("create", "replace")] == ["create", "replace"]


def test_a_renewal_after_a_take_over_fails_naming_the_run_that_holds_it_and_writes_nothing():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="maintain worker-1", duration=20, playbook="maintenance")
    run(api, BOB, "r2", step="preflight", now=later(25), playbook="maintenance", unfinished="resume")   # Alice's lease expired
    writes = len(api.writes())
    with pytest.raises(svc.LeaseLost) as lost:
        run(api, ALICE, "r1", state="renewed", duration=20, now=later(26))
    assert lost.value.message.startswith("lease kube-system/kubevirt-ops-run: no longer held by run r1: taken over (its lease expired at "
                                         "2026-12-05T08:00:20Z); maintenance run r2 by bob@ctl-2 pid 202")
    assert "stopped before its next write" in lost.value.message
    assert lost.value.as_dict()["type"] == "LeaseLost" and lost.value.details["holder"] == BOB and len(api.writes()) == writes


def test_a_renewal_by_a_leftover_of_a_killed_run_renews_nothing():
    api = MemoryCluster([])
    run(api, ALICE, "r1", step="drain")
    with pytest.raises(svc.LeaseLost) as lost:
        run(api, dict(ALICE, pid=555), "r1", state="renewed", now=later(5))
    assert "not by pid 555" in lost.value.message and lease(api)["spec"]["renewTime"] == "2026-12-05T08:00:00.000000Z"


class FakeTime:
    """A monotonic clock that sleep advances; `at` runs an action once the clock reaches a time."""

    def __init__(self):
        self.now = 0.0
        self.actions = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        for when, action in list(self.actions):
            if self.now >= when:
                self.actions.remove((when, action))
                action()

    def wall(self):
        return NOW + datetime.timedelta(seconds=self.now)


def keep(api, fake, alive=lambda pid, started: True, **given):
    return svc.run(options(run_id="r1", state="keepalive", step="hook worker-1", duration=30, **given), False, client=api, me=ALICE,
                   now=fake.wall, alive=alive, clock=fake.clock, sleep=fake.sleep)


def renew_times(api):
    return [r for r in api.requests if r[0] == "replace"]


def test_a_keepalive_renews_every_third_of_the_duration_until_the_run_moves_on():
    api, fake = MemoryCluster([]), FakeTime()
    run(api, ALICE, "r1", step="hook worker-1", duration=30)
    # the hook ends 25 s later: the run's next step renews the lease to "uncordon worker-1"
    fake.actions.append((25, lambda: run(api, ALICE, "r1", step="uncordon worker-1", duration=30, now=fake.wall())))
    kept = keep(api, fake)
    assert kept["renewals"] == 3 and kept["stopped"] == "the run moved on to step uncordon worker-1"   # at 0, 10 and 20 s
    assert 25 <= kept["seconds"] <= 27 and len(renew_times(api)) == 4 and kept["changed"] is False


def test_a_keepalive_ends_with_the_process_of_its_run_and_leaves_the_lease_to_expire():
    api, fake = MemoryCluster([]), FakeTime()
    run(api, ALICE, "r1", step="hook worker-1", duration=30)
    killed = []
    fake.actions.append((13, lambda: killed.append(True)))
    kept = keep(api, fake, alive=lambda pid, started: not killed)
    assert kept["renewals"] == 2 and "process (pid 101) has ended; the lease expires 2026-12-05T08:00:40Z" in kept["stopped"]
    assert lease(api)["spec"]["holderIdentity"] and lease(api)["spec"]["renewTime"] == "2026-12-05T08:00:10.000000Z"


def test_a_keepalive_fails_when_another_run_takes_the_lease_over():
    api, fake = MemoryCluster([]), FakeTime()
    run(api, ALICE, "r1", step="hook worker-1", duration=30)

    def bob_takes_over():
        stored = lease(api)
        stored["spec"]["renewTime"] = "2026-12-05T07:00:00.000000Z"   # as if Alice's lease had expired
        run(api, BOB, "r2", now=fake.wall(), unfinished="take")
    fake.actions.append((5, bob_takes_over))
    with pytest.raises(svc.LeaseLost) as lost:
        keep(api, fake)
    assert "rebalance run r2 by bob@ctl-2 pid 202 holds it" in lost.value.message


def test_a_keepalive_rides_out_a_short_outage_and_fails_past_the_renew_deadline():
    api, fake = MemoryCluster([]), FakeTime()
    run(api, ALICE, "r1", step="hook worker-1", duration=30)
    down = {"from": 11.0, "until": 15.0}
    original_get = api.get

    def get(res, name, namespace=None):
        if down["from"] <= fake.now < down["until"]:
            raise ApiFailure("get lease", 0, "ConnectionRefused", "connection refused")
        return original_get(res, name, namespace)
    api.get = get
    fake.actions.append((25, lambda: run(api, ALICE, "r1", step="next", duration=30, now=fake.wall())))
    assert keep(api, fake)["stopped"] == "the run moved on to step next"   # 4 s without an answer, within the deadline

    # the run's next hook, then an outage that lasts
    fake.now = 0.0
    api.get = original_get
    run(api, ALICE, "r1", step="hook worker-1", duration=30, now=fake.wall())
    api.get = get
    down.update({"from": 0.0, "until": 1000.0})
    with pytest.raises(svc.LeaseLost) as lost:
        keep(api, fake)
    assert "could not renew the lease for 20 s, past the renew deadline of 20 s" in lost.value.message and 20 <= fake.now <= 22


def test_a_keepalive_in_check_mode_does_nothing():
    api, fake = MemoryCluster([]), FakeTime()
    kept = svc.run(options(run_id="r1", state="keepalive", step="hook"), True, client=api, me=ALICE, clock=fake.clock, sleep=fake.sleep)
    assert kept["renewals"] == 0 and kept["dry_run"] and api.requests == []


def test_a_lease_of_15_seconds_is_the_shortest():
    api = MemoryCluster([])
    assert run(api, ALICE, "r1", duration=15)["lease"]["duration"] == 15
    with pytest.raises(InvalidOption) as refused:
        run(MemoryCluster([]), ALICE, "r1", duration=14)
    assert "must be 15 seconds or more" in refused.value.message
