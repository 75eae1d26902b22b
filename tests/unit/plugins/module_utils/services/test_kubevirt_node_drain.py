"""The drain's edge without a cluster: options refused before any request, which eviction answers are the drain's to
decide (never retried), and uncordon in and out of check mode (a dry-run patch in check mode)."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Failure
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import kubevirt_node_drain as drain


def options(**given):
    return drain.KubevirtNodeDrainOptions.from_params(spec_params(drain.ARG_SPEC, **given))


def node(unschedulable=False):
    return {"metadata": {"name": "worker-1"}, "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


class StubClient:
    """The verbs NodeApi uses, recorded; a patch answers the node as the server would store it."""

    def __init__(self, stored):
        self.stored = stored
        self.patches = []

    def require_kind(self, kind, group=None):
        return kind

    def get(self, resource, name, namespace=None):
        return self.stored

    def patch(self, resource, name, body, namespace=None, patch_type="merge", dry_run=False, request=None):
        self.patches.append({"resource": resource, "name": name, "body": body, "dry_run": dry_run, "request": request})
        return {"metadata": self.stored["metadata"], "spec": {"unschedulable": True} if body["spec"]["unschedulable"] else {},
                "status": self.stored["status"]}


# ------------------------------------------------------------------------------------------ options
def test_options_are_checked_before_any_request_and_the_node_is_stripped():
    assert drain.validate(options(node=" worker-1 ")).node == "worker-1"
    for given, path, words in (({"node": "Bad_Node"}, "node", "'Bad_Node' is not a valid node name"),
                               ({"node": "worker-1", "timeout": 0}, "timeout", "must be more than 0 seconds"),
                               ({"node": "worker-1", "max_parallel": 0}, "max_parallel", "must be 1 or more")):
        with pytest.raises(InvalidOption) as caught:
            drain.run(options(**given), False, client=StubClient(node()))
        assert caught.value.path == path and caught.value.message.startswith(path + ": ") and words in caught.value.message


# ------------------------------------------------------------------------------------------ evictions
@pytest.mark.parametrize("status, message, answer", [
    (429, kv.WEBHOOK_DENIED + 'Eviction triggered evacuation of VMI "vms/vm-live"', True),
    (429, kv.PDB_VIOLATION, True),
    (429, "Too many requests, please try again later.", False),   # server overload: retried
    (404, 'pods "virt-launcher-x" not found', True),
    (500, kv.MULTIPLE_PDBS, True),
    (500, "etcdserver: request timed out", False),
    (503, "", False),
])
def test_kubevirts_and_the_pdb_checks_answers_are_the_drains_to_decide(status, message, answer):
    assert drain.is_eviction_answer(Failure(status, "", message, retryable=status in (429, 500, 503))) is answer


# ------------------------------------------------------------------------------------------ uncordon
def test_uncordon_patches_a_cordoned_node_and_check_mode_sends_the_patch_as_a_dry_run():
    client = StubClient(node(unschedulable=True))
    result = drain.run(options(node="worker-1", state="uncordon"), True, client=client)
    assert result["changed"] is True and result["cordoned"] is True and result["ready"] is True
    assert result["diff"] == {"before": {"unschedulable": True}, "after": {"unschedulable": False}}
    assert client.patches == [{"resource": "Node", "name": "worker-1", "body": {"spec": {"unschedulable": None}}, "dry_run": True,
                               "request": "uncordon node worker-1"}]
    client = StubClient(node(unschedulable=True))
    result = drain.run(options(node="worker-1", state="uncordon"), False, client=client)
    assert result["changed"] is True and result["cordoned"] is False and [p["dry_run"] for p in client.patches] == [False]


def test_uncordon_of_a_schedulable_node_changes_nothing():
    client = StubClient(node())
    result = drain.run(options(node="worker-1", state="uncordon"), False, client=client)
    assert result["changed"] is False and client.patches == []
