"""Example objects of the OpenShift Kube Descheduler Operator for the `openshift` scenario variant: the
`KubeDescheduler` custom resource (`operator.openshift.io/v1`, namespaced, bundle `openshift`).

Upstream: openshift/cluster-kube-descheduler-operator (`pkg/apis/descheduler/v1/types_descheduler.go`,
the CRD under `manifests/`): `spec.managementState`, `spec.mode` (`Automatic` | `Predictive`, default
`Predictive`), `spec.deschedulingIntervalSeconds`, `spec.profiles[]` (e.g. `AffinityAndTaints`,
`LongLifecycle`, `DevKubeVirtRelieveAndMigrate`, `KubeVirtRelieveAndMigrate`), `spec.profileCustomizations`
(`devLowNodeUtilizationThresholds`, `devDeviationThresholds`, `devEnableEvictionsInBackground`,
`namespaces {included, excluded}`, ...), `spec.evictionLimits {total, node}`, `spec.logLevel`,
`spec.operatorLogLevel`; status of an operator (`conditions`, `generations`, `observedGeneration`,
`readyReplicas`). The single instance is `cluster` in `openshift-kube-descheduler-operator`.

Simplified: the simulator serves the kind without a schema and runs no operator: the object is data that
the collection can discover and check, nothing reacts to it.
"""
from __future__ import annotations

API_VERSION = "operator.openshift.io/v1"
NAMESPACE = "openshift-kube-descheduler-operator"


def kube_descheduler(profiles: list[str] | None = None, mode: str = "Automatic", interval_seconds: int = 60,
                     evictions_total: int | None = 5, evictions_node: int | None = 2,
                     customizations: dict | None = None) -> dict:
    """The KubeDescheduler `cluster`, set up for KubeVirt VM rebalancing by default."""
    spec: dict = {
        "managementState": "Managed",
        "mode": mode,
        "deschedulingIntervalSeconds": interval_seconds,
        "profiles": list(profiles or ["DevKubeVirtRelieveAndMigrate"]),
        "profileCustomizations": dict(customizations if customizations is not None
                                      else {"devLowNodeUtilizationThresholds": "Medium",
                                            "devDeviationThresholds": "AsymmetricLow"}),
        "logLevel": "Normal",
        "operatorLogLevel": "Normal",
    }
    limits = {k: v for k, v in (("total", evictions_total), ("node", evictions_node)) if v is not None}
    if limits:
        spec["evictionLimits"] = limits
    return {
        "apiVersion": API_VERSION,
        "kind": "KubeDescheduler",
        "metadata": {"name": "cluster", "namespace": NAMESPACE},
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "readyReplicas": 1,
            "conditions": [
                {"type": "TargetConfigControllerDegraded", "status": "False", "reason": "AsExpected",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"},
            ],
            "generations": [{"group": "apps", "resource": "deployments", "namespace": NAMESPACE,
                             "name": "descheduler", "lastGeneration": 1}],
        },
    }
