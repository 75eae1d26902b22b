"""ACP chart-managed plugin objects: a user's edit is allowed with a warning and recorded as a ResourcePatch
that survives chart reconciliation; deleting the ResourcePatch restores the chart rendering; edits without
a ResourcePatch (controllers) are reconciled away."""
import re
import time

import pytest

from kubesim import scenario, subresources
from kubesim.acp import chart, resourcepatch
from kubesim.api import RequestContext
from kubesim.clock import Clock
from kubesim.controllers import ControllerManager, garbage_collector, namespace

import in_process
from support.waiting import wait_for

USED = [subresources.register, garbage_collector.register, namespace.register, chart.register, resourcepatch.register]
WARNING = re.compile(r"^The operation is allowed, and ResourcePatch (rp-[a-z0-9]{5}) is created$")
ADMIN = "kubernetes-admin"
RP = "resourcepatches.operator.alauda.io"


@pytest.fixture
def plugin():
    with in_process.running_scenario("acp-plugin-basics", USED) as started:
        yield started


def rt(cluster, key):
    return cluster.registry.by_key(key)


def policy(cluster):
    return cluster.get(rt(cluster, "configmaps"), "descheduler", "descheduler")["data"]["policy.yaml"]


def edit_policy(cluster, text, user=ADMIN, dry_run=False):
    ctx = RequestContext(user=user, dry_run=dry_run)
    cluster.patch(rt(cluster, "configmaps"), "descheduler", "descheduler", "strategic",
                  {"data": {"policy.yaml": text}}, ctx)
    return ctx.warnings


def patches(cluster):
    return [e.obj for e in cluster.store.entries(RP)]


def resyncs(seconds=0.5):
    """Let several resync periods pass (0.2 s of real time each at least)."""
    time.sleep(seconds)


BOUNDED = 'apiVersion: "descheduler/v1alpha2"\nkind: "DeschedulerPolicy"\nmaxNoOfPodsToEvictTotal: 1\n'


def test_user_edit_warns_creates_a_resourcepatch_and_survives_resync(plugin):
    cluster, manager = plugin
    original = policy(cluster)
    warnings = edit_policy(cluster, BOUNDED)
    assert len(warnings) == 1 and WARNING.match(warnings[0])
    name = WARNING.match(warnings[0]).group(1)
    rp = cluster.get(rt(cluster, RP), "descheduler", name)
    assert rp["spec"]["release"] == "descheduler/descheduler"
    assert rp["spec"]["target"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "descheduler",
                                    "name": "descheduler"}
    assert rp["spec"]["jsonPatch"] == [{"op": "add", "path": "/data/policy.yaml", "value": BOUNDED}]
    assert rp["metadata"]["annotations"]["cpaas.io/creator"] == ADMIN
    assert re.fullmatch(r"[0-9a-f]{32}", rp["metadata"]["labels"]["target"])
    resyncs()
    assert manager.wait_idle()
    assert policy(cluster) == BOUNDED
    cluster.delete(rt(cluster, RP), "descheduler", name)
    wait_for(lambda: policy(cluster) == original, interval=0.02, what="the chart's policy back once its ResourcePatch is deleted")


def test_edit_without_resourcepatch_is_reconciled_away(plugin):
    cluster, _manager = plugin
    original = policy(cluster)
    assert edit_policy(cluster, BOUNDED, user="system:serviceaccount:cpaas-system:sentry") == []
    assert not patches(cluster)
    wait_for(lambda: policy(cluster) == original, interval=0.02, what="the unrecorded edit reconciled away")


def test_controllers_and_anonymous_kubectl_edits_are_recorded_too(plugin):
    cluster, _manager = plugin
    assert WARNING.match(edit_policy(cluster, BOUNDED, user="system:anonymous")[0])
    assert WARNING.match(edit_policy(cluster, BOUNDED + "# again\n", user="system:kube-controller-manager")[0])
    assert [rp["metadata"]["annotations"]["cpaas.io/creator"] for rp in sorted(
        patches(cluster), key=lambda rp: int(rp["metadata"]["resourceVersion"]))] == [
        "system:anonymous", "system:kube-controller-manager"]
    resyncs(0.3)
    assert policy(cluster) == BOUNDED + "# again\n"


def test_dry_run_and_noop_edits_create_nothing(plugin):
    cluster, _manager = plugin
    assert edit_policy(cluster, BOUNDED, dry_run=True) == []
    assert edit_policy(cluster, policy(cluster)) == []
    labelled = RequestContext(user=ADMIN)
    cluster.patch(rt(cluster, "configmaps"), "descheduler", "descheduler", "merge",
                  {"metadata": {"labels": {"team": "ops"}}}, labelled)
    assert labelled.warnings == [] and not patches(cluster)


