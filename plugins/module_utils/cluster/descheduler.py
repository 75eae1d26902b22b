# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of a live Descheduler installation (the ACP ModulePlugin package in one namespace), shared by the
services that need it: the kinds it uses, its workload (a CronJob or a Deployment), the policy ConfigMap and key the
workload reads, the workload's Pods and the log of a Pod.

The decisions are the pure readers of `kube.descheduler` and `kube.klog`; this class only lists and reads through the
Client. Nothing is cached here but what the Client caches (discovery), so a caller that asks again sees the cluster as
it is then: a verification that reads the log twice sees the Job that ran in between.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption, KindNotServed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import Client
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import meta
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.selectors import is_dns_label, is_dns_subdomain

# the kinds of an installation, by kind: their API group
KINDS = {"CronJob": "batch", "Deployment": "apps", "Job": "batch", "Pod": ""}
LOG_TAIL_LINES = 5000


NAMESPACE_FIX = "Give the namespace of the Descheduler (the ACP package uses 'descheduler')."
NAME_FIX = "Give the name of the Descheduler CronJob or Deployment."


def check_location(namespace: str, name: str, namespace_fix: str = NAMESPACE_FIX, name_fix: str = NAME_FIX) -> None:
    """The options descheduler_namespace and descheduler_name, checked before any request (InvalidOption names the option)."""
    if not is_dns_label(namespace):
        raise InvalidOption("{0!r} is not a valid namespace name".format(namespace), namespace_fix, path="descheduler_namespace")
    if not is_dns_subdomain(name):
        raise InvalidOption("{0!r} is not a valid object name".format(name), name_fix, path="descheduler_name")


class DeschedulerInstallation:
    """The Descheduler named `name` (or labelled app.kubernetes.io/name=descheduler) in `namespace`."""

    def __init__(self, client: Client, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    # ---------------------------------------------------------------------------------- kinds
    def kinds(self) -> Dict[str, Any]:
        """The served resource of every kind of the installation (None for one not served), by kind; one discovery."""
        found = self.client.find_kinds(list(KINDS.items()))
        return {kind: found[(kind, group)] for kind, group in KINDS.items()}

    def resource(self, kind: str) -> Any:
        """The served resource of one kind of the installation, None when it is not served."""
        return self.client.find_kinds([(kind, KINDS[kind])])[(kind, KINDS[kind])]

    def list(self, kind: str, **selectors: Any) -> List[dict]:
        """The objects of `kind` in the namespace; none when the kind is not served (or no longer is)."""
        resource = self.resource(kind)
        if resource is None:
            return []
        try:
            return self.client.list(resource, namespace=self.namespace, **selectors)
        except KindNotServed:
            return []

    # ---------------------------------------------------------------------------------- workload
    def workload(self) -> Tuple[Optional[str], Optional[dict]]:
        """(kind, object) of the CronJob or Deployment that runs the descheduler (`kube.descheduler.find_workload`);
        (None, None) when there is none."""
        return desched.find_workload(self.list("CronJob"), self.list("Deployment"), self.name)

    def policy_source(self, kind: Optional[str] = None, workload: Optional[dict] = None) -> Tuple[str, str]:
        """(ConfigMap name, data key) of the policy the descheduler reads: the configMap volume behind the workload's
        --policy-config-file; the ConfigMap named like the installation and `policy.yaml` where the workload (read now
        unless given) or its flags do not say."""
        if workload is None:
            kind, workload = self.workload()
        configmap, key = desched.workload_policy_source(kind, workload)
        return configmap or self.name, key or desched.POLICY_KEY

    # ---------------------------------------------------------------------------------- pods and logs
    def pods(self, kind: Optional[str], workload: Optional[dict]) -> List[dict]:
        """The workload's Pods, oldest first: a CronJob's are those of its last Jobs, a Deployment's those its selector
        matches (`kube.descheduler.workload_pods`)."""
        if workload is None:
            return []
        jobs = self.list("Job") if kind == "CronJob" else []
        return desched.workload_pods(kind, workload, jobs, self.list("Pod"))

    def log(self, pod: dict, container: Optional[str] = None, tail_lines: int = LOG_TAIL_LINES) -> List[dict]:
        """The last `tail_lines` lines of a Pod's log (its `container`) as klog records, each with its `pod`."""
        text = self.client.pod_log(self.namespace, meta(pod).get("name"), container=container, tail_lines=tail_lines)
        return desched.pod_log_records(pod, text)

    def log_unless_gone(self, pod: dict, container: Optional[str] = None, tail_lines: int = LOG_TAIL_LINES) -> Optional[List[dict]]:
        """`log`, or None when the Pod is gone (404): a Deployment's Pod can be replaced at any time (a restart, an
        eviction, a node drain) between listing it and reading its log, and the caller lists the Pods again."""
        try:
            return self.log(pod, container, tail_lines)
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise
