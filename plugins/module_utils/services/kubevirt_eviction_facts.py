# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The service behind `kubevirt_eviction_facts`: its argument spec and typed options, the options checked and turned
into the read's scope, and the read itself (`cluster.eviction_facts`, with actual usage from `cluster.metrics`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.eviction_facts import (
    DISAGREEMENT_POINTS,
    SECTIONS,
    USAGE_SOURCES,
    Scope,
    read_facts,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.metrics import check_prometheus_url
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, RebalanceError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import check_location
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label, is_dns_subdomain, parse_label_selector

ARG_SPEC = {
    "namespaces": {"type": "list", "elements": "str", "aliases": ["namespace"]},
    "label_selector": {"type": "str"},
    "names": {"type": "list", "elements": "str"},
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "include": {"type": "list", "elements": "str", "choices": list(SECTIONS), "default": list(SECTIONS)},
    "usage_source": {"type": "str", "choices": list(USAGE_SOURCES), "default": "auto"},
    "prometheus_url": {"type": "str"},
    "prometheus_query": {"type": "str"},
    "prometheus_auth_secret": {"type": "dict", "no_log": False, "options": {"namespace": {"type": "str", "required": True},
                                                                            "name": {"type": "str", "required": True}}},
    "prometheus_token": {"type": "str", "no_log": True},
    "usage_disagreement_points": {"type": "int", "default": DISAGREEMENT_POINTS},
}
MUTUALLY_EXCLUSIVE = [["prometheus_token", "prometheus_auth_secret"]]
PROMETHEUS_OPTIONS = ("prometheus_url", "prometheus_query", "prometheus_auth_secret", "prometheus_token")


@dataclasses.dataclass(frozen=True)
class KubevirtEvictionFactsOptions(ModuleOptions):
    """The options of `kubevirt_eviction_facts` as the module parsed them (defaults are the spec's)."""
    namespaces: Optional[List[str]]
    label_selector: Optional[str]
    names: Optional[List[str]]
    descheduler_namespace: str
    descheduler_name: str
    include: List[str]
    usage_source: str
    prometheus_url: Optional[str]
    prometheus_query: Optional[str]
    prometheus_auth_secret: Optional[Dict[str, Any]]
    prometheus_token: Optional[str] = dataclasses.field(repr=False)
    usage_disagreement_points: int


# ------------------------------------------------------------------------------------------ options
def validate_options(options: KubevirtEvictionFactsOptions) -> Scope:
    """The module's own options, checked before any request; InvalidOption names the option."""
    namespaces = [n.strip() for n in options.namespaces or [] if n and n.strip()]
    for index, namespace in enumerate(namespaces):
        if not is_dns_label(namespace):
            raise InvalidOption("{0!r} is not a valid namespace name".format(namespace),
                                "Use lower-case letters, digits and '-', at most 63 characters (RFC 1123 label).",
                                path="namespaces[{0}]".format(index))
    try:
        requirements = parse_label_selector(options.label_selector)
    except ValueError as error:
        raise InvalidOption(str(error), "Write a Kubernetes label selector such as 'app=web,tier in (a,b),!canary'.",
                            path="label_selector") from error
    names = [n.strip() for n in options.names or [] if n and n.strip()]
    for index, name in enumerate(names):
        if not is_dns_subdomain(name):
            raise InvalidOption("{0!r} is not a valid VMI name".format(name), "Give VirtualMachineInstance names as kubectl get vmi shows them.",
                                path="names[{0}]".format(index))
    check_location(options.descheduler_namespace, options.descheduler_name,
                   namespace_fix="Give the namespace of the Descheduler plugin (the ACP package uses 'descheduler').",
                   name_fix="Give the name of the Descheduler CronJob or Deployment and its ConfigMap.")
    if not options.include:
        raise InvalidOption("an empty list reads no section", "Leave include out to read every section, or name the sections "
                            "to read: {0}.".format(", ".join(SECTIONS)), path="include")
    unknown = [s for s in options.include if s not in SECTIONS]
    if unknown:
        raise InvalidOption("unknown section(s) {0}".format(", ".join(unknown)), "Choose from {0}.".format(", ".join(SECTIONS)), path="include")
    usage = usage_options(options)
    return Scope(include=tuple(s for s in SECTIONS if s in options.include), namespaces=tuple(sorted(set(namespaces))),
                 label_selector=(options.label_selector or "").strip() or None, requirements=tuple(requirements), names=tuple(names),
                 descheduler_namespace=options.descheduler_namespace, descheduler_name=options.descheduler_name, **usage)


