# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering a bounded VM rebalance policy from options, in the shape and order of the verification policy of the
rebalance procedure (Configure a Bounded VM Rebalance Policy): a profile scoped to the VMs (DefaultEvictor with a label
selector, PodsWithLocalStorage in `defaultDisabled`, PodsWithPVC not in `extraEnabled`) and LowNodeUtilization in `balance`."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.policy.model import (
    API_VERSION,
    DEFAULT_EVICTOR,
    KIND,
    LOW_NODE_UTILIZATION,
    merge_profile,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import RESOURCES
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import check_labels, is_dns_label, is_dns_subdomain

HOSTNAME_LABEL = "kubernetes.io/hostname"


def node_selector_for(nodes: Optional[List[str]], node_selector: Optional[str]) -> Optional[str]:
    """`kubernetes.io/hostname in (a,b)` for a node list, else the selector as given."""
    if nodes and node_selector:
        raise InvalidOption("nodes and node_selector are mutually exclusive", "Give the node names or a selector, not both.",
                            path="nodes")
    if nodes:
        return "{0} in ({1})".format(HOSTNAME_LABEL, ",".join(nodes))
    return node_selector or None


def _ordered_thresholds(values: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if values is None:
        return None
    known = [r for r in RESOURCES if r in values]
    return {r: values[r] for r in known + [r for r in values if r not in known]}


def vm_label_selector(vm_labels: Optional[dict], vm_selector: Optional[dict]) -> Optional[dict]:
    if vm_labels and vm_selector:
        raise InvalidOption("vm_labels and vm_selector are mutually exclusive", "Give labels to match, or a whole label selector.",
                            path="vm_labels")
    if vm_labels:
        return {"matchLabels": dict(vm_labels)}
    return dict(vm_selector) if vm_selector else None


def check_options(nodes: Optional[List[str]] = None, vm_labels: Optional[dict] = None,
                  exclude_namespaces: Optional[List[str]] = None) -> None:
    """Names the option (not the rendered policy field) when a node name, VM label or namespace is malformed."""
    for index, node in enumerate(nodes or []):
        if not is_dns_subdomain(str(node)):
            raise InvalidOption("{0!r} is not a valid node name".format(node), "Give node names as kubectl get nodes shows them.",
                                path="nodes[{0}]".format(index))
    try:
        check_labels(vm_labels or {})
    except ValueError as error:
        raise InvalidOption(str(error), "Give the VMs' labels as in spec.template.metadata.labels, e.g. {app: desched-test}.",
                            path="vm_labels") from error
    for index, namespace in enumerate(exclude_namespaces or []):
        if not is_dns_label(str(namespace)):
            raise InvalidOption("{0!r} is not a valid namespace name".format(namespace),
                                "Use lower-case letters, digits and '-', at most 63 characters (RFC 1123 label).",
                                path="exclude_namespaces[{0}]".format(index))


def render_profile(*, profile_name: str, node_fit: Optional[bool], vm_labels: Optional[dict] = None, vm_selector: Optional[dict] = None,
                   thresholds: Optional[Dict[str, Any]] = None, target_thresholds: Optional[Dict[str, Any]] = None,
                   exclude_namespaces: Optional[List[str]] = None, eviction_limit_node: Optional[int] = None) -> dict:
    """The VM profile (see `render_policy`)."""
    evictor: Dict[str, Any] = {}
    if node_fit is not None:
        evictor["nodeFit"] = bool(node_fit)
    selector = vm_label_selector(vm_labels, vm_selector)
    if selector is not None:
        evictor["labelSelector"] = selector
    evictor["podProtections"] = {"defaultDisabled": ["PodsWithLocalStorage"]}
    lnu: Dict[str, Any] = {}
    for values, field in ((thresholds, "thresholds"), (target_thresholds, "targetThresholds")):
        if values is not None:
            lnu[field] = _ordered_thresholds(values)
    if exclude_namespaces:
        lnu["evictableNamespaces"] = {"exclude": list(exclude_namespaces)}
    if eviction_limit_node is not None:
        lnu["evictionLimits"] = {"node": eviction_limit_node}
    return {"name": profile_name,
            "pluginConfig": [{"name": DEFAULT_EVICTOR, "args": evictor}, {"name": LOW_NODE_UTILIZATION, "args": lnu}],
            "plugins": {"balance": {"enabled": [LOW_NODE_UTILIZATION]}}}


def render_top_level(nodes: Optional[List[str]] = None, node_selector: Optional[str] = None, max_pods_to_evict_per_node: Optional[int] = None,
                     max_pods_to_evict_per_namespace: Optional[int] = None, max_pods_to_evict_total: Optional[int] = None) -> dict:
    top: Dict[str, Any] = {}
    selector = node_selector_for(nodes, node_selector)
    if selector:
        top["nodeSelector"] = selector
    for value, field in ((max_pods_to_evict_per_node, "maxNoOfPodsToEvictPerNode"),
                         (max_pods_to_evict_per_namespace, "maxNoOfPodsToEvictPerNamespace"),
                         (max_pods_to_evict_total, "maxNoOfPodsToEvictTotal")):
        if value is not None:
            top[field] = value
    return top


def render_policy(*, profile_name: str, node_fit: Optional[bool], nodes: Optional[List[str]] = None, node_selector: Optional[str] = None,
                  vm_labels: Optional[dict] = None, vm_selector: Optional[dict] = None, thresholds: Optional[Dict[str, Any]] = None,
                  target_thresholds: Optional[Dict[str, Any]] = None, max_pods_to_evict_per_node: Optional[int] = None,
                  max_pods_to_evict_per_namespace: Optional[int] = None, max_pods_to_evict_total: Optional[int] = None,
                  eviction_limit_node: Optional[int] = None, exclude_namespaces: Optional[List[str]] = None,
                  merge_into: Optional[dict] = None) -> dict:
    """A DeschedulerPolicy from the module's rendering options (same names; None is an option not set, which
    renders nothing). With `merge_into` (option `merge`: the current policy) its other profiles and the top-level
    fields not set here are kept; otherwise the policy holds only the VM profile."""
    profile = render_profile(profile_name=profile_name, node_fit=node_fit, vm_labels=vm_labels, vm_selector=vm_selector,
                             thresholds=thresholds, target_thresholds=target_thresholds, exclude_namespaces=exclude_namespaces,
                             eviction_limit_node=eviction_limit_node)
    top = render_top_level(nodes, node_selector, max_pods_to_evict_per_node, max_pods_to_evict_per_namespace, max_pods_to_evict_total)
    if isinstance(merge_into, dict):
        return merge_profile(merge_into, profile, top)
    policy: Dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    policy.update(top)
    policy["profiles"] = [profile]
    return policy
