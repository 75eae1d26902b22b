"""The issue's actual-load acceptance on `actual-load-hot-worker` (both workers at 50.06% cpu / 63.84% memory requests,
worker-a at 75.06% actual cpu with vm-hot, worker-b at 31.31%): kubevirt_eviction_facts finds that requests and actual
usage disagree on worker-a; playbooks/rebalance.yml with the procedure's request-based policy moves nothing and its
report says why; the same playbook with a metrics-server policy moves vm-hot by live migration, proved by the five
checks; a Prometheus policy (its token from the Secret it names, the query sent through a URL reachable from here)
does the same through the modules the playbook runs.

One simulator for the file; the tests run in order, each from the state the one before leaves."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.policy import PAGE_OPTIONS
from support.simulator import ROOT, suspend_descheduler
from support.waiting import wait_for

from .ansible_run import run_playbook
from .module_call import call_module

pytestmark = pytest.mark.simulator

NAMESPACE = "desched-test"
HOT = "vm-hot"
WORKERS = ["worker-a", "worker-b"]
FIVE_CHECKS = ("node_changed", "migration_succeeded", "uid_unchanged", "running_ready", "old_launcher_gone")
NOTHING_TO_DO = "No node is underutilized, nothing to do here, you might tune your thresholds further"
# the scenario header's policies that move exactly vm-hot (the procedure's policy with LowNodeUtilization changed)
BY_METRICS_SERVER = {"rebalance_metrics_source": "KubernetesMetrics", "rebalance_thresholds": {"cpu": 40}, "rebalance_target_thresholds": {"cpu": 60}}
PROMETHEUS_POLICY = {"metrics_source": "Prometheus", "prometheus_query": "instance:node_cpu_utilisation:rate1m",
                     "prometheus_url": "https://prometheus-k8s.monitoring.svc:9091",
                     "prometheus_auth_secret": {"namespace": "descheduler", "name": "prometheus-auth"},
                     "thresholds": {"MetricResource": 40}, "target_thresholds": {"MetricResource": 60}}
PROMETHEUS_TOKEN = "kubesim-prometheus-token"  # the scenario's, in Secret descheduler/prometheus-auth


def millicores(quantity: str) -> float:
    return float(quantity[:-1]) if quantity.endswith("m") else float(quantity) * 1000


def node_cpu(sim) -> dict:
    """NodeMetrics cpu in millicores per node."""
    return {n["metadata"]["name"]: millicores(n["usage"]["cpu"]) for n in sim.request_json("GET", "/apis/metrics.k8s.io/v1beta1/nodes")["items"]}


def hot_on_worker_a(sim) -> bool:
    """vm-hot runs on worker-a and its load shows in NodeMetrics (worker-a above twice worker-b's cpu)."""
    vmi = sim.kubectl_json("get", "vmi", HOT, "-n", NAMESPACE)
    cpu = node_cpu(sim)
    return ((vmi.get("status") or {}).get("phase"), (vmi.get("status") or {}).get("nodeName")) == ("Running", "worker-a") \
        and cpu.get("worker-a", 0) > 2 * cpu.get("worker-b", float("inf"))


@pytest.fixture(scope="module")
def hot(kubesim_factory):
    sim = kubesim_factory("actual-load-hot-worker")
    wait_for(lambda: hot_on_worker_a(sim), timeout=60, what="vm-hot running on worker-a with its load in NodeMetrics")
    return sim


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rebalance")


def vmis(sim) -> dict:
    return {i["metadata"]["name"]: (i["metadata"]["uid"], i["status"]["nodeName"]) for i in sim.kubectl_json("get", "vmi", "-n", NAMESPACE)["items"]}


def rebalance(sim, workdir: Path, name: str, **variables) -> tuple:
    """playbooks/rebalance.yml as an operator runs it on the two workers (one Descheduler run, started now); its stdout
    and JSON report."""
    reports = workdir / name / "reports"
    run = run_playbook(sim, ROOT / "playbooks" / "rebalance.yml",
                       {"rebalance_nodes": WORKERS, "rebalance_namespace": NAMESPACE, "rebalance_trigger": "create",
                        "reports_dir": str(reports), "backup_dir": str(workdir / name / "backups"), **variables}, name=name)
    [report] = sorted((reports / "localhost").glob("rebalance-*.json"))
    return run.stdout, json.loads(report.read_text()), report.with_suffix(".md").read_text()


def shown_plan(stdout: str) -> dict:
    """The role's "Show the plan" message, as the playbook printed it."""
    match = re.search(r"TASK \[kubevirt_ops\.rebalance\.descheduler_rebalance : Show the plan\] \*+\nok: \[localhost\] => (\{.*?\n\})\n", stdout, re.S)
    assert match, stdout
    return json.loads(match.group(1))["msg"]


def categories(nodes: list) -> dict:
    return {node["name"]: node["category"] for node in nodes}


def test_eviction_facts_find_that_requests_and_actual_usage_disagree_on_worker_a(hot):
    facts = call_module("kubevirt_eviction_facts", {"kubeconfig": hot.kubeconfig, "include": ["nodes"], "usage_source": "KubernetesMetrics"})
    assert not facts["failed"], facts.get("msg")
    nodes = {n["name"]: n for n in facts["nodes"]}
    assert [nodes[w]["usage_percent"]["cpu"] for w in WORKERS] == [50.06, 50.06]
    assert [nodes[w]["actual_percent"]["cpu"] for w in WORKERS] == [75.06, 31.31]
    [finding] = [f for f in facts["findings"] if f["code"] == "requests_disagree_with_usage"]
    assert finding["severity"] == "warning" and "worker-a actual cpu 75.1% against cpu requests 50.1% (+25 points)" in finding["message"]
    assert "metrics_source KubernetesMetrics or Prometheus" in finding["message"]


def test_a_request_based_policy_moves_nothing_and_the_report_says_why(hot, workdir):
    before = vmis(hot)
    stdout, report, markdown = rebalance(hot, workdir, "by-requests")
    plan = shown_plan(stdout)
    assert (plan["usage_source"], plan["stop_reason"], plan["first_run_requests"]) == ("requests", NOTHING_TO_DO, [])
    assert plan["forecast"] == "converges after 0 run(s), 0 migration(s)"
    assert report["status"] == "passed" and report["moved"] == [] and report["policy"]["planned_evictions"] == []
    assert categories(report["classification"]["before"]["nodes"]) == {w: "appropriately utilized" for w in WORKERS}
    [cycle] = report["validation"]["cycles"]
    assert cycle["nothing_to_do"] and cycle["stop_reason"] == NOTHING_TO_DO and report["validation"]["stopped_because"] == "balanced"
    # why the requests see nothing: the preflight's eviction facts, in the report
    [warning] = [w for w in report["preflight"]["warnings"] if w["code"] == "requests_disagree_with_usage"]
    assert "worker-a actual cpu 75.1% against cpu requests 50.1%" in warning["message"] and warning["message"] in markdown
    assert "Validation stopped because: balanced." in markdown and "No VM moved." in markdown
    assert vmis(hot) == before


def test_a_metrics_server_policy_moves_the_hot_vm_by_live_migration_proved_by_the_five_checks(hot, workdir):
    before = vmis(hot)
    stdout, report, markdown = rebalance(hot, workdir, "by-metrics-server", **BY_METRICS_SERVER)
    plan = shown_plan(stdout)
    assert plan["usage_source"] == "KubernetesMetrics" and plan["first_run_requests"] == [f"{NAMESPACE} {HOT} worker-a"]
    assert plan["forecast"] == "converges after 1 run(s), 1 migration(s)"
    assert report["status"] == "passed" and [e["vm"] for e in report["policy"]["planned_evictions"]] == [HOT]
    planned = {n["name"]: n for n in report["classification"]["before"]["nodes"]}
    assert {w: (planned[w]["category"], planned[w]["usage_source"], planned[w]["usage_percent"]["cpu"]) for w in WORKERS} == {
        "worker-a": ("overutilized", "KubernetesMetrics", 75.06), "worker-b": ("underutilized", "KubernetesMetrics", 31.31)}
    [moved] = report["moved"]
    assert (moved["vm"], moved["from"], moved["to"]) == (HOT, "worker-a", "worker-b")
    [proof] = [vm for vm in report["checks"] if vm["name"] == HOT]
    assert proof["verdict"] == "pass" and all(proof["checks"][check]["result"] == "pass" for check in FIVE_CHECKS), proof
    migration = hot.kubectl_json("-n", NAMESPACE, "get", "vmim", moved["migration"])
    assert migration["status"]["phase"] == "Succeeded" and migration["metadata"]["annotations"].get("kubevirt.io/evacuationMigration") is not None
    after = vmis(hot)
    assert after[HOT] == (before[HOT][0], "worker-b") and {k: v for k, v in after.items() if k != HOT} == {k: v for k, v in before.items() if k != HOT}
    # the load moved with the VM: both workers between the thresholds now (46.94% and 59.44%), nothing left to do
    assert {n["name"]: (n["category"], n["usage_percent"]["cpu"]) for n in report["classification"]["after"]["nodes"]} == {
        "worker-a": ("appropriately utilized", 46.94), "worker-b": ("appropriately utilized", 59.44)}
    assert f"| {HOT} | worker-a | worker-b | {moved['migration']} |" in markdown
    live = hot.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")["data"]["policy.yaml"]
    assert "source: KubernetesMetrics" in live and "metricsProviders" in live


def test_a_prometheus_policy_moves_the_hot_vm_with_the_token_from_its_secret(hot, tmp_path):
    """After the test above: the CronJob suspended so that only this test's run moves VMs, vm-hot restarted (a new
    VMI, without the migration's node affinity) where its VM prefers to run, worker-a, and hot again there."""
    suspend_descheduler(hot)
    hot.kubectl("delete", "vmi", HOT, "-n", NAMESPACE)
    wait_for(lambda: hot_on_worker_a(hot), timeout=60, what="vm-hot running on worker-a again")
    baseline = call_module("vm_migration_verify", {"kubeconfig": hot.kubeconfig, "mode": "record", "namespace": NAMESPACE,
                                                   "label_selector": "app=desched-test"})["baseline"]
    route = hot.url + "/_kubesim/prometheus/workload"  # stands in for a Route to the token-protected Prometheus
    applied = call_module("descheduler_policy", {"kubeconfig": hot.kubeconfig, "backup_dir": str(tmp_path / "backups"), **PAGE_OPTIONS,
                                                 "prometheus_url_override": route, **PROMETHEUS_POLICY})
    assert not applied["failed"] and applied["changed"], applied.get("msg")
    assert {n["name"]: (n["category"], n["usage_percent"]["MetricResource"]) for n in applied["plan"]["nodes"]} == {
        "worker-a": ("overutilized", 75), "worker-b": ("underutilized", 31)}
    assert [e["vm"] for e in applied["plan"]["evictions"]] == [HOT]
    assert applied["forecast"]["converged"] and applied["forecast"]["migrations"] == 1 and applied["forecast"]["refusal"] is None
    assert PROMETHEUS_TOKEN not in json.dumps(applied) and route not in applied["policy_yaml"]
    # the simulated descheduler queries Prometheus in the cluster with the token of the Secret the policy names
    run = call_module("descheduler_run", {"kubeconfig": hot.kubeconfig, "trigger": "create", "timeout": 60})
    assert not run["failed"] and run["errors"] == [], run.get("msg") or run["errors"]
    assert {c["node"]: (c["category"], c["usage_percent"]) for c in run["classification"]} == {
        "worker-a": ("overutilized", {"MetricResource": 75}), "worker-b": ("underutilized", {"MetricResource": 31})}
    assert [e["name"] for e in run["background_evictions"]] == [baseline[HOT]["launcher"]]
    log = "\n".join(run["log_lines"])
    assert "authentication secret token updated, recreating prometheus client" in log and "Currently, only a single pod eviction is allowed" in log
    verified = call_module("vm_migration_verify", {"kubeconfig": hot.kubeconfig, "namespace": NAMESPACE, "label_selector": "app=desched-test",
                                                   "baseline": baseline, "timeout": 60, "min_moved": 1, "require_trigger": "descheduler"})
    assert verified["passed"] and verified["counts"]["pass"] == 1, verified
    [proof] = [vm for vm in verified["vms"] if vm["verdict"] == "pass"]
    assert (proof["name"], proof["source_node"], proof["node"]) == (HOT, "worker-a", "worker-b")
    assert all(proof["checks"][check]["result"] == "pass" for check in FIVE_CHECKS + ("trigger",))
