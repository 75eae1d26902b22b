# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsing descheduler log lines (k8s.io/klog/v2 text format) into records.

A line is a header and a structured message::

    I1130 22:11:23.123456       1 evictions.go:221] "Eviction in background assumed" pod="ns/virt-launcher-vm-1-abcde"

The header is the severity letter (I, W, E, F), month and day, wall time with microseconds, the thread id and
`file:line]`. The message is a Go-quoted string (InfoS/ErrorS) followed by `key=value` pairs whose values are
Go-quoted strings, bare words and numbers, or JSON (maps and slices); or it is free text (Infof, Error). The
header has no year: `parse_line(..., year=)` or `reference=` (a datetime near the log, such as the Job Pod's
start time) fills it in.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any, Dict, Iterable, List, Optional

LEVELS = {"I": "info", "W": "warning", "E": "error", "F": "fatal"}
HEADER = re.compile(r"^(?P<level>[IWEF])(?P<month>\d{2})(?P<day>\d{2}) (?P<time>\d{2}:\d{2}:\d{2}\.\d{6})\s+"
                    r"(?P<thread>\d+) (?P<source>[^\s\]]+)\] ?(?P<rest>.*)$")
# klog prints keys as they are: the profile's total line has the key `extension point`, so a key may hold single spaces
KEY = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-/]*(?: [A-Za-z_][A-Za-z0-9_.\-/]*)*)=")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}

EVICTION_ASSUMED = "Eviction in background assumed"
EVICTIONS_COUNT = "Number of evictions/requests"


def _quoted(text: str, start: int) -> tuple:
    """A Go-quoted string starting at `text[start] == '"'`: (value, index after the closing quote)."""
    out = []
    index = start + 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return "".join(out), index + 1
        if char == "\\" and index + 1 < len(text):
            nxt = text[index + 1]
            if nxt in ESCAPES:
                out.append(ESCAPES[nxt])
                index += 2
                continue
            if nxt in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[nxt]
                digits = text[index + 2:index + 2 + width]
                try:
                    out.append(chr(int(digits, 16)))
                    index += 2 + width
                    continue
                except ValueError:
                    pass
            out.append(nxt)
            index += 2
            continue
        out.append(char)
        index += 1
    raise ValueError("unterminated quoted string")


def _json_value(text: str, start: int) -> tuple:
    decoder = json.JSONDecoder()
    return decoder.raw_decode(text, start)


def _bare(text: str, start: int) -> tuple:
    end = start
    while end < len(text) and not text[end].isspace():
        end += 1
    word = text[start:end]
    if re.fullmatch(r"-?\d+", word):
        return int(word), end
    if re.fullmatch(r"-?\d+\.\d*(e[-+]?\d+)?", word):
        return float(word), end
    if word in ("true", "false"):
        return word == "true", end
    return (None if word == "<nil>" else word), end


def parse_fields(text: str) -> Dict[str, Any]:
    """`key="value" key2=N key3={...}` into a dict; text that is not a pair ends the parsing."""
    fields: Dict[str, Any] = {}
    index = 0
    while index < len(text):
        match = KEY.match(text, index)
        if not match:
            break
        index = match.end()
        if index >= len(text):
            fields[match.group(1)] = ""
            break
        first = text[index]
        try:
            if first == '"':
                value, index = _quoted(text, index)
            elif first in "{[":
                value, index = _json_value(text, index)
            else:
                value, index = _bare(text, index)
        except ValueError:
            value, index = _bare(text, index)
        fields[match.group(1)] = value
    return fields


def _timestamp(month: int, day: int, clock: str, year: Optional[int], reference: Optional[datetime.datetime]) -> Optional[str]:
    hour, minute, rest = clock.split(":")
    second, micro = rest.split(".")
    years = [year] if year else ([reference.year - 1, reference.year, reference.year + 1] if reference else [datetime.datetime.now(datetime.timezone.utc).year])
    candidates = []
    for candidate in years:
        try:
            candidates.append(datetime.datetime(candidate, month, day, int(hour), int(minute), int(second), int(micro),
                                                tzinfo=datetime.timezone.utc))
        except ValueError:
            continue
    if not candidates:
        return None
    if reference is not None and not year:
        ref = reference if reference.tzinfo else reference.replace(tzinfo=datetime.timezone.utc)
        candidates.sort(key=lambda when: abs((when - ref).total_seconds()))
    return candidates[0].isoformat().replace("+00:00", "Z")


def parse_line(line: str, year: Optional[int] = None, reference: Optional[datetime.datetime] = None) -> Optional[dict]:
    """One klog line as {time, level, source, thread, message, fields, line}; None for a line without a header."""
    match = HEADER.match(line.rstrip("\r\n"))
    if not match:
        return None
    rest = match.group("rest")
    message = rest
    fields: Dict[str, Any] = {}
    if rest.startswith('"'):
        try:
            message, end = _quoted(rest, 0)
            fields = parse_fields(rest[end:])
        except ValueError:
            message = rest
    return {
        "time": _timestamp(int(match.group("month")), int(match.group("day")), match.group("time"), year, reference),
        "level": LEVELS[match.group("level")],
        "source": match.group("source"),
        "thread": int(match.group("thread")),
        "message": message,
        "fields": fields,
        "line": line.rstrip("\r\n"),
    }


def parse_lines(lines: Iterable[str], year: Optional[int] = None, reference: Optional[datetime.datetime] = None) -> List[dict]:
    """Every klog line of a log; lines without a header (continuations, other output) are skipped."""
    records = []
    for line in lines:
        record = parse_line(line, year=year, reference=reference)
        if record is not None:
            records.append(record)
    return records


