"""networking.k8s.io/v1 NetworkPolicy, Ingress and IngressClass served as plain storage, with the discovery
entries and the `kubectl get` columns of upstream's printers (`pkg/printers/internalversion/printers.go`:
printNetworkPolicy, printIngress, printIngressClass)."""
import pytest

from kubesim import tables
from kubesim.api import Cluster
from kubesim.clock import Clock
from kubesim.discovery import resource_list
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles


@pytest.fixture
def cluster():
    made = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(100))
    made.create(made.registry.by_key("namespaces"), None, {"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": "default"}})
    return made


def rt(cluster, plural):
    return cluster.registry.lookup("networking.k8s.io", "v1", plural)


def cells(cluster, plural, obj):
    doc = tables.table(rt(cluster, plural), [obj], {})
    return dict(zip((c["name"] for c in doc["columnDefinitions"]), doc["rows"][0]["cells"]))


def test_discovery_lists_the_three_kinds():
    doc = resource_list(Registry(resolve_bundles(DEFAULT_BUNDLES["global"])), "networking.k8s.io", "v1")
    entries = {r["name"]: r for r in doc["resources"]}
    assert sorted(entries) == ["ingressclasses", "ingresses", "ingresses/status", "networkpolicies"]
    assert entries["networkpolicies"]["shortNames"] == ["netpol"] and entries["ingresses"]["shortNames"] == ["ing"]
    assert entries["ingressclasses"]["namespaced"] is False and "shortNames" not in entries["ingressclasses"]


def test_network_policy_columns(cluster):
    policy = cluster.create(rt(cluster, "networkpolicies"), "default", {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "deny"},
        "spec": {"podSelector": {"matchLabels": {"tier": "db", "app": "x"},
                                 "matchExpressions": [{"key": "env", "operator": "In", "values": ["qa", "prod"]}]},
                 "policyTypes": ["Ingress"]}})
    assert cluster.get(rt(cluster, "networkpolicies"), "default", "deny")["spec"]["policyTypes"] == ["Ingress"]
    shown = cells(cluster, "networkpolicies", policy)
    assert shown["Name"] == "deny" and shown["Pod-Selector"] == "app=x,env in (prod,qa),tier=db"
    everything = dict(policy, spec={"podSelector": {}})
    assert cells(cluster, "networkpolicies", everything)["Pod-Selector"] == "<none>"


def test_ingress_columns(cluster):
    ingress = cluster.create(rt(cluster, "ingresses"), "default", {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
        "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example"]}],
                 "rules": [{"host": h} for h in ("a.example", "b.example", "c.example", "d.example")] + [{}]}})
    ingress = dict(ingress, status={"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}, {"hostname": "lb.example"},
                                                                 {"ip": "10.0.0.10"}]}})
    shown = cells(cluster, "ingresses", ingress)
    assert [shown[c] for c in ("Name", "Class", "Hosts", "Address", "Ports")] == [
        "web", "nginx", "a.example,b.example,c.example + 1 more...", "10.0.0.10,10.0.0.9,lb.example", "80, 443"]
    bare = dict(ingress, spec={}, status={})
    assert [cells(cluster, "ingresses", bare)[c] for c in ("Class", "Hosts", "Address", "Ports")] == [
        "<none>", "*", "", "80"]


def test_ingress_class_columns(cluster):
    ingress_class = cluster.create(rt(cluster, "ingressclasses"), None, {
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
        "spec": {"controller": "k8s.io/ingress-nginx",
                 "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external"}}})
    shown = cells(cluster, "ingressclasses", ingress_class)
    assert [shown[c] for c in ("Name", "Controller", "Parameters")] == [
        "nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external"]
    assert cells(cluster, "ingressclasses", dict(ingress_class, spec={}))["Parameters"] == "<none>"
