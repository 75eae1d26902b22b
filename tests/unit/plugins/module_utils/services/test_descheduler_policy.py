"""Applying a policy: which policy is wanted from the options, the VM profiles, the ResourcePatch name from the
API warning, the backup file (name, content, read back, never overwritten), the Cluster on the Client's verbs
(update with resourceVersion, 409 as Conflict, the wait through WatchSet), and check mode as a server-side dry run."""
from __future__ import annotations

import copy
import datetime
import time

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_policy as apply
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.client import warnings_of
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params

from .. import k8s_objects as k8s

NOW = datetime.datetime(2026, 11, 30, 10, 15, 0, tzinfo=datetime.timezone.utc)
OPTIONS = {"nodes": ["worker-a", "worker-b"], "vm_labels": {"app": "desched-test"}, "thresholds": {"cpu": 70, "memory": 60, "pods": 20},
           "target_thresholds": {"cpu": 75, "memory": 68, "pods": 30}, "max_pods_to_evict_per_node": 1,
           "max_pods_to_evict_per_namespace": 1, "max_pods_to_evict_total": 1, "node_fit": True}


def options(**given) -> apply.DeschedulerPolicyOptions:
    """The options as the module parses them when only `given` is set."""
    return apply.DeschedulerPolicyOptions.from_params(spec_params(apply.ARG_SPEC, **given))


def test_wanted_policy_rendered_or_given():
    assert apply.wanted_policy(options(**OPTIONS), None) == k8s.VM_POLICY
    assert apply.wanted_policy(options(policy=yaml.safe_dump(k8s.VM_POLICY), node_fit=True), None) == k8s.VM_POLICY


def test_wanted_policy_refuses_both_and_neither():
    with pytest.raises(InvalidOption) as both:
        given = dict(OPTIONS, policy=k8s.VM_POLICY)
        apply.wanted_policy(options(**given), None)
    assert both.value.path == "policy" and "mutually exclusive" in both.value.problem
    with pytest.raises(InvalidOption) as neither:
        apply.wanted_policy(options(nodes=["a"]), None)
    assert neither.value.path == "thresholds"


def test_wanted_policy_merges_into_the_current_policy_only_with_merge():
    merged = apply.wanted_policy(options(merge=True, **OPTIONS), k8s.DEFAULT_POLICY)
    assert [p["name"] for p in merged["profiles"]] == ["default", "vm-rebalance"]
    assert apply.wanted_policy(options(**OPTIONS), k8s.DEFAULT_POLICY) == k8s.VM_POLICY


def test_vm_profiles_default_to_profile_name():
    assert apply.vm_profiles(options(profile_name="vms")) == ["vms"]
    assert apply.vm_profiles(options(profile_name="vms", vm_profiles=[])) == []


def test_spec_defaults_reach_the_options():
    parsed = options()
    assert parsed.min_threshold_gap == 5 and parsed.wait_timeout == 120 and parsed.policy_key == "policy.yaml"
    assert parsed.connection.api_retries == 5


@pytest.mark.parametrize("timeout", [0, -1])
def test_a_wait_timeout_of_zero_or_less_is_refused_before_any_request(timeout):
    with pytest.raises(InvalidOption) as error:
        apply.run(options(state="absent", wait_timeout=timeout), False, client=NoClient())
    assert error.value.path == "wait_timeout" and "more than 0" in error.value.problem


class NoClient:
    """A client that must not be used."""

    def __getattr__(self, name):
        raise AssertionError("no request expected, got " + name)


class Headers(dict):
    def getlist(self, name):
        return [v for k, v in self.items() if k.lower() == name.lower()]


class Response:
    def __init__(self, headers):
        self.headers = headers


def test_resource_patch_name_from_the_warning_header():
    warnings = warnings_of(Response(Headers({"Warning": '299 - "The operation is allowed, and ResourcePatch rp-x7k2q is created"'})))
    assert warnings == ["The operation is allowed, and ResourcePatch rp-x7k2q is created"]
    assert apply.resource_patch_from(warnings) == "rp-x7k2q"
    assert apply.resource_patch_from(["something else"]) is None
    assert warnings_of(Response(None)) == []


