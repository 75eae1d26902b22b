"""Cron schedules as the CronJob controller reads `spec.schedule`.

Upstream: Kubernetes parses schedules with robfig/cron v3's standard parser (`cron.ParseStandard`), so this
module follows its rules: five fields (minute, hour, day of month, month, day of week) with `*`, `?`,
`*/n`, `a-b`, `a-b/n`, `a/n` (from a to the field's maximum), comma lists, month names (`JAN`..`DEC`) and
day names (`SUN`..`SAT`); the macros `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
`@midnight`, `@hourly` and `@every <duration>`. Day of month and day of week combine as in cron: when
both are restricted a day matching either runs; when either is `*` or `?` both must match.
`TZ=`/`CRON_TZ=` prefixes are refused as the API server's validation does (`spec.timeZone` is the way).

`next_after(schedule, when)` is the first run strictly after `when`, computed on the wall clock of
`when`'s time zone (UTC for a naive datetime).

Simplified: a run that falls into a daylight-saving gap is placed by `zoneinfo`'s fold rules instead of
robfig's "skip to the next valid time"."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_MONTHS = {name: index + 1 for index, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {name: index for index, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (name, minimum, maximum, names)
_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS),
           ("day of week", 0, 6, _DAYS))
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: the allowed values of each field, or a constant delay for `@every`."""
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    day_star: bool = True          # day of month was `*`/`?`
    weekday_star: bool = True      # day of week was `*`/`?`
    every: float | None = None     # seconds, for `@every`

    def day_matches(self, when: datetime) -> bool:
        dom = when.day in self.days
        dow = (when.isoweekday() % 7) in self.weekdays
        if self.day_star or self.weekday_star:
            return dom and dow
        return dom or dow

    def next_after(self, when: datetime) -> datetime:
        return next_after(self, when)


def _number(text: str, names: dict, spec: str) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"failed to parse int from {text}: strconv.Atoi: parsing {text!r}: invalid syntax") from None
    if value < 0:
        raise ValueError(f"negative number ({value}) not allowed: {spec}")
    return value


def _parse_field(text: str, minimum: int, maximum: int, names: dict) -> tuple[frozenset[int], bool]:
    """The values one field allows, and whether it was a plain `*`/`?` (robfig's star bit)."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        range_text, slash, step_text = part.partition("/")
        is_star = range_text in ("*", "?")
        if is_star:
            start, end = minimum, maximum
        else:
            low, dash, high = range_text.partition("-")
            start = _number(low, names, part)
            end = _number(high, names, part) if dash else start
            if step_text and not dash:
                end = maximum     # "N/step" means "N-max/step"
        step = 1
        if slash:
            step = _number(step_text, {}, part) if step_text else 0
            if step <= 0:
                raise ValueError(f"step of range should be a positive number: {part}")
        if start < minimum:
            raise ValueError(f"beginning of range ({start}) below minimum ({minimum}): {part}")
        if end > maximum:
            raise ValueError(f"end of range ({end}) above maximum ({maximum}): {part}")
        if start > end:
            raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {part}")
        values.update(range(start, end + 1, step))
        star = star or (is_star and step == 1)
    return frozenset(values), star


def _parse_duration(text: str) -> float:
    """A Go duration (`1h30m`, `90s`)."""
    if not text or _DURATION_PART.sub("", text):
        raise ValueError(f'failed to parse duration {text}: time: invalid duration "{text}"')
    seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART.findall(text))
    return max(round(seconds), 1)   # robfig rounds to whole seconds, at least one


def parse(spec: str) -> Schedule:
    """Parse a schedule; raises ValueError with robfig/cron's wording."""
    text = (spec or "").strip()
    if not text:
        raise ValueError("empty spec string")
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise ValueError("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    if text.startswith("@"):
        if text.startswith("@every "):
            return Schedule(every=_parse_duration(text[len("@every "):].strip()))
        if text not in _MACROS:
            raise ValueError(f"unrecognized descriptor: {text}")
        text = _MACROS[text]
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    parsed = [_parse_field(field_text, minimum, maximum, names)
              for field_text, (_name, minimum, maximum, names) in zip(fields, _FIELDS)]
    return Schedule(minutes=parsed[0][0], hours=parsed[1][0], days=parsed[2][0], months=parsed[3][0],
                    weekdays=parsed[4][0], day_star=parsed[2][1], weekday_star=parsed[4][1])


def next_after(schedule: "Schedule | str", when: datetime) -> datetime:
    """The first time the schedule fires strictly after `when`, in `when`'s time zone."""
    if isinstance(schedule, str):
        schedule = parse(schedule)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    if schedule.every is not None:
        return when.replace(microsecond=0) + timedelta(seconds=schedule.every)
    tz = when.tzinfo
    wall = when.replace(tzinfo=None, second=0, microsecond=0) + timedelta(minutes=1)
    last_year = wall.year + 5
    while wall.year <= last_year:
        if wall.month not in schedule.months:
            wall = (wall.replace(day=28) + timedelta(days=4)).replace(day=1, hour=0, minute=0)
        elif not schedule.day_matches(wall):
            wall = wall.replace(hour=0, minute=0) + timedelta(days=1)
        elif wall.hour not in schedule.hours:
            wall = wall.replace(minute=0) + timedelta(hours=1)
        elif wall.minute not in schedule.minutes:
            wall += timedelta(minutes=1)
        else:
            return wall.replace(tzinfo=tz)
    raise ValueError("the schedule never fires")


def rfc3339(when: datetime) -> str:
    """Go's time.RFC3339 layout: `Z` for UTC, `+hh:mm` otherwise."""
    text = when.replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
