# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where and how to connect, from kubernetes.core's auth options, without importing the kubernetes client.

`load(auth)` follows kubernetes.core's `get_api_client` step by step (`_create_auth_spec`, `_create_configuration`,
`_create_headers`) and the kubernetes client's kube-config and in-cluster loaders, for what they do in the common case:
the options and `K8S_AUTH_*` variables; `host` with `api_key` or a client certificate; a kubeconfig path (`~`
expanded, or KUBECONFIG, or ~/.kube/config) or dict and its `context`; the in-cluster service account; a cluster's
server, certificate-authority(-data), insecure-skip-tls-verify and tls-server-name; a user's token, tokenFile,
client-certificate(-data), client-key(-data) and username/password; `validate_certs`, `ca_cert`, `client_cert`,
`client_key`; impersonation. Anything else (exec and auth-provider plugins, proxies, several kubeconfig files, a
kubeconfig the kubernetes client would refuse, ...) raises `NotNative`: the caller then uses kubernetes.core's
client, so that those cases, and every error message, stay exactly what kubernetes.core gives.
"""

from __future__ import annotations

import base64
import os
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_MAP, AUTH_ARG_SPEC

IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
IN_CLUSTER_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
DEFAULT_HOST = "http://localhost"   # kubernetes.client.Configuration's host when nothing is loaded
HEADER_OPTIONS = (("impersonate_user", "Impersonate-User"), ("impersonate_groups", "Impersonate-Group"))
FALSE_WORDS = ("0", "false", "no")


class NotNative(Exception):
    """The options ask for something only the kubernetes client does (or that it would refuse): use kubernetes.core."""


@dataclass
class Connection:
    """The settings of the API connection; the attribute names are those of kubernetes.client.Configuration that
    the collection reads (`host`, `verify_ssl`, `ssl_ca_cert`), plus the PEM texts of -data fields."""
    host: str = DEFAULT_HOST
    verify_ssl: bool = True
    ssl_ca_cert: Optional[str] = None
    ssl_ca_data: Optional[bytes] = None
    cert_file: Optional[str] = None
    cert_data: Optional[bytes] = None
    key_file: Optional[str] = None
    key_data: Optional[bytes] = None
    tls_server_name: Optional[str] = None
    authorization: Optional[str] = None
    headers: List[Tuple[str, str]] = field(default_factory=list)


def auth_spec(params: Mapping[str, Any], environ: Mapping[str, str]) -> Dict[str, Any]:
    """kubernetes.core's `_create_auth_spec`: each option from the params, else its `K8S_AUTH_*` variable, keyed by
    the kubernetes client's name (`verify_ssl`, `ssl_ca_cert`, `cert_file`, `key_file`)."""
    auth: Dict[str, Any] = {}
    for true_name, arg_name in AUTH_ARG_MAP.items():
        if params.get(arg_name) is not None:
            auth[true_name] = params[arg_name]
        elif params.get(true_name) is not None:
            auth[true_name] = params[true_name]
        elif arg_name == "proxy_headers":
            if any(name.startswith("K8S_AUTH_PROXY_HEADERS_") for name in environ):
                raise NotNative("proxy headers")
        else:
            value = environ.get("K8S_AUTH_{0}".format(arg_name.upper())) or environ.get("K8S_AUTH_{0}".format(true_name.upper()))
            if value is not None:
                auth[true_name] = value.lower() not in FALSE_WORDS if AUTH_ARG_SPEC[arg_name].get("type") == "bool" else value
    return auth


def request_headers(params: Mapping[str, Any], environ: Mapping[str, str]) -> List[Tuple[str, str]]:
    """kubernetes.core's `_create_headers`: impersonation from the params or `K8S_AUTH_IMPERSONATE_*`, one header
    per group."""
    if environ.get("K8S_AUTH_ACCEPT") is not None:
        raise NotNative("K8S_AUTH_ACCEPT")   # kubernetes.core fails on it (no `accept` auth option)
    headers: List[Tuple[str, str]] = []
    for option, header in HEADER_OPTIONS:
        value = params.get(option)
        if value is None:
            value = environ.get("K8S_AUTH_{0}".format(option.upper()))
            if value is not None and AUTH_ARG_SPEC[option].get("type") == "list":
                value = [item for item in value.split(",") if item != ""]
        if value:
            headers.extend((header, str(item)) for item in (value if isinstance(value, list) else [value]))
    return headers


