"""Least privilege on the simulator with RBAC on: the documented roles (docs/rbac/), granted to the scenario's users
under per-user names, with one permission taken out, and the checks that a module or role was refused naming it."""
from __future__ import annotations

import copy
import urllib.error
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import yaml

from .simulator import ROOT, KubeSim, running_kubesim

RBAC_DIR = ROOT / "docs" / "rbac"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"


def manifests(module: str) -> list:
    return yaml.safe_load((RBAC_DIR / "{0}.yaml".format(module)).read_text())["items"]


def api(sim, method: str, path: str, body=None):
    """A request as the admin; a 404 on DELETE is None, other failures an AssertionError with the Status."""
    try:
        return sim.request_json(method, path, body)
    except urllib.error.HTTPError as error:
        if method == "DELETE" and error.code == 404:
            return None
        raise AssertionError("{0} {1}: {2} {3}".format(method, path, error.code, error.read().decode())) from None


GRANTED: dict = {}


def grant(sim, user: str, docs: list, subject_kind: str = "User") -> None:
    """Create the roles of `docs` under per-user names and bind them to `user` (or to the Group `user` with
    `subject_kind="Group"`), replacing every earlier grant."""
    for path in GRANTED.pop(user, []):
        api(sim, "DELETE", path)
    for doc in docs:
        doc = copy.deepcopy(doc)
        kind, namespace = doc["kind"], doc["metadata"].get("namespace")
        name = "{0}-{1}".format(doc["metadata"]["name"], user)
        doc["metadata"]["name"] = name
        plural = {"ClusterRole": "clusterroles", "Role": "roles"}[kind]
        binding_plural = {"ClusterRole": "clusterrolebindings", "Role": "rolebindings"}[kind]
        scope = "{0}/namespaces/{1}".format(RBAC_API, namespace) if namespace else RBAC_API
        api(sim, "DELETE", "{0}/{1}/{2}".format(scope, plural, name))
        api(sim, "DELETE", "{0}/{1}/{2}".format(scope, binding_plural, name))
        api(sim, "POST", "{0}/{1}".format(scope, plural), doc)
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind + "Binding",
                   "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
                   "subjects": [{"kind": subject_kind, "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}}
        api(sim, "POST", "{0}/{1}".format(scope, binding_plural), binding)
        GRANTED.setdefault(user, []).append("{0}/{1}/{2}".format(scope, binding_plural, name))


def without(docs: list, kind: str, resource: str, verb: str) -> list:
    """The documented set with `verb` on `resource` taken out of the `kind` (ClusterRole or Role)."""
    reduced = copy.deepcopy(docs)
    found = False
    for doc in reduced:
        if doc["kind"] != kind:
            continue
        rules = []
        for rule in doc["rules"]:
            if resource not in rule["resources"] or verb not in rule["verbs"]:
                rules.append(rule)
                continue
            found = True
            others = [r for r in rule["resources"] if r != resource]
            verbs = [v for v in rule["verbs"] if v != verb]
            rules += ([dict(rule, resources=others)] if others else []) + ([dict(rule, resources=[resource], verbs=verbs)] if verbs else [])
        doc["rules"] = rules
    assert found, "the documented {0} has no {1} on {2}".format(kind, verb, resource)
    return reduced


def snapshot(sim) -> dict:
    """The objects these modules could change: (kind, namespace, name) -> resourceVersion."""
    state = {}
    for path in ("/api/v1/configmaps", "/apis/operator.alauda.io/v1alpha1/resourcepatches",
                 "/apis/kubevirt.io/v1/virtualmachineinstances", "/apis/kubevirt.io/v1/virtualmachineinstancemigrations"):
        for item in api(sim, "GET", path)["items"]:
            state[(item["kind"], item["metadata"].get("namespace"), item["metadata"]["name"])] = item["metadata"]["resourceVersion"]
    return state


def as_user(sim, user: str, **args) -> dict:
    return {"kubeconfig": sim.kubeconfig, "context": "{0}@workload".format(user), **args}


def assert_denied(result: dict, verb: str, resource: str) -> None:
    assert result["failed"], result
    assert 'cannot {0} resource "{1}"'.format(verb, resource) in result["msg"], result["msg"]
    assert 'Grant the user verb "{0}" on resource "{1}"'.format(verb, resource) in result["msg"], result["msg"]
    assert result["error"]["forbidden"]["verb"] == verb and result["error"]["status"] == 403


def role_denied(run, verb: str, resource: str) -> None:
    """A role stopped by the API's 403 (kubernetes.core tasks print it JSON-escaped)."""
    assert run.failed and 'cannot {0} resource "{1}"'.format(verb, resource) in run.stdout.replace("\\", ""), run.stdout[-3000:]


@contextmanager
def rbac_kubesim(workdir: Path, extends: str, name: str, users: list, grants: dict, objects: Sequence[dict] = ()) -> Iterator[KubeSim]:
    """A simulator for the scenario `name`: `extends` with RBAC on and a token user for each of `users`; each user
    of `grants` bound to its documents; `objects` replace the workload cluster's objects of the same identity. Stopped on exit."""
    scenario = workdir / "rbac.yaml"
    document = {"extends": extends, "name": name, "rbac": True, "users": [{"name": u, "token": "{0}-token".format(u)} for u in users]}
    if objects:
        document["clusters"] = {"workload": {"objects": list(objects)}}
    scenario.write_text(yaml.safe_dump(document))
    with running_kubesim(str(scenario), workdir / "sim") as sim:
        for user, docs in grants.items():
            grant(sim, user, docs)
        yield sim
