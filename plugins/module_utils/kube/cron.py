# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When a CronJob runs next: enough of the cron syntax the CronJob controller accepts (five fields with `*`, ranges,
steps, lists, month and weekday names; `@hourly`-style macros; `CRON_TZ=`/`TZ=` prefixes and `spec.timeZone`) to
answer "does it run within the next N seconds". Minutes are matched one by one, so the cost grows with the horizon,
which callers keep to a timeout (minutes to hours)."""

from __future__ import annotations

import datetime
from typing import List, Optional, Set

try:
    from zoneinfo import ZoneInfo
except ImportError:  # Python < 3.9: UTC only
    ZoneInfo = None  # pylint: disable=invalid-name

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (low, high, names with their first value)
FIELDS = ((0, 59, None), (0, 23, None), (1, 31, None), (1, 12, (MONTHS, 1)), (0, 7, (DAYS, 0)))


def _value(text: str, names) -> int:
    if names and text.lower() in names[0]:
        return names[0].index(text.lower()) + names[1]
    return int(text)


def _field(text: str, low: int, high: int, names) -> Set[int]:
    values: Set[int] = set()
    for part in text.split(","):
        body, _sep, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step <= 0:
            raise ValueError("step must be positive: {0!r}".format(part))
        if body in ("*", "?"):
            start, end = low, high
        elif "-" in body:
            first, last = body.split("-", 1)
            start, end = _value(first, names), _value(last, names)
        else:
            start = _value(body, names)
            end = high if step_text else start
        if start < low or end > high or start > end:
            raise ValueError("{0!r} is outside {1}-{2}".format(part, low, high))
        values.update(range(start, end + 1, step))
    return values


class Schedule:
    """A parsed schedule: `matches(minute)` for an aware datetime."""

    def __init__(self, text: str, time_zone: Optional[str] = None) -> None:
        spec = (text or "").strip()
        if spec.startswith(("CRON_TZ=", "TZ=")):
            zone, _sep, spec = spec.partition(" ")
            time_zone = zone.split("=", 1)[1]
            spec = spec.strip()
        self.zone = datetime.timezone.utc
        if time_zone and time_zone != "UTC":
            if ZoneInfo is None:
                raise ValueError("time zone {0!r} needs Python 3.9 or later".format(time_zone))
            self.zone = ZoneInfo(time_zone)
        spec = MACROS.get(spec.lower(), spec)
        parts = spec.split()
        if len(parts) != 5:
            raise ValueError("expected 5 fields, found {0}: {1!r}".format(len(parts), text))
        sets: List[Set[int]] = [_field(part, low, high, names) for part, (low, high, names) in zip(parts, FIELDS)]
        if 7 in sets[4]:
            sets[4] = (sets[4] - {7}) | {0}
        self.minutes, self.hours, self.days, self.months, self.weekdays = sets
        self.any_day = parts[2] in ("*", "?")
        self.any_weekday = parts[4] in ("*", "?")

    def matches(self, when: datetime.datetime) -> bool:
        local = when.astimezone(self.zone)
        if local.minute not in self.minutes or local.hour not in self.hours or local.month not in self.months:
            return False
        day = local.day in self.days
        weekday = (local.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:  # cron: both restricted means either may match
            return day and weekday
        return day or weekday

    def next_after(self, now: datetime.datetime, horizon_seconds: float) -> Optional[datetime.datetime]:
        """The first run strictly after `now` within `horizon_seconds`, or None."""
        minute = now.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
        end = now + datetime.timedelta(seconds=horizon_seconds)
        while minute <= end:
            if self.matches(minute):
                return minute
            minute += datetime.timedelta(minutes=1)
        return None
