"""LowNodeUtilization on requests: classification, early exits, ordering, stop rules, limits and the klog
lines of one descheduling cycle (descheduler v0.36)."""
import re

from kubesim import events
from kubesim.descheduler.run import run_once
from descheduler_cluster import lnu_policy, make_cluster, messages, node, pod

ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]
# the plugin's logger values (v0.36: klog.FromContext(ctx).WithValues), printed before each line's own pairs
PLUGIN = 'plugin="LowNodeUtilization" ExtensionPoint="Balance" '


def two_workers(pods_on_a: int = 6, **node_kw):
    cluster = make_cluster()
    node(cluster, "worker-a", **node_kw)
    node(cluster, "worker-b", **node_kw)
    for index in range(pods_on_a):
        pod(cluster, f"app-{index}", "worker-a")
    pod(cluster, "small", "worker-b")
    return cluster


def evicted(lines):
    return re.findall(r'"Evicted pod" pod="([^"]+)"', "\n".join(lines))


def some_of(names: list[str], prefix: str, count: int) -> bool:
    """`count` distinct Pods named `<prefix><n>`: which of equally ranked Pods go is not defined upstream."""
    return len(names) == count == len(set(names)) and all(re.fullmatch(re.escape(prefix) + r"\d+", n) for n in names)


def test_classification_and_the_lines_of_a_cycle():
    cluster = make_cluster()
    node(cluster, "worker-a", cpu="10", memory="10Gi", pods="50")
    node(cluster, "worker-b", cpu="10", memory="10Gi", pods="50")
    for index in range(7):
        pod(cluster, f"web-{index}", "worker-a", cpu="500m", memory="1Gi", labels={"app": "web"})
    pod(cluster, "bare", "worker-a", cpu="1", memory="512Mi", owner=None)
    pod(cluster, "db", "worker-b", cpu="2", memory="2Gi")
    text = lnu_policy("{cpu: 40, memory: 40, pods: 20}", "{cpu: 60, memory: 60, pods: 30}",
                      "{labelSelector: {matchLabels: {app: web}}}", top="maxNoOfPodsToEvictTotal: 5")
    code, lines = run_once(cluster, ARGS, text)
    assert code == 0
    assert all(re.match(r"^[IE]\d{4} \d\d:\d\d:\d\d\.\d{6}       1 [a-z]+\.go:\d+\] ", line) for line in lines)
    out = messages(lines)
    assert out[0] == "Resetting pod evictor counters"
    under = ('"Node has been classified" ' + PLUGIN + 'category="underutilized" node="worker-b" '
             'usage={"cpu":"2","memory":"2Gi","pods":"1"} usagePercentage={"cpu":20,"memory":20,"pods":2}')
    over = ('"Node has been classified" ' + PLUGIN + 'category="overutilized" node="worker-a" '
            'usage={"cpu":"4500m","memory":"7680Mi","pods":"8"} usagePercentage={"cpu":45,"memory":75,"pods":16}')
    assert under in out and over in out
    assert out.index(under) < out.index(over)
    assert '"Pods on node" node="worker-a" allPods=8 nonRemovablePods=1 removablePods=7' in out
    # memory 7.5Gi of 10Gi; target 60% = 6Gi: two of the seven equal 1Gi Pods bring it to 5.5Gi
    gone = evicted(lines)
    assert some_of(gone, "apps/web-", 2)
    assert out[-2] == '"Total number of evictions/requests" extension point="Balance" evictedPods=2 evictionRequests=0'
    assert out[-1] == '"Number of evictions/requests" totalEvicted=2 evictionRequests=0'
    pods = cluster.registry.by_key("pods")
    names = {f"apps/web-{index}" for index in range(7)}
    assert all(cluster.get(pods, "apps", name[5:])["metadata"].get("deletionTimestamp") for name in gone)
    assert not any(cluster.get(pods, "apps", name[5:])["metadata"].get("deletionTimestamp") for name in names - set(gone))
    recorded = events.for_object(cluster, "apps", "Pod", gone[0][5:])
    assert [(e["type"], e["reason"], e["message"]) for e in recorded] == [
        ("Normal", "LowNodeUtilization", "pod eviction from worker-a node by sigs.k8s.io/descheduler")]


