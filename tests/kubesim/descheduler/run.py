"""One descheduler process and its descheduling cycles (descheduler v0.36: cmd/descheduler/app/server.go and
options, pkg/descheduler/descheduler.go, pkg/descheduler/evictions/evictions.go, pkg/framework/profile).

Flags: `--policy-config-file`, `--feature-gates=EvictionsInBackground=true` (the only gate this build knows
besides the logging gates; an unknown gate is a flag error), `--v=N`, `--dry-run`, `--descheduling-interval`
(Go duration; 0 = one cycle, then exit). Other descheduler flags are accepted and ignored; unknown flags
fail like cobra does (`Error: unknown flag: --x`).

A cycle: `Resetting pod evictor counters` (V(3)); the Ready nodes matching the policy's `nodeSelector`
(`Skipping descheduling cycle: requires >=2 nodes` with fewer than two); each profile is built (a profile
naming unregistered plugins in an extension point or missing a plugin's config is logged `unable to create
a profile` and skipped); the deschedule plugins of every profile, then the balance plugins, each followed by
`"Total number of evictions/requests" extension point=... evictedPods=N evictionRequests=N` (V(1)); a plugin that
ends with an error (LowNodeUtilization's `error getting node usage: ...`) makes the profile's extension point log
`"running balance extension point failed with error" err="plugin \"LowNodeUtilization\" finished with error: ..."
profile=<p>` after its plugins ran; finally `"Number of evictions/requests" totalEvicted=N evictionRequests=N` (V(1)).
The process's metrics collector and Prometheus client (providers.py) are set up at its start and given to every
profile's handle.

The pod evictor: limits `maxNoOfPodsToEvictTotal`, `maxNoOfPodsToEvictPerNode`, `maxNoOfPodsToEvictPerNamespace`
(in that order; eviction requests in flight count against them) with the upstream `"Error evicting pod"`
lines; evictions go through the cluster's `pods/eviction` subresource (admission hooks such as the KubeVirt
interceptor and PDB guards answer) as the Pod's service account, with a policy/v1 Eviction annotated
`requested-by: sigs.k8s.io/descheduler`; success logs `"Evicted pod"` (V(1)) and records a Normal event,
failures log `"Error evicting pod" err="error when evicting pod (ignoring) \\"<pod>\\": <message>"` for a 429.
`--dry-run` calls no API and logs `"Evicted pod in dry run mode"`.

EvictionsInBackground (only with the gate, only for Pods annotated
`descheduler.alpha.kubernetes.io/request-evict-only`): a 429 whose message contains `Eviction triggered
evacuation` is a request in flight, logged `"Eviction in background assumed"` (V(3)) and remembered in the
process's cache; a cached Pod is skipped with `"Eviction in background already requested (ignoring)"` (V(3)).
The cache is the process's own memory: at process start it is filled from the Pods that carry
`descheduler.alpha.kubernetes.io/eviction-in-progress` (`"Eviction in background detected. Adding pod to the
cache."`), later from Pod changes (annotation added, removed, Pod finished or deleted); assumed entries
expire after 600 s. A CronJob starts a new process every run, so what carries over between CronJob runs is
the annotation on the Pod, not the assumed requests; a Deployment keeps its cache across cycles. Without the
gate the 429 is a failed eviction and the same Pod is nominated again every cycle.

Among equally ranked Pods and nodes the order is the process's seeded random order (`seed`, random by
default; see lownodeutilization.py), as upstream defines none.

Simplified: the informer cache is reconciled at process start and at the start of each cycle (not on every
Pod event), and expired assumed entries are dropped then (upstream: every 10 minutes); the 600 s are
simulated seconds. Deschedule plugins and the balance plugins other than LowNodeUtilization are accepted but
evict nothing. Dry-run does not hide the Pods it "evicted" from the rest of the cycle."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from .. import events
from ..api import RequestContext
from ..errors import ApiError
from ..quantity import is_terminal
from ..selectors import label_matcher
from . import policy as policymod
from .evictor import (DefaultEvictor, EvictionError, EvictionNamespaceLimitError, EvictionNodeLimitError,
                      EvictionTotalLimitError, EvictorError, is_ready)
from .klog import Logger, kobj, quote
from .lownodeutilization import LowNodeUtilization, PluginError
from .providers import Providers

REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
EVICTION_IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
BACKGROUND_ERROR_TEXT = "Eviction triggered evacuation"
ASSUMED_TIMEOUT_SECONDS = 600
FEATURE_GATES = {"EvictionsInBackground": False, "ContextualLogging": True, "LoggingAlphaOptions": False,
                 "LoggingBetaOptions": True}
COMPONENT = "sigs.k8s.io/descheduler"

SRC_EVICTIONS = "evictions.go"
SRC_DESCHEDULER = "descheduler.go"
SRC_PROFILE = "profile.go"

_BOOL_FLAGS = {"dry-run", "disable-metrics", "leader-elect", "enable-http2", "logtostderr", "alsologtostderr",
               "one-output", "skip-headers", "skip-log-headers", "add-dir-header"}
_VALUE_FLAGS = {"policy-config-file", "feature-gates", "v", "descheduling-interval", "kubeconfig", "bind-address",
                "secure-port", "leader-elect-lease-duration", "leader-elect-renew-deadline",
                "leader-elect-resource-lock", "leader-elect-resource-name", "leader-elect-resource-namespace",
                "leader-elect-retry-period", "logging-format", "vmodule", "log-flush-frequency", "otel-collector-endpoint",
                "otel-transport-ca-cert", "otel-service-name", "otel-trace-namespace", "otel-sample-rate",
                "otel-fallback-no-op-on-error", "client-connection-kubeconfig", "client-connection-qps",
                "client-connection-burst", "permit-address-sharing", "permit-port-sharing", "tls-cert-file",
                "tls-private-key-file", "tls-min-version", "tls-cipher-suites", "cert-dir", "http2-max-streams-per-connection",
                "max-pods-to-evict-per-node", "node-selector", "log-file", "log-dir", "stderrthreshold", "log-file-max-size"}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class ArgsError(Exception):
    """A command-line error: cobra prints `Error: <message>` and the process exits 1."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class Options:
    policy_file: str | None = None
    feature_gates: dict[str, bool] = field(default_factory=dict)
    verbosity: int = 0
    dry_run: bool = False
    interval: float = 0.0

    @property
    def evictions_in_background(self) -> bool:
        return bool(self.feature_gates.get("EvictionsInBackground", False))


