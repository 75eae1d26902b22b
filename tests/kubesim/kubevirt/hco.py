"""The HyperConverged Cluster Operator's KubeVirt part: the HyperConverged CR (`kubevirt-hyperconverged`)
owns the KubeVirt CR `kubevirt-kubevirt-hyperconverged` in its namespace.

- `spec.evictionStrategy` (hco.kubevirt.io/v1beta1) is rendered into the KubeVirt CR's
  `spec.configuration.evictionStrategy`; unset, it renders `None` (what the rebalance page reports for
  a HyperConverged created with an empty spec on ACP; upstream HCO defaults it to LiveMigrate on
  multi-node clusters).
- `spec.liveMigrationConfig` is rendered into `spec.configuration.migrations` (bandwidthPerMigration,
  completionTimeoutPerGiB, parallelMigrationsPerCluster, parallelOutboundMigrationsPerNode,
  progressTimeout, network, allowAutoConverge, allowPostCopy; the CRD defaults are in `hco_defaults.py`).
- The KubeVirt CR is created when missing (controller ownerReference to the HyperConverged CR; HCO event
  `Created`), and a direct edit of those two fields is reconciled back at once (HCO event `Overwritten`
  "Overwritten KubeVirt kubevirt-kubevirt-hyperconverged"); HCO-driven changes record `Updated`. Other
  fields of the KubeVirt CR are left alone. Changing the strategy affects only VMIs created afterwards
  (see `mutator.py`).
- Status: `versions: [{name: operator, version: 1.18.1}]` (a version set by the scenario is kept),
  conditions ReconcileComplete/Available/Upgradeable True and Progressing/Degraded False,
  `observedGeneration`, `systemHealthStatus: healthy`.

Upstream source: kubevirt/hyperconverged-cluster-operator `controllers/operands/kubevirt.go`
(getKVConfig, getKVMigrationConf) and `controllers/hyperconverged/hyperconverged_controller.go`.
Simplified: only the KubeVirt operand (no CDI, network addons, SSP), and only the eviction strategy and
migration settings are rendered; no feature gates, JSON patch annotations or upgrade handling."""
from __future__ import annotations

import copy

from .. import events
from ..controllers import Controller
from ..errors import ApiError
from ..store import DELETED, Event
from .common import HCO, KUBEVIRT, find, meta, mutate, owner_ref, rt, serves, set_condition
from .defaults import HCO_VERSION

HCO_NAME = "kubevirt-hyperconverged"
KUBEVIRT_NAME = "kubevirt-kubevirt-hyperconverged"
COMPONENT = "hyperconverged-operator"
_MIGRATION_FIELDS = ("bandwidthPerMigration", "completionTimeoutPerGiB", "parallelMigrationsPerCluster",
                     "parallelOutboundMigrationsPerNode", "progressTimeout", "network")


def render_migrations(live_migration: dict | None) -> dict:
    config = live_migration or {}
    rendered = {k: config[k] for k in _MIGRATION_FIELDS if config.get(k) is not None}
    rendered["allowAutoConverge"] = bool(config.get("allowAutoConverge", False))
    rendered["allowPostCopy"] = bool(config.get("allowPostCopy", False))
    return rendered


def rendered_configuration(hco: dict) -> dict:
    spec = hco.get("spec") or {}
    return {"evictionStrategy": spec.get("evictionStrategy") or "None",
            "migrations": render_migrations(spec.get("liveMigrationConfig"))}


class HyperConvergedController(Controller):
    keys = (HCO, KUBEVIRT)

    def on_event(self, event: Event) -> None:
        name = meta(event.obj).get("name")
        if event.key == HCO:
            if event.type != DELETED:
                self.reconcile(event.namespace, name, by_hco=True)
        elif name == KUBEVIRT_NAME:
            for entry in list(self.cluster.store.entries(HCO, event.namespace)):
                self.reconcile(event.namespace, meta(entry.obj)["name"], by_hco=False)

    def reconcile(self, namespace: str, name: str, by_hco: bool) -> None:
        cluster = self.cluster
        hco = find(cluster, HCO, namespace, name)
        if hco is None or meta(hco).get("deletionTimestamp"):
            return
        wanted = rendered_configuration(hco)
        kubevirt = find(cluster, KUBEVIRT, namespace, KUBEVIRT_NAME)
        if kubevirt is None:
            body = {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
                    "metadata": {"name": KUBEVIRT_NAME, "namespace": namespace,
                                 "labels": {"app": HCO_NAME, "app.kubernetes.io/component": "compute",
                                            "app.kubernetes.io/managed-by": "hco-operator",
                                            "app.kubernetes.io/part-of": "hyperconverged-cluster"},
                                 "ownerReferences": [owner_ref(hco)]},
                    "spec": {"certificateRotateStrategy": {}, "configuration": copy.deepcopy(wanted),
                             "customizeComponents": {}, "uninstallStrategy": "BlockUninstallIfWorkloadsExist",
                             "workloadUpdateStrategy": {"batchEvictionInterval": "1m0s", "batchEvictionSize": 10,
                                                        "workloadUpdateMethods": ["LiveMigrate"]}}}
            try:
                cluster.create(rt(cluster, KUBEVIRT), namespace, body)
                events.record(cluster, hco, "Normal", "Created", f"Created KubeVirt {KUBEVIRT_NAME}", COMPONENT)
            except ApiError:
                pass
        elif not meta(kubevirt).get("deletionTimestamp"):
            def render(obj: dict):
                configuration = obj.setdefault("spec", {}).setdefault("configuration", {})
                if all(configuration.get(k) == v for k, v in wanted.items()):
                    return False
                configuration.update(copy.deepcopy(wanted))
                return True
            before = find(cluster, KUBEVIRT, namespace, KUBEVIRT_NAME)
            after = mutate(cluster, KUBEVIRT, namespace, KUBEVIRT_NAME, render, uid=meta(kubevirt)["uid"])
            if after is not None and after is not before:
                if by_hco:
                    events.record(cluster, hco, "Normal", "Updated", f"Updated KubeVirt {KUBEVIRT_NAME}", COMPONENT)
                else:
                    events.record(cluster, hco, "Normal", "Overwritten", f"Overwritten KubeVirt {KUBEVIRT_NAME}",
                                  COMPONENT)
        self._status(hco)

    def _status(self, hco: dict) -> None:
        def change(obj: dict):
            st = obj.setdefault("status", {})
            before = copy.deepcopy(st)
            versions = [v for v in st.get("versions") or [] if v.get("name") != "operator"]
            operator = next((v for v in st.get("versions") or [] if v.get("name") == "operator"), None)
            st["versions"] = [{"name": "operator", "version": (operator or {}).get("version") or HCO_VERSION}] + versions
            st["observedGeneration"] = meta(obj).get("generation", 1)
            st["systemHealthStatus"] = "healthy"
            message = "Reconcile completed successfully"
            for ctype, cstatus in (("ReconcileComplete", "True"), ("Available", "True"), ("Progressing", "False"),
                                   ("Degraded", "False"), ("Upgradeable", "True")):
                set_condition(obj, ctype, cstatus, "ReconcileCompleted", message)
            return st != before
        mutate(self.cluster, HCO, meta(hco).get("namespace"), meta(hco)["name"], change, uid=meta(hco)["uid"])


def register(cluster, manager) -> None:
    if serves(cluster, HCO, KUBEVIRT):
        manager.add(HyperConvergedController(cluster))