def parse_time(value: Optional[str]) -> Optional[datetime.datetime]:
    """An RFC 3339 timestamp (`2026-11-30T22:11:23Z`, fractions and offsets allowed) as an aware datetime."""
    if not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def format_time(when: datetime.datetime) -> str:
    """RFC 3339 in UTC with whole seconds, as Kubernetes writes timestamps (what parse_time reads back)."""
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def eviction_requests(records: Iterable[dict], pod: Optional[str] = None) -> List[dict]:
    """`Eviction in background assumed` records, for one Pod (`namespace/name`) when given."""
    return [r for r in records if r.get("message") == EVICTION_ASSUMED and (pod is None or r["fields"].get("pod") == pod)]


# ------------------------------------------------------------------------------------------ run summary
CLASSIFIED = "Node has been classified"
APPROPRIATELY = "Node is appropriately utilized"
PODS_ON_NODE = "Pods on node"
EVICTION_ALREADY_REQUESTED = "Eviction in background already requested (ignoring)"
EVICTION_ERROR = "Error evicting pod"
EVICTED = "Evicted pod"
CYCLE_START = "Resetting pod evictor counters"
APPROPRIATE_CATEGORY = "appropriately_utilized"
NOTHING_TO_DO = "nothing to do here"
SKIPPED_CYCLE = "Skipping descheduling cycle"


def _number(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _pod_ref(value: Any) -> dict:
    text = str(value or "")
    namespace, _sep, name = text.rpartition("/")
    return {"pod": text, "namespace": namespace or None, "name": name}


def run_summary(records: Iterable[dict]) -> Dict[str, Any]:
    """What one descheduling cycle did, from its parsed lines (the `grep -E 'classified|removablePods|Eviction in background|
    Number of evictions'` of the rebalance procedure, Validate Rebalancing, step 3, and the early exits): node classification, removable Pods per node,
    evictions requested in the background or refused, the totals, why it stopped, and the error lines."""
    summary: Dict[str, Any] = {"classification": [], "pods_on_node": [], "background_evictions": [], "already_requested": [],
                               "failed_evictions": [], "evicted": [], "totals": None, "stop_reason": None, "nothing_to_do": False,
                               "errors": []}
    for record in records:
        message, fields = record.get("message") or "", record.get("fields") or {}
        if message == CLASSIFIED or message == APPROPRIATELY:
            summary["classification"].append({"node": fields.get("node"), "usage_percent": fields.get("usagePercentage"),
                                              "category": fields.get("category") if message == CLASSIFIED else APPROPRIATE_CATEGORY})
        elif message == PODS_ON_NODE:
            summary["pods_on_node"].append({"node": fields.get("node"), "all": _number(fields.get("allPods")),
                                            "non_removable": _number(fields.get("nonRemovablePods")),
                                            "removable": _number(fields.get("removablePods"))})
        elif message == EVICTION_ASSUMED:
            summary["background_evictions"].append(dict(_pod_ref(fields.get("pod")), time=record.get("time"), line=record.get("line")))
        elif message == EVICTION_ALREADY_REQUESTED:
            summary["already_requested"].append(dict(_pod_ref(fields.get("pod")), time=record.get("time"), line=record.get("line")))
        elif message in (EVICTED, "Evicted pod in dry run mode"):
            summary["evicted"].append(dict(_pod_ref(fields.get("pod")), dry_run=message != EVICTED, line=record.get("line")))
        elif message == EVICTION_ERROR:
            summary["failed_evictions"].append(dict(_pod_ref(fields.get("pod")) if fields.get("pod") else {"pod": None},
                                                    error=fields.get("err"), limit=fields.get("limit"), line=record.get("line")))
        elif message == EVICTIONS_COUNT:
            summary["totals"] = {"total_evicted": _number(fields.get("totalEvicted")),
                                 "eviction_requests": _number(fields.get("evictionRequests"))}
        elif NOTHING_TO_DO in message or message.startswith(SKIPPED_CYCLE):
            summary["stop_reason"] = message
            summary["nothing_to_do"] = True
        elif record.get("level") in ("error", "fatal"):
            summary["errors"].append(record.get("line"))
    return summary


def split_cycles(records: List[dict]) -> List[List[dict]]:
    """A long-running descheduler's log as cycles, each ending with its `Number of evictions/requests` line; lines after
    the last such line (a cycle in progress, or an error that ended the process) are the last, unfinished group."""
    cycles: List[List[dict]] = []
    current: List[dict] = []
    for record in records:
        current.append(record)
        if record.get("message") == EVICTIONS_COUNT:
            cycles.append(current)
            current = []
    if current:
        cycles.append(current)
    return cycles


def cycle_complete(records: List[dict]) -> bool:
    return bool(records) and records[-1].get("message") == EVICTIONS_COUNT


SWAPPING = ("overutilized", "underutilized")
SWAP_ADVICE = ("The thresholds are too close together for the size of the workloads: widen the gap between thresholds and "
               "targetThresholds instead of lowering the eviction limits.")


def category_swaps(before: Iterable[dict], after: Iterable[dict]) -> List[dict]:
    """Nodes classified overutilized in one run and underutilized in the next (or the reverse), from two `classification`
    lists, with the advice of the rebalance procedure (Validate Rebalancing)."""
    earlier = {item.get("node"): item for item in before or [] if isinstance(item, dict)}
    swaps = []
    for item in after or []:
        if not isinstance(item, dict):
            continue
        previous = earlier.get(item.get("node"))
        if previous is None:
            continue
        pair = (previous.get("category"), item.get("category"))
        if pair[0] != pair[1] and set(pair) == set(SWAPPING):
            swaps.append({"node": item.get("node"), "before": pair[0], "after": pair[1],
                          "usage_before": previous.get("usage_percent"), "usage_after": item.get("usage_percent"), "advice": SWAP_ADVICE})
    return swaps
