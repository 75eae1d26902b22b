"""The Descheduler VM rebalance page (shared/reference/descheduler-vm-rebalance.md), command by command with
the real kubectl against the `rebalance-two-workers` scenario, asserting the outcomes the page documents:
prerequisites, discovery, the ConfigMap edit and its ResourcePatch, a scheduled run that requests one
eviction in the background, the live migration that follows, the pass criteria, and the rollback."""
from __future__ import annotations

import re

import pytest
import yaml

from support.policy import PAGE_POLICY
from support.simulator import columns, kubectl_available
from support.waiting import wait_for

from .ansible_run import edit_policy_as_page

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

LOG_FILTER = re.compile(r"classified|removablePods|Eviction in background|Number of evictions")


@pytest.fixture(scope="module")
def cluster(rebalance_two_workers):
    return rebalance_two_workers


def descheduler_log(sim) -> list[str]:
    out = sim.kubectl("-n", "descheduler", "logs", "-l", "app.kubernetes.io/name=descheduler", "--tail=200").stdout
    return [line for line in out.splitlines() if LOG_FILTER.search(line)]


# ------------------------------------------------------------------------------------- prerequisites
def test_the_package_renders_the_feature_gate(cluster):
    out = cluster.kubectl("-n", "descheduler", "get", "cronjob", "descheduler", "-o",
                          "jsonpath={.spec.jobTemplate.spec.template.spec.containers[0].args}{\"\\n\"}").stdout
    assert out == '["--policy-config-file=/policy-dir/policy.yaml","--feature-gates=EvictionsInBackground=true",' \
                  '"--v=3"]\n'


def test_eviction_strategy_at_cluster_and_vmi_level(cluster):
    out = cluster.kubectl("-n", "kubevirt", "get", "kubevirt", "kubevirt-kubevirt-hyperconverged", "-o",
                          "jsonpath={.spec.configuration.evictionStrategy}{\"\\n\"}").stdout
    assert out == "LiveMigrateIfPossible\n"
    for vmi in ("vm-1", "vm-2"):
        out = cluster.kubectl("get", "vmi", vmi, "-n", "desched-test", "-o",
                              'jsonpath={.spec.evictionStrategy} {.status.conditions[?(@.type=="LiveMigratable")]'
                              '.status}{"\\n"}').stdout
        assert out == "LiveMigrateIfPossible True\n"


# ----------------------------------------------------------------------------------------- discovery
def test_moduleinfo_is_served_by_the_global_cluster_only(cluster):
    out = cluster.kubectl("get", "moduleinfo", "-l", "cpaas.io/module-name=descheduler", "-o",
                          "custom-columns=NAME:.metadata.name,CLUSTER:.metadata.labels.cpaas\\.io/cluster-name,"
                          "PHASE:.status.phase,VERSION:.spec.version", context="global").stdout
    rows = columns(out)
    assert len(rows) == 1 and rows[0]["CLUSTER"] == "workload" and rows[0]["PHASE"] == "Running"
    assert rows[0]["VERSION"].startswith("v0.36.0-")
    failed = cluster.kubectl("get", "moduleinfo", "-l", "cpaas.io/module-name=descheduler", check=False)
    assert failed.returncode == 1
    assert 'the server doesn\'t have a resource type "moduleinfo"' in failed.stderr


def test_plugin_objects_and_the_default_policy(cluster):
    out = cluster.kubectl("-n", "descheduler", "get", "cronjob,configmap,job", "-l",
                          "app.kubernetes.io/name=descheduler").stdout
    assert "cronjob.batch/descheduler" in out and "configmap/descheduler" in out
    policy = yaml.safe_load(cluster.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o",
                                            "jsonpath={.data.policy\\.yaml}").stdout)
    assert policy["apiVersion"] == "descheduler/v1alpha2" and policy["kind"] == "DeschedulerPolicy"
    evictor = next(p for p in policy["profiles"][0]["pluginConfig"] if p["name"] == "DefaultEvictor")
    assert evictor["args"]["podProtections"] == {"defaultDisabled": ["PodsWithLocalStorage"],
                                                 "extraEnabled": ["PodsWithPVC"]}


