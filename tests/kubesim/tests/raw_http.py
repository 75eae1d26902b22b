"""Raw HTTP against a KubeSimServer in this process, for the tests of lists, watches and content negotiation: a
server over one bare cluster (no controllers, so resourceVersions are exact; requests go through
https_client.call), and a watch stream read line by line in a thread."""
from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
from contextlib import contextmanager
from typing import Iterator

from kubesim.server import KubeSimServer
from in_process import bare_cluster

NS = "default"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
VMIS = f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances"


@contextmanager
def serving() -> Iterator[KubeSimServer]:
    """A plain-HTTP server over a bare workload cluster with the `default` namespace."""
    cluster = bare_cluster()
    cluster.create(cluster.registry.by_key("namespaces"), None, {"metadata": {"name": NS}})
    server = KubeSimServer(("127.0.0.1", 0), {"workload": cluster}, {"gitVersion": "v1.35.0"})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown_all()


def cluster_of(server: KubeSimServer):
    return server.clusters["workload"]


def configmap(name: str, labels: dict | None = None, **data) -> dict:
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def connect(server: KubeSimServer, context=None) -> http.client.HTTPConnection:
    """A connection to the server, over TLS with `context` (a Simulator's `client_context()`)."""
    host, port = server.server_address[:2]
    if context is not None:
        return http.client.HTTPSConnection(host, port, timeout=30, context=context)
    return http.client.HTTPConnection(host, port, timeout=30)


class Stream:
    """A watch response read in a thread: `next()` is the next event (None when the stream ended); over TLS with
    `context` (a Simulator's `client_context()`)."""

    def __init__(self, server: KubeSimServer, path: str, accept: str | None = None, context=None):
        connection = connect(server, context)
        connection.request("GET", path, headers={"Accept": accept} if accept else {})
        self.socket = connection.sock   # kept to end the stream from this side (a close would wait for the reader)
        self.response = connection.getresponse()
        assert self.response.status == 200, self.response.read()
        self.events: "queue.Queue[dict | None]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.response:
                if line.strip():
                    self.events.put(json.loads(line))
        except (OSError, http.client.HTTPException):
            pass   # closed by this side, or cut by the server (an outage: a chunk never completed)
        finally:
            self.events.put(None)

    def next(self, timeout: float = 5) -> dict | None:
        return self.events.get(timeout=timeout)

    def until_bookmark(self, timeout: float = 5) -> tuple[list[dict], dict]:
        """The events before the first BOOKMARK, and the bookmark."""
        before = []
        while (event := self.next(timeout)) is not None and event["type"] != "BOOKMARK":
            before.append(event)
        assert event is not None, f"the stream ended without a bookmark after {before}"
        return before, event

    def rest(self, timeout: float = 10) -> list[dict]:
        """Every further event until the stream ends."""
        events = []
        while (event := self.next(timeout)) is not None:
            events.append(event)
        return events

    def close(self) -> None:
        self.socket.shutdown(socket.SHUT_RDWR)
