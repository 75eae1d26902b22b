"""LowNodeUtilization on actual usage (descheduler v0.36 usageclients.go, metricscollector.go, descheduler.go): the
metrics server source with the collector's smoothing, the Prometheus source, deviation thresholds on both, the
validation rules of metricsUtilization and metricsProviders, and the log lines of these paths. Several cases are
upstream's own (lownodeutilization_test.go: TestLowNodeUtilization, TestLowNodeUtilizationWithPrometheusMetrics)."""
import re
import textwrap

import pytest

from descheduler_cluster import add, make_cluster, messages, node, pod, policy
from kubesim.components import COMPONENTS
from kubesim.controllers import ControllerManager
from kubesim.descheduler import policy as pol
from kubesim.descheduler.klog import Logger
from kubesim.descheduler.run import parse_args, run_once, start
from kubesim.metrics.prometheus import PROFILE_QUERY
from metrics_cluster import metrics_cluster, vm_on
from support.waiting import wait_for

ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]
PLUGIN = 'plugin="LowNodeUtilization" ExtensionPoint="Balance" '
PROMETHEUS_URL = "https://prometheus-k8s.monitoring.svc:9091"
TOKEN = "s3cret"


def lnu(thresholds: str, targets: str, metrics: str = "", evictor: str = "{nodeFit: true}", top: str = "",
        extra: str = "") -> str:
    """A one-profile policy; `metrics` is the plugin's metricsUtilization, `top` top-level YAML (own indentation)."""
    body = textwrap.dedent(top) + textwrap.dedent(f"""\
        profiles:
        - name: test
          pluginConfig:
          - name: DefaultEvictor
            args: {evictor}
          - name: LowNodeUtilization
            args:
              thresholds: {thresholds}
              targetThresholds: {targets}
        """)
    if metrics:
        body += f"      metricsUtilization: {metrics}\n"
    for line in extra.splitlines():
        body += f"      {line}\n"
    body += "  plugins:\n    balance:\n      enabled: [LowNodeUtilization]\n"
    return policy(body)


KM_PROVIDER = "metricsProviders:\n- source: KubernetesMetrics\n"
PROM_PROVIDER = (f"metricsProviders:\n- source: Prometheus\n  prometheus:\n    url: {PROMETHEUS_URL}\n"
                 "    authToken:\n      secretReference: {namespace: descheduler, name: prometheus-auth}\n")


def evicted(lines) -> list[str]:
    return re.findall(r'"Evicted pod" pod="([^"]+)"', "\n".join(lines))


def upstream_pods(cluster, n3_unschedulable: bool) -> None:
    """The nodes and Pods of upstream's cases: n1 with five evictable 400m Pods and three protected ones."""
    node(cluster, "n1", cpu="4", memory="3000", pods="9")
    node(cluster, "n2", cpu="4", memory="3000", pods="10")
    node(cluster, "n3", cpu="4", memory="3000", pods="10", unschedulable=n3_unschedulable)
    for index in range(1, 6):
        pod(cluster, f"p{index}", "n1", cpu="400m", memory="0")
    pod(cluster, "p6", "n1", cpu="400m", memory="0", owner="DaemonSet")
    pod(cluster, "p7", "n1", cpu="400m", memory="0", annotations={"kubernetes.io/config.mirror": "mirror"},
        volumes=[{"name": "sample", "hostPath": {"path": "somePath"}}])
    pod(cluster, "p8", "n1", cpu="400m", memory="0", namespace="kube-system", priority=2000000000)
    pod(cluster, "p9", "n2", cpu="400m", memory="0")


# -------------------------------------------------------------------------------------- metrics server
def test_upstreams_case_without_priorities_on_the_metrics_server():
    cluster = metrics_cluster({"pods": "requests", "podUsage": {f"apps/p{i}": {"cpu": "401m"} for i in range(1, 6)}})
    upstream_pods(cluster, n3_unschedulable=True)
    text = lnu("{cpu: 30, pods: 30}", "{cpu: 50, pods: 50}", "{source: KubernetesMetrics}", top=KM_PROVIDER)
    code, lines = run_once(cluster, ARGS, text)
    out = messages(lines)
    assert code == 0
    assert out[:2] == ["Starting metrics collector", "Waiting for metrics collector to sync"]
    assert ('"Node has been classified" ' + PLUGIN + 'category="overutilized" node="n1" '
            'usage={"cpu":"3205m","memory":"0","pods":"8"} usagePercentage={"cpu":80,"memory":0,"pods":89}') in out
    gone = evicted(lines)
    assert len(gone) == 4 and set(gone) <= {f"apps/p{i}" for i in range(1, 6)}   # upstream: 4 evicted
    assert '"Updated node usage" node="n1" CPU=1601 Mem=0 Pods=4' in out


