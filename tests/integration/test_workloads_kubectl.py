"""The workload controllers through the real kubectl: a Deployment's ReplicaSet and Pods, a DaemonSet, a
drain that sends the Deployment's Pods elsewhere and skips the DaemonSet's, and CronJob runs (scheduled on
the simulated clock and created by hand with `kubectl create job --from`)."""
from __future__ import annotations

import json
import re

import pytest

from support.simulator import kubectl_available
from support.waiting import wait_for

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

DAEMONSET = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
    "spec": {"selector": {"matchLabels": {"app": "agent"}},
             "template": {"metadata": {"labels": {"app": "agent"}},
                          "spec": {"nodeSelector": {"node-role.kubernetes.io/worker": ""},
                                   "containers": [{"name": "agent", "image": "registry.example/agent:1"}]}}}}

CRONJOB = {
    "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "report", "namespace": "default"},
    "spec": {"schedule": "*/1 * * * *", "jobTemplate": {
        "metadata": {"labels": {"app.kubernetes.io/name": "report"}},
        "spec": {"template": {"metadata": {"labels": {"app": "report"}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "report", "image": "registry.example/report:1"}]}}}}}}


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines() if line.strip()]


def _pods(sim, selector: str) -> dict[str, dict]:
    items = sim.kubectl_json("get", "pods", "-n", "default", "-l", selector)["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def test_deployment_and_daemonset_survive_a_drain(fresh_two_workers):
    sim = fresh_two_workers
    out = sim.kubectl("create", "deployment", "shop", "--image=registry.example/shop:1", "--replicas=2",
                      "-n", "default").stdout
    assert out.strip() == "deployment.apps/shop created"
    sim.kubectl("apply", "-f", "-", input=json.dumps(DAEMONSET))
    rolled = sim.kubectl("rollout", "status", "deployment/shop", "-n", "default", "--timeout=30s").stdout
    assert 'deployment "shop" successfully rolled out' in rolled
    sim.kubectl("rollout", "status", "daemonset/agent", "-n", "default", "--timeout=30s")

    rows = _rows(sim.kubectl("get", "deploy,rs,pods", "-n", "default").stdout)
    deploy = next(r for r in rows if r[0] == "deployment.apps/shop")
    assert deploy[1:4] == ["2/2", "2", "2"]
    rs = next(r for r in rows if r[0].startswith("replicaset.apps/shop-"))
    assert rs[1:4] == ["2", "2", "2"]
    rs_name = rs[0].split("/", 1)[1]
    shop_pods = [r for r in rows if r[0].startswith(f"pod/{rs_name}-")]
    assert len(shop_pods) == 2 and all(r[1:3] == ["1/1", "Running"] for r in shop_pods)
    ds_rows = _rows(sim.kubectl("get", "ds", "agent", "-n", "default").stdout)
    assert ds_rows[0][:6] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE"]
    assert ds_rows[1][:6] == ["agent", "2", "2", "2", "2", "2"]
    agents = {p["spec"]["nodeName"]: name for name, p in _pods(sim, "app=agent").items()}
    assert set(agents) == {"worker-a", "worker-b"}

    target = next(iter(_pods(sim, "app=shop").values()))["spec"]["nodeName"]
    other = "worker-b" if target == "worker-a" else "worker-a"
    drained = sim.kubectl("drain", target, "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                          "--timeout=60s")
    assert f"node/{target} drained" in drained.stdout
    assert f"default/{agents[target]}" in drained.stderr and "ignoring DaemonSet-managed Pods" in drained.stderr
    evicted = re.findall(r"pod/(\S+) evicted", drained.stdout)
    assert any(name.startswith(f"{rs_name}-") for name in evicted)
    assert agents[target] not in evicted

    def moved():
        pods = _pods(sim, "app=shop")
        return len(pods) == 2 and all(p["spec"].get("nodeName") == other and p["status"].get("phase") == "Running"
                                      for p in pods.values())
    wait_for(moved, timeout=20, what="the Deployment's Pods to run on the other worker")
    assert {p["spec"]["nodeName"] for p in _pods(sim, "app=agent").values()} == {"worker-a", "worker-b"}
    assert _rows(sim.kubectl("get", "deploy", "shop", "-n", "default").stdout)[1][1] == "2/2"
    assert sim.kubectl("uncordon", target).stdout.strip() == f"node/{target} uncordoned"


def test_cronjob_runs_on_schedule_and_by_hand(fresh_two_workers):
    sim = fresh_two_workers
    sim.kubectl("apply", "-f", "-", input=json.dumps(CRONJOB))
    out = sim.kubectl("create", "job", "report-now", "--from=cronjob/report", "-n", "default").stdout
    assert out.strip() == "job.batch/report-now created"
    waited = sim.kubectl("wait", "--for=condition=complete", "job/report-now", "-n", "default", "--timeout=30s")
    assert waited.stdout.strip() == "job.batch/report-now condition met"
    row = _rows(sim.kubectl("get", "job", "report-now", "-n", "default").stdout)[1]
    assert row[1:3] == ["Complete", "1/1"]

    # timeScale 10: "*/1" runs every 6 real seconds
    scheduled = wait_for(lambda: [j["metadata"]["name"] for j in sim.kubectl_json(
        "get", "jobs", "-n", "default", "-l", "app.kubernetes.io/name=report")["items"]
        if re.fullmatch(r"report-\d+", j["metadata"]["name"])], timeout=20, what="a scheduled run")[0]
    sim.kubectl("wait", "--for=condition=complete", f"job/{scheduled}", "-n", "default", "--timeout=30s")
    wait_for(lambda: sim.kubectl_json("get", "cronjob", "report", "-n", "default")["status"].get("lastSuccessfulTime"),
             timeout=20, what="lastSuccessfulTime")
    row = _rows(sim.kubectl("get", "cronjob", "report", "-n", "default").stdout)[1]
    assert row[:2] == ["report", "*/1"] and row[-5:-3] == ["<none>", "False"]   # TIMEZONE SUSPEND
    assert re.fullmatch(r"\d+s", row[-2]), row     # LAST SCHEDULE is a few seconds ago
    events = sim.kubectl("get", "events", "-n", "default", "--field-selector", "involvedObject.name=report").stdout
    assert f"Created job {scheduled}" in events
    assert "Saw a job that the controller did not create or forgot: report-now" in events
