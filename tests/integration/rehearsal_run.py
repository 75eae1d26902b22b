"""Running playbooks/rehearse.yml from a test and judging what it left: the cluster's state that a rehearsal must
leave as it found it (the policy ConfigMap's text, the Descheduler's suspend state, the ResourcePatches, the
namespaces, every VM outside the rehearsal's namespace, unfinished migrations), read with the real kubectl so that
the same checks run on the simulator and on a staging cluster (`make test-cluster`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .ansible_run import ROOT, run_playbook, target_workdir

REHEARSE = ROOT / "playbooks" / "rehearse.yml"
NAMESPACE = "kubevirt-ops-rehearsal"
FINAL = ("Succeeded", "Failed")


def descheduler_names(target) -> tuple:
    variables = getattr(target, "extra_vars", None) or {}
    return variables.get("rehearse_descheduler_namespace", "descheduler"), variables.get("rehearse_descheduler_name", "descheduler")


def _items(target, *args: str) -> list:
    result = target.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(result.stdout)["items"] if result.returncode == 0 else []


def cluster_state(target) -> dict:
    """What a rehearsal must leave as it found it."""
    namespace, name = descheduler_names(target)
    configmap = target.kubectl_json("-n", namespace, "get", "configmap", name)
    cronjobs = _items(target, "-n", namespace, "cronjobs")
    deployments = _items(target, "-n", namespace, "deployments")
    workload = next((w for w in cronjobs + deployments if w["metadata"]["name"] == name), {})
    return {
        "policy": configmap.get("data"),
        "suspended": (workload.get("spec") or {}).get("suspend"),
        "replicas": (workload.get("spec") or {}).get("replicas"),
        "resource_patches": sorted(p["metadata"]["name"] for p in _items(target, "-n", namespace, "resourcepatches")),
        "namespaces": sorted(n["metadata"]["name"] for n in _items(target, "namespaces")),
        "vms": {f'{v["metadata"]["namespace"]}/{v["metadata"]["name"]}': (v["metadata"]["uid"], (v.get("status") or {}).get("nodeName"))
                for v in _items(target, "vmi", "-A") if v["metadata"]["namespace"] != NAMESPACE},
        "unfinished_migrations": sorted(f'{m["metadata"]["namespace"]}/{m["metadata"]["name"]}' for m in _items(target, "vmim", "-A")
                                        if (m.get("status") or {}).get("phase") not in FINAL),
    }


def assert_as_before(target, before: dict) -> None:
    """The cluster as `before` (cluster_state), the rehearsal's namespace gone and no migration pending."""
    after = cluster_state(target)
    assert NAMESPACE not in after["namespaces"], "the rehearsal's namespace is still there"
    for key in ("policy", "suspended", "replicas", "resource_patches", "namespaces", "vms"):
        assert after[key] == before[key], f"{key} changed: before {before[key]!r}, after {after[key]!r}"
    assert after["unfinished_migrations"] == [], f"migrations still pending: {after['unfinished_migrations']}"


@dataclass
class Rehearsal:
    """One run of rehearse.yml: its exit code, output and the report it wrote (None when it wrote none)."""
    returncode: int
    stdout: str
    report: Optional[dict]
    report_path: Optional[Path]

    @property
    def output(self) -> str:
        return self.stdout


def rehearse(target, name: str, variables: Optional[dict] = None, check: bool = False, expect_failure: Optional[bool] = False) -> Rehearsal:
    """Run rehearse.yml against `target` with its extra_vars, reports and backups under the run's own directory."""
    workdir = target_workdir(target) / "rehearsals" / name
    merged = {**(getattr(target, "extra_vars", None) or {}), "reports_dir": str(workdir / "reports"), "backup_dir": str(workdir / "backups"),
              "rehearse_report_show": False, **(variables or {})}
    run = run_playbook(target, REHEARSE, merged, check=check, expect_failure=expect_failure, name="rehearse-" + name)
    found = sorted(Path(merged["reports_dir"]).glob("*/rehearse-*.json"), key=lambda p: p.stat().st_mtime)
    report = json.loads(found[-1].read_text()) if found else None
    return Rehearsal(run.rc, run.stdout, report, found[-1] if found else None)
