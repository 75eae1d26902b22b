"""The real kubectl against the `acp-plugin-basics` scenario: the rebalance page's ConfigMap edit with its
ResourcePatch warning, the ResourcePatch listing and rollback, ModuleInfo on the global cluster only, and
the PDB columns for minAvailable versus maxUnavailable over Pods owned by VirtualMachineInstances."""
from __future__ import annotations

import json
import re
import sys
import textwrap
import time

import pytest

from support.policy import PAGE_POLICY
from support.simulator import kubectl_available
from support.waiting import wait_for

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

WARNING = re.compile(r"^Warning: The operation is allowed, and ResourcePatch (rp-[a-z0-9]{5}) is created$", re.M)
POLICY_JSONPATH = "jsonpath={.data.policy\\.yaml}"


@pytest.fixture(scope="module")
def acp(kubesim_factory):
    return kubesim_factory("acp-plugin-basics")


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def _editor(tmp_path, policy: str) -> str:
    """A scripted EDITOR that replaces data.policy.yaml in the file kubectl opens."""
    script = tmp_path / "edit-policy"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""\
        import sys
        import yaml
        with open(sys.argv[-1], encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
        doc["data"]["policy.yaml"] = {policy!r}
        with open(sys.argv[-1], "w", encoding="utf-8") as handle:
            yaml.safe_dump(doc, handle)
        """))
    script.chmod(0o755)
    return str(script)


def test_edit_records_a_resourcepatch_that_survives_and_rolls_back(acp, tmp_path):
    chart_policy = acp.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", POLICY_JSONPATH).stdout
    assert "PodsWithPVC" in chart_policy
    backup = acp.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", "yaml").stdout
    assert "app.kubernetes.io/name: descheduler" in backup

    edit = acp.kubectl("-n", "descheduler", "edit", "configmap", "descheduler",
                       env={"KUBE_EDITOR": _editor(tmp_path, PAGE_POLICY), "EDITOR": ""})
    assert edit.stdout.strip() == "configmap/descheduler edited"
    match = WARNING.search(edit.stderr)
    assert match, edit.stderr
    rp_name = match.group(1)

    listed = _rows(acp.kubectl("-n", "descheduler", "get", "resourcepatch").stdout)
    assert listed[0][:2] == ["NAME", "TARGET"]
    assert [rp_name, "descheduler"] == listed[1][:2] and len(listed) == 2
    rp = acp.kubectl_json("-n", "descheduler", "get", "resourcepatch", rp_name)
    assert rp["apiVersion"] == "operator.alauda.io/v1alpha1"
    assert rp["spec"]["target"]["kind"] == "ConfigMap" and rp["spec"]["release"] == "descheduler/descheduler"

    time.sleep(1.0)   # five resync periods at timeScale 10
    acp.settle()
    edited = acp.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o", POLICY_JSONPATH).stdout
    assert edited == PAGE_POLICY

    # Stop and Roll Back: suspend (recorded too), delete the policy override, read the policy head.
    suspend = acp.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge",
                          "-p", '{"spec":{"suspend":true}}')
    assert suspend.stdout.strip() == "cronjob.batch/descheduler patched" and WARNING.search(suspend.stderr)
    deleted = acp.kubectl("-n", "descheduler", "delete", "resourcepatch", rp_name)
    assert deleted.stdout.strip() == f'resourcepatch.operator.alauda.io "{rp_name}" deleted'
    wait_for(lambda: acp.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o",
                                 POLICY_JSONPATH).stdout == chart_policy, timeout=5, interval=0.1)
    head = "\n".join(chart_policy.splitlines()[:5])
    assert head.startswith('apiVersion: "descheduler/v1alpha2"\nkind: "DeschedulerPolicy"')
    time.sleep(0.5)
    suspended = acp.kubectl("-n", "descheduler", "get", "cronjob", "descheduler", "-o",
                            "jsonpath={.spec.suspend}").stdout
    assert suspended == "true"
    resumed = acp.kubectl("-n", "descheduler", "patch", "cronjob", "descheduler", "--type=merge",
                          "-p", '{"spec":{"suspend":false}}')
    assert WARNING.search(resumed.stderr)
    args = acp.kubectl("-n", "descheduler", "get", "cronjob", "descheduler", "-o",
                       "jsonpath={.spec.jobTemplate.spec.template.spec.containers[0].args}").stdout
    assert json.loads(args) == ["--policy-config-file=/policy-dir/policy.yaml",
                                "--feature-gates=EvictionsInBackground=true", "--v=3"]


def test_moduleinfo_on_global_and_the_error_on_workload(acp):
    columns = ("NAME:.metadata.name,CLUSTER:.metadata.labels.cpaas\\.io/cluster-name,PHASE:.status.phase,"
               "VERSION:.spec.version")
    out = acp.kubectl("get", "moduleinfo", "-l", "cpaas.io/module-name=descheduler", "-o",
                      f"custom-columns={columns}", context="global").stdout
    rows = _rows(out)
    assert rows[0] == ["NAME", "CLUSTER", "PHASE", "VERSION"]
    assert len(rows) == 2 and rows[1][1:] == ["workload", "Running", "v0.36.0-5"]
    assert re.fullmatch(r"workload-[0-9a-f]{32}", rows[1][0])
    failed = acp.kubectl("get", "moduleinfo", "-l", "cpaas.io/module-name=descheduler", "-o",
                         f"custom-columns={columns}", check=False)
    assert failed.returncode == 1
    assert 'error: the server doesn\'t have a resource type "moduleinfo"' in failed.stderr


def test_pdb_columns_for_min_available_and_max_unavailable(acp):
    acp.kubectl("create", "namespace", "pdb-demo")
    for index in range(3):
        vmi = json.loads(acp.kubectl("create", "-o", "json", "-f", "-", input=json.dumps({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": f"pool-vm-{index}", "namespace": "pdb-demo"},
            "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}}})).stdout)
        acp.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"demo-launcher-{index}", "namespace": "pdb-demo", "labels": {"pool": "my-pool"},
                         "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                              "name": vmi["metadata"]["name"], "uid": vmi["metadata"]["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"nodeName": "worker-a", "containers": [{"name": "compute", "image": "virt-launcher"}]}}))
    for name, field in (("vmpool-pdb", '"minAvailable": 2'), ("vmpool-pdb-max", '"maxUnavailable": 1')):
        acp.kubectl("create", "-f", "-", input='{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", '
                    f'"metadata": {{"name": "{name}", "namespace": "pdb-demo"}}, '
                    f'"spec": {{{field}, "selector": {{"matchLabels": {{"pool": "my-pool"}}}}}}}}')

    def table():
        rows = _rows(acp.kubectl("-n", "pdb-demo", "get", "pdb", "-o", "wide").stdout)
        by_name = {r[0]: r for r in rows[1:]}
        return (rows, by_name) if by_name.get("vmpool-pdb", [""] * 4)[3] == "1" else None

    rows, by_name = wait_for(table, timeout=10, interval=0.1)
    assert rows[0] == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert by_name["vmpool-pdb"][1:4] == ["2", "N/A", "1"]
    assert by_name["vmpool-pdb-max"][1:4] == ["N/A", "1", "0"]
    status = acp.kubectl_json("-n", "pdb-demo", "get", "pdb", "vmpool-pdb-max")["status"]
    assert status["expectedPods"] == 0 and status["disruptionsAllowed"] == 0
    assert any(c["type"] == "DisruptionAllowed" and c["status"] == "False" for c in status["conditions"])
    events = acp.kubectl("-n", "pdb-demo", "get", "events", "--field-selector",
                         "reason=CalculateExpectedPodCountFailed").stdout
    assert "Failed to calculate the number of expected pods: virtualmachineinstances.kubevirt.io does not " \
           "implement the scale subresource" in events
    assert "Warning" in events and "poddisruptionbudget/vmpool-pdb-max" in events
