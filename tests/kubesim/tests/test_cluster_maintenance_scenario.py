"""The cluster-maintenance scenarios: the VMs start where the file's header says, and `kubectl drain` with the node
maintenance page's flags sends the VMs of a drained node where kube-scheduler's scoring would: away from nodes with a
PreferNoSchedule taint (the collection's `kubevirt-ops.io/maintenance-pending`), else to the worker with most room;
the migration and PDB counters show what happened."""
import json

import pytest

from https_client import call, kubectl, started
from kubesim import scenario
from support.waiting import wait_for

DRAIN = ("drain", "--delete-emptydir-data", "--ignore-daemonsets=true", "--force", "--pod-selector=kubevirt.io=virt-launcher",
         "--timeout=60s")
PENDING = "kubevirt-ops.io/maintenance-pending"
START = {**{f"vm-{w}-{i}": f"worker-{w}" for w in (1, 2, 3) for i in (1, 2, 3)},
         "pool-0": "worker-1", "pool-1": "worker-2", "pool-2": "worker-3"}


def placement(sim) -> dict[str, str]:
    vmis = json.loads(kubectl(sim, "get", "vmi", "-n", "vms", "-o", "json"))["items"]
    return {v["metadata"]["name"]: v["status"].get("nodeName") for v in vmis if v.get("status", {}).get("phase") == "Running"}


def moved(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    return {name: node for name, node in after.items() if before.get(name) != node}


def test_the_tight_variant_adds_three_vms_on_worker_4_and_nothing_else():
    base, tight = scenario.load("cluster-maintenance"), scenario.load("cluster-maintenance-tight")
    names = [o["metadata"]["name"] for o in tight.clusters["workload"]["objects"]]
    assert names == [o["metadata"]["name"] for o in base.clusters["workload"]["objects"]] + ["vm-4-1", "vm-4-2", "vm-4-3"]
    affinity = tight.clusters["workload"]["objects"][-1]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"][0][
        "values"] == ["worker-4"]


@pytest.fixture
def sim(tmp_path):
    with started("cluster-maintenance", tmp_path) as simulator:
        yield simulator


def test_drained_vms_avoid_prefer_no_schedule_nodes_else_go_where_there_is_most_room(sim):
    wait_for(lambda: placement(sim) == START, interval=0.2, what="the VMs where the header says")
    assert call(sim, "DELETE", "/_kubesim/counters")[0] == 200

    # worker-2 and worker-3 still to be maintained: worker-1's VMs go to the spare worker-4
    kubectl(sim, "taint", "node", "worker-2", "worker-3", f"{PENDING}=x:PreferNoSchedule")
    before = placement(sim)
    kubectl(sim, *DRAIN, "worker-1")
    assert moved(before, placement(sim)) == {"vm-1-1": "worker-4", "vm-1-2": "worker-4", "vm-1-3": "worker-4",
                                             "pool-0": "worker-4"}

    # no taint: worker-2's VMs go to the worker with most room, worker-1 (empty again once uncordoned)
    kubectl(sim, "taint", "node", "worker-2", "worker-3", f"{PENDING}-")
    kubectl(sim, "uncordon", "worker-1")
    before = placement(sim)
    kubectl(sim, *DRAIN, "worker-2")
    assert set(moved(before, placement(sim)).values()) == {"worker-1"}

    # the taint on worker-2, now the emptiest: worker-3's VMs go to worker-1 and worker-4, which have less room
    kubectl(sim, "uncordon", "worker-2")
    kubectl(sim, "taint", "node", "worker-2", f"{PENDING}=x:PreferNoSchedule")
    before = placement(sim)
    kubectl(sim, *DRAIN, "worker-3")
    landed = moved(before, placement(sim))
    assert sorted(landed) == ["pool-2", "vm-3-1", "vm-3-2", "vm-3-3"] and "worker-2" not in landed.values()

    counters = call(sim, "GET", "/_kubesim/counters?cluster=workload")[1]["workload"]
    assert counters["migrations"]["started"] == 12
    assert counters["migrations"]["peak"] <= 5 and max(counters["migrations"]["peak_per_node"].values()) <= 2
    assert counters["pdbs"] == {"violations": [], "count": 0}
