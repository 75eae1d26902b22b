"""The cluster-wide KubeVirt configuration as virt-controller and virt-api read it from the KubeVirt CR
(`spec.configuration`), with KubeVirt's defaults filled in, and the effective eviction strategy of a VMI.

Upstream source: kubevirt/kubevirt `pkg/virt-config` (defaults: parallelMigrationsPerCluster 5,
parallelOutboundMigrationsPerNode 2, bandwidthPerMigration unlimited, completionTimeoutPerGiB 150,
progressTimeout 150, allowPostCopy false, nodeDrainTaintKey kubevirt.io/drain) and
`pkg/util/migrations.VMIEvictionStrategy` (the VMI's `spec.evictionStrategy`, else the cluster's, else
none, which acts as `None`).

Simplified: one KubeVirt CR per cluster is assumed (the first one not being deleted is used); only the
settings the simulator acts on are read."""
from __future__ import annotations

from .common import KUBEVIRT

KUBEVIRT_VERSION = "v1.8.4"          # what virt-operator reports (the rebalance page's verified version)
KUBEVIRT_REGISTRY = "quay.io/kubevirt"
HCO_VERSION = "1.18.1"               # HyperConverged operator version (status.versions[name=operator])
LAUNCHER_IMAGE = f"{KUBEVIRT_REGISTRY}/virt-launcher:{KUBEVIRT_VERSION}"

MIGRATION_DEFAULTS = {
    "parallelMigrationsPerCluster": 5,
    "parallelOutboundMigrationsPerNode": 2,
    "completionTimeoutPerGiB": 150,
    "progressTimeout": 150,
    "allowAutoConverge": False,
    "allowPostCopy": False,
    "unsafeMigrationOverride": False,
    "nodeDrainTaintKey": "kubevirt.io/drain",
}


def kubevirt_cr(cluster) -> dict | None:
    """The KubeVirt CR (stored object, read-only), or None on a cluster without one."""
    for entry in cluster.store.entries(KUBEVIRT):
        if not entry.obj["metadata"].get("deletionTimestamp"):
            return entry.obj
    return None


def kubevirt_version(cluster) -> tuple[int, ...]:
    """The KubeVirt version virt-operator reports (`status.observedKubeVirtVersion`, `v1.7.2` -> (1, 7, 2)); the
    simulator's own version on a cluster without a KubeVirt CR or a version."""
    text = str(((kubevirt_cr(cluster) or {}).get("status") or {}).get("observedKubeVirtVersion") or KUBEVIRT_VERSION)
    numbers = []
    for part in text.lstrip("v").split("-", maxsplit=1)[0].split(".")[:3]:
        numbers.append(int(part) if part.isdigit() else 0)
    return tuple(numbers)


def configuration(cluster) -> dict:
    return ((kubevirt_cr(cluster) or {}).get("spec") or {}).get("configuration") or {}


def cluster_eviction_strategy(cluster) -> str | None:
    """`spec.configuration.evictionStrategy` of the KubeVirt CR (None when unset)."""
    return configuration(cluster).get("evictionStrategy") or None


def migration_config(cluster) -> dict:
    """The effective `spec.configuration.migrations`: the CR's values over KubeVirt's defaults."""
    effective = dict(MIGRATION_DEFAULTS)
    for key, value in (configuration(cluster).get("migrations") or {}).items():
        if value is not None:
            effective[key] = value
    return effective


def effective_strategy(cluster, vmi: dict) -> str:
    """The VMI's spec.evictionStrategy, else the cluster default, else `None`."""
    return (vmi.get("spec") or {}).get("evictionStrategy") or cluster_eviction_strategy(cluster) or "None"


def migratable_on_eviction(cluster, vmi: dict) -> bool:
    """Strategies that make the evacuation controller migrate a marked VMI (when it is live-migratable).
    Upstream `VMIMigratableOnEviction` is false for External: the VMI is marked, another controller acts."""
    return effective_strategy(cluster, vmi) in ("LiveMigrate", "LiveMigrateIfPossible")
