"""The rebalance page's prerequisites checked on facts built by the same derivations kubevirt_eviction_facts uses:
every missing prerequisite is reported at once, each with the object, the observed value and the page's fix;
warnings are the findings no problem already says; the summary lists the nodes and VMs in scope."""
from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster import eviction_facts as facts_mod
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.preflight import preflight, problem_lines

from .. import k8s_objects as k8s

WORKERS = ("worker-a", "worker-b")


def cluster_facts(vmis=None, vms=None, pvcs=None, nodes=None, cronjob_args=None, cluster_strategy="LiveMigrateIfPossible",
                  hco=True, suspend=False, kubevirt=True) -> dict:
    vmis = [k8s.vmi("vm-1", strategy="LiveMigrateIfPossible", owner=("VirtualMachine", "vm-1"), claims=["vm-1-disk"])] if vmis is None else vmis
    vms = [k8s.vm("vm-1")] if vms is None else vms
    pvcs = [k8s.pvc("vm-1-disk")] if pvcs is None else pvcs
    nodes = [k8s.node("control-plane-1", control_plane=True)] + [k8s.node(n) for n in WORKERS] if nodes is None else nodes
    pods = [k8s.launcher(v) for v in vmis]
    kubevirt_cr = k8s.kubevirt_cr(cluster_strategy) if kubevirt else None
    default = kv.cluster_strategy(kubevirt_cr)
    vmi_facts, _pdbs, vmi_findings = facts_mod.vmis_section(vmis, pods, vms, pvcs, [], [], default)
    desched_facts = desched.descheduler_facts("descheduler", "descheduler", [k8s.cronjob(cronjob_args, suspend=suspend)], [], [],
                                              [k8s.configmap()], [])
    return {
        "cluster": {"kubevirt": dict(kv.kubevirt_facts(kubevirt_cr), served=True),
                    "hyperconverged": dict(kv.hyperconverged_facts(k8s.hyperconverged(cluster_strategy) if hco else None), served=hco),
                    "eviction_strategy": default},
        "nodes": facts_mod.nodes_section(nodes, pods, vmis),
        "descheduler": desched_facts,
        "vmis": vmi_facts,
        "findings": desched_facts["findings"] + vmi_findings,
    }


def codes(result):
    return sorted(p["code"] for p in result["problems"])


def test_the_page_setting_passes_with_a_summary():
    result = preflight(cluster_facts(), nodes=list(WORKERS))
    assert result["passed"] and result["problems"] == []
    assert [n["name"] for n in result["summary"]["nodes"]] == list(WORKERS)
    assert all(n["counted"] and set(n["usage_percent"]) == {"cpu", "memory", "pods"} for n in result["summary"]["nodes"])
    assert result["summary"]["vms"] == [{"name": "vm-1", "namespace": "desched-test", "node": "worker-a", "uid": "uid-vm-1",
                                         "strategy": "LiveMigrateIfPossible", "live_migratable": True, "verdict": "migrate"}]
    assert result["summary"]["workers"] == 2
    # the package's default policy protects PVC Pods: a warning, not a problem
    assert [w["code"] for w in result["warnings"]] == ["policy_protects_pvc_pods"]


def test_default_scope_is_every_non_control_plane_node():
    result = preflight(cluster_facts())
    assert [n["name"] for n in result["summary"]["nodes"]] == list(WORKERS)


