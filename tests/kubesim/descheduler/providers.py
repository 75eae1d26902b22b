"""The metrics providers of one descheduler process (descheduler v0.36 `pkg/descheduler/descheduler.go`:
`RunDeschedulerStrategies`, `setupPrometheusProvider`, `sync`, `reconcileInClusterSAToken`; `metricsProviderListToMap`).

- The metrics client, hence the metrics collector, exists when the policy has `metricsCollector.enabled: true` or a
  provider `{source: KubernetesMetrics}`. At start: `"Starting metrics collector"`, `"Waiting for metrics collector to
  sync"` (V(2)), the first collection.
- A provider `{source: Prometheus, prometheus: {url, authToken}}` with a URL gives the plugins a Prometheus client:
  - with `authToken.secretReference {namespace, name}`: the token is the Secret's `prometheusAuthToken` key, read by the
    authentication secret reconciler (`"Starting authentication secret reconciler"`). A missing Secret drops the client
    (`"Unhandled Error" err="key failed with : unable to get <ns>/<name> secret"`), an empty key keeps none (`... :
    prometheus authentication token secret missing "prometheusAuthToken" data or empty`), a new token recreates it
    (`"authentication secret token updated, recreating prometheus client"`, V(2));
  - without: the Pod's service account token (`"Creating Prometheus client (with SA token)"`, V(2), before the first
    cycle). The simulated Prometheus accepts only the scenario's `token`, so an SA token gets 401 when it has one.
  Without a client the LowNodeUtilization plugin cannot be built: `prometheus client not initialized`.

Simplified: the reconciler runs at the process start and before each cycle (upstream: on the Secret's informer
events, with a rate-limited retry), so a rotated token takes effect at the next cycle; the descheduler's own RBAC for
reading the Secret is not checked."""
from __future__ import annotations

import base64

from ..metrics.prometheus import TOKEN_KEY, InClusterClient
from .klog import Logger
from .metricscollector import MetricsCollector

KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS = "Prometheus"
SRC = "descheduler.go"


def providers_by_source(policy) -> dict[str, dict]:
    """metricsProviderListToMap: the last provider of each source wins."""
    return {provider.get("source", ""): provider for provider in policy.metrics_providers}


class Providers:
    """The metrics collector and the Prometheus client of one process, as the profiles' handles get them."""

    def __init__(self, cluster, policy, log: Logger, user: str):
        self.cluster = cluster
        self.log = log
        self.namespace = user.split(":")[2] if user.startswith("system:serviceaccount:") else "default"
        self.user = user
        by_source = providers_by_source(policy)
        self.collector: MetricsCollector | None = None
        if policy.metrics_collector or KUBERNETES_METRICS in by_source:
            self.collector = MetricsCollector(cluster, policy.node_selector, log)
        prometheus = (by_source.get(PROMETHEUS) or {}).get("prometheus") or {}
        self.url = prometheus.get("url") or ""
        reference = (prometheus.get("authToken") or {}).get("secretReference") if "authToken" in prometheus else None
        self.secret = (reference.get("namespace", ""), reference.get("name", "")) if reference else None
        self.token: str | None = None
        self.client: InClusterClient | None = None

    def start(self) -> None:
        """What runs before the first cycle: the collector's first sync, the token reconciler."""
        if self.collector is not None:
            self.log.infof(2, f"{SRC}:762", "Starting metrics collector")
            self.collector.collect()
            self.log.infof(2, f"{SRC}:766", "Waiting for metrics collector to sync")
        if self.url and self.secret is not None:
            self.log.infof(0, f"{SRC}:300", "Starting authentication secret reconciler")
        self.reconcile()

    def reconcile(self) -> None:
        """The Prometheus client's token: the Secret's (secret reconciliation) or the service account's."""
        if not self.url:
            return
        if self.secret is None:
            token = f"serviceaccount:{self.user}"
            if token != self.token:
                self.log.infof(2, f"{SRC}:273", "Creating Prometheus client (with SA token)")
                self.token, self.client = token, InClusterClient(self.cluster, self.url, token, self.namespace)
            return
        namespace, name = self.secret
        secrets = self.cluster.registry.by_key("secrets")
        secret = self.cluster.find(secrets, namespace, name) if secrets is not None else None
        if secret is None:
            self.token, self.client = None, None
            self._unhandled(f"unable to get {namespace}/{name} secret")
            return
        raw = (secret.get("data") or {}).get(TOKEN_KEY) or ""
        token = base64.b64decode(raw).decode("utf-8", "replace") if raw else ""
        if not token:
            self._unhandled(f'prometheus authentication token secret missing "{TOKEN_KEY}" data or empty')
            return
        if token == self.token:
            return
        self.log.infof(2, f"{SRC}:358", "authentication secret token updated, recreating prometheus client")
        self.token, self.client = token, InClusterClient(self.cluster, self.url, token, self.namespace)

    def _unhandled(self, message: str) -> None:
        """utilruntime.HandleError of the reconciler's failed sync."""
        self.log.error("runtime.go:142", f"key failed with : {message}", "Unhandled Error", "logger", "UnhandledError")
