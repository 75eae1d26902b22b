"""Nothing lost when the controller dies during a rolling maintenance (issue 19): cluster_maintenance.yml SIGKILLed
with everything it started, mid-drain and during the hook (tests/integration/kill_points.py), then the same command
again, which continues the dead run: every node maintained, no taint or cordon of ours left, no migration pending,
no VM restarted (same UID) or moved twice, and the lease free. Every kill point is one entry of KILL_POINTS."""
from __future__ import annotations

from collections import Counter

import pytest

from support.simulator import ADMIN_TOKEN

from .ansible_run import run_playbook
from .conftest import ROOT
from .kill_points import killed_run
from .run_record import lease, record

pytestmark = pytest.mark.simulator

PLAYBOOK = ROOT / "playbooks" / "cluster_maintenance.yml"
HOOK = ROOT / "tests" / "integration" / "playbooks" / "tasks" / "reboot_node_hook.yml"
WORKERS = ["worker-1", "worker-2", "worker-3", "worker-4"]
TAINT = "kubevirt-ops.io/maintenance-pending"

# (kill point, the task at whose start the controller dies, its occurrence: the second batch or node, seconds after)
KILL_POINTS = [
    ("mid-drain", "Drain (cordon, evict within the migration limits, wait)", 2, 4),
    ("during the hook", "Reboot the node (the simulator's stand-in)", 2, 0),
]


@pytest.mark.parametrize("point,task,occurrence,after", KILL_POINTS, ids=[point[0] for point in KILL_POINTS])
def test_a_cluster_maintenance_killed_is_finished_by_its_rerun(fresh_kubesim, tmp_path, point, task, occurrence, after):
    sim = fresh_kubesim("cluster-maintenance", settle=True)
    uids = vmi_uids(sim)
    variables = {"cluster_maintenance_nodes": WORKERS, "cluster_maintenance_hook": str(HOOK), "hook_log": str(tmp_path / "hook.log"),
                 "kubesim_url": sim.url, "kubesim_token": ADMIN_TOKEN, "hook_kubelet_version": "v1.35.1",
                 "cluster_maintenance_report_dir": str(tmp_path / "reports")}
    killed_run(sim, PLAYBOOK, variables, tmp_path, task, after, occurrence)
    assert record(sim)["playbook"] == "cluster_maintenance" and record(sim)["status"] == "in_progress"

    rerun = run_playbook(sim, PLAYBOOK, variables, name="rerun")
    assert "Continuing run " in rerun.stdout, rerun.stdout[-5000:]
    nodes = {n["metadata"]["name"]: n for n in sim.kubectl_json("get", "nodes")["items"]}
    assert not [name for name, node in nodes.items() if any(t["key"] == TAINT for t in node["spec"].get("taints") or [])]
    assert not [name for name in WORKERS if nodes[name]["spec"].get("unschedulable")]
    assert all(nodes[name]["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.1" for name in WORKERS)
    vmims = sim.kubectl_json("get", "vmim", "-A")["items"]
    assert not [m for m in vmims if m["status"].get("phase") not in ("Succeeded", "Failed")]
    moved = Counter(m["spec"]["vmiName"] for m in vmims if m["status"].get("phase") == "Succeeded")
    assert set(moved.values()) == {1}, (point, moved)   # the rerun moves no VM a second time
    assert vmi_uids(sim) == uids
    assert record(sim)["status"] == "complete" and "holderIdentity" not in lease(sim)["spec"]


def vmi_uids(sim) -> dict:
    return {"{0}/{1}".format(v["metadata"]["namespace"], v["metadata"]["name"]): v["metadata"]["uid"]
            for v in sim.kubectl_json("get", "vmi", "-A")["items"]}
