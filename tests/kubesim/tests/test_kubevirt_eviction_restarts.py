"""Eviction without live migration (strategy None): the launcher is deleted and the VMI fails; a VM whose
run strategy keeps it running starts a new VMI (new UID) elsewhere, a VMI replica set makes a
replacement, a bare VMI is not replaced. Also VirtualMachinePools and their `kubevirt.io/vmpool` label."""
import pytest

from kubesim.kubevirt import objects

from kubevirt_sim import NS, VM, VMI, Sim

POOL = "virtualmachinepools.pool.kubevirt.io"
VMIRS = "virtualmachineinstancereplicasets.kubevirt.io"


@pytest.fixture
def sim():
    sim = Sim([objects.vm("always", NS, preferred_node="worker-a"),
               objects.vm("rerun", NS, preferred_node="worker-a", run_strategy="RerunOnFailure"),
               objects.vmi("bare", NS),
               objects.vmi_replicaset("replicas", NS, replicas=2),
               objects.vm_pool("pool", NS, replicas=3)],
              strategy="None")
    yield sim
    sim.stop()


def phase(obj):
    return (obj or {}).get("status", {}).get("phase")


def test_vm_restarts_elsewhere_with_a_new_uid(sim):
    for name in ("always", "rerun"):
        old = sim.wait_running(name)
        assert old["spec"]["evictionStrategy"] == "None" and old["status"]["nodeName"] == "worker-a"
    sim.cordon("worker-a")                      # as kubectl drain does first
    for name in ("always", "rerun"):
        old = sim.get(VMI, name)
        pod = sim.launcher(name)
        assert sim.evict(pod["metadata"]["name"]) is None
        sim.wait(lambda n=pod["metadata"]["name"]: sim.get("pods", n) is None, what="launcher deleted")
        new = sim.wait_for(lambda n=name: sim.get(VMI, n),
                           lambda v, u=old["metadata"]["uid"]: v["metadata"]["uid"] != u and phase(v) == "Running",
                           what=f"new VMI of {name}")
        assert new["status"]["nodeName"] != "worker-a"
        events = sim.events("VirtualMachine", name)
        assert ("SuccessfulDelete", f"Stopped the virtual machine by deleting the virtual machine instance "
                                    f"{old['metadata']['uid']}") in events
        sim.wait(lambda n=name: sim.get(VM, n)["status"]["printableStatus"] == "Running", what=f"VM {name} Running")


def test_replica_set_replaces_an_evicted_vmi(sim):
    sim.wait(lambda: sum(phase(v) == "Running" for v in sim.list(VMI, **{"kubevirt.io/vmReplicaSet": "replicas"})) == 2,
             what="two Running replicas")
    victim = sim.list(VMI, **{"kubevirt.io/vmReplicaSet": "replicas"})[0]
    assert victim["metadata"]["name"].startswith("replicas")
    assert sim.evict(sim.launcher(victim["metadata"]["name"])["metadata"]["name"]) is None
    sim.wait(lambda: sim.get(VMI, victim["metadata"]["name"]) is None, what="evicted VMI removed")
    running = sim.wait_for(lambda: [v for v in sim.list(VMI, **{"kubevirt.io/vmReplicaSet": "replicas"})
                                    if phase(v) == "Running"], lambda vs: len(vs) == 2, what="two replicas")
    assert victim["metadata"]["uid"] not in {v["metadata"]["uid"] for v in running}
    replica_set = sim.wait_for(lambda: sim.get(VMIRS, "replicas"), lambda r: r["status"].get("readyReplicas") == 2,
                               what="the replica set with two ready replicas")
    assert replica_set["status"]["replicas"] == 2
    assert replica_set["status"]["labelSelector"] == "kubevirt.io/vmReplicaSet=replicas"


def test_bare_vmi_is_not_replaced(sim):
    vmi = sim.wait_running("bare")
    pod = sim.launcher("bare")
    assert sim.evict(pod["metadata"]["name"]) is None
    sim.wait(lambda: phase(sim.get(VMI, "bare")) == "Failed", what="bare VMI Failed")
    sim.wait(lambda: not sim.launchers("bare"), what="launcher gone")
    sim.settle()
    after = sim.get(VMI, "bare")
    assert after["metadata"]["uid"] == vmi["metadata"]["uid"] and phase(after) == "Failed"
    assert next(c for c in after["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    assert not sim.launchers("bare")


def test_pool_creates_numbered_vms_whose_launchers_carry_the_pool_label(sim):
    pool = sim.wait_for(lambda: sim.get(POOL, "pool"), lambda p: p["status"].get("readyReplicas") == 3,
                        what="pool ready")
    assert pool["status"]["replicas"] == 3
    names = sorted(vm["metadata"]["name"] for vm in sim.list(VM, **{"kubevirt.io/vmpool": "pool"}))
    assert names == ["pool-0", "pool-1", "pool-2"]
    for name in names:
        assert sim.launcher(name)["metadata"]["labels"]["kubevirt.io/vmpool"] == "pool"
    sim.patch(POOL, "pool", {"spec": {"replicas": 2}})
    sim.wait(lambda: sim.get(VM, "pool-2") is None, what="highest index removed")
    assert sim.get(VM, "pool-0") is not None and sim.get(VM, "pool-1") is not None
