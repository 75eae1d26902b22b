"""vm_migration_cooldown's service on an in-memory cluster: options refused before any request, three lists (one per
kind, or per kind and namespace), marks on the launcher that runs the VMI now, lifts of what is due, someone else's
marks left alone, check mode as dry runs, a second run that changes nothing, state=absent, and the policy finding."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import cooldown as cd
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, KindNotServed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_cooldown as svc

from .. import k8s_objects as k8s
from ..checks.test_cooldown import NOW, at, migration
from .memory_cluster import MemoryCluster


def options(**given) -> svc.VmMigrationCooldownOptions:
    return svc.VmMigrationCooldownOptions.from_params(spec_params(svc.ARG_SPEC, **given))


def with_mandatory(policy: dict) -> dict:
    profiles = []
    for profile in policy["profiles"]:
        config = [dict(e, args=dict(e.get("args") or {}, noEvictionPolicy="Mandatory")) if e["name"] == "DefaultEvictor" else e
                  for e in profile["pluginConfig"]]
        profiles.append(dict(profile, pluginConfig=config))
    return dict(policy, profiles=profiles)


def cluster(vmims=(), extra=(), policy=None, marks=None) -> MemoryCluster:
    """Two VMs with their launchers (vm-a on worker-b after its migrations, vm-b on worker-a), the Descheduler and its policy;
    `marks` are annotations per VM on its launcher."""
    objects = []
    for name, node in (("vm-a", "worker-b"), ("vm-b", "worker-a")):
        vmi = k8s.vmi(name, node=node, labels={"app": "desched-test"})
        pod = k8s.launcher(vmi, metadata={"annotations": dict((marks or {}).get(name) or {})})
        objects += [vmi, pod]
    # the source launcher of vm-a's last migration: finished, still listed
    objects.append(k8s.launcher(k8s.vmi("vm-a", labels={"app": "desched-test"}), name="virt-launcher-vm-a-old", node="worker-a",
                                phase="Succeeded", metadata={"annotations": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-60)}}))
    objects += [k8s.cronjob(), k8s.configmap(policy=with_mandatory(k8s.VM_POLICY) if policy is None else policy)]
    return MemoryCluster(objects + list(vmims) + list(extra))


def run(api, check_mode=False, now=NOW, **given):
    return svc.run(options(**dict({"cooldown": "15m"}, **given)), check_mode, client=api, now=lambda: now)


def pod_notes(api, name="virt-launcher-vm-a-abcde", namespace="desched-test") -> dict:
    return api.find("Pod", name, namespace)["metadata"].get("annotations") or {}


@pytest.mark.parametrize("given, path", [
    ({"cooldown": "soon"}, "cooldown"), ({"cooldown": 0}, "cooldown"), ({"max_cooldown": "5m", "cooldown": "15m"}, "max_cooldown"),
    ({"history_window": "-1"}, "history_window"), ({"namespaces": ["Bad_NS"]}, "namespaces"), ({"label_selector": "a in (b"}, "label_selector"),
    ({"descheduler_namespace": "no/pe"}, "descheduler_namespace"),
])
def test_bad_options_are_refused_before_any_request(given, path):
    api = cluster()
    with pytest.raises(InvalidOption) as caught:
        run(api, **given)
    assert caught.value.path == path and api.requests == []


def test_the_spec_defaults_are_the_openshift_profiles():
    scope = svc.settings(options())
    assert (scope.cooldown, scope.max_cooldown, scope.history_window, scope.state, scope.check_policy) == (900, 21600, 21600, "present", True)


def test_a_vm_that_migrated_ten_minutes_ago_is_marked_on_its_current_launcher():
    api = cluster([migration("m-1", vm="vm-a", ended_minutes_ago=10)])
    result = run(api)
    assert result["changed"] and result["findings"] == [] and result["clock"]["source"] == "local_clock"
    assert result["marked"] == [{"namespace": "desched-test", "vm": "vm-a", "pod": "virt-launcher-vm-a-abcde", "node": "worker-b",
                                 "last_migration": at(10), "migrations_in_window": 1, "migrating": False, "cooldown_seconds": 900,
                                 "until": at(-5)}]
    assert pod_notes(api) == {k8s.EVICT_ONLY: "", k8s.DOMAIN: "vm-a", cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-5)}
    assert pod_notes(api, "virt-launcher-vm-b-abcde").get(cd.PREFER_NO_EVICTION) is None
    assert result["diff"]["before"] == {"desched-test/virt-launcher-vm-a-abcde": {}}
    assert result["diff"]["after"] == {"desched-test/virt-launcher-vm-a-abcde": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-5)}}
    # the finished source launcher keeps its old mark: it is not evictable, and it goes with the migration
    assert [w[3] for w in api.writes()] == ["virt-launcher-vm-a-abcde"]


def test_the_cluster_is_read_in_three_lists_and_per_namespace_with_namespaces():
    api = cluster([migration("m-1", ended_minutes_ago=10)])
    run(api, check_policy=False)
    assert sorted(r[1] for r in api.requests if r[0] == "list") == ["Pod", "VirtualMachineInstance", "VirtualMachineInstanceMigration"]
    api = cluster([migration("m-1", ended_minutes_ago=10)])
    run(api, check_policy=False, namespaces=["desched-test", "other"], label_selector="app=desched-test")
    lists = [r for r in api.requests if r[0] == "list"]
    assert len(lists) == 6 and {r[2] for r in lists} == {"desched-test", "other"}
    assert ("list", "VirtualMachineInstance", "desched-test", "app=desched-test") in lists
    assert ("list", "Pod", "desched-test", "kubevirt.io=virt-launcher") in lists


def test_a_second_run_changes_nothing_and_keeps_the_mark():
    api = cluster([migration("m-1", ended_minutes_ago=10)])
    run(api)
    again = run(api, now=NOW + datetime.timedelta(minutes=2))
    assert again["changed"] is False and [k["vm"] for k in again["kept"]] == ["vm-a"] and again["marked"] == [] and "diff" not in again
    assert len(api.writes()) == 1  # the first run's mark only


def test_a_mark_is_lifted_once_its_time_has_passed():
    api = cluster([migration("m-1", ended_minutes_ago=10)])
    run(api)
    later = run(api, now=NOW + datetime.timedelta(minutes=6))
    assert later["changed"] and [entry["vm"] for entry in later["lifted"]] == ["vm-a"]
    assert cd.PREFER_NO_EVICTION not in pod_notes(api) and cd.COOLDOWN_UNTIL not in pod_notes(api)
    assert run(api, now=NOW + datetime.timedelta(minutes=7))["changed"] is False


def test_another_migration_doubles_the_cooldown_and_moves_the_mark():
    api = cluster([migration("m-1", ended_minutes_ago=50), migration("m-2", ended_minutes_ago=5)])
    result = run(api)
    assert result["marked"][0]["cooldown_seconds"] == 1800 and pod_notes(api)[cd.COOLDOWN_UNTIL] == at(-25)


def test_a_vm_migrating_now_is_marked():
    api = cluster([migration("hang", vm="vm-b", phase="Running", ended_minutes_ago=2)])
    result = run(api)
    assert [(m["vm"], m["migrating"], m["pod"]) for m in result["marked"]] == [("vm-b", True, "virt-launcher-vm-b-abcde")]


def test_someone_elses_prefer_no_eviction_is_left_alone_and_reported():
    api = cluster([migration("m-1", ended_minutes_ago=10)], marks={"vm-a": {cd.PREFER_NO_EVICTION: "true"}})
    result = run(api)
    assert result["changed"] is False and api.writes() == []
    assert result["not_marked"][0]["vm"] == "vm-a" and "set by someone else" in result["not_marked"][0]["reason"]
    assert run(api, state="absent")["lifted"] == [] and pod_notes(api)[cd.PREFER_NO_EVICTION] == "true"


def test_a_mark_of_ours_on_a_vm_without_migrations_is_lifted():
    api = cluster(marks={"vm-b": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-30)}})
    result = run(api)
    assert [(e["vm"], e["pod"]) for e in result["lifted"]] == [("vm-b", "virt-launcher-vm-b-abcde")] and result["vms"] == []


def test_check_mode_sends_the_patches_as_dry_runs_and_changes_nothing():
    api = cluster([migration("m-1", ended_minutes_ago=10)], marks={"vm-b": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(30)}})
    result = run(api, check_mode=True)
    assert result["changed"] and result["dry_run"] and [m["vm"] for m in result["marked"]] == ["vm-a"]
    assert [e["vm"] for e in result["lifted"]] == ["vm-b"]
    assert all(write[5] is True for write in api.writes()) and len(api.writes()) == 2
    assert cd.COOLDOWN_UNTIL not in pod_notes(api) and cd.COOLDOWN_UNTIL in pod_notes(api, "virt-launcher-vm-b-abcde")
    assert result["diff"]["after"]["desched-test/virt-launcher-vm-a-abcde"][cd.COOLDOWN_UNTIL] == at(-5)


def test_absent_lifts_every_mark_of_ours_and_reads_only_the_pods():
    marks = {"vm-a": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-30)}, "vm-b": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-9)}}
    api = cluster([migration("m-1", ended_minutes_ago=1)], marks=marks)
    result = run(api, state="absent")
    assert sorted(e["vm"] for e in result["lifted"]) == ["vm-a", "vm-b"] and result["findings"] == []
    assert [r[1] for r in api.requests if r[0] in ("list", "get")] == ["Pod"]
    assert run(api, state="absent")["changed"] is False


def test_absent_with_a_selector_lifts_only_the_vms_it_selects():
    marks = {"vm-a": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-30)}, "vm-b": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-9)}}
    api = cluster(marks=marks)
    api.find("Pod", "virt-launcher-vm-b-abcde", "desched-test")["metadata"]["labels"]["app"] = "other"
    assert [e["vm"] for e in run(api, state="absent", label_selector="app=desched-test")["lifted"]] == ["vm-a"]


def test_a_vm_without_a_live_launcher_is_skipped_with_its_node():
    api = cluster([migration("m-1", ended_minutes_ago=10)])
    api.objects["Pod"] = [p for p in api.objects["Pod"] if p["metadata"]["name"] != "virt-launcher-vm-a-abcde"]
    result = run(api)
    assert result["changed"] is False and result["not_marked"][0]["reason"] == "no live virt-launcher Pod on its node worker-b"


def test_a_pod_gone_since_the_list_is_skipped():
    api = cluster([migration("m-1", ended_minutes_ago=10)])
    original = api.patch

    def vanished(res, name, body, **kwargs):
        api.objects["Pod"] = [p for p in api.objects["Pod"] if p["metadata"]["name"] != name]
        return original(res, name, body, **kwargs)
    api.patch = vanished
    result = run(api)
    assert result["changed"] is False and result["not_marked"][0]["reason"] == "the Pod is gone since it was listed"


def test_a_policy_without_mandatory_is_a_finding():
    api = cluster([migration("m-1", ended_minutes_ago=10)], policy=k8s.VM_POLICY)
    findings = run(api)["findings"]
    assert [f["code"] for f in findings] == ["cooldown_not_enforced"] and findings[0]["namespace"] == "descheduler"


def test_without_a_descheduler_the_policy_is_unknown():
    api = cluster()
    api.objects["CronJob"] = []
    assert [f["code"] for f in run(api)["findings"]] == ["cooldown_policy_unknown"]
    api.objects["CronJob"] = [k8s.cronjob()]
    api.objects["ConfigMap"][0]["data"]["policy.yaml"] = "profiles: ["
    assert "not YAML" in run(api)["findings"][0]["message"]
    assert run(api, check_policy=False)["findings"] == []


def test_a_later_timestamp_in_the_cluster_moves_now_forward():
    api = cluster([migration("m-1", ended_minutes_ago=10)])
    # the host running the module is 20 minutes behind: the newest timestamp (the migration's end) is later than its clock
    result = run(api, now=NOW - datetime.timedelta(minutes=20))
    assert result["clock"]["source"] == "newest_timestamp" and result["clock"]["now"] == at(10)
    assert result["marked"][0]["until"] == at(-5)


def test_kubevirt_not_served_is_said():
    api = MemoryCluster([], served=["Pod", "ConfigMap"])
    with pytest.raises(KindNotServed) as caught:
        run(api)
    assert "VirtualMachineInstance" in caught.value.message and "Install KubeVirt" in caught.value.message


def test_the_policy_text_is_read_from_the_workloads_configmap():
    api = cluster([migration("m-1", ended_minutes_ago=10)], policy=k8s.VM_POLICY)
    run(api)
    assert ("get", "ConfigMap", "descheduler", "descheduler") in api.requests


def test_lifting_needs_only_the_pods_kind():
    api = MemoryCluster([k8s.launcher(k8s.vmi("vm-a"), metadata={"annotations": {cd.PREFER_NO_EVICTION: "", cd.COOLDOWN_UNTIL: at(-5)}})],
                        served=["Pod"])
    assert [e["vm"] for e in run(api, state="absent")["lifted"]] == ["vm-a"]
