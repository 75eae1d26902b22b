"""VMI status.interfaces as virt-handler reports them: one entry per declared interface, the pod network with the
Pod's IPs, multus networks with the IPs of the Pod's network-status annotation (infoSource multus-status)."""
import json

from kubesim.kubevirt import objects
from kubesim.kubevirt.vmi import interface_status, pod_interface_name

from kubevirt_sim import NS, Sim


def multus_vm(name):
    vm = objects.vm(name, NS)
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["interfaces"] = [{"name": "default", "masquerade": {}},
                                               {"name": "blue", "bridge": {}, "macAddress": "02:00:00:00:00:0b"},
                                               {"name": "gone", "bridge": {}, "state": "absent"},
                                               {"name": "red", "bridge": {}, "state": "down"}]
    spec["networks"] = [{"name": "default", "pod": {}}, {"name": "blue", "multus": {"networkName": "vlan10"}},
                        {"name": "gone", "multus": {"networkName": "vlan11"}},
                        {"name": "red", "multus": {"networkName": "vlan12"}}]
    return vm


def test_hashed_pod_interface_names():
    assert pod_interface_name({"name": "default", "pod": {}}) == "eth0"
    assert pod_interface_name({"name": "blue", "multus": {"networkName": "vlan10"}}) == "pod16477688c0e"
    assert pod_interface_name({"name": "x", "multus": {"networkName": "n", "default": True}}) == "eth0"


def test_every_declared_interface_is_reported():
    sim = Sim([multus_vm("multi")])
    try:
        vmi = sim.wait_running("multi")
        pod = sim.launcher("multi")
        interfaces = vmi["status"]["interfaces"]
        assert [i["name"] for i in interfaces] == ["default", "blue", "red"]
        default, blue, red = interfaces
        assert default["ipAddress"] == pod["status"]["podIP"] and default["ipAddresses"] == [pod["status"]["podIP"]]
        assert (default["infoSource"], default["interfaceName"], default["podInterfaceName"], default["queueCount"],
                default["linkState"]) == ("domain, guest-agent", "eth0", "eth0", 1, "up")
        assert blue == {"infoSource": "domain, guest-agent", "interfaceName": "eth1", "linkState": "up",
                        "mac": "02:00:00:00:00:0b", "name": "blue", "podInterfaceName": "pod16477688c0e",
                        "queueCount": 1}
        assert red["linkState"] == "down" and red["interfaceName"] == "eth2"
    finally:
        sim.stop()


def test_multus_ips_from_the_network_status_annotation():
    vmi = multus_vm("m")["spec"]["template"]
    vmi = {"metadata": {"uid": "u1"}, "spec": vmi["spec"]}
    status = [{"name": "ovn-kubernetes", "interface": "eth0", "ips": ["10.128.0.5"], "default": True},
              {"name": f"{NS}/vlan10", "interface": "pod16477688c0e", "ips": ["192.168.10.7", "fd10::7"],
               "mac": "02:00:00:00:00:0b"}]
    pod = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/network-status": json.dumps(status)}},
           "status": {"podIP": "10.128.0.5", "podIPs": [{"ip": "10.128.0.5"}]}}
    default, blue, red = interface_status(vmi, pod)
    assert default["infoSource"] == "domain, guest-agent, multus-status" and default["ipAddress"] == "10.128.0.5"
    assert (blue["infoSource"], blue["ipAddress"], blue["ipAddresses"]) == (
        "domain, guest-agent, multus-status", "192.168.10.7", ["192.168.10.7", "fd10::7"])
    assert red["infoSource"] == "domain, guest-agent" and "ipAddress" not in red
