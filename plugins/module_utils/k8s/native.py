# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The client `Client` uses when the connection options are within what `kubeconfig.load` reads: the shape of
kubernetes.core's K8SClient (`.configuration`, `.client`) and of the dynamic client behind it (`request`, `watch`,
`resources`), over `transport` and `discovery`, without importing the kubernetes package (half a module's CPU)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Callable, Dict, Iterator, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.discovery import Discovery, cache_path
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.kubeconfig import Connection, load
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.transport import Response, Transport, query_of


def credentials_of(connection: Connection) -> str:
    """What identifies the caller to the API server (for the discovery cache's name; hashed there)."""
    parts = [connection.authorization or "", connection.cert_file or "", connection.key_file or ""]
    parts.extend(hashlib.sha256(data).hexdigest() for data in (connection.cert_data, connection.key_data) if data)
    parts.extend("{0}: {1}".format(name, value) for name, value in connection.headers)
    return "\n".join(parts)


class NativeApi:
    """The dynamic client's `request`, `watch` and `resources`. Discovery is read when it is made, as kubernetes.core's
    client is (/version and /apis without a cache); its requests time out with `request_timeout()`."""

    def __init__(self, transport: Transport, request_timeout: Callable[[], float]) -> None:
        self.transport = transport
        self.request_timeout = request_timeout
        self.resources = Discovery(self._get_json, cache_path(transport.configuration.host, credentials_of(transport.configuration)))

    def _get_json(self, path: str) -> Any:
        data = self.transport.request("get", path, _request_timeout=self.request_timeout()).data
        try:
            return json.loads(data.decode("utf-8", "replace"))
        except ValueError:
            host = self.transport.configuration.host
            if path == "/version" and not host.startswith("https://"):   # as the kubernetes client says it
                raise ValueError("Host value {0} should start with https:// when talking to HTTPS endpoint".format(host))
            raise

    def request(self, method: str, path: str, **params: Any) -> Response:
        return self.transport.request(method, path, **params)

    def watch(self, resource: Any, namespace: Optional[str] = None, name: Optional[str] = None, label_selector: Optional[str] = None,
              field_selector: Optional[str] = None, resource_version: Optional[str] = None, timeout: Optional[int] = None,
              allow_watch_bookmarks: Optional[bool] = None) -> Iterator[Dict[str, Any]]:
        """As the dynamic client's watch: a name becomes a field selector; one request of at most `timeout` seconds."""
        if name:
            field_selector = "metadata.name={0}".format(name)
        query = query_of({"field_selector": field_selector, "label_selector": label_selector, "resource_version": resource_version,
                          "timeout_seconds": timeout, "watch": True, "allow_watch_bookmarks": allow_watch_bookmarks})
        return self.transport.watch_events(resource.path(namespace=namespace), query, timeout)


class NativeClient:
    """kubernetes.core's K8SClient as `Client` uses it: the connection settings and the dynamic-client-shaped API."""

    def __init__(self, connection: Connection, request_timeout: Callable[[], float]) -> None:
        self.configuration = connection
        self.client = NativeApi(Transport(connection), request_timeout)


# One client per connection settings and process, as kubernetes.core keeps its clients (`create_api_client` is cached):
# a process that connects again (a service called twice in one process) reuses its connections and discovery.
_CLIENTS: Dict[str, NativeClient] = {}


def connect(auth: Dict[str, Any], request_timeout: Callable[[], float]) -> NativeClient:
    """The native client for kubernetes.core's auth options, its discovery requests timed out by `request_timeout()`;
    `kubeconfig.NotNative` when only kubernetes.core can connect as they ask."""
    connection = load(auth)
    key = repr(dataclasses.asdict(connection))
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = NativeClient(connection, request_timeout)
    else:
        client.client.request_timeout = request_timeout
    return client
