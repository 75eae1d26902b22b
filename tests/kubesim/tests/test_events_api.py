"""events.k8s.io/v1 Event served from the core Events' storage (kubernetes `pkg/apis/events/v1/conversion.go`,
`pkg/registry/core/event`): an Event written through one API reads through the other with the fields renamed
(message <-> note, involvedObject <-> regarding, source <-> deprecatedSource, count <-> deprecatedCount, ...),
patches apply to the form of the version they are sent to, and creates through events.k8s.io/v1 get
ValidateEventCreate's strict rules (`pkg/apis/core/validation/events.go`)."""
import json

import pytest

from https_client import call, kubectl, started

CORE = "/api/v1/namespaces/default/events"
V1 = "/apis/events.k8s.io/v1/namespaces/default/events"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with started("api-basics", tmp_path_factory.mktemp("events")) as simulator:
        yield simulator


def core_event(name):
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "u-1",
                               "apiVersion": "v1", "fieldPath": "spec.containers{web}"},
            "reason": "Started", "message": "Started container web",
            "source": {"component": "kubelet", "host": "worker-a"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z", "count": 3,
            "type": "Normal"}


def v1_event(name):
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl",
            "reportingInstance": "ctl-1", "action": "Scaling", "reason": "Scaled", "type": "Warning",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web", "apiVersion": "apps/v1"},
            "related": {"kind": "ReplicaSet", "namespace": "default", "name": "web-1"}, "note": "scaled to 3",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}}


def identity(obj):
    meta = obj["metadata"]
    return {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")}


def test_a_core_event_reads_through_events_k8s_io_with_the_fields_renamed(sim):
    code, created = call(sim, "POST", CORE, core_event("core-made"))
    assert code == 201
    code, served = call(sim, "GET", V1 + "/core-made")
    assert code == 200
    served["metadata"] = identity(served)
    assert served == {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": identity(created),
        "eventTime": None,
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "u-1", "apiVersion": "v1",
                      "fieldPath": "spec.containers{web}"},
        "reason": "Started", "note": "Started container web", "type": "Normal",
        "deprecatedSource": {"component": "kubelet", "host": "worker-a"},
        "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z", "deprecatedLastTimestamp": "2026-01-01T00:01:00Z",
        "deprecatedCount": 3}


def test_an_events_k8s_io_event_is_stored_and_read_as_a_core_event(sim):
    code, created = call(sim, "POST", V1, v1_event("v1-made"))
    assert code == 201
    assert created["apiVersion"] == "events.k8s.io/v1" and created["note"] == "scaled to 3"
    assert created["reportingController"] == "example.com/ctl" and "message" not in created
    code, core = call(sim, "GET", CORE + "/v1-made")
    assert code == 200
    core["metadata"] = identity(core)
    assert core == {
        "apiVersion": "v1", "kind": "Event", "metadata": identity(created),
        "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "web", "apiVersion": "apps/v1"},
        "reason": "Scaled", "message": "scaled to 3", "source": {}, "type": "Warning",
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "series": {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}, "action": "Scaling",
        "related": {"kind": "ReplicaSet", "namespace": "default", "name": "web-1"},
        "reportingComponent": "example.com/ctl", "reportingInstance": "ctl-1"}


def test_patches_and_updates_use_the_served_versions_field_names(sim):
    call(sim, "POST", CORE, core_event("patched"))
    code, patched = call(sim, "PATCH", V1 + "/patched", {"note": "changed", "deprecatedCount": 4},
                         "application/merge-patch+json")
    assert code == 200 and patched["note"] == "changed" and patched["deprecatedCount"] == 4
    core = call(sim, "GET", CORE + "/patched")[1]
    assert core["message"] == "changed" and core["count"] == 4 and "note" not in core
    code, put = call(sim, "PUT", V1 + "/patched", {**patched, "note": "put"})
    assert code == 200 and put["note"] == "put"
    assert call(sim, "GET", CORE + "/patched")[1]["message"] == "put"
    code, deleted = call(sim, "DELETE", V1 + "/patched")
    assert code == 200 and deleted["apiVersion"] == "events.k8s.io/v1" and deleted["note"] == "put"
    assert call(sim, "GET", CORE + "/patched")[0] == 404


def test_a_missing_event_names_the_resource_of_the_api_asked(sim):
    code, status = call(sim, "GET", V1 + "/absent")
    assert code == 404 and status["message"] == 'events.events.k8s.io "absent" not found'
    assert status["details"] == {"name": "absent", "group": "events.k8s.io", "kind": "events"}


def test_events_k8s_io_creates_get_the_strict_validation(sim):
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "bare", "namespace": "default"},
            "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1"}, "note": "n",
            "deprecatedCount": 2}
    code, status = call(sim, "POST", V1, body)
    assert code == 422 and status["reason"] == "Invalid"
    assert status["message"] == ('Event "bare" is invalid: [eventTime: Required value, type: Invalid value: "": '
                                 'has invalid value: , count: Invalid value: "": needs to be unset]')
    assert status["details"]["kind"] == "Event" and "group" not in status["details"]
    assert [cause["field"] for cause in status["details"]["causes"]] == ["eventTime", "type", "count"]
    # the same Event through the core API: only the legacy rules, which it passes
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "bare", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1"}, "message": "n", "count": 2}
    assert call(sim, "POST", CORE, core)[0] == 201


def test_an_event_with_event_time_needs_the_reporting_fields(sim):
    body = {**v1_event("unreported"), "reportingController": "", "action": ""}
    code, status = call(sim, "POST", V1, body)
    assert code == 422
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("reportingController", "FieldValueRequired"), ("reportingController", "FieldValueInvalid"),
        ("reportingController", "FieldValueInvalid"), ("action", "FieldValueRequired")]
    assert status["details"]["causes"][1]["message"] == 'Invalid value: "": name part must be non-empty'


def test_watches_of_both_apis_share_the_store_key(sim):
    cluster = sim.clusters["workload"]
    core_rt = cluster.registry.lookup("", "v1", "events")
    v1_rt = cluster.registry.lookup("events.k8s.io", "v1", "events")
    assert core_rt.key == v1_rt.key == "events" and cluster.registry.by_key("events") is core_rt
    watcher = cluster.watch(v1_rt, "default", None, "metadata.name=watched", str(cluster.store.rv))
    try:
        call(sim, "POST", CORE, core_event("watched"))
        event = watcher.events.get(timeout=5)
        assert event.type == "ADDED" and event.obj["metadata"]["name"] == "watched"
    finally:
        cluster.store.stop_watch(watcher)


def test_kubectl_gets_events_through_events_k8s_io(sim):
    call(sim, "POST", CORE, core_event("kubectl-seen"))
    rows = [line.split() for line in kubectl(sim, "get", "events.events.k8s.io", "-o", "wide").splitlines()]
    assert rows[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST", "SEEN",
                       "COUNT", "NAME"]
    row = next(r for r in rows if r[-1] == "kubectl-seen")
    assert row[1:5] == ["Normal", "Started", "pod/web-1", "spec.containers{web}"]
    assert row[5:7] == ["kubelet,", "worker-a"] and row[-2] == "3"
    shown = json.loads(kubectl(sim, "get", "events.v1.events.k8s.io", "kubectl-seen", "-o", "json"))
    assert shown["apiVersion"] == "events.k8s.io/v1" and shown["note"] == "Started container web"
