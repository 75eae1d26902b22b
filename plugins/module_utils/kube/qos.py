# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The QoS class the descheduler sorts Pods by (descheduler v0.36 `pkg/utils/qos.go` GetPodQOS, the Kubernetes
helper it copies): only cpu and memory count, and a zero quantity counts as unset, over the containers and the
init containers.

- BestEffort: no container has a non-zero cpu or memory request or limit (`requests: {cpu: "0"}` is BestEffort);
- Guaranteed: every container has non-zero cpu and memory limits, and the summed requests equal the summed
  limits for each resource;
- Burstable: everything else.
The descheduler computes the class from the spec (it does not read `status.qosClass`) and knows no pod-level
`spec.resources`.
"""

from __future__ import annotations

import decimal
from typing import Dict

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import parse_quantity

BEST_EFFORT = "BestEffort"
BURSTABLE = "Burstable"
GUARANTEED = "Guaranteed"
QOS_RESOURCES = ("cpu", "memory")


def _positive(values: dict) -> Dict[str, decimal.Decimal]:
    found = {}
    for resource in QOS_RESOURCES:
        if resource not in (values or {}):
            continue
        try:
            quantity = parse_quantity(values[resource])
        except ValueError:
            continue
        if quantity > 0:
            found[resource] = quantity
    return found


def pod_qos(pod: dict) -> str:
    spec = pod.get("spec") or {}
    requests: Dict[str, decimal.Decimal] = {}
    limits: Dict[str, decimal.Decimal] = {}
    guaranteed = True
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        for resource, quantity in _positive(resources.get("requests") or {}).items():
            requests[resource] = requests.get(resource, 0) + quantity
        own_limits = _positive(resources.get("limits") or {})
        for resource, quantity in own_limits.items():
            limits[resource] = limits.get(resource, 0) + quantity
        if set(own_limits) != set(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and all(limits.get(r) == v for r, v in requests.items()) and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE
