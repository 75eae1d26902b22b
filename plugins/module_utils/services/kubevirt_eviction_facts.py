# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The service behind `kubevirt_eviction_facts`: its argument spec and typed options, the options checked and turned
into the read's scope, and the read itself (`cluster.eviction_facts`)."""

from __future__ import annotations

import dataclasses
from typing import List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.eviction_facts import SECTIONS, Scope, read_facts
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import ModuleOptions
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label, is_dns_subdomain, parse_label_selector

ARG_SPEC = {
    "namespaces": {"type": "list", "elements": "str", "aliases": ["namespace"]},
    "label_selector": {"type": "str"},
    "names": {"type": "list", "elements": "str"},
    "descheduler_namespace": {"type": "str", "default": "descheduler"},
    "descheduler_name": {"type": "str", "default": "descheduler"},
    "include": {"type": "list", "elements": "str", "choices": list(SECTIONS), "default": list(SECTIONS)},
}


@dataclasses.dataclass(frozen=True)
class KubevirtEvictionFactsOptions(ModuleOptions):
    """The options of `kubevirt_eviction_facts` as the module parsed them (defaults are the spec's)."""
    namespaces: Optional[List[str]]
    label_selector: Optional[str]
    names: Optional[List[str]]
    descheduler_namespace: str
    descheduler_name: str
    include: List[str]


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
    descheduler_namespace = options.descheduler_namespace
    if not is_dns_label(descheduler_namespace):
        raise InvalidOption("{0!r} is not a valid namespace name".format(descheduler_namespace),
                            "Give the namespace of the Descheduler plugin (the ACP package uses 'descheduler').", path="descheduler_namespace")
    descheduler_name = options.descheduler_name
    if not is_dns_subdomain(descheduler_name):
        raise InvalidOption("{0!r} is not a valid object name".format(descheduler_name),
                            "Give the name of the Descheduler CronJob or Deployment and its ConfigMap.", path="descheduler_name")
    if not options.include:
        raise InvalidOption("an empty list reads no section", "Leave include out to read every section, or name the sections "
                            "to read: {0}.".format(", ".join(SECTIONS)), path="include")
    unknown = [s for s in options.include if s not in SECTIONS]
    if unknown:
        raise InvalidOption("unknown section(s) {0}".format(", ".join(unknown)), "Choose from {0}.".format(", ".join(SECTIONS)), path="include")
    return Scope(include=tuple(s for s in SECTIONS if s in options.include), namespaces=tuple(sorted(set(namespaces))),
                 label_selector=(options.label_selector or "").strip() or None, requirements=tuple(requirements), names=tuple(names),
                 descheduler_namespace=descheduler_namespace, descheduler_name=descheduler_name)


def gather_eviction_facts(options: KubevirtEvictionFactsOptions, check_mode: bool = False, client: Optional[Client] = None) -> dict:
    """The module's entry: everything `kubevirt_eviction_facts` documents in RETURN. It only reads, so check mode
    returns the same facts."""
    scope = validate_options(options)
    return read_facts(client or Client.from_options(options.connection), scope)
