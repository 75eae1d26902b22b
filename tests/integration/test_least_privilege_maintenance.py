"""Least privilege for node maintenance: kubevirt_node_drain and the node_maintenance, node_maintenance_finish and
vm_pdb roles run as users bound only to their documented sets (docs/rbac/kubevirt_node_drain.yaml,
docs/rbac/roles/<role>.yaml) on the maintenance scenario with RBAC on and succeed; with one permission taken out they
fail naming the verb and the resource, and change nothing."""
from __future__ import annotations

import pytest

from support.rbac import api, as_user, assert_denied, grant, manifests, rbac_kubesim, role_denied, without

from .module_call import call_module
from .ansible_run import run_role

pytestmark = pytest.mark.simulator

USERS = ["drain", "maintenance", "finish", "pdb", "rolling", "reduced"]
ROLLING = {"nodes": ["worker-2", "worker-3"], "allow_double_migrations": True}
PENDING_TAINT = "kubevirt-ops.io/maintenance-pending"
ALLOW_ALL = {"allow_shutdown": True, "allow_loss": True, "allow_blocked": True}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    grants = {"drain": manifests("kubevirt_node_drain"), "maintenance": manifests("roles/node_maintenance"),
              "finish": manifests("roles/node_maintenance_finish"), "pdb": manifests("roles/vm_pdb"),
              "rolling": manifests("kubevirt_cluster_maintenance")}
    with rbac_kubesim(tmp_path_factory.mktemp("least-privilege-maintenance"), "maintenance", "maintenance-rbac", USERS, grants) as started:
        yield started


def node(sim, name: str) -> dict:
    return api(sim, "GET", "/api/v1/nodes/" + name)


def pdb(sim) -> dict:
    return api(sim, "GET", "/apis/policy/v1/namespaces/vms/poddisruptionbudgets/pool-pdb")


