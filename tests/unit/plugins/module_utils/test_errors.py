"""The exception family: path, problem and fix composed into one sentence; API failures with their reason."""
from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, KindNotServed, RebalanceError


def test_message_is_path_problem_fix():
    error = InvalidOption("only Exclude namespaces can be set, inclusion is not supported",
                          "Use exclude, or scope the VMs with DefaultEvictor.labelSelector.",
                          path="profiles[0].pluginConfig[1].args.evictableNamespaces.include")
    assert error.message == ("profiles[0].pluginConfig[1].args.evictableNamespaces.include: only Exclude namespaces can be set, "
                             "inclusion is not supported. Use exclude, or scope the VMs with DefaultEvictor.labelSelector.")
    assert str(error) == error.message and isinstance(error, RebalanceError)
    assert error.as_dict() == {"type": "InvalidOption", "path": "profiles[0].pluginConfig[1].args.evictableNamespaces.include",
                               "problem": "only Exclude namespaces can be set, inclusion is not supported",
                               "fix": "Use exclude, or scope the VMs with DefaultEvictor.labelSelector."}


def test_message_without_path_or_fix_and_no_double_period():
    assert RebalanceError("it broke").message == "it broke"
    assert RebalanceError("it broke.", "Fix it.").message == "it broke. Fix it."


def test_api_failure_carries_status_reason_and_attempts():
    error = ApiFailure("list pods", 429, "TooManyRequests", "too many requests, please try again later", attempts=6)
    assert error.message.startswith("list pods: 429 TooManyRequests: too many requests, please try again later (gave up after 6 attempts).")
    assert error.as_dict()["status"] == 429 and error.as_dict()["reason"] == "TooManyRequests"
    assert ApiFailure("get /version", 0, "ProtocolError", "Connection aborted").message.startswith(
        "get /version: no answer from the API server: Connection aborted.")


def test_kind_not_served():
    error = KindNotServed("ModuleInfo")
    assert error.message.startswith("the server doesn't serve the kind ModuleInfo.") and error.as_dict()["kind"] == "ModuleInfo"


def test_forbidden_names_the_verb_resource_group_and_scope_and_the_grant():
    message = ('configmaps "descheduler" is forbidden: User "ops" cannot update resource "configmaps" in API group "" '
               'in the namespace "descheduler"')
    error = ApiFailure("update configmap descheduler/descheduler", 403, "Forbidden", message)
    assert error.as_dict()["forbidden"] == {"user": "ops", "verb": "update", "resource": "configmaps", "group": "",
                                            "namespace": "descheduler"}
    assert 'Grant the user verb "update" on resource "configmaps" in API group "" in namespace "descheduler" (Role)' in error.message
    cluster = ApiFailure("list nodes", 403, "Forbidden",
                         'nodes is forbidden: User "ops" cannot list resource "nodes" in API group "" at the cluster scope')
    assert cluster.as_dict()["forbidden"]["namespace"] is None and "cluster-wide (ClusterRole)" in cluster.message
    other = ApiFailure("list nodes", 403, "Forbidden", "denied by a webhook")
    assert "forbidden" not in other.as_dict() and "docs/rbac.md" in other.message