def test_patches_apply_in_creation_order_and_each_stands_alone(plugin):
    cluster, manager = plugin
    first = WARNING.match(edit_policy(cluster, BOUNDED)[0]).group(1)
    ctx = RequestContext(user=ADMIN)
    cluster.patch(rt(cluster, "cronjobs.batch"), "descheduler", "descheduler", "merge", {"spec": {"suspend": True}}, ctx)
    second = WARNING.match(ctx.warnings[0]).group(1)
    third = WARNING.match(edit_policy(cluster, BOUNDED + "maxNoOfPodsToEvictPerNode: 1\n")[0]).group(1)
    assert len({first, second, third}) == 3
    cronjob_rp = cluster.get(rt(cluster, RP), "descheduler", second)
    assert cronjob_rp["spec"]["target"]["kind"] == "CronJob"
    assert cronjob_rp["spec"]["jsonPatch"] == [{"op": "add", "path": "/spec/suspend", "value": True}]
    resyncs()
    assert policy(cluster).endswith("maxNoOfPodsToEvictPerNode: 1\n")
    cluster.delete(rt(cluster, RP), "descheduler", third)
    wait_for(lambda: policy(cluster) == BOUNDED, interval=0.02, what="the first patch's policy alone once the third is deleted")
    cluster.delete(rt(cluster, RP), "descheduler", first)
    wait_for(lambda: "PodsWithPVC" in policy(cluster), interval=0.02, what="the chart's policy back once the first patch is deleted")
    assert manager.wait_idle()
    assert cluster.get(rt(cluster, "cronjobs.batch"), "descheduler", "descheduler")["spec"]["suspend"] is True
    cluster.delete(rt(cluster, RP), "descheduler", second)
    wait_for(lambda: cluster.get(rt(cluster, "cronjobs.batch"), "descheduler", "descheduler")["spec"]["suspend"]
             is False, 2, 0.02, "the CronJob unsuspended once its patch is deleted")


def test_status_writes_and_unmanaged_objects_are_not_recorded(plugin):
    cluster, _manager = plugin
    cronjobs = rt(cluster, "cronjobs.batch")
    ctx = RequestContext(user=ADMIN)
    current = cluster.get(cronjobs, "descheduler", "descheduler")
    cluster.update(cronjobs, "descheduler", "descheduler", {**current, "status": {"active": []}}, ctx,
                   subresource="status")
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine", "labels": {
        "app.kubernetes.io/name": "descheduler"}}, "data": {"a": "1"}}
    cluster.create(rt(cluster, "configmaps"), "descheduler", other, ctx)   # a user's own object, after start
    cluster.patch(rt(cluster, "configmaps"), "descheduler", "mine", "merge", {"data": {"a": "2"}}, ctx)
    assert ctx.warnings == [] and not patches(cluster)
    resyncs(0.3)
    assert cluster.get(rt(cluster, "configmaps"), "descheduler", "mine")["data"] == {"a": "2"}


def test_helm_marked_objects_created_later_are_managed_too(plugin):
    cluster, _manager = plugin
    cluster.create(rt(cluster, "namespaces"), None, {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "metallb-system"}})
    cluster.create(rt(cluster, "configmaps"), "metallb-system", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "speaker", "annotations": {chart.RELEASE_NAME: "metallb",
                                                        chart.RELEASE_NAMESPACE: "metallb-system"}},
        "data": {"mode": "frr"}})
    ctx = RequestContext(user=ADMIN)
    cluster.patch(rt(cluster, "configmaps"), "metallb-system", "speaker", "merge", {"data": {"mode": "native"}}, ctx)
    name = WARNING.match(ctx.warnings[0]).group(1)
    rp = cluster.get(rt(cluster, RP), "metallb-system", name)
    assert rp["spec"]["release"] == "metallb-system/metallb"
    resyncs(0.3)
    assert cluster.get(rt(cluster, "configmaps"), "metallb-system", "speaker")["data"] == {"mode": "native"}


def test_json_diff_escapes_keys_and_replaces_lists_whole():
    base = {"data": {"a/b": "1", "gone": "x"}, "spec": {"args": ["--v=3"]}}
    new = {"data": {"a/b": "2", "new~key": "y"}, "spec": {"args": ["--v=4"]}}
    ops = chart.json_diff(base, new)
    assert {"op": "remove", "path": "/data/gone"} in ops
    assert {"op": "add", "path": "/data/a~1b", "value": "2"} in ops
    assert {"op": "add", "path": "/data/new~0key", "value": "y"} in ops
    assert {"op": "add", "path": "/spec/args", "value": ["--v=4"]} in ops
    assert chart.apply_patch(base, ops) == new


def test_package_objects_without_helm_markers_are_recognised_at_start():
    cluster = scenario.build_cluster("workload", {}, Clock(100))
    manager = ControllerManager(cluster)
    for register in USED:
        register(cluster, manager)
    scenario.populate(cluster, {"namespaces": ["descheduler"], "objects": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "descheduler", "namespace": "descheduler", "labels": {"app.kubernetes.io/name": "descheduler"}},
         "data": {"policy.yaml": "kind: DeschedulerPolicy\n"}}]})
    manager.start()
    try:
        assert manager.wait_idle()
        warnings = edit_policy(cluster, BOUNDED)
        assert len(warnings) == 1 and WARNING.match(warnings[0])
        assert patches(cluster)[0]["spec"]["release"] == "descheduler/descheduler"
    finally:
        manager.stop()
