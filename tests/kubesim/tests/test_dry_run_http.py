"""Dry run over HTTP, where the options come from: `?dryRun=All` on POST, PUT and PATCH (other values: 422
from the options' validation); DeleteOptions from the DELETE body when there is one (then the query is
ignored, as the apiserver's delete handler does) or else from the query; the Eviction's
`deleteOptions.dryRun` (kubectl drain --dry-run=server). A watch open meanwhile sees only real writes."""
import json
import threading
import urllib.request

import pytest

from https_client import call, started, stored_since


@pytest.fixture(scope="module")
def sim():
    with started("api-basics", settle=True) as simulator:   # the kubelet's start-up Pod writes done
        yield simulator


CMS = "/api/v1/namespaces/default/configmaps"


def cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def rv(sim):
    return sim.clusters["workload"].store.rv


def test_create_update_patch_with_dry_run_store_nothing(sim):
    start = rv(sim)
    code, answer = call(sim, "POST", CMS + "?dryRun=All", cm("http-dry", k="v"))
    assert code == 201 and answer["metadata"]["uid"] and "resourceVersion" not in answer["metadata"]
    assert call(sim, "GET", CMS + "/http-dry")[0] == 404 and stored_since(sim, "configmaps", start) == []
    code, applied = call(sim, "PATCH", CMS + "/http-dry?dryRun=All&fieldManager=me", cm("http-dry", k="v"),
                         "application/apply-patch+yaml")
    assert code == 201 and call(sim, "GET", CMS + "/http-dry")[0] == 404 and stored_since(sim, "configmaps", start) == []
    code, real = call(sim, "POST", CMS, cm("http-dry", k="v"))
    assert code == 201
    start = rv(sim)
    code, put = call(sim, "PUT", CMS + "/http-dry?dryRun=All", {**real, "data": {"k": "put"}})
    assert code == 200 and put["data"] == {"k": "put"}
    assert put["metadata"]["resourceVersion"] == real["metadata"]["resourceVersion"]
    for content_type, patch in (("application/merge-patch+json", {"data": {"k": "m"}}),
                                ("application/strategic-merge-patch+json", {"data": {"k": "s"}}),
                                ("application/json-patch+json", [{"op": "replace", "path": "/data/k", "value": "j"}])):
        code, patched = call(sim, "PATCH", CMS + "/http-dry?dryRun=All", patch, content_type)
        assert code == 200 and patched["data"]["k"] in ("m", "s", "j")
    stored = call(sim, "GET", CMS + "/http-dry")[1]
    assert stored["data"] == {"k": "v"} and stored["metadata"]["resourceVersion"] == real["metadata"]["resourceVersion"]
    assert stored_since(sim, "configmaps", start) == []


def test_an_unknown_dry_run_value_is_invalid(sim):
    code, status = call(sim, "POST", CMS + "?dryRun=Yes", cm("never"))
    assert code == 422 and status["reason"] == "Invalid"
    assert status["message"] == 'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Yes"]: ' \
                                'supported values: "All"'
    assert status["details"] == {"kind": "CreateOptions", "group": "meta.k8s.io", "causes": [
        {"reason": "FieldValueNotSupported", "message": 'Unsupported value: ["Yes"]: supported values: "All"',
         "field": "dryRun"}]}
    code, status = call(sim, "DELETE", CMS + "/never", {"dryRun": ["Maybe"]})
    assert code == 422 and status["message"].startswith('DeleteOptions.meta.k8s.io "" is invalid: dryRun:')


def test_delete_options_come_from_the_body_else_from_the_query(sim):
    call(sim, "POST", CMS, cm("del-dry"))
    start = rv(sim)
    code, answer = call(sim, "DELETE", CMS + "/del-dry", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                          "dryRun": ["All"], "propagationPolicy": "Background"})
    assert code == 200 and answer["metadata"]["name"] == "del-dry"
    assert call(sim, "DELETE", CMS + "/del-dry?dryRun=All")[0] == 200          # no body: the query counts
    assert call(sim, "GET", CMS + "/del-dry")[0] == 200 and stored_since(sim, "configmaps", start) == []
    # A body without dryRun wins over ?dryRun=All: the apiserver reads DeleteOptions from the body only.
    assert call(sim, "DELETE", CMS + "/del-dry?dryRun=All", {"propagationPolicy": "Background"})[0] == 200
    assert call(sim, "GET", CMS + "/del-dry")[0] == 404


