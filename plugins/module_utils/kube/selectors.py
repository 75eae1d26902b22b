# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Label selectors as the API server reads them: the string form of `labelSelector=` (to refuse a bad one
before any request) and the `metav1.LabelSelector` object form (`matchLabels`, `matchExpressions`) that
PodDisruptionBudgets use, matched against labels without a cluster."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

Requirement = Tuple[str, str, Tuple[str, ...]]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(r"^(({0})/)?{1}$".format(_PREFIX, _NAME))
_VALUE_RE = re.compile(r"^({0})?$".format(_NAME))
_SET_RE = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQ_RE = re.compile(r"^(?P<key>[^!=<>\s]+)\s*(?P<op>==|=|!=|>|<)\s*(?P<value>[^\s]*)$")
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_dns_label(name: str) -> bool:
    """RFC 1123 label: what a namespace name must be."""
    return bool(_DNS_LABEL_RE.match(name or ""))


def is_dns_subdomain(name: str) -> bool:
    """RFC 1123 subdomain: what most object names must be."""
    return bool(name) and len(name) <= 253 and bool(_DNS_SUBDOMAIN_RE.match(name))


_TOP_LEVEL_COMMA = re.compile(r",(?![^()]*\))")   # a comma that is not inside "( ... )"


def _split_terms(text: str) -> List[str]:
    return [term.strip() for term in _TOP_LEVEL_COMMA.split(text)]


def _check_key(key: str) -> str:
    if not _KEY_RE.match(key) or len(key.split("/")[-1]) > 63:
        raise ValueError("invalid label key {0!r}: a name of at most 63 characters (letters, digits, '-', '_', '.'), "
                         "with an optional DNS subdomain prefix and '/'".format(key))
    return key


def _check_value(value: str) -> str:
    if not _VALUE_RE.match(value):
        raise ValueError("invalid label value {0!r}: at most 63 letters, digits, '-', '_' or '.', "
                         "beginning and ending with a letter or digit".format(value))
    return value


def check_labels(labels: Dict[str, Any]) -> None:
    """ValueError naming the first key or value of a label map (matchLabels) that Kubernetes would refuse."""
    for key, value in labels.items():
        _check_key(str(key))
        _check_value("" if value is None else str(value))


def _parse_term(term: str) -> Requirement:
    match = _SET_RE.match(term)
    if match:
        values = tuple(_check_value(v.strip()) for v in match.group("values").split(",") if v.strip())
        if not values:
            raise ValueError("{0!r}: '{1}' needs at least one value".format(term, match.group("op")))
        return (_check_key(match.group("key")), match.group("op"), values)
    if term.startswith("!"):
        return (_check_key(term[1:].strip()), "!", ())
    match = _EQ_RE.match(term)
    if match:
        op = "=" if match.group("op") in ("=", "==") else match.group("op")
        value = match.group("value")
        if op in (">", "<") and not re.match(r"^-?\d+$", value):
            raise ValueError("{0!r}: '{1}' needs an integer value".format(term, op))
        return (_check_key(match.group("key")), op, (_check_value(value),))
    return (_check_key(term), "exists", ())


def parse_label_selector(text: Optional[str]) -> List[Requirement]:
    """The requirements of a selector string (`app=web,tier in (a,b),!canary`); ValueError when it is not one."""
    if text is None or not text.strip():
        return []
    terms = _split_terms(text.strip())
    if any(not term for term in terms):
        raise ValueError("empty requirement in {0!r}".format(text))
    return [_parse_term(term) for term in terms]


def _matches(requirement: Requirement, labels: Dict[str, str]) -> bool:
    key, op, values = requirement
    present = key in labels
    value = labels.get(key)
    if op == "=":
        return present and value == values[0]
    if op == "!=":
        return not present or value != values[0]
    if op == "in":
        return present and value in values
    if op == "notin":
        return not present or value not in values
    if op == "exists":
        return present
    if op == "!":
        return not present
    if not present or not re.match(r"^-?\d+$", value or ""):
        return False
    return int(value) > int(values[0]) if op == ">" else int(value) < int(values[0])


def matches_selector_string(requirements: List[Requirement], labels: Optional[Dict[str, str]]) -> bool:
    return all(_matches(r, labels or {}) for r in requirements)


_EXPRESSION_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def match_label_selector(selector: Optional[dict], labels: Optional[Dict[str, str]]) -> bool:
    """A `metav1.LabelSelector` against labels. A null selector selects nothing; an empty one (`{}`) selects
    everything, as the policy/v1 PodDisruptionBudget defines it. An unknown operator selects nothing."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        op = _EXPRESSION_OPS.get(expression.get("operator"))
        if op is None:
            return False
        if not _matches((expression.get("key", ""), op, tuple(expression.get("values") or ())), labels):
            return False
    return True


def selector_to_string(selector: Optional[dict]) -> Optional[str]:
    """A LabelSelector object in the string form kubectl prints (None for a null selector)."""
    if selector is None:
        return None
    parts = ["{0}={1}".format(k, v) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        op = expression.get("operator")
        key = expression.get("key", "")
        if op in ("In", "NotIn"):
            parts.append("{0} {1} ({2})".format(key, op.lower(), ",".join(expression.get("values") or [])))
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append("!" + key)
    return ",".join(parts)
