"""Waiting for migrations to be final: scope, entries, the watch ending the wait, the timeout and fail_on_failed."""
from __future__ import annotations

import threading

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_wait as mw
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption, KindNotServed
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params


def vmim(name, phase=None, vmi="vm-1", namespace="desched-test", rv=1, evacuation=True, **state):
    obj = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
           "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv), "creationTimestamp": "2025-01-01T10:00:00Z",
                        "annotations": {"kubevirt.io/evacuationMigration": "worker-a"} if evacuation else {}},
           "spec": {"vmiName": vmi}, "status": {}}
    if phase:
        obj["status"]["phase"] = phase
    if state:
        obj["status"]["migrationState"] = state
    return obj


class Cluster:
    """A connection stand-in: discovery of the migration kind and scripted lists per namespace."""

    def __init__(self, items, served=True):
        self.items = items
        self.served = served
        self.last_resource_version = None
        self.listed = []

    def find_kind(self, kind, group=None):
        return object() if self.served else None

    def list(self, resource, namespace=None, label_selector=None):
        self.listed.append((namespace, label_selector))
        self.last_resource_version = "100"
        return [i for i in self.items if namespace is None or i["metadata"]["namespace"] == namespace]


class Script:
    """The first watch call yields the events; later ones block until released (or their timeout)."""

    def __init__(self, events=()):
        self.events = list(events)
        self.versions = []
        self.release = threading.Event()

    def __call__(self, resource, namespace, label_selector, resource_version, timeout):
        self.versions.append(resource_version)
        events, self.events = self.events, []
        yield from events
        self.release.wait(timeout=min(timeout, 2))


def options(**given):
    """The options with a short timeout: the waits here end on events, not at the default 600 s."""
    given = dict({"timeout": 5}, **given)
    return mw.VmMigrationWaitOptions.from_params(spec_params(mw.ARG_SPEC, **given))


# ------------------------------------------------------------------------------------------ options and derivations
def test_options_are_checked():
    with pytest.raises(InvalidOption) as error:
        mw.scope(options(namespaces=["Bad_NS"]))
    assert error.value.path == "namespaces"
    with pytest.raises(InvalidOption) as error:
        mw.scope(options(label_selector="app in (a"))
    assert error.value.path == "label_selector"
    with pytest.raises(InvalidOption):
        mw.scope(options(timeout=0))
    assert mw.scope(options(vmi_names=["vm-1", "ns/vm-2"])).vmi_names == [(None, "vm-1"), ("ns", "vm-2")]
    assert mw.scope(options(namespaces=["b", "a", "b"], label_selector="")) == mw.Scope(namespaces=["a", "b"], label_selector=None, vmi_names=[])


def test_scope_by_vmi_name_with_and_without_namespace():
    item = vmim("m1", vmi="vm-1")
    assert mw.in_scope(item, [])
    assert mw.in_scope(item, [(None, "vm-1")])
    assert mw.in_scope(item, [("desched-test", "vm-1")])
    assert not mw.in_scope(item, [("other", "vm-1")])
    assert not mw.in_scope(item, [(None, "vm-2")])


def test_entry_carries_nodes_times_and_evacuation():
    entry = mw.migration_entry(vmim("kubevirt-evacuation-abc", "Succeeded", sourceNode="worker-a", targetNode="worker-b",
                                    startTimestamp="2025-01-01T10:00:01Z", endTimestamp="2025-01-01T10:00:11Z"))
    assert entry == {"namespace": "desched-test", "name": "kubevirt-evacuation-abc", "vmi": "vm-1", "phase": "Succeeded",
                     "source": "worker-a", "target": "worker-b", "started": "2025-01-01T10:00:01Z", "finished": "2025-01-01T10:00:11Z",
                     "evacuation": True, "final": True, "failure_reason": None}
    manual = mw.migration_entry(vmim("by-hand", None, evacuation=False))
    assert manual["evacuation"] is False and manual["final"] is False and manual["started"] == "2025-01-01T10:00:00Z"


def test_summary_counts_unfinished_and_failed():
    summary = mw.summarize([vmim("b", "Running"), vmim("a", "Failed", failureReason="target pod failed"), vmim("c", "Succeeded", vmi="vm-3")],
                           [])
    assert [e["name"] for e in summary["migrations"]] == ["a", "b", "c"]
    assert [e["name"] for e in summary["unfinished"]] == ["b"]
    assert [e["failure_reason"] for e in summary["failed"]] == ["target pod failed"]
    assert "desched-test/b (Running, VMI vm-1)" == mw.describe(summary["unfinished"])
    assert "target pod failed" in mw.describe(summary["failed"], with_reason=True)


def test_describe_shortens_long_lists():
    entries = [mw.migration_entry(vmim("m{0:02d}".format(i), "Running")) for i in range(12)]
    assert mw.describe(entries).endswith("and 2 more")


