"""virt-api's `subresources.kubevirt.io` over HTTP, as virtctl and kubevirt.core call it: start, stop, restart,
migrate, pause, unpause with upstream's effects, codes and Status messages, dry runs, discovery, and RBAC asking
about `virtualmachines/<sub>` in group `subresources.kubevirt.io` with verb `update`."""
import threading

import pytest

from kubesim.kubevirt import objects
from kubesim.rbac import Attributes, rule_allows
from kubesim.server import KubeSimServer

from kubevirt_sim import NS, VM, VMI, VMIM, Sim, put

BASE = f"/apis/subresources.kubevirt.io/v1/namespaces/{NS}"


@pytest.fixture
def sim():
    sim = Sim([objects.vm("web", NS), objects.vm("manual", NS, run_strategy="Manual"),
               objects.vm("off", NS, run_strategy="Halted"), objects.vm("legacy", NS, running=False),
               objects.vm("frozen", NS, annotations={"kubesim.io/unmanaged": "true"})])
    server = KubeSimServer(("127.0.0.1", 0), {"workload": sim.cluster}, {"gitVersion": "v1.35.0"})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sim.server = server
    yield sim
    server.shutdown_all()
    sim.stop()


def conflict(resource: str, name: str, why: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict", "code": 409,
            "message": f'Operation cannot be fulfilled on {resource}.kubevirt.io "{name}": {why}',
            "details": {"name": name, "group": "kubevirt.io", "kind": resource}}


def test_discovery_lists_the_aggregated_group(sim):
    groups = put(sim, "/apis", method="GET")[1]
    group = next(g for g in groups["groups"] if g["name"] == "subresources.kubevirt.io")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha3"]
    assert group["preferredVersion"] == {"groupVersion": "subresources.kubevirt.io/v1", "version": "v1"}
    code, doc = put(sim, "/apis/subresources.kubevirt.io/v1", method="GET")
    assert code == 200 and doc["groupVersion"] == "subresources.kubevirt.io/v1" and doc["apiVersion"] == "v1"
    assert {"name": "virtualmachines/migrate", "singularName": "", "namespaced": True, "kind": "",
            "verbs": None} in doc["resources"]
    names = {r["name"] for r in doc["resources"]}
    assert {"virtualmachines/start", "virtualmachines/stop", "virtualmachines/restart",
            "virtualmachineinstances/pause", "virtualmachineinstances/unpause"} <= names
    # the group addresses subresources only: no VM list there, GET on a subresource is refused
    assert put(sim, f"{BASE}/virtualmachines", method="GET")[0] == 404
    assert put(sim, f"{BASE}/virtualmachines/web/start", method="GET")[0] == 405


def test_stop_and_start_an_always_vm_flip_the_run_strategy(sim):
    sim.wait_running("web")
    code, body = put(sim, f"{BASE}/virtualmachines/web/start")
    assert (code, body) == (409, conflict("virtualmachine", "web", "VM is already running"))
    assert put(sim, f"{BASE}/virtualmachines/web/stop", {}) == (202, None)
    assert sim.get(VM, "web")["spec"]["runStrategy"] == "Halted"
    sim.wait(lambda: sim.get(VMI, "web") is None, what="VMI web gone")
    assert put(sim, f"{BASE}/virtualmachines/web/start") == (202, None)
    assert sim.get(VM, "web")["spec"]["runStrategy"] == "Always"
    sim.wait_running("web")
    assert put(sim, f"{BASE}/virtualmachines/web/start") == (
        409, conflict("virtualmachine", "web", "VM is already running"))


def test_start_of_a_deprecated_running_false_vm_sets_running_true(sim):
    assert put(sim, f"{BASE}/virtualmachines/legacy/start") == (202, None)
    assert sim.get(VM, "legacy")["spec"]["running"] is True
    sim.wait_running("legacy")


def test_strategy_refusals_and_not_found(sim):
    sim.wait_running("web")
    assert put(sim, f"{BASE}/virtualmachines/off/stop") == (
        409, conflict("virtualmachine", "off", "VM is not running"))
    assert put(sim, f"{BASE}/virtualmachines/off/restart") == (
        409, conflict("virtualmachine", "off", "RunStategy Halted does not support manual restart requests"))
    assert put(sim, f"{BASE}/virtualmachines/frozen/start") == (     # Always, no VMI (the controller leaves it)
        409, conflict("virtualmachine", "frozen", "Always does not support manual start requests"))
    sim.patch(VM, "web", {"spec": {"runStrategy": "Once"}})
    assert put(sim, f"{BASE}/virtualmachines/web/start")[1]["message"].endswith("VM is already running")
    code, body = put(sim, f"{BASE}/virtualmachines/nope/start")
    assert (code, body["message"], body["details"]) == (
        404, 'virtualmachine.kubevirt.io "nope" not found',
        {"name": "nope", "group": "kubevirt.io", "kind": "virtualmachine"})
    code, body = put(sim, f"{BASE}/virtualmachines/web/restart", {"gracePeriodSeconds": 5})
    assert (code, body["reason"], body["message"]) == (400, "BadRequest",
                                                       "For force restart, only gracePeriod=0 is supported for now")
    code, body = put(sim, f"{BASE}/virtualmachineinstances/nope/pause")
    assert (code, body["message"]) == (404, 'virtualmachineinstance.kubevirt.io "nope" not found')


