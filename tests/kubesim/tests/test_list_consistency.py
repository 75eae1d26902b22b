"""Lists at a resourceVersion and consistent pagination, as the etcd3 store and the watch cache serve them: every
page of a paginated list shows the state at the first page's resourceVersion; a continue token older than the
history answers 410 with a token that continues at the latest state; resourceVersionMatch=Exact (and the legacy
limit + resourceVersion) reads the state at that resourceVersion; resourceVersions newer than the store answer
504 (apiserver storage/etcd3/store.go GetList, errors.go, cacher.go, storage/continue.go)."""
import base64
import json

import pytest

from kubesim import listoptions
from https_client import call
from raw_http import CMS, cluster_of, configmap, serving


@pytest.fixture
def server():
    with serving() as started:
        for i in range(10):
            call(started, "POST", CMS, configmap(f"cm-{i}", k="v0"))
        yield started


def merge(server, name, data):
    return call(server, "PATCH", f"{CMS}/{name}", {"data": data}, content_type="application/merge-patch+json")


def shown(page):
    return [(item["metadata"]["name"], item["data"]["k"]) for item in page["items"]]


def test_every_page_shows_the_state_of_the_first_page(server):
    code, first = call(server, "GET", f"{CMS}?limit=4")
    list_rv = first["metadata"]["resourceVersion"]
    assert code == 200 and shown(first) == [(f"cm-{i}", "v0") for i in range(4)]
    assert first["metadata"]["remainingItemCount"] == 6
    call(server, "POST", CMS, configmap("cm-55", k="new"))   # created after the first page
    call(server, "DELETE", f"{CMS}/cm-6")                      # deleted after it
    merge(server, "cm-5", {"k": "changed"})                     # modified after it
    code, second = call(server, "GET", f"{CMS}?limit=4&continue={first['metadata']['continue']}")
    assert code == 200 and shown(second) == [(f"cm-{i}", "v0") for i in range(4, 8)]
    assert second["metadata"]["resourceVersion"] == list_rv and second["metadata"]["remainingItemCount"] == 2
    code, last = call(server, "GET", f"{CMS}?limit=4&continue={second['metadata']['continue']}")
    assert code == 200 and shown(last) == [("cm-8", "v0"), ("cm-9", "v0")]
    assert last["metadata"] == {"resourceVersion": list_rv}
    assert [row[0] for row in shown(call(server, "GET", CMS)[1])] == [
        "cm-0", "cm-1", "cm-2", "cm-3", "cm-4", "cm-5", "cm-55", "cm-7", "cm-8", "cm-9"]


def test_the_continue_token_is_the_etcd3_store_s(server):
    first = call(server, "GET", f"{CMS}?limit=3")[1]
    token = first["metadata"]["continue"]
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert "=" not in token and decoded == {"v": "meta.k8s.io/v1", "rv": int(first["metadata"]["resourceVersion"]),
                                            "start": "cm-2\u0000"}
    across = call(server, "GET", "/api/v1/configmaps?limit=3")[1]["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(across + "=" * (-len(across) % 4)))["start"] == "default/cm-2\u0000"


def test_an_expired_continue_token_answers_410_with_a_token_for_the_latest_state(server):
    first = call(server, "GET", f"{CMS}?limit=4")[1]
    call(server, "DELETE", f"{CMS}/cm-5")
    call(server, "POST", "/_kubesim/compact")
    code, status = call(server, "GET", f"{CMS}?limit=4&continue={first['metadata']['continue']}")
    fresh = listoptions.encode_continue(("default", "cm-3"), -1, across_namespaces=False)
    assert (code, status) == (410, {"kind": "Status", "apiVersion": "v1", "metadata": {"continue": fresh},
                                    "status": "Failure", "message": listoptions.INCONSISTENT_CONTINUE,
                                    "reason": "Expired", "code": 410})
    assert status["message"].startswith("The provided continue parameter is too old to display a consistent list")
    code, rest = call(server, "GET", f"{CMS}?limit=4&continue={fresh}")
    assert code == 200 and [row[0] for row in shown(rest)] == ["cm-4", "cm-6", "cm-7", "cm-8"]
    assert rest["metadata"]["resourceVersion"] == str(cluster_of(server).store.rv)


def test_a_continue_with_a_resource_version_is_refused(server):
    token = call(server, "GET", f"{CMS}?limit=4")[1]["metadata"]["continue"]
    assert call(server, "GET", f"{CMS}?limit=4&continue={token}&resourceVersion=3") == (400, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "specifying resource version is not allowed when using continue", "reason": "BadRequest",
        "code": 400})
    assert call(server, "GET", f"{CMS}?limit=4&continue={token}&resourceVersion=0")[0] == 200


