"""The small JSONPath subset used by printer columns: `.a.b`, `.a[0]`, `.a[*].b`,
`.a[?(@.type=="Ready")].status`."""
from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r'\.((?:\\\.|[^.\[\]\\])+)|\[(\d+|\*)\]|\[\?\(@\.([\w.]+)\s*==\s*["\']([^"\']*)["\']\)\]')


def _tokens(path: str) -> list[tuple]:
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    tokens, pos = [], 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            raise ValueError(f"unsupported jsonpath {path!r} at {pos}")
        if m.group(1) is not None:
            tokens.append(("key", m.group(1).replace("\\.", ".")))
        elif m.group(2) is not None:
            tokens.append(("index", m.group(2)))
        else:
            tokens.append(("filter", m.group(3), m.group(4)))
        pos = m.end()
    return tokens


def _dig(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def evaluate(obj: Any, path: str) -> list[Any]:
    """All values the path selects (empty when nothing matches)."""
    current = [obj]
    for token in _tokens(path):
        nxt = []
        for value in current:
            if token[0] == "key":
                if isinstance(value, dict) and token[1] in value:
                    nxt.append(value[token[1]])
            elif token[0] == "index":
                if isinstance(value, list):
                    if token[1] == "*":
                        nxt.extend(value)
                    elif int(token[1]) < len(value):
                        nxt.append(value[int(token[1])])
            else:
                if isinstance(value, list):
                    nxt.extend(v for v in value if str(_dig(v, token[1])) == token[2])
        current = nxt
    return current


def first(obj: Any, path: str, default: Any = None) -> Any:
    values = evaluate(obj, path)
    return values[0] if values else default
