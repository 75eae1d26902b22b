"""A rehearsal started right after another: the earlier run's namespace, still Terminating, is waited for (bounded by
`timeout`) before the plan sizes the cluster, and named with what holds it when it does not go."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import rehearsal_objects as objects
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.rehearsal import RehearsalRefused
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import rehearsal_plan

from ..fake_api import resource
from .memory_cluster import KINDS, MemoryCluster

NAME = "kubevirt-ops-rehearsal"
HOLDING = "Some resources are remaining: pods. has 2 resource instances"


class NamespacedCluster(MemoryCluster):
    """The memory cluster that also serves Namespaces."""

    def find_kind(self, kind, group=None):
        return resource("Namespace", "namespaces", namespaced=False) if kind == "Namespace" else KINDS.get(kind)


def rehearsal_namespace(terminating: bool) -> dict:
    namespace = objects.namespace_object(NAME, "run-1")
    namespace["metadata"]["resourceVersion"] = "7"
    if terminating:
        namespace["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        namespace["status"] = {"phase": "Terminating", "conditions": [
            {"type": "NamespaceContentRemaining", "status": "True", "message": HOLDING},
            {"type": "NamespaceFinalizersRemaining", "status": "False", "message": "All content-preserving finalizers finished"}]}
    return namespace


def test_a_terminating_rehearsal_namespace_is_waited_for_until_it_is_gone():
    namespace = rehearsal_namespace(terminating=True)
    cluster = NamespacedCluster([namespace], watches=[[{"type": "DELETED", "object": namespace}]])
    waited = rehearsal_plan.wait_for_earlier_namespace(cluster, NAME, timeout=30, clock=iter(range(0, 1000, 2)).__next__)
    assert waited > 0
    assert ("watch", "Namespace", None, "100") in cluster.requests


def test_a_namespace_still_terminating_at_the_timeout_is_refused_naming_what_holds_it():
    cluster = NamespacedCluster([rehearsal_namespace(terminating=True)])
    with pytest.raises(RehearsalRefused) as refused:
        rehearsal_plan.wait_for_earlier_namespace(cluster, NAME, timeout=1, clock=iter(range(0, 1000, 2)).__next__)
    assert str(refused.value.problem) == "namespace {0} of an earlier rehearsal (run run-1) is still Terminating after 1s: {1}".format(
        NAME, HOLDING)
    assert "kubectl get namespace {0} -o yaml".format(NAME) in refused.value.fix and refused.value.path == "timeout"


@pytest.mark.parametrize("present", [False, True])
def test_no_wait_without_a_terminating_namespace(present):
    cluster = NamespacedCluster([rehearsal_namespace(terminating=False)] if present else [])
    assert rehearsal_plan.wait_for_earlier_namespace(cluster, NAME, timeout=30, clock=lambda: 0.0) == 0.0
    assert [r[0] for r in cluster.requests] == ["get"]
