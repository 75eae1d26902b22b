"""virt-api's `evacuate/cancel` (KubeVirt v1.7.0 and newer): it clears `status.evacuationNodeName` so that the
evacuation controller creates no further migration for the VMI; what it refuses and with which codes; the VM path;
discovery; and an older KubeVirt, which has no such route (404) and keeps re-creating migrations."""
import threading
import time

import pytest

from kubesim.kubevirt import objects
from kubesim.server import KubeSimServer

from kubevirt_sim import KUBEVIRT, NS, VMI, VMIM, Sim, put

BASE = f"/apis/subresources.kubevirt.io/v1/namespaces/{NS}"
CANCEL = "evacuate/cancel"


def start(version: str | None = None) -> Sim:
    """Two VMs on worker-a, one migration at a time in the cluster: `stuck`'s migration hangs, so `waiting` queues."""
    sim = Sim([objects.vm("stuck", NS, preferred_node="worker-a", annotations={"kubesim.io/migration": "hang"}),
               objects.vm("waiting", NS, preferred_node="worker-a")],
              live_migration={"parallelMigrationsPerCluster": 1})
    if version:
        kubevirt = sim.list(KUBEVIRT, "kubevirt")[0]
        sim.patch(KUBEVIRT, kubevirt["metadata"]["name"], {"status": {"observedKubeVirtVersion": version}},
                  namespace="kubevirt", subresource="status")
    server = KubeSimServer(("127.0.0.1", 0), {"workload": sim.cluster}, {"gitVersion": "v1.35.0"})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sim.server = server
    for name in ("stuck", "waiting"):
        sim.wait_running(name)
    return sim


@pytest.fixture
def sim():
    sim = start()
    yield sim
    sim.server.shutdown_all()
    sim.stop()


@pytest.fixture
def old_sim():
    sim = start("v1.6.3")
    yield sim
    sim.server.shutdown_all()
    sim.stop()


def mark_both(sim) -> str:
    """Evict both launchers, `stuck` first: both VMIs marked, `stuck` migrating (and hanging), `waiting` queued in the
    evacuation controller behind it (no migration yet: the one running fills parallelMigrationsPerCluster)."""
    assert sim.evict(sim.launcher("stuck")["metadata"]["name"]).code == 429
    running = sim.wait(lambda: [m for m in sim.migrations("stuck") if m.get("status", {}).get("phase") == "Running"],
                       what="stuck's migration Running")
    assert sim.evict(sim.launcher("waiting")["metadata"]["name"]).code == 429
    sim.settle()
    assert sim.get(VMI, "waiting")["status"]["evacuationNodeName"] == "worker-a"
    assert sim.migrations("waiting") == []
    return running[0]["metadata"]["name"]


def simulated_wait(sim, seconds: float) -> None:
    """Let `seconds` of simulated time pass (the evacuation controller rechecks every 5 s)."""
    time.sleep(sim.cluster.clock.real_seconds(seconds))
    sim.settle()


def condition(vmi, ctype):
    return next((c for c in vmi["status"].get("conditions") or [] if c["type"] == ctype), None)


def test_cancel_clears_the_mark_and_no_migration_is_created_after_the_slot_frees(sim):
    stuck_migration = mark_both(sim)
    assert put(sim, f"{BASE}/virtualmachineinstances/waiting/{CANCEL}", {"evacuationNodeName": "worker-a"}) == (200, None)
    vmi = sim.get(VMI, "waiting")
    assert "evacuationNodeName" not in vmi["status"] and vmi["status"]["nodeName"] == "worker-a"
    sim.wait(lambda: condition(sim.get(VMI, "waiting"), "EvictionRequested") is None, what="EvictionRequested removed")
    # the slot frees: the still-marked VMI gets a new migration at once, the cancelled one never does
    sim.delete(VMIM, stuck_migration)
    sim.wait(lambda: any(m["metadata"]["name"] != stuck_migration for m in sim.migrations("stuck")),
             what="a new migration for stuck")
    simulated_wait(sim, 30)
    assert sim.migrations("waiting") == []
    assert sim.get(VMI, "waiting")["status"]["nodeName"] == "worker-a"


