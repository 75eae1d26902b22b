"""Instance types and preferences (instancetype.kubevirt.io/v1beta1): the kinds as virt-operator's CRDs declare
them, and a VM referencing one gets its CPU topology, guest memory and name annotations in its VMI."""
import pytest

from kubesim.kubevirt import objects
from kubesim.kubevirt.instancetype import topology

from kubevirt_sim import NS, VMI, Sim

GROUP = "instancetype.kubevirt.io/v1beta1"


def instancetype(name, guest, memory, cluster=True, **extra):
    kind = "VirtualMachineClusterInstancetype" if cluster else "VirtualMachineInstancetype"
    meta = {"name": name} if cluster else {"name": name, "namespace": NS}
    return {"apiVersion": GROUP, "kind": kind, "metadata": meta,
            "spec": {"cpu": {"guest": guest}, "memory": {"guest": memory, **extra}}}


def vm_with(name, kind, it_name, preference=None):
    vm = objects.vm(name, NS)
    del vm["spec"]["template"]["spec"]["domain"]["resources"]
    vm["spec"]["instancetype"] = {"kind": kind, "name": it_name} if kind else {"name": it_name}
    if preference:
        vm["spec"]["preference"] = preference
    return vm


@pytest.fixture
def sim():
    pref = {"apiVersion": GROUP, "kind": "VirtualMachinePreference", "metadata": {"name": "cores", "namespace": NS},
            "spec": {"cpu": {"preferredCPUTopology": "cores"}}}
    small = instancetype("small", 1, "1Gi", cluster=False, overcommitPercent=25)
    sim = Sim([instancetype("u1.medium", 2, "4Gi"), small, pref,
               vm_with("cluster", "", "u1.medium"),
               vm_with("local", "VirtualMachineInstancetype", "small"),
               vm_with("prefers", "virtualmachineclusterinstancetype", "u1.medium",
                       {"kind": "VirtualMachinePreference", "name": "cores"})])
    yield sim
    sim.stop()


def test_kinds_as_the_crds_declare_them(sim):
    registry = sim.cluster.registry
    for kind, namespaced, shorts in (("VirtualMachineInstancetype", True,
                                      ("vminstancetype", "vminstancetypes", "vmf", "vmfs")),
                                     ("VirtualMachineClusterInstancetype", False,
                                      ("vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs")),
                                     ("VirtualMachinePreference", True, ("vmpref", "vmprefs", "vmp", "vmps")),
                                     ("VirtualMachineClusterPreference", False, ("vmcp", "vmcps"))):
        rt = registry.by_kind(GROUP, kind)
        assert (rt.namespaced, rt.short_names, rt.plural) == (namespaced, shorts, kind.lower() + "s")
        assert "status" not in rt.subresources


def test_cluster_instancetype_default_kind_sets_sockets_and_memory(sim):
    vmi = sim.wait_running("cluster")
    domain = vmi["spec"]["domain"]
    assert domain["cpu"]["sockets"] == 2 and domain["cpu"]["cores"] == 1 and domain["cpu"]["threads"] == 1
    assert domain["memory"]["guest"] == "4Gi"
    assert vmi["metadata"]["annotations"]["kubevirt.io/cluster-instancetype-name"] == "u1.medium"
    assert "kubevirt.io/instancetype-name" not in vmi["metadata"]["annotations"]
    assert vmi["status"]["currentCPUTopology"] == {"cores": 1, "sockets": 2, "threads": 1}
    requests = sim.launcher("cluster")["spec"]["containers"][0]["resources"]["requests"]
    assert requests["cpu"] == "200m"       # 100m per vCPU


def test_namespaced_instancetype_with_overcommit(sim):
    vmi = sim.wait_running("local")
    assert vmi["metadata"]["annotations"]["kubevirt.io/instancetype-name"] == "small"
    assert vmi["spec"]["domain"]["memory"]["guest"] == "1Gi"
    assert vmi["spec"]["domain"]["resources"]["requests"]["memory"] == "768Mi"   # 25 % below the guest memory
    assert vmi["spec"]["domain"]["cpu"] == {"cores": 1, "sockets": 1, "threads": 1}


def test_preference_topology_and_annotation(sim):
    vmi = sim.wait_running("prefers")
    assert vmi["spec"]["domain"]["cpu"]["cores"] == 2 and vmi["spec"]["domain"]["cpu"]["sockets"] == 1
    assert vmi["metadata"]["annotations"]["kubevirt.io/preference-name"] == "cores"
    assert topology(4, {"cpu": {"preferredCPUTopology": "preferThreads"}}) == {"cores": 1, "sockets": 1, "threads": 4}


def test_conflict_and_missing_instancetype_create_no_vmi(sim):
    bad = vm_with("bad", "", "u1.medium")
    bad["spec"]["template"]["spec"]["domain"]["cpu"] = {"sockets": 2}
    sim.create(bad)
    sim.create(vm_with("missing", "", "nope"))
    sim.settle()
    assert sim.get(VMI, "bad") is None and sim.get(VMI, "missing") is None
    assert ("FailedCreate", "Error creating virtual machine instance: VM field(s) spec.template.spec.domain.cpu.sockets "
            "conflicts with selected instance type") in sim.events("VirtualMachine", "bad")
    assert ("FailedCreate", 'Error creating virtual machine instance: virtualmachineclusterinstancetypes.'
            'instancetype.kubevirt.io "nope" not found') in sim.events("VirtualMachine", "missing")
