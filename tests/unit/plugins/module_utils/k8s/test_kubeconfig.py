"""The connection settings read as kubernetes.core's get_api_client reads them, and the cases left to it (NotNative)."""
from __future__ import annotations

import base64

import pytest

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s import kubeconfig
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.kubeconfig import NotNative, load

CA_PEM = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"


def params(**given):
    values = {name: None for name in AUTH_ARG_SPEC}
    values.update(given)
    return values


def config(cluster=None, user=None, context_extra=None, current="work"):
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "c", "cluster": dict({"server": "https://api.example:6443/"}, **(cluster or {}))}],
            "users": [{"name": "u", "user": dict(user if user is not None else {"token": "abc"})}],
            "contexts": [{"name": "work", "context": dict({"cluster": "c", "user": "u"}, **(context_extra or {}))},
                         {"name": "other", "context": {"cluster": "c"}}]}


def b64(data):
    return base64.b64encode(data).decode()


# ------------------------------------------------------------------------------------------ kubeconfig
def test_a_kubeconfig_dict_gives_the_server_token_and_ca_data():
    connection = load(params(kubeconfig=config(cluster={"certificate-authority-data": b64(CA_PEM)})), environ={})
    assert connection.host == "https://api.example:6443" and connection.authorization == "Bearer abc"
    assert connection.ssl_ca_data == CA_PEM and connection.ssl_ca_cert is None and connection.verify_ssl is True


def test_context_picks_another_context_whose_user_is_absent():
    connection = load(params(kubeconfig=config(), context="other"), environ={})
    assert connection.authorization is None and connection.host == "https://api.example:6443"


def test_a_kubeconfig_file_with_home_and_paths_relative_to_its_folder(tmp_path, monkeypatch):
    import yaml
    folder = tmp_path / "kube"
    folder.mkdir()
    (folder / "ca.crt").write_bytes(CA_PEM)
    (folder / "token").write_text("from-file")
    (folder / "config").write_text(yaml.safe_dump(config(cluster={"certificate-authority": "ca.crt"}, user={"tokenFile": "token"})))
    monkeypatch.setenv("HOME", str(tmp_path))
    connection = load(params(kubeconfig="~/kube/config"), environ={})
    assert connection.ssl_ca_cert == str(folder / "ca.crt") and connection.authorization == "Bearer from-file"


def test_kubeconfig_env_then_home_default_when_no_option(tmp_path, monkeypatch):
    import yaml
    path = tmp_path / "cfg"
    path.write_text(yaml.safe_dump(config()))
    assert load(params(), environ={"KUBECONFIG": str(path)}).authorization == "Bearer abc"
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(yaml.safe_dump(config(user={"token": "home"})))
    assert load(params(), environ={}).authorization == "Bearer home"


def test_token_wins_over_token_file_and_client_certificate_data_is_decoded():
    user = {"token": "t", "tokenFile": "/does/not/exist", "client-certificate-data": b64(b"CERT"), "client-key-data": b64(b"KEY")}
    connection = load(params(kubeconfig=config(user=user)), environ={})
    assert connection.authorization == "Bearer t" and connection.cert_data == b"CERT" and connection.key_data == b"KEY"


def test_basic_auth_of_the_kubeconfig_user():
    connection = load(params(kubeconfig=config(user={"username": "ann", "password": "pw"})), environ={})
    assert connection.authorization == "Basic " + b64(b"ann:pw")


def test_insecure_skip_tls_verify_and_tls_server_name():
    connection = load(params(kubeconfig=config(cluster={"insecure-skip-tls-verify": True, "tls-server-name": "kubernetes"})), environ={})
    assert connection.verify_ssl is False and connection.tls_server_name == "kubernetes"


def test_plain_http_server_ignores_tls_files():
    connection = load(params(kubeconfig=config(cluster={"server": "http://127.0.0.1:8080", "certificate-authority": "/missing"})), environ={})
    assert connection.host == "http://127.0.0.1:8080" and connection.ssl_ca_cert is None


