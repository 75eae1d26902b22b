"""HyperConverged -> KubeVirt CR: eviction strategy and live migration settings propagate, direct edits of
the KubeVirt CR are reconciled back, versions are reported, and a strategy change only affects VMIs created
afterwards."""
import pytest

from kubesim.kubevirt import objects

from kubevirt_sim import HCO, KUBEVIRT, NS, VM, VMI, Sim

KV_NAME = "kubevirt-kubevirt-hyperconverged"
HCO_NAME = "kubevirt-hyperconverged"


@pytest.fixture
def sim():
    sim = Sim([objects.vm("early", NS)], strategy=None)
    yield sim
    sim.stop()


def kubevirt(sim):
    return sim.get(KUBEVIRT, KV_NAME, "kubevirt")


def test_empty_hyperconverged_renders_none_and_defaults(sim):
    hco = sim.get(HCO, HCO_NAME, "kubevirt")
    assert hco["spec"]["liveMigrationConfig"] == {"allowAutoConverge": False, "allowPostCopy": False,
                                                  "completionTimeoutPerGiB": 150, "parallelMigrationsPerCluster": 5,
                                                  "parallelOutboundMigrationsPerNode": 2, "progressTimeout": 150}
    kv = kubevirt(sim)
    assert kv["spec"]["configuration"]["evictionStrategy"] == "None"
    assert kv["spec"]["configuration"]["migrations"]["parallelMigrationsPerCluster"] == 5
    assert kv["metadata"]["ownerReferences"][0]["kind"] == "HyperConverged"
    assert kv["status"]["phase"] == "Deployed" and kv["status"]["observedKubeVirtVersion"] == "v1.8.4"
    versions = sim.get(HCO, HCO_NAME, "kubevirt")["status"]["versions"]
    assert {"name": "operator", "version": "1.18.1"} in versions


def test_strategy_change_propagates_and_affects_new_vmis_only(sim):
    early = sim.wait_running("early")
    assert early["spec"]["evictionStrategy"] == "None"
    sim.patch(HCO, HCO_NAME, {"spec": {"evictionStrategy": "LiveMigrate",
                                       "liveMigrationConfig": {"parallelOutboundMigrationsPerNode": 1}}},
              namespace="kubevirt")
    sim.wait(lambda: kubevirt(sim)["spec"]["configuration"]["evictionStrategy"] == "LiveMigrate", what="propagated")
    assert kubevirt(sim)["spec"]["configuration"]["migrations"]["parallelOutboundMigrationsPerNode"] == 1
    sim.create(objects.vm("late", NS))
    assert sim.wait_running("late")["spec"]["evictionStrategy"] == "LiveMigrate"
    assert sim.get(VMI, "early")["spec"]["evictionStrategy"] == "None"          # recorded at creation
    # the existing VMI keeps None: its eviction deletes the launcher instead of migrating
    assert sim.evict(sim.launcher("early")["metadata"]["name"]) is None
    # a restart (new VMI) picks up the new default
    old_uid = early["metadata"]["uid"]
    sim.wait_for(lambda: sim.get(VMI, "early"), lambda v: v["metadata"]["uid"] != old_uid, what="restarted VMI")
    assert sim.wait_running("early")["spec"]["evictionStrategy"] == "LiveMigrate"
    assert sim.get(VM, "early")["spec"]["template"]["spec"].get("evictionStrategy") is None


def test_direct_edits_of_the_kubevirt_cr_are_reconciled_back(sim):
    sim.patch(KUBEVIRT, KV_NAME, {"spec": {"configuration": {"evictionStrategy": "LiveMigrate",
                                                             "migrations": {"parallelMigrationsPerCluster": 50}}}},
              namespace="kubevirt")
    sim.wait(lambda: kubevirt(sim)["spec"]["configuration"]["evictionStrategy"] == "None", what="reconciled")
    assert kubevirt(sim)["spec"]["configuration"]["migrations"]["parallelMigrationsPerCluster"] == 5
    sim.wait_event("HyperConverged", HCO_NAME, "Overwritten", f"Overwritten KubeVirt {KV_NAME}", "kubevirt")
    sim.delete(KUBEVIRT, KV_NAME, namespace="kubevirt")
    sim.wait(lambda: kubevirt(sim) is not None and kubevirt(sim)["status"].get("phase") == "Deployed",
             what="KubeVirt CR recreated")
