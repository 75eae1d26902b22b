"""The outage (`/_kubesim/outage`, outage.py): the server goes away as an API server does during an upgrade or a
restart (connects refused, open connections and watch streams cut), over plain HTTP and TLS, and comes back by itself
on the same address with the same state: kubectl fails during it and works after it, and a watch resumed from its last
resourceVersion sees what was written meanwhile. Outages here last a second."""
from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass

import pytest

from https_client import call, kubectl, kubectl_run, started
from kubesim.server import KubeSimServer
from raw_http import CMS, NS, Stream, cluster_of, configmap, connect, serving
from support.waiting import wait_for

SECONDS = 1.0
MERGE = "application/merge-patch+json"
# what a client sees of a request the outage leaves unanswered (urllib: URLError, an OSError, or RemoteDisconnected)
CUT = (OSError, http.client.HTTPException)


@dataclass
class Target:
    caller: object                  # what https_client.call takes: a Simulator (TLS) or a plain-HTTP server
    server: KubeSimServer
    context: ssl.SSLContext | None  # for raw connections


@pytest.fixture(params=["plain-http", "tls"])
def target(request):
    if request.param == "tls":
        with started("api-basics") as sim:
            yield Target(sim, sim.server, sim.client_context())
    else:
        with serving() as server:
            yield Target(server, server, None)


@pytest.fixture
def plain():
    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def untouched():
    """A server no outage is armed on (each server's shutdown takes serve_forever's half-second poll)."""
    with serving() as server:
        yield server


# ------------------------------------------------------------------------------------------------ helpers
def refused(server: KubeSimServer) -> bool:
    """Whether a TCP connect to the server's address is refused now."""
    try:
        socket.create_connection(server.server_address[:2], timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def answers(caller) -> bool:
    try:
        return call(caller, "GET", "/_kubesim/healthz")[0] == 200
    except CUT:
        return False


def back(caller) -> None:
    wait_for(lambda: answers(caller), interval=0.05, what="the server back after its outage")


def outage(caller, **spec) -> dict:
    code, report = call(caller, "POST", "/_kubesim/outage", spec)
    assert code == 201, report
    return report


def request_on(connection: http.client.HTTPConnection, path: str) -> int:
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    return response.status


# -------------------------------------------------------------------------------------------------- tests
def test_an_outage_refuses_connects_cuts_open_connections_and_comes_back_on_the_same_address(target):
    server, url = target.server, target.server.url
    watch = Stream(server, f"{CMS}?watch=true", context=target.context)
    keep_alive = connect(server, target.context)
    assert request_on(keep_alive, "/version") == 200

    began = time.monotonic()
    report = outage(target.caller, seconds=SECONDS)   # answered: only the listener and the other connections are gone
    assert report["active"] is True and report["pending"] is False and report["outages"] == 1
    assert report["cut"] == 2 and report["seconds"] == SECONDS

    assert refused(server)
    assert watch.next() is None                      # the stream ended
    with pytest.raises(CUT):
        request_on(keep_alive, "/version")
    assert server.outage.report()["active"] is True

    back(target.caller)
    assert time.monotonic() - began >= SECONDS - 0.05
    assert server.url == url
    code, report = call(target.caller, "GET", "/_kubesim/outage")
    assert code == 200
    assert (report["active"], report["pending"], report["outages"], report["cut"]) == (False, False, 1, 2)
    assert {"beganAt", "endsAt", "endedAt"} <= set(report)
    assert call(target.caller, "GET", "/api/v1/namespaces")[0] == 200


def test_kubectl_fails_during_an_outage_and_works_after_it(tmp_path):
    with started("api-basics", tmp_path) as sim:
        assert "worker-a" in kubectl(sim, "get", "nodes")
        outage(sim, seconds=SECONDS)
        failed = kubectl_run(sim, "get", "nodes")
        address = sim.url.split("//", 1)[1]
        assert failed.returncode == 1 and f"The connection to the server {address} was refused" in failed.stderr
        back(sim)
        assert "worker-a" in kubectl(sim, "get", "nodes")


def test_a_watch_resumed_from_its_last_resource_version_sees_what_was_written_during_the_outage(plain):
    cluster = cluster_of(plain)
    start = call(plain, "GET", CMS)[1]["metadata"]["resourceVersion"]
    watch = Stream(plain, f"{CMS}?watch=true&resourceVersion={start}")
    call(plain, "POST", CMS, configmap("before"))
    seen = watch.next()
    assert (seen["type"], seen["object"]["metadata"]["name"]) == ("ADDED", "before")
    last = seen["object"]["metadata"]["resourceVersion"]

    outage(plain, seconds=SECONDS)
    assert watch.next() is None
    # a simulated controller's write: the store goes on while the API's network side is gone
    cluster.create(cluster.registry.by_key("configmaps"), NS, configmap("during"))
    assert refused(plain)

    back(plain)
    resumed = Stream(plain, f"{CMS}?watch=true&resourceVersion={last}")
    event = resumed.next()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "during")
    assert int(event["object"]["metadata"]["resourceVersion"]) > int(last)
    resumed.close()


