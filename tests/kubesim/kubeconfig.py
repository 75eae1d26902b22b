"""The kubeconfig the simulator writes: one context per cluster, `workload` current."""
from __future__ import annotations

import os

import yaml

TOKEN = "kubesim-admin-token"


def build(urls: dict[str, str], current: str = "workload") -> dict:
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": url}} for name, url in urls.items()],
        "users": [{"name": "kubesim-admin", "user": {"token": TOKEN}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "kubesim-admin", "namespace": "default"}}
                     for name in urls],
        "current-context": current if current in urls else next(iter(urls)),
    }


def write(path: str, urls: dict[str, str], current: str = "workload") -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        yaml.safe_dump(build(urls, current), handle, sort_keys=False)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