# ----------------------------------------------------------------------- the whole procedure, in order
def test_bounded_rebalance_moves_one_vm_per_cycle_and_rolls_back(cluster, tmp_path):
    sim = cluster
    # Validate, step 1: record the source node and VMI UID.
    before = {row["NAME"]: row for row in columns(sim.kubectl(
        "get", "vmi", "-n", "desched-test", "-o",
        "custom-columns=NAME:.metadata.name,UID:.metadata.uid,NODE:.status.nodeName,"
        "STRATEGY:.spec.evictionStrategy").stdout)}
    assert {r["NODE"] for r in before.values()} == {"worker-a"}
    assert {r["STRATEGY"] for r in before.values()} == {"LiveMigrateIfPossible"}
    launchers = {p["metadata"]["name"] for p in sim.kubectl_json("get", "pods", "-n", "desched-test", "-l",
                                                                 "kubevirt.io=virt-launcher")["items"]}
    # The default policy protects PVC Pods: runs so far requested nothing.
    assert not any("Eviction in background assumed" in line for line in descheduler_log(sim))

    # Back up, then edit the ConfigMap as the page does; ACP records the edit as a ResourcePatch.
    backup = tmp_path / "descheduler-policy.before-vm-rebalance.yaml"
    backup.write_text(sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", "yaml").stdout)
    # A slow migration keeps the evacuation markers visible long enough to read them (simulator fault).
    for vm in ("vm-1", "vm-2"):
        sim.kubectl("annotate", "vmi", vm, "-n", "desched-test", "kubesim.io/migration=slow")
    edited = edit_policy_as_page(sim, tmp_path, PAGE_POLICY)
    assert edited.stdout.strip() == "configmap/descheduler edited"
    warning = re.search(r"Warning: The operation is allowed, and ResourcePatch (rp-[a-z0-9]+) is created", edited.stderr)
    assert warning, edited.stderr
    rp_name = warning.group(1)
    assert rp_name in sim.kubectl("-n", "descheduler", "get", "resourcepatch").stdout

    # Step 3: the next scheduled run requests one eviction in the background.
    lines = wait_for(lambda: [line for line in descheduler_log(sim) if "Eviction in background assumed" in line],
                     interval=0.3, what="a run that requests an eviction")
    moved_pod = re.search(r'pod="desched-test/(virt-launcher-[^"]+)"', lines[0]).group(1)
    assert moved_pod in launchers
    log = descheduler_log(sim)
    # v0.36: the plugin logger's values come before the line's own pairs
    assert any('"Node has been classified" plugin="LowNodeUtilization" ExtensionPoint="Balance" category="overutilized" '
               'node="worker-a"' in line for line in log)
    assert any('"Node has been classified" plugin="LowNodeUtilization" ExtensionPoint="Balance" category="underutilized" '
               'node="worker-b"' in line for line in log)
    assert any(re.search(r'"Pods on node" node="worker-a" allPods=\d+ nonRemovablePods=\d+ removablePods=2', line)
               for line in log)
    assert any('"Number of evictions/requests" totalEvicted=0 evictionRequests=1' in line for line in log)
    moved_vm = next(name for name in before if moved_pod.startswith(f"virt-launcher-{name}-"))

    # While in flight: the descheduler is the eviction source.
    source = sim.kubectl("get", "vmi", moved_vm, "-n", "desched-test", "-o",
                         "jsonpath={.metadata.annotations.kubevirt\\.io/eviction-source}{\"\\n\"}").stdout
    assert source == "descheduler\n"

    # Step 4: KubeVirt completes the migration.
    def migrated():
        rows = columns(sim.kubectl("get", "vmim", "-n", "desched-test", "-o",
                                   "custom-columns=NAME:.metadata.name,PHASE:.status.phase,VMI:.spec.vmiName,"
                                   "SOURCE:.status.migrationState.sourceNode,TARGET:.status.migrationState.targetNode"
                                   ).stdout or "NAME\n")
        return [r for r in rows if r.get("VMI") == moved_vm and r["PHASE"] == "Succeeded"]
    vmim = wait_for(migrated, interval=0.3, what="the migration to succeed")[0]
    assert vmim["NAME"].startswith("kubevirt-evacuation-")
    assert (vmim["SOURCE"], vmim["TARGET"]) == ("worker-a", "worker-b")
    after = {row["NAME"]: row for row in columns(sim.kubectl(
        "get", "vmi", "-n", "desched-test", "-o",
        "custom-columns=NAME:.metadata.name,UID:.metadata.uid,NODE:.status.nodeName,"
        "EVACUATION:.status.evacuationNodeName").stdout)}
    events = sim.kubectl("get", "events", "-n", "desched-test", "--sort-by=.lastTimestamp").stdout
    assert re.search(r"Created Migration kubevirt-evacuation-", events)

    # Step 5: the pass criteria.
    assert after[moved_vm]["NODE"] == "worker-b"                      # another node
    assert after[moved_vm]["UID"] == before[moved_vm]["UID"]          # same VMI: not a restart
    assert after[moved_vm]["EVACUATION"] == "<none>"
    vm = sim.kubectl_json("get", "vm", moved_vm, "-n", "desched-test")
    assert vm["status"]["printableStatus"] == "Running" and vm["status"]["ready"] is True
    wait_for(lambda: sim.kubectl("get", "pod", moved_pod, "-n", "desched-test", check=False).returncode == 1,
             interval=0.3, what="the old launcher to terminate")
    source = sim.kubectl("get", "vmi", moved_vm, "-n", "desched-test", "-o",
                         "jsonpath={.metadata.annotations.kubevirt\\.io/eviction-source}").stdout
    assert source == ""                                                # removed once the migration completes

    # Later cycles move the other VM, then find no underutilized node.
    wait_for(lambda: any("No node is underutilized, nothing to do here, you might tune your thresholds further"
                         in line for line in sim.kubectl("-n", "descheduler", "logs", "-l",
                                                         "app.kubernetes.io/name=descheduler",
                                                         "--tail=50").stdout.splitlines()),
             timeout=60, interval=0.3, what="a run that finds no underutilized node")

    # Stop and roll back.
    sim.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge",
                "-p", '{"spec":{"suspend":true}}')
    rps = sim.kubectl("-n", "descheduler", "get", "resourcepatch", "-o", "name").stdout.split()
    assert f"resourcepatch.operator.alauda.io/{rp_name}" in rps
    sim.kubectl("-n", "descheduler", "delete", "resourcepatch", rp_name)

    def restored():
        text = sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o",
                           "jsonpath={.data.policy\\.yaml}").stdout
        return "PodsWithPVC" in text and "vm-rebalance" not in text
    wait_for(restored, timeout=20, interval=0.3, what="the chart-managed policy to come back")
    head = sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o",
                       "jsonpath={.data.policy\\.yaml}").stdout.splitlines()[:5]
    assert head[:2] == ['apiVersion: "descheduler/v1alpha2"', 'kind: "DeschedulerPolicy"']
    phases = {m["status"]["phase"] for m in sim.kubectl_json("get", "vmim", "-A")["items"]}
    assert phases <= {"Succeeded", "Failed"}
    assert sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")["spec"]["suspend"] is True
    sim.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge",
                "-p", '{"spec":{"suspend":false}}')
    assert sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")["spec"]["suspend"] is False
    # The backup is a complete, re-appliable manifest of the chart policy.
    saved = yaml.safe_load(backup.read_text())
    assert saved["kind"] == "ConfigMap" and "PodsWithPVC" in saved["data"]["policy.yaml"]
