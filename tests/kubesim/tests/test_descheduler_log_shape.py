"""The descheduler's log lines as v0.36 writes them (the plugin logger's values, `usage` before
`usagePercentage`, the source lines of the v0.36 files), and the order among equally ranked Pods: not defined
upstream, here a random order that the process's seed repeats."""
import re
from datetime import datetime

from kubesim.descheduler.klog import Logger
from kubesim.descheduler.run import run_once
from descheduler_cluster import lnu_policy, make_cluster, node, pod

ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]
HEADER = r"[IE]\d{4} \d\d:\d\d:\d\d\.\d{6}       1 "


def cluster_with_equal_pods():
    cluster = make_cluster()
    node(cluster, "worker-a", cpu="10", memory="10Gi", pods="50")
    node(cluster, "worker-b", cpu="10", memory="10Gi", pods="50")
    for index in range(6):
        pod(cluster, f"app-{index}", "worker-a", cpu="1", memory="1Gi")
    pod(cluster, "db", "worker-b", cpu="2", memory="2Gi")
    return cluster


def bodies(lines):
    """`file:line] message`: the header without its time."""
    return [re.sub("^" + HEADER, "", line) for line in lines]


def evicted(lines):
    return re.findall(r'"Evicted pod" pod="apps/([^"]+)"', "\n".join(lines))


def test_the_lines_of_a_cycle_as_v036_prints_them():
    cluster = cluster_with_equal_pods()   # one eviction brings worker-a to its 50% target
    text = lnu_policy("{cpu: 30, memory: 30, pods: 10}", "{cpu: 50, memory: 50, pods: 50}")
    code, lines = run_once(cluster, ARGS, text, seed=7)
    assert code == 0
    assert all(re.match(HEADER + r"[a-z]+\.go:\d+\] ", line) for line in lines)
    [name] = evicted(lines)
    plugin = 'plugin="LowNodeUtilization" ExtensionPoint="Balance"'
    assert bodies(lines) == [
        "descheduler.go:427] Resetting pod evictor counters",
        f'lownodeutilization.go:215] "Node has been classified" {plugin} category="underutilized" node="worker-b" '
        'usage={"cpu":"2","memory":"2Gi","pods":"1"} usagePercentage={"cpu":20,"memory":20,"pods":2}',
        f'lownodeutilization.go:215] "Node has been classified" {plugin} category="overutilized" node="worker-a" '
        'usage={"cpu":"6","memory":"6Gi","pods":"6"} usagePercentage={"cpu":60,"memory":60,"pods":12}',
        f'lownodeutilization.go:253] "Criteria for a node under utilization" {plugin} cpu="30.00%" memory="30.00%" '
        'pods="10.00%"',
        f'lownodeutilization.go:254] "Number of underutilized nodes" {plugin} totalNumber=1',
        f'lownodeutilization.go:255] "Criteria for a node above target utilization" {plugin} cpu="50.00%" '
        'memory="50.00%" pods="50.00%"',
        f'lownodeutilization.go:256] "Number of overutilized nodes" {plugin} totalNumber=1',
        'nodeutilization.go:185] "Total capacity to be moved" CPU=3000 Mem=3221225472 Pods=24',
        'nodeutilization.go:193] "Evicting pods from node" node="worker-a" usage={"cpu":"6","memory":"6Gi","pods":"6"}',
        'nodeutilization.go:200] "Pods on node" node="worker-a" allPods=6 nonRemovablePods=0 removablePods=6',
        'nodeutilization.go:216] "Evicting pods based on priority, if they have same priority, they\'ll be evicted '
        'based on QoS tiers"',
        f'evictions.go:558] "Evicted pod" pod="apps/{name}" reason="" strategy="LowNodeUtilization" node="worker-a" '
        'profile="test"',
        f'nodeutilization.go:339] "Evicted pods" pod="apps/{name}"',
        'nodeutilization.go:348] "Updated node usage" node="worker-a" CPU=5000 Mem=5368709120 Pods=5',
        'profile.go:376] "Total number of evictions/requests" extension point="Balance" evictedPods=1 evictionRequests=0',
        'descheduler.go:442] "Number of evictions/requests" totalEvicted=1 evictionRequests=0',
    ]


def picks(seed, runs: int = 1) -> list[list[str]]:
    """The Pods evicted by `runs` one-cycle processes, each on a fresh cluster, seeded alike."""
    text = lnu_policy("{cpu: 30, memory: 30, pods: 10}", "{cpu: 50, memory: 50, pods: 50}")
    return [evicted(run_once(cluster_with_equal_pods(), ARGS, text, seed=seed)[1]) for _run in range(runs)]


def test_the_same_seed_repeats_the_order_among_equals():
    for seed in (1, 2, "scenario-a"):
        first, second = picks(seed, runs=2)
        assert first == second and len(first) == 1


def test_the_order_among_equals_varies_with_the_seed():
    chosen = {picks(seed)[0][0] for seed in range(40)}
    # six equal Pods: any of them may go, as upstream defines no order among them
    assert len(chosen) > 2 and chosen <= {f"app-{index}" for index in range(6)}


def test_keys_still_order_before_the_tie_break():
    text = lnu_policy("{cpu: 30, memory: 30, pods: 10}", "{cpu: 50, memory: 50, pods: 50}")
    for seed in range(5):   # the lowest priority goes first whatever the seed
        cluster = cluster_with_equal_pods()
        pod(cluster, "low", "worker-a", cpu="1", memory="1Gi", priority=-10)
        assert evicted(run_once(cluster, ARGS, text, seed=seed)[1])[0] == "low"


def test_a_bound_logger_prints_its_values_first():
    log = Logger(1, now=lambda: datetime(2026, 12, 1, 12, 0, 0, 123456))
    plugin = log.with_values("plugin", "LowNodeUtilization").with_values("ExtensionPoint", "Balance")
    plugin.info(0, "lownodeutilization.go:215", "Node has been classified", "node", "worker-a",
                "usage", {"pods": "12", "cpu": "1100m", "memory": "8Gi"}, "usagePercentage", {"cpu": 6.875})
    plugin.info(2, "x.go:1", "hidden at --v=1")
    assert log.take() == ['I1201 12:00:00.123456       1 lownodeutilization.go:215] "Node has been classified" '
                          'plugin="LowNodeUtilization" ExtensionPoint="Balance" node="worker-a" '
                          'usage={"cpu":"1100m","memory":"8Gi","pods":"12"} usagePercentage={"cpu":6.875}']
