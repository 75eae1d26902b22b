"""The HyperConverged CRD's structural defaults, applied by the API server when a HyperConverged is created
or updated: `spec.liveMigrationConfig` gets completionTimeoutPerGiB 150, parallelMigrationsPerCluster 5,
parallelOutboundMigrationsPerNode 2, progressTimeout 150, allowAutoConverge false and allowPostCopy false
for whatever is not set (so `kubectl get hco -o yaml` shows them, as on a real cluster).

Upstream source: kubevirt/hyperconverged-cluster-operator `api/v1beta1/hyperconverged_types.go`
(kubebuilder default markers). Simplified: only liveMigrationConfig is defaulted; `evictionStrategy` is
left unset (see `hco.py` for what that renders)."""
from __future__ import annotations

from ..api import AdmissionRequest
from .common import HCO, serves

LIVE_MIGRATION_DEFAULTS = {
    "allowAutoConverge": False,
    "allowPostCopy": False,
    "completionTimeoutPerGiB": 150,
    "parallelMigrationsPerCluster": 5,
    "parallelOutboundMigrationsPerNode": 2,
    "progressTimeout": 150,
}


def default_hyperconverged(request: AdmissionRequest) -> None:
    if request.resource.key != HCO or request.subresource or request.operation not in ("CREATE", "UPDATE"):
        return
    spec = request.obj.setdefault("spec", {})
    config = spec.get("liveMigrationConfig")
    if not isinstance(config, dict):
        config = spec["liveMigrationConfig"] = {}
    for key, value in LIVE_MIGRATION_DEFAULTS.items():
        config.setdefault(key, value)


def register(cluster, manager=None) -> None:  # pylint: disable=unused-argument
    if serves(cluster, HCO):
        cluster.admission_hooks.append(default_hyperconverged)
