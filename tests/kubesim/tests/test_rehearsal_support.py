"""What the rehearsal (playbooks/rehearse.yml, issue 15) asks of the simulator, over HTTPS and kubectl as the playbook
talks to it: the two starting scenarios, disposable VMs in a new namespace (container disk or a provisioned RWX claim),
namespace deletion that empties and removes the namespace also while a migration runs, the descheduler with
memory-only thresholds as v0.36 classifies and logs, and the faults a rehearsal test injects (a failing migration, a
503 burst armed by the cleanup's first request)."""
from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from https_client import call, kubectl, started
from kubesim.kubevirt import objects
from kubesim.quantity import is_terminal, node_allocatable, pod_requests
from raw_http import Stream
from support.waiting import wait_for

NS = "kubevirt-ops-rehearsal"
SCOPE = {"app": NS}
KV = "/apis/kubevirt.io/v1"
WORKERS = ("worker-a", "worker-b")
# scenario -> (the descheduler's namespace, the strategy HCO or the KubeVirt CR gives VMIs without one)
SCENARIOS = {"rehearsal": ("descheduler", "LiveMigrateIfPossible"),
             "rehearsal-upstream-chart": ("kube-system", "LiveMigrate")}


@pytest.fixture
def rehearsal(tmp_path):
    with started("rehearsal", tmp_path) as sim:
        sim.workdir = tmp_path
        assert sim.managers["workload"].wait_idle(20)
        yield sim


# ------------------------------------------------------------------------------------------------ helpers
def get(sim, path: str) -> dict | None:
    code, body = call(sim, "GET", path)
    assert code in (200, 404), (code, body)
    return body if code == 200 else None


def apply(sim, *manifests: dict) -> None:
    """kubectl apply of the manifests, as the playbook's kubernetes.core tasks would create them."""
    path = sim.workdir / f"apply-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    kubectl(sim, "apply", "-f", str(path))


def rehearsal_namespace() -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NS, "labels": {"app.kubernetes.io/managed-by": "kubevirt_ops.rebalance"}}}


def rehearsal_vm(name: str, memory: str = "1Gi", claim: str | None = None) -> dict:
    """A rehearsal test VM: scoping label, LiveMigrate, preferred worker-a and required worker-a or worker-b."""
    vm = objects.vm(name, NS, memory=memory, eviction_strategy="LiveMigrate", labels=SCOPE, pvc_name=claim,
                    preferred_node="worker-a")
    vm["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": list(WORKERS)}]}]}
    return vm


def claim(name: str, modes: tuple[str, ...] = ("ReadWriteMany",), storage_class: str | None = "ceph-rbd") -> dict:
    body = objects.pvc(name, NS, access_modes=modes, storage_class=storage_class or "")
    del body["status"]                        # created through the API: the provisioner binds it
    if storage_class is None:
        del body["spec"]["storageClassName"]
    return body


def vmi(sim, name: str, namespace: str = NS) -> dict | None:
    return get(sim, f"{KV}/namespaces/{namespace}/virtualmachineinstances/{name}")


def running_vmi(sim, name: str, namespace: str = NS) -> dict:
    return wait_for(lambda: (found := vmi(sim, name, namespace)) and found.get("status", {}).get("phase") == "Running"
                    and found, 20, 0.05, f"VMI {namespace}/{name} Running")


def condition(obj: dict, ctype: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def launcher(sim, name: str) -> dict:
    pods = get(sim, f"/api/v1/namespaces/{NS}/pods?labelSelector=vm.kubevirt.io%2Fname%3D{name}")["items"]
    active = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    assert len(active) == 1, [p["metadata"]["name"] for p in pods]
    return active[0]


def migrate(sim, vmi_name: str, name: str) -> None:
    body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name, "namespace": NS}, "spec": {"vmiName": vmi_name}}
    assert call(sim, "POST", f"{KV}/namespaces/{NS}/virtualmachineinstancemigrations", body)[0] == 201


def migration_phase(sim, name: str) -> str:
    found = get(sim, f"{KV}/namespaces/{NS}/virtualmachineinstancemigrations/{name}")
    return (found or {}).get("status", {}).get("phase", "")