def _parse_bool(text: str) -> bool | None:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def _parse_gates(text: str) -> dict[str, bool]:
    gates = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        if "=" not in item:
            raise ArgsError(f'invalid argument "{text}" for "--feature-gates" flag: missing bool value for {item}')
        name, value = item.split("=", 1)
        name = name.strip()
        if name not in FEATURE_GATES:
            raise ArgsError(f'invalid argument "{text}" for "--feature-gates" flag: unrecognized feature gate: {name}')
        parsed = _parse_bool(value.strip())
        if parsed is None:
            raise ArgsError(f'invalid argument "{text}" for "--feature-gates" flag: invalid value of {item}, err: '
                            f'strconv.ParseBool: parsing "{value.strip()}": invalid syntax')
        gates[name] = parsed
    return gates


def container_args(container: dict) -> list[str]:
    """The process's argv after the program name: command[1:] + args."""
    return list(container.get("command") or [])[1:] + list(container.get("args") or [])


def parse_args(argv: list[str]) -> Options:
    options = Options()
    index = 0
    while index < len(argv):
        arg = str(argv[index])
        index += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        name, has_value, value = arg.lstrip("-").partition("=")
        if name in _BOOL_FLAGS:
            parsed = _parse_bool(value) if has_value else True
            if parsed is None:
                raise ArgsError(f'invalid argument "{value}" for "--{name}" flag: strconv.ParseBool: parsing '
                                f'"{value}": invalid syntax')
            if name == "dry-run":
                options.dry_run = parsed
            continue
        if name not in _VALUE_FLAGS:
            raise ArgsError(f"unknown flag: --{name}" if arg.startswith("--") else f"unknown shorthand flag: "
                            f"'{name[:1]}' in {arg}")
        if not has_value:
            if index >= len(argv):
                raise ArgsError(f"flag needs an argument: --{name}")
            value = str(argv[index])
            index += 1
        if name == "policy-config-file":
            options.policy_file = value
        elif name == "feature-gates":
            options.feature_gates.update(_parse_gates(value))
        elif name == "v":
            try:
                options.verbosity = int(value)
            except ValueError:
                raise ArgsError(f'invalid argument "{value}" for "-v, --v" flag: strconv.ParseInt: parsing '
                                f'"{value}": invalid syntax') from None
        elif name == "descheduling-interval":
            try:
                options.interval = policymod.parse_duration(value)
            except ValueError as err:
                raise ArgsError(f'invalid argument "{value}" for "--descheduling-interval" flag: {err}') from None
    return options


