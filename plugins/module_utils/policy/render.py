# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering a bounded VM rebalance policy from options, in the shape and order of the rebalance page's
verification policy: a profile scoped to the VMs (DefaultEvictor with a label selector, PodsWithLocalStorage
in `defaultDisabled`, PodsWithPVC not in `extraEnabled`) and LowNodeUtilization in `balance`."""

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
DEFAULT_PROFILE = "vm-rebalance"
# module option -> policy field (top level)
LIMIT_OPTIONS = (("max_pods_to_evict_per_node", "maxNoOfPodsToEvictPerNode"),
                 ("max_pods_to_evict_per_namespace", "maxNoOfPodsToEvictPerNamespace"),
                 ("max_pods_to_evict_total", "maxNoOfPodsToEvictTotal"))


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


def check_options(options: dict) -> None:
    """Names the option (not the rendered policy field) when a node name, VM label or namespace is malformed."""
    for index, node in enumerate(options.get("nodes") or []):
        if not is_dns_subdomain(str(node)):
            raise InvalidOption("{0!r} is not a valid node name".format(node), "Give node names as kubectl get nodes shows them.",
                                path="nodes[{0}]".format(index))
    try:
        check_labels(options.get("vm_labels") or {})
    except ValueError as error:
        raise InvalidOption(str(error), "Give the VMs' labels as in spec.template.metadata.labels, e.g. {app: desched-test}.",
                            path="vm_labels") from error
    for index, namespace in enumerate(options.get("exclude_namespaces") or []):
        if not is_dns_label(str(namespace)):
            raise InvalidOption("{0!r} is not a valid namespace name".format(namespace),
                                "Use lower-case letters, digits and '-', at most 63 characters (RFC 1123 label).",
                                path="exclude_namespaces[{0}]".format(index))


def render_profile(options: dict) -> dict:
    """The VM profile from module-style options (see `render_policy`)."""
    evictor: Dict[str, Any] = {}
    if options.get("node_fit") is not None:
        evictor["nodeFit"] = bool(options["node_fit"])
    selector = vm_label_selector(options.get("vm_labels"), options.get("vm_selector"))
    if selector is not None:
        evictor["labelSelector"] = selector
    evictor["podProtections"] = {"defaultDisabled": ["PodsWithLocalStorage"]}
    lnu: Dict[str, Any] = {}
    for option, field in (("thresholds", "thresholds"), ("target_thresholds", "targetThresholds")):
        if options.get(option) is not None:
            lnu[field] = _ordered_thresholds(options[option])
    if options.get("exclude_namespaces"):
        lnu["evictableNamespaces"] = {"exclude": list(options["exclude_namespaces"])}
    if options.get("eviction_limit_node") is not None:
        lnu["evictionLimits"] = {"node": options["eviction_limit_node"]}
    return {"name": options.get("profile_name") or DEFAULT_PROFILE,
            "pluginConfig": [{"name": DEFAULT_EVICTOR, "args": evictor}, {"name": LOW_NODE_UTILIZATION, "args": lnu}],
            "plugins": {"balance": {"enabled": [LOW_NODE_UTILIZATION]}}}


def render_top_level(options: dict) -> dict:
    top: Dict[str, Any] = {}
    selector = node_selector_for(options.get("nodes"), options.get("node_selector"))
    if selector:
        top["nodeSelector"] = selector
    for option, field in LIMIT_OPTIONS:
        if options.get(option) is not None:
            top[field] = options[option]
    return top


def render_policy(options: dict, existing: Optional[dict] = None) -> dict:
    """A DeschedulerPolicy from options.

    Options: `profile_name`, `nodes` or `node_selector`, `vm_labels` or `vm_selector`, `thresholds`,
    `target_thresholds`, `max_pods_to_evict_per_node`, `max_pods_to_evict_per_namespace`,
    `max_pods_to_evict_total`, `eviction_limit_node`, `exclude_namespaces`, `node_fit`. With `merge` true the
    other profiles (and top-level fields not set here) of `existing` are kept; otherwise the policy holds only
    the VM profile.
    """
    profile = render_profile(options)
    top = render_top_level(options)
    if options.get("merge") and isinstance(existing, dict):
        return merge_profile(existing, profile, top)
    policy: Dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    policy.update(top)
    policy["profiles"] = [profile]
    return policy