def final_migration(sim, name: str) -> dict:
    wait_for(lambda: migration_phase(sim, name) in ("Succeeded", "Failed"), interval=0.05, what=f"migration {name} final")
    return get(sim, f"{KV}/namespaces/{NS}/virtualmachineinstancemigrations/{name}")


def events_of(sim, kind: str, name: str, namespace: str = NS) -> list[tuple[str, str, str]]:
    items = get(sim, f"/api/v1/namespaces/{namespace}/events")["items"]
    return [(e["type"], e["reason"], e["message"]) for e in items
            if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]


def add_fault(sim, **rule) -> dict:
    code, body = call(sim, "POST", "/_kubesim/faults", rule)
    assert code == 201, body
    return body


def requested_percent(sim) -> dict[str, dict[str, float]]:
    """node -> resource -> requests of its non-terminal Pods in percent of allocatable (the descheduler's usage)."""
    nodes = {n["metadata"]["name"]: n for n in get(sim, "/api/v1/nodes")["items"]}
    totals = {name: {"cpu": 0, "memory": 0} for name in WORKERS}
    for pod in get(sim, "/api/v1/pods")["items"]:
        node = pod["spec"].get("nodeName")
        if node in totals and not is_terminal(pod):
            requests = pod_requests(pod)
            for resource in totals[node]:
                totals[node][resource] += requests.get(resource, 0)
    percent = {}
    for name, used in totals.items():
        allocatable = node_allocatable(nodes[name])
        percent[name] = {resource: used[resource] / allocatable[resource] * 100 for resource in used}
    return percent


# ------------------------------------------------------------------------------------------------ scenarios
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_scenarios_start_with_workloads_and_room_but_no_test_vms(scenario, tmp_path):
    descheduler_ns, strategy = SCENARIOS[scenario]
    with started(scenario, tmp_path) as sim:
        assert sim.managers["workload"].wait_idle(20)
        assert get(sim, f"/api/v1/namespaces/{NS}") is None
        assert get(sim, f"{KV}/virtualmachineinstances?labelSelector=app%3D{NS}")["items"] == []
        assert get(sim, f"/api/v1/pods?labelSelector=app%3D{NS}")["items"] == []
        for name, node in (("erp-db", "worker-a"), ("erp-app", "worker-b")):
            found = running_vmi(sim, name, "vms")
            assert found["status"]["nodeName"] == node and found["spec"]["evictionStrategy"] == strategy
            assert condition(found, "LiveMigratable")["status"] == "True"
            assert "app" not in found["metadata"]["labels"] or found["metadata"]["labels"]["app"] != NS
            pvc = get(sim, f"/api/v1/namespaces/vms/persistentvolumeclaims/{name}-disk")
            assert pvc["status"]["phase"] == "Bound" and pvc["spec"]["volumeName"] == f"pvc-{pvc['metadata']['uid']}"
        usage = requested_percent(sim)
        assert (round(usage["worker-a"]["memory"], 1), round(usage["worker-b"]["memory"], 1)) == (45.0, 38.0)
        assert all(30 <= usage[node]["cpu"] <= 40 for node in WORKERS), usage
        cronjob = get(sim, f"/apis/batch/v1/namespaces/{descheduler_ns}/cronjobs/descheduler")
        assert cronjob["spec"]["schedule"] == "*/2 * * * *" and not cronjob["spec"]["suspend"]
        assert cronjob["metadata"]["labels"]["app.kubernetes.io/name"] == "descheduler"
        configmap = get(sim, f"/api/v1/namespaces/{descheduler_ns}/configmaps/descheduler")
        policy = yaml.safe_load(configmap["data"]["policy.yaml"])
        assert policy["kind"] == "DeschedulerPolicy" and policy["profiles"][0]["name"] == "default"


