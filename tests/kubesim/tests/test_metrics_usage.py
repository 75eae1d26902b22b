"""The usage model of a scenario's `metrics:` section (metrics/usage.py): who reports what, steps by simulated time,
run-time overrides, the load moving with a VM at the switch-over, and the errors that name the key."""
import time

import pytest

from descheduler_cluster import GIB, node, pod
from kubesim import scenario
from kubesim.metrics import usage
from metrics_cluster import metrics_cluster, move_vmi, vm_on

MI = 2 ** 20


def test_nodes_sum_overhead_vm_loads_and_other_pods_by_requests():
    cluster = metrics_cluster({"nodeOverhead": {"cpu": "300m", "memory": "1Gi"}, "pods": "requests",
                               "vms": {"apps/hot": {"cpu": "6", "memory": "12Gi"}}})
    node(cluster, "n1")
    node(cluster, "n2")
    vm_on(cluster, "hot", "n1", cpu="1", memory="2Gi")
    vm_on(cluster, "unlisted", "n2", cpu="500m", memory="3Gi")          # a VM the section does not list: requests
    pod(cluster, "web", "n2", cpu="250m", memory="512Mi")
    pod(cluster, "pending", "n2", cpu="4", memory="4Gi", phase="Pending")   # not Running: reports nothing
    snap = cluster.metrics.snapshot()
    assert snap.nodes == {"n1": {"cpu": 6300, "memory": 13 * GIB},
                          "n2": {"cpu": 300 + 500 + 250, "memory": GIB + 3 * GIB + 512 * MI}}
    assert snap.pods[("apps", "virt-launcher-hot-n1")].containers == [("compute", {"cpu": 6000, "memory": 12 * GIB})]
    assert snap.pods[("apps", "web")].containers == [("c", {"cpu": 250, "memory": 512 * MI})]
    assert ("apps", "pending") not in snap.pods


def test_zero_mode_and_a_node_that_is_not_ready_reports_nothing():
    cluster = metrics_cluster({"pods": "zero"})
    node(cluster, "n1")
    down = node(cluster, "n2")
    cluster.patch(cluster.registry.by_key("nodes"), None, "n2", "merge",
                  {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}, subresource="status")
    pod(cluster, "web", "n1", cpu="2", memory="2Gi")
    pod(cluster, "lost", "n2")
    snap = cluster.metrics.snapshot()
    assert snap.nodes == {"n1": {"cpu": 0, "memory": 0}}
    assert snap.pods[("apps", "web")].total == {"cpu": 0, "memory": 0}
    assert ("apps", "lost") not in snap.pods and down["metadata"]["name"] not in snap.nodes


def test_the_load_moves_with_the_vm_at_the_switch_over():
    cluster = metrics_cluster({"vms": {"apps/vm": {"cpu": "3", "memory": "4Gi"}},
                               "migrationTarget": {"cpu": "50m", "memory": "100Mi"}})
    node(cluster, "a")
    node(cluster, "b")
    vm_on(cluster, "vm", "a")
    vm_on(cluster, "vm", "b", vmi_node="a")          # the migration target Pod before the switch-over
    before = cluster.metrics.snapshot()
    assert before.nodes == {"a": {"cpu": 3000, "memory": 4 * GIB}, "b": {"cpu": 50, "memory": 100 * MI}}
    move_vmi(cluster, "vm", "b")
    after = cluster.metrics.snapshot()
    assert after.nodes == {"a": {"cpu": 50, "memory": 100 * MI}, "b": {"cpu": 3000, "memory": 4 * GIB}}


def test_steps_by_simulated_time_and_the_override_of_the_admin_endpoint():
    cluster = metrics_cluster({"vms": {"apps/vm": [{"cpu": "1", "memory": "1Gi"}, {"after": "600s", "cpu": "4"}]}},
                              time_scale=1000)
    node(cluster, "a")
    vm_on(cluster, "vm", "a")
    model = cluster.metrics
    assert model.vm_load("apps/vm") == {"cpu": 1000, "memory": GIB}
    model.started -= 0.7          # 700 simulated seconds later (timeScale 1000)
    assert model.vm_load("apps/vm") == {"cpu": 4000, "memory": GIB}   # memory kept from the step before
    assert model.set_vm_load("apps/vm", {"memory": "8Gi"}) == {"cpu": 4000, "memory": 8 * GIB}
    assert model.snapshot().nodes["a"] == {"cpu": 4000, "memory": 8 * GIB}
    assert model.vm_load("apps/other") is None
    with pytest.raises(usage.ConfigError, match="vm: expected <namespace>/<name>"):
        model.set_vm_load("vm", {"cpu": "1"})


def test_a_first_step_that_starts_later_reports_zero_before_it():
    cluster = metrics_cluster({"vms": {"apps/vm": [{"after": 60, "cpu": "2", "memory": "1Gi"}]}}, time_scale=1)
    assert cluster.metrics.vm_load("apps/vm") == {"cpu": 0, "memory": 0}
    cluster.metrics.started = time.monotonic() - 61
    assert cluster.metrics.vm_load("apps/vm") == {"cpu": 2000, "memory": GIB}


@pytest.mark.parametrize("section, message", [
    ({"pods": "some"}, r"metrics.pods: 'some' is not one of \['requests', 'zero'\]"),
    ({"vms": {"vm": {"cpu": "1"}}}, "metrics.vms: keys are <namespace>/<name>, got 'vm'"),
    ({"vms": {"a/vm": {"cpu": "lots"}}}, "metrics.vms.a/vm.cpu: quantities must match"),
    ({"vms": {"a/vm": [{"cpu": "1"}, {"after": "0s", "cpu": "2"}]}},
     r"metrics.vms.a/vm\[1\].after: steps must start later than the one before"),
    ({"vms": {"a/vm": {"gpu": "1"}}}, r"metrics.vms.a/vm: unknown key\(s\) \['gpu'\]"),
    ({"nodeOverhed": {}}, r"metrics: unknown key\(s\) \['nodeOverhed'\]"),
    ({"prometheus": {"namespace": "m", "service": "p"}}, "metrics.prometheus.port: required"),
    ({"prometheus": {"namespace": "m", "service": "p", "port": 9091, "tokenSecret": {"namespace": "d", "name": "s"}}},
     "metrics.prometheus.tokenSecret: needs `token`"),
])
def test_config_errors_name_the_key(section, message):
    with pytest.raises(usage.ConfigError, match=message):
        usage.parse_config("metrics", section)


def test_a_scenario_with_a_bad_metrics_section_fails_to_load(tmp_path):
    path = tmp_path / "bad-metrics.yaml"
    path.write_text("clusters:\n  workload:\n    metrics: {pods: all}\n")
    with pytest.raises(scenario.ScenarioError, match=r"clusters.workload.metrics.pods: 'all' is not one of"):
        scenario.load(str(path))


def test_prometheus_creates_its_service_namespace_and_token_secret():
    cluster = metrics_cluster({"prometheus": {"namespace": "monitoring", "service": "prometheus-k8s", "port": 9091,
                                              "token": "t0ken", "tokenSecret": {"namespace": "ops", "name": "prom"}}})
    service = cluster.store.get("services", "monitoring", "prometheus-k8s").obj
    assert service["spec"]["ports"] == [{"name": "web", "port": 9091, "targetPort": "web", "protocol": "TCP"}]
    secret = cluster.store.get("secrets", "ops", "prom").obj
    assert secret["data"] == {"prometheusAuthToken": "dDBrZW4="}
    assert cluster.store.get("namespaces", "", "ops") is not None