@pytest.mark.parametrize("resource,verb,cordoned", [
    ("poddisruptionbudgets", "list", False),   # the preflight stops before any change
    ("nodes", "patch", False),                # the cordon is refused
    ("pods/eviction", "create", True),        # refused after the cordon, which stays (as kubectl drain) for a rerun
])
def test_drain_without_one_permission_names_it_and_evicts_nothing(sim, resource, verb, cordoned):
    grant(sim, "reduced", without(manifests("kubevirt_node_drain"), "ClusterRole", resource, verb))
    pods = {p["metadata"]["name"] for p in api(sim, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dworker-2")["items"]}
    result = call_module("kubevirt_node_drain", as_user(sim, "reduced", node="worker-2", timeout=30, **ALLOW_ALL))
    assert_denied(result, verb, resource)
    assert bool(node(sim, "worker-2")["spec"].get("unschedulable")) is cordoned
    assert {p["metadata"]["name"] for p in api(sim, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dworker-2")["items"]} == pods
    uncordoned = call_module("kubevirt_node_drain", as_user(sim, "drain", node="worker-2", state="uncordon"))
    assert not uncordoned["failed"] and uncordoned["changed"] is cordoned, uncordoned


def test_drain_module_safe_to_shutdown_as_its_user(sim):
    result = call_module("kubevirt_node_drain", as_user(sim, "drain", node="worker-3", state="safe_to_shutdown"))
    assert not result["failed"], result
    assert result["safe_to_shutdown"]["safe"] is False  # worker-3 runs VMs


def test_vm_pdb_role_as_its_user_and_without_patch(sim):
    before = pdb(sim)
    variables = {"vm_pdb_namespace": "vms", "vm_pdb_min_available": {"vms/pool-pdb": 2}, "vm_pdb_fail_on_trap": True}
    grant(sim, "reduced", without(manifests("roles/vm_pdb"), "ClusterRole", "poddisruptionbudgets", "patch"))
    role_denied(run_role(sim, "vm_pdb", {"context": "reduced@workload", **variables}, expect_failure=True, name="pdb-denied"),
                "patch", "poddisruptionbudgets")
    assert pdb(sim)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    result = run_role(sim, "vm_pdb", {"context": "pdb@workload", **variables}, name="pdb").result
    assert result["fixed"] == ["vms/pool-pdb"] and result["left"] == []
    assert pdb(sim)["spec"]["minAvailable"] == 2 and "maxUnavailable" not in pdb(sim)["spec"]


def test_node_maintenance_and_finish_roles_as_their_users(sim):
    grant(sim, "reduced", without(manifests("roles/node_maintenance"), "ClusterRole", "pods/eviction", "create"))
    variables = {"node_maintenance_node": "worker-1", "node_maintenance_timeout": 120,
                 **{"node_maintenance_" + key: value for key, value in ALLOW_ALL.items()}}
    role_denied(run_role(sim, "node_maintenance", {"context": "reduced@workload", **variables}, expect_failure=True, name="nm-denied"),
                "create", "pods/eviction")
    result = run_role(sim, "node_maintenance", {"context": "maintenance@workload", **variables}, name="nm").result
    assert result["drained"] and result["moved"] and result["verified"] is True, result
    assert node(sim, "worker-1")["spec"]["unschedulable"] is True
    grant(sim, "reduced", without(manifests("roles/node_maintenance_finish"), "Role", "pods", "create"))
    finish = {"node_maintenance_finish_node": "worker-1", "node_maintenance_finish_timeout": 30}
    role_denied(run_role(sim, "node_maintenance_finish", {"context": "reduced@workload", **finish}, expect_failure=True, name="f-denied"),
                "create", "pods")
    done = run_role(sim, "node_maintenance_finish", {"context": "finish@workload", **finish}, name="f").result
    assert done["uncordoned"] is False and done["takes_pods"] is True  # the denied run had uncordoned it already
    assert not node(sim, "worker-1")["spec"].get("unschedulable")


def pending_taints(sim) -> list:
    return sorted(n["metadata"]["name"] for n in api(sim, "GET", "/api/v1/nodes")["items"]
                  if any(t["key"] == PENDING_TAINT for t in n["spec"].get("taints") or []))


def test_cluster_maintenance_plans_records_and_forgets_as_its_user(sim):
    planned = call_module("kubevirt_cluster_maintenance", as_user(sim, "rolling", **ROLLING))
    assert not planned["failed"] and planned["changed"], planned
    assert pending_taints(sim) == ["worker-2", "worker-3"]
    done = call_module("kubevirt_cluster_maintenance", as_user(sim, "rolling", state="node_done", node="worker-2"))
    assert not done["failed"] and done["taint_lifted"], done
    report = call_module("kubevirt_cluster_maintenance", as_user(sim, "rolling", state="stopped", reason="test"))
    assert not report["failed"] and report["report"]["status"] == "stopped" and pending_taints(sim) == [], report
    forgotten = call_module("kubevirt_cluster_maintenance", as_user(sim, "rolling", state="absent"))
    assert not forgotten["failed"] and forgotten["changed"], forgotten


@pytest.mark.parametrize("kind,resource,verb", [
    ("ClusterRole", "virtualmachineinstances", "list"),   # the plan's read: before any change
    ("Role", "configmaps", "create"),                     # the record is written before the first taint
])
def test_cluster_maintenance_without_one_permission_names_it_and_changes_nothing(sim, kind, resource, verb):
    grant(sim, "reduced", without(manifests("kubevirt_cluster_maintenance"), kind, resource, verb))
    assert_denied(call_module("kubevirt_cluster_maintenance", as_user(sim, "reduced", **ROLLING)), verb, resource)
    assert pending_taints(sim) == []
    assert api(sim, "DELETE", "/api/v1/namespaces/kube-system/configmaps/kubevirt-ops-cluster-maintenance") is None


def test_uncordon_cancels_a_left_evacuation_as_its_user_and_without_the_subresource_names_it(sim):
    """A VM a stopped drain left marked (vm-rwo is not live-migratable: KubeVirt creates no migration for it, the mark
    stays): without update on virtualmachineinstances/evacuate/cancel the uncordon fails naming it, before the uncordon;
    with kubevirt_node_drain's set the mark is cleared and the node given back."""
    sim.kubectl("cordon", "worker-1")
    sim.kubectl("patch", "vmi", "vm-rwo", "-n", "vms", "--subresource=status", "--type=merge", "-p",
                '{"status":{"evacuationNodeName":"worker-1"}}')
    grant(sim, "reduced", without(manifests("kubevirt_node_drain"), "ClusterRole", "virtualmachineinstances/evacuate/cancel", "update"))
    assert_denied(call_module("kubevirt_node_drain", as_user(sim, "reduced", node="worker-1", state="uncordon")),
                  "update", "virtualmachineinstances/evacuate/cancel")
    assert node(sim, "worker-1")["spec"]["unschedulable"] is True
    result = call_module("kubevirt_node_drain", as_user(sim, "drain", node="worker-1", state="uncordon"))
    assert not result["failed"] and result["evacuations"]["stayed"] == ["vms/vm-rwo"], result
    assert "evacuationNodeName" not in api(sim, "GET", "/apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstances/vm-rwo")["status"]
    assert not node(sim, "worker-1")["spec"].get("unschedulable")