def test_a_bad_continue_token_answers_400(server):
    zero_rv = base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":0,"start":"x"}').decode()
    code, status = call(server, "GET", f"{CMS}?limit=4&continue={zero_rv}")
    assert (code, status["message"]) == (400, "invalid continue token: continue key is not valid: incorrect "
                                              "encoded start resourceVersion (version meta.k8s.io/v1)")
    other = base64.urlsafe_b64encode(b'{"v":"v9","rv":5,"start":"x"}').decode()
    assert call(server, "GET", f"{CMS}?limit=4&continue={other}")[1]["message"] == (
        'invalid continue token: continue key is not valid: server does not recognize this encoded version "v9"')
    code, status = call(server, "GET", f"{CMS}?limit=4&continue=not-a-token")
    assert code == 400 and status["message"].startswith("invalid continue token: continue key is not valid: ")


def test_exact_reads_the_state_at_that_resource_version(server):
    before = cluster_of(server).store.rv
    merge(server, "cm-1", {"k": "later"})
    call(server, "DELETE", f"{CMS}/cm-2")
    call(server, "POST", CMS, configmap("cm-10", k="v0"))
    for query in (f"resourceVersion={before}&resourceVersionMatch=Exact",
                  f"resourceVersion={before}&limit=100"):   # the legacy exact read: a limit and a resourceVersion
        code, doc = call(server, "GET", f"{CMS}?{query}")
        assert code == 200 and doc["metadata"]["resourceVersion"] == str(before)
        assert shown(doc) == [(f"cm-{i}", "v0") for i in range(10)]
    for query in (f"resourceVersion={before}", f"resourceVersion={before}&resourceVersionMatch=NotOlderThan",
                  "resourceVersion=0", ""):
        code, doc = call(server, "GET", f"{CMS}?{query}")
        assert doc["metadata"]["resourceVersion"] == str(cluster_of(server).store.rv)
        assert ("cm-1", "later") in shown(doc) and ("cm-10", "v0") in shown(doc)


def test_exact_older_than_the_history_answers_410(server):
    before = cluster_of(server).store.rv
    merge(server, "cm-1", {"k": "later"})
    call(server, "POST", "/_kubesim/compact")
    assert call(server, "GET", f"{CMS}?resourceVersion={before}&resourceVersionMatch=Exact") == (410, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "The resourceVersion for the provided list is too old.", "reason": "Expired", "code": 410})


def test_a_resource_version_newer_than_the_store_answers_504(server, monkeypatch):
    monkeypatch.setattr(listoptions, "FRESH_WAIT_SECONDS", 0.2)
    current = cluster_of(server).store.rv
    causes = [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    message = f"Timeout: Too large resource version: {current + 5}, current: {current}"
    assert call(server, "GET", f"{CMS}?resourceVersion={current + 5}") == (504, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
        "reason": "Timeout", "details": {"causes": causes, "retryAfterSeconds": 1}, "code": 504})
    code, status = call(server, "GET", f"{CMS}?resourceVersion={current + 5}&resourceVersionMatch=Exact")
    assert (code, status["message"], status["details"]) == (504, message, {"causes": causes})


def test_a_snapshot_without_changes_reuses_the_stored_entries(server):
    """The paginated list of a large cluster must not copy its objects: with nothing changed since the token's
    resourceVersion a page reads the stored entries themselves."""
    cluster = cluster_of(server)
    rt = cluster.registry.by_key("configmaps")
    first = cluster.list(rt, "default", limit=4)
    second = cluster.list(rt, "default", limit=4, continue_token=first.continue_token)
    assert second.items[0] is cluster.store.get("configmaps", "default", "cm-4")
