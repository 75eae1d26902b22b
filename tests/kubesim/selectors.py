"""Label and field selectors in the query-string syntax of the Kubernetes API."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .errors import bad_request

_LABEL_KEY = re.compile(r"^([a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str                 # =, !=, in, notin, exists, !
    values: tuple[str, ...] = ()

    def matches(self, labels: dict) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present  # "!"


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


_SET_RE = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")
_EQ_RE = re.compile(r"^(?P<key>[^!=\s]+)\s*(?P<op>==|=|!=)\s*(?P<value>\S*)$")


def parse_label_selector(text: str | None) -> list[Requirement]:
    if not text:
        return []
    requirements = []
    for part in _split_top_level(text):
        if m := _SET_RE.match(part):
            values = tuple(v.strip() for v in m["values"].split(",") if v.strip())
            requirements.append(Requirement(_check_key(m["key"]), m["op"], values))
        elif m := _EQ_RE.match(part):
            op = "=" if m["op"] in ("=", "==") else "!="
            requirements.append(Requirement(_check_key(m["key"]), op, (m["value"],)))
        elif part.startswith("!"):
            requirements.append(Requirement(_check_key(part[1:].strip()), "!"))
        else:
            requirements.append(Requirement(_check_key(part), "exists"))
    return requirements


def _check_key(key: str) -> str:
    if not _LABEL_KEY.match(key):
        raise bad_request(f'unable to parse requirement: invalid label key "{key}": name part must consist of '
                          "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                          "alphanumeric character")
    return key


def label_matcher(text: str | None) -> Callable[[dict], bool]:
    requirements = parse_label_selector(text)
    if not requirements:
        return lambda obj: True

    def match(obj: dict) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)
    return match


def match_label_selector_object(selector: dict | None, labels: dict) -> bool:
    """Match a metav1.LabelSelector object (matchLabels, matchExpressions); None matches nothing."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}[expr["operator"]]
        if not Requirement(expr["key"], op, tuple(expr.get("values") or ())).matches(labels):
            return False
    return True


def _field_value(obj: dict, path: str) -> str:
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_matcher(text: str | None, supported: frozenset[str], kind_plural: str) -> Callable[[dict], bool]:
    """Field selectors: `=`, `==`, `!=` on the fields this resource supports (metadata.name and
    metadata.namespace always)."""
    if not text:
        return lambda obj: True
    checks = []
    for part in _split_top_level(text):
        m = re.match(r"^([^!=]+)(==|=|!=)(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if field not in supported:
            raise bad_request(f'field label not supported: {field}')
        checks.append((field, op != "!=", value))

    def match(obj: dict) -> bool:
        return all((_field_value(obj, f) == v) == want for f, want, v in checks)
    del kind_plural
    return match
