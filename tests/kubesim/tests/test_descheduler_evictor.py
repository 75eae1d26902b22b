"""The DefaultEvictor filters (descheduler v0.36): protections and their defaults, selectors, the evict
annotation, mirror/static/terminating Pods, nodeFit and namespaceLabelSelector."""
import pytest

from kubesim.descheduler.evictor import DefaultEvictor
from kubesim.descheduler.klog import Logger
from descheduler_cluster import add, make_cluster, messages, node, pod

EMPTY_DIR = [{"name": "scratch", "emptyDir": {}}]
PVC = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]


@pytest.fixture
def cluster():
    c = make_cluster()
    node(c, "worker-a")
    node(c, "worker-b")
    return c


def evictor(cluster, args=None, log=None):
    return DefaultEvictor(cluster, args or {}, log or Logger(4))


def test_default_protections(cluster):
    plain = pod(cluster, "plain", "worker-a")
    local = pod(cluster, "local", "worker-a", volumes=EMPTY_DIR)
    host = pod(cluster, "host", "worker-a", volumes=[{"name": "h", "hostPath": {"path": "/x"}}])
    daemon = pod(cluster, "daemon", "worker-a", owner="DaemonSet")
    bare = pod(cluster, "bare", "worker-a", owner=None)
    failed_bare = pod(cluster, "failed-bare", "worker-a", owner=None, phase="Failed")
    critical = pod(cluster, "critical", "worker-a", priorityClassName="system-node-critical")
    with_pvc = pod(cluster, "with-pvc", "worker-a", volumes=PVC)
    log = Logger(4)
    default = evictor(cluster, log=log)
    assert [default.filter(p) for p in (plain, local, host, daemon, bare, failed_bare, critical, with_pvc)] == \
        [True, False, False, False, False, False, False, True]
    assert '"Pod fails the following checks" pod="apps/local" checks="pod has local storage and is protected ' \
           'against eviction"' in messages(log.lines)
    assert '"Pod fails the following checks" pod="apps/critical" checks="[pod has system critical priority and is ' \
           'protected against eviction, pod has higher priority than specified priority class threshold]"' \
        in messages(log.lines)
    relaxed = evictor(cluster, {"podProtections": {"defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods",
                                                                       "FailedBarePods", "SystemCriticalPods"]}})
    assert [relaxed.filter(p) for p in (local, host, daemon, bare, failed_bare, critical)] == \
        [True, True, True, False, True, True]
    legacy = evictor(cluster, {"evictLocalStoragePods": True, "ignorePvcPods": True})
    assert [legacy.filter(p) for p in (local, with_pvc)] == [True, False]


