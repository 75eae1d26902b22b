"""Watch-list streaming as client-go 0.35 informers use it (watch=true&sendInitialEvents=true&
resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true): the matching objects as ADDED events, the BOOKMARK
annotated `k8s.io/initial-events-end: "true"` at the state's resourceVersion, then live events without gap or
duplicate; the ListOptions validation; too large resourceVersions; periodic and pre-timeout bookmarks
(apiserver cacher.go, cache_watcher.go, apimachinery ValidateListOptions / SetListOptionsDefaults)."""
import time

import pytest

from kubesim import listoptions
from https_client import call
from raw_http import CMS, NS, VMIS, Stream, cluster_of, configmap, serving

WATCH_LIST = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


@pytest.fixture
def server():
    with serving() as started:
        yield started


def end_bookmark(kind, api_version, rv):
    return {"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version, "metadata": {
        "resourceVersion": str(rv), "annotations": {"k8s.io/initial-events-end": "true"}}}}


def names(events):
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def test_initial_objects_then_the_end_bookmark_then_live_events(server):
    for name, app in (("a", "web"), ("b", "db"), ("c", "web")):
        call(server, "POST", CMS, configmap(name, {"app": app}))
    state_rv = cluster_of(server).store.rv
    stream = Stream(server, f"{CMS}?{WATCH_LIST}&labelSelector=app%3Dweb")
    initial, bookmark = stream.until_bookmark()
    assert sorted(names(initial)) == [("ADDED", "a"), ("ADDED", "c")]
    assert bookmark == end_bookmark("ConfigMap", "v1", state_rv)
    call(server, "POST", CMS, configmap("d", {"app": "web"}))
    call(server, "PATCH", CMS + "/a", {"data": {"k": "v"}}, content_type="application/merge-patch+json")
    call(server, "PATCH", CMS + "/b", {"data": {"k": "v"}}, content_type="application/merge-patch+json")
    call(server, "DELETE", CMS + "/c")
    live = [stream.next() for _index in range(3)]
    assert names(live) == [("ADDED", "d"), ("MODIFIED", "a"), ("DELETED", "c")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in live]
    assert versions == [state_rv + 1, state_rv + 2, state_rv + 4]
    stream.close()


def test_custom_and_cluster_scoped_resources_stream_too(server):
    cluster = cluster_of(server)
    vmi = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "vm-1"},
           "spec": {}}
    assert call(server, "POST", VMIS, vmi)[0] == 201
    stream = Stream(server, f"{VMIS}?{WATCH_LIST}")
    initial, bookmark = stream.until_bookmark()
    assert names(initial) == [("ADDED", "vm-1")]
    assert bookmark == end_bookmark("VirtualMachineInstance", "kubevirt.io/v1", cluster.store.rv)
    stream.close()
    stream = Stream(server, f"/api/v1/namespaces?{WATCH_LIST}")
    initial, bookmark = stream.until_bookmark()
    assert names(initial) == [("ADDED", NS)] and bookmark == end_bookmark("Namespace", "v1", cluster.store.rv)
    stream.close()


@pytest.mark.parametrize("rv", ["", "0", "1", "current"])
def test_the_initial_state_is_the_current_one_for_any_resource_version_up_to_now(server, rv):
    call(server, "POST", CMS, configmap("first"))
    call(server, "PATCH", CMS + "/first", {"data": {"k": "new"}}, content_type="application/merge-patch+json")
    current = cluster_of(server).store.rv
    rv = str(current) if rv == "current" else rv
    stream = Stream(server, f"{CMS}?{WATCH_LIST}&resourceVersion={rv}")
    initial, bookmark = stream.until_bookmark()
    assert [(e["type"], e["object"]["data"]) for e in initial] == [("ADDED", {"k": "new"})]
    assert bookmark == end_bookmark("ConfigMap", "v1", current)
    stream.close()


def test_a_watch_from_empty_with_bookmarks_is_defaulted_to_a_streaming_list(server):
    """SetListOptionsDefaults: a watch from "" or "0" without sendInitialEvents gets sendInitialEvents=true."""
    call(server, "POST", CMS, configmap("x"))
    stream = Stream(server, f"{CMS}?watch=true&allowWatchBookmarks=true")
    initial, bookmark = stream.until_bookmark()
    assert names(initial) == [("ADDED", "x")] and bookmark == end_bookmark("ConfigMap", "v1", 2)
    stream.close()


def test_without_initial_events_the_watch_starts_now(server):
    call(server, "POST", CMS, configmap("old"))
    stream = Stream(server, f"{CMS}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
                            "&allowWatchBookmarks=true&timeoutSeconds=1")
    time.sleep(0.2)
    call(server, "POST", CMS, configmap("new"))
    assert names(stream.rest()) == [("ADDED", "new")]


