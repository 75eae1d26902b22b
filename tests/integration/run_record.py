"""For the tests of issue 19: a rebalance's variables with its reports and backups under the test's directory; what
they read from a cluster: the run lease and its record, and what a rebalance changes and a rollback must restore."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from .conftest import ROOT

REBALANCE = {**yaml.safe_load((ROOT / "inventories" / "simulator" / "group_vars" / "all.yml").read_text()), "rebalance_trigger": "create"}

LEASE = ("-n", "kube-system", "lease", "kubevirt-ops-run")


def rebalance_variables(tmp_path: Path, **more) -> dict:
    """The simulator inventory's rebalance variables, reports and backups under `tmp_path` (every run of a test shares
    them: rollback.yml finds the killed run's backup there), and `more`."""
    return {**REBALANCE, "reports_dir": str(tmp_path / "reports"), "backup_dir": str(tmp_path / "backups"), **more}


def lease(sim) -> dict:
    """The collection's run Lease, or {} when none was ever taken."""
    found = sim.kubectl("get", *LEASE, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else {}


def record(sim) -> dict:
    """The run record on the Lease (kubevirt-ops.io/run), or {}."""
    return json.loads(((lease(sim).get("metadata") or {}).get("annotations") or {}).get("kubevirt-ops.io/run") or "{}")


def rebalance_state(sim) -> dict:
    """What a rebalance changes and a rollback must restore: the policy text, the CronJob's suspend, ResourcePatches,
    migrations not final, and each VM's UID."""
    configmap = sim.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")
    cronjob = sim.kubectl_json("-n", "descheduler", "get", "cronjob", "descheduler")
    vmims = sim.kubectl_json("get", "vmim", "-A")["items"]
    return {"policy": configmap["data"]["policy.yaml"], "suspend": bool(cronjob["spec"].get("suspend")),
            "resourcepatches": [p["metadata"]["name"] for p in sim.kubectl_json("-n", "descheduler", "get", "resourcepatch")["items"]],
            "pending": [m["metadata"]["name"] for m in vmims if m["status"].get("phase") not in ("Succeeded", "Failed")],
            "uids": {v["metadata"]["name"]: v["metadata"]["uid"] for v in sim.kubectl_json("-n", "desched-test", "get", "vmi")["items"]}}
