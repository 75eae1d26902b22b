"""virt-api's VMI mutating webhook (`virtualmachineinstances-mutator.kubevirt.io`): defaults filled into a
VirtualMachineInstance when it is created, whoever creates it (a user, the VM controller, a replica set).

The one that matters here: `spec.evictionStrategy` is copied from the KubeVirt CR's
`spec.configuration.evictionStrategy` when the VMI has none. The value is recorded in the VMI, so a later
change of the cluster default (or of HyperConverged `spec.evictionStrategy`, which HCO renders into the
KubeVirt CR) affects only VMIs created afterwards; existing VMIs keep theirs until they are recreated
(a VM restart). Also defaulted: `spec.domain.machine.type` (q35), `spec.architecture` (amd64) and the
memory request from `spec.domain.memory.guest`.

Upstream source: kubevirt/kubevirt `pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go`.
Simplified: no presets, instance types, CPU model or feature defaults; when the cluster has no eviction
strategy the VMI is left without one (effective `None`)."""
from __future__ import annotations

from ..api import AdmissionRequest
from .common import VMI, serves
from .defaults import cluster_eviction_strategy


def make_hook(cluster):
    def default_vmi(request: AdmissionRequest) -> None:
        if request.resource.key != VMI or request.operation != "CREATE" or request.subresource:
            return
        spec = request.obj.setdefault("spec", {})
        if not spec.get("evictionStrategy"):
            strategy = cluster_eviction_strategy(cluster)
            if strategy:
                spec["evictionStrategy"] = strategy
        spec.setdefault("architecture", "amd64")
        domain = spec.setdefault("domain", {})
        domain.setdefault("machine", {}).setdefault("type", "q35")
        guest = (domain.get("memory") or {}).get("guest")
        requests = domain.setdefault("resources", {}).setdefault("requests", {})
        if guest and not requests.get("memory"):
            requests["memory"] = guest
    return default_vmi


def register(cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if serves(cluster, VMI):
        cluster.admission_hooks.append(make_hook(cluster))