# ------------------------------------------------------------------------------------ requests cache
@dataclass
class _Request:
    name: str
    namespace: str
    node: str
    assumed: bool
    assumed_at: float = 0.0


class EvictionRequestsCache:
    """evictionRequestsCache: the eviction requests in flight this process knows about, by Pod UID."""

    def __init__(self, time_scale: float = 1.0, timeout: float = ASSUMED_TIMEOUT_SECONDS):
        self.time_scale = time_scale
        self.timeout = timeout
        self.requests: dict[str, _Request] = {}
        self._seen: dict[str, tuple[str, bool]] = {}   # uid -> (resourceVersion, had eviction-in-progress)
        self._synced = False

    def has(self, pod: dict) -> bool:
        return pod["metadata"].get("uid") in self.requests

    def add(self, pod: dict, assumed: bool = False) -> None:
        uid = pod["metadata"]["uid"]
        if uid in self.requests:
            return
        self.requests[uid] = _Request(pod["metadata"]["name"], pod["metadata"].get("namespace", ""),
                                      (pod.get("spec") or {}).get("nodeName", ""), assumed,
                                      time.monotonic() if assumed else 0.0)

    def delete(self, uid: str) -> None:
        self.requests.pop(uid, None)

    def total(self) -> int:
        return len(self.requests)

    def per_node(self, node: str) -> int:
        return sum(1 for r in self.requests.values() if r.node == node)

    def per_namespace(self, namespace: str) -> int:
        return sum(1 for r in self.requests.values() if r.namespace == namespace)

    def clean(self, log: Logger) -> None:
        """cleanCache: assumed requests never confirmed go after the timeout (simulated seconds)."""
        now = time.monotonic()
        for uid, item in list(self.requests.items()):
            if item.assumed and (now - item.assumed_at) * self.time_scale > self.timeout:
                log.info(4, f"{SRC_EVICTIONS}:98", "Assumed eviction request in background timed out, deleting",
                         "timeout", self.timeout, "podNamespace", item.namespace, "podName", item.name)
                self.delete(uid)

    def sync(self, pods: list[dict], log: Logger) -> None:
        """What the pod informer's handlers would have done since the last sync."""
        present = set()
        for pod in pods:
            meta = pod["metadata"]
            uid, annotations = meta["uid"], meta.get("annotations") or {}
            present.add(uid)
            in_progress = EVICTION_IN_PROGRESS in annotations
            seen = self._seen.get(uid)
            self._seen[uid] = (meta.get("resourceVersion", ""), in_progress)
            if seen is None:   # AddFunc
                if REQUEST_EVICT_ONLY in annotations and in_progress and not is_terminal(pod):
                    log.info(3, f"{SRC_EVICTIONS}:220", "Eviction in background detected. Adding pod to the cache.",
                             "pod", kobj(pod))
                    self.add(pod)
                continue
            if seen[0] == meta.get("resourceVersion", ""):
                continue
            self._update(pod, seen[1], in_progress, log)
        for uid in list(self._seen):
            if uid not in present:
                del self._seen[uid]
                if uid in self.requests:
                    item = self.requests[uid]
                    log.info(3, f"{SRC_EVICTIONS}:293", "Pod with eviction in background deleted/evicted. Removing "
                             "pod from the cache.", "pod", f"{item.namespace}/{item.name}")
                    self.delete(uid)
        self._synced = True

    def _update(self, pod: dict, had: bool, has: bool, log: Logger) -> None:
        uid = pod["metadata"]["uid"]
        annotations = pod["metadata"].get("annotations") or {}
        if REQUEST_EVICT_ONLY not in annotations:
            if uid in self.requests:
                log.info(3, f"{SRC_EVICTIONS}:242", "Pod with eviction in background lost annotation. Removing pod "
                         "from the cache.", "pod", kobj(pod))
            self.delete(uid)
            return
        if is_terminal(pod):
            log.info(3, f"{SRC_EVICTIONS}:249", "Pod with eviction in background completed. Removing pod from the "
                     "cache.", "pod", kobj(pod))
            self.delete(uid)
            return
        if not has:
            if had:
                log.info(3, f"{SRC_EVICTIONS}:266", "Eviction in background canceled (annotation removed). Removing "
                         "pod from the cache.", "annotation", EVICTION_IN_PROGRESS, "pod", kobj(pod))
                self.delete(uid)
            return
        if uid not in self.requests:
            log.info(3, f"{SRC_EVICTIONS}:272", "Eviction in background detected. Updating the cache.", "pod",
                     kobj(pod))
        self.add(pod)


