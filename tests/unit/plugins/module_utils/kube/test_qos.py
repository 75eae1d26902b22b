"""The QoS class as the descheduler's GetPodQOS computes it: cpu and memory only, zero counts as unset, summed over
containers and init containers."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.qos import pod_qos


def pod(*resources, init=()):
    def containers(items):
        return [{"name": "c{0}".format(i), "resources": r} for i, r in enumerate(items)]
    return {"spec": {"containers": containers(resources), "initContainers": containers(init)}}


@pytest.mark.parametrize("resources, expected", [
    ([{}], "BestEffort"),
    ([{"requests": {"cpu": "0", "memory": "0"}}], "BestEffort"),                              # zero is unset
    ([{"requests": {"nvidia.com/gpu": "1", "ephemeral-storage": "1Gi"}}], "BestEffort"),      # only cpu and memory count
    ([{"requests": {"cpu": "100m"}}], "Burstable"),
    ([{"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed"),
    # on a spec without requests (the API server would have copied the limits into them): len(requests) != len(limits)
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Burstable"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {"requests": {"cpu": "1"}}], "Burstable"),  # one container without limits
    ([{"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}], "Burstable"),
])
def test_pod_qos_as_get_pod_qos(resources, expected):
    assert pod_qos(pod(*resources)) == expected


def test_init_containers_count():
    assert pod_qos(pod({}, init=[{"requests": {"memory": "64Mi"}}])) == "Burstable"