def test_the_acp_scenario_serves_resourcepatch_and_moduleinfo(rehearsal):
    assert get(rehearsal, "/apis/operator.alauda.io/v1alpha1/namespaces/descheduler/resourcepatches")["items"] == []
    modules = get(rehearsal, "/clusters/global/apis/cluster.alauda.io/v1alpha1/moduleinfoes")["items"]
    assert [m["metadata"]["labels"]["cpaas.io/module-name"] for m in modules] == ["descheduler"]
    hco = get(rehearsal, "/apis/hco.kubevirt.io/v1beta1/namespaces/kubevirt/hyperconvergeds/kubevirt-hyperconverged")
    assert hco["spec"]["evictionStrategy"] == "LiveMigrateIfPossible"


def test_the_upstream_chart_scenario_is_plain_kubernetes(tmp_path):
    with started("rehearsal-upstream-chart", tmp_path) as sim:
        groups = {g["name"] for g in get(sim, "/apis")["groups"]}
        assert "kubevirt.io" in groups and not groups & {"operator.alauda.io", "hco.kubevirt.io", "cluster.alauda.io"}
        assert call(sim, "GET", "/clusters/global/api/v1/namespaces")[0] == 404
        assert get(sim, f"{KV}/namespaces/kubevirt/kubevirts/kubevirt")["spec"]["configuration"] == {
            "evictionStrategy": "LiveMigrate"}
        cronjob = get(sim, "/apis/batch/v1/namespaces/kube-system/cronjobs/descheduler")
        assert cronjob["metadata"]["labels"]["helm.sh/chart"] == "descheduler-0.36.0"
        assert cronjob["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == "kube-system"
        args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args == ["--policy-config-file", "/policy-dir/policy.yaml",
                        "--feature-gates", "EvictionsInBackground=true", "--v", "3"]
        # no chart reconciler: a direct edit of the policy stays, and no ResourcePatch is recorded
        kubectl(sim, "-n", "kube-system", "patch", "configmap", "descheduler", "--type=merge", "-p",
                '{"data":{"policy.yaml":"edited"}}')
        time.sleep(0.5)
        assert get(sim, "/api/v1/namespaces/kube-system/configmaps/descheduler")["data"]["policy.yaml"] == "edited"


# ------------------------------------------------------------------------------------------------ (a) VMs
def test_a_container_disk_vm_applied_in_a_new_namespace_runs_live_migratable_on_the_preferred_node(rehearsal):
    apply(rehearsal, rehearsal_namespace(), rehearsal_vm("t1", memory="3Gi"))
    found = running_vmi(rehearsal, "t1")
    assert found["status"]["nodeName"] == "worker-a" and found["spec"]["evictionStrategy"] == "LiveMigrate"
    assert condition(found, "LiveMigratable")["status"] == "True" and found["metadata"]["labels"]["app"] == NS
    pod = launcher(rehearsal, "t1")
    # guest 3Gi + overhead 245Mi + 3Gi/512 + 8Mi per vCPU + 16Mi graphics
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": f"{3072 + 245 + 6 + 8 + 16}Mi"}
    assert pod["spec"]["nodeName"] == "worker-a" and pod["metadata"]["labels"]["app"] == NS
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == list(WORKERS)
    assert "descheduler.alpha.kubernetes.io/request-evict-only" in pod["metadata"]["annotations"]


# ------------------------------------------------------------------------------------------------ (b) claims
def test_an_rwx_claim_is_provisioned_and_bound_and_its_vm_live_migrates(rehearsal):
    apply(rehearsal, rehearsal_namespace(), claim("t1-disk"))
    pvc = wait_for(lambda: (found := get(rehearsal, f"/api/v1/namespaces/{NS}/persistentvolumeclaims/t1-disk"))
                   and found["status"].get("phase") == "Bound" and found, 10, 0.05, "claim Bound")
    uid = pvc["metadata"]["uid"]
    assert pvc["spec"]["volumeName"] == f"pvc-{uid}"
    assert pvc["status"] == {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": "10Gi"}}
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == "rbd.csi.ceph.com"
    volume = get(rehearsal, f"/api/v1/persistentvolumes/pvc-{uid}")
    assert volume["status"]["phase"] == "Bound" and volume["spec"]["claimRef"]["uid"] == uid
    spec = volume["spec"]
    assert (spec["persistentVolumeReclaimPolicy"], spec["storageClassName"], spec["volumeMode"], spec["csi"]["driver"]) == (
        "Delete", "ceph-rbd", "Block", "rbd.csi.ceph.com")
    reasons = [reason for _type, reason, _message in events_of(rehearsal, "PersistentVolumeClaim", "t1-disk")]
    assert {"ExternalProvisioning", "Provisioning", "ProvisioningSucceeded"} <= set(reasons)

    apply(rehearsal, rehearsal_vm("t1", claim="t1-disk"))
    before = running_vmi(rehearsal, "t1")
    assert condition(before, "LiveMigratable")["status"] == "True"
    assert launcher(rehearsal, "t1")["spec"]["volumes"][-1] == {"name": "rootdisk", "persistentVolumeClaim": {"claimName": "t1-disk"}}
    migrate(rehearsal, "t1", "move-t1")
    assert final_migration(rehearsal, "move-t1")["status"]["phase"] == "Succeeded"
    after = vmi(rehearsal, "t1")
    assert (after["metadata"]["uid"], after["status"]["nodeName"]) == (before["metadata"]["uid"], "worker-b")

    # Delete reclaim policy: the provisioner removes the volume with its claim
    kubectl(rehearsal, "-n", NS, "delete", "vm", "t1")
    kubectl(rehearsal, "-n", NS, "delete", "pvc", "t1-disk")
    wait_for(lambda: get(rehearsal, f"/api/v1/persistentvolumes/pvc-{uid}") is None, interval=0.05, what="volume deleted")


def test_an_rwo_claim_makes_its_vm_not_live_migratable(rehearsal):
    apply(rehearsal, rehearsal_namespace(), claim("t1-disk", modes=("ReadWriteOnce",)),
          rehearsal_vm("t1", claim="t1-disk"))
    found = running_vmi(rehearsal, "t1")
    assert condition(found, "LiveMigratable") == {
        **condition(found, "LiveMigratable"), "status": "False", "reason": "DisksNotLiveMigratable",
        "message": "cannot migrate VMI: PVC t1-disk is not shared, live migration requires that all PVCs must be "
                   "shared (using ReadWriteMany access mode)"}
    assert get(rehearsal, f"/api/v1/namespaces/{NS}/persistentvolumeclaims/t1-disk")["status"]["phase"] == "Bound"


def test_claims_that_cannot_bind_yet_say_why(rehearsal):
    default_class = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                     "metadata": {"name": "nfs",
                                  "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                     "provisioner": "nfs.csi.k8s.io", "reclaimPolicy": "Retain", "volumeBindingMode": "Immediate"}
    apply(rehearsal, rehearsal_namespace(), claim("missing", storage_class="no-such-class"),
          claim("local", modes=("ReadWriteOnce",), storage_class="local-path"))
    wait_for(lambda: all(events_of(rehearsal, "PersistentVolumeClaim", name) for name in ("missing", "local")), interval=0.05,
             what="the events of both claims")
    assert events_of(rehearsal, "PersistentVolumeClaim", "missing") == [
        ("Warning", "ProvisioningFailed", 'storageclass.storage.k8s.io "no-such-class" not found')]
    assert events_of(rehearsal, "PersistentVolumeClaim", "local") == [
        ("Normal", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")]
    for name in ("missing", "local"):
        pending = get(rehearsal, f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}")
        assert pending["status"] == {"phase": "Pending"} and "volumeName" not in pending["spec"]

    # the first consumer on a node selects it: the volume is provisioned there
    consumer = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "consumer", "namespace": NS},
                "spec": {"nodeName": "worker-b", "containers": [{"name": "c", "image": "busybox:1.36"}],
                         "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "local"}}]}}
    apply(rehearsal, consumer)
    local = wait_for(lambda: (found := get(rehearsal, f"/api/v1/namespaces/{NS}/persistentvolumeclaims/local"))
                     and found["status"]["phase"] == "Bound" and found, 10, 0.05, "local claim Bound")
    assert local["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "worker-b"
    terms = get(rehearsal, f"/api/v1/persistentvolumes/{local['spec']['volumeName']}")["spec"]["nodeAffinity"]
    assert terms["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["worker-b"]

    # a claim without a class gets the default one (DefaultStorageClass admission) and is provisioned from it
    apply(rehearsal, default_class, claim("plain", storage_class=None))
    plain = wait_for(lambda: (found := get(rehearsal, f"/api/v1/namespaces/{NS}/persistentvolumeclaims/plain"))
                     and found["status"]["phase"] == "Bound" and found, 10, 0.05, "default-class claim Bound")
    assert plain["spec"]["storageClassName"] == "nfs"
    kubectl(rehearsal, "-n", NS, "delete", "pvc", "plain")
    released = wait_for(lambda: (pv := get(rehearsal, f"/api/v1/persistentvolumes/{plain['spec']['volumeName']}"))
                        and pv["status"]["phase"] == "Released" and pv, 10, 0.05, "retained volume Released")
    assert released["spec"]["claimRef"]["name"] == "plain"


# ------------------------------------------------------------------------------------------------ (c) cleanup
@pytest.mark.parametrize("cascade", ["background", "foreground"])
def test_deleting_the_namespace_empties_it_ends_a_running_migration_and_removes_it(rehearsal, cascade):
    apply(rehearsal, rehearsal_namespace(), claim("t1-disk"), rehearsal_vm("t1", claim="t1-disk"), rehearsal_vm("t2"))
    running_vmi(rehearsal, "t1")
    running_vmi(rehearsal, "t2")
    volume = get(rehearsal, f"/api/v1/namespaces/{NS}/persistentvolumeclaims/t1-disk")["spec"]["volumeName"]
    add_fault(rehearsal, component="virt-handler", verb="migrate", resource="virtualmachineinstances", namespace=NS,
              name="t1", migration="hang", count=1)
    migrate(rehearsal, "t1", "stuck")
    wait_for(lambda: migration_phase(rehearsal, "stuck") == "Running", interval=0.05, what="migration Running")
    stream = Stream(rehearsal.server, f"{KV}/namespaces/{NS}/virtualmachineinstancemigrations?watch=true"
                                      "&timeoutSeconds=30", context=rehearsal.client_context())

    started_at = time.monotonic()
    kubectl(rehearsal, "delete", "namespace", NS, "--wait=false", f"--cascade={cascade}")
    remaining = wait_for(lambda: condition(get(rehearsal, f"/api/v1/namespaces/{NS}") or {},
                                           "NamespaceContentRemaining").get("status") == "True"
                         and condition(get(rehearsal, f"/api/v1/namespaces/{NS}"), "NamespaceContentRemaining"),
                         interval=0.02, what="NamespaceContentRemaining")
    assert remaining["reason"] == "SomeResourcesRemain"
    assert re.fullmatch(r"Some resources are remaining: (\S+ has \d+ resource instances(, )?)+", remaining["message"])
    assert "pods. has " in remaining["message"]
    wait_for(lambda: get(rehearsal, f"/api/v1/namespaces/{NS}") is None, interval=0.05, what="namespace gone")
    simulated = (time.monotonic() - started_at) * rehearsal.clock.time_scale
    assert simulated < 120, f"{simulated:.0f} simulated s: more than the launchers' 45 s grace period allows"

    phases = []
    while (event := stream.next(10)) is not None:
        phases.append(event["object"]["status"].get("phase"))
        if event["type"] == "DELETED":
            break
    stream.close()
    assert event["type"] == "DELETED" and phases[-1] == "Failed", phases       # cancelled: it never stays Running
    for path in ("/api/v1/pods", "/api/v1/persistentvolumeclaims", f"{KV}/virtualmachines",
                 f"{KV}/virtualmachineinstances", f"{KV}/virtualmachineinstancemigrations"):
        assert get(rehearsal, f"{path}?fieldSelector=metadata.namespace%3D{NS}")["items"] == [], path
    assert get(rehearsal, f"/api/v1/persistentvolumes/{volume}") is None
    assert running_vmi(rehearsal, "erp-db", "vms")["status"]["nodeName"] == "worker-a"   # nothing else touched


def test_a_finalizer_left_in_the_namespace_keeps_it_terminating_and_is_named(rehearsal):
    stuck = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "stuck", "namespace": NS, "finalizers": ["example.com/hold"]}}
    apply(rehearsal, rehearsal_namespace(), stuck)
    kubectl(rehearsal, "delete", "namespace", NS, "--wait=false")

    def finalizers_named():
        namespace = get(rehearsal, f"/api/v1/namespaces/{NS}") or {}
        return condition(namespace, "NamespaceFinalizersRemaining").get("status") == "True" and namespace
    namespace = wait_for(finalizers_named, interval=0.02, what="NamespaceFinalizersRemaining")
    assert namespace["status"]["phase"] == "Terminating"
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in namespace["status"]["conditions"]] == [
        ("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"),
        ("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
         "All legacy kube types successfully parsed"),
        ("NamespaceDeletionContentFailure", "False", "ContentDeleted",
         "All content successfully deleted, may be waiting on finalization"),
        ("NamespaceContentRemaining", "True", "SomeResourcesRemain",
         "Some resources are remaining: configmaps. has 1 resource instances"),
        ("NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain",
         "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")]
    kubectl(rehearsal, "-n", NS, "patch", "configmap", "stuck", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    wait_for(lambda: get(rehearsal, f"/api/v1/namespaces/{NS}") is None, interval=0.05, what="namespace gone")


# ------------------------------------------------------------------------------------------------ (d) descheduler
BOUNDED_POLICY = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "nodeSelector": "kubernetes.io/hostname in (worker-a,worker-b)",
    "profiles": [{"name": "rehearsal", "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"labelSelector": {"matchLabels": SCOPE}, "nodeFit": True,
                                            "podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]}}},
        {"name": "LowNodeUtilization", "args": {"thresholds": {"memory": 52}, "targetThresholds": {"memory": 61}}}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}


def run_descheduler(sim, namespace: str, job: str) -> list[str]:
    """A manual Job from the CronJob (kubectl create job --from=cronjob/descheduler): its log once it succeeded."""
    kubectl(sim, "-n", namespace, "create", "job", job, "--from=cronjob/descheduler")
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}"
    wait_for(lambda: (get(sim, path).get("status") or {}).get("succeeded"), 30, 0.05, f"job {job} succeeded")
    pod = get(sim, f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{job}")["items"][0]
    return kubectl(sim, "-n", namespace, "logs", pod["metadata"]["name"]).splitlines()


def klog_pairs(line: str) -> dict:
    """The key=value pairs of a klog structured line (values JSON or quoted)."""
    return {key: json.loads(value) for key, value in re.findall(r'(\w+)=("[^"]*"|\{[^}]*\}|\S+)', line)}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_memory_only_thresholds_classify_by_memory_alone_and_move_one_vm(scenario, tmp_path):
    descheduler_ns = SCENARIOS[scenario][0]
    with started(scenario, tmp_path) as sim:
        sim.workdir = tmp_path
        assert sim.managers["workload"].wait_idle(20)
        kubectl(sim, "-n", descheduler_ns, "patch", "cronjob", "descheduler", "--type=merge", "-p",
                '{"spec":{"suspend":true}}')
        apply(sim, rehearsal_namespace(), rehearsal_vm("t1", memory="5Gi"), rehearsal_vm("t2", memory="5Gi"))
        before = {name: running_vmi(sim, name) for name in ("t1", "t2")}
        assert {v["status"]["nodeName"] for v in before.values()} == {"worker-a"}
        kubectl(sim, "-n", descheduler_ns, "patch", "configmap", "descheduler", "--type=merge", "-p",
                json.dumps({"data": {"policy.yaml": yaml.safe_dump(BOUNDED_POLICY)}}))

        log = run_descheduler(sim, descheduler_ns, "rehearsal-1")
        lines = [line for line in log if '"Node has been classified"' in line]
        classified = {pairs["node"]: pairs for pairs in (klog_pairs(line) for line in lines)}
        assert (classified["worker-a"]["category"], classified["worker-b"]["category"]) == ("overutilized", "underutilized")
        # usage is reported for cpu, memory and pods; only memory classifies (worker-a's cpu is 36%, far from any limit)
        assert set(classified["worker-a"]["usagePercentage"]) == {"cpu", "memory", "pods"}
        assert [classified[node]["usagePercentage"]["memory"] for node in WORKERS] == [61, 38]
        assert all(line.split('"Balance" ', 1)[1] == 'memory="52.00%"' for line in log
                   if '"Criteria for a node under utilization"' in line)
        assert any(line.endswith('ExtensionPoint="Balance" memory="61.00%"') for line in log
                   if '"Criteria for a node above target utilization"' in line)
        assert any('"Pods on node" node="worker-a" allPods=12 nonRemovablePods=10 removablePods=2' in line
                   for line in log)
        assert log[-1].endswith('"Number of evictions/requests" totalEvicted=0 evictionRequests=1')

        migrations = wait_for(lambda: [m for m in get(sim, f"{KV}/namespaces/{NS}/virtualmachineinstancemigrations")[
            "items"] if m["status"].get("phase") == "Succeeded"], 20, 0.05, "the evacuation Succeeded")
        assert len(migrations) == 1 and migrations[0]["metadata"]["name"].startswith("kubevirt-evacuation-")
        moved = vmi(sim, migrations[0]["spec"]["vmiName"])
        assert moved["status"]["nodeName"] == "worker-b"
        assert moved["metadata"]["uid"] == before[moved["metadata"]["name"]]["metadata"]["uid"]

        # worker-a at 53% is no longer over 61%: the next run has nothing to do
        wait_for(lambda: not [p for p in get(sim, f"/api/v1/namespaces/{NS}/pods")["items"]
                              if p["status"].get("phase") not in ("Running",)], 10, 0.05, "source launcher gone")
        log = run_descheduler(sim, descheduler_ns, "rehearsal-2")
        assert any('"All nodes are under target utilization, nothing to do here"' in line for line in log)
        assert log[-1].endswith("totalEvicted=0 evictionRequests=0")


# ------------------------------------------------------------------------------------------------ (e) faults
def test_a_virt_handler_rule_fails_the_next_migration_of_one_vmi(rehearsal):
    apply(rehearsal, rehearsal_namespace(), rehearsal_vm("t1"), rehearsal_vm("t2"))
    running_vmi(rehearsal, "t1")
    running_vmi(rehearsal, "t2")
    rule = add_fault(rehearsal, component="virt-handler", verb="migrate", resource="virtualmachineinstances",
                     namespace=NS, name="t1", migration="fail", count=1)
    migrate(rehearsal, "t2", "other-vm")
    assert final_migration(rehearsal, "other-vm")["status"]["phase"] == "Succeeded"     # another VMI: not hit

    migrate(rehearsal, "t1", "first")
    failed = final_migration(rehearsal, "first")
    reason = ("Live migration failed error encountered during MigrateToURI3 libvirt api call: virError(Code=1, "
              "Domain=10, Message='operation failed: migration out job: simulated failure (kubesim fault: virt-handler "
              f"migration=fail on {NS}/t1)')")
    assert failed["status"]["phase"] == "Failed" and failed["status"]["migrationState"]["failureReason"] == reason
    state = vmi(rehearsal, "t1")["status"]
    assert state["nodeName"] == "worker-a" and state["migrationState"]["failed"] is True
    assert get(rehearsal, "/_kubesim/faults")["faults"] == []                        # count 1: used up
    assert get(rehearsal, "/_kubesim/counters?cluster=workload")["workload"]["faulted"] == {
        "virt-handler migrate virtualmachineinstances": 1}
    assert rule["migration"] == "fail"

    migrate(rehearsal, "t1", "second")
    assert final_migration(rehearsal, "second")["status"]["phase"] == "Succeeded"


@pytest.mark.parametrize(("rule", "message"), [
    ({"component": "virt-handler", "namespace": NS},
     "a virt-handler rule needs migration: one of ['fail', 'hang', 'slow']"),
    ({"component": "virt-handler", "migration": "fail", "status": 500},
     "a virt-handler rule changes a migration only (no status, latency, drop, warning or dryRun)"),
    ({"component": "virt-handler", "migration": "fail", "verb": "patch"},
     "a virt-handler rule matches verb migrate on resource virtualmachineinstances"),
    ({"migration": "fail"}, "migration is the action of a virt-handler rule (component: virt-handler)"),
    ({"status": 503, "verb": []}, "verb must be a string or a list of strings"),
    ({"status": 503, "namespace": [NS]}, "namespace must be a string"),
    ({"status": 503, "seconds": 0}, "seconds must be a number of seconds > 0"),
    ({"status": 503, "armedBy": {"path": "/"}}, "armedBy must be a non-empty mapping of "
                                                "['cluster', 'verb', 'resource', 'namespace', 'name']"),
    ({"status": 409, "component": "virt-api", "armedBy": {"verb": "delete"}},
     "armedBy arms on HTTP requests; a component rule is armed when added"),
])
def test_bad_rules_are_refused_with_the_reason(rehearsal, rule, message):
    code, status = call(rehearsal, "POST", "/_kubesim/faults", rule)
    assert (code, status["reason"], status["message"]) == (400, "BadRequest", message)
    assert get(rehearsal, "/_kubesim/faults")["faults"] == []


def test_a_503_burst_armed_by_the_namespace_delete_covers_the_namespace_and_its_content(rehearsal):
    apply(rehearsal, rehearsal_namespace(), rehearsal_vm("t1"))
    running_vmi(rehearsal, "t1")
    rule = add_fault(rehearsal, armedBy={"verb": "delete", "resource": "namespaces", "name": NS}, namespace=NS,
                     verb=["delete", "get", "list"], status=503, count=4)
    assert rule["armed"] is False and rule["verb"] == ["delete", "get", "list"]
    assert call(rehearsal, "GET", f"/api/v1/namespaces/{NS}")[0] == 200                 # not armed yet
    kubectl(rehearsal, "delete", "namespace", NS, "--dry-run=server")                   # a dry run arms nothing
    assert get(rehearsal, "/_kubesim/faults")["faults"][0]["armed"] is False

    code, status = call(rehearsal, "DELETE", f"/api/v1/namespaces/{NS}")               # arms, and is answered 503
    assert (code, status["reason"], status["message"]) == (
        503, "ServiceUnavailable", "the server is currently unable to handle the request")
    assert call(rehearsal, "GET", f"/api/v1/namespaces/{NS}")[0] == 503                # the namespace object itself
    assert call(rehearsal, "GET", f"{KV}/namespaces/{NS}/virtualmachines/t1")[0] == 503   # and its content
    assert call(rehearsal, "GET", "/api/v1/namespaces/vms")[0] == 200                  # other namespaces: untouched
    assert call(rehearsal, "POST", f"/api/v1/namespaces/{NS}/configmaps",
                {"metadata": {"name": "c"}})[0] == 201                                  # other verbs: untouched
    assert call(rehearsal, "GET", f"/api/v1/namespaces/{NS}/pods")[0] == 503           # the 4th
    assert call(rehearsal, "DELETE", f"/api/v1/namespaces/{NS}")[0] == 200             # the burst is over
    assert get(rehearsal, "/_kubesim/faults")["faults"] == []
    faulted = get(rehearsal, "/_kubesim/counters?cluster=workload")["workload"]["faulted"]
    assert faulted == {"delete namespaces": 1, "get namespaces": 1, "get virtualmachines": 1, "list pods": 1}


def test_a_timed_burst_ends_after_its_seconds(rehearsal):
    add_fault(rehearsal, verb="get", resource="namespaces", status=503, seconds=0.5)
    assert call(rehearsal, "GET", "/api/v1/namespaces/vms")[0] == 503
    assert get(rehearsal, "/_kubesim/faults")["faults"][0]["seconds"] == 0.5
    time.sleep(0.6)
    assert call(rehearsal, "GET", "/api/v1/namespaces/vms")[0] == 200
    assert get(rehearsal, "/_kubesim/faults")["faults"] == []