def usage_options(options: KubevirtEvictionFactsOptions) -> Dict[str, Any]:
    """The actual-usage options, checked, as Scope fields."""
    given = [name for name in PROMETHEUS_OPTIONS if getattr(options, name)]
    if options.usage_source == "requests" and given:
        raise InvalidOption("{0} given, but usage_source is requests".format(", ".join(given)),
                            "Leave usage_source out (auto) or set it to Prometheus to query Prometheus.", path="usage_source")
    if options.usage_source in ("KubernetesMetrics", "Prometheus") and "nodes" not in options.include:
        raise InvalidOption("usage_source {0} reads actual usage for the nodes section, which include leaves out".format(options.usage_source),
                            "Add nodes to include, or leave usage_source out.", path="usage_source")
    if options.usage_source == "KubernetesMetrics" and given:
        raise InvalidOption("{0} given, but usage_source is KubernetesMetrics".format(", ".join(given)),
                            "Set usage_source to Prometheus or auto to query Prometheus as well.", path="usage_source")
    if options.prometheus_url:
        try:
            check_prometheus_url(options.prometheus_url, "prometheus_url")
        except RebalanceError as error:
            raise InvalidOption(error.problem, error.fix, path="prometheus_url") from error
    if options.prometheus_query is not None and not options.prometheus_query.strip():
        raise InvalidOption("an empty query", "Give a PromQL query with one value in [0, 1] per node, or leave prometheus_query out.",
                            path="prometheus_query")
    secret = options.prometheus_auth_secret
    if secret and options.prometheus_token:
        raise InvalidOption("parameters are mutually exclusive: prometheus_token|prometheus_auth_secret",
                            "Give the token itself or the Secret that holds it, not both.", path="prometheus_token")
    for field in ("namespace", "name"):
        value = (secret or {}).get(field)
        if secret is not None and not (is_dns_label(value) if field == "namespace" else is_dns_subdomain(value)):
            raise InvalidOption("{0!r} is not a valid {1}".format(value, "namespace name" if field == "namespace" else "Secret name"),
                                "Name the Secret that holds the token under the key prometheusAuthToken.",
                                path="prometheus_auth_secret.{0}".format(field))
    points = options.usage_disagreement_points
    if points is None or not 0 < points <= 100:
        raise InvalidOption("must be between 1 and 100 percentage points, got {0}".format(points),
                            "Give how far a node's actual usage may be from its requests before it is reported, e.g. 20.",
                            path="usage_disagreement_points")
    return {"usage_source": options.usage_source, "prometheus_url": (options.prometheus_url or "").strip() or None,
            "prometheus_query": (options.prometheus_query or "").strip() or None,
            "prometheus_auth_secret": (secret["namespace"], secret["name"]) if secret else None,
            "prometheus_token": options.prometheus_token or None, "usage_disagreement_points": points}


def gather_eviction_facts(options: KubevirtEvictionFactsOptions, check_mode: bool = False, client: Optional[Client] = None) -> dict:
    """The module's entry: everything `kubevirt_eviction_facts` documents in RETURN. It only reads, so check mode
    returns the same facts."""
    scope = validate_options(options)
    return read_facts(client or Client.from_options(options.connection), scope)
