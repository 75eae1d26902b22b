"""A fake kubernetes.core client for unit tests: scripted answers (bodies or exceptions, then a default
handler), discovery with a cache that `invalidate_cache()` refreshes, and a clock that sleeps instantly."""
from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.resource import Resource

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s import client as conn


def resource(kind, name, group="", version="v1", namespaced=True, preferred=True):
    return Resource(prefix="apis" if group else "api", group=group, api_version=version, kind=kind, name=name,
                    namespaced=namespaced, preferred=preferred, client=None)


VMI = resource("VirtualMachineInstance", "virtualmachineinstances", "kubevirt.io")
NODE = resource("Node", "nodes", namespaced=False)
RP = resource("ResourcePatch", "resourcepatches", "operator.alauda.io", "v1alpha1")


def status_error(code, reason, message="", retry_after=None, details=None):
    error = ApiException(status=code, reason=reason)
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message, "code": code}
    if details:
        body["details"] = details
    error.body = json.dumps(body)
    error.headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        error.headers["Retry-After"] = str(retry_after)
    return error


class Response:
    def __init__(self, body):
        self.data = json.dumps(body).encode()


class FakeResources:
    """What kubernetes.core's LazyDiscoverer offers: iteration over lists of resources, and invalidate_cache()."""

    def __init__(self, cached, served):
        self.current, self.served, self.invalidations = list(cached), list(served), 0

    def __iter__(self):
        return iter([[r] for r in self.current])

    def invalidate_cache(self):
        self.invalidations += 1
        self.current = list(self.served)


class FakeApi:
    """A dynamic client whose answers are scripted: `script` is a list of exceptions or bodies used in order,
    then `default(path, params)` answers."""

    def __init__(self, script=(), default=None, cached=(VMI, NODE), served=(VMI, NODE)):
        self.script = list(script)
        self.default = default or (lambda path, params: {"items": [], "metadata": {}})
        self.calls = []
        self.resources = FakeResources(cached, served)

    def request(self, method, path, serialize=True, _request_timeout=None, **params):
        assert method == "get" and serialize is False and _request_timeout > 0
        self.calls.append((path, {k: v for k, v in params.items() if v is not None}))
        if self.script:
            outcome = self.script.pop(0)
            if isinstance(outcome, BaseException):
                raise outcome
            return Response(outcome)
        return Response(self.default(path, params))


class Clock:
    def __init__(self):
        self.now, self.sleeps = 1000.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def connect(api, retries=5, timeout=120, page_size=500):
    clock = Clock()
    client = type("K8SClient", (), {"client": api})()
    connection = conn.Client({"kubeconfig": "/dev/null"}, retries=retries, timeout=timeout, client_factory=lambda **auth: client,
                             sleep=clock.sleep, clock=clock, page_size=page_size)
    return connection, clock
