"""Quantities and Pod requests as the scheduler and LowNodeUtilization count them."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import quantity


@pytest.mark.parametrize("resource, value, expected", [("cpu", "100m", 100), ("cpu", "2", 2000), ("cpu", "1.5", 1500), ("cpu", 1, 1000),
                                                       ("memory", "512Mi", 512 * 2 ** 20), ("memory", "1G", 10 ** 9),
                                                       ("memory", "1e3", 1000), ("memory", "64Gi", 64 * 2 ** 30), ("pods", "110", 110),
                                                       ("cpu", "1n", 1)])
def test_amount(resource, value, expected):
    assert quantity.amount(resource, value) == expected


@pytest.mark.parametrize("value", ["", "12 Mi", "Mi", "1.2.3"])
def test_not_a_quantity(value):
    with pytest.raises(ValueError):
        quantity.parse_quantity(value)


def test_pod_requests_with_init_sidecar_and_overhead():
    pod = {"spec": {"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "782Mi"}}},
                                   {"resources": {"requests": {"cpu": "50m"}}}],
                    "initContainers": [{"resources": {"requests": {"cpu": "500m"}}},
                                       {"restartPolicy": "Always", "resources": {"requests": {"memory": "10Mi"}}}],
                    "overhead": {"cpu": "10m"}}}
    assert quantity.pod_requests(pod) == {"cpu": 510, "memory": 792 * 2 ** 20, "pods": 1}


def test_percent():
    assert quantity.percent(700, 16000) == 4.38 and quantity.percent(1, 0) is None
