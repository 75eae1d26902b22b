"""Dry runs through the admission hooks with side effects: KubeVirt's eviction interceptor gives its real
answer but marks nothing (no evacuationNodeName, no eviction-source annotation, no migration), whether the
dry run is the request's `dryRun=All` or the Eviction's `deleteOptions.dryRun` (what `kubectl drain
--dry-run=server` sends); ACP's ResourcePatch recorder records nothing on a dry-run edit."""
import copy
import re

import pytest

from kubesim import subresources
from kubesim.acp import chart, resourcepatch
from kubesim.api import RequestContext
from kubesim.controllers import garbage_collector, namespace
from kubesim.kubevirt import objects

import in_process

from kubevirt_sim import NS, VM, VMI, VMIM, Sim

PREFIX = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
DESCHEDULER = {"requested-by": "sigs.k8s.io/descheduler"}


def snapshot(cluster, keys):
    with cluster.lock:
        return cluster.store.rv, {(k, e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"]):
                                  copy.deepcopy(e.obj) for k in keys for e in cluster.store.entries(k)}


# ------------------------------------------------------------------------------------------ KubeVirt
@pytest.fixture(scope="module")
def sim():
    sim = Sim([objects.vm("lm", NS, eviction_strategy="LiveMigrate", annotations={"kubesim.io/migration": "hang"}),
               objects.vm("none", NS, eviction_strategy="None")], strategy=None)
    for name in ("lm", "none"):
        sim.wait_running(name)
    sim.settle()
    yield sim
    sim.stop()


WATCHED = [VMI, VM, VMIM, "pods", "poddisruptionbudgets.policy"]


def dry_evict(sim, pod_name, where, annotations=None):
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod_name, "namespace": NS}}
    if annotations:
        body["metadata"]["annotations"] = annotations
    if where == "deleteOptions":
        body["deleteOptions"] = {"dryRun": ["All"]}
    ctx = RequestContext(dry_run=where == "query")
    try:
        return subresources.evict(sim.cluster, NS, pod_name, body, ctx)
    except Exception as err:  # noqa: BLE001 - the ApiError is the answer under test
        return err


@pytest.mark.parametrize("where", ["query", "deleteOptions"])
def test_kubevirt_dry_run_eviction_answers_429_and_marks_nothing(sim, where):
    launcher = sim.launcher("lm")["metadata"]["name"]
    events = []
    sim.cluster.add_listener(lambda e: events.append(e) if e.key in WATCHED else None)
    before = snapshot(sim.cluster, WATCHED)
    watch = sim.cluster.watch(sim.rt(VMI), NS, None, None, str(before[0]))
    for _again in range(2):      # a real eviction would answer "Evacuation in progress" the second time
        err = dry_evict(sim, launcher, where, DESCHEDULER)
        assert err.code == 429 and err.reason == "TooManyRequests"
        assert err.message == PREFIX + 'Eviction triggered evacuation of VMI "vms/lm"'
    sim.settle()
    assert snapshot(sim.cluster, WATCHED) == before     # no evacuationNodeName, annotation, migration, deletion
    assert [e for e in events if e.key in WATCHED] == [] and watch.events.empty()
    vmi = sim.get(VMI, "lm")
    assert "evacuationNodeName" not in vmi["status"]
    assert "kubevirt.io/eviction-source" not in (vmi["metadata"].get("annotations") or {})
    assert sim.migrations("lm") == []


@pytest.mark.parametrize("where", ["query", "deleteOptions"])
def test_kubevirt_dry_run_eviction_of_a_vm_without_migration_deletes_nothing(sim, where):
    launcher = sim.launcher("none")["metadata"]["name"]
    before = snapshot(sim.cluster, WATCHED)
    answer = dry_evict(sim, launcher, where)
    assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    sim.settle()
    assert snapshot(sim.cluster, WATCHED) == before      # the Pod stays, the VM is not restarted


