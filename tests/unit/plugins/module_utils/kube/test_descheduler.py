"""Reading the ACP Descheduler package: where it runs, its flags, the policy ConfigMap and its protections,
the last Jobs, the ResourcePatches, and the findings (feature gate, --v, PVC and local-storage protections)."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import descheduler as desched

from .. import k8s_objects as k8s


def facts(cronjobs=None, deployments=(), jobs=(), configmaps=None, patches=None, name="descheduler"):
    cronjobs = [k8s.cronjob()] if cronjobs is None else cronjobs
    configmaps = [k8s.configmap()] if configmaps is None else configmaps
    return desched.descheduler_facts("descheduler", name, list(cronjobs), list(deployments), list(jobs), list(configmaps),
                                     None if patches is None else list(patches))


def codes(result):
    return sorted(f["code"] for f in result["findings"])


# ------------------------------------------------------------------------------------------ flags
def test_parse_args_of_the_package():
    args = desched.parse_args(k8s.PACKAGE_ARGS)
    assert args["policy_config_file"] == "/policy-dir/policy.yaml"
    assert args["feature_gates"] == {"EvictionsInBackground": True} and args["evictions_in_background"]
    assert args["verbosity"] == 3 and args["dry_run"] is False


@pytest.mark.parametrize("argv, gate, verbosity", [
    (["--v", "4", "--feature-gates", "EvictionsInBackground=true,Other=false"], True, 4),
    (["-v=2", "--feature-gates=EvictionsInBackground=false"], False, 2),
    (["--policy-config-file=/p/policy.yaml"], False, None),
])
def test_parse_args_both_spellings(argv, gate, verbosity):
    args = desched.parse_args(argv)
    assert args["evictions_in_background"] is gate and args["verbosity"] == verbosity


def test_parse_args_dry_run_and_interval():
    args = desched.parse_args(["--dry-run", "--descheduling-interval=5m"])
    assert args["dry_run"] is True and args["descheduling_interval"] == "5m"


# ------------------------------------------------------------------------------------------ workload
def test_finds_the_cronjob_by_label_and_reads_its_state():
    result = facts(jobs=[k8s.job("descheduler-1", "2026-11-30T10:00:00Z"), k8s.job("descheduler-3", "2026-11-30T10:04:00Z", "Failed"),
                         k8s.job("descheduler-2", "2026-11-30T10:02:00Z", "Running"),
                         k8s.job("other", "2026-11-30T10:05:00Z", owner_uid="uid-other")])
    assert result["found"] and result["kind"] == "CronJob" and result["name"] == "descheduler"
    assert result["suspended"] is False and result["schedule"] == "*/2 * * * *"
    assert [(j["name"], j["result"]) for j in result["last_jobs"]] == [
        ("descheduler-3", "Failed"), ("descheduler-2", "Running"), ("descheduler-1", "Complete")]
    assert codes(result) == ["policy_protects_pvc_pods"]   # the package's default policy


def test_deployment_mode():
    result = facts(cronjobs=[], deployments=[k8s.deployment(k8s.PACKAGE_ARGS + ["--descheduling-interval=5m"])])
    assert result["kind"] == "Deployment" and result["replicas"] == 1 and result["descheduling_interval"] == "5m"
    assert result["suspended"] is None and result["last_jobs"] == []


def test_found_by_name_without_label():
    cronjob = k8s.cronjob(name="my-descheduler")
    cronjob["metadata"]["labels"] = {}
    assert facts(cronjobs=[cronjob], name="my-descheduler")["name"] == "my-descheduler"
    assert facts(cronjobs=[cronjob])["found"] is False


def test_not_found_is_a_finding_not_an_error():
    result = facts(cronjobs=[], configmaps=[])
    assert result["found"] is False and result["policy"] is None
    assert codes(result) == ["descheduler_not_found"]


def test_old_package_without_feature_gate_and_low_verbosity():
    result = facts(cronjobs=[k8s.cronjob(["--policy-config-file=/policy-dir/policy.yaml", "--v=2"])])
    assert codes(result) == ["feature_gate_missing", "policy_protects_pvc_pods", "verbosity_below_3"]
    gate = [f for f in result["findings"] if f["code"] == "feature_gate_missing"][0]
    assert "Upgrade the Descheduler plugin package" in gate["message"] and gate["kind"] == "CronJob"


def test_suspended_and_dry_run_are_reported():
    result = facts(cronjobs=[k8s.cronjob(k8s.PACKAGE_ARGS + ["--dry-run"], suspend=True)], configmaps=[k8s.configmap(k8s.VM_POLICY)])
    assert codes(result) == ["descheduler_dry_run", "descheduler_suspended"]


# ------------------------------------------------------------------------------------------ policy
def test_policy_configmap_from_the_mounted_volume():
    cronjob = k8s.cronjob()
    volume = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"][0]
    volume["configMap"] = {"name": "custom-policy", "items": [{"key": "data.yaml", "path": "policy.yaml"}]}
    result = facts(cronjobs=[cronjob], configmaps=[k8s.configmap(), k8s.configmap(k8s.VM_POLICY, name="custom-policy", key="data.yaml")])
    assert result["policy"]["configmap"] == "custom-policy" and result["policy"]["key"] == "data.yaml"
    assert result["policy"]["profiles"][0]["name"] == "vm-rebalance"


def test_vm_policy_facts():
    policy = facts(configmaps=[k8s.configmap(k8s.VM_POLICY)])["policy"]
    assert policy["max_pods_to_evict_total"] == 1 and policy["node_selector"].startswith("kubernetes.io/hostname in")
    profile = policy["profiles"][0]
    assert profile["balance"] == ["LowNodeUtilization"] and profile["evicts"]
    assert profile["label_selector"] == {"matchLabels": {"app": "desched-test"}}
    assert profile["protections"] == ["DaemonSetPods", "FailedBarePods", "SystemCriticalPods"]
    assert not profile["protects_pvc_pods"] and not profile["protects_local_storage"]


def test_policy_that_reenables_local_storage_protection():
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
              "profiles": [{"name": "p", "pluginConfig": [{"name": "DefaultEvictor", "args": {}}],
                            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    result = facts(configmaps=[k8s.configmap(policy)])
    assert codes(result) == ["policy_protects_local_storage"]
    assert "profiles[0] (p)" in result["findings"][0]["message"] and "defaultDisabled" in result["findings"][0]["message"]


def test_profile_without_plugins_evicts_nothing_and_has_no_findings():
    policy = {"profiles": [{"name": "idle", "pluginConfig": [{"name": "DefaultEvictor", "args": {}}]}]}
    assert codes(facts(configmaps=[k8s.configmap(policy)])) == []


@pytest.mark.parametrize("args, protected", [
    ({"evictLocalStoragePods": True}, ["DaemonSetPods", "FailedBarePods", "SystemCriticalPods"]),
    ({"evictLocalStoragePods": True, "ignorePvcPods": True}, ["DaemonSetPods", "FailedBarePods", "PodsWithPVC", "SystemCriticalPods"]),
    ({"podProtections": {"defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods"], "extraEnabled": ["PodsWithoutPDB"]}},
     ["FailedBarePods", "PodsWithoutPDB", "SystemCriticalPods"]),
    (None, ["DaemonSetPods", "FailedBarePods", "PodsWithLocalStorage", "SystemCriticalPods"]),
])
def test_protections_with_deprecated_booleans_and_pod_protections(args, protected):
    assert desched.protections(args) == protected


@pytest.mark.parametrize("text, error", [("profiles: [", "not YAML"), ("- a\n- b\n", "not a mapping")])
def test_unparseable_policy(text, error):
    result = facts(configmaps=[k8s.configmap(text=text)])
    assert error in result["policy"]["error"]
    assert codes(result) == ["policy_unparseable"]


def test_missing_policy_configmap():
    result = facts(configmaps=[])
    assert result["policy"]["found"] is False and codes(result) == ["policy_missing"]


def test_workload_policy_source_and_container():
    cronjob = k8s.cronjob()
    assert desched.workload_policy_source("CronJob", cronjob) == ("descheduler", "policy.yaml")
    assert desched.workload_policy_source("Deployment", k8s.deployment()) == ("descheduler", "policy.yaml")
    assert desched.workload_policy_source("CronJob", k8s.cronjob(["--v=3"])) == (None, None)   # no --policy-config-file
    assert desched.workload_policy_source(None, None) == (None, None)
    assert desched.container_name("CronJob", cronjob) == "descheduler" and desched.container_name(None, None) is None
    assert desched.command_args({"command": ["/bin/descheduler", "--v=3"], "args": ["--dry-run"]}) == ["--v=3", "--dry-run"]


# ------------------------------------------------------------------------------------------ pods and logs
def pod(name, created, job_name=None, owner_job=None, labels=None, start=None):
    meta = {"name": name, "namespace": "descheduler", "creationTimestamp": created, "labels": dict(labels or {})}
    if job_name:
        meta["labels"]["batch.kubernetes.io/job-name"] = job_name
    if owner_job:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner_job, "controller": True}]
    return {"metadata": meta, "status": {"phase": "Running", **({"startTime": start} if start else {})}}


def test_job_pods_by_label_or_owner():
    mine = pod("descheduler-1-abcde", "2026-11-30T10:00:05Z", job_name="descheduler-1")
    other = pod("descheduler-2-abcde", "2026-11-30T10:00:06Z", job_name="descheduler-2")
    assert desched.job_pods(k8s.job("descheduler-1", "t"), [other, mine]) == [mine]
    owned = pod("descheduler-1-fghij", "2026-11-30T10:00:01Z", owner_job="descheduler-1")
    assert desched.job_pods(k8s.job("descheduler-1", "t"), [mine, other, owned]) == [owned, mine]   # oldest first


def test_workload_pods_of_the_last_jobs_or_the_deployment_selector():
    jobs = [k8s.job("descheduler-{0}".format(i), "2026-11-30T10:0{0}:00Z".format(i)) for i in range(1, 5)]
    pods = [pod("descheduler-{0}-x".format(i), "2026-11-30T10:0{0}:01Z".format(i), owner_job="descheduler-{0}".format(i)) for i in (4, 1, 3)]
    assert [p["metadata"]["name"] for p in desched.workload_pods("CronJob", k8s.cronjob(), jobs, pods)] == \
        ["descheduler-3-x", "descheduler-4-x"]   # the last three Jobs (2, 3, 4), oldest Pod first
    deployment = k8s.deployment()
    deployment["spec"]["selector"] = {"matchLabels": {"app": "descheduler"}}
    selected = pod("descheduler-abc", "2026-11-30T10:00:00Z", labels={"app": "descheduler"})
    assert desched.workload_pods("Deployment", deployment, [], [selected, pod("other", "t", labels={"app": "x"})]) == [selected]
    assert desched.workload_pods("Deployment", k8s.deployment(), [], [selected]) == []   # no matchLabels: none
    assert desched.workload_pods(None, None, jobs, pods) == []


def test_a_cronjob_that_keeps_more_runs_has_the_pods_of_all_of_them():
    jobs = [k8s.job("descheduler-{0}".format(i), "2026-11-30T10:0{0}:00Z".format(i)) for i in range(1, 6)]
    pods = [pod("descheduler-{0}-x".format(i), "2026-11-30T10:0{0}:01Z".format(i), owner_job="descheduler-{0}".format(i)) for i in range(1, 6)]
    keeps_five = k8s.cronjob()
    keeps_five.setdefault("spec", {})["successfulJobsHistoryLimit"] = 5
    assert desched.kept_runs(keeps_five) == 5 and desched.kept_runs(k8s.cronjob()) == 3
    assert len(desched.workload_pods("CronJob", keeps_five, jobs, pods)) == 5
    keeps_one = k8s.cronjob()
    keeps_one["spec"]["successfulJobsHistoryLimit"] = 1
    assert desched.kept_runs(keeps_one) == 3   # never fewer than the three last runs read before


def test_pod_log_records_carry_the_pod_and_the_year_of_its_start():
    line = 'I0101 00:00:05.000000       1 x.go:1] "Eviction in background assumed" pod="ns/virt-launcher-vm-1-abcde"'
    started = pod("descheduler-1-x", "2026-12-31T23:59:00Z", start="2026-12-31T23:59:50Z")
    [record] = desched.pod_log_records(started, "not klog\n" + line + "\n")
    assert record["pod"] == "descheduler-1-x" and record["time"] == "2027-01-01T00:00:05Z"
    assert desched.pod_log_records(started, None) == []


# ------------------------------------------------------------------------------------------ ACP
def test_resource_patches_touching_the_policy_or_the_cronjob():
    patches = [k8s.resource_patch("rp-b", created="2026-11-30T10:05:00Z"), k8s.resource_patch("rp-a"),
               k8s.resource_patch("rp-cron", target_kind="CronJob"), k8s.resource_patch("rp-other", target_name="other")]
    result = facts(patches=patches)
    assert [p["name"] for p in result["resource_patches"]] == ["rp-a", "rp-cron", "rp-b"]  # oldest first
    assert result["resource_patches"][0]["target"] == {"kind": "ConfigMap", "namespace": "descheduler", "name": "descheduler"}
    assert result["resource_patch_served"] is True
    assert facts()["resource_patch_served"] is False


def test_module_info_and_kube_descheduler_when_served_or_not():
    info = {"metadata": {"name": "mi-1", "labels": {"cpaas.io/cluster-name": "workload", "cpaas.io/module-name": "descheduler"}},
            "spec": {"version": "v0.36.0-5"}, "status": {"phase": "Running"}}
    assert desched.module_info_facts([info]) == {"served": True, "resources": [
        {"name": "mi-1", "cluster": "workload", "module": "descheduler", "phase": "Running", "version": "v0.36.0-5"}]}
    assert desched.module_info_facts(None) == {"served": False, "resources": []}
    kube = {"metadata": {"name": "cluster", "namespace": "openshift-kube-descheduler-operator"},
            "spec": {"profiles": ["KubeVirtRelieveAndMigrate"], "mode": "Automatic", "deschedulingIntervalSeconds": 60}}
    assert desched.kube_descheduler_facts([kube])["resources"][0]["profiles"] == ["KubeVirtRelieveAndMigrate"]
