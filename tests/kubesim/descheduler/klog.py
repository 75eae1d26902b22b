"""klog text output, as the descheduler container prints it (k8s.io/klog/v2 text format).

A line is `Lmmdd hh:mm:ss.uuuuuu threadid file:line] message` where L is I, W or E, the thread id is
right-aligned in seven columns (the descheduler runs as PID 1 in its container) and the message is either
structured (`InfoS`/`ErrorS`: the quoted message, then `key=value` pairs; for `ErrorS` the `err` pair
comes first) or printf text (`Infof`, `Error`). Values are rendered like klog does: strings quoted with Go
escaping, integers bare, maps as JSON with sorted keys, `klog.KObj` as `"namespace/name"`.

`--v=N` keeps Info lines of verbosity <= N; warnings and errors are always printed.

A contextual logger (`klog.FromContext(ctx).WithValues(k, v)`, `Logger.with_values`) prints its values
before the call's own pairs, as klog's MergeKVs does: `"Node has been classified" plugin="LowNodeUtilization"
ExtensionPoint="Balance" category=...`.

Simplified: timestamps are wall-clock UTC (the simulator's clock); `file:line` names the upstream source
file and line of each call as read in descheduler v0.36 where it could be read (see the callers);
values are rendered by type, not by Go's `fmt.Stringer`/`logr.Marshaler` rules."""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone


def quote(text: str) -> str:
    """A Go-quoted string (strconv.Quote for the printable subset klog sees)."""
    return json.dumps(str(text), ensure_ascii=False)


def kobj(obj: dict) -> str:
    """klog.KObj: `namespace/name`, or `name` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name", ""))


def _jsonable(value):
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def format_value(value) -> str:
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value == int(value) else repr(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(_jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return quote(str(value))


def format_pairs(pairs: tuple) -> str:
    out = []
    for index in range(0, len(pairs) - 1, 2):
        out.append(f"{pairs[index]}={format_value(pairs[index + 1])}")
    return " ".join(out)


class Logger:
    """Collects the lines one descheduler process prints, filtered by its `--v` verbosity."""

    def __init__(self, verbosity: int = 0, pid: int = 1, now=None):
        self.verbosity = verbosity
        self.pid = pid
        self.lines: list[str] = []
        self._now = now or (lambda: datetime.now(timezone.utc))

    def enabled(self, level: int) -> bool:
        return level <= self.verbosity

    def _header(self, severity: str, where: str) -> str:
        now = self._now()
        return f"{severity}{now:%m%d %H:%M:%S}.{now.microsecond:06d} {self.pid:7d} {where}] "

    def _emit(self, severity: str, where: str, body: str) -> None:
        self.lines.append(self._header(severity, where) + body)

    def info(self, level: int, where: str, msg: str, *pairs) -> None:
        """klog.V(level).InfoS(msg, key, value, ...)."""
        if self.enabled(level):
            self._emit("I", where, " ".join(filter(None, [quote(msg), format_pairs(pairs)])))

    def infof(self, level: int, where: str, text: str) -> None:
        """klog.V(level).Infof(text): unquoted."""
        if self.enabled(level):
            self._emit("I", where, text)

    def warningf(self, where: str, text: str) -> None:
        self._emit("W", where, text)

    def error(self, where: str, err: str | None, msg: str, *pairs) -> None:
        """klog.ErrorS(err, msg, key, value, ...)."""
        parts = [quote(msg)]
        if err is not None:
            parts.append(f"err={quote(err)}")
        rest = format_pairs(pairs)
        if rest:
            parts.append(rest)
        self._emit("E", where, " ".join(parts))

    def errorf(self, where: str, text: str) -> None:
        """klog.Error(err): unquoted."""
        self._emit("E", where, text)

    def take(self) -> list[str]:
        """The lines printed since the last call."""
        lines, self.lines = self.lines, []
        return lines

    def with_values(self, *pairs) -> "BoundLogger":
        return BoundLogger(self, pairs)


class BoundLogger:
    """logr's `WithValues`: the same output, with `pairs` printed before each call's pairs."""

    def __init__(self, base: Logger, pairs: tuple):
        self.base = base
        self.pairs = tuple(pairs)

    def enabled(self, level: int) -> bool:
        return self.base.enabled(level)

    def info(self, level: int, where: str, msg: str, *pairs) -> None:
        self.base.info(level, where, msg, *self.pairs, *pairs)

    def error(self, where: str, err: str | None, msg: str, *pairs) -> None:
        self.base.error(where, err, msg, *self.pairs, *pairs)

    def with_values(self, *pairs) -> "BoundLogger":
        return BoundLogger(self.base, self.pairs + tuple(pairs))
