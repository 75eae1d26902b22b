"""Cluster-safe checks that only read, run by `make test-cluster` on a staging cluster and against the simulator:
the kubevirt_eviction_facts module finds two schedulable workers, KubeVirt and the Descheduler (where
`rehearse_descheduler_namespace`/`rehearse_descheduler_name` say, descheduler/descheduler by default); the real
kubectl sees the same nodes; playbooks/compat_check.yml passes and writes its report."""
from __future__ import annotations

import json

import pytest

from support.simulator import columns

from .ansible_run import run_playbook
from .conftest import ROOT
from .module_call import call_module

DESCHEDULER_DEFAULTS = {"rehearse_descheduler_namespace": "descheduler", "rehearse_descheduler_name": "descheduler"}


def descheduler_location(cluster) -> tuple:
    """(namespace, name) of the Descheduler the run's variables name."""
    variables = {**DESCHEDULER_DEFAULTS, **cluster.extra_vars}
    return variables["rehearse_descheduler_namespace"], variables["rehearse_descheduler_name"]


def workers(nodes: list) -> list:
    """Nodes a VM can be scheduled and live-migrated to: schedulable, not control plane, with virt-handler ready."""
    return sorted(n["name"] for n in nodes if n["schedulable"] and not n["control_plane"] and n["kubevirt_schedulable"])


@pytest.fixture(scope="module")
def facts(cluster) -> dict:
    namespace, name = descheduler_location(cluster)
    result = call_module("kubevirt_eviction_facts", {"kubeconfig": cluster.kubeconfig, "context": cluster.context,
                                                     "include": ["cluster", "nodes", "descheduler"],
                                                     "descheduler_namespace": namespace, "descheduler_name": name})
    assert not result["failed"], result
    return result


def test_facts_find_two_schedulable_workers_kubevirt_and_the_descheduler(cluster, facts):
    assert len(workers(facts["nodes"])) >= 2, f"{cluster.name}: fewer than two schedulable KubeVirt workers: {facts['nodes']}"
    kubevirt = facts["cluster"]["kubevirt"]
    assert kubevirt["found"] and kubevirt["phase"] == "Deployed" and kubevirt["version"], kubevirt
    namespace, name = descheduler_location(cluster)
    descheduler = facts["descheduler"]
    assert descheduler["found"] and descheduler["kind"] in ("CronJob", "Deployment"), (
        f"no Descheduler CronJob or Deployment {name} in {namespace} on {cluster.name}: name yours with "
        "TEST_VARS='{\"rehearse_descheduler_namespace\": ..., \"rehearse_descheduler_name\": ...}'")
    assert (descheduler["namespace"], descheduler["name"]) == (namespace, name), descheduler


def test_kubectl_lists_the_nodes_the_module_read_and_the_workers_are_ready(cluster, facts):
    table = {row["NAME"]: row for row in columns(cluster.kubectl("get", "nodes").stdout)}
    assert sorted(table) == sorted(n["name"] for n in facts["nodes"])
    assert all(table[name]["STATUS"].split(",")[0] == "Ready" for name in workers(facts["nodes"])), table
    listed = cluster.kubectl_json("get", "nodes")
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == sorted(table)


def test_compat_check_playbook_passes_and_writes_its_report(cluster, facts, tmp_path):
    namespace, name = descheduler_location(cluster)
    reports = tmp_path / "reports"
    run_playbook(cluster, ROOT / "playbooks" / "compat_check.yml",
                 {**cluster.extra_vars, "reports_dir": str(reports), "descheduler_compat_descheduler_namespace": namespace,
                  "descheduler_compat_descheduler_name": name}, name="compat-check")
    # run_playbook's inventory host is localhost: the reports are under reports/localhost
    record = json.loads((reports / "localhost" / "localhost-compat.json").read_text())
    assert record["failed"] == [] and {c["result"] for c in record["checks"]} <= {"pass", "skip"}, record["checks"]
    assert record["versions"]["kubevirt"] == facts["cluster"]["kubevirt"]["version"]
    found = sorted((reports / "localhost").glob("compat_check-*.json"))
    assert found, f"no compat_check report under {reports / 'localhost'}"
    report = json.loads(found[-1].read_text())
    assert report["status"] == "passed", report
    assert found[-1].with_suffix(".md").is_file()