def test_cancel_leaves_a_pending_migration_which_deleting_ends_for_good(sim):
    """Evicted together, both get a migration (Pending ones do not count against the limit): the cancel does not
    remove `waiting`'s Pending one, which would still run; deleted (as virtctl's --migrate-cancel does), none comes back."""
    for name in ("stuck", "waiting"):
        assert sim.evict(sim.launcher(name)["metadata"]["name"]).code == 429
    pending = sim.wait(lambda: sim.migrations("waiting"), what="waiting's migration")[0]["metadata"]["name"]
    sim.wait(lambda: any(m.get("status", {}).get("phase") == "Running" for m in sim.migrations("stuck")), what="stuck migrating")
    assert put(sim, f"{BASE}/virtualmachineinstances/waiting/{CANCEL}", {"evacuationNodeName": "worker-a"}) == (200, None)
    simulated_wait(sim, 10)
    assert [(m["metadata"]["name"], m["status"].get("phase")) for m in sim.migrations("waiting")] == [(pending, "Pending")]
    sim.delete(VMIM, pending)
    simulated_wait(sim, 30)
    assert sim.migrations("waiting") == [] and sim.get(VMI, "waiting")["status"]["nodeName"] == "worker-a"


def test_cancel_answers_and_refusals(sim):
    mark_both(sim)
    path = f"{BASE}/virtualmachineinstances/waiting/{CANCEL}"
    # dry run: every check, no change
    assert put(sim, path, {"evacuationNodeName": "worker-a", "dryRun": ["All"]}) == (200, None)
    assert sim.get(VMI, "waiting")["status"]["evacuationNodeName"] == "worker-a"
    # the body must name the node the VMI is marked for: the JSON patch's test fails otherwise (500)
    for body in ({"evacuationNodeName": "worker-b"}, {}, None):
        code, status = put(sim, path, body)
        assert code == 500 and status["reason"] == "InternalError", (body, status)
        assert status["message"].startswith("Internal error occurred: ")
    assert sim.get(VMI, "waiting")["status"]["evacuationNodeName"] == "worker-a"
    code, status = put(sim, path, "not an object")
    assert code == 400 and status["message"].startswith("Can not unmarshal Request body to struct")
    # the legacy drain taint on the evacuation node refuses the cancel (400)
    sim.patch("nodes", "worker-a", {"spec": {"taints": [{"key": "kubevirt.io/drain", "effect": "NoSchedule"}]}}, namespace=None)
    code, status = put(sim, path, {"evacuationNodeName": "worker-a"})
    assert (code, status["reason"], status["message"]) == (
        400, "BadRequest", 'Node "worker-a" has NodeDrainTaintKey "kubevirt.io/drain:NoSchedule"')
    sim.patch("nodes", "worker-a", {"spec": {"taints": None}}, namespace=None)
    # the VM path reaches the VM's VMI; a VMI not marked is a no-op 200
    assert put(sim, f"{BASE}/virtualmachines/waiting/{CANCEL}", {"evacuationNodeName": "worker-a"}) == (200, None)
    assert "evacuationNodeName" not in sim.get(VMI, "waiting")["status"]
    assert put(sim, path, {"evacuationNodeName": "worker-a"}) == (200, None)
    assert put(sim, path, None) == (200, None)
    # not found, and only PUT
    code, status = put(sim, f"{BASE}/virtualmachineinstances/nope/{CANCEL}", {})
    assert (code, status["message"]) == (404, 'virtualmachineinstance.kubevirt.io "nope" not found')
    code, status = put(sim, f"{BASE}/virtualmachines/nope/{CANCEL}", {})
    assert (code, status["message"]) == (404, 'virtualmachine.kubevirt.io "nope" not found')
    assert put(sim, path, method="GET")[0] == 405
    assert put(sim, f"{BASE}/virtualmachineinstances/waiting/evacuate/other", {})[0] == 404


def test_discovery_lists_evacuate_cancel(sim):
    names = {r["name"] for r in put(sim, "/apis/subresources.kubevirt.io/v1", method="GET")[1]["resources"]}
    assert {"virtualmachineinstances/evacuate/cancel", "virtualmachines/evacuate/cancel"} <= names


def test_older_kubevirt_has_no_evacuate_cancel_and_keeps_migrating(old_sim):
    stuck_migration = mark_both(old_sim)
    names = {r["name"] for r in put(old_sim, "/apis/subresources.kubevirt.io/v1", method="GET")[1]["resources"]}
    assert not any(name.endswith(CANCEL) for name in names) and "virtualmachines/migrate" in names
    code, status = put(old_sim, f"{BASE}/virtualmachineinstances/waiting/{CANCEL}", {"evacuationNodeName": "worker-a"})
    assert (code, status["message"]) == (404, "the server could not find the requested resource")
    old_sim.patch("nodes", "worker-a", {"spec": {"unschedulable": None}}, namespace=None)   # the node given back
    old_sim.delete(VMIM, stuck_migration)
    old_sim.wait(lambda: old_sim.migrations("waiting"), what="a migration for the still-marked VMI")