def test_manual_vm_start_and_stop_go_through_state_change_requests(sim):
    assert sim.get(VMI, "manual") is None
    assert put(sim, f"{BASE}/virtualmachines/manual/start", {"dryRun": ["All"]}) == (202, None)
    assert "stateChangeRequests" not in sim.get(VM, "manual").get("status", {})
    assert put(sim, f"{BASE}/virtualmachines/manual/start") == (202, None)
    vmi = sim.wait_running("manual")
    sim.wait(lambda: "stateChangeRequests" not in sim.get(VM, "manual")["status"], what="start request consumed")
    assert sim.get(VM, "manual")["spec"]["runStrategy"] == "Manual"
    assert put(sim, f"{BASE}/virtualmachines/manual/stop") == (202, None)
    sim.wait(lambda: sim.get(VMI, "manual") is None, what="VMI gone")
    sim.wait(lambda: "stateChangeRequests" not in sim.get(VM, "manual")["status"], what="stop request consumed")
    assert put(sim, f"{BASE}/virtualmachines/manual/stop") == (
        409, conflict("virtualmachine", "manual", "VM is not running"))
    assert vmi["metadata"]["uid"]


def test_restart_replaces_the_vmi(sim):
    old = sim.wait_running("web")
    assert put(sim, f"{BASE}/virtualmachines/web/restart", {"dryRun": ["All"]}) == (202, None)
    assert sim.get(VMI, "web")["metadata"]["uid"] == old["metadata"]["uid"]
    assert put(sim, f"{BASE}/virtualmachines/web/restart", {}) == (202, None)
    new = sim.wait_for(lambda: sim.get(VMI, "web"), lambda v: v["metadata"]["uid"] != old["metadata"]["uid"]
                       and v.get("status", {}).get("phase") == "Running", what="new VMI")
    assert new["metadata"]["ownerReferences"][0]["kind"] == "VirtualMachine"
    sim.wait(lambda: "stateChangeRequests" not in sim.get(VM, "web")["status"], what="requests consumed")
    assert ("SuccessfulDelete", f"Stopped the virtual machine by deleting the virtual machine instance "
            f"{old['metadata']['uid']}") in sim.events("VirtualMachine", "web")


def test_migrate_creates_a_generate_name_migration(sim):
    sim.wait_running("web")
    assert put(sim, f"{BASE}/virtualmachines/web/migrate", {"dryRun": ["All"]}) == (202, None)
    assert sim.migrations("web") == []
    assert put(sim, f"{BASE}/virtualmachines/web/migrate", {}) == (202, None)
    (migration,) = sim.migrations("web")
    assert migration["metadata"]["generateName"] == "kubevirt-migrate-vm-"
    assert migration["metadata"]["name"].startswith("kubevirt-migrate-vm-") and len(migration["metadata"]["name"]) == 25
    assert migration["spec"] == {"vmiName": "web"}
    assert put(sim, f"{BASE}/virtualmachines/off/migrate") == (
        404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "NotFound",
              "code": 404, "message": 'virtualmachineinstance.kubevirt.io "off" not found',
              "details": {"name": "off", "group": "kubevirt.io", "kind": "virtualmachineinstance"}})
    assert sim.get(VMIM, migration["metadata"]["name"]) is not None


def test_pause_and_unpause_set_the_paused_condition(sim):
    sim.wait_running("web")
    assert put(sim, f"{BASE}/virtualmachineinstances/web/unpause") == (
        409, conflict("virtualmachineinstance", "web", "VMI is not paused"))
    assert put(sim, f"{BASE}/virtualmachineinstances/web/pause", {"dryRun": ["All"]}) == (200, None)
    assert not any(c["type"] == "Paused" for c in sim.get(VMI, "web")["status"]["conditions"])
    assert put(sim, f"{BASE}/virtualmachineinstances/web/pause") == (200, None)
    paused = next(c for c in sim.get(VMI, "web")["status"]["conditions"] if c["type"] == "Paused")
    assert (paused["status"], paused["reason"], paused["message"]) == ("True", "PausedByUser", "VMI was paused by user")
    sim.wait(lambda: sim.get(VM, "web")["status"]["printableStatus"] == "Paused", what="VM Paused")
    assert put(sim, f"{BASE}/virtualmachineinstances/web/pause") == (
        409, conflict("virtualmachineinstance", "web", "VMI is already paused"))
    assert put(sim, f"{BASE}/virtualmachineinstances/web/unpause") == (200, None)
    assert not any(c["type"] == "Paused" for c in sim.get(VMI, "web")["status"]["conditions"])


def test_bad_body_is_400(sim):
    code, body = put(sim, f"{BASE}/virtualmachines/web/stop", "not an object")
    assert code == 400 and body["message"].startswith("Can not unmarshal Request body to struct, error: ")


def test_rbac_asks_about_the_subresource_in_the_subresources_group():
    attrs = Attributes(verb="update", group="subresources.kubevirt.io", resource="virtualmachines",
                       subresource="migrate", namespace=NS, name="web")
    assert rule_allows({"apiGroups": ["subresources.kubevirt.io"], "resources": ["virtualmachines/migrate"],
                        "verbs": ["update"]}, attrs)
    assert not rule_allows({"apiGroups": ["kubevirt.io"], "resources": ["virtualmachines/migrate"],
                            "verbs": ["update"]}, attrs)
