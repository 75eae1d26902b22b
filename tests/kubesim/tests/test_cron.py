"""Cron schedules as the CronJob controller reads them: robfig/cron's standard syntax and next run times."""
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from kubesim import cron

UTC = timezone.utc


def at(text: str, tz=UTC) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=tz)


def runs(schedule: str, start: str, count: int, tz=UTC) -> list[str]:
    when, result = at(start, tz), []
    for _index in range(count):
        when = cron.next_after(schedule, when)
        result.append(when.strftime("%Y-%m-%d %H:%M %a"))
    return result


def test_every_two_minutes_is_strictly_after_and_minute_aligned():
    assert runs("*/2 * * * *", "2026-03-01 10:00:00", 3) == [
        "2026-03-01 10:02 Sun", "2026-03-01 10:04 Sun", "2026-03-01 10:06 Sun"]
    assert runs("*/2 * * * *", "2026-03-01 10:01:59.900", 1) == ["2026-03-01 10:02 Sun"]


def test_ranges_lists_steps_and_names():
    assert runs("5,35 9-10 * * *", "2026-03-01 09:30", 4) == [
        "2026-03-01 09:35 Sun", "2026-03-01 10:05 Sun", "2026-03-01 10:35 Sun", "2026-03-02 09:05 Mon"]
    assert runs("0 0-12/6 * * *", "2026-03-01 00:00", 3) == [
        "2026-03-01 06:00 Sun", "2026-03-01 12:00 Sun", "2026-03-02 00:00 Mon"]
    assert runs("30 8 * * MON-FRI", "2026-03-06 09:00", 2) == ["2026-03-09 08:30 Mon", "2026-03-10 08:30 Tue"]
    assert runs("0 12 1 jan,Jul *", "2026-03-01 00:00", 2) == ["2026-07-01 12:00 Wed", "2027-01-01 12:00 Fri"]
    # "N/step" runs from N to the field's maximum
    assert runs("50/5 * * * *", "2026-03-01 10:00", 3) == [
        "2026-03-01 10:50 Sun", "2026-03-01 10:55 Sun", "2026-03-01 11:50 Sun"]


def test_macros():
    assert runs("@hourly", "2026-03-01 10:20", 1) == ["2026-03-01 11:00 Sun"]
    assert runs("@daily", "2026-03-01 10:20", 1) == ["2026-03-02 00:00 Mon"]
    assert runs("@midnight", "2026-03-01 10:20", 1) == ["2026-03-02 00:00 Mon"]
    assert runs("@weekly", "2026-03-02 10:20", 1) == ["2026-03-08 00:00 Sun"]
    assert runs("@monthly", "2026-03-02 10:20", 1) == ["2026-04-01 00:00 Wed"]
    assert runs("@yearly", "2026-03-02 10:20", 1) == runs("@annually", "2026-03-02 10:20", 1) == [
        "2027-01-01 00:00 Fri"]
    assert cron.next_after("@every 90s", at("2026-03-01 10:00:00.5")) == at("2026-03-01 10:01:30")


def test_day_of_month_and_day_of_week_combine_like_cron():
    # both restricted: either matches (the 13th or any Friday)
    assert runs("0 0 13 * FRI", "2026-03-01 00:00", 3) == [
        "2026-03-06 00:00 Fri", "2026-03-13 00:00 Fri", "2026-03-20 00:00 Fri"]
    assert runs("0 0 13 * MON", "2026-03-10 00:00", 2) == ["2026-03-13 00:00 Fri", "2026-03-16 00:00 Mon"]
    # day of week "*": only the day of month counts
    assert runs("0 0 31 * *", "2026-03-31 00:00", 2) == ["2026-05-31 00:00 Sun", "2026-07-31 00:00 Fri"]
    # a stepped "*/2" is not a star for this rule ("*/1" is, as in robfig/cron)
    assert runs("0 0 */1 * MON", "2026-03-01 00:00", 2) == ["2026-03-02 00:00 Mon", "2026-03-09 00:00 Mon"]
    assert runs("0 0 */2 * MON", "2026-03-01 00:00", 2) == ["2026-03-02 00:00 Mon", "2026-03-03 00:00 Tue"]


def test_month_and_year_rollover_and_leap_day():
    assert runs("59 23 31 12 *", "2026-12-31 23:59", 1) == ["2027-12-31 23:59 Fri"]
    assert runs("0 0 29 2 *", "2026-03-01 00:00", 1) == ["2028-02-29 00:00 Tue"]


def test_time_zone_is_the_wall_clock_of_the_given_datetime():
    tokyo = ZoneInfo("Asia/Tokyo")
    when = cron.next_after("0 3 * * *", datetime(2026, 3, 1, 12, 0, tzinfo=UTC).astimezone(tokyo))
    assert when.tzinfo is tokyo and (when.hour, when.day) == (3, 2)
    assert when.astimezone(UTC) == datetime(2026, 3, 1, 18, 0, tzinfo=UTC)
    assert cron.next_after("0 * * * *", datetime(2026, 3, 1, 10, 30)) == at("2026-03-01 11:00")   # naive = UTC
    assert cron.rfc3339(at("2026-03-01 11:00")) == "2026-03-01T11:00:00Z"
    assert cron.rfc3339(at("2026-03-01 11:00", tokyo)) == "2026-03-01T11:00:00+09:00"


@pytest.mark.parametrize("schedule, message", [
    ("", "empty spec string"),
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("60 * * * *", "end of range (60) above maximum (59): 60"),
    ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("x * * * *", "failed to parse int from x"),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("TZ=UTC * * * * *", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"),
    ("* * * * 7", "end of range (7) above maximum (6): 7"),
])
def test_invalid_schedules_name_the_problem(schedule, message):
    with pytest.raises(ValueError) as err:
        cron.parse(schedule)
    assert message in str(err.value)


def test_a_schedule_that_never_fires_is_an_error():
    with pytest.raises(ValueError):
        cron.next_after("0 0 30 2 *", at("2026-01-01 00:00"))


def test_parsed_schedule_is_reusable():
    schedule = cron.parse("*/15 * * * *")
    first = schedule.next_after(at("2026-03-01 10:07"))
    assert first == at("2026-03-01 10:15")
    assert schedule.next_after(first) - first == timedelta(minutes=15)
