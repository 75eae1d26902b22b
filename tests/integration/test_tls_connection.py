"""The collection's connection options over the simulator's HTTPS, with RBAC on: `host` with `ca_cert` connects, a
wrong `ca_cert` fails with the TLS verify error in the module's message, `validate_certs: false` connects without a
CA, `client_cert`/`client_key` files authenticate a certificate user whom RBAC authorizes by its group (O); and
kubectl as a user bound to a narrow role gets the apiserver's 403 message (kubectl now sends its credentials)."""
from __future__ import annotations

import pytest
from urllib3.exceptions import InsecureRequestWarning
import yaml

from kubesim.tls import Authority
from support.rbac import grant, manifests
from support.simulator import kubectl_available, running_kubesim

from .module_call import call_module

pytestmark = pytest.mark.simulator

FACTS = "kubevirt_eviction_facts"
READERS = "facts-readers"
USERS = [{"name": "reader", "groups": [READERS], "certificate": True},      # authorized by its group only
         {"name": "outsider", "certificate": True},
         {"name": "narrow", "token": "narrow-token"}]
NODE_READER = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "node-reader"},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tls")
    scenario = workdir / "tls.yaml"
    scenario.write_text(yaml.safe_dump({"extends": "rebalance-two-workers", "name": "tls", "rbac": True, "users": USERS}))
    with running_kubesim(str(scenario), workdir / "sim") as started:
        grant(started, READERS, manifests(FACTS), subject_kind="Group")
        grant(started, "narrow", NODE_READER)
        yield started


def files(sim, user: str) -> dict:
    return sim.info()["credentials"]["users"][user]


def with_certificate(sim, user: str, **options) -> dict:
    """Module options: `host`, the CA, and `user`'s certificate and key files."""
    return {"host": sim.url, "ca_cert": sim.ca_file, "client_cert": files(sim, user)["cert"],
            "client_key": files(sim, user)["key"], "api_retries": 0, **options}


def vmi_names(result: dict) -> set:
    assert not result["failed"], result
    return {vmi["name"] for vmi in result["vmis"]}


def test_host_and_ca_cert_connect(sim):
    assert vmi_names(call_module(FACTS, with_certificate(sim, "reader"))) == {"vm-1", "vm-2"}


def test_a_wrong_ca_cert_fails_with_the_tls_verify_error(sim, tmp_path):
    other_ca = tmp_path / "other-ca.crt"
    other_ca.write_bytes(Authority().cert_pem)      # another run's CA: the serving certificate does not chain to it
    result = call_module(FACTS, with_certificate(sim, "reader", ca_cert=str(other_ca)))
    assert result["failed"] and "CERTIFICATE_VERIFY_FAILED" in result["msg"], result
    assert "certificate verify failed" in result["msg"]


def test_validate_certs_false_connects_without_a_ca(sim):
    options = dict(with_certificate(sim, "reader", validate_certs=False))
    del options["ca_cert"]
    with pytest.warns(InsecureRequestWarning, match="Unverified HTTPS request"):   # what urllib3 says of it
        assert vmi_names(call_module(FACTS, options)) == {"vm-1", "vm-2"}


def test_a_certificate_user_outside_the_group_is_refused_by_rbac(sim):
    result = call_module(FACTS, with_certificate(sim, "outsider"))
    assert result["failed"] and 'User "outsider" cannot list resource' in result["msg"], result
    assert result["error"]["status"] == 403


@pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")
def test_kubectl_as_a_narrow_role_user_gets_the_apiservers_403(sim):
    assert "worker-a" in sim.kubectl("get", "nodes", "-o", "name", context="narrow@workload").stdout
    denied = sim.kubectl("get", "pods", "-n", "desched-test", context="narrow@workload", check=False)
    assert denied.returncode == 1
    assert denied.stderr.strip() == ('Error from server (Forbidden): pods is forbidden: User "narrow" cannot list resource '
                                     '"pods" in API group "" in the namespace "desched-test"')
    by_certificate = sim.kubectl("get", "virtualmachineinstances", "-A", "-o", "name", context="reader@workload")
    assert sorted(by_certificate.stdout.split()) == ["virtualmachineinstance.kubevirt.io/vm-1",
                                                     "virtualmachineinstance.kubevirt.io/vm-2"]
