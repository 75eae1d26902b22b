"""`kubevirt_ops.rebalance.kubevirt_node_drain` when KubeVirt's eviction webhook fails its own API calls (issue 14):
the webhook then answers 429 `kubevirt failed getting the vmi: <error>` or `kubevirt failed marking the vmi for
eviction: <error>` (upstream: "it is up to the user to issue a retry"). Those are no evacuation: the drain must not
follow the VM as a migration in flight; the VMI stays unmarked and a later run moves it. The failures come from fault
rules scoped to `component: virt-api` (tests/kubesim/README.md, admin endpoint). Also a hotplug attachment Pod of
a running VMI, which the webhook refuses while its VM runs on the node."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import ARG_SPEC, KubevirtNodeDrainOptions, run

from .conftest import kubectl_available, start_kubesim, stop_kubesim
from .drain_scenario import write_scenario
from .module_call import run_service

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

NS = "vms"
WEBHOOK = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
CONFLICT = ('Operation cannot be fulfilled on virtualmachineinstances.kubevirt.io "vm-00": the object has been modified; '
            "please apply your changes to the latest version and try again")


@pytest.fixture
def sim(tmp_path):
    started = start_kubesim(str(write_scenario(tmp_path / "one.yaml", count=1, time_scale=40)), tmp_path / "sim")
    try:
        started.settle()
        yield started
    finally:
        stop_kubesim(started)


def drain(sim, timeout=20, **args) -> dict:
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, api_timeout=30, timeout=timeout, **args)
    return run_service(run, KubevirtNodeDrainOptions, params)


def vmi(sim) -> dict:
    return sim.kubectl_json("get", "vmi", "vm-00", "-n", NS)


def launcher(sim) -> dict:
    node = vmi(sim)["status"]["nodeName"]
    return next(p for p in sim.kubectl_json("get", "pods", "-n", NS, "-l", "kubevirt.io=virt-launcher")["items"]
                if p["spec"]["nodeName"] == node and p["status"]["phase"] == "Running")


@pytest.mark.parametrize("verb, message", [
    ("patch", WEBHOOK + "kubevirt failed marking the vmi for eviction: " + CONFLICT),
    ("get", WEBHOOK + "kubevirt failed getting the vmi: " + CONFLICT),
])
def test_a_webhook_failure_is_retried_as_kubectl_drain_does(sim, verb, message):
    uid = vmi(sim)["metadata"]["uid"]
    assert vmi(sim)["status"]["nodeName"] == "worker-1"
    sim.add_fault(component="virt-api", verb=verb, resource="virtualmachineinstances", name="vm-00", status=409,
                  message=CONFLICT, count=1)
    result = drain(sim, node="worker-1")
    assert sim.admin("GET", "faults")["faults"] == []                      # the one failure was spent
    vm = result["vms"][0]
    assert result["drained"] and not result.get("failed") and vm["result"] == "migrated", result.get("msg")
    assert vm["eviction"]["code"] == 429 and "Eviction triggered evacuation" in vm["eviction"]["message"]   # the retry's answer
    assert vmi(sim)["metadata"]["uid"] == uid and vmi(sim)["status"]["nodeName"] != "worker-1"
    assert result["evictions"]["requests"] == 2, result["evictions"]


def test_a_webhook_failure_that_lasts_fails_the_run_with_kubevirts_message(sim):
    message = WEBHOOK + "kubevirt failed marking the vmi for eviction: " + CONFLICT
    sim.add_fault(component="virt-api", verb="patch", resource="virtualmachineinstances", name="vm-00", status=409,
                  message=CONFLICT)
    result = drain(sim, node="worker-1", timeout=8)
    vm = result["vms"][0]
    # not `blocked` and `drained: true`: the VM is live-migratable and still on the node
    assert vm["result"] == "timeout" and vm["reason"] == (
        "the eviction was still refused (429) at the timeout, retried every 5 s: " + message), vm
    assert result["failed"] is True and result["drained"] is False and message in result["msg"]
    assert result["left"] == ["vms/vm-00"] and result["evictions"]["requests"] == 2
    assert sim.kubectl_json("get", "vmim", "-n", NS)["items"] == [] and "evacuationNodeName" not in vmi(sim)["status"]
    sim.clear_faults()
    again = drain(sim, node="worker-1")                                     # the run the message asks for
    assert again["drained"] and again["vms"][0]["result"] == "migrated", again.get("msg")


def test_hotplug_pod_goes_with_its_vm(sim):
    """pods: all reaches the hotplug attachment Pod; KubeVirt refuses it while the VM runs there (429 `cannot evict
    hotplug pod: ...`) and the Pod goes with the source launcher once the VM has migrated (it is owned by it)."""
    pod = launcher(sim)
    hotplug = "hp-volume-abcde"
    sim.kubectl("apply", "-f", "-", input=f"""
apiVersion: v1
kind: Pod
metadata:
  name: {hotplug}
  namespace: {NS}
  labels: {{kubevirt.io: hotplug-disk}}
  ownerReferences:
  - {{apiVersion: v1, kind: Pod, name: {pod['metadata']['name']}, uid: {pod['metadata']['uid']}, controller: true,
     blockOwnerDeletion: true}}
spec:
  nodeName: {pod['spec']['nodeName']}
  containers: [{{name: hotplug-disk, image: virt-launcher}}]
""")
    refused = sim.kubectl("drain", "worker-1", "--pod-selector=kubevirt.io=hotplug-disk", "--dry-run=server", "--force",
                          "--timeout=3s", check=False, timeout=60)
    assert refused.returncode != 0
    assert (f"{WEBHOOK}cannot evict hotplug pod: {hotplug} associated with running vmi: vm-00 in namespace {NS}"
            in refused.stderr)
    result = drain(sim, node="worker-1", pods="all")
    assert result["vms"][0]["result"] == "migrated", result.get("msg")
    # the refusal lasts only while the VM runs there: the Pod is gone with the source launcher, as kubectl drain
    # (retrying the 429 until the Pod is gone) would report it
    assert [(p["name"], p["result"]) for p in result["pods"]] == [(hotplug, "evicted")], result["pods"]
    assert result["drained"] and not result.get("failed"), result.get("msg")
