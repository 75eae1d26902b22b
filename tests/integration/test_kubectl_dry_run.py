"""The real kubectl's `--dry-run=server` against the simulator: apply (client-side and server-side), create,
delete and drain say what they would do and leave the cluster as it was: the same objects at the same
resourceVersions, and the list resourceVersion (the cluster's last write) unmoved. kubectl sends the dry run as
`?dryRun=All` on POST/PATCH, in the DeleteOptions body on DELETE, and in the Eviction's `deleteOptions` on
drain (see tests/kubesim/README.md)."""
from __future__ import annotations

import json

import pytest

from .conftest import kubectl_available

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

KINDS = "nodes,pods,configmaps,namespaces"


@pytest.fixture(scope="module")
def sim(kubesim_factory):
    return kubesim_factory("api-basics")


def cluster_state(sim, kinds: str = KINDS, namespace: str | None = None, last_write: bool = True) -> tuple:
    """Every object's resourceVersion and, with `last_write`, the list resourceVersion (the cluster's last write,
    read raw: kubectl's own `-o json` list has none)."""
    sim.settle()
    doc = sim.kubectl_json("get", kinds, *(["-n", namespace] if namespace else ["-A"]))
    versions = {(i["kind"], i["metadata"].get("namespace", ""), i["metadata"]["name"]): i["metadata"]["resourceVersion"]
                for i in doc["items"]}
    if not last_write:
        return versions
    return json.loads(sim.kubectl("get", "--raw", "/api/v1/namespaces").stdout)["metadata"]["resourceVersion"], versions


def configmap(name: str, **data: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
                       "data": data})


def test_apply_dry_run_server_changes_nothing(sim):
    sim.kubectl("create", "-f", "-", input=configmap("edited", k="old"))
    before = cluster_state(sim)
    new = sim.kubectl("apply", "--dry-run=server", "-f", "-", input=configmap("applied-new", k="v"))
    assert "configmap/applied-new created (server dry run)" in new.stdout
    edit = sim.kubectl("apply", "--dry-run=server", "-f", "-", "-o", "json", input=configmap("edited", k="new"))
    assert json.loads(edit.stdout)["data"] == {"k": "new"}         # the object as the write would store it
    # data.k belongs to kubectl-create: a server-side apply changing it must force, dry run or not
    ssa = sim.kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-",
                      input=configmap("edited", k="ssa"))
    assert "configmap/edited serverside-applied (server dry run)" in ssa.stdout
    assert cluster_state(sim) == before
    assert sim.kubectl_json("get", "configmap", "edited", "-n", "default")["data"] == {"k": "old"}
    missing = sim.kubectl("get", "configmap", "applied-new", "-n", "default", check=False)
    assert missing.returncode == 1 and 'configmaps "applied-new" not found' in missing.stderr


def test_create_dry_run_server_changes_nothing(sim):
    before = cluster_state(sim)
    made = sim.kubectl("create", "--dry-run=server", "-f", "-", "-o", "json", input=configmap("created", k="v"))
    answer = json.loads(made.stdout)
    assert answer["metadata"]["uid"] and "resourceVersion" not in answer["metadata"]
    literal = sim.kubectl("create", "configmap", "from-literal", "-n", "default", "--from-literal=k=v",
                          "--dry-run=server")                       # a protobuf body
    assert "configmap/from-literal created (server dry run)" in literal.stdout
    namespace = sim.kubectl("create", "namespace", "dry-ns", "--dry-run=server")
    assert "namespace/dry-ns created (server dry run)" in namespace.stdout
    bad = sim.kubectl("create", "configmap", "Bad_Name", "-n", "default", "--dry-run=server", check=False)
    assert bad.returncode == 1
    assert 'failed to create configmap: ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": ' \
           "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters" in bad.stderr
    assert cluster_state(sim) == before


def test_delete_dry_run_server_changes_nothing(sim):
    sim.kubectl("create", "-f", "-", input=configmap("doomed", k="v"), check=False)
    before = cluster_state(sim)
    gone = sim.kubectl("delete", "configmap", "doomed", "-n", "default", "--dry-run=server")
    assert 'configmap "doomed" deleted (server dry run)' in gone.stdout
    pod = sim.kubectl("delete", "pod", "web-1", "-n", "default", "--dry-run=server")
    assert 'pod "web-1" deleted (server dry run)' in pod.stdout
    labelled = sim.kubectl("delete", "pods", "-l", "app=web", "-n", "default", "--dry-run=server")
    assert labelled.stdout.count("deleted (server dry run)") == 2
    assert cluster_state(sim) == before
    web = sim.kubectl_json("get", "pod", "web-1", "-n", "default")
    assert "deletionTimestamp" not in web["metadata"] and web["status"]["phase"] == "Running"


def test_drain_dry_run_server_changes_nothing(sim):
    before = cluster_state(sim)
    sim.reset_counters()
    out = sim.kubectl("drain", "worker-a", "--dry-run=server", "--ignore-daemonsets", "--force", "--timeout=60s")
    assert "node/worker-a cordoned (server dry run)" in out.stdout
    assert "node/worker-a drained (server dry run)" in out.stdout
    assert sim.counters().get("create pods/eviction", 0) >= 1      # the Eviction API was asked, in dry run
    assert cluster_state(sim) == before
    node = sim.kubectl_json("get", "node", "worker-a")
    assert not node["spec"].get("unschedulable")
    assert sim.kubectl_json("get", "pod", "web-1", "-n", "default")["spec"]["nodeName"] == "worker-a"


def test_drain_dry_run_server_of_kubevirt_vms_marks_no_vmi(kubesim_factory):
    """KubeVirt's webhook answers a dry-run eviction as a real one (429, so kubectl retries until --timeout) but
    marks nothing: no VMI gets evacuationNodeName and no migration starts."""
    vms = kubesim_factory("maintenance")
    # The scenario's descheduler CronJob runs every 6 s here; stop it so that only the drain could change VMs.
    vms.kubectl("patch", "cronjob", "descheduler", "-n", "descheduler", "--type=merge",
                "-p", '{"spec":{"suspend":true}}')
    kinds = "virtualmachineinstances,virtualmachineinstancemigrations,pods,poddisruptionbudgets"
    before = (cluster_state(vms, kinds, "vms", last_write=False), cluster_state(vms, "nodes", last_write=False))
    out = vms.kubectl("drain", "worker-1", "--dry-run=server", "--ignore-daemonsets", "--delete-emptydir-data",
                      "--force", "--timeout=8s", check=False, timeout=90)
    assert out.returncode != 0 and "global timeout reached" in out.stderr
    assert "node/worker-1 cordoned (server dry run)" in out.stdout
    assert 'Eviction triggered evacuation of VMI "vms/' in out.stderr
    assert (cluster_state(vms, kinds, "vms", last_write=False), cluster_state(vms, "nodes", last_write=False)) == before
    vmis = vms.kubectl_json("get", "virtualmachineinstances", "-n", "vms")["items"]
    assert vmis and not [v["metadata"]["name"] for v in vmis if v["status"].get("evacuationNodeName")]
    assert vms.kubectl_json("get", "virtualmachineinstancemigrations", "-A")["items"] == []
    assert not vms.kubectl_json("get", "node", "worker-1")["spec"].get("unschedulable")
