"""VM -> VMI -> virt-launcher Pod: the launcher's labels, annotations, volumes, requests and placement,
the VMI and VM status, LiveMigratable and the eviction strategy defaulted at VMI creation."""
import pytest

from kubesim.kubevirt import objects
from kubesim.kubevirt.launcher import memory_overhead
from kubesim.quantity import memory_bytes

from kubevirt_sim import NS, VM, VMI, Sim


@pytest.fixture
def sim():
    sim = Sim([objects.pvc("rwo-disk", NS, ("ReadWriteOnce",)), objects.pvc("rwx-disk", NS, ("ReadWriteMany",)),
               objects.vm("web", NS, labels={"app": "desched-test"}, preferred_node="worker-c"),
               objects.vm("big", NS, memory="2Gi", cpu="2"),
               objects.vm("rwo", NS, pvc_name="rwo-disk"),
               objects.vm("rwx", NS, pvc_name="rwx-disk"),
               objects.vm("off", NS, running=False)])
    yield sim
    sim.stop()


def test_launcher_pod_shape(sim):
    vmi = sim.wait_running("web")
    pod = sim.launcher("web")
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["generateName"] == "virt-launcher-web-" and meta["name"].startswith("virt-launcher-web-")
    assert meta["labels"]["kubevirt.io"] == "virt-launcher"
    assert meta["labels"]["kubevirt.io/created-by"] == vmi["metadata"]["uid"]
    assert meta["labels"]["app"] == "desched-test"          # from the VM template, through the VMI
    assert meta["labels"]["vm.kubevirt.io/name"] == "web"
    assert meta["annotations"]["kubevirt.io/domain"] == "web"
    assert meta["annotations"]["descheduler.alpha.kubernetes.io/request-evict-only"] == ""
    assert meta["ownerReferences"][0]["kind"] == "VirtualMachineInstance"
    assert meta["ownerReferences"][0]["uid"] == vmi["metadata"]["uid"] and meta["ownerReferences"][0]["controller"]
    empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    assert empty_dirs == {"private", "public", "sockets", "ephemeral-disks", "container-disks", "hotplug-disks",
                          "libvirt-runtime"}
    assert [c["name"] for c in spec["containers"]] == ["compute"]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "782Mi"}   # 512Mi + 270Mi
    assert spec["nodeSelector"] == {"kubevirt.io/schedulable": "true"}
    assert spec["restartPolicy"] == "Never" and spec["terminationGracePeriodSeconds"] == 45
    # the preferred node affinity of the template steers placement
    assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert spec["nodeName"] == "worker-c" and vmi["status"]["nodeName"] == "worker-c"


def test_overhead_model_and_explicit_cpu(sim):
    assert memory_overhead({"spec": {"domain": {"resources": {"requests": {"memory": "512Mi"}}}}}) == 270 * 2 ** 20
    sim.wait_running("big")
    requests = sim.launcher("big")["spec"]["containers"][0]["resources"]["requests"]
    assert requests["cpu"] == "2"
    assert memory_bytes(requests["memory"]) == 2 * 2 ** 30 + (245 + 4 + 8 + 16) * 2 ** 20


def test_pvc_volumes_and_live_migratable(sim):
    rwo = sim.wait_running("rwo")
    rwx = sim.wait_running("rwx")
    claims = [v for v in sim.launcher("rwo")["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [{"name": "rootdisk", "persistentVolumeClaim": {"claimName": "rwo-disk"}}]
    cond = next(c for c in rwo["status"]["conditions"] if c["type"] == "LiveMigratable")
    assert cond["status"] == "False" and cond["reason"] == "DisksNotLiveMigratable"
    assert cond["message"] == ("cannot migrate VMI: PVC rwo-disk is not shared, live migration requires that all "
                               "PVCs must be shared (using ReadWriteMany access mode)")
    assert rwo["status"]["migrationMethod"] == "BlockMigration"
    cond = next(c for c in rwx["status"]["conditions"] if c["type"] == "LiveMigratable")
    assert cond["status"] == "True" and "reason" not in cond
    vm = sim.get(VM, "rwo")
    assert next(c for c in vm["status"]["conditions"] if c["type"] == "LiveMigratable")["status"] == "False"


def test_vmi_and_vm_status(sim):
    vmi = sim.wait_running("web")
    assert vmi["metadata"]["labels"]["kubevirt.io/nodeName"] == vmi["status"]["nodeName"]
    assert vmi["metadata"]["ownerReferences"][0]["kind"] == "VirtualMachine"
    assert vmi["metadata"]["labels"]["app"] == "desched-test"
    assert [p["phase"] for p in vmi["status"]["phaseTransitionTimestamps"]] == ["Pending", "Scheduling", "Scheduled",
                                                                                "Running"]
    assert next(c for c in vmi["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    assert vmi["status"]["interfaces"][0]["ipAddress"] == sim.launcher("web")["status"]["podIP"]
    vm = sim.wait_for(lambda: sim.get(VM, "web"), lambda v: v.get("status", {}).get("ready"), what="VM ready")
    assert vm["status"]["printableStatus"] == "Running" and vm["status"]["runStrategy"] == "Always"
    off = sim.get(VM, "off")
    assert off["status"]["printableStatus"] == "Stopped" and off["status"]["runStrategy"] == "Halted"
    assert sim.get(VMI, "off") is None
    assert off["status"]["conditions"][0]["reason"] == "VMINotExists"


def test_eviction_strategy_defaulted_at_creation(sim):
    assert sim.wait_running("web")["spec"]["evictionStrategy"] == "LiveMigrate"   # from the HyperConverged CR
    explicit = sim.create(objects.vmi("explicit", NS, eviction_strategy="None"))
    assert explicit["spec"]["evictionStrategy"] == "None"


def test_stopping_a_vm_deletes_its_vmi_and_launcher(sim):
    sim.wait_running("web")
    sim.patch(VM, "web", {"spec": {"runStrategy": "Halted"}})
    sim.wait(lambda: sim.get(VMI, "web") is None and not sim.launchers("web"), what="VMI and launcher gone")
    sim.wait(lambda: sim.get(VM, "web")["status"]["printableStatus"] == "Stopped", what="VM web Stopped")
    sim.patch(VM, "web", {"spec": {"runStrategy": "Always"}})
    sim.wait_running("web")


def test_unmanaged_vmi_is_left_alone(sim):
    vmi = objects.vmi("static", NS)
    vmi["metadata"]["annotations"] = {"kubesim.io/unmanaged": "true"}
    created = sim.create(vmi)
    sim.settle()
    assert sim.get(VMI, "static")["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert not sim.launchers("static")