def test_actual_usage_moves_what_requests_would_not():
    metrics = {"nodeOverhead": {"cpu": "500m", "memory": "1Gi"},
               "vms": {"apps/hot": {"cpu": "5", "memory": "2Gi"}, "apps/cool": {"cpu": "200m", "memory": "1Gi"}}}
    cluster = metrics_cluster(metrics)
    node(cluster, "a")
    node(cluster, "b")
    vm_on(cluster, "hot", "a", cpu="1", memory="2Gi")
    vm_on(cluster, "cool", "b", cpu="1", memory="2Gi")
    by_requests = lnu("{cpu: 20}", "{cpu: 40}")
    assert evicted(run_once(cluster, ARGS, by_requests)[1]) == []        # both nodes at 10% by requests
    _code, lines = run_once(cluster, ARGS, lnu("{cpu: 20}", "{cpu: 40}", "{source: KubernetesMetrics}",
                                               top=KM_PROVIDER))
    out = messages(lines)
    assert ('"Node has been classified" ' + PLUGIN + 'category="overutilized" node="a" '
            'usage={"cpu":"5500m","memory":"3Gi","pods":"1"} usagePercentage={"cpu":55,"memory":30,"pods":1}') in out
    assert evicted(lines) == ["apps/virt-launcher-hot-a"]


def test_the_deprecated_metrics_server_flag_and_the_metrics_collector_enable_the_client():
    cluster = metrics_cluster({"vms": {"apps/hot": {"cpu": "6"}}})
    node(cluster, "a")
    node(cluster, "b")
    vm_on(cluster, "hot", "a")
    text = lnu("{cpu: 20}", "{cpu: 40}", "{metricsServer: true}", top="metricsCollector:\n  enabled: true\n")
    assert evicted(run_once(cluster, ARGS, text)[1]) == ["apps/virt-launcher-hot-a"]


def test_without_a_metrics_client_the_profile_cannot_be_built():
    cluster = metrics_cluster({})
    node(cluster, "a")
    node(cluster, "b")
    _code, lines = run_once(cluster, ARGS, lnu("{cpu: 20}", "{cpu: 40}", "{source: KubernetesMetrics}"))
    error = [line for line in lines if "unable to create a profile" in line]
    assert error and error[0].startswith("E") and error[0].split("] ", 1)[1] == (
        '"unable to create a profile" err="unable to build LowNodeUtilization plugin: unable to initialize '
        '\\"LowNodeUtilization\\" plugin: metrics client not initialized" profile="test"')


def test_the_collector_smooths_node_usage_between_collections():
    cluster = metrics_cluster({"vms": {"apps/hot": {"cpu": "6"}}})
    node(cluster, "a")
    node(cluster, "b")
    vm_on(cluster, "hot", "a")
    text = lnu("{cpu: 20}", "{cpu: 90}", "{source: KubernetesMetrics}", top=KM_PROVIDER)
    log = Logger(3)
    process = start(cluster, parse_args(ARGS), text, log, "system:serviceaccount:descheduler:descheduler")
    collector = process.providers.collector
    assert collector.all_nodes_usage() == {"a": {"cpu": 6000, "memory": 0}, "b": {"cpu": 0, "memory": 0}}
    cluster.metrics.set_vm_load("apps/hot", {"cpu": "1"})
    collector.collect()
    assert collector.all_nodes_usage()["a"] == {"cpu": 5500, "memory": 0}      # round(0.9 * 6000 + 0.1 * 1000)
    collector.collect()
    assert collector.all_nodes_usage()["a"]["cpu"] == 5050
    log.take()
    process.run_cycle()
    assert ('"Node is appropriately utilized" ' + PLUGIN + 'node="a" usage={"cpu":"5050m","memory":"0","pods":"1"} '
            'usagePercentage={"cpu":51,"memory":0,"pods":1}') in messages(log.take())