# ------------------------------------------------------------------------------------------ evictor
class PodEvictor:
    """evictions.PodEvictor: limits, the Eviction call, EvictionsInBackground."""

    def __init__(self, cluster, policy: policymod.Policy, options: Options, log: Logger, user: str,
                 cache: EvictionRequestsCache | None):
        self.cluster = cluster
        self.policy = policy
        self.options = options
        self.log = log
        self.user = user
        self.cache = cache
        self.reset()

    def reset(self) -> None:
        self.node_count: dict[str, int] = {}
        self.namespace_count: dict[str, int] = {}
        self.total_count = 0

    def _requests_total(self) -> int:
        return self.cache.total() if self.cache is not None else 0

    def total_requests(self) -> int:
        return self._requests_total()

    def _failure_event(self, pod: dict, why: str) -> None:
        if self.policy.eviction_failure_event_notification and not self.options.dry_run:
            node = (pod.get("spec") or {}).get("nodeName", "")
            events.record(self.cluster, pod, "Warning", "EvictionFailed",
                          f"pod eviction from {node} node by {COMPONENT} failed: {why}", COMPONENT)

    def evict(self, pod: dict, strategy: str, profile: str) -> None:
        """EvictPod: returns on success (or a request in flight), raises EvictionError otherwise."""
        log, policy = self.log, self.policy
        meta = pod["metadata"]
        namespace, node = meta.get("namespace", ""), (pod.get("spec") or {}).get("nodeName", "")
        annotations = meta.get("annotations") or {}
        if self.cache is not None and REQUEST_EVICT_ONLY in annotations and self.cache.has(pod):
            log.info(3, f"{SRC_EVICTIONS}:415", "Eviction in background already requested (ignoring)", "pod", kobj(pod))
            return
        if policy.max_total is not None and self.total_count + self._requests_total() + 1 > policy.max_total:
            err = EvictionTotalLimitError()
            log.error(f"{SRC_EVICTIONS}:429", err.message, "Error evicting pod", "limit", policy.max_total)
            self._failure_event(pod, f"total eviction limit exceeded ({policy.max_total})")
            raise err
        in_flight_node = self.cache.per_node(node) if self.cache is not None else 0
        if node and policy.max_per_node is not None and \
                self.node_count.get(node, 0) + in_flight_node + 1 > policy.max_per_node:
            err = EvictionNodeLimitError(node)
            log.error(f"{SRC_EVICTIONS}:442", err.message, "Error evicting pod", "limit", policy.max_per_node,
                      "node", node)
            self._failure_event(pod, f"node eviction limit exceeded ({policy.max_per_node})")
            raise err
        in_flight_ns = self.cache.per_namespace(namespace) if self.cache is not None else 0
        if policy.max_per_namespace is not None and \
                self.namespace_count.get(namespace, 0) + in_flight_ns + 1 > policy.max_per_namespace:
            err = EvictionNamespaceLimitError(namespace)
            log.error(f"{SRC_EVICTIONS}:455", err.message, "Error evicting pod", "limit", policy.max_per_namespace,
                      "namespace", namespace, "pod", kobj(pod))
            self._failure_event(pod, f"namespace eviction limit exceeded ({policy.max_per_namespace})")
            raise err
        ignore, error = self._evict_pod(pod)
        if error is not None:
            log.error(f"{SRC_EVICTIONS}:466", error, "Error evicting pod", "pod", kobj(pod), "reason", "")
            self._failure_event(pod, error)
            raise EvictionError(error)
        if ignore:
            return
        if node:
            self.node_count[node] = self.node_count.get(node, 0) + 1
        self.namespace_count[namespace] = self.namespace_count.get(namespace, 0) + 1
        self.total_count += 1
        if self.options.dry_run:
            log.info(1, f"{SRC_EVICTIONS}:488", "Evicted pod in dry run mode", "pod", kobj(pod), "reason", "",
                     "strategy", strategy, "node", node, "profile", profile)
            return
        log.info(1, f"{SRC_EVICTIONS}:558", "Evicted pod", "pod", kobj(pod), "reason", "", "strategy", strategy,
                 "node", node, "profile", profile)
        events.record(self.cluster, pod, "Normal", strategy or "NotSet",
                      f"pod eviction from {node} node by {COMPONENT}", COMPONENT)

    def _evict_pod(self, pod: dict) -> tuple[bool, str | None]:
        """(ignore, error message): the Eviction call and how its answer is read."""
        if self.options.dry_run:
            return False, None
        meta = pod["metadata"]
        delete_options: dict = {}
        if self.policy.grace_period_seconds is not None and \
                (pod.get("spec") or {}).get("terminationGracePeriodSeconds") is None:
            delete_options["gracePeriodSeconds"] = self.policy.grace_period_seconds
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace", ""),
                             "annotations": {"requested-by": COMPONENT}},
                "deleteOptions": delete_options}
        handler = self.cluster.subresources.get(("pods", "eviction"))
        if handler is None:
            from ..subresources import evict as handler   # pylint: disable=import-outside-toplevel
        try:
            handler(self.cluster, meta.get("namespace", ""), meta["name"], body, RequestContext(user=self.user))
        except ApiError as err:
            annotations = meta.get("annotations") or {}
            if self.cache is not None and REQUEST_EVICT_ONLY in annotations and err.code == 429 and \
                    BACKGROUND_ERROR_TEXT in err.message:
                if is_terminal(pod):
                    self.log.info(3, f"{SRC_EVICTIONS}:545", "Ignoring eviction of a completed/failed pod", "pod",
                                  kobj(pod))
                    return True, None
                self.log.info(3, f"{SRC_EVICTIONS}:548", "Eviction in background assumed", "pod", kobj(pod))
                self.cache.add(pod, assumed=True)
                return True, None
            if err.code == 429:
                return False, f"error when evicting pod (ignoring) {quote(meta['name'])}: {err.message}"
            if err.code == 404:
                return False, f"pod not found when evicting {quote(meta['name'])}: {err.message}"
            return False, err.message
        return False, None