def test_backup_written_verified_and_never_overwritten(tmp_path):
    configmap = k8s.configmap()
    configmap["metadata"]["resourceVersion"] = "42"
    first = apply.backup_configmap(configmap, str(tmp_path / "b"), "https://10.0.0.1:6443", now=NOW)
    assert first.endswith("/10.0.0.1-6443_descheduler_descheduler_20261130T101500.000000Z.yaml")
    assert yaml.safe_load(open(first, encoding="utf-8")) == configmap
    second = apply.backup_configmap(configmap, str(tmp_path / "b"), "https://10.0.0.1:6443", now=NOW)
    assert second != first and second.endswith("-1.yaml")
    assert apply.read_backup(first) == configmap


def test_backup_holds_the_object_as_kubectl_shows_it_without_managed_fields(tmp_path):
    configmap = k8s.configmap()
    managers = [{"manager": "helm", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]
    live = dict(configmap, metadata=dict(configmap["metadata"], managedFields=managers))
    path = apply.backup_configmap(live, str(tmp_path), "workload", now=NOW)
    assert apply.read_backup(path) == configmap
    assert live["metadata"]["managedFields"] == managers   # the object read is left as it was


def test_read_backup_refuses_what_is_not_a_configmap(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("kind: Secret\n")
    with pytest.raises(InvalidOption) as error:
        apply.read_backup(str(path))
    assert error.value.path == "backup_file"


class FakeCluster:
    """The two calls `_write` makes: the update (answering the given warnings) and the ResourcePatch list."""

    namespace = "descheduler"

    def __init__(self, warnings, patches):
        self.warnings = warnings
        self.patches = patches
        self.written = None

    def replace_configmap(self, body, dry_run=False):
        assert not dry_run
        self.written = body
        return dict(body, metadata=dict(body["metadata"], resourceVersion="43")), self.warnings

    def resource_patches(self):
        return self.patches


def test_write_names_the_resource_patch_from_the_warning_else_by_lookup():
    configmap = k8s.configmap()
    configmap["metadata"]["resourceVersion"] = "42"
    cluster = FakeCluster(["The operation is allowed, and ResourcePatch rp-abcde is created"], [])
    stored, written = apply._write(cluster, configmap, {"policy.yaml": "x"}, [])
    assert written["resource_patch"] == {"name": "rp-abcde", "namespace": "descheduler", "source": "warning"}
    assert cluster.written["metadata"]["resourceVersion"] == "42" and cluster.written["data"] == {"policy.yaml": "x"}
    assert stored["metadata"]["resourceVersion"] == "43"
    old, new = k8s.resource_patch("rp-old"), k8s.resource_patch("rp-new", created="2026-11-30T10:05:00Z")
    looked_up = apply._write(FakeCluster([], [old, new]), configmap, {"policy.yaml": "x"}, ["rp-old"])[1]["resource_patch"]
    assert looked_up["name"] == "rp-new" and looked_up["source"] == "lookup"
    assert apply._write(FakeCluster([], []), configmap, {"policy.yaml": "x"}, [])[1]["resource_patch"] is None


def test_a_backup_taken_with_no_resource_patch_is_marked_as_the_chart_rendering(tmp_path):
    configmap = k8s.configmap(text="chart\n")
    marked = apply.backup_configmap(configmap, str(tmp_path), "workload", now=NOW, chart_rendering=True)
    plain = apply.backup_configmap(configmap, str(tmp_path), "workload", now=NOW)
    assert open(marked, encoding="utf-8").readline() == apply.CHART_MARK
    assert apply.CHART_MARK not in open(plain, encoding="utf-8").read()
    assert apply.read_backup(marked) == configmap == apply.read_backup(plain)  # the mark is a comment


def test_chart_backup_is_the_newest_marked_backup_of_the_same_configmap(tmp_path):
    live = k8s.configmap(text="override\n")
    live["metadata"]["uid"] = "uid-1"
    older = dict(k8s.configmap(text="chart v1\n"), metadata=dict(live["metadata"]))
    newer = dict(k8s.configmap(text="chart v2\n"), metadata=dict(live["metadata"]))
    assert apply.chart_backup(str(tmp_path / "none"), "workload", live) is None
    apply.backup_configmap(older, str(tmp_path), "workload", now=NOW, chart_rendering=True)
    wanted = apply.backup_configmap(newer, str(tmp_path), "workload", now=NOW + datetime.timedelta(minutes=1), chart_rendering=True)
    # not the chart's: taken with a ResourcePatch in place, of another cluster, of a ConfigMap with another uid
    apply.backup_configmap(live, str(tmp_path), "workload", now=NOW + datetime.timedelta(minutes=2))
    apply.backup_configmap(newer, str(tmp_path), "other", now=NOW + datetime.timedelta(minutes=3), chart_rendering=True)
    recreated = dict(newer, metadata=dict(newer["metadata"], uid="uid-2"))
    apply.backup_configmap(recreated, str(tmp_path), "workload", now=NOW + datetime.timedelta(minutes=4), chart_rendering=True)
    path, backup = apply.chart_backup(str(tmp_path), "workload", live)
    assert path == wanted and backup["data"]["policy.yaml"] == "chart v2\n"


@pytest.mark.parametrize("text,before,chart,done", [
    ("override\n", "override\n", None, False),   # nothing known, nothing changed yet: wait
    ("chart\n", "override\n", None, True),       # the reconciler wrote
    ("chart\n", "chart\n", "chart\n", True),     # restored to the chart's text before: no write will come
    ("override\n", "override\n", "chart\n", False),
    ("chart v2\n", "override\n", "chart\n", True),  # a newer chart rendering than the backup's
])
def test_absent_is_done_when_the_text_changed_or_is_the_charts(text, before, chart, done):
    assert apply.absent_done(text, before, chart) is done


class AbsentCluster:
    """What `_absent` calls, with a ConfigMap that no reconciler will change."""

    namespace = "descheduler"

    def __init__(self, configmap, patches):
        self.configmap, self.patches, self.deleted, self.dry_deleted, self.waited = configmap, patches, [], [], None

    def resource_patches(self):
        return [p for p in self.patches if p["metadata"]["name"] not in self.deleted]

    def delete_resource_patch(self, name, dry_run=False):
        (self.dry_deleted if dry_run else self.deleted).append(name)
        return ["dry run of " + name] if dry_run else []

    def cluster_name(self, given, context):
        return given or context

    def wait_for_change(self, name, done, timeout):
        self.waited = timeout
        return self.configmap if done(self.configmap) else None


def test_absent_after_restoring_the_chart_text_returns_at_once(tmp_path):
    chart = k8s.configmap(text="chart\n")
    params = {"backup_dir": str(tmp_path), "cluster_name": "workload", "wait_timeout": 5}
    apply.backup_configmap(chart, str(tmp_path), "workload", now=NOW, chart_rendering=True)
    cluster = AbsentCluster(chart, [k8s.resource_patch("rp-override"), k8s.resource_patch("rp-restore")])
    result = apply._absent(options(**params), False, cluster, chart, "policy.yaml", "chart\n", {})
    assert result["changed"] and cluster.deleted == ["rp-override", "rp-restore"]
    assert result["chart_policy_from"].startswith(str(tmp_path)) and result["diff"]["before"] == result["diff"]["after"] == "chart\n"
    # without a marked backup the same state cannot be told from an override the reconciler has not undone yet
    other = tmp_path / "empty"
    cluster = AbsentCluster(chart, [k8s.resource_patch("rp-override")])
    with pytest.raises(apply.RebalanceError) as error:
        given = dict(params)
        given.update(backup_dir=str(other))  # not dict(params, backup_dir=...): pylint reads that as backup_dir given twice
        apply._absent(options(**given), False, cluster, chart, "policy.yaml", "chart\n", {})
    assert "no backup in backup_dir shows the chart's policy" in str(error.value) and error.value.path == "wait_timeout"


# ------------------------------------------------------------------------------------------ on the Client
class Kind:
    def __init__(self, kind):
        self.kind, self.namespaced = kind, True


class FakeClient:
    """The Client verbs the service uses, over one ConfigMap and its ResourcePatches: reads, `replace` and `delete`
    (dry runs store nothing, as the API server's), `list` + `watch` for the WatchSet; every write recorded."""

    def __init__(self, configmap, patches=(), refuse=None, warnings=(), events=()):
        self.configmap = copy.deepcopy(configmap)
        self.configmap["metadata"].setdefault("resourceVersion", "42")
        self.patches = list(patches)
        self.refuse, self.warnings, self.events = refuse, list(warnings), list(events)
        self.writes, self.watches = [], []
        self.last_warnings, self.last_resource_version = [], None

    def require_kind(self, kind, group=None, fix=None):
        return Kind(kind)

    def list_kind(self, kind, group=None, namespace=None, **kwargs):
        return {"Node": [k8s.node("worker-a"), k8s.node("worker-b")], "Pod": [], "ResourcePatch": self.patches,
                "CronJob": [k8s.cronjob()], "Deployment": []}.get(kind)

    def get(self, resource, name, namespace=None):
        return copy.deepcopy(self.configmap) if name == self.configmap["metadata"]["name"] else None

    def find_kinds(self, wanted):
        return {(kind, group): Kind(kind) for kind, group in wanted}

    def list(self, resource, namespace=None, label_selector=None, field_selector=None):
        if resource.kind != "ConfigMap":  # the installation's workloads (locate_policy)
            return self.list_kind(resource.kind) or []
        assert field_selector == "metadata.name=" + self.configmap["metadata"]["name"]
        self.last_resource_version = self.configmap["metadata"]["resourceVersion"]
        return [copy.deepcopy(self.configmap)]

    def watch(self, resource, namespace=None, label_selector=None, field_selector=None, resource_version=None, timeout=60):
        self.watches.append(resource_version)
        if not self.events:  # an idle watch: open until the server's timeout (short here), as a real one
            time.sleep(min(timeout, 0.5))
            return
        for event in self.events.pop(0):
            if isinstance(event, Exception):
                raise event
            yield event

    def replace(self, resource, body, namespace=None, dry_run=False, request=None):
        self.writes.append({"verb": "replace", "body": copy.deepcopy(body), "dry_run": dry_run, "request": request})
        if self.refuse is not None:
            raise self.refuse
        self.last_warnings = list(self.warnings)
        stored = copy.deepcopy(body)
        if not dry_run:
            stored["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
            self.configmap = copy.deepcopy(stored)
        return stored

    def delete(self, resource, name, namespace=None, preconditions=None, propagation_policy=None, dry_run=False, request=None):
        self.writes.append({"verb": "delete", "name": name, "dry_run": dry_run, "request": request})
        self.last_warnings = list(self.warnings)
        if not dry_run:
            self.patches = [p for p in self.patches if p["metadata"]["name"] != name]
        return {"kind": "Status", "status": "Success"}

    def server_host(self):
        return "https://10.0.0.1:6443"


def policy_options(tmp_path, **given):
    given = dict(OPTIONS, backup_dir=str(tmp_path / "backups"), cluster_name="workload", **given)
    return options(**given)


def test_check_mode_sends_the_update_as_a_dry_run_and_reports_the_servers_answer(tmp_path):
    client = FakeClient(k8s.configmap(), warnings=["a warning of the dry run"])
    result = apply.run(policy_options(tmp_path), True, client=client, planner=None)
    assert result["changed"] and result["diff"]["after"] == result["policy_yaml"] and "RemoveDuplicates" not in result["diff"]["after"]
    assert [(w["verb"], w["dry_run"], w["request"]) for w in client.writes] == [("replace", True, "update configmap descheduler/descheduler")]
    sent = client.writes[0]["body"]
    assert sent["metadata"]["resourceVersion"] == "42" and yaml.safe_load(sent["data"]["policy.yaml"]) == k8s.VM_POLICY
    assert result["dry_run"] is True and result["warnings_from_api"] == ["a warning of the dry run"]
    assert result["backup_path"] is None and result["resource_patch"] is None and "resource_version" not in result
    assert not (tmp_path / "backups").exists() and client.configmap["metadata"]["resourceVersion"] == "42"


def test_check_mode_without_a_change_sends_nothing(tmp_path):
    client = FakeClient(k8s.configmap(policy=k8s.VM_POLICY))
    result = apply.run(policy_options(tmp_path), True, client=client, planner=None)
    assert not result["changed"] and client.writes == [] and "dry_run" not in result


def test_a_dry_run_the_server_refuses_fails_check_mode_with_the_servers_message(tmp_path):
    message = 'ConfigMap "descheduler" is invalid: []: Too long: must have at most 1048576 bytes'
    client = FakeClient(k8s.configmap(), refuse=ApiFailure("update configmap descheduler/descheduler", 422, "Invalid", message))
    with pytest.raises(ApiFailure) as error:
        apply.run(policy_options(tmp_path), True, client=client, planner=None)
    assert error.value.status == 422 and error.value.api_message == message and message in error.value.message
    assert error.value.path == "update configmap descheduler/descheduler (server-side dry run)"
    assert "nothing was changed" in error.value.fix
    assert [w["dry_run"] for w in client.writes] == [True] and not (tmp_path / "backups").exists()


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_409_on_the_update_is_the_services_conflict(tmp_path, check_mode):
    client = FakeClient(k8s.configmap(), refuse=ApiFailure("update configmap descheduler/descheduler", 409, "Conflict", "the object has been modified"))
    with pytest.raises(apply.Conflict) as error:
        apply.run(policy_options(tmp_path), check_mode, client=client, planner=None)
    assert error.value.message.startswith("update configmap descheduler/descheduler: 409 Conflict: the object has been modified. ")
    assert "nothing was overwritten" in error.value.message and "(resourceVersion 42)" in error.value.message
    assert error.value.details["status"] == 409


def test_apply_backs_up_then_updates_with_the_resource_version(tmp_path):
    client = FakeClient(k8s.configmap(), warnings=["The operation is allowed, and ResourcePatch rp-abcde is created"])
    result = apply.run(policy_options(tmp_path), False, client=client, planner=None)
    assert [(w["verb"], w["dry_run"]) for w in client.writes] == [("replace", False)]
    assert result["resource_version"] == "43" and result["resource_patch"]["name"] == "rp-abcde" and "dry_run" not in result
    assert yaml.safe_load(open(result["backup_path"], encoding="utf-8"))["metadata"]["resourceVersion"] == "42"
    assert result["backup_path"].startswith(str(tmp_path / "backups" / "workload_descheduler_descheduler_"))


def test_restored_in_check_mode_is_a_dry_run_of_the_backup_data(tmp_path):
    backup = k8s.configmap(text="chart\n")
    backup["metadata"]["resourceVersion"] = "7"
    path = apply.backup_configmap(backup, str(tmp_path / "given"), "workload", now=NOW)
    client = FakeClient(k8s.configmap(text="override\n"))
    result = apply.run(options(state="restored", backup_file=path, backup_dir=str(tmp_path / "backups"), cluster_name="workload"),
                       True, client=client)
    assert result["changed"] and result["dry_run"] and result["restored_from"] == path
    assert result["diff"]["before"] == "override\n" and result["diff"]["after"] == "chart\n"
    assert [(w["verb"], w["dry_run"]) for w in client.writes] == [("replace", True)]
    assert client.writes[0]["body"]["data"] == {"policy.yaml": "chart\n"} and client.writes[0]["body"]["metadata"]["resourceVersion"] == "42"
    assert result["backup_path"] is None and not (tmp_path / "backups").exists()


def test_absent_in_check_mode_sends_the_deletes_as_dry_runs_and_waits_for_nothing(tmp_path):
    client = FakeClient(k8s.configmap(text="override\n"), patches=[k8s.resource_patch("rp-a"), k8s.resource_patch("rp-b")])
    result = apply.run(options(state="absent", backup_dir=str(tmp_path / "backups"), cluster_name="workload"), True, client=client)
    assert result["changed"] and result["resource_patches_removed"] == ["rp-a", "rp-b"] and result["dry_run"]
    assert [(w["verb"], w["name"], w["dry_run"], w["request"]) for w in client.writes] == [
        ("delete", "rp-a", True, "delete resourcepatch descheduler/rp-a"), ("delete", "rp-b", True, "delete resourcepatch descheduler/rp-b")]
    assert len(client.patches) == 2 and client.watches == [] and result["backup_path"] is None and not (tmp_path / "backups").exists()


def modified(configmap, version, text):
    changed = copy.deepcopy(configmap)
    changed["metadata"]["resourceVersion"] = str(version)
    changed["data"]["policy.yaml"] = text
    return {"type": "MODIFIED", "object": changed}


def test_absent_deletes_and_watches_until_the_chart_policy_is_back(tmp_path):
    configmap = k8s.configmap(text="override\n")
    configmap["metadata"]["resourceVersion"] = "42"
    client = FakeClient(configmap, patches=[k8s.resource_patch("rp-a")], events=[[modified(configmap, 43, "chart\n")]])
    result = apply.run(options(state="absent", backup_dir=str(tmp_path / "backups"), cluster_name="workload", wait_timeout=5), False,
                       client=client)
    assert [(w["verb"], w["dry_run"]) for w in client.writes] == [("delete", False)] and client.patches == []
    assert result["resource_version"] == "43" and result["diff"]["after"] == "chart\n" and "dry_run" not in result
    assert client.watches[0] == "42"  # the watch starts at the list's resourceVersion
    assert yaml.safe_load(open(result["backup_path"], encoding="utf-8"))["data"]["policy.yaml"] == "override\n"


def test_wait_for_change_resumes_a_broken_watch_and_gives_up_at_the_timeout():
    configmap = k8s.configmap(text="override\n")
    configmap["metadata"]["resourceVersion"] = "42"
    client = FakeClient(configmap, events=[[modified(configmap, 43, "override\n"), ConnectionError("dropped")],
                                           [modified(configmap, 44, "chart\n")]])
    cluster = apply.Cluster(client, "descheduler", "descheduler")
    found = cluster.wait_for_change("descheduler", lambda obj: obj["data"]["policy.yaml"] == "chart\n", 10)
    assert found["metadata"]["resourceVersion"] == "44" and client.watches[:2] == ["42", "43"]  # reopened where it broke
    quiet = apply.Cluster(FakeClient(configmap), "descheduler", "descheduler")
    assert quiet.wait_for_change("descheduler", lambda obj: False, 0.3) is None
    assert cluster.wait_for_change("descheduler", lambda obj: True, 0.3)["metadata"]["resourceVersion"] == "42"  # done already


def test_cluster_name_is_the_option_else_the_context_else_the_server():
    cluster = apply.Cluster(FakeClient(k8s.configmap()), "descheduler", "descheduler")
    assert cluster.cluster_name("workload", "ctx") == "workload"
    assert cluster.cluster_name(None, "ctx") == "ctx"
    assert cluster.cluster_name(None, None) == "https://10.0.0.1:6443"


class ReconcilingCluster(AbsentCluster):
    """An AbsentCluster whose chart reconciler writes `chart` back once no ResourcePatch overrides the ConfigMap."""

    def __init__(self, configmap, patches, chart):
        super().__init__(configmap, patches)
        self.chart = chart

    def wait_for_change(self, name, done, timeout):
        current = self.configmap if self.resource_patches() else self.chart
        return current if done(current) else None


@pytest.mark.parametrize("marked_file", [True, False])
def test_restoring_the_charts_rendering_over_resourcepatches_deletes_them_instead_of_writing(tmp_path, marked_file):
    """The given backup marked as the chart's, or unmarked (descheduler_backup's) with a marked one of the same data in
    backup_dir (the apply's own): the overrides are deleted, nothing is written, and the chart's text comes back."""
    chart = k8s.configmap(text="chart\n")
    given = apply.backup_configmap(chart, str(tmp_path / "given"), "workload", now=NOW, chart_rendering=marked_file)
    apply.backup_configmap(chart, str(tmp_path / "backups"), "workload", now=NOW, chart_rendering=not marked_file)
    override = k8s.configmap(text="override\n")
    cluster = ReconcilingCluster(override, [k8s.resource_patch("rp-override")], chart)
    given_options = options(state="restored", backup_file=given, backup_dir=str(tmp_path / "backups"), cluster_name="workload", wait_timeout=5)
    result = apply._restored(given_options, False, cluster, override, "policy.yaml", {})
    assert result["changed"] and cluster.deleted == ["rp-override"] and result["restored_from"] == given
    assert result["diff"]["before"] == "override\n" and result["diff"]["after"] == "chart\n"
    assert result["chart_policy_from"] == (given if marked_file else apply.chart_backup(str(tmp_path / "backups"), "workload", chart)[0])


def test_restoring_a_backup_that_is_not_the_charts_over_resourcepatches_writes_it(tmp_path):
    """A backup of another policy (no marked backup shows its data) is written back, as without ResourcePatches."""
    apply.backup_configmap(k8s.configmap(text="chart\n"), str(tmp_path / "backups"), "workload", now=NOW, chart_rendering=True)
    given = apply.backup_configmap(k8s.configmap(text="mine\n"), str(tmp_path / "given"), "workload", now=NOW)
    override = k8s.configmap(text="override\n")
    cluster = ReconcilingCluster(override, [k8s.resource_patch("rp-override")], k8s.configmap(text="chart\n"))
    given_options = options(state="restored", backup_file=given, backup_dir=str(tmp_path / "backups"), cluster_name="workload")
    assert apply._chart_rendering(given_options, cluster, override, apply.read_backup(given)) is None
