"""The scheduler's scoring, as kube-scheduler's default score plugins compute it: figures of upstream's own test
tables (taint_toleration_test.go, least_allocated_test.go, balanced_allocation_test.go), the default weights, and
the VMs' launcher and migration target Pods placed by them (a PreferNoSchedule-tainted node loses to an untainted
one with less free room)."""
from kubesim.controllers import scheduler
from kubesim.kubevirt import objects
from kubesim.scenario import populate

import in_process
from kubevirt_sim import NS, VMI, Sim

PREFER_NO_SCHEDULE = {"key": "kubevirt-ops.io/maintenance-pending", "value": "x", "effect": "PreferNoSchedule"}


def node(name, cpu="4", memory="10Gi", taints=()):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": list(taints)} if taints else {},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(*containers, on=None, tolerations=()):
    """A Pod of containers given as request dicts ({} = a container without requests)."""
    spec = {"containers": [{"name": f"c{i}", "image": "app", **({"resources": {"requests": dict(r)}} if r else {})}
                           for i, r in enumerate(containers)]}
    if on:
        spec["nodeName"] = on
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "incoming", "namespace": "apps"}, "spec": spec}


def bare(*objs):
    """A cluster holding the objects, no controllers (the scheduler's functions read its store)."""
    cluster = in_process.bare_cluster()
    named = [{**o, "metadata": {**o["metadata"], "name": f"p{i}", "namespace": "apps"}} if o["kind"] == "Pod" else o
             for i, o in enumerate(objs)]
    populate(cluster, {"namespaces": ["apps"], "objects": named})
    return cluster


def plugin_scores(plugin, incoming, nodes, existing=()):
    usage = scheduler.node_requests(bare(*nodes, *existing))
    return {name: scores[plugin] for name, scores in scheduler.node_scores(incoming, nodes, usage).items()}


# ------------------------------------------------------------------------------------ upstream tables
def test_taint_toleration_the_more_intolerable_taints_the_lower_the_score():
    """taint_toleration_test.go "the more intolerable taints a node has, the lower score it gets.": 100, 50, 0 (its
    nodeA..nodeC, renamed node-a..node-c as a Node name must be an RFC 1123 subdomain here)."""
    tolerating = pod({}, tolerations=[{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}])
    nodes = [node("node-a"),
             node("node-b", taints=[{"key": "cpu-type", "value": "arm64", "effect": "PreferNoSchedule"}]),
             node("node-c", taints=[{"key": "cpu-type", "value": "arm64", "effect": "PreferNoSchedule"},
                                    {"key": "disk-type", "value": "ssd", "effect": "PreferNoSchedule"}])]
    assert plugin_scores("TaintToleration", tolerating, nodes) == {"node-a": 100, "node-b": 50, "node-c": 0}