def test_a_pod_without_pod_metrics_is_skipped_and_the_next_one_goes():
    cluster = metrics_cluster({"vms": {"apps/hot": {"cpu": "5"}}})
    node(cluster, "a")
    node(cluster, "b")
    vm_on(cluster, "hot", "a", priority=100)
    pod(cluster, "starting", "a", phase="Pending")                # no priority: first in line, but no metrics
    _code, lines = run_once(cluster, ARGS, lnu("{cpu: 20}", "{cpu: 40}", "{source: KubernetesMetrics}",
                                               top=KM_PROVIDER))
    failed = [line.split("] ", 1)[1] for line in lines if "unable to get pod usage" in line]
    assert failed == ['"unable to get pod usage" err="unable to get podmetrics for \\"apps\\"/\\"starting\\": '
                      'podmetrics.metrics.k8s.io \\"apps/starting\\" not found" pod="apps/starting"']
    assert evicted(lines) == ["apps/virt-launcher-hot-a"]


def test_without_the_metrics_api_the_collector_logs_and_the_balance_fails():
    cluster = make_cluster()
    node(cluster, "a")
    node(cluster, "b")
    _code, lines = run_once(cluster, ARGS, lnu("{cpu: 20}", "{cpu: 40}", "{source: KubernetesMetrics}",
                                               top=KM_PROVIDER))
    out = messages(lines)
    assert '"Error fetching metrics" err="the server could not find the requested resource (get ' \
           'nodes.metrics.k8s.io a)" node="a"' in out
    failure = [line for line in lines if "running balance extension point failed" in line]
    assert failure[0].startswith("E") and failure[0].split("] ", 1)[1] == (
        '"running balance extension point failed with error" err="plugin \\"LowNodeUtilization\\" finished with '
        'error: error getting node usage: unable to find node \\"a\\" in the collected metrics" profile="test"')
    assert out[-1] == '"Number of evictions/requests" totalEvicted=0 evictionRequests=0'


def test_deviation_thresholds_on_actual_usage():
    # cpu 80%, 50%, 20%: mean 50, thresholds 10 / 10 -> underutilized <= 40, overutilized > 60
    cluster = metrics_cluster({"vms": {"apps/x": {"cpu": "8"}, "apps/y": {"cpu": "5"}, "apps/z": {"cpu": "2"}}})
    for name in ("n1", "n2", "n3"):
        node(cluster, name)
    for vm, where in (("x", "n1"), ("y", "n2"), ("z", "n3")):
        vm_on(cluster, vm, where)
    text = lnu("{cpu: 10}", "{cpu: 10}", "{source: KubernetesMetrics}", top=KM_PROVIDER, evictor="{}",
               extra="useDeviationThresholds: true")
    _code, lines = run_once(cluster, ARGS, text)
    out = messages(lines)
    assert ('"Node has been classified" ' + PLUGIN + 'category="overutilized" node="n1" '
            'usage={"cpu":"8","memory":"0","pods":"1"} usagePercentage={"cpu":80}') in out
    assert any(line.startswith('"Node has been classified" ' + PLUGIN + 'category="underutilized" node="n3"')
               for line in out)
    assert any(line.startswith('"Node is appropriately utilized" ' + PLUGIN + 'node="n2"') for line in out)
    # headroom on n3 up to 60%: 4 cpu; x (8 cpu) is evicted anyway and takes the headroom below zero
    assert evicted(lines) == ["apps/virt-launcher-x-n1"]


# ------------------------------------------------------------------------------------------- Prometheus
def prometheus_cluster(samples: dict | None = None, token: str = TOKEN, secret: bool = True, vms: dict | None = None):
    config = {"namespace": "monitoring", "service": "prometheus-k8s", "port": 9091, "token": token}
    if secret:
        config["tokenSecret"] = {"namespace": "descheduler", "name": "prometheus-auth"}
    if samples is not None:
        config["series"] = {"instance:node_cpu:rate:sum": [{"metric": {"instance": n}, "value": v}
                                                           for n, v in samples.items()]}
    return metrics_cluster({"pods": "requests", "prometheus": config, "vms": vms or {}})


