"""The admin endpoint's node reboot, the stand-in for a maintenance hook: NotReady with the kubelet's reason and
message at once, Ready again after the simulated seconds (scaled by the scenario's timeScale) with the new kubelet
version, as kubectl shows it."""
import json
import time

import pytest

from https_client import call, kubectl, started
from support.waiting import wait_for


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with started("api-basics", tmp_path_factory.mktemp("reboot")) as simulator:   # timeScale 10
        yield simulator


def node_row(sim, name):
    """NAME STATUS ROLES AGE VERSION of `kubectl get node`."""
    return kubectl(sim, "get", "node", name, "--no-headers").split()


def ready_condition(sim, name):
    node = json.loads(kubectl(sim, "get", "node", name, "-o", "json"))
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


def test_a_rebooted_node_is_not_ready_at_once_and_ready_later_with_the_new_kubelet_version(sim):
    row = node_row(sim, "worker-a")
    assert (row[1], row[4]) == ("Ready", "v1.35.0")
    began = time.monotonic()
    code, answer = call(sim, "POST", "/_kubesim/nodes/worker-a/reboot", {"kubeletVersion": "v1.35.1", "seconds": 20})
    assert code == 202
    assert answer["node"] == "worker-a" and answer["cluster"] == "workload" and answer["kubeletVersion"] == "v1.35.1"
    assert answer["readyAt"].endswith("Z")
    row = node_row(sim, "worker-a")
    assert row[1] == "NotReady" and row[4] == "v1.35.0"
    condition = ready_condition(sim, "worker-a")
    assert (condition["status"], condition["reason"]) == ("False", "KubeletNotReady")
    assert condition["message"].startswith("[container runtime status check may not have completed yet")
    wait_for(lambda: node_row(sim, "worker-a")[1] == "Ready", interval=0.1, what="worker-a Ready again")
    assert time.monotonic() - began >= 20 / 10 - 0.1          # 20 simulated seconds at timeScale 10
    assert node_row(sim, "worker-a")[4] == "v1.35.1"
    condition = ready_condition(sim, "worker-a")
    assert (condition["status"], condition["reason"], condition["message"]) == \
        ("True", "KubeletReady", "kubelet is posting ready status")
    other = node_row(sim, "worker-b")
    assert (other[1], other[4]) == ("Ready", "v1.35.0")        # the other node is left alone


def test_without_a_version_the_node_comes_back_with_the_one_it_had(sim):
    before = node_row(sim, "worker-b")[4]
    code, answer = call(sim, "POST", "/_kubesim/nodes/worker-b/reboot", {"seconds": 1})
    assert code == 202 and "kubeletVersion" not in answer
    wait_for(lambda: node_row(sim, "worker-b")[1] == "Ready", interval=0.1, what="worker-b Ready again")
    assert node_row(sim, "worker-b")[4] == before


def test_an_unknown_node_is_not_found_and_bad_seconds_are_refused(sim):
    code, answer = call(sim, "POST", "/_kubesim/nodes/worker-z/reboot", {})
    assert code == 404 and answer["message"] == 'nodes "worker-z" not found'
    code, answer = call(sim, "POST", "/_kubesim/nodes/worker-a/reboot", {"seconds": "soon"})
    assert code == 400 and "seconds" in answer["message"]
    assert call(sim, "POST", "/_kubesim/nodes/worker-a/reboot", {"cluster": "nowhere"})[0] == 404
