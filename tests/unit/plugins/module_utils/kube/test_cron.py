"""cron.Schedule: the fields, names, macros and day-of-month/day-of-week rule the CronJob controller uses, and the
next run within a horizon."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.cron import Schedule

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 30, 10, 3, 30, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize("spec,horizon,expected", [
    ("*/2 * * * *", 600, datetime.datetime(2026, 11, 30, 10, 4, tzinfo=UTC)),
    ("5 * * * *", 600, datetime.datetime(2026, 11, 30, 10, 5, tzinfo=UTC)),
    ("0 3 * * *", 600, None),
    ("@hourly", 3600, datetime.datetime(2026, 11, 30, 11, 0, tzinfo=UTC)),
    ("10-20/5 10 * nov mon-fri", 600, datetime.datetime(2026, 11, 30, 10, 10, tzinfo=UTC)),
    ("4 10 * * sun", 600, None),
    ("4 10 30 * sun", 600, datetime.datetime(2026, 11, 30, 10, 4, tzinfo=UTC)),  # both restricted: either matches
])
def test_next_run_within_horizon(spec, horizon, expected):
    assert Schedule(spec).next_after(NOW, horizon) == expected


def test_time_zone_shifts_the_hours():
    assert Schedule("4 11 * * *", "Europe/Berlin").next_after(NOW, 600) == datetime.datetime(2026, 11, 30, 10, 4, tzinfo=UTC)
    assert Schedule("CRON_TZ=Europe/Berlin 4 10 * * *").next_after(NOW, 600) is None


def test_sunday_as_seven():
    assert Schedule("0 0 * * 7").matches(datetime.datetime(2026, 11, 29, 0, 0, tzinfo=UTC))


@pytest.mark.parametrize("spec", ["* * * *", "61 * * * *", "*/0 * * * *", "a b c d e"])
def test_invalid_schedules_raise(spec):
    with pytest.raises(ValueError):
        Schedule(spec)
