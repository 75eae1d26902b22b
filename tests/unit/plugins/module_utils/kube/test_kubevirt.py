"""KubeVirt derivations from upstream-shaped objects: effective strategy, migratability, owners, launchers,
PVCs, PDBs, migration limits, the verdict per VMI (KubeVirt's eviction webhook first, then the PDB check, then
what brings the VM back) and the findings."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv

from .. import k8s_objects as k8s

WEBHOOK = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '


def facts_for(vmi, pods=None, vms=(), pvcs=(), pdbs=(), migrations=(), cluster=None):
    pods = [k8s.launcher(vmi)] if pods is None else pods
    launchers = kv.index_launchers(pods)
    pairs = [(p, kv.disruptions_allowed(p, True, pods)) for p in pdbs]
    return kv.vmi_facts(vmi, cluster, launchers, {kv.ref(v): v for v in vms}, {kv.ref(p): p for p in pvcs}, pairs, list(migrations))


# ------------------------------------------------------------------------------------------ strategy
@pytest.mark.parametrize("recorded, cluster, expected", [
    ("LiveMigrate", None, "LiveMigrate"),
    ("None", "LiveMigrate", "None"),                       # the VMI's own value wins, even None
    (None, "LiveMigrateIfPossible", "LiveMigrateIfPossible"),
    (None, None, "None"),                                   # KubeVirt's internal default
    ("External", "LiveMigrate", "External"),
])
def test_effective_strategy_vmi_then_cluster_then_none(recorded, cluster, expected):
    assert kv.effective_strategy(k8s.vmi(strategy=recorded), cluster) == expected


def test_cluster_strategy_from_kubevirt_cr():
    assert kv.cluster_strategy(k8s.kubevirt_cr("LiveMigrateIfPossible")) == "LiveMigrateIfPossible"
    assert kv.cluster_strategy(k8s.kubevirt_cr()) is None
    assert kv.cluster_strategy(None) is None


def test_pick_kubevirt_skips_one_being_deleted():
    old = k8s.kubevirt_cr("None")
    old["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    new = k8s.kubevirt_cr("LiveMigrate")
    assert kv.pick_kubevirt([old, new]) is new
    assert kv.pick_kubevirt([]) is None


def test_live_migratable_reads_the_condition():
    assert kv.live_migratable(k8s.vmi())["migratable"] is True
    result = kv.live_migratable(k8s.vmi(migratable=False, reason="DisksNotLiveMigratable",
                                        message="cannot migrate VMI: PVC rootdisk is not shared"))
    assert result == {"migratable": False, "status": "False", "reason": "DisksNotLiveMigratable",
                      "message": "cannot migrate VMI: PVC rootdisk is not shared"}
    assert kv.live_migratable(k8s.vmi(migratable=None))["migratable"] is False   # absent is not migratable


def test_migration_limits_fill_upstream_defaults():
    limits = kv.migration_limits(k8s.kubevirt_cr(migrations={"parallelMigrationsPerCluster": 2, "allowPostCopy": True}))
    assert limits == {"parallel_migrations_per_cluster": 2, "parallel_outbound_migrations_per_node": 2,
                      "bandwidth_per_migration": None, "completion_timeout_per_gib": 150, "progress_timeout": 150,
                      "allow_post_copy": True, "configured": ["allowPostCopy", "parallelMigrationsPerCluster"]}
    assert kv.migration_limits(None)["parallel_migrations_per_cluster"] == 5


def test_kubevirt_and_hyperconverged_facts():
    facts = kv.kubevirt_facts(k8s.kubevirt_cr("LiveMigrate", feature_gates=["LiveMigration"]))
    assert facts["version"] == "v1.8.4" and facts["eviction_strategy"] == "LiveMigrate" and facts["feature_gates"] == ["LiveMigration"]
    assert facts["namespace"] == "kubevirt" and facts["found"]
    hco = kv.hyperconverged_facts(k8s.hyperconverged())
    assert hco["version"] == "1.18.1" and hco["eviction_strategy"] == "LiveMigrateIfPossible"
    assert kv.hyperconverged_facts(None)["found"] is False


# ------------------------------------------------------------------------------------------ owners
def test_owner_vm_with_run_strategy():
    vmi = k8s.vmi(owner=("VirtualMachine", "vm-a"))
    info = kv.owner(vmi, {("desched-test", "vm-a"): k8s.vm()})
    assert info == {"owner_kind": "VirtualMachine", "owner_name": "vm-a", "vm_name": "vm-a", "run_strategy": "Always"}


@pytest.mark.parametrize("spec, expected", [({"run_strategy": None, "running": True}, "Always"),
                                            ({"run_strategy": None, "running": False}, "Halted"),
                                            ({"run_strategy": "Manual"}, "Manual"),
                                            ({"run_strategy": None}, None)])
def test_run_strategy_from_running_or_run_strategy(spec, expected):
    assert kv.run_strategy(k8s.vm(**spec)) == expected


def test_owner_pool_through_vm_owner_reference_or_label():
    vmi = k8s.vmi(owner=("VirtualMachine", "pool-a-0"))
    by_ref = kv.owner(vmi, {("desched-test", "pool-a-0"): k8s.vm("pool-a-0", pool="pool-a")})
    by_label = kv.owner(vmi, {("desched-test", "pool-a-0"): k8s.vm("pool-a-0", pool_label="pool-a")})
    for info in (by_ref, by_label):
        assert info["owner_kind"] == "VirtualMachinePool" and info["owner_name"] == "pool-a" and info["vm_name"] == "pool-a-0"


def test_owner_replica_set_and_bare_vmi():
    assert kv.owner(k8s.vmi(owner=("VirtualMachineInstanceReplicaSet", "rs")), {})["owner_kind"] == "VirtualMachineInstanceReplicaSet"
    assert kv.owner(k8s.vmi(), {})["owner_kind"] is None


# ------------------------------------------------------------------------------------------ launchers and storage
def test_launcher_is_the_one_on_the_vmi_node_not_the_migration_target():
    vmi = k8s.vmi(node="worker-a")
    source = k8s.launcher(vmi, name="virt-launcher-vm-a-src")
    target = k8s.launcher(vmi, name="virt-launcher-vm-a-tgt", node="worker-b", phase="Pending")
    finished = k8s.launcher(vmi, name="virt-launcher-vm-a-old", phase="Succeeded")
    other = k8s.launcher(k8s.vmi("vm-b"))
    index = kv.index_launchers([target, source, finished, other, k8s.pod("web-1")])
    assert kv.find_launcher(vmi, index[vmi["metadata"]["uid"]])["metadata"]["name"] == "virt-launcher-vm-a-src"
    assert "uid-vm-a" in index and len(index["uid-vm-a"]) == 2   # finished Pods are not indexed


def test_launcher_facts_read_the_descheduler_annotations():
    vmi = k8s.vmi()
    pod = k8s.launcher(vmi, metadata={"annotations": {"descheduler.alpha.kubernetes.io/eviction-in-progress": "true"}})
    facts = kv.launcher_facts(pod)
    assert facts["request_evict_only"] and facts["eviction_in_progress"] and facts["domain_annotation"]
    assert kv.launcher_facts(None) is None


def test_pvc_facts_with_access_modes():
    vmi = k8s.vmi(claims=["rootdisk"])
    vmi["spec"]["volumes"].append({"name": "data", "dataVolume": {"name": "datadisk"}})
    pvcs = {("desched-test", "rootdisk"): k8s.pvc("rootdisk")}
    facts = kv.pvc_facts(vmi, pvcs)
    assert facts[0]["access_modes"] == ["ReadWriteMany"] and facts[0]["read_write_many"] and facts[0]["volume_mode"] == "Block"
    assert facts[1] == {"name": "datadisk", "found": False, "access_modes": [], "read_write_many": False, "storage_class": None,
                        "volume_mode": None, "phase": None}


# ------------------------------------------------------------------------------------------ PDBs
@pytest.mark.parametrize("spec, needs", [({"max_unavailable": 1}, True), ({"min_available": "75%"}, True),
                                         ({"min_available": 1}, False), ({"max_unavailable": "0%"}, True)])
def test_pdb_needs_scale_subresource(spec, needs):
    assert kv.pdb_needs_scale(k8s.pdb(**spec)) is needs


def test_disruptions_allowed_zero_for_scale_pdb_over_launchers_whatever_status_says():
    pdb = k8s.pdb(max_unavailable=1, status={"disruptionsAllowed": 1})
    assert kv.disruptions_allowed(pdb, True, []) == 0
    assert kv.disruptions_allowed(pdb, False, []) == 1   # over Deployment Pods /scale works


def test_disruptions_allowed_from_status_or_counted_for_integer_min_available():
    vmi = k8s.vmi(labels={"app": "desched-test"})
    pods = [k8s.launcher(vmi), k8s.launcher(k8s.vmi("vm-b", labels={"app": "desched-test"}))]
    assert kv.disruptions_allowed(k8s.pdb(min_available=1, status={"disruptionsAllowed": 0}), True, pods) == 0
    assert kv.disruptions_allowed(k8s.pdb(min_available=1), True, pods) == 1          # no status yet: 2 healthy - 1
    stale = k8s.pdb(min_available=2, status={"disruptionsAllowed": 5}, generation=2)
    stale["status"]["observedGeneration"] = 1
    assert kv.disruptions_allowed(stale, True, pods) == 0                              # controller behind: counted


def test_pdbs_selecting_matches_labels_in_the_same_namespace():
    pod = k8s.launcher(k8s.vmi(labels={"app": "desched-test"}))
    same = k8s.pdb()
    other_ns = k8s.pdb(namespace="other")
    everything = k8s.pdb("all")
    everything["spec"]["selector"] = {}
    nothing = k8s.pdb("none")
    nothing["spec"]["selector"] = None
    assert kv.pdbs_selecting(pod, [same, other_ns, everything, nothing]) == [same, everything]


# ------------------------------------------------------------------------------------------ verdicts
def test_verdict_migrate_for_live_migratable_vmi():
    facts = facts_for(k8s.vmi(strategy="LiveMigrate"))
    assert facts["verdict"] == "migrate"
    assert facts["eviction_response"] == {"code": 429, "message": WEBHOOK + 'Eviction triggered evacuation of VMI "desched-test/vm-a"'}


def test_verdict_migrate_from_cluster_default_when_vmi_has_none():
    facts = facts_for(k8s.vmi(strategy=None), cluster="LiveMigrateIfPossible")
    assert facts["effective_strategy"] == "LiveMigrateIfPossible" and facts["verdict"] == "migrate"


def test_verdict_blocked_live_migrate_not_migratable_with_kubevirt_message():
    facts = facts_for(k8s.vmi(strategy="LiveMigrate", migratable=False))
    assert facts["verdict"] == "blocked"
    assert facts["eviction_response"] == {
        "code": 429, "message": WEBHOOK + "VMI vm-a is configured with an eviction strategy but is not live-migratable"}


def test_verdict_live_migrate_if_possible_not_migratable_shuts_down():
    vmi = k8s.vmi(strategy="LiveMigrateIfPossible", migratable=False, owner=("VirtualMachine", "vm-a"))
    facts = facts_for(vmi, vms=[k8s.vm()])
    assert facts["verdict"] == "shutdown_restart"
    assert facts["eviction_response"]["code"] == 201


@pytest.mark.parametrize("owner, vms, verdict", [
    (("VirtualMachine", "vm-a"), [k8s.vm(run_strategy="Always")], "shutdown_restart"),
    (("VirtualMachine", "vm-a"), [k8s.vm(run_strategy=None, running=True)], "shutdown_restart"),
    (("VirtualMachine", "vm-a"), [k8s.vm(run_strategy="Manual")], "shutdown_lost"),
    (("VirtualMachine", "vm-a"), [k8s.vm(run_strategy="RerunOnFailure")], "shutdown_lost"),
    (("VirtualMachineInstanceReplicaSet", "rs"), [], "shutdown_replace"),
    (None, [], "shutdown_lost"),
])
def test_verdict_strategy_none_depends_on_owner(owner, vms, verdict):
    assert facts_for(k8s.vmi(strategy="None", owner=owner), vms=vms)["verdict"] == verdict


def test_verdict_pool_vm_restarts_through_its_vm():
    vmi = k8s.vmi(strategy="None", owner=("VirtualMachine", "pool-a-0"))
    facts = facts_for(vmi, vms=[k8s.vm("pool-a-0", pool="pool-a")])
    assert facts["owner_kind"] == "VirtualMachinePool" and facts["verdict"] == "shutdown_restart"
    assert "VirtualMachinePool pool-a" in facts["verdict_reason"]


def test_verdict_in_progress_when_already_marked():
    facts = facts_for(k8s.vmi(evacuation="worker-a"))
    assert facts["verdict"] == "in_progress"
    assert facts["eviction_response"]["message"] == WEBHOOK + 'Evacuation in progress: Eviction triggered evacuation of VMI "desched-test/vm-a"'


def test_verdict_in_progress_with_unfinished_migration_and_finished_ones_ignored():
    vmi = k8s.vmi()
    done = k8s.vmim("kubevirt-evacuation-old", phase="Succeeded", created="2026-11-30T09:00:00Z")
    assert facts_for(vmi, migrations=[done])["verdict"] == "migrate"
    running = k8s.vmim("kubevirt-evacuation-abcde", phase="Scheduling")
    facts = facts_for(vmi, migrations=[done, running])
    assert facts["verdict"] == "in_progress" and facts["unfinished_migrations"] == ["kubevirt-evacuation-abcde"]
    assert [m["name"] for m in facts["migrations"]] == ["kubevirt-evacuation-old", "kubevirt-evacuation-abcde"]


def test_verdict_external_marks_without_migration():
    facts = facts_for(k8s.vmi(strategy="External", migratable=False))
    assert facts["verdict"] == "external" and facts["eviction_response"]["code"] == 429


def test_verdict_not_running_without_launcher():
    assert facts_for(k8s.vmi(), pods=[])["verdict"] == "not_running"
    assert facts_for(k8s.vmi(), pods=[])["eviction_response"] is None


def test_webhook_passes_launcher_without_domain_annotation():
    vmi = k8s.vmi(strategy="LiveMigrate", migratable=False)
    facts = facts_for(vmi, pods=[k8s.launcher(vmi, domain=False)])
    assert facts["verdict"] == "shutdown_lost"


def test_pdb_does_not_stop_a_migration_but_blocks_a_shutdown():
    """The webhook answers before the eviction REST looks at PDBs (kubernetes eviction.go: createValidation first)."""
    migrating = k8s.vmi(labels={"app": "desched-test"})
    blocked_pdb = k8s.pdb(max_unavailable=1)
    assert facts_for(migrating, pdbs=[blocked_pdb])["verdict"] == "migrate"
    stopping = k8s.vmi(strategy="None", labels={"app": "desched-test"}, owner=("VirtualMachine", "vm-a"))
    facts = facts_for(stopping, vms=[k8s.vm()], pdbs=[blocked_pdb])
    assert facts["verdict"] == "blocked" and facts["pdbs"] == ["vms-pdb"]
    assert facts["eviction_response"] == {"code": 429, "message": "Cannot evict pod as it would violate the pod's disruption budget."}
    assert "kubevirt/kubevirt#18063" in facts["verdict_reason"]


def test_pending_launcher_is_deleted_without_a_pdb_check():
    vmi = k8s.vmi(strategy="None", labels={"app": "desched-test"}, phase="Scheduled")
    facts = facts_for(vmi, pods=[k8s.launcher(vmi, phase="Pending")], pdbs=[k8s.pdb(max_unavailable=1)])
    assert facts["verdict"] == "shutdown_lost" and facts["eviction_response"]["code"] == 201


def test_integer_min_available_pdb_lets_a_shutdown_through():
    vmis = [k8s.vmi(n, strategy="None", labels={"app": "desched-test"}) for n in ("vm-a", "vm-b")]
    pods = [k8s.launcher(v) for v in vmis]
    facts = facts_for(vmis[0], pods=pods, pdbs=[k8s.pdb(min_available=1)])
    assert facts["verdict"] == "shutdown_lost"


def test_two_pdbs_selecting_a_launcher_is_a_500():
    vmi = k8s.vmi(strategy="None", labels={"app": "desched-test"})
    facts = facts_for(vmi, pdbs=[k8s.pdb("a", min_available=0), k8s.pdb("b", min_available=0)])
    assert facts["verdict"] == "blocked"
    assert facts["eviction_response"] == {"code": 500, "message": kv.MULTIPLE_PDBS}


# ------------------------------------------------------------------------------------------ findings
def codes(findings):
    return sorted(f["code"] for f in findings)


def test_finding_recorded_strategy_differs_from_cluster_default():
    facts = facts_for(k8s.vmi(strategy="None", owner=("VirtualMachine", "vm-a")), vms=[k8s.vm()], cluster="LiveMigrateIfPossible")
    findings = kv.vmi_findings(facts)
    assert codes(findings) == ["strategy_differs_from_cluster"]
    assert "keeps None until the VM is restarted" in findings[0]["message"]
    assert findings[0]["severity"] == "warning" and findings[0]["name"] == "vm-a"


def test_finding_for_strategy_set_on_the_vm_template_says_a_restart_keeps_it():
    vm = k8s.vm()
    vm["spec"]["template"]["spec"]["evictionStrategy"] = "None"
    facts = facts_for(k8s.vmi(strategy="None", owner=("VirtualMachine", "vm-a")), vms=[vm], cluster="LiveMigrate")
    assert facts["vm_strategy"] == "None"
    message = kv.vmi_findings(facts)[0]["message"]
    assert "from its VirtualMachine's template" in message and "A restart keeps None" in message


def test_no_finding_when_vmi_follows_the_cluster_or_both_are_none():
    assert kv.vmi_findings(facts_for(k8s.vmi(strategy=None), cluster="LiveMigrate")) == []
    assert kv.vmi_findings(facts_for(k8s.vmi(strategy="LiveMigrate"), cluster="LiveMigrate")) == []
    assert kv.vmi_findings(facts_for(k8s.vmi(strategy="None", owner=("VirtualMachine", "vm-a")), vms=[k8s.vm()])) == []


def test_finding_not_migratable_with_migrating_strategy():
    facts = facts_for(k8s.vmi(migratable=False, message="cannot migrate VMI: PVC rootdisk is not shared"), cluster="LiveMigrate")
    findings = kv.vmi_findings(facts)
    assert codes(findings) == ["not_migratable_with_migrating_strategy"]
    assert "PVC rootdisk is not shared" in findings[0]["message"] and "is refused" in findings[0]["message"]


def test_finding_unfinished_migration():
    facts = facts_for(k8s.vmi(), migrations=[k8s.vmim("kubevirt-evacuation-x", phase="Running")], cluster="LiveMigrate")
    findings = kv.vmi_findings(facts)
    assert codes(findings) == ["migration_unfinished"]
    assert findings[0]["message"].startswith("VirtualMachineInstanceMigration desched-test/kubevirt-evacuation-x of VMI vm-a is Running")


@pytest.mark.parametrize("spec, code", [({"max_unavailable": 1}, "pdb_needs_scale_subresource"),
                                        ({"min_available": "50%"}, "pdb_needs_scale_subresource"),
                                        ({"min_available": 2, "status": {"disruptionsAllowed": 0}}, "pdb_blocks_eviction")])
def test_pdb_findings(spec, code):
    pdb = k8s.pdb(**spec)
    findings = kv.pdb_findings(pdb, kv.disruptions_allowed(pdb, True, []), ["virt-launcher-vm-a-abcde"])
    assert codes(findings) == [code]
    if code == "pdb_needs_scale_subresource":
        assert "kubevirt/kubevirt#18063" in findings[0]["message"] and "integer minAvailable" in findings[0]["message"]


def test_no_pdb_finding_for_integer_min_available_with_room():
    assert kv.pdb_findings(k8s.pdb(min_available=1), 1, ["a", "b"]) == []


def test_as_kubectl_shows_drops_only_managed_fields():
    obj = {"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u", "managedFields": [{"manager": "m"}]}, "data": {"k": "v"}}
    assert kv.as_kubectl_shows(obj) == {"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}, "data": {"k": "v"}}
    plain = {"kind": "ConfigMap", "metadata": {"name": "a"}}
    assert kv.as_kubectl_shows(plain) is plain
