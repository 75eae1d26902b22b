"""The kubeconfig the simulator writes: one context per cluster, `workload` current, with the admin token;
and for each scenario user one context per cluster named `<user>@<cluster>` with that user's token."""
from __future__ import annotations

import os

import yaml

TOKEN = "kubesim-admin-token"


def build(urls: dict[str, str], current: str = "workload", users: list[dict] | None = None) -> dict:
    users = users or []
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": url}} for name, url in urls.items()],
        "users": [{"name": "kubesim-admin", "user": {"token": TOKEN}}] +
                 [{"name": user["name"], "user": {"token": user["token"]}} for user in users],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "kubesim-admin", "namespace": "default"}}
                     for name in urls] +
                    [{"name": f"{user['name']}@{name}", "context": {"cluster": name, "user": user["name"],
                                                                    "namespace": "default"}}
                     for user in users for name in urls],
        "current-context": current if current in urls else next(iter(urls)),
    }


def write(path: str, urls: dict[str, str], current: str = "workload", users: list[dict] | None = None) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        yaml.safe_dump(build(urls, current, users), handle, sort_keys=False)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