def test_taint_toleration_counts_only_prefer_no_schedule_taints_and_tolerations():
    """taint_toleration_test.go "only taints and tolerations that have effect PreferNoSchedule are checked": a
    NoSchedule toleration does not tolerate a PreferNoSchedule taint; a NoSchedule taint does not count."""
    tolerating = pod({}, tolerations=[{"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
                                      {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"}])
    nodes = [node("node-a"),
             node("node-b", taints=[{"key": "cpu-type", "value": "arm64", "effect": "NoSchedule"}]),
             node("node-c", taints=[{"key": "cpu-type", "value": "arm64", "effect": "PreferNoSchedule"},
                                    {"key": "disk-type", "value": "ssd", "effect": "PreferNoSchedule"}])]
    assert plugin_scores("TaintToleration", tolerating, nodes) == {"node-a": 100, "node-b": 100, "node-c": 0}


def test_least_allocated_resources_requested_pods_scheduled_with_resources():
    """least_allocated_test.go "resources requested, pods scheduled with resources": node1 (40 + 75) / 2 = 57,
    node2 (40 + 50) / 2 = 45 (cpu and memory in the table's units: cores and bytes; an explicit "0" stays 0)."""
    incoming = pod({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
    nodes = [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")]
    existing = [pod({"cpu": "3000", "memory": "0"}, on="node1"), pod({"cpu": "3000", "memory": "5000"}, on="node2")]
    assert plugin_scores("NodeResourcesFit", incoming, nodes, existing) == {"node1": 57, "node2": 45}


def test_least_allocated_nothing_scheduled_differently_sized_nodes():
    """least_allocated_test.go "nothing scheduled, resources requested, differently sized nodes": 37 and 50."""
    incoming = pod({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
    nodes = [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")]
    assert plugin_scores("NodeResourcesFit", incoming, nodes) == {"node1": 37, "node2": 50}


def test_balanced_allocation_resources_requested_pods_scheduled_with_resources():
    """balanced_allocation_test.go "resources requested, pods scheduled with resources": node1 std (0.6 - 0.25) / 2
    -> 82, node2 std (0.6 - 0.5) / 2 -> 95."""
    cpu_only = ({"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})
    cpu_and_memory = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
    nodes = [node("node1", cpu="10", memory="20000"), node("node2", cpu="10", memory="20000")]
    existing = [pod(*cpu_only, on="node1"), pod(*cpu_and_memory, on="node2")]
    assert plugin_scores("NodeResourcesBalancedAllocation", pod(*cpu_and_memory), nodes, existing) == \
        {"node1": 82, "node2": 95}


def test_balanced_allocation_skips_a_best_effort_pod():
    """balanced_allocation_test.go "nothing scheduled, nothing requested, skip in PreScore": no score at all."""
    nodes = [node("node1", cpu="4", memory="10000"), node("node2", cpu="4", memory="10000")]
    existing = [pod({"cpu": "3", "memory": "5000"}, on="node1")]
    assert plugin_scores("NodeResourcesBalancedAllocation", pod({}), nodes, existing) == {"node1": 0, "node2": 0}


# --------------------------------------------------------------------------------------- our figures
def test_least_allocated_counts_the_scheduler_defaults_for_containers_without_requests():
    """NonZeroRequested: a container without a cpu or memory request counts 100m / 200Mi, on the node and in the
    incoming Pod: (1000 - 200) * 100 / 1000 = 80 and (1000Mi - 400Mi) * 100 / 1000Mi = 60 -> 70; the empty node
    (90 + 80) / 2 = 85."""
    nodes = [node("busy", cpu="1", memory="1000Mi"), node("idle", cpu="1", memory="1000Mi")]
    assert plugin_scores("NodeResourcesFit", pod({}), nodes, [pod({}, on="busy")]) == {"busy": 70, "idle": 85}


def test_the_total_weighs_taints_three_affinity_two_and_resources_one_each():
    preferring = pod({"cpu": "1", "memory": "1Gi"})
    preferring["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 7, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                           "values": ["liked"]}]}}]}}
    nodes = [node("liked", cpu="4", memory="4Gi", taints=[PREFER_NO_SCHEDULE]), node("plain", cpu="4", memory="4Gi")]
    scores = scheduler.node_scores(preferring, nodes, {})
    # cpu 75, memory 75: LeastAllocated 75, fractions equal: BalancedAllocation 100
    assert scores["liked"] == {"TaintToleration": 0, "NodeAffinity": 100, "NodeResourcesFit": 75,
                               "NodeResourcesBalancedAllocation": 100, "total": 3 * 0 + 2 * 100 + 75 + 100}
    assert scores["plain"] == {"TaintToleration": 100, "NodeAffinity": 0, "NodeResourcesFit": 75,
                               "NodeResourcesBalancedAllocation": 100, "total": 3 * 100 + 2 * 0 + 75 + 100}


def test_a_prefer_no_schedule_node_loses_to_an_untainted_one_with_less_free_room():
    filler = pod({"cpu": "3", "memory": "6Gi"}, on="crowded")
    incoming = pod({"cpu": "500m", "memory": "1Gi"})
    untainted = bare(node("roomy"), node("crowded"), filler)
    assert scheduler.choose_node(untainted, incoming) == ("roomy", "")
    tainted = bare(node("roomy", taints=[PREFER_NO_SCHEDULE]), node("crowded"), filler)
    assert scheduler.choose_node(tainted, incoming) == ("crowded", "")
    tolerated = pod({"cpu": "500m", "memory": "1Gi"}, tolerations=[
        {"key": PREFER_NO_SCHEDULE["key"], "operator": "Exists", "effect": "PreferNoSchedule"}])
    assert scheduler.choose_node(tainted, tolerated) == ("roomy", "")


def test_equal_scores_go_to_the_first_node_by_name():
    cluster = bare(node("worker-c"), node("worker-a"), node("worker-b"))
    assert scheduler.choose_node(cluster, pod({"cpu": "1", "memory": "1Gi"})) == ("worker-a", "")


def test_vm_launchers_and_migration_targets_avoid_a_prefer_no_schedule_node():
    """worker-b carries the taint. A new VM's launcher goes to worker-c (without the taint: worker-b, equal room and
    first by name); then a VM evacuated from worker-a migrates to worker-c as well, though the tainted worker-b has
    more free room."""
    sim = Sim([], time_scale=400)
    sim.patch("nodes", "worker-b", {"spec": {"taints": [PREFER_NO_SCHEDULE]}}, namespace=None)
    sim.create(objects.vm("mover", NS, eviction_strategy="LiveMigrate", preferred_node="worker-a"))
    assert sim.wait_running("mover")["status"]["nodeName"] == "worker-a"
    sim.create(objects.vm("fresh", NS, eviction_strategy="LiveMigrate"))
    assert sim.wait_running("fresh")["status"]["nodeName"] == "worker-c"
    assert sim.evict(sim.launcher("mover")["metadata"]["name"]).code == 429     # evacuation by live migration
    moved = sim.wait_for(lambda: sim.get(VMI, "mover"), lambda v: v["status"].get("nodeName") != "worker-a",
                         what="mover migrated")
    assert moved["status"]["nodeName"] == "worker-c"
    # the VMI shows its new node before virt-controller marks the migration Succeeded (as KubeVirt's order is)
    finished = sim.wait_for(lambda: sim.migrations("mover"), lambda ms: all(m["status"].get("phase") in ("Succeeded", "Failed") for m in ms),
                            what="the migration final")
    assert [m["status"]["phase"] for m in finished] == ["Succeeded"]