def prom_policy(thresholds: str = "{MetricResource: 30}", targets: str = "{MetricResource: 50}",
                query: str = "instance:node_cpu:rate:sum", extra: str = "", provider: str = PROM_PROVIDER) -> str:
    return lnu(thresholds, targets, f"{{source: Prometheus, prometheus: {{query: '{query}'}}}}", top=provider,
               extra=extra)


UPSTREAM_SAMPLES = {"n1": 0.5695757575757561, "n2": 0.4245454545454522, "n3": 0.20381818181818104}


@pytest.mark.parametrize("samples, thresholds, targets, extra, expected", [
    (UPSTREAM_SAMPLES, "{MetricResource: 30}", "{MetricResource: 50}", "", 1),
    (UPSTREAM_SAMPLES, "{MetricResource: 30}", "{MetricResource: 50}", "evictionLimits: {node: 3}", 3),
    (UPSTREAM_SAMPLES, "{MetricResource: 5}", "{MetricResource: 5}",
     "evictionLimits: {node: 2}\nuseDeviationThresholds: true", 2),
    ({"n1": 1, "n2": 0.5, "n3": 0}, "{MetricResource: 10}", "{MetricResource: 10}", "useDeviationThresholds: true", 1),
], ids=["static", "more-evictions", "deviation", "deviation-thresholds"])
def test_upstreams_prometheus_cases(samples, thresholds, targets, extra, expected):
    cluster = prometheus_cluster(samples)
    upstream_pods(cluster, n3_unschedulable=False)
    code, lines = run_once(cluster, ARGS, prom_policy(thresholds, targets, extra=extra))
    assert code == 0
    gone = evicted(lines)
    assert len(gone) == expected and set(gone) <= {f"apps/p{i}" for i in range(1, 6)}
    out = messages(lines)
    assert '"Node has been classified" ' + PLUGIN + 'category="overutilized" node="n1" ' \
           'usage={"MetricResource":"%d"} usagePercentage={"MetricResource":%d}' % (
               int(samples["n1"] * 100), int(samples["n1"] * 100)) in out
    if not extra.startswith("evictionLimits"):
        assert '"Currently, only a single pod eviction is allowed"' in out


def test_the_profile_query_of_the_simulated_prometheus_moves_the_hot_vm():
    # cpu 0.7 / 0.1, memory 0 / 0.1: the stand-in gives a 0.8, b 0.175; deviation 0 / 10 around 48.5
    cluster = prometheus_cluster(vms={"apps/hot": {"cpu": "7"}})
    node(cluster, "a")
    node(cluster, "b")
    vm_on(cluster, "hot", "a")
    pod(cluster, "quiet", "b")
    text = prom_policy("{MetricResource: 0}", "{MetricResource: 10}", query=PROFILE_QUERY,
                       extra="useDeviationThresholds: true")
    _code, lines = run_once(cluster, ARGS, text)
    out = messages(lines)
    assert out[:2] == ["Starting authentication secret reconciler",
                       "authentication secret token updated, recreating prometheus client"]
    assert evicted(lines) == ["apps/virt-launcher-hot-a"]


def balance_error(lines) -> str:
    found = [line.split("] ", 1)[1] for line in lines if "running balance extension point failed" in line]
    assert len(found) == 1, lines
    return re.match(r'^"running balance extension point failed with error" err="plugin \\"LowNodeUtilization\\" '
                    r'finished with error: error getting node usage: (.*)" profile="test"$', found[0]).group(1)


@pytest.mark.parametrize("samples, error", [
    ({"n1": 0.5, "n2": 1.5}, 'The collected metrics sample for \\"n2\\" has value 1.5 outside of <0; 1> interval'),
    ({"n1": 0.5}, "unable to find metric entry for n2"),
])
def test_prometheus_samples_that_upstream_refuses(samples, error):
    cluster = prometheus_cluster(samples)
    node(cluster, "n1")
    node(cluster, "n2")
    assert balance_error(run_once(cluster, ARGS, prom_policy())[1]) == error