def load(params: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None) -> Connection:
    """The connection for a module's auth options, as kubernetes.core's `get_api_client` would configure it;
    `NotNative` when only kubernetes.core can."""
    environ = os.environ if environ is None else environ
    auth = auth_spec(params, environ)
    if auth.get("proxy") is not None or auth.get("no_proxy") is not None or any((auth.get("proxy_headers") or {}).values()):
        raise NotNative("proxy options")
    if auth.get("username") is not None or auth.get("password") is not None:
        raise NotNative("basic auth options")
    if any(auth.get(name) == "" for name in ("host", "api_key", "ssl_ca_cert", "cert_file", "key_file")):
        raise NotNative("an empty option")
    if auth.get("host"):
        auth["host"] = auth["host"].rstrip("/")

    def given(*names: str) -> bool:
        return all(auth.get(name) for name in names)

    if given("api_key", "host") or given("cert_file", "key_file", "host"):
        connection = Connection()
    elif given("kubeconfig") or given("context"):
        connection = _from_kubeconfig(auth, environ)
    else:
        connection = _in_cluster(environ) or _from_kubeconfig(auth, environ)

    if auth.get("api_key") is not None:
        if connection.authorization is not None:
            raise NotNative("api_key with a loaded token")   # the kubernetes client's refresh hook would keep the loaded one
        connection.authorization = "Bearer {0}".format(auth["api_key"])
    if auth.get("host") is not None:
        connection.host = auth["host"]
    if auth.get("verify_ssl") is not None:
        connection.verify_ssl = bool(auth["verify_ssl"])
    for option, data in (("ssl_ca_cert", "ssl_ca_data"), ("cert_file", "cert_data"), ("key_file", "key_data")):
        if auth.get(option) is not None:
            setattr(connection, option, auth[option])
            setattr(connection, data, None)
    _refuse_environment_proxy(connection.host, environ)
    if urllib.parse.urlsplit(connection.host).scheme not in ("http", "https"):
        raise NotNative("a host without http(s)://")
    connection.headers = request_headers(params, environ)
    return connection


def _refuse_environment_proxy(host: str, environ: Mapping[str, str]) -> None:
    """The kubernetes client takes a proxy for the host's scheme (or `all`) from the environment."""
    proxies = urllib.request.getproxies_environment() if environ is os.environ else _proxies_of(environ)
    if proxies.get(urllib.parse.urlsplit(host).scheme) or proxies.get("all"):
        raise NotNative("a proxy from the environment")


def _proxies_of(environ: Mapping[str, str]) -> Dict[str, str]:
    return {name.lower()[:-6]: value for name, value in environ.items() if name.lower().endswith("_proxy") and value}