# ------------------------------------------------------------------------------------------ profiles
class Handle:
    """frameworktypes.Handle for one profile: the evictor, the pod lists and the pod evictor."""

    def __init__(self, cluster, log: Logger, profile: str, pod_evictor: PodEvictor,
                 rng: random.Random | None = None, providers: Providers | None = None):
        self.cluster = cluster
        self.log = log
        self.profile = profile
        self.pod_evictor = pod_evictor
        self.rng = rng   # the order among equals (upstream: map order), seeded per process
        self.evictor: DefaultEvictor | None = None
        self._by_node: dict[str, list[dict]] | None = None
        # WithMetricsCollector / WithPrometheusClient: what the process has (None when the policy enables neither)
        self.metrics_collector = providers.collector if providers is not None else None
        self.prometheus_client = providers.client if providers is not None else None

    def pods_on_node(self, node_name: str) -> list[dict]:
        if self._by_node is None:
            self._by_node = {}
            for entry in self.cluster.store.entries("pods"):
                pod = entry.obj
                node = (pod.get("spec") or {}).get("nodeName")
                if node and not is_terminal(pod):
                    self._by_node.setdefault(node, []).append(pod)
            for pods in self._by_node.values():
                pods.sort(key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))
        return list(self._by_node.get(node_name, []))

    def refresh(self) -> None:
        self._by_node = None

    def evict(self, pod: dict, strategy: str) -> None:
        self.pod_evictor.evict(pod, strategy, self.profile)


