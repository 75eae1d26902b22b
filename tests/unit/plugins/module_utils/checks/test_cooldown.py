"""The cooldown's pure decisions: durations, the doubling with its cap, the clock, the migration history, the action per
launcher (ours, someone else's, the evict annotation) and whether the live policy makes the marks hold."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import cooldown as cd

from ..k8s_objects import DEFAULT_POLICY, VM_POLICY, launcher, vmi, vmim

NOW = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.timezone.utc)
MINUTE = 60
HOUR = 3600


def at(minutes_ago: float) -> str:
    return cd.format_time(NOW - datetime.timedelta(minutes=minutes_ago))


def migration(name: str, vm: str = "vm-a", phase: str = "Succeeded", ended_minutes_ago: float = 10, **extra) -> dict:
    """A migration as KubeVirt leaves it: created a minute before it ended, its phase transitions stamped."""
    obj = vmim(name, vmi_name=vm, phase=phase, created=at(ended_minutes_ago + 1))
    if phase in ("Succeeded", "Failed"):
        obj["status"]["phaseTransitionTimestamps"] = [{"phase": "Scheduling", "phaseTransitionTimestamp": at(ended_minutes_ago + 1)},
                                                      {"phase": phase, "phaseTransitionTimestamp": at(ended_minutes_ago)}]
    obj["status"].update(extra)
    return obj


@pytest.mark.parametrize("given, seconds", [
    (900, 900), (12.4, 12), ("900", 900), ("15m", 900), ("1h30m", 5400), ("90s", 90), ("6h", 21600), ("1d", 86400), (" 2M ", 120),
    ("0.5m", 30),
])
def test_durations_are_seconds_or_units(given, seconds):
    assert cd.parse_duration(given) == seconds


@pytest.mark.parametrize("given", ["", "15 minutes", "m15", "-5", True, None, "1h-5m"])
def test_what_is_not_a_duration_is_refused(given):
    with pytest.raises(ValueError):
        cd.parse_duration(given)


@pytest.mark.parametrize("migrations, seconds", [(0, 0), (1, 15 * MINUTE), (2, 30 * MINUTE), (3, HOUR), (4, 2 * HOUR), (5, 4 * HOUR),
                                                 (6, 6 * HOUR), (7, 6 * HOUR), (400, 6 * HOUR)])
def test_the_cooldown_doubles_with_each_further_migration_up_to_its_cap(migrations, seconds):
    # OpenShift's KubeVirtRelieveAndMigrate: 15 min, doubling on repeats, capped at 6 h
    assert cd.cooldown_seconds(migrations, 15 * MINUTE, 6 * HOUR) == seconds


def test_the_cap_holds_when_it_is_not_a_doubling_of_the_base():
    assert [cd.cooldown_seconds(n, 100, 250) for n in (1, 2, 3)] == [100, 200, 250]


def test_now_is_the_local_clock_unless_an_object_is_newer():
    objects = [migration("m-1", ended_minutes_ago=5), {"metadata": {"managedFields": [{"time": at(2)}]}}]
    now, clock = cd.reference_now(NOW, objects)
    assert now == NOW and clock["source"] == "local_clock" and clock["newest_seen"] == at(2) and clock["behind_seconds"] == 0
    behind = NOW - datetime.timedelta(minutes=10)
    now, clock = cd.reference_now(behind, objects)
    assert now == NOW - datetime.timedelta(minutes=2) and clock["source"] == "newest_timestamp" and clock["behind_seconds"] == 480.0
    assert cd.reference_now(NOW, [])[1]["newest_seen"] is None


def test_the_history_keeps_the_migrations_of_the_window_per_vm():
    vmims = [migration("old", ended_minutes_ago=400), migration("m-1", ended_minutes_ago=100), migration("m-2", ended_minutes_ago=20),
             migration("f-1", phase="Failed", ended_minutes_ago=30), migration("run", phase="Running"),
             migration("other", vm="vm-b", ended_minutes_ago=50)]
    past = cd.history(vmims, NOW - datetime.timedelta(hours=6))
    assert [v["metadata"]["name"] for _end, v in past[("desched-test", "vm-a")]["succeeded"]] == ["m-1", "m-2"]
    assert [v["metadata"]["name"] for _end, v in past[("desched-test", "vm-a")]["failed"]] == ["f-1"]
    assert [v["metadata"]["name"] for v in past[("desched-test", "vm-a")]["in_flight"]] == ["run"]
    assert [v["metadata"]["name"] for _end, v in past[("desched-test", "vm-b")]["succeeded"]] == ["other"]


def test_a_migration_ends_at_its_final_phase_transition_else_its_end_timestamp_else_its_creation():
    stamped = migration("m", ended_minutes_ago=10, migrationState={"endTimestamp": at(9)})
    assert cd.migration_end(stamped) == NOW - datetime.timedelta(minutes=10)
    unstamped = vmim("m", phase="Succeeded", created=at(30))
    unstamped["status"]["migrationState"]["endTimestamp"] = at(29)
    assert cd.migration_end(unstamped) == NOW - datetime.timedelta(minutes=29)
    assert cd.migration_end(vmim("m", phase="Succeeded", created=at(30))) == NOW - datetime.timedelta(minutes=30)


def decide(vmims, now=NOW, base=15 * MINUTE, cap=6 * HOUR, window=6 * HOUR):
    past = cd.history(vmims, now - datetime.timedelta(seconds=window))
    return cd.decide("desched-test", "vm-a", past.get(("desched-test", "vm-a")), now, base, cap)


def test_one_migration_ten_minutes_ago_keeps_the_vm_for_five_more_minutes():
    decision = decide([migration("m-1", ended_minutes_ago=10)])
    assert decision == {"namespace": "desched-test", "vm": "vm-a", "last_migration": at(10), "migrations_in_window": 1, "migrating": False,
                        "cooldown_seconds": 900, "until": at(-5), "due": True}


def test_a_second_migration_doubles_it_from_the_last_end():
    decision = decide([migration("m-1", ended_minutes_ago=50), migration("m-2", ended_minutes_ago=20)])
    assert (decision["migrations_in_window"], decision["cooldown_seconds"], decision["until"], decision["due"]) == (2, 1800, at(-10), True)


def test_the_cooldown_is_over_once_until_has_passed():
    decision = decide([migration("m-1", ended_minutes_ago=16)])
    assert decision["until"] == at(1) and decision["due"] is False and decision["migrations_in_window"] == 1


def test_migrations_outside_the_window_do_not_count():
    decision = decide([migration("m-1", ended_minutes_ago=90), migration("m-2", ended_minutes_ago=10)], window=HOUR)
    assert (decision["migrations_in_window"], decision["cooldown_seconds"]) == (1, 900)


def test_a_vm_migrating_now_is_kept_whatever_until_says():
    decision = decide([migration("m-1", ended_minutes_ago=100), migration("hang", phase="Running", ended_minutes_ago=59)])
    # the one in flight counts as the second migration, from its start an hour ago
    assert decision["migrating"] and decision["due"] and decision["cooldown_seconds"] == 1800 and decision["until"] == at(30)
    assert decide([migration("new", phase=None)])["due"] is True


def test_without_a_migration_there_is_no_cooldown():
    assert decide([]) == {"namespace": "desched-test", "vm": "vm-a", "last_migration": None, "migrations_in_window": 0, "migrating": False,
                          "cooldown_seconds": 0, "until": None, "due": False}


def test_the_same_migrations_give_the_same_until_later():
    vmims = [migration("m-1", ended_minutes_ago=10)]
    assert decide(vmims)["until"] == decide(vmims, now=NOW + datetime.timedelta(minutes=3))["until"]


def pod_with(**annotations) -> dict:
    return launcher(vmi("vm-a"), metadata={"annotations": annotations})


DUE = {"due": True, "until": at(-5)}


@pytest.mark.parametrize("pod, decision, expected", [
    (pod_with(), DUE, ("mark", None)),
    (pod_with(**{cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-5)}), DUE, ("keep", None)),
    (pod_with(**{cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-1)}), DUE, ("mark", None)),   # a newer migration: a new time
    (pod_with(**{cd.COOLDOWN_UNTIL: at(-5)}), DUE, ("mark", None)),                              # prefer-no-eviction removed by hand
    (pod_with(**{cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(1)}), {"due": False, "until": at(1)}, ("lift", None)),
    (pod_with(**{cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(1)}), None, ("lift", None)),
    (pod_with(), {"due": False, "until": None}, ("none", None)),
    (pod_with(**{cd.PREFER_NO_EVICTION: "true"}), None, ("none", None)),
])
def test_the_action_on_a_launcher(pod, decision, expected):
    assert cd.pod_action(pod, decision) == expected


def test_a_prefer_no_eviction_of_someone_else_is_left_alone_and_said():
    action, reason = cd.pod_action(pod_with(**{cd.PREFER_NO_EVICTION: "true"}), DUE)
    assert action == "skip" and "set by someone else" in reason and cd.COOLDOWN_UNTIL in reason


def test_a_pod_with_the_evict_annotation_is_not_marked_because_the_mark_would_not_hold():
    action, reason = cd.pod_action(pod_with(**{cd.EVICT_ANNOTATION: ""}), DUE)
    assert action == "skip" and "lets through before any no-eviction check" in reason


def test_the_patches_set_and_remove_both_annotations():
    assert cd.mark_patch(at(-5)) == {"metadata": {"annotations": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-5)}}}
    assert cd.lift_patch() == {"metadata": {"annotations": {cd.PREFER_NO_EVICTION: None, cd.COOLDOWN_UNTIL: None}}}
    marked = pod_with(**{cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-5), "other": "x"})
    assert cd.annotations_shown(marked) == {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-5)}


def with_evictor(policy: dict, **args) -> dict:
    """The policy with DefaultEvictor args added to its first profile."""
    profile = dict(policy["profiles"][0])
    profile["pluginConfig"] = [dict(entry, args=dict(entry.get("args") or {}, **args)) if entry["name"] == "DefaultEvictor" else entry
                               for entry in profile["pluginConfig"]]
    return dict(policy, profiles=[profile] + policy["profiles"][1:])


def test_a_vm_profile_without_mandatory_is_reported_with_the_fix():
    findings = cd.policy_findings(VM_POLICY, None, "descheduler", "descheduler", "policy.yaml")
    assert [f["code"] for f in findings] == ["cooldown_not_enforced"] and findings[0]["severity"] == "warning"
    message = findings[0]["message"]
    assert message.startswith("ConfigMap descheduler/descheduler key policy.yaml: profiles[0] (")
    assert "unset (Preferred)" in message and "noEvictionPolicy: Mandatory" in message and cd.PREFER_NO_EVICTION in message
    preferred = cd.policy_findings(with_evictor(VM_POLICY, noEvictionPolicy="Preferred"), None, "descheduler", "descheduler", "policy.yaml")
    assert "noEvictionPolicy is Preferred" in preferred[0]["message"]


def test_mandatory_in_every_evicting_profile_is_no_finding():
    assert cd.policy_findings(with_evictor(VM_POLICY, noEvictionPolicy="Mandatory"), None, "descheduler", "descheduler", "policy.yaml") == []
    assert cd.policy_findings(with_evictor(DEFAULT_POLICY, noEvictionPolicy="Mandatory"), None, "descheduler", "d", "policy.yaml") == []


def test_a_profile_that_evicts_nothing_needs_no_mandatory():
    quiet = {"profiles": [{"name": "quiet", "pluginConfig": [{"name": "DefaultEvictor", "args": {}}], "plugins": {}}]}
    assert cd.policy_findings(quiet, None, "descheduler", "descheduler", "policy.yaml") == []


def test_an_unreadable_policy_is_an_info_finding():
    findings = cd.policy_findings(None, "not YAML: oops", "descheduler", "descheduler", "policy.yaml")
    assert [(f["code"], f["severity"]) for f in findings] == [("cooldown_policy_unknown", "info")]
    assert "not YAML: oops" in findings[0]["message"] and "Mandatory" in findings[0]["message"]