def test_a_too_large_resource_version_waits_then_answers_an_error_event(server, monkeypatch):
    monkeypatch.setattr(listoptions, "FRESH_WAIT_SECONDS", 0.2)
    current = cluster_of(server).store.rv
    stream = Stream(server, f"{CMS}?{WATCH_LIST}&resourceVersion={current + 10}")
    assert stream.rest() == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"Timeout: Too large resource version: {current + 10}, current: {current}", "reason": "Timeout",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1}, "code": 504}}]


def invalid(*causes):
    shown = [f"{field}: {message}" for field, message in causes]
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'ListOptions.meta.k8s.io "" is invalid: ' + (shown[0] if len(shown) == 1 else
                                                                    "[" + ", ".join(shown) + "]"),
            "reason": "Invalid", "details": {"kind": "ListOptions", "group": "meta.k8s.io", "causes": [
                {"reason": "FieldValueForbidden" if message.startswith("Forbidden") else "FieldValueNotSupported",
                 "message": message, "field": field} for field, message in causes]}, "code": 422}


MATCH = "resourceVersionMatch"


@pytest.mark.parametrize("query, causes", [
    ("watch=true&sendInitialEvents=true",
     [(MATCH, "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")]),
    ("watch=true&resourceVersion=1&resourceVersionMatch=NotOlderThan",
     [(MATCH, "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")]),
    ("watch=true&sendInitialEvents=true&resourceVersionMatch=Exact",
     [(MATCH, "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
      (MATCH, 'Unsupported value: "Exact": supported values: "NotOlderThan"')]),
    ("sendInitialEvents=true", [("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")]),
    ("resourceVersionMatch=Exact",
     [(MATCH, "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")]),
    ("resourceVersion=0&resourceVersionMatch=Exact",
     [(MATCH, 'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')]),
    ("resourceVersion=1&resourceVersionMatch=Newest",
     [(MATCH, 'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""')]),
    ("resourceVersion=1&resourceVersionMatch=NotOlderThan&continue=abc",
     [(MATCH, "Forbidden: resourceVersionMatch is forbidden when continue is provided")]),
])
def test_invalid_list_and_watch_options_answer_422(server, query, causes):
    assert call(server, "GET", f"{CMS}?{query}") == (422, invalid(*causes))


def test_periodic_bookmarks_and_the_end_at_timeout(server):
    server.bookmark_interval = 0.4
    call(server, "POST", CMS, configmap("x"))
    rv = cluster_of(server).store.rv
    started = time.monotonic()
    stream = Stream(server, f"{CMS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3")
    events = stream.rest()
    assert 2.8 <= time.monotonic() - started < 5
    plain = {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                                            "metadata": {"resourceVersion": str(rv)}}}
    assert len(events) >= 2 and all(event == plain for event in events)


def test_a_bookmark_comes_two_seconds_before_the_timeout(server):
    rv = cluster_of(server).store.rv   # the default interval (a minute) is longer than the watch
    started = time.monotonic()
    stream = Stream(server, f"{CMS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3")
    first = stream.next()
    assert 0.8 <= time.monotonic() - started < 2.5 and first["type"] == "BOOKMARK"
    assert stream.rest() == []
    assert 2.8 <= time.monotonic() - started < 5


def test_watch_list_as_metadata_and_as_table(server):
    call(server, "POST", CMS, configmap("m", {"app": "web"}, k="v"))
    rv = cluster_of(server).store.rv
    stream = Stream(server, f"{CMS}?{WATCH_LIST}", accept="application/json;as=PartialObjectMetadata;"
                                                          "g=meta.k8s.io;v=v1")
    initial, bookmark = stream.until_bookmark()
    stored = cluster_of(server).store.get("configmaps", NS, "m").obj
    assert initial == [{"type": "ADDED", "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                                    "metadata": stored["metadata"]}}]
    assert bookmark == {"type": "BOOKMARK", "object": {"kind": "PartialObjectMetadata",
                                                       "apiVersion": "meta.k8s.io/v1",
                                                       "metadata": end_bookmark("", "", rv)["object"]["metadata"]}}
    stream.close()
    stream = Stream(server, f"{CMS}?{WATCH_LIST}", accept="application/json;as=Table;g=meta.k8s.io;v=v1")
    initial, _bookmark = stream.until_bookmark()
    assert [e["object"]["kind"] for e in initial] == ["Table"]
    assert [row["cells"][0] for row in initial[0]["object"]["rows"]] == ["m"]
    assert "columnDefinitions" in initial[0]["object"]
    stream.close()
