"""A rehearsal started while the namespace of the one before is still Terminating (issue 29: twice in a row on a real
cluster, or the cluster-safe tests one after another): `rehearsal_plan` waits until the namespace is gone, then sizes the
cluster and says how long it waited; when the namespace stays, it is refused at the timeout naming what holds it. The
namespace is held Terminating by a finalizer on an object in it, which the test removes when it wants the namespace gone."""
from __future__ import annotations

import json
import threading

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import rehearsal_objects as objects
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.rehearsal import RehearsalRefused
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.rehearsal_plan import ARG_SPEC, RehearsalPlanOptions, run

from support.waiting import wait_for

pytestmark = pytest.mark.simulator

NAMESPACE = "kubevirt-ops-rehearsal"
HOLD = "kubevirt-ops.io/test-hold"


def plan(sim, **given) -> dict:
    return run(RehearsalPlanOptions.from_params(spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, **given)), False)


def terminating_rehearsal_namespace(sim) -> None:
    """The rehearsal's namespace of an earlier run, deleted, held Terminating by a ConfigMap's finalizer."""
    sim.kubectl("create", "-f", "-", input=json.dumps(objects.namespace_object(NAMESPACE, "earlier-run")))
    sim.kubectl("-n", NAMESPACE, "create", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": [HOLD]}}))
    sim.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
    wait_for(lambda: sim.kubectl_json("get", "namespace", NAMESPACE)["status"].get("phase") == "Terminating", what="the namespace Terminating")


def release(sim) -> None:
    sim.kubectl("-n", NAMESPACE, "patch", "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')


def test_the_plan_waits_for_an_earlier_rehearsals_terminating_namespace_then_sizes(fresh_kubesim):
    sim = fresh_kubesim("rehearsal", settle=True)
    terminating_rehearsal_namespace(sim)
    sim.reset_counters()
    planned = {}
    planner = threading.Thread(target=lambda: planned.update(plan(sim, timeout=120)))
    planner.start()
    sim.wait_for_watches({"namespaces": 1})  # the plan waits on the namespace (it would be refused as left over otherwise)
    assert "changed" not in planned
    release(sim)
    planner.join(60)
    assert planned["waited_seconds"] > 0 and planned["sizing"]["vm_names"], planned
    assert planned["lines"][0] == "waited {0}s for namespace {1} of an earlier rehearsal to be deleted".format(planned["waited_seconds"], NAMESPACE)
    assert NAMESPACE not in [n["metadata"]["name"] for n in sim.kubectl_json("get", "namespaces")["items"]]


def test_a_namespace_that_stays_terminating_is_refused_at_the_timeout_naming_what_holds_it(fresh_kubesim):
    sim = fresh_kubesim("rehearsal", settle=True)
    terminating_rehearsal_namespace(sim)
    with pytest.raises(RehearsalRefused) as refused:
        plan(sim, timeout=3)
    assert refused.value.problem.startswith(f"namespace {NAMESPACE} of an earlier rehearsal (run earlier-run) is still Terminating after 3s: ")
    assert f"{HOLD} in 1 resource instances" in refused.value.problem, refused.value.problem
    assert f"kubectl get namespace {NAMESPACE} -o yaml" in refused.value.fix
    release(sim)