# ------------------------------------------------------------------------------------------ options and environment
def test_options_override_the_kubeconfig():
    connection = load(params(kubeconfig=config(cluster={"certificate-authority-data": b64(CA_PEM)}), host="https://other:443/",
                             validate_certs=False, ca_cert="/etc/ca.pem", impersonate_user="bob", impersonate_groups=["g1", "g2"]),
                      environ={})
    assert connection.host == "https://other:443" and connection.verify_ssl is False
    assert connection.ssl_ca_cert == "/etc/ca.pem" and connection.ssl_ca_data is None
    assert connection.headers == [("Impersonate-User", "bob"), ("Impersonate-Group", "g1"), ("Impersonate-Group", "g2")]


def test_host_with_api_key_reads_no_kubeconfig():
    connection = load(params(host="https://h:6443", api_key="k"), environ={"KUBECONFIG": "/does/not/exist"})
    assert connection.host == "https://h:6443" and connection.authorization == "Bearer k" and connection.verify_ssl is True


def test_k8s_auth_environment_as_kubernetes_core_reads_it():
    environ = {"K8S_AUTH_HOST": "https://env:6443", "K8S_AUTH_API_KEY": "envkey", "K8S_AUTH_VERIFY_SSL": "no",
               "K8S_AUTH_IMPERSONATE_GROUPS": "a,,b"}
    connection = load(params(), environ=environ)
    assert (connection.host, connection.authorization, connection.verify_ssl) == ("https://env:6443", "Bearer envkey", False)
    assert connection.headers == [("Impersonate-Group", "a"), ("Impersonate-Group", "b")]


def test_in_cluster_service_account_before_the_kubeconfig(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(CA_PEM)
    monkeypatch.setattr(kubeconfig, "IN_CLUSTER_TOKEN", str(tmp_path / "token"))
    monkeypatch.setattr(kubeconfig, "IN_CLUSTER_CA", str(tmp_path / "ca.crt"))
    connection = load(params(), environ={"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443", "KUBECONFIG": "/nope"})
    assert connection.host == "https://[fd00::1]:443" and connection.authorization == "bearer sa-token"
    assert connection.ssl_ca_cert == str(tmp_path / "ca.crt")


# ------------------------------------------------------------------------------------------ left to kubernetes.core
@pytest.mark.parametrize("given, environ", [
    ({"kubeconfig": config(user={"exec": {"command": "get-token"}})}, {}),
    ({"kubeconfig": config(user={"auth-provider": {"name": "oidc"}})}, {}),
    ({"kubeconfig": config(cluster={"proxy-url": "http://proxy:3128"})}, {}),
    ({"kubeconfig": config(), "proxy": "http://proxy:3128"}, {}),
    ({"kubeconfig": config(), "no_proxy": "example"}, {}),
    ({"kubeconfig": config()}, {"HTTPS_PROXY": "http://proxy:3128"}),
    ({"kubeconfig": config(), "proxy_headers": {"basic_auth": "a:b", "user_agent": None, "proxy_basic_auth": None}}, {}),
    ({"host": "https://h", "username": "u", "password": "p"}, {}),
    ({"kubeconfig": config(), "api_key": "k"}, {}),              # the kubeconfig's token would stay in use
    ({"kubeconfig": config(), "context": "missing"}, {}),
    ({"kubeconfig": config(current=None)}, {}),
    ({"kubeconfig": "/a:/b"}, {}),
    ({"kubeconfig": "/does/not/exist"}, {}),
    ({"kubeconfig": config(user={"tokenFile": "/does/not/exist"})}, {}),
    ({"kubeconfig": config(cluster={"certificate-authority": "/does/not/exist"})}, {}),
    ({"kubeconfig": config()}, {"K8S_AUTH_ACCEPT": "application/json"}),
    ({"kubeconfig": config()}, {"K8S_AUTH_PROXY_HEADERS_USER_AGENT": "x"}),
    ({}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}),   # no service account files here
])
def test_what_only_the_kubernetes_client_does_is_left_to_it(given, environ):
    with pytest.raises(NotNative):
        load(params(**given), environ=environ)


def test_a_duplicate_name_in_a_kubeconfig_list_is_left_to_the_kubernetes_client():
    document = config()
    document["clusters"].append(dict(document["clusters"][0]))
    with pytest.raises(NotNative):
        load(params(kubeconfig=document), environ={})