# ------------------------------------------------------------------------------------------ the wait
def test_nothing_in_scope_returns_at_once_without_watching_long():
    script = Script()
    result = mw.run(options(), False, client=Cluster([vmim("done", "Succeeded")]), watch=script)
    assert result["unfinished"] == 0 and result["migrations"][0]["phase"] == "Succeeded"
    assert result["waited_seconds"] < 1
    script.release.set()


def test_the_wait_ends_on_the_event_that_makes_the_last_migration_final():
    script = Script([{"type": "MODIFIED", "object": vmim("m1", "Running", rv=101)},
                     {"type": "MODIFIED", "object": vmim("m1", "Succeeded", rv=102, sourceNode="worker-a", targetNode="worker-b")}])
    cluster = Cluster([vmim("m1", "Scheduling")])
    result = mw.run(options(namespaces=["desched-test"], label_selector="kubevirt.io/vmi-name=vm-1"), False, client=cluster, watch=script)
    script.release.set()
    assert result["unfinished"] == 0
    assert result["migrations"][0]["target"] == "worker-b"
    assert script.versions[0] == "100"  # watched from the list's resourceVersion
    assert cluster.listed == [("desched-test", "kubevirt.io/vmi-name=vm-1")]


def test_a_deleted_migration_no_longer_holds_the_wait():
    script = Script([{"type": "DELETED", "object": vmim("m1", "Running", rv=101)}])
    result = mw.run(options(), False, client=Cluster([vmim("m1", "Running")]), watch=script)
    script.release.set()
    assert result["unfinished"] == 0 and result["deleted_while_waiting"] == ["desched-test/m1"]


def test_timeout_names_the_unfinished_migrations_and_their_phases():
    script = Script()
    with pytest.raises(mw.MigrationsUnfinished) as error:
        mw.run(options(timeout=1), False, client=Cluster([vmim("m1", "Running"), vmim("m2", "Succeeded", vmi="vm-2")]), watch=script)
    script.release.set()
    assert "1 of 2 migrations still unfinished after 1s: desched-test/m1 (Running, VMI vm-1)" in error.value.message
    assert error.value.path == "timeout"
    assert error.value.details["result"]["unfinished"] == 1


def test_failed_is_final_unless_fail_on_failed():
    items = [vmim("m1", "Failed", failureReason="migration aborted")]
    assert mw.run(options(), False, client=Cluster(items), watch=Script())["failed_migrations"][0]["name"] == "m1"
    with pytest.raises(mw.MigrationsFailed) as error:
        mw.run(options(fail_on_failed=True), False, client=Cluster(items), watch=Script())
    assert "migration aborted" in error.value.message


def test_check_mode_waits_the_same_reading_only():
    script = Script()
    cluster = Cluster([vmim("done", "Succeeded")])
    result = mw.run(options(), True, client=cluster, watch=script)
    script.release.set()
    assert result["changed"] is False and result["unfinished"] == 0 and cluster.listed == [(None, None)]


def test_one_stream_per_namespace_and_kubevirt_required():
    cluster = Cluster([vmim("a", "Succeeded", namespace="ns-a"), vmim("b", "Succeeded", namespace="ns-b")])
    result = mw.run(options(namespaces=["ns-b", "ns-a"]), False, client=cluster, watch=Script())
    assert [e["namespace"] for e in result["migrations"]] == ["ns-a", "ns-b"]
    assert [n for n, _s in cluster.listed] == ["ns-a", "ns-b"]
    with pytest.raises(KindNotServed):
        mw.run(options(), False, client=Cluster([], served=False), watch=Script())


# ------------------------------------------------------------------------------------------ progress between calls
def test_with_progress_a_call_returns_a_line_per_ended_migration_and_the_unfinished_ones_to_resume_from():
    script = Script([{"type": "MODIFIED", "object": vmim("m1", "Succeeded", rv=101, sourceNode="worker-a", targetNode="worker-b")}])
    cluster = Cluster([vmim("m1", "Running"), vmim("m2", "Running", vmi="vm-2")])
    result = mw.run(options(timeout=30, progress_every=1), False, client=cluster, watch=script)
    script.release.set()
    progress = result["progress"]
    assert progress["done"] is False and result["unfinished"] == 1
    assert progress["lines"][0] == "desched-test/m1 Succeeded (VMI vm-1, worker-a -> worker-b)"
    assert "1 migration(s) unfinished: desched-test/m2" in progress["lines"][-1]
    assert {e["name"] for e in progress["resume"]["state"]["seen"]} == {"m1", "m2"}

    # the next call goes on from that state: m2 was deleted meanwhile, so nothing holds the wait and it says so
    later = Script()
    done = mw.run(options(timeout=30, progress_every=1, resume=progress["resume"]), False,
                  client=Cluster([vmim("m1", "Succeeded")]), watch=later)
    later.release.set()
    assert done["progress"]["done"] is True and done["unfinished"] == 0
    assert done["deleted_while_waiting"] == ["desched-test/m2"]


def test_a_resume_that_is_not_the_modules_own_state_is_refused():
    with pytest.raises(InvalidOption, match="resume"):
        mw.run(options(progress_every=1, resume={"state": {}}), False, client=Cluster([]), watch=Script())
