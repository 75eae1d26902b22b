"""Raw HTTP against a KubeSimServer in this process, for the tests of lists, watches and content negotiation: a
server over one bare cluster (no controllers, so resourceVersions are exact), plain requests, and a watch stream
read line by line in a thread."""
from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import urllib.error
import urllib.request
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


def call(server: KubeSimServer, method: str, path: str, body=None, accept: str | None = None,
         content_type: str = "application/json") -> tuple[int, dict]:
    headers = {"Content-Type": content_type}
    if accept is not None:
        headers["Accept"] = accept
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def configmap(name: str, labels: dict | None = None, **data) -> dict:
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


class Stream:
    """A watch response read in a thread: `next()` is the next event (None when the stream ended)."""

    def __init__(self, server: KubeSimServer, path: str, accept: str | None = None):
        host, port = server.server_address[:2]
        connection = http.client.HTTPConnection(host, port, timeout=30)
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
        except OSError:
            pass   # closed by this side
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