def test_kubevirt_real_eviction_still_marks_after_dry_runs(sim):
    """The real write is unchanged: it marks the VMI (and then answers Evacuation in progress to a dry run)."""
    launcher = sim.launcher("lm")
    err = sim.evict(launcher["metadata"]["name"], annotations=DESCHEDULER)
    assert err.message == PREFIX + 'Eviction triggered evacuation of VMI "vms/lm"'
    vmi = sim.get(VMI, "lm")
    assert vmi["status"]["evacuationNodeName"] == launcher["spec"]["nodeName"]
    assert vmi["metadata"]["annotations"]["kubevirt.io/eviction-source"] == "descheduler"
    sim.settle()     # the migration the real eviction started has written the VMI: the dry run alone is left
    rv = sim.get(VMI, "lm")["metadata"]["resourceVersion"]
    again = dry_evict(sim, launcher["metadata"]["name"], "deleteOptions")
    assert again.message == PREFIX + 'Evacuation in progress: Eviction triggered evacuation of VMI "vms/lm"'
    assert sim.get(VMI, "lm")["metadata"]["resourceVersion"] == rv


# ----------------------------------------------------------------------------------------------- ACP
USED = [subresources.register, garbage_collector.register, namespace.register, chart.register, resourcepatch.register]
RP = "resourcepatches.operator.alauda.io"
WARNING = re.compile(r"^The operation is allowed, and ResourcePatch (rp-[a-z0-9]{5}) is created$")
BOUNDED = 'apiVersion: "descheduler/v1alpha2"\nkind: "DeschedulerPolicy"\nmaxNoOfPodsToEvictTotal: 1\n'


@pytest.fixture
def plugin():
    with in_process.running_scenario("acp-plugin-basics", USED, settle=True) as started:
        yield started


def edits(cluster):
    """The edits a user can make to the chart's policy ConfigMap, each as (name, call with a context)."""
    cms = cluster.registry.by_key("configmaps")
    current = cluster.get(cms, "descheduler", "descheduler")
    put = copy.deepcopy(current)
    put["data"]["policy.yaml"] = BOUNDED
    return [
        ("strategic", lambda ctx: cluster.patch(cms, "descheduler", "descheduler", "strategic",
                                                {"data": {"policy.yaml": BOUNDED}}, ctx)),
        ("merge", lambda ctx: cluster.patch(cms, "descheduler", "descheduler", "merge",
                                            {"data": {"policy.yaml": BOUNDED}}, ctx)),
        ("json", lambda ctx: cluster.patch(cms, "descheduler", "descheduler", "json",
                                           [{"op": "replace", "path": "/data/policy.yaml", "value": BOUNDED}], ctx)),
        ("update", lambda ctx: cluster.update(cms, "descheduler", "descheduler", put, ctx)),
    ]


def test_acp_dry_run_edit_records_no_resourcepatch(plugin):
    cluster, manager = plugin
    keys = ["configmaps", RP]
    before = snapshot(cluster, keys)
    events = []
    cluster.add_listener(events.append)
    for name, edit in edits(cluster):
        ctx = RequestContext(user="kubernetes-admin", dry_run=True)
        answer = edit(ctx)
        assert answer["data"]["policy.yaml"] == BOUNDED, name         # the answer is the edit as it would be stored
        # The hook acts as a webhook with sideEffects NoneOnDryRun: told the request is a dry run, it creates
        # nothing, and it returns no warning either: its warning reports the ResourcePatch it created by name,
        # and on a dry run there is none to name (a webhook's warnings describe what it did).
        assert ctx.warnings == [], name
    assert manager.wait_idle()
    assert snapshot(cluster, keys) == before and events == []
    assert list(cluster.store.entries(RP)) == []


def test_acp_real_edit_after_dry_runs_still_warns_and_records(plugin):
    cluster, manager = plugin
    ctx = RequestContext(user="kubernetes-admin", dry_run=True)
    edits(cluster)[0][1](ctx)
    real = RequestContext(user="kubernetes-admin")
    edits(cluster)[0][1](real)
    assert len(real.warnings) == 1 and WARNING.match(real.warnings[0])
    assert [e.obj["metadata"]["name"] for e in cluster.store.entries(RP)] == [WARNING.match(real.warnings[0]).group(1)]