def test_verbosity_filters_info_lines():
    cluster = two_workers()
    _code, quiet = run_once(cluster, ["--policy-config-file=/p.yaml", "--v=0"], lnu_policy())
    assert [m.split('"')[1] for m in messages(quiet)] == ["Node has been classified", "Node has been classified"]
    cluster = two_workers()
    _code, loud = run_once(cluster, ["--policy-config-file=/p.yaml", "--v=4"], lnu_policy())
    assert len(loud) > len(quiet) and any('"Pods on node"' in line for line in loud)


def test_no_underutilized_node():
    cluster = two_workers(pods_on_a=6)
    _code, lines = run_once(cluster, ARGS, lnu_policy("{cpu: 5, memory: 5, pods: 1}"))
    assert '"No node is underutilized, nothing to do here, you might tune your thresholds further" ' + PLUGIN.strip() \
        in messages(lines)
    assert evicted(lines) == []


def test_all_nodes_underutilized_and_under_target():
    cluster = two_workers(pods_on_a=1)
    _code, lines = run_once(cluster, ARGS, lnu_policy("{cpu: 50, memory: 50, pods: 50}", "{cpu: 60, memory: 60, pods: 60}"))
    assert '"All nodes are underutilized, nothing to do here" ' + PLUGIN.strip() in messages(lines)
    cluster = two_workers(pods_on_a=3)
    _code, lines = run_once(cluster, ARGS, lnu_policy())
    assert '"Node is appropriately utilized" ' + PLUGIN + 'node="worker-a" usage={"cpu":"3","memory":"3Gi","pods":"3"} ' \
        'usagePercentage={"cpu":30,"memory":30,"pods":3}' in messages(lines)
    assert '"All nodes are under target utilization, nothing to do here" ' + PLUGIN.strip() in messages(lines)


def test_needs_two_ready_nodes_matching_the_policy_node_selector():
    cluster = two_workers()
    text = lnu_policy(top='nodeSelector: "kubernetes.io/hostname in (worker-a)"')
    _code, lines = run_once(cluster, ARGS, text)
    assert '"Skipping descheduling cycle: requires >=2 nodes" found=1' in messages(lines)
    assert messages(lines)[-1] == '"Number of evictions/requests" totalEvicted=0 evictionRequests=0'


def test_a_cordoned_node_is_never_underutilized():
    cluster = make_cluster()
    node(cluster, "worker-a")
    node(cluster, "worker-b", unschedulable=True)
    for index in range(6):
        pod(cluster, f"app-{index}", "worker-a")
    _code, lines = run_once(cluster, ARGS, lnu_policy())
    out = messages(lines)
    assert '"Node is unschedulable, thus not considered as underutilized" ' + PLUGIN + 'node="worker-b"' in out
    assert '"No node is underutilized, nothing to do here, you might tune your thresholds further" ' + PLUGIN.strip() in out


def test_lowest_priority_first_then_best_effort_burstable_guaranteed():
    cluster = make_cluster()
    node(cluster, "worker-a")
    node(cluster, "worker-b")
    pod(cluster, "guaranteed", "worker-a", limits=True)
    pod(cluster, "burstable", "worker-a")
    pod(cluster, "besteffort", "worker-a", cpu="0", memory="0")
    pod(cluster, "important", "worker-a", priority=1000, cpu="4")
    pod(cluster, "filler", "worker-a", priority=500, cpu="3")
    text = lnu_policy("{cpu: 20, memory: 20, pods: 20}", "{cpu: 21, memory: 50, pods: 50}")
    _code, lines = run_once(cluster, ARGS, text)
    assert evicted(lines) == ["apps/besteffort", "apps/burstable", "apps/guaranteed", "apps/filler"]


def test_headroom_on_the_underutilized_nodes_stops_the_evictions():
    cluster = make_cluster()
    node(cluster, "worker-a", pods="100")
    node(cluster, "worker-b", pods="10")
    for index in range(9):
        pod(cluster, f"app-{index}", "worker-a")
    pod(cluster, "b-0", "worker-b")
    pod(cluster, "b-1", "worker-b")
    # worker-b (cpu 20%, pods 20%) may take Pods up to its targets: 5 - 2 Pods, 5 - 2 cores, 5Gi - 2Gi
    _code, lines = run_once(cluster, ARGS, lnu_policy("{cpu: 20, memory: 20, pods: 20}",
                                                      "{cpu: 50, memory: 50, pods: 50}"))
    assert '"Total capacity to be moved" CPU=3000 Mem=3221225472 Pods=3' in messages(lines)
    # worker-a would need four evictions to fall to 50% cpu; the headroom allows three
    assert some_of(evicted(lines), "apps/app-", 3)