def test_a_sample_without_instance_and_an_unreachable_prometheus():
    cluster = prometheus_cluster()
    cluster.metrics.config.prometheus["series"]["no_instance"] = [{"metric": {"node": "n1"}, "value": 0.1}]
    node(cluster, "n1")
    node(cluster, "n2")
    lines = run_once(cluster, ARGS, prom_policy(query="no_instance"))[1]
    assert balance_error(lines) == "The collected metrics sample is missing 'instance' key"
    elsewhere = PROM_PROVIDER.replace(PROMETHEUS_URL, "https://thanos.example.com")
    lines = run_once(cluster, ARGS, prom_policy(provider=elsewhere))[1]
    assert balance_error(lines) == ('unable to capture prometheus metrics: Post \\"https://thanos.example.com/api/v1/'
                                    'query\\": dial tcp: lookup thanos.example.com on 10.96.0.10:53: no such host')


def test_a_missing_token_secret_leaves_no_client_and_the_service_account_token_is_refused():
    cluster = prometheus_cluster(secret=False)
    node(cluster, "n1")
    node(cluster, "n2")
    lines = run_once(cluster, ARGS, prom_policy())[1]
    out = messages(lines)
    assert '"Unhandled Error" err="key failed with : unable to get descheduler/prometheus-auth secret" ' \
           'logger="UnhandledError"' in out
    assert any(line.endswith('plugin: prometheus client not initialized" profile="test"') for line in out)
    without_token = "metricsProviders:\n- source: Prometheus\n  prometheus:\n    url: " + PROMETHEUS_URL + "\n"
    lines = run_once(cluster, ARGS, prom_policy(provider=without_token))[1]
    assert "Creating Prometheus client (with SA token)" in messages(lines)
    assert balance_error(lines) == "unable to capture prometheus metrics: client_error: client error: 401"


def test_a_rotated_token_recreates_the_client_at_the_next_cycle():
    cluster = prometheus_cluster({"n1": 0.1, "n2": 0.1})
    node(cluster, "n1")
    node(cluster, "n2")
    log = Logger(3)
    process = start(cluster, parse_args(ARGS), prom_policy(), log, "system:serviceaccount:descheduler:descheduler")
    first = process.providers.client
    secrets = cluster.registry.by_key("secrets")
    cluster.patch(secrets, "descheduler", "prometheus-auth", "merge", {"stringData": {"prometheusAuthToken": "new"}})
    log.take()
    process.run_cycle()
    out = messages(log.take())
    assert out[0] == "authentication secret token updated, recreating prometheus client"
    assert process.providers.client is not first and process.providers.client.token == "new"
    assert balance_error(["x] " + line for line in out]) == \
        "unable to capture prometheus metrics: client_error: client error: 401"   # the Prometheus wants the old


def test_prometheus_thresholds_must_name_only_metric_resource():
    cluster = prometheus_cluster({"n1": 0.1, "n2": 0.1})
    node(cluster, "n1")
    node(cluster, "n2")
    lines = run_once(cluster, ARGS, prom_policy("{cpu: 30}", "{cpu: 50}"))[1]
    assert any(line.endswith('plugin: thresholds are expected to specify a single instance of \\"MetricResource\\" '
                             'resource, got [cpu] instead" profile="test"') for line in messages(lines))


# ------------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize("text, message", [
    (lnu("{cpu: 20}", "{cpu: 40}", "{metricsServer: true, source: KubernetesMetrics}"),
     'in profile test: it is not allowed to set both "KubernetesMetrics" source and metricsServer'),
    (lnu("{MetricResource: 20}", "{MetricResource: 40}", "{source: Prometheus}"),
     'in profile test: prometheus query is required when metrics source is set to "Prometheus"'),
    (lnu("{cpu: 20}", "{cpu: 40}", "{source: KubernetesMetrics, prometheus: {query: up}}"),
     'in profile test: prometheus configuration is not allowed to set when source is set to "KubernetesMetrics"'),
    (lnu("{cpu: 20}", "{cpu: 40}", top=KM_PROVIDER + "- source: KubernetesMetrics\n"),
     'metric provider "KubernetesMetrics" is already configured, each source can be configured only once'),
    (lnu("{cpu: 20}", "{cpu: 40}", top=KM_PROVIDER + "metricsCollector:\n  enabled: true\n"),
     "it is not allowed to combine metrics provider when metrics collector is enabled"),
    (lnu("{cpu: 20}", "{cpu: 40}", top="metricsProviders:\n- source: Prometheus\n  prometheus: {}\n"),
     "prometheus URL is required when prometheus is enabled"),
    (lnu("{cpu: 20}", "{cpu: 40}", top="metricsProviders:\n- source: Prometheus\n  prometheus:\n"
                                       "    url: http://example.com:-80\n"),
     'error parsing prometheus URL: parse "http://example.com:-80": invalid port ":-80" after host'),
    (lnu("{cpu: 20}", "{cpu: 40}", top="metricsProviders:\n- source: Prometheus\n  prometheus:\n"
                                       "    url: https://example.com:80\n    authToken: {}\n"),
     "prometheus authToken secret is expected to be set when authToken field is"),
    (lnu("{cpu: 20}", "{cpu: 40}", top="metricsProviders:\n- source: Prometheus\n  prometheus:\n"
                                       "    url: https://example.com:80\n    authToken:\n"
                                       "      secretReference: {name: secretname}\n"),
     "prometheus authToken secret reference does not set both namespace and name"),
])
def test_validation_of_metrics_utilization_and_metrics_providers(text, message):
    with pytest.raises(pol.PolicyError) as err:
        pol.load(text)
    assert err.value.message == message