@dataclass
class _Runner:
    name: str
    handle: Handle
    deschedule: list = field(default_factory=list)   # (plugin name, instance or None)
    balance: list = field(default_factory=list)


class ProfileError(Exception):
    pass


class Descheduler:
    """One descheduler process: its options, the policy it loaded at start, its pod evictor and cache."""

    def __init__(self, cluster, options: Options, policy: policymod.Policy, log: Logger,
                 user: str = "system:serviceaccount:descheduler:descheduler", seed=None):
        self.cluster = cluster
        self.options = options
        self.policy = policy
        self.log = log
        self.seed = seed if seed is not None else random.randrange(2 ** 32)
        self.rng = random.Random(self.seed)
        self.cache = EvictionRequestsCache(cluster.clock.time_scale) if options.evictions_in_background else None
        self.pod_evictor = PodEvictor(cluster, policy, options, log, user, self.cache)
        if self.cache is not None:   # the pod informer's initial list
            self.cache.sync(self._all_pods(), log)
        self.providers = Providers(cluster, policy, log, user)
        self.providers.start()

    def _all_pods(self) -> list[dict]:
        pods = [entry.obj for entry in self.cluster.store.entries("pods")]
        return sorted(pods, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))

    def run_cycle(self) -> None:
        """runDeschedulerLoop."""
        log = self.log
        with self.cluster.lock:
            self.providers.reconcile()
            log.infof(3, f"{SRC_DESCHEDULER}:427", "Resetting pod evictor counters")
            self.pod_evictor.reset()
            if self.cache is not None:
                self.cache.sync(self._all_pods(), log)
                self.cache.clean(log)
            self._run_profiles()
            if self.options.dry_run:
                log.infof(3, f"{SRC_DESCHEDULER}:433", "Restoring evicted pods from cache")
            log.info(1, f"{SRC_DESCHEDULER}:442", "Number of evictions/requests", "totalEvicted",
                     self.pod_evictor.total_count, "evictionRequests", self.pod_evictor.total_requests())

    def _nodes(self) -> list[dict]:
        matcher = label_matcher(self.policy.node_selector or None)
        nodes = [entry.obj for entry in self.cluster.store.entries("nodes")]
        return sorted((n for n in nodes if matcher(n) and is_ready(n)), key=lambda n: n["metadata"]["name"])

    def _run_profiles(self) -> None:
        log = self.log
        nodes = self._nodes()
        if len(nodes) <= 1:
            log.info(0, f"{SRC_DESCHEDULER}:469", "Skipping descheduling cycle: requires >=2 nodes", "found", len(nodes))
            return
        runners = []
        for profile in self.policy.profiles:
            try:
                runners.append(self._build_profile(profile))
            except ProfileError as err:
                log.error(f"{SRC_DESCHEDULER}:491", str(err), "unable to create a profile", "profile", profile.name)
        for point in ("Deschedule", "Balance"):
            for runner in runners:
                plugins = runner.deschedule if point == "Deschedule" else runner.balance
                errors = []
                for name, plugin in plugins:
                    evicted, requests = self.pod_evictor.total_count, self.pod_evictor.total_requests()
                    runner.handle.refresh()
                    problem = plugin.balance(nodes) if plugin is not None else None
                    if problem:
                        errors.append(f"plugin {quote(name)} finished with error: {problem}")
                    log.info(1, f"{SRC_PROFILE}:{347 if point == 'Deschedule' else 376}",
                             "Total number of evictions/requests", "extension point", point,
                             "evictedPods", self.pod_evictor.total_count - evicted,
                             "evictionRequests", self.pod_evictor.total_requests() - requests)
                if errors:   # RunBalancePlugins' aggregated Status, logged by runProfiles
                    log.error(f"{SRC_DESCHEDULER}:{520 if point == 'Deschedule' else 530}", policymod.aggregate(errors),
                              f"running {point.lower()} extension point failed with error", "profile", runner.name)

    def _build_profile(self, profile: policymod.Profile) -> _Runner:
        """NewProfile: extension points must name registered plugins, each plugin needs its config."""
        log = self.log
        registered = {"deschedule": policymod.DESCHEDULE_PLUGINS, "balance": policymod.BALANCE_PLUGINS,
                      "filter": policymod.EVICTOR_PLUGINS, "preEvictionFilter": policymod.EVICTOR_PLUGINS}
        for point, allowed in registered.items():
            missing = [name for name in dict.fromkeys(profile.enabled(point.lower())) if name not in allowed]
            if missing:
                raise ProfileError(f"profile {quote(profile.name)} configures {point} extension point of non-existing "
                                   f"plugins: [{' '.join(sorted(missing))}]")
        handle = Handle(self.cluster, log, profile.name, self.pod_evictor, self.rng, self.providers)
        runner = _Runner(profile.name, handle)
        names = list(dict.fromkeys(profile.enabled("deschedule") + profile.enabled("balance") +
                                   profile.enabled("filter") + profile.enabled("preevictionfilter")))
        built = {}
        for name in names:
            config = profile.config(name)
            if config is None:
                log.error(f"{SRC_PROFILE}:148", "unable to get plugin config", "skipping plugin", "plugin", name,
                          "profile", profile.name)
                raise ProfileError(f"unable to build {name} plugin: unable to find {quote(name)} plugin config")
            try:
                if name == policymod.DEFAULT_EVICTOR:
                    built[name] = DefaultEvictor(self.cluster, config.args, log)
                elif name == policymod.LOW_NODE_UTILIZATION:
                    built[name] = LowNodeUtilization(config.args, handle)
                else:
                    built[name] = None   # registered, not simulated: evicts nothing
            except (EvictorError, PluginError) as err:
                log.error(f"{SRC_PROFILE}:160", str(err), "unable to initialize a plugin", "pluginName", name)
                raise ProfileError(f"unable to build {name} plugin: unable to initialize {quote(name)} plugin: "
                                   f"{err}") from None
        handle.evictor = built.get(policymod.DEFAULT_EVICTOR)
        runner.deschedule = [(name, None) for name in profile.enabled("deschedule")]
        runner.balance = [(name, built.get(name)) for name in profile.enabled("balance")]
        return runner


