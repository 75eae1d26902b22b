# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities (`100m`, `512Mi`, `1.5G`, `2e3`) and Pod requests as the scheduler and
the descheduler's LowNodeUtilization count them: the larger of the sum of the containers and the largest
init container, plus the Pod overhead."""

from __future__ import annotations

import decimal
import functools
import math
import re
from typing import Any, Dict, Optional

_SUFFIXES = {
    "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
    "n": decimal.Decimal("1e-9"), "u": decimal.Decimal("1e-6"), "m": decimal.Decimal("1e-3"), "": 1,
    "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18,
}
_QUANTITY_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")
RESOURCES = ("cpu", "memory", "pods")


def parse_quantity(value: Any) -> decimal.Decimal:
    """A quantity as a Decimal in base units (cores, bytes); ValueError when it is not a quantity."""
    if isinstance(value, (int, float)):
        return decimal.Decimal(str(value))
    text = str(value).strip()
    match = _QUANTITY_RE.match(text)
    if not match:
        raise ValueError("{0!r} is not a Kubernetes quantity".format(value))
    number = decimal.Decimal(match.group(1))
    if match.group(2):
        return number * (decimal.Decimal(10) ** int(match.group(2)[1:]))
    return number * decimal.Decimal(_SUFFIXES[match.group(3) or ""])


def amount(resource: str, value: Any) -> int:
    """cpu in millicores, memory (and anything else) in whole units, rounded up as the API server does."""
    if isinstance(value, str):
        return _amount_of_text(resource, value)
    return _amount(resource, value)


def _amount(resource: str, value: Any) -> int:
    quantity = parse_quantity(value)
    if resource == "cpu":
        quantity *= 1000
    return int(math.ceil(quantity))


# a cluster's Pods repeat a few request strings ("100m", "1Gi") thousands of times: parse each once
_amount_of_text = functools.lru_cache(maxsize=1024)(_amount)


def _add(total: Dict[str, int], requests: Optional[dict]) -> None:
    for resource, value in (requests or {}).items():
        try:
            total[resource] = total.get(resource, 0) + amount(resource, value)
        except ValueError:
            continue


def pod_requests(pod: dict) -> Dict[str, int]:
    """Requests of one Pod by resource (cpu millicores, memory bytes, ...) plus `pods: 1`."""
    spec = pod.get("spec") or {}
    total: Dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(total, (container.get("resources") or {}).get("requests"))
    for container in spec.get("initContainers") or []:
        init: Dict[str, int] = {}
        _add(init, (container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":  # sidecar containers run alongside
            for resource, value in init.items():
                total[resource] = total.get(resource, 0) + value
            continue
        for resource, value in init.items():
            total[resource] = max(total.get(resource, 0), value)
    _add(total, spec.get("overhead"))
    total["pods"] = 1
    return total


def percent(used: int, available: int) -> Optional[float]:
    return round(100.0 * used / available, 2) if available else None
