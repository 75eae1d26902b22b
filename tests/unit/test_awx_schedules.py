"""The AWX schedules under awx/ (infra.aap_configuration's `controller_schedules` shape): each launches a job template
defined there, with an iCal rule AWX accepts (DTSTART in UTC, then an RRULE with FREQ and INTERVAL), and configure.yml
applies them; the cooldown's schedule runs more often than the cooldown lasts, so that a VM's mark is applied within
its cooldown."""
from __future__ import annotations

import re

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.cooldown import parse_duration

from support.awx import ROOT, load_awx

AWX = load_awx(ROOT)
SCHEDULES = AWX.objects.get("controller_schedules", [])
RRULE = re.compile(r"^DTSTART:(\d{8}T\d{6}Z) RRULE:(?P<rule>[A-Z]+=[A-Z0-9,]+(;[A-Z]+=[A-Z0-9,]+)*)$")
FREQ_SECONDS = {"MINUTELY": 60, "HOURLY": 3600, "DAILY": 86400}


def rule_parts(schedule: dict) -> dict:
    match = RRULE.match(schedule["rrule"])
    assert match, "{0}: rrule {1!r} is not DTSTART:<UTC> RRULE:<parts>".format(schedule["name"], schedule["rrule"])
    return dict(part.split("=", 1) for part in match.group("rule").split(";"))


def interval_seconds(schedule: dict) -> int:
    parts = rule_parts(schedule)
    return FREQ_SECONDS[parts["FREQ"]] * int(parts.get("INTERVAL", "1"))


def test_there_is_a_schedule_for_the_cooldown():
    assert [s["unified_job_template"] for s in SCHEDULES if s["unified_job_template"] == "KubeVirt rebalance cooldown (Descheduler)"]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=[s["name"] for s in SCHEDULES])
def test_each_schedule_launches_a_template_with_a_rule_awx_accepts(schedule):
    assert schedule["unified_job_template"] in AWX.names("controller_templates"), schedule
    parts = rule_parts(schedule)
    assert parts["FREQ"] in FREQ_SECONDS and int(parts.get("INTERVAL", "1")) >= 1, parts
    assert isinstance(schedule.get("enabled"), bool) and schedule.get("description")


def test_schedule_names_are_unique():
    names = [s["name"] for s in SCHEDULES]
    assert len(names) == len(set(names))


def test_the_cooldown_runs_more_often_than_the_cooldown_lasts():
    template = AWX.by_name("controller_templates", "KubeVirt rebalance cooldown (Descheduler)")
    period = next(q["default"] for q in template["survey_spec"]["spec"] if q["variable"] == "cooldown_period")
    for schedule in (s for s in SCHEDULES if s["unified_job_template"] == template["name"]):
        assert interval_seconds(schedule) < parse_duration(period), (schedule["rrule"], period)


def test_configure_applies_the_schedules_of_the_job_template_files():
    tasks = yaml.safe_load((ROOT / "awx" / "configure.yml").read_text())[0]["tasks"]
    reading = next(task for task in tasks if "ansible.builtin.set_fact" in task)
    assert "controller_schedules" in reading["ansible.builtin.set_fact"] and "/job_templates/*.yml" in reading["loop"]


def test_a_rule_awx_would_refuse_is_caught():
    with pytest.raises(AssertionError):
        rule_parts({"name": "broken", "rrule": "every 5 minutes"})
    assert interval_seconds({"name": "ok", "rrule": "DTSTART:20260101T000000Z RRULE:FREQ=HOURLY;INTERVAL=2"}) == 7200
