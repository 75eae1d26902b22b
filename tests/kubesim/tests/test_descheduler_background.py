"""EvictionsInBackground (descheduler v0.36): a 429 `Eviction triggered evacuation` for a Pod annotated
`request-evict-only` is a request in flight; the next run sees `eviction-in-progress`; without the gate the
same Pod is nominated every run. The interceptor here is a tiny fake admission hook."""
import re
import time

from kubesim.descheduler.klog import Logger
from kubesim.descheduler.run import Options, Descheduler, run_once
from kubesim.descheduler import policy as pol
from kubesim.errors import ApiError
from descheduler_cluster import make_cluster, messages, node, pod
from support.policy import PAGE_POLICY

REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
GATE = ["--policy-config-file=/policy-dir/policy.yaml", "--feature-gates=EvictionsInBackground=true", "--v=3"]
NO_GATE = ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]
PLUGIN = 'plugin="LowNodeUtilization" ExtensionPoint="Balance" '
LAUNCHERS = {"launcher-0", "launcher-1"}   # equally ranked: upstream defines no order between them


def rebalance_cluster():
    cluster = make_cluster()
    node(cluster, "control-plane", labels={"node-role.kubernetes.io/control-plane": ""},
         taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    node(cluster, "worker-a", cpu="10", memory="10Gi", pods="20")
    node(cluster, "worker-b", cpu="10", memory="10Gi", pods="20")
    for index in range(2):
        pod(cluster, f"launcher-{index}", "worker-a", cpu="1", memory="1536Mi", owner="VirtualMachineInstance",
            labels={"app": "desched-test", "kubevirt.io": "virt-launcher"},
            annotations={REQUEST_EVICT_ONLY: "", "kubevirt.io/domain": f"vm-{index}"},
            volumes=[{"name": "private", "emptyDir": {}}, {"name": "sockets", "emptyDir": {}}])
    pod(cluster, "base-a", "worker-a", cpu="4600m", memory="4300Mi")
    pod(cluster, "base-b", "worker-b", cpu="6600m", memory="5836Mi")
    return cluster


def fake_interceptor(cluster, mark: bool = True):
    """Answers like KubeVirt's webhook for the launchers and, when asked, marks the Pod in progress."""
    calls = []

    def hook(request):
        if request.subresource != "eviction" or "kubevirt.io/domain" not in (request.old["metadata"].get("annotations")
                                                                             or {}):
            return
        calls.append((request.name, request.context.user, (request.obj.get("metadata") or {}).get("annotations")))
        vmi = request.old["metadata"]["annotations"]["kubevirt.io/domain"]
        if mark:
            cluster.patch(cluster.registry.by_key("pods"), request.namespace, request.name, "merge",
                          {"metadata": {"annotations": {IN_PROGRESS: "true"}}})
        raise ApiError(429, "TooManyRequests", 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" '
                       f'denied the request: Eviction triggered evacuation of VMI "{request.namespace}/{vmi}"')
    cluster.admission_hooks.append(hook)
    return calls


def grep(lines):
    """What the reference page's `grep -E 'classified|removablePods|Eviction in background|Number of evictions'`
    keeps, without the klog header."""
    return [m for m in messages(lines) if re.search(r"classified|removablePods|Eviction in background|Number of evictions", m)]


def assumed(lines) -> list[str]:
    """The Pods whose eviction was assumed in the background, by name."""
    return re.findall(r'"Eviction in background assumed" pod="apps/([^"]+)"', "\n".join(lines))


def test_a_background_request_then_already_requested_in_the_next_run():
    cluster = rebalance_cluster()
    calls = fake_interceptor(cluster)
    code, first = run_once(cluster, GATE, PAGE_POLICY)
    assert code == 0
    [picked] = assumed(first)
    assert picked in LAUNCHERS
    assert grep(first) == [
        '"Node has been classified" ' + PLUGIN + 'category="underutilized" node="worker-b" '
        'usage={"cpu":"6600m","memory":"5836Mi","pods":"1"} usagePercentage={"cpu":66,"memory":57,"pods":5}',
        '"Node has been classified" ' + PLUGIN + 'category="overutilized" node="worker-a" '
        'usage={"cpu":"6600m","memory":"7372Mi","pods":"3"} usagePercentage={"cpu":66,"memory":72,"pods":15}',
        '"Pods on node" node="worker-a" allPods=3 nonRemovablePods=1 removablePods=2',
        f'"Eviction in background assumed" pod="apps/{picked}"',
        '"Number of evictions/requests" totalEvicted=0 evictionRequests=1',
    ]
    assert calls == [(picked, "system:serviceaccount:descheduler:descheduler",
                      {"requested-by": "sigs.k8s.io/descheduler"})]
    # the next CronJob run is a new process: it learns about the request from the annotation
    code, second = run_once(cluster, GATE, PAGE_POLICY)
    out = messages(second)
    assert f'"Eviction in background detected. Adding pod to the cache." pod="apps/{picked}"' in out
    if f'"Eviction in background already requested (ignoring)" pod="apps/{picked}"' in out:
        # upstream counts the skipped request as done: its requests leave worker-b's cpu headroom (900m) used up
        assert '"Updated node usage" node="worker-a" CPU=5600 Mem=6119489536 Pods=2' in out
    else:   # the other launcher came first: the request in flight fills the total limit
        assert '"Error evicting pod" err="maximum number of evicted pods per a descheduling cycle reached" limit=1' in out
    assert out[-1] == '"Number of evictions/requests" totalEvicted=0 evictionRequests=1'
    assert len(calls) == 1


def test_without_the_gate_the_same_launcher_is_nominated_every_run():
    cluster = rebalance_cluster()
    calls = fake_interceptor(cluster)
    for run in range(2):
        code, lines = run_once(cluster, NO_GATE, PAGE_POLICY)
        assert code == 0
        out = messages(lines)
        for index in range(2):   # both launchers are tried every run, in an order upstream does not define
            assert (f'"Error evicting pod" err="error when evicting pod (ignoring) \\"launcher-{index}\\": admission '
                    'webhook \\"virt-launcher-eviction-interceptor.kubevirt.io\\" denied the request: Eviction triggered '
                    f'evacuation of VMI \\"apps/vm-{index}\\"" pod="apps/launcher-{index}" reason=""') in out
        assert not any("Eviction in background" in m for m in out)
        assert out[-1] == '"Number of evictions/requests" totalEvicted=0 evictionRequests=0'
        assert {call[0] for call in calls[2 * run:]} == LAUNCHERS
    assert len(calls) == 4


def test_assumed_requests_live_in_the_process_and_expire_after_600_seconds():
    cluster = rebalance_cluster()   # timeScale 1000: 600 simulated seconds are 0.6 s
    calls = fake_interceptor(cluster, mark=False)
    options = Options(policy_file="/p.yaml", feature_gates={"EvictionsInBackground": True}, verbosity=3)
    process = Descheduler(cluster, options, pol.load(PAGE_POLICY), Logger(3))
    process.run_cycle()
    process.run_cycle()   # same process (a Deployment): remembered even without the annotation
    lines = process.log.take()
    [picked] = assumed(lines)   # the second cycle asks for nothing more
    assert picked in LAUNCHERS
    # it meets the remembered Pod first (skipped), or the other one first, refused by the in-flight request
    assert f'"Eviction in background already requested (ignoring)" pod="apps/{picked}"' in messages(lines) or \
        '"Error evicting pod" err="maximum number of evicted pods per a descheduling cycle reached" limit=1' \
        in messages(lines)
    # a new process (the next CronJob run) has no memory of an unannotated request
    _code, fresh = run_once(cluster, GATE, PAGE_POLICY)
    assert len(assumed(fresh)) == 1 and set(assumed(fresh)) <= LAUNCHERS
    time.sleep(0.7)
    process.run_cycle()
    assert len(assumed(process.log.take())) == 1   # expired: the process asks again
    assert len(calls) == 3


def test_the_cache_forgets_a_pod_whose_eviction_ended():
    cluster = rebalance_cluster()
    fake_interceptor(cluster)
    options = Options(policy_file="/p.yaml", feature_gates={"EvictionsInBackground": True}, verbosity=3)
    process = Descheduler(cluster, options, pol.load(PAGE_POLICY), Logger(3))
    process.run_cycle()
    [picked] = assumed(process.log.take())
    process.run_cycle()
    pods = cluster.registry.by_key("pods")
    cluster.patch(pods, "apps", picked, "merge", {"metadata": {"annotations": {IN_PROGRESS: None}}})
    process.run_cycle()
    lines = process.log.take()
    out = messages(lines)
    assert '"Eviction in background canceled (annotation removed). Removing pod from the cache." ' \
           f'annotation="{IN_PROGRESS}" pod="apps/{picked}"' in out
    [again] = assumed(lines)   # one request again, for either launcher: they rank equally
    assert again in LAUNCHERS
    for name in LAUNCHERS:   # every migration ended
        cluster.delete(pods, "apps", name, {"gracePeriodSeconds": 0})
    process.run_cycle()
    out = messages(process.log.take())
    removed = [m for m in out if m.startswith('"Pod with eviction in background deleted/evicted.')]
    assert removed == [f'"Pod with eviction in background deleted/evicted. Removing pod from the cache." pod="apps/{again}"']
    assert out[-1] == '"Number of evictions/requests" totalEvicted=0 evictionRequests=0'
    assert process.cache.total() == 0
