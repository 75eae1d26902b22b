"""The kubeconfig the simulator writes: one context per cluster, `workload` current, as the admin; and for each
scenario user one context per cluster named `<user>@<cluster>` with that user's token and/or client certificate.

Over HTTPS (the default) every cluster carries the run's CA (`certificate-authority-data`) and the admin
authenticates as kubeadm's `admin.conf` does, with a client certificate `CN=kubernetes-admin, O=system:masters`;
over plain HTTP the admin sends the admin token. The PEM files are written next to the kubeconfig too
(`ca.crt`, `<user>.crt`, `<user>.key`), for clients that take paths."""
from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field

import yaml

from .tls import KeyPair, write_private

TOKEN = "kubesim-admin-token"
ADMIN_ENTRY = "kubesim-admin"


@dataclass(frozen=True)
class Credentials:
    """The run's CA and the client certificates of the admin and of the users that asked for one (by name)."""
    ca_pem: bytes
    admin: KeyPair
    users: dict[str, KeyPair] = field(default_factory=dict)


def _data(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def _certificate_fields(pair: KeyPair) -> dict:
    return {"client-certificate-data": _data(pair.cert_pem), "client-key-data": _data(pair.key_pem)}


def _user_entry(user: dict, credentials: Credentials | None) -> dict:
    entry = {"token": user["token"]} if user.get("token") else {}
    if credentials is not None and user["name"] in credentials.users:
        entry.update(_certificate_fields(credentials.users[user["name"]]))
    return {"name": user["name"], "user": entry}


def build(urls: dict[str, str], current: str = "workload", users: list[dict] | None = None,
          credentials: Credentials | None = None) -> dict:
    users = users or []
    ca = {"certificate-authority-data": _data(credentials.ca_pem)} if credentials else {}
    admin = _certificate_fields(credentials.admin) if credentials else {"token": TOKEN}
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": url, **ca}} for name, url in urls.items()],
        "users": [{"name": ADMIN_ENTRY, "user": admin}] + [_user_entry(user, credentials) for user in users],
        "contexts": [{"name": name, "context": {"cluster": name, "user": ADMIN_ENTRY, "namespace": "default"}}
                     for name in urls] +
                    [{"name": f"{user['name']}@{name}", "context": {"cluster": name, "user": user["name"],
                                                                    "namespace": "default"}}
                     for user in users for name in urls],
        "current-context": current if current in urls else next(iter(urls)),
    }


def _file_name(user: str) -> str:
    """A file name for a user name (`system:serviceaccount:ns:sa` has colons)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", user)


def write_pem_files(directory: str, credentials: Credentials) -> dict:
    """`ca.crt` and `<user>.crt`/`<user>.key` (the admin as `kubernetes-admin`) in `directory`; answers their
    paths (never their contents)."""
    ca_file = os.path.join(directory, "ca.crt")
    write_private(ca_file, credentials.ca_pem)
    paths: dict = {"ca": ca_file, "users": {}}
    for name, pair in {"kubernetes-admin": credentials.admin, **credentials.users}.items():
        cert_file = os.path.join(directory, f"{_file_name(name)}.crt")
        key_file = os.path.join(directory, f"{_file_name(name)}.key")
        write_private(cert_file, pair.cert_pem)
        write_private(key_file, pair.key_pem)
        paths["users"][name] = {"cert": cert_file, "key": key_file}
    return paths


def write(path: str, urls: dict[str, str], current: str = "workload", users: list[dict] | None = None,
          credentials: Credentials | None = None) -> dict:
    """Write the kubeconfig (mode 0600, atomically) and, over HTTPS, the PEM files next to it; answers the PEM
    files' paths (empty over plain HTTP)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    paths = write_pem_files(directory, credentials) if credentials else {}
    tmp = f"{path}.tmp"
    write_private(tmp, yaml.safe_dump(build(urls, current, users, credentials), sort_keys=False).encode())
    os.replace(tmp, path)
    return paths
