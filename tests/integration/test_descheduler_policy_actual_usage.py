"""descheduler_policy and the descheduler_rebalance role balancing by actual usage, on the simulator: where requests are
balanced and actual load is not (`actual-load-hot-worker`), a request-based policy moves nothing while one by the metrics
server or by a Prometheus query (its token read from the Secret the policy names, the query sent to a URL reachable from
here) plans the hot VM; a forecast that swaps nodes (`flapping-close-thresholds`, and the hot VM with a narrow band) refuses
the policy before anything is written, in check mode too, unless forced; the role stops with a short message naming the
variable that forces it. Check mode throughout where the cluster must stay as it is for the next test."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.policy import PAGE_OPTIONS
from support.simulator import with_descheduler_suspended
from support.waiting import wait_for

from .ansible_run import run_tasks
from .module_call import call_module

pytestmark = pytest.mark.simulator

POLICY = "descheduler_policy"
QUERY = "instance:node_cpu_utilisation:rate1m"
TOKEN = "kubesim-prometheus-token"  # actual-load-hot-worker's Prometheus token, in Secret descheduler/prometheus-auth
PROMETHEUS = {"metrics_source": "Prometheus", "prometheus_query": QUERY, "prometheus_url": "https://prometheus-k8s.monitoring.svc:9091",
              "prometheus_auth_secret": {"namespace": "descheduler", "name": "prometheus-auth"},
              "thresholds": {"MetricResource": 35}, "target_thresholds": {"MetricResource": 70}}
# cpu, memory and pods with a band narrower than the hot VM's 28 cpu points on a worker: its move makes worker-b overutilized
# (settled usage: worker-a cpu 75%, memory 63%; worker-b cpu 31%, memory 60%)
NARROW = {"thresholds": {"cpu": 35, "memory": 62, "pods": 20}, "target_thresholds": {"cpu": 50, "memory": 68, "pods": 30}}


def millicores(quantity: str) -> float:
    return float(quantity[:-1]) if quantity.endswith("m") else float(quantity) * 1000


def settled(sim) -> bool:
    """Whether the VMs' load reached NodeMetrics: right after the start the launchers are not counted yet and both
    workers show the same usage; then worker-a is the hot one (more than twice worker-b's cpu)."""
    usage = {n["metadata"]["name"]: millicores(n["usage"]["cpu"])
             for n in sim.request_json("GET", "/apis/metrics.k8s.io/v1beta1/nodes")["items"]}
    return usage.get("worker-a", 0) > 2 * usage.get("worker-b", float("inf"))


@pytest.fixture(scope="module")
def hot(kubesim_factory):
    sim = kubesim_factory("actual-load-hot-worker")
    wait_for(lambda: settled(sim), timeout=60, what="the VMs' load in NodeMetrics")
    return sim


@pytest.fixture(scope="module")
def flapping(kubesim_factory, tmp_path_factory):
    # no scheduled run: with a migration in flight the forecast finds nothing removable, so nothing to refuse
    sim = kubesim_factory(with_descheduler_suspended(tmp_path_factory.mktemp("flapping"), "flapping-close-thresholds"))
    wait_for(lambda: (sim.kubectl_json("get", "vmi", "vm-flap", "-n", "desched-test").get("status") or {}).get("phase") == "Running",
             timeout=30, what="vm-flap to run")
    sim.settle()
    return sim


def args(sim, tmp_path: Path, **options) -> dict:
    return {"kubeconfig": sim.kubeconfig, "backup_dir": str(tmp_path / "backups"), "cluster_name": "workload", **PAGE_OPTIONS, **options}


def policy_configmap(sim) -> dict:
    return sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")


def categories(result: dict) -> dict:
    return {node["name"]: node["category"] for node in result["plan"]["nodes"]}


def test_requests_move_nothing_where_the_metrics_server_moves_the_hot_vm(hot, tmp_path):
    cpu = {"thresholds": {"cpu": 35}, "target_thresholds": {"cpu": 70}}
    by_requests = call_module(POLICY, args(hot, tmp_path, **cpu), check_mode=True)
    assert not by_requests["failed"] and by_requests["plan"]["evictions"] == []
    assert by_requests["plan"]["usage_source"] == "requests" and by_requests["plan"]["stop_reason"].startswith("No node is underutilized")
    by_load = call_module(POLICY, args(hot, tmp_path, metrics_source="KubernetesMetrics", **cpu), check_mode=True)
    assert not by_load["failed"], by_load["msg"]
    assert by_load["plan"]["usage_source"] == "KubernetesMetrics" and categories(by_load) == {"worker-a": "overutilized", "worker-b": "underutilized"}
    assert [e["vm"] for e in by_load["plan"]["evictions"]] == ["vm-hot"]
    assert by_load["forecast"]["converged"] and by_load["forecast"]["migrations"] == 1 and by_load["forecast"]["refusal"] is None
    assert by_load["policy"]["metricsProviders"] == [{"source": "KubernetesMetrics"}] and by_load["dry_run"]


def test_prometheus_usage_with_the_token_from_the_secret_at_a_url_reachable_from_here(hot, tmp_path):
    before = policy_configmap(hot)
    route = hot.url + "/_kubesim/prometheus"  # stands in for a Route to the token-protected Prometheus
    result = call_module(POLICY, args(hot, tmp_path, prometheus_url_override=route, **PROMETHEUS), check_mode=True)
    assert not result["failed"], result["msg"]
    assert result["plan"]["usage_source"] == "Prometheus" and [e["vm"] for e in result["plan"]["evictions"]] == ["vm-hot"]
    assert {n["name"]: n["usage_percent"]["MetricResource"] for n in result["plan"]["nodes"]} == {"worker-a": 75, "worker-b": 31}
    assert result["policy"]["metricsProviders"][0]["prometheus"] == {
        "url": "https://prometheus-k8s.monitoring.svc:9091", "authToken": {"secretReference": {"namespace": "descheduler", "name": "prometheus-auth"}}}
    assert route not in result["policy_yaml"] and TOKEN not in json.dumps(result)
    # through the API server's service proxy the token never reaches Prometheus: refused, nothing written
    proxied = call_module(POLICY, args(hot, tmp_path, **PROMETHEUS))
    assert proxied["failed"] and "401" in proxied["msg"] and "service proxy" in proxied["msg"] and TOKEN not in json.dumps(proxied)
    assert policy_configmap(hot) == before and not (tmp_path / "backups").exists()


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_flapping_forecast_refuses_the_policy_before_anything_is_written(flapping, tmp_path, check_mode):
    before = policy_configmap(flapping)
    given = args(flapping, tmp_path, thresholds={"memory": 49}, target_thresholds={"memory": 52}, min_threshold_gap=1)
    refused = call_module(POLICY, given, check_mode=check_mode)
    assert refused["failed"] and refused["error"]["type"] == "ForecastRefused" and refused["error"]["path"] == "forecast"
    assert refused["msg"].startswith("forecast: the forecast swaps worker-a from overutilized to underutilized")
    assert refused["msg"].endswith("set force: true to apply anyway")
    forecast = refused["error"]["result"]["forecast"]
    assert forecast["swaps"] and forecast["refusal"] in refused["msg"]
    assert policy_configmap(flapping) == before and not (tmp_path / "backups").exists()


def test_force_applies_what_the_forecast_refuses_and_says_so(flapping, tmp_path):
    given = args(flapping, tmp_path, thresholds={"memory": 49}, target_thresholds={"memory": 52}, min_threshold_gap=1, force=True)
    forced = call_module(POLICY, given, check_mode=True)
    assert not forced["failed"] and forced["changed"] and forced["dry_run"]
    assert "forecast_refusal_forced" in {f["code"] for f in forced["findings"]}


ROLE = [{"name": "Rebalance", "ansible.builtin.include_role": {"name": "kubevirt_ops.rebalance.descheduler_rebalance"}}]


def test_the_role_stops_on_a_refusing_forecast_naming_the_variable_that_forces_it(hot, tmp_path):
    before = policy_configmap(hot)
    role_vars = {"descheduler_rebalance_preflight": False, "descheduler_rebalance_nodes": ["worker-a", "worker-b"],
                 "descheduler_rebalance_vm_labels": {"app": "desched-test"}, "descheduler_rebalance_backup_dir": str(tmp_path / "backups"),
                 "descheduler_rebalance_metrics_source": "KubernetesMetrics", "descheduler_rebalance_thresholds": NARROW["thresholds"],
                 "descheduler_rebalance_target_thresholds": NARROW["target_thresholds"]}
    run = run_tasks(hot, ROLE, extra_vars=role_vars, expect_failure=True)
    failed = run.failed()
    assert [t["task"].split(" : ")[-1] for t in failed] == ["Stop when the forecast refuses the policy (nothing is written)"]
    lines = failed[0]["result"]["msg"].splitlines()
    assert lines[0] == "The forecast refuses the policy, nothing was written:"
    assert lines[1].startswith("- the forecast swaps worker-b from underutilized to overutilized with run 1's migrations (vm-hot")
    assert lines[2:] == ["Fix: set descheduler_rebalance_force: true (playbook: rebalance_force) to apply anyway, or widen the thresholds.",
                         "Full result: descheduler_rebalance_planned (-v prints it)"]
    assert policy_configmap(hot) == before and not (tmp_path / "backups").exists()

    forced = run_tasks(hot, ROLE, extra_vars=dict(role_vars, descheduler_rebalance_force=True), check=True)
    result = forced.fact("descheduler_rebalance_result")
    assert result["changed"] and result["forecast"]["refusal"] and result["plan"]["usage_source"] == "KubernetesMetrics"
    assert "refused, applied anyway (force)" in forced.stdout
    assert policy_configmap(hot) == before