def test_old_package_reports_the_gate_with_the_upgrade_fix():
    result = preflight(cluster_facts(cronjob_args=["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]))
    assert codes(result) == ["feature_gate_missing"]
    problem = result["problems"][0]
    assert (problem["kind"], problem["namespace"], problem["name"]) == ("CronJob", "descheduler", "descheduler")
    assert problem["observed"] == ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]
    assert "upgrade the Alauda Container Platform Descheduler plugin" in problem["fix"] and "Do not hand-edit" in problem["fix"]
    # the finding that says the same is not repeated as a warning
    assert "feature_gate_missing" not in [w["code"] for w in result["warnings"]]


def test_every_missing_prerequisite_is_reported_at_once():
    vmis = [k8s.vmi("vm-none", strategy="None", owner=("VirtualMachine", "vm-none"), claims=["vm-none-disk"]),
            k8s.vmi("vm-rwo", strategy="LiveMigrate", migratable=False, reason="DisksNotLiveMigratable",
                    message="cannot migrate VMI: PVC vm-rwo-disk is not shared", owner=("VirtualMachine", "vm-rwo"), claims=["vm-rwo-disk"])]
    result = preflight(cluster_facts(vmis=vmis, vms=[k8s.vm("vm-none"), k8s.vm("vm-rwo")],
                                     pvcs=[k8s.pvc("vm-none-disk"), k8s.pvc("vm-rwo-disk", modes=("ReadWriteOnce",))],
                                     nodes=[k8s.node("worker-a"), k8s.node("worker-b", unschedulable=True)],
                                     cronjob_args=["--policy-config-file=/policy-dir/policy.yaml", "--v=2"], cluster_strategy=None))
    assert not result["passed"]
    assert codes(result) == sorted(["feature_gate_missing", "verbosity_below_3", "cluster_strategy_not_migrating", "vmi_strategy_not_migrating",
                                    "vmi_not_live_migratable", "vmi_storage_not_shared", "too_few_workers"])
    by_code = {p["code"]: p for p in result["problems"]}
    assert by_code["verbosity_below_3"]["observed"] == "--v=2"
    assert "HyperConverged kubevirt/kubevirt-hyperconverged" in by_code["cluster_strategy_not_migrating"]["fix"]
    assert by_code["cluster_strategy_not_migrating"]["observed"] == "spec.configuration.evictionStrategy=unset (None)"
    none = by_code["vmi_strategy_not_migrating"]
    assert none["name"] == "vm-none" and none["observed"].startswith("effective None")
    assert by_code["vmi_not_live_migratable"]["name"] == "vm-rwo"
    assert "DisksNotLiveMigratable" in by_code["vmi_not_live_migratable"]["observed"]
    assert by_code["vmi_storage_not_shared"]["name"] == "vm-rwo-disk"
    assert by_code["vmi_storage_not_shared"]["observed"] == "accessModes [ReadWriteOnce]"
    assert by_code["too_few_workers"]["observed"] == ["worker-a (counted)", "worker-b (cordoned)"]
    lines = problem_lines(result["problems"])
    assert len(lines) == 7 and lines[0].startswith("1. ") and all("(observed: " in line and ". Fix: " in line for line in lines)
    # warnings: nothing a problem already says
    assert not {"not_migratable_with_migrating_strategy", "feature_gate_missing"} & {w["code"] for w in result["warnings"]}


def test_recorded_strategy_differing_from_the_cluster_asks_for_a_restart():
    vmis = [k8s.vmi("vm-old", strategy="None", owner=("VirtualMachine", "vm-old"), claims=["vm-1-disk"])]
    result = preflight(cluster_facts(vmis=vmis, vms=[k8s.vm("vm-old")]))
    assert codes(result) == ["vmi_strategy_not_migrating"]
    assert "restart VM vm-old so that it picks up the cluster default LiveMigrateIfPossible" in result["problems"][0]["fix"]
    assert "strategy_differs_from_cluster" not in [w["code"] for w in result["warnings"]]


def test_vm_template_strategy_is_fixed_in_the_template():
    vm = k8s.vm("vm-1")
    vm["spec"]["template"]["spec"]["evictionStrategy"] = "None"
    vmis = [k8s.vmi("vm-1", strategy="None", owner=("VirtualMachine", "vm-1"), claims=["vm-1-disk"])]
    result = preflight(cluster_facts(vmis=vmis, vms=[vm]))
    assert "spec.template.spec.evictionStrategy of VM vm-1" in result["problems"][0]["fix"]


def test_named_nodes_that_do_not_exist_and_no_vms():
    result = preflight(cluster_facts(vmis=[], vms=[]), nodes=["worker-a", "worker-z"], namespace="desched-test",
                       label_selector="app=desched-test")
    assert codes(result) == ["no_vms_in_scope", "node_not_found", "too_few_workers"]
    assert "label selector app=desched-test" in {p["code"]: p for p in result["problems"]}["no_vms_in_scope"]["observed"]
    assert preflight(cluster_facts(vmis=[], vms=[]), require_vms=False)["passed"]


def test_min_workers_and_control_plane_nodes():
    result = preflight(cluster_facts(), nodes=["control-plane-1", "worker-a"])
    assert codes(result) == ["too_few_workers"]
    assert "control-plane-1 (control-plane, no kubevirt.io/schedulable=true)" in result["problems"][0]["observed"]
    assert preflight(cluster_facts(), min_workers=3)["problems"][0]["code"] == "too_few_workers"
    assert preflight(cluster_facts(), nodes=["worker-a"], min_workers=1)["passed"]


def test_descheduler_not_found_skips_its_flag_checks():
    facts = cluster_facts()
    facts["descheduler"] = desched.descheduler_facts("descheduler", "descheduler", [], [], [], [], [])
    result = preflight(facts)
    assert codes(result) == ["descheduler_not_found"]
    assert "Marketplace > Cluster Plugins" in result["problems"][0]["fix"]


def test_no_kubevirt_resource_is_a_problem():
    facts = cluster_facts(kubevirt=False, vmis=[], vms=[])
    result = preflight(facts, require_vms=False)
    assert codes(result) == ["kubevirt_cr_missing"]


def test_suspended_cronjob_is_a_warning():
    result = preflight(cluster_facts(suspend=True))
    assert result["passed"] and "descheduler_suspended" in [w["code"] for w in result["warnings"]]