def test_deletecollection_with_dry_run(sim):
    for name in ("col-1", "col-2"):
        call(sim, "POST", CMS, {**cm(name), "metadata": {"name": name, "labels": {"set": "col"}}})
    start = rv(sim)
    code, answer = call(sim, "DELETE", CMS + "?labelSelector=set%3Dcol&dryRun=All")
    assert code == 200 and [i["metadata"]["name"] for i in answer["items"]] == ["col-1", "col-2"]
    code, _answer = call(sim, "DELETE", CMS + "?labelSelector=set%3Dcol", {"dryRun": ["All"]})
    assert code == 200 and stored_since(sim, "configmaps", start) == []
    assert len(call(sim, "GET", CMS + "?labelSelector=set%3Dcol")[1]["items"]) == 2


def test_eviction_with_dry_run_in_its_delete_options_like_kubectl_drain(sim):
    start = rv(sim)
    before = call(sim, "GET", "/api/v1/namespaces/default/pods/web-1")[1]
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1", "namespace": "default"},
            "deleteOptions": {"dryRun": ["All"]}}
    code, answer = call(sim, "POST", "/api/v1/namespaces/default/pods/web-1/eviction", body)
    assert code == 201 and answer["status"] == "Success"
    code, answer = call(sim, "POST", "/api/v1/namespaces/default/pods/web-1/eviction?dryRun=All",
                        {**body, "deleteOptions": {}})
    assert code == 201
    pod = call(sim, "GET", "/api/v1/namespaces/default/pods/web-1")[1]
    assert "deletionTimestamp" not in pod["metadata"] and pod == before and stored_since(sim, "pods", start) == []


def test_bad_configmaps_are_422_over_http_with_and_without_dry_run(sim):
    for query in ("", "?dryRun=All"):
        code, status = call(sim, "POST", CMS + query, cm("Bad_Name"))
        assert code == 422 and status["kind"] == "Status" and status["reason"] == "Invalid"
        assert status["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: '
                                            '"Bad_Name": a lowercase RFC 1123 subdomain')
        assert status["details"]["causes"][0]["field"] == "metadata.name"
        code, status = call(sim, "POST", CMS + query, cm("too-big", k="x" * 1048577))
        assert code == 422 and status["message"] == ('ConfigMap "too-big" is invalid: []: Too long: may not be more '
                                                     "than 1048576 bytes")
        assert status["details"]["causes"] == [{"reason": "FieldValueTooLong", "field": "[]",
                                                "message": "Too long: may not be more than 1048576 bytes"}]


def test_a_watch_sees_only_the_real_writes(sim):
    start = rv(sim)
    lines = []
    url = f"{sim.url}{CMS}?watch=true&resourceVersion={start}&timeoutSeconds=2"

    def read():
        with urllib.request.urlopen(url, timeout=10, context=sim.client_context()) as response:
            lines.extend(line for line in response if line.strip())
    reader = threading.Thread(target=read)
    reader.start()
    call(sim, "POST", CMS + "?dryRun=All", cm("watched"))
    call(sim, "POST", CMS, cm("watched"))
    call(sim, "PATCH", CMS + "/watched?dryRun=All", {"data": {"k": "dry"}}, "application/merge-patch+json")
    call(sim, "DELETE", CMS + "/watched", {"dryRun": ["All"]})
    reader.join(timeout=10)
    events = [json.loads(line) for line in lines]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "watched")]
    # the dry-run patch left no trace (and an empty `data`, omitempty, is not serialised)
    assert "data" not in events[0]["object"]


def test_a_fault_rule_can_match_only_dry_runs_or_only_real_requests(sim):
    call(sim, "POST", CMS, cm("faulted", k="v"))
    real_only = sim.faults.add({"verb": "update", "resource": "configmaps", "name": "faulted", "dryRun": False, "status": 409,
                                "count": 1})
    dry_only = sim.faults.add({"verb": "update", "resource": "configmaps", "name": "faulted", "dryRun": True, "status": 503,
                               "count": 1})
    try:
        current = call(sim, "GET", CMS + "/faulted")[1]
        assert call(sim, "PUT", CMS + "/faulted?dryRun=All", {**current, "data": {"k": "dry"}})[0] == 503
        assert call(sim, "PUT", CMS + "/faulted", {**current, "data": {"k": "real"}})[0] == 409
        assert (real_only.fired, dry_only.fired) == (1, 1)
        assert real_only.as_dict()["dryRun"] is False and dry_only.as_dict()["dryRun"] is True
        with pytest.raises(ValueError, match="dryRun must be true"):
            sim.faults.add({"status": 500, "dryRun": "yes"})
    finally:
        sim.faults.remove()