def test_a_valid_prometheus_provider_loads():
    loaded = pol.load(prom_policy())
    assert loaded.metrics_providers == [{"source": "Prometheus", "prometheus": {
        "url": PROMETHEUS_URL, "authToken": {"secretReference": {"namespace": "descheduler", "name": "prometheus-auth"}}}}]


# ------------------------------------------------------------------------------------- noEvictionPolicy
@pytest.mark.parametrize("no_eviction_policy, expected", [("Mandatory", ["apps/plain"]), ("Preferred", ["apps/marked"])])
def test_prefer_no_eviction_is_honoured_only_when_mandatory(no_eviction_policy, expected):
    """defaultevictor.go: Mandatory makes an annotated Pod non-removable; Preferred leaves the annotation to plugins
    that sort by it (LowNodeUtilization does not), so the lower-priority annotated Pod goes first."""
    cluster = make_cluster()
    node(cluster, "a")
    node(cluster, "b")
    pod(cluster, "marked", "a", cpu="3", annotations={"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""},
        priority=1)
    pod(cluster, "plain", "a", cpu="3", priority=2)
    text = lnu("{cpu: 10}", "{cpu: 20}", evictor=f"{{noEvictionPolicy: {no_eviction_policy}}}")
    assert evicted(run_once(cluster, ARGS, text)[1]) == expected


# -------------------------------------------------------------------------------------------- program
def test_a_long_running_process_collects_every_five_simulated_seconds():
    cluster = metrics_cluster({"vms": {"apps/hot": {"cpu": "6"}}}, time_scale=1000)
    manager = ControllerManager(cluster)
    for register in COMPONENTS:
        register(cluster, manager)
    manager.start()
    try:
        add(cluster, "serviceaccounts", "descheduler", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                        "metadata": {"name": "descheduler"}})
        node(cluster, "a")
        node(cluster, "b")
        vm_on(cluster, "hot", "a")
        add(cluster, "configmaps", "descheduler", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "descheduler"},
            "data": {"policy.yaml": lnu("{cpu: 1}", "{cpu: 99}", "{source: KubernetesMetrics}", top=KM_PROVIDER)}})
        cluster.create(cluster.registry.by_key("pods"), "descheduler", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "descheduler-0"},
            "spec": {"nodeName": "b", "restartPolicy": "Always", "serviceAccountName": "descheduler",
                     "containers": [{"name": "descheduler", "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
                                     "args": ARGS + ["--descheduling-interval=1h"],
                                     "volumeMounts": [{"name": "policy", "mountPath": "/policy-dir"}]}],
                     "volumes": [{"name": "policy", "configMap": {"name": "descheduler"}}]}})
        program = next(p for p in cluster.programs if hasattr(p, "processes"))

        def cpu_of_a() -> int | None:
            process = next(iter(program.processes.values()), None)
            return process.providers.collector.all_nodes_usage().get("a", {}).get("cpu") if process else None
        wait_for(lambda: cpu_of_a() == 6000, interval=0.005, what="the first collection")
        cluster.metrics.set_vm_load("apps/hot", {"cpu": "1"})
        wait_for(lambda: (cpu_of_a() or 6000) < 1100, interval=0.005, what="the smoothed value near the new load")
        assert cpu_of_a() >= 1000      # smoothing approaches the new value from above
    finally:
        manager.stop()
