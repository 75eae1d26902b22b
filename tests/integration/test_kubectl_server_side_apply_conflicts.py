"""The real kubectl's server-side apply against the simulator: a second field manager changing a field the
first one applied is refused with the apiserver's conflict message, which kubectl prints with its advice;
`--force-conflicts` takes the field over; `kubectl get -o yaml` hides managedFields unless
`--show-managed-fields` (see tests/kubesim/README.md)."""
from __future__ import annotations

import json

import pytest

from .conftest import kubectl_available

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]


@pytest.fixture(scope="module")
def sim(kubesim_factory):
    return kubesim_factory("api-basics")


def configmap(**data: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": "default"},
                       "data": data})


def test_a_second_manager_conflicts_until_it_forces(sim):
    sim.kubectl("apply", "--server-side", "-f", "-", input=configmap(k="first"))
    refused = sim.kubectl("apply", "--server-side", "--field-manager=other", "-f", "-", input=configmap(k="second"),
                          check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith('error: Apply failed with 1 conflict: conflict with "kubectl": .data.k\n'
                                     "Please review the fields above--they currently have other managers.")
    assert "--force-conflicts" in refused.stderr
    assert sim.kubectl_json("get", "configmap", "ssa", "-n", "default")["data"] == {"k": "first"}
    forced = sim.kubectl("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-",
                         input=configmap(k="second"))
    assert "configmap/ssa serverside-applied" in forced.stdout
    shown = sim.kubectl_json("get", "configmap", "ssa", "-n", "default", "--show-managed-fields")
    assert shown["data"] == {"k": "second"}
    assert [(e["manager"], e["operation"], e["fieldsV1"]) for e in shown["metadata"]["managedFields"]] == [
        ("other", "Apply", {"f:data": {"f:k": {}}})]
    assert "managedFields" not in sim.kubectl_json("get", "configmap", "ssa", "-n", "default")["metadata"]
