"""The `virt-launcher-eviction-interceptor.kubevirt.io` webhook: its decision for each eviction strategy,
its exact 429 messages, the marking of the VMI and the descheduler's eviction-source annotation."""
import pytest

from kubesim.kubevirt import objects

from kubevirt_sim import NS, VMI, VMIM, Sim

PREFIX = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
DESCHEDULER = {"requested-by": "sigs.k8s.io/descheduler"}


@pytest.fixture
def sim():
    sim = Sim([objects.pvc("rwo-disk", NS, ("ReadWriteOnce",)),
               objects.vm("lm", NS, eviction_strategy="LiveMigrate", annotations={"kubesim.io/migration": "hang"}),
               objects.vm("lm-rwo", NS, eviction_strategy="LiveMigrate", pvc_name="rwo-disk"),
               objects.vm("ifp", NS, eviction_strategy="LiveMigrateIfPossible",
                          annotations={"kubesim.io/migration": "hang"}),
               objects.vm("ifp-rwo", NS, eviction_strategy="LiveMigrateIfPossible", pvc_name="rwo-disk",
                          run_strategy="Once"),
               objects.vm("ext", NS, eviction_strategy="External", pvc_name="rwo-disk"),
               objects.vm("none", NS, eviction_strategy="None", run_strategy="Once"),
               objects.vm("default", NS, annotations={"kubesim.io/migration": "hang"})],
              strategy=None)     # HyperConverged without evictionStrategy: the cluster default renders None
    for name in ("lm", "lm-rwo", "ifp", "ifp-rwo", "ext", "none", "default"):
        sim.wait_running(name)
    yield sim
    sim.stop()


def test_live_migrate_marks_and_answers_429(sim):
    pod = sim.launcher("lm")
    err = sim.evict(pod["metadata"]["name"], annotations=DESCHEDULER)
    assert err.code == 429 and err.reason == "TooManyRequests"
    assert err.message == PREFIX + 'Eviction triggered evacuation of VMI "vms/lm"'
    vmi = sim.get(VMI, "lm")
    assert vmi["status"]["evacuationNodeName"] == pod["spec"]["nodeName"]
    assert vmi["metadata"]["annotations"]["kubevirt.io/eviction-source"] == "descheduler"
    assert sim.get("pods", pod["metadata"]["name"])["metadata"].get("deletionTimestamp") is None
    again = sim.evict(pod["metadata"]["name"])
    assert again.message == PREFIX + 'Evacuation in progress: Eviction triggered evacuation of VMI "vms/lm"'


def test_live_migrate_not_migratable_is_refused(sim):
    err = sim.evict(sim.launcher("lm-rwo")["metadata"]["name"])
    assert err.code == 429
    assert err.message == PREFIX + "VMI lm-rwo is configured with an eviction strategy but is not live-migratable"
    assert "evacuationNodeName" not in sim.get(VMI, "lm-rwo")["status"]


def test_live_migrate_if_possible(sim):
    err = sim.evict(sim.launcher("ifp")["metadata"]["name"])          # migratable: marked, no eviction source
    assert err.message == PREFIX + 'Eviction triggered evacuation of VMI "vms/ifp"'
    assert "kubevirt.io/eviction-source" not in (sim.get(VMI, "ifp")["metadata"].get("annotations") or {})
    pod = sim.launcher("ifp-rwo")                                      # not migratable: the Pod is evicted
    assert sim.evict(pod["metadata"]["name"]) is None
    assert sim.get("pods", pod["metadata"]["name"])["metadata"]["deletionTimestamp"]


def test_external_always_marks(sim):
    err = sim.evict(sim.launcher("ext")["metadata"]["name"], annotations=DESCHEDULER)
    assert err.message == PREFIX + 'Eviction triggered evacuation of VMI "vms/ext"'
    assert sim.get(VMI, "ext")["status"]["evacuationNodeName"]
    sim.settle()
    assert not sim.migrations("ext")                    # External: KubeVirt never migrates, another controller acts
    assert ("FailedCreate", "VirtualMachineInstance is not migrateable") not in sim.events("VirtualMachineInstance", "ext")


def test_none_and_cluster_default_none_allow(sim):
    assert sim.get(VMI, "default")["spec"].get("evictionStrategy") in (None, "None")
    for name in ("none", "default"):
        pod = sim.launcher(name)
        assert sim.evict(pod["metadata"]["name"]) is None
        assert sim.get("pods", pod["metadata"]["name"])["metadata"]["deletionTimestamp"]


def test_dry_run_does_not_mark(sim):
    err = sim.evict(sim.launcher("lm")["metadata"]["name"], dry_run=True)
    assert err.message == PREFIX + 'Eviction triggered evacuation of VMI "vms/lm"'
    assert "evacuationNodeName" not in sim.get(VMI, "lm")["status"]


def test_target_pod_and_other_pods(sim):
    # a user migration (not an evacuation) that hangs: its target Pod is not on the VMI's node
    sim.create({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
                "metadata": {"name": "manual", "namespace": NS}, "spec": {"vmiName": "lm"}})
    sim.wait(lambda: sim.get(VMIM, "manual").get("status", {}).get("phase") == "Running", what="migration Running")
    vmi = sim.get(VMI, "lm")
    target = next(p for p in sim.launchers("lm") if p["spec"]["nodeName"] != vmi["status"]["nodeName"])
    err = sim.evict(target["metadata"]["name"])
    assert err.message == PREFIX + "Eviction request for target Pod"
    sim.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": NS},
                "spec": {"nodeName": "worker-a", "containers": [{"name": "c", "image": "i"}]}})
    assert sim.evict("plain") is None


def test_missing_vmi(sim):
    pod = sim.launcher("none")
    sim.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "orphan-launcher", "namespace": NS, "labels": {"kubevirt.io": "virt-launcher"},
                             "annotations": {"kubevirt.io/domain": "ghost"}},
                "spec": {"nodeName": pod["spec"]["nodeName"], "containers": [{"name": "compute", "image": "i"}]}})
    err = sim.evict("orphan-launcher")
    assert err.code == 429
    assert err.message == PREFIX + 'kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io "ghost" not found'
