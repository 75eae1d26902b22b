"""Kubernetes resource quantities and Pod requests, as the scheduler and the descheduler count them."""
from __future__ import annotations

import re
from decimal import Decimal

_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "m": Decimal("0.001"), "u": Decimal("0.000001"), "n": Decimal("0.000000001")}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|u|n|)$")


def parse(value) -> Decimal:
    """A quantity (`100m`, `1.5Gi`, `2`, 3) as a Decimal in base units."""
    if value is None or value == "":
        return Decimal(0)
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}")
    return Decimal(match.group(1)) * Decimal(_SUFFIX[match.group(2)])


def cpu_millis(value) -> int:
    return int((parse(value) * 1000).to_integral_value(rounding="ROUND_CEILING"))


def memory_bytes(value) -> int:
    return int(parse(value).to_integral_value(rounding="ROUND_CEILING"))


def format_memory(num_bytes: int) -> str:
    for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if num_bytes and num_bytes % size == 0:
            return f"{num_bytes // size}{suffix}"
    return str(num_bytes)


def format_cpu(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest: what the scheduler's scoring counts for a container
# that does not name a cpu or memory request (an explicit zero stays zero: resourcehelper applyNonMissing).
NON_ZERO_DEFAULTS = {"cpu": 100, "memory": 200 * 2 ** 20}


def pod_requests(pod: dict, non_zero: bool = False) -> dict[str, int]:
    """Requests of a Pod as the scheduler counts them: the sum over containers, at least the largest init
    container, plus overhead; cpu in millicores, memory in bytes, pods = 1. With `non_zero`, a container
    without a cpu or memory request counts NON_ZERO_DEFAULTS for it (the scheduler's NonZeroRequested, which
    LeastAllocated scores)."""
    spec = pod.get("spec") or {}

    def container_requests(container: dict) -> dict[str, int]:
        requests = (container.get("resources") or {}).get("requests") or {}
        counted = {"cpu": cpu_millis(requests.get("cpu")), "memory": memory_bytes(requests.get("memory"))}
        if non_zero:
            for resource, default in NON_ZERO_DEFAULTS.items():
                if resource not in requests:
                    counted[resource] = default
        return counted

    totals = {"cpu": 0, "memory": 0}
    for container in spec.get("containers") or []:
        for resource, value in container_requests(container).items():
            totals[resource] += value
    for container in spec.get("initContainers") or []:
        for resource, value in container_requests(container).items():
            totals[resource] = max(totals[resource], value)
    overhead = spec.get("overhead") or {}
    totals["cpu"] += cpu_millis(overhead.get("cpu"))
    totals["memory"] += memory_bytes(overhead.get("memory"))
    totals["pods"] = 1
    return totals


def node_allocatable(node: dict) -> dict[str, int]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {"cpu": cpu_millis(allocatable.get("cpu")), "memory": memory_bytes(allocatable.get("memory")),
            "pods": int(parse(allocatable.get("pods") or 110))}


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