def test_policy_limits_count_and_log_like_upstream():
    cluster = two_workers(pods_on_a=8)
    _code, lines = run_once(cluster, ARGS, lnu_policy(top="maxNoOfPodsToEvictPerNode: 1"))
    assert some_of(evicted(lines), "apps/app-", 1)
    assert '"Error evicting pod" err="maximum number of evicted pods per node reached" limit=1 node="worker-a"' \
        in messages(lines)
    cluster = two_workers(pods_on_a=8)
    _code, lines = run_once(cluster, ARGS, lnu_policy(top="maxNoOfPodsToEvictTotal: 2"))
    assert some_of(evicted(lines), "apps/app-", 2)
    assert '"Error evicting pod" err="maximum number of evicted pods per a descheduling cycle reached" limit=2' \
        in messages(lines)
    cluster = two_workers(pods_on_a=8)
    _code, lines = run_once(cluster, ARGS, lnu_policy(top="maxNoOfPodsToEvictPerNamespace: 1"))
    first = evicted(lines)
    assert some_of(first, "apps/app-", 1)
    out = messages(lines)
    refused = [m for m in out if m.startswith('"Error evicting pod" err="maximum number of evicted pods per namespace '
                                              'reached" limit=1 namespace="apps" pod="apps/app-')]
    assert refused and first[0] not in refused[0]
    assert '"eviction failed" err="maximum number of evicted pods per namespace reached"' in out


def test_eviction_limits_node_and_excluded_namespaces():
    cluster = two_workers(pods_on_a=8)
    _code, lines = run_once(cluster, ARGS, lnu_policy(lnu_extra="evictionLimits: {node: 2}"))
    assert some_of(evicted(lines), "apps/app-", 2)
    assert '"Max number of evictions per node per plugin reached" limit=2' in messages(lines)
    cluster = two_workers(pods_on_a=8)
    _code, lines = run_once(cluster, ARGS, lnu_policy(lnu_extra="evictableNamespaces: {exclude: [apps]}"))
    assert '"Pods on node" node="worker-a" allPods=8 nonRemovablePods=0 removablePods=8' in messages(lines)
    assert evicted(lines) == []


def test_a_pod_that_tolerates_no_underutilized_node_is_skipped():
    cluster = make_cluster()
    node(cluster, "worker-a")
    node(cluster, "worker-b", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    for index in range(6):
        pod(cluster, f"app-{index}", "worker-a")
    pod(cluster, "tolerant", "worker-a", priority=5,
        tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}])
    _code, lines = run_once(cluster, ARGS, lnu_policy())
    assert '"Skipping eviction for pod, doesn\'t tolerate node taint" pod="apps/app-0"' in messages(lines)
    assert evicted(lines) == ["apps/tolerant"]


def test_dry_run_evicts_nothing():
    cluster = two_workers(pods_on_a=8)
    _code, lines = run_once(cluster, ARGS + ["--dry-run"], lnu_policy())
    dry = re.findall(r'"Evicted pod in dry run mode" pod="([^"]+)"', "\n".join(lines))
    assert some_of(dry, "apps/app-", 3)
    pods = cluster.registry.by_key("pods")
    assert not any(cluster.get(pods, "apps", name[5:])["metadata"].get("deletionTimestamp") for name in dry)
    assert messages(lines)[-1] == '"Number of evictions/requests" totalEvicted=3 evictionRequests=0'


def test_deviation_thresholds_around_the_average():
    cluster = make_cluster()
    for name in ("n1", "n2", "n3"):
        node(cluster, name)
    for index in range(6):
        pod(cluster, f"a-{index}", "n1")
    pod(cluster, "b-0", "n2")
    pod(cluster, "b-1", "n2")
    pod(cluster, "c-0", "n3")
    # average cpu 30%: underutilized <= 20%, overutilized > 40%
    text = lnu_policy("{cpu: 10}", "{cpu: 10}", lnu_extra="useDeviationThresholds: true")
    _code, lines = run_once(cluster, ARGS, text)
    out = messages(lines)
    assert '"Node has been classified" ' + PLUGIN + 'category="underutilized" node="n2" ' \
           'usage={"cpu":"2","memory":"2Gi","pods":"2"} usagePercentage={"cpu":20}' in out
    assert '"Node has been classified" ' + PLUGIN + 'category="overutilized" node="n1" ' \
           'usage={"cpu":"6","memory":"6Gi","pods":"6"} usagePercentage={"cpu":60}' in out
    assert some_of(evicted(lines), "apps/a-", 2)