def test_extra_protections(cluster):
    with_pvc = pod(cluster, "with-pvc", "worker-a", volumes=PVC)
    claimed = pod(cluster, "claimed", "worker-a", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu"}])
    add(cluster, "persistentvolumeclaims", "apps", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                    "metadata": {"name": "data"},
                                                    "spec": {"storageClassName": "fast"}})
    guarded = pod(cluster, "guarded", "worker-a", labels={"app": "db"})
    add(cluster, "poddisruptionbudgets.policy", "apps", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    unguarded = pod(cluster, "unguarded", "worker-a")
    extra = evictor(cluster, {"podProtections": {"extraEnabled": ["PodsWithPVC", "PodsWithoutPDB",
                                                                  "PodsWithResourceClaims"]}})
    assert [extra.filter(p) for p in (with_pvc, claimed, guarded, unguarded)] == [False, False, True, False]
    by_class = {"podProtections": {"extraEnabled": ["PodsWithPVC"],
                                   "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "slow"}]}}}}
    assert evictor(cluster, by_class).filter(with_pvc)
    by_class["podProtections"]["config"]["PodsWithPVC"]["protectedStorageClasses"] = [{"name": "fast"}]
    assert not evictor(cluster, by_class).filter(with_pvc)


def test_evict_annotation_bypasses_every_check(cluster):
    forced = pod(cluster, "forced", "worker-a", owner=None, volumes=EMPTY_DIR,
                 annotations={"descheduler.alpha.kubernetes.io/evict": ""})
    assert evictor(cluster, {"labelSelector": {"matchLabels": {"app": "x"}}}).filter(forced)


def test_mirror_static_and_terminating_pods(cluster):
    mirror = pod(cluster, "mirror", "worker-a", annotations={"kubernetes.io/config.mirror": "abc"})
    static = pod(cluster, "static", "worker-a", annotations={"kubernetes.io/config.source": "file"})
    from_api = pod(cluster, "from-api", "worker-a", annotations={"kubernetes.io/config.source": "api"})
    leaving = pod(cluster, "leaving", "worker-a")
    cluster.delete(cluster.registry.by_key("pods"), "apps", "leaving")
    leaving = cluster.get(cluster.registry.by_key("pods"), "apps", "leaving")
    checker = evictor(cluster)
    assert [checker.filter(p) for p in (mirror, static, from_api, leaving)] == [False, False, True, False]


def test_selectors_priority_threshold_min_replicas_and_min_age(cluster):
    web = pod(cluster, "web", "worker-a", labels={"app": "web"}, priority=100)
    other = pod(cluster, "other", "worker-a", labels={"app": "other"}, priority=10)
    assert [evictor(cluster, {"labelSelector": {"matchLabels": {"app": "web"}}}).filter(p) for p in (web, other)] == \
        [True, False]
    expressions = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}}
    assert [evictor(cluster, expressions).filter(p) for p in (web, other)] == [False, True]
    assert [evictor(cluster, {"priorityThreshold": {"value": 50}}).filter(p) for p in (web, other)] == [False, True]
    add(cluster, "priorityclasses.scheduling.k8s.io", None, {"apiVersion": "scheduling.k8s.io/v1",
                                                             "kind": "PriorityClass", "metadata": {"name": "mid"},
                                                             "value": 100})
    assert [evictor(cluster, {"priorityThreshold": {"name": "mid"}}).filter(p) for p in (web, other)] == [False, True]
    log = Logger(4)
    assert not evictor(cluster, {"minReplicas": 2}, log).filter(web)
    assert '"Pod fails the following checks" pod="apps/web" checks="owner has 1 replicas which is less than ' \
           'minReplicas of 2"' in messages(log.lines)
    young = pod(cluster, "young", "worker-a")
    young_obj = cluster.get(cluster.registry.by_key("pods"), "apps", "young")
    young_obj["status"]["startTime"] = young_obj["metadata"]["creationTimestamp"]
    aged = evictor(cluster, {"minPodAge": 3600.0})
    assert not aged.filter(young_obj) and aged.filter(young)   # young started in 2020


def test_node_fit_and_namespace_label_selector_are_pre_eviction_filters(cluster):
    add(cluster, "namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": "vms", "labels": {"rebalance": "yes"}}})
    big = pod(cluster, "big", "worker-a", cpu="8")
    small = pod(cluster, "small", "worker-a", cpu="1")
    in_vms = pod(cluster, "in-vms", "worker-a", namespace="vms")
    pod(cluster, "filler", "worker-b", cpu="5")
    log = Logger(0)
    fit = evictor(cluster, {"nodeFit": True}, log)
    assert fit.filter(big) and not fit.pre_eviction_filter(big)
    assert fit.pre_eviction_filter(small)
    assert '"pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as ' \
           'unschedulable" pod="apps/big"' in messages(log.lines)
    selected = evictor(cluster, {"namespaceLabelSelector": {"matchLabels": {"rebalance": "yes"}}})
    assert selected.pre_eviction_filter(in_vms) and not selected.pre_eviction_filter(small)
    only_a = evictor(cluster, {"nodeFit": True, "nodeSelector": "kubernetes.io/hostname=worker-a"})
    assert not only_a.pre_eviction_filter(small)
