# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The descheduler's NodeFit (descheduler v0.36 `pkg/descheduler/node/node.go`), from plain Pod and Node dicts.

A Pod fits a node when, checked in this order (the first failure is the answer, in upstream's words):
1. the node's labels match the Pod's `nodeSelector` and its required node affinity (`nodeSelectorTerms`
   ORed, the expressions of a term ANDed; an empty term matches nothing; `matchFields` knows `metadata.name`)
   -> `pod node selector does not match the node label`;
2. every NoSchedule and NoExecute taint of the node is tolerated (PreferNoSchedule does not count)
   -> `pod does not tolerate taints on the node`;
3. every resource the Pod requests fits the node's allocatable minus the requests of the node's
   non-finished Pods; a resource the node does not list has nothing left; one Pod slot must be free
   -> `insufficient <resource>` (skipped for the node the Pod is on);
4. the node is not cordoned (`spec.unschedulable`, whatever the Pod tolerates) -> `node is not schedulable`;
5. no Pod on the node in a namespace of one of the Pod's required anti-affinity terms matches that term's
   label selector while the node has the term's topology key -> `pod matches inter-pod anti-affinity rule of
   other pod on node`.
Which nodes are tried is the caller's: upstream, the Ready nodes (`is_ready`) the DefaultEvictor's own
`nodeSelector` selects, except the Pod's node.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import labels, meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.quantity import amount, pod_requests
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import match_label_selector

NO_MATCH = "pod node selector does not match the node label"
UNTOLERATED = "pod does not tolerate taints on the node"
UNSCHEDULABLE = "node is not schedulable"
ANTI_AFFINITY = "pod matches inter-pod anti-affinity rule of other pod on node"
NOT_FIT = "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as unschedulable"
FIT_EFFECTS = ("NoSchedule", "NoExecute")
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
KUBEVIRT_SCHEDULABLE_LABEL = "kubevirt.io/schedulable"   # set by virt-handler on the nodes it runs on
_INTEGER_RE = re.compile(r"^[+-]?[0-9]+$")   # strconv.ParseInt, base 10


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def is_ready(node: dict) -> bool:
    """nodeutil.IsReady: only a Ready condition that is not True makes a node not ready (none at all is ready)."""
    return all(c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready")


def _as_int(text: str) -> Optional[int]:
    return int(text) if _INTEGER_RE.match(text or "") else None


def _expression_matches(expression: dict, node_labels: Dict[str, str]) -> bool:
    key, op, values = expression.get("key", ""), expression.get("operator"), list(expression.get("values") or [])
    if op == "In":
        return key in node_labels and node_labels[key] in values
    if op == "NotIn":
        return key not in node_labels or node_labels[key] not in values
    if op == "Exists":
        return key in node_labels
    if op == "DoesNotExist":
        return key not in node_labels
    if op in ("Gt", "Lt"):
        # one integer value; a label that is missing or not an integer never matches
        bound = _as_int(values[0]) if len(values) == 1 else None
        value = _as_int(node_labels[key]) if key in node_labels else None
        if bound is None or value is None:
            return False
        return value > bound if op == "Gt" else value < bound
    return False   # an unknown operator is a parse error: the term matches nothing


def _field_matches(expression: dict, node: dict) -> bool:
    values = list(expression.get("values") or [])
    if expression.get("key") != "metadata.name" or len(values) != 1:
        return False
    name = meta(node).get("name")
    if expression.get("operator") == "In":
        return name == values[0]
    if expression.get("operator") == "NotIn":
        return name != values[0]
    return False


def term_matches(term: dict, node: dict) -> bool:
    """One nodeSelectorTerm: all its expressions and fields; an empty term selects no node."""
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    node_labels = labels(node)
    return all(_expression_matches(e, node_labels) for e in expressions) and all(_field_matches(f, node) for f in fields)


def matches_node_selector(pod: dict, node: dict) -> bool:
    """The Pod's nodeSelector and required node affinity against the node (preferred affinity never counts)."""
    node_labels = labels(node)
    if any(node_labels.get(k) != v for k, v in (_spec(pod).get("nodeSelector") or {}).items()):
        return False
    required = ((_spec(pod).get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])


def tolerates(toleration: dict, taint: dict) -> bool:
    """v1.Toleration.ToleratesTaint: an empty effect matches every effect, an empty key every key; Exists matches
    any value, Equal (or no operator) the same value."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def tolerates_node(pod: dict, node: dict) -> bool:
    tolerations = _spec(pod).get("tolerations") or []
    return all(any(tolerates(t, taint) for t in tolerations)
               for taint in _spec(node).get("taints") or [] if taint.get("effect") in FIT_EFFECTS)


def allocatable(node: dict) -> Dict[str, int]:
    """The node's allocatable resources as amounts (a quantity that does not parse is left out)."""
    result = {}
    for resource, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            result[resource] = amount(resource, value)
        except ValueError:
            continue
    return result


def node_usage(pods_on_node: List[dict]) -> Dict[str, int]:
    """The summed requests of a node's non-finished Pods, `pods` their number."""
    used: Dict[str, int] = {}
    for other in pods_on_node:
        for resource, value in pod_requests(other).items():
            used[resource] = used.get(resource, 0) + value
    return used


def insufficient(pod: dict, capacity: Dict[str, int], used: Dict[str, int]) -> Optional[str]:
    """fitsRequest against a node's `allocatable` and `node_usage`: `insufficient <resource>` for the first requested
    resource (by name; upstream's order is a Go map's) that does not fit, then `insufficient pods` when no Pod slot
    is left."""
    requests = pod_requests(pod)
    for resource in sorted(requests):
        if resource == "pods":
            continue
        if requests[resource] > capacity.get(resource, 0) - used.get(resource, 0):
            return "insufficient {0}".format(resource)
    if capacity.get("pods", 0) - used.get("pods", 0) <= 0:
        return "insufficient pods"
    return None


def _anti_affinity_terms(pod: dict) -> List[dict]:
    return ((_spec(pod).get("affinity") or {}).get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []


def matches_anti_affinity(pod: dict, node: dict, pods_on_node: List[dict]) -> bool:
    """podMatchesInterPodAntiAffinity: the Pod's required anti-affinity terms against the Pods on the node
    (`namespaces` or else the Pod's own namespace; a null label selector selects nothing)."""
    own = meta(pod)
    for term in _anti_affinity_terms(pod):
        namespaces = term.get("namespaces") or [own.get("namespace")]
        if term.get("topologyKey") not in labels(node):
            continue
        for other in pods_on_node:
            other_meta = meta(other)
            if other_meta.get("name") == own.get("name") or other_meta.get("namespace") not in namespaces:
                continue
            if match_label_selector(term.get("labelSelector"), labels(other)):
                return True
    return False


def node_fit_error(pod: dict, node: dict, pods_on_node: List[dict], used: Optional[Dict[str, int]] = None,
                   capacity: Optional[Dict[str, int]] = None) -> Optional[str]:
    """Why the Pod does not fit the node, in NodeFit's words; None when it fits. `pods_on_node`: the node's
    non-finished Pods; `used` and `capacity`: their `node_usage` and the node's `allocatable` when the caller keeps
    them (a plan asks about every node for every Pod)."""
    if not matches_node_selector(pod, node):
        return NO_MATCH
    if not tolerates_node(pod, node):
        return UNTOLERATED
    if _spec(pod).get("nodeName") != meta(node).get("name"):
        reason = insufficient(pod, allocatable(node) if capacity is None else capacity, node_usage(pods_on_node) if used is None else used)
        if reason:
            return reason
    if _spec(node).get("unschedulable"):
        return UNSCHEDULABLE
    if matches_anti_affinity(pod, node, pods_on_node):
        return ANTI_AFFINITY
    return None