def test_an_outage_armed_by_a_request_begins_with_it_and_leaves_it_unanswered(plain):
    call(plain, "POST", CMS, configmap("c", k="1"))
    report = outage(plain, seconds=SECONDS, armedBy={"verb": "patch", "resource": "configmaps"})
    assert (report["active"], report["pending"], report["armed"]) == (False, True, False)
    assert report["armedBy"] == {"verb": "patch", "resource": "configmaps"}

    assert call(plain, "GET", f"{CMS}/c")[0] == 200                                       # another verb
    assert call(plain, "PATCH", f"{CMS}/c?dryRun=All", {"data": {"k": "dry"}}, MERGE)[0] == 200   # a dry run
    assert call(plain, "GET", "/_kubesim/outage")[1]["pending"] is True

    with pytest.raises(CUT):
        call(plain, "PATCH", f"{CMS}/c", {"data": {"k": "2"}}, MERGE)                     # arms it: no answer
    assert refused(plain)
    back(plain)
    assert call(plain, "GET", f"{CMS}/c")[1]["data"] == {"k": "1"}                        # not carried out
    report = call(plain, "GET", "/_kubesim/outage")[1]
    assert (report["active"], report["pending"], report["outages"]) == (False, False, 1)


def test_with_after_the_arming_request_is_answered_and_the_outage_begins_later(plain):
    call(plain, "POST", CMS, configmap("c", k="1"))
    outage(plain, seconds=SECONDS, after=0.5, armedBy={"verb": "patch", "resource": "configmaps", "name": "c"})
    assert call(plain, "PATCH", f"{CMS}/c", {"data": {"k": "2"}}, MERGE)[0] == 200
    report = call(plain, "GET", "/_kubesim/outage")[1]
    assert (report["active"], report["pending"], report["armed"], report["after"]) == (False, True, True, 0.5)
    wait_for(lambda: refused(plain), interval=0.05, what="the outage 0.5 s after the patch")
    back(plain)
    assert call(plain, "GET", f"{CMS}/c")[1]["data"] == {"k": "2"}


@pytest.mark.parametrize(("spec", "message"), [
    ({}, "seconds is required: how long the server is gone"),
    ({"seconds": 0}, "seconds must be a number of seconds > 0"),
    ({"seconds": True}, "seconds must be a number of seconds > 0"),
    ({"seconds": 1, "after": -1}, "after must be a number of seconds >= 0"),
    ({"seconds": 1, "cluster": "global"},
     "unknown outage field(s) ['cluster']; known: ['seconds', 'after', 'armedBy']"),
    ({"seconds": 1, "armedBy": {"path": "/"}},
     "armedBy must be a non-empty mapping of ['cluster', 'verb', 'resource', 'namespace', 'name']"),
])
def test_bad_outages_are_refused_with_the_reason(untouched, spec, message):
    code, status = call(untouched, "POST", "/_kubesim/outage", spec)
    assert (code, status["reason"], status["message"]) == (400, "BadRequest", message)
    assert call(untouched, "GET", "/_kubesim/outage")[1] == {"active": False, "pending": False, "outages": 0, "cut": 0}


def test_one_outage_at_a_time_and_an_armed_one_can_be_dropped(plain):
    outage(plain, seconds=SECONDS, armedBy={"verb": "delete"})
    code, status = call(plain, "POST", "/_kubesim/outage", {"seconds": SECONDS})
    assert (code, status["reason"]) == (409, "Conflict")
    assert call(plain, "DELETE", "/_kubesim/outage") == (200, {"cancelled": True})
    assert call(plain, "DELETE", "/_kubesim/outage") == (200, {"cancelled": False})
    assert call(plain, "GET", "/_kubesim/outage")[1]["pending"] is False
    assert not refused(plain)
