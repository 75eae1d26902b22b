"""Native discovery: the requests of kubernetes' LazyDiscoverer (with and without a cache file), resource paths, and a
cache file written atomically and read only when it is ours and of our format."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.discovery import Discovery, Resource, cache_path
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.transport import ApiError

GROUPS = {"groups": [
    {"name": "kubevirt.io", "versions": [{"groupVersion": "kubevirt.io/v1", "version": "v1"},
                                         {"groupVersion": "kubevirt.io/v1alpha3", "version": "v1alpha3"}],
     "preferredVersion": {"groupVersion": "kubevirt.io/v1", "version": "v1"}},
    {"name": "subresources.kubevirt.io", "versions": [{"groupVersion": "subresources.kubevirt.io/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "subresources.kubevirt.io/v1", "version": "v1"}},
    {"name": "metrics.k8s.io", "versions": [{"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}],
     "preferredVersion": {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}},
]}
ANSWERS = {
    "/version": {"gitVersion": "v1.35.0"},
    "/apis": GROUPS,
    "/api/v1": {"resources": [{"name": "pods", "kind": "Pod", "namespaced": True}, {"name": "pods/eviction", "kind": "Eviction"},
                              {"name": "nodes", "kind": "Node", "namespaced": False}]},
    "/apis/kubevirt.io/v1": {"resources": [{"name": "virtualmachineinstances", "kind": "VirtualMachineInstance", "namespaced": True}]},
    "/apis/kubevirt.io/v1alpha3": {"resources": [{"name": "virtualmachineinstances", "kind": "VirtualMachineInstance", "namespaced": True}]},
    "/apis/subresources.kubevirt.io/v1": {"resources": [{"name": "virtualmachines/start", "kind": "VirtualMachine"}]},
}


class Server:
    """Answers discovery; the metrics API is unavailable (503), as an aggregated API whose backend is down."""

    def __init__(self, unavailable=("/apis/metrics.k8s.io/v1beta1",)):
        self.requests, self.unavailable = [], set(unavailable)

    def __call__(self, path):
        self.requests.append(path)
        if path in self.unavailable:
            raise ApiError(503, "Service Unavailable")
        return json.loads(json.dumps(ANSWERS[path]))


def kinds(discovery):
    return {(r.kind, r.group, r.api_version, r.preferred) for entry in discovery for r in entry}


def test_without_a_cache_version_and_groups_when_made_then_each_group_version_once(tmp_path):
    server, cache = Server(), str(tmp_path / "cache.json")
    discovery = Discovery(server, cache)
    assert server.requests == ["/version", "/apis"]
    assert kinds(discovery) == {("Pod", "", "v1", True), ("Node", "", "v1", True), ("VirtualMachineInstance", "kubevirt.io", "v1", True),
                                ("VirtualMachineInstance", "kubevirt.io", "v1alpha3", False)}
    assert sorted(server.requests[2:]) == sorted(set(ANSWERS) - {"/version", "/apis"} | {"/apis/metrics.k8s.io/v1beta1"})
    assert discovery.version == {"gitVersion": "v1.35.0"}


def test_with_the_cache_nothing_is_read_but_group_versions_without_resources(tmp_path):
    cache = str(tmp_path / "cache.json")
    kinds(Discovery(Server(), cache))
    server = Server()
    discovery = Discovery(server, cache)
    assert server.requests == []
    found = kinds(discovery)
    assert server.requests == ["/apis/subresources.kubevirt.io/v1", "/apis/metrics.k8s.io/v1beta1"]   # empty lists are read again
    assert ("Pod", "", "v1", True) in found and discovery.version == {"gitVersion": "v1.35.0"}


def test_invalidate_reads_everything_again(tmp_path):
    cache = str(tmp_path / "cache.json")
    kinds(Discovery(Server(), cache))
    server = Server()
    discovery = Discovery(server, cache)
    discovery.invalidate_cache()
    kinds(discovery)
    assert server.requests[:2] == ["/version", "/apis"] and len(server.requests) == len(ANSWERS) + 1   # + metrics


def test_other_discovery_errors_are_raised(tmp_path):
    def server(path):
        if path == "/api/v1":
            raise ApiError(403, "Forbidden")
        return ANSWERS[path]
    with pytest.raises(ApiError):
        kinds(Discovery(server, str(tmp_path / "cache.json")))


@pytest.mark.parametrize("content", ['{"format": "another", "version": {}, "tree": {}}', "not json", '{"format": 1}'])
def test_a_cache_of_another_format_or_unreadable_is_ignored(tmp_path, content):
    cache = tmp_path / "cache.json"
    cache.write_text(content)
    server = Server()
    Discovery(server, str(cache))
    assert server.requests == ["/version", "/apis"] and json.loads(cache.read_text())["format"] != "another"
    assert [name for name in os.listdir(tmp_path) if name != "cache.json"] == []   # no temporary file left behind


def test_resource_paths_as_the_dynamic_client_builds_them():
    vmi = Resource("apis", "kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances", namespaced=True)
    node = Resource("api", "", "v1", "Node", "nodes")
    assert vmi.path(namespace="ns") == "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances"
    assert vmi.path(name="a", namespace="ns") == "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/a"
    assert vmi.path() == "/apis/kubevirt.io/v1/virtualmachineinstances"
    assert node.path(name="w1", namespace="ignored") == "/api/v1/nodes/w1"


def test_the_cache_file_is_per_server_and_credentials(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    one = cache_path("https://a:6443", "Bearer x")
    assert os.path.dirname(one) == str(tmp_path) and "Bearer" not in one
    assert one != cache_path("https://a:6443", "Bearer y") and one != cache_path("https://b:6443", "Bearer x")