# ---------------------------------------------------------------------------------------- process
SRC_SERVER = "server.go"
SRC_RUN = "run.go"


def fail(log: Logger, message: str) -> int:
    """How the binary ends on an error after logging started: two error lines, exit code 1."""
    log.error(f"{SRC_SERVER}:100", message, "failed to run descheduler server")
    log.error(f"{SRC_RUN}:72", message, "command failed")
    return 1


def start(cluster, options: Options, policy_text: str | None, log: Logger, user: str,
          read_error: str | None = None, seed=None) -> Descheduler | int:
    """Process start-up: load and validate the policy, build the descheduler. An int is the exit code."""
    if read_error is not None:
        return fail(log, read_error)
    if options.policy_file is None or policy_text is None:
        log.info(1, "policyconfig.go:40", "Policy config file not specified")
        return fail(log, "deschedulerPolicy is nil")
    try:
        policy = policymod.load(policy_text, options.policy_file)
    except policymod.PolicyError as err:
        return fail(log, err.message)
    try:
        label_matcher(policy.node_selector or None)
    except ApiError as err:
        return fail(log, err.message)
    return Descheduler(cluster, options, policy, log, user, seed=seed)


def run_once(cluster, argv: list[str], policy_text: str | None, user: str = "system:serviceaccount:descheduler:descheduler",
             log: Logger | None = None, seed=None) -> tuple[int, list[str]]:
    """A process with no interval: start, one cycle, exit. Returns (exit code, log lines). `seed` fixes the
    order among equals (random when None)."""
    try:
        options = parse_args(argv)
    except ArgsError as err:
        return 1, [f"Error: {err.message}"]
    log = log or Logger(options.verbosity)
    log.verbosity = options.verbosity
    process = start(cluster, options, policy_text, log, user, seed=seed)
    if isinstance(process, int):
        return process, log.take()
    process.run_cycle()
    return 0, log.take()
