"""HTTPS and who is asking: the run's CA and serving certificate, TLS errors for clients that do not trust it,
client certificates (CN the user, O the groups) authorized by RBAC, 401 for an unknown bearer token, anonymous
requests under RBAC, the kubeconfig and PEM files, and plain HTTP when asked. Runs the server in-process."""
import base64
import json
import os
import socket
import ssl
import stat
import time
import urllib.error

import pytest
import yaml
from cryptography import x509

from https_client import call
from kubesim import kubeconfig
from kubesim.simulator import Simulator
from kubesim.tls import Authority, client_context

RBAC = "/apis/rbac.authorization.k8s.io/v1"
USERS = [{"name": "carol", "groups": ["auditors", "ops"], "certificate": True},
         {"name": "dave", "token": "dave-token", "certificate": True}]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """RBAC on; group `auditors` may list Pods everywhere, nothing else."""
    path = tmp_path_factory.mktemp("tls") / "tls.yaml"
    path.write_text(yaml.safe_dump({"extends": "api-basics", "name": "tls", "rbac": True, "users": USERS}))
    simulator = Simulator(str(path)).start()
    admin = simulator.credentials.admin
    call(simulator, "POST", f"{RBAC}/clusterroles", pair=admin, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "pod-lister"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    call(simulator, "POST", f"{RBAC}/clusterrolebindings", pair=admin, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "auditors"},
        "subjects": [{"kind": "Group", "name": "auditors", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-lister"}})
    yield simulator
    simulator.stop()


def test_the_api_is_https_with_a_serving_certificate_for_the_local_names(sim):
    assert sim.url.startswith("https://127.0.0.1:")
    status, doc = call(sim, "GET", "/version")
    assert status == 200 and doc["gitVersion"] == "v1.35.0"
    port = sim.server.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with sim.client_context().wrap_socket(raw, server_hostname="localhost") as tls:
            served = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]


def test_a_client_that_does_not_trust_the_ca_gets_the_tls_error(sim):
    with pytest.raises(urllib.error.URLError) as refused:
        call(sim, "GET", "/version", context=client_context(Authority().cert_pem))
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    assert "certificate verify failed" in str(refused.value.reason)
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    assert call(sim, "GET", "/version", context=unverified)[0] == 200     # validate_certs: false


def test_a_client_certificate_is_its_cn_in_the_groups_of_its_os(sim):
    carol = sim.credentials.users["carol"]
    status, doc = call(sim, "GET", "/api/v1/pods", pair=carol)
    assert status == 200 and doc["kind"] == "PodList"
    status, doc = call(sim, "GET", "/api/v1/nodes", pair=carol)
    assert (status, doc["reason"], doc["details"]) == (403, "Forbidden", {"kind": "nodes"})
    assert doc["message"] == 'nodes is forbidden: User "carol" cannot list resource "nodes" in API group "" at the cluster scope'
    # another user's certificate without the group: the same request is refused for that user
    status, doc = call(sim, "GET", "/api/v1/pods", pair=sim.credentials.users["dave"])
    assert status == 403 and doc["message"].startswith('pods is forbidden: User "dave" cannot list resource "pods"')


def test_the_certificate_comes_before_the_token_and_system_masters_may_do_everything(sim):
    # the union authenticator tries x509 first: carol's certificate with dave's token is carol
    assert call(sim, "GET", "/api/v1/pods", token="dave-token", pair=sim.credentials.users["carol"])[0] == 200
    status, doc = call(sim, "GET", "/api/v1/secrets", pair=sim.credentials.admin)
    assert status == 200 and doc["kind"] == "SecretList"
    assert call(sim, "GET", "/api/v1/secrets", token=kubeconfig.TOKEN)[0] == 200


def test_an_unknown_bearer_token_is_401_with_the_apiserver_status(sim):
    status, doc = call(sim, "GET", "/api/v1/pods", token="not-a-token")
    assert status == 401
    assert doc == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
                   "reason": "Unauthorized", "code": 401}


def test_without_credentials_the_request_is_anonymous(sim):
    status, doc = call(sim, "GET", "/api/v1/namespaces/default/pods")
    assert (status, doc["message"]) == (403, 'pods is forbidden: User "system:anonymous" cannot list resource "pods" '
                                             'in API group "" in the namespace "default"')
    assert call(sim, "GET", "/version")[0] == 200       # system:public-info-viewer
    status, doc = call(sim, "GET", "/api")
    assert (status, doc["message"]) == (403, 'forbidden: User "system:anonymous" cannot get path "/api"')


def test_a_client_that_never_finishes_the_handshake_does_not_block_others(sim):
    port = sim.server.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5):      # connected, sends nothing
        started = time.monotonic()
        assert call(sim, "GET", "/version")[0] == 200
        assert time.monotonic() - started < 2


def test_kubeconfig_and_pem_files(sim, tmp_path):
    paths = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
    config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
    ca = base64.b64encode(sim.credentials.ca_pem).decode()
    assert {c["name"]: c["cluster"] for c in config["clusters"]} == {
        "workload": {"server": sim.url, "certificate-authority-data": ca},
        "global": {"server": f"{sim.url}/clusters/global", "certificate-authority-data": ca}}
    users = {u["name"]: u["user"] for u in config["users"]}
    assert set(users["kubesim-admin"]) == {"client-certificate-data", "client-key-data"}
    assert set(users["carol"]) == {"client-certificate-data", "client-key-data"}
    assert set(users["dave"]) == {"token", "client-certificate-data", "client-key-data"}
    admin = x509.load_pem_x509_certificate(sim.credentials.admin.cert_pem)
    assert admin.subject.rfc4514_string() == "CN=kubernetes-admin,O=system:masters"
    assert paths["ca"] == str(tmp_path / "ca.crt") and (tmp_path / "ca.crt").read_bytes() == sim.credentials.ca_pem
    assert paths["users"]["carol"] == {"cert": str(tmp_path / "carol.crt"), "key": str(tmp_path / "carol.key")}
    assert (tmp_path / "carol.key").read_bytes() == sim.credentials.users["carol"].key_pem
    assert stat.S_IMODE(os.stat(tmp_path / "carol.key").st_mode) == 0o600
    status, info = call(sim, "GET", "/_kubesim/info")
    assert info["credentials"] == paths and info["kubeconfig"] == str(tmp_path / "kubeconfig")
    assert "PRIVATE KEY" not in json.dumps(info)


def test_plain_http_only_when_asked(tmp_path):
    simulator = Simulator("api-basics", plain_http=True).start()
    try:
        assert simulator.url.startswith("http://") and simulator.client_context() is None
        assert call(simulator, "GET", "/api/v1/namespaces")[0] == 200
        simulator.write_kubeconfig(str(tmp_path / "kubeconfig"))
        config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        assert config["users"][0]["user"] == {"token": kubeconfig.TOKEN}
        assert "certificate-authority-data" not in config["clusters"][0]["cluster"]
        assert not (tmp_path / "ca.crt").exists()
    finally:
        simulator.stop()