# ------------------------------------------------------------------------------------------ in-cluster
def _in_cluster(environ: Mapping[str, str]) -> Optional[Connection]:
    """The service account's connection; None outside a cluster (no KUBERNETES_SERVICE_HOST/PORT), where
    kubernetes.core goes on to the kubeconfig."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if host is None or port is None:
        return None
    try:
        with open(IN_CLUSTER_TOKEN) as token_file:
            token = token_file.read()
        with open(IN_CLUSTER_CA) as ca_file:
            has_ca = bool(ca_file.read())
    except OSError as error:
        raise NotNative("in-cluster files") from error
    if not host or not port or not token or not has_ca:
        raise NotNative("incomplete in-cluster configuration")
    return Connection(host="https://" + ("[{0}]:{1}" if ":" in host else "{0}:{1}").format(host, port), ssl_ca_cert=IN_CLUSTER_CA,
                      authorization="bearer " + token)


# ------------------------------------------------------------------------------------------ kubeconfig
def _from_kubeconfig(auth: Mapping[str, Any], environ: Mapping[str, str]) -> Connection:
    kubeconfig, context = auth.get("kubeconfig"), auth.get("context")
    if not kubeconfig:
        kubeconfig = environ.get("KUBECONFIG", "~/.kube/config")
    if isinstance(kubeconfig, dict):
        return _from_config(kubeconfig, context, "")
    if not isinstance(kubeconfig, str) or ":" in kubeconfig:
        raise NotNative("several kubeconfig files")
    path = os.path.expanduser(kubeconfig)
    if not os.path.isfile(path):
        raise NotNative("no kubeconfig file")
    with open(path) as config_file:
        text = config_file.read()
    return _from_config(_parse(text), context, os.path.abspath(os.path.dirname(path)))


def _parse(text: str) -> Any:
    try:
        import yaml  # only a kubeconfig file needs it
    except ImportError as error:
        raise NotNative("PyYAML is missing") from error
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise NotNative("unreadable kubeconfig") from error


def _named(config: dict, section: str, name: Any, required: bool = True) -> Optional[dict]:
    """The one item called `name` of a kubeconfig list; NotNative where the kubernetes client would refuse."""
    items = config.get(section)
    if not isinstance(items, list) or not all(isinstance(item, dict) and "name" in item for item in items):
        raise NotNative("kubeconfig " + section)
    found = [item for item in items if item["name"] == name]
    if len(found) > 1 or (required and not found):
        raise NotNative("kubeconfig " + section)
    return found[0] if found else None


def _mapping(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise NotNative("kubeconfig " + what)
    return value


def _from_config(config: Any, context_name: Optional[str], base_path: str) -> Connection:
    """kubernetes' KubeConfigLoader: the context's cluster and user."""
    config = _mapping(config, "document")
    if context_name is None:
        context_name = config.get("current-context")
    context = _mapping(_mapping(_named(config, "contexts", context_name), "context").get("context"), "context")
    user: Optional[dict] = None
    if context.get("user") and config.get("users"):
        entry = _named(config, "users", context["user"], required=False)
        if entry is not None:
            user = _mapping(entry.get("user"), "user")
    cluster = _mapping(_named(config, "clusters", context.get("cluster"))["cluster"], "cluster")

    connection = Connection(authorization=_user_authorization(user, base_path) if user else None)
    if "server" in cluster:
        if not isinstance(cluster["server"], str):
            raise NotNative("kubeconfig server")
        connection.host = cluster["server"].rstrip("/")
        if connection.host.startswith("https"):
            connection.ssl_ca_cert, connection.ssl_ca_data = _file_or_data(cluster, "certificate-authority", base_path)
            connection.cert_file, connection.cert_data = _file_or_data(user, "client-certificate", base_path)
            connection.key_file, connection.key_data = _file_or_data(user, "client-key", base_path)
    if "insecure-skip-tls-verify" in cluster:
        connection.verify_ssl = not _present(cluster, "insecure-skip-tls-verify")
    if "tls-server-name" in cluster:
        connection.tls_server_name = str(_present(cluster, "tls-server-name"))
    if "proxy-url" in cluster:
        raise NotNative("proxy-url")
    return connection


def _present(node: dict, key: str) -> Any:
    """A key's value; the kubernetes client refuses a key that is there with null."""
    value = node[key]
    if value is None:
        raise NotNative("kubeconfig " + key)
    return value


def _user_authorization(user: dict, base_path: str) -> Optional[str]:
    """The user's Authorization header, in the kubernetes client's order: auth-provider, token, exec, basic."""
    if "auth-provider" in user:
        raise NotNative("credential plugins")
    token = _token(user, base_path)
    if token:
        return "Bearer {0}".format(token)
    if "exec" in user:
        raise NotNative("credential plugins")
    if "username" in user and "password" in user:
        username, password = _present(user, "username"), _present(user, "password")
        if not isinstance(username, str) or not isinstance(password, str):
            raise NotNative("kubeconfig basic auth")
        return "Basic " + base64.b64encode((username + ":" + password).encode("latin-1")).decode()
    return None


def _token(user: dict, base_path: str) -> Any:
    """`token`, else the content of `tokenFile` (read as it is, as the kubernetes client does)."""
    if "token" in user:
        return _present(user, "token")
    if "tokenFile" in user:
        try:
            with open(os.path.normpath(os.path.join(base_path, _present(user, "tokenFile")))) as token_file:
                return token_file.read()
        except (OSError, TypeError) as error:
            raise NotNative("tokenFile") from error
    return None


def _file_or_data(node: Optional[dict], key: str, base_path: str) -> Tuple[Optional[str], Optional[bytes]]:
    """kubernetes' FileOrData: `<key>-data` (base64) wins over `<key>` (a file relative to the kubeconfig's folder,
    which must exist); (file, None), (None, PEM bytes) or (None, None)."""
    if not node:
        return None, None
    if key + "-data" in node:
        data = _present(node, key + "-data")
        if not data:
            return None, None
        try:
            return None, base64.standard_b64decode(data.encode() if isinstance(data, str) else data)
        except (TypeError, ValueError) as error:
            raise NotNative("kubeconfig " + key + "-data") from error
    if key in node:
        value = _present(node, key)
        if not isinstance(value, str):
            raise NotNative("kubeconfig " + key)
        path = os.path.normpath(os.path.join(base_path, value))
        if not os.path.isfile(path):
            raise NotNative("kubeconfig " + key)
        return path, None
    return None, None
