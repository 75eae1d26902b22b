"""`/scale` (autoscaling/v1 Scale) of Deployments, ReplicaSets, StatefulSets (`pkg/registry/apps/*/storage`
ScaleREST) and of KubeVirt's VirtualMachinePool and VirtualMachineInstanceReplicaSet (CRD scale subresource:
`.spec.replicas`, `.status.replicas`, `.status.labelSelector`; apiextensions customresource ScaleREST)."""
import pytest

from https_client import call, kubectl, started, stored_since

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
POOLS = "/apis/pool.kubevirt.io/v1alpha1/namespaces/default/virtualmachinepools"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with started("api-basics", tmp_path_factory.mktemp("scale")) as simulator:
        yield simulator


def deployment(name, replicas=2):
    labels = {"app": name, "tier": "web"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def expected_scale(parent, replicas, status_replicas, selector):
    meta = parent["metadata"]
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")},
            "spec": {"replicas": replicas}, "status": {"replicas": status_replicas, "selector": selector}}


def test_get_answers_the_deployments_scale(sim):
    call(sim, "POST", DEPLOYMENTS, deployment("scaled", replicas=0))
    code, parent = call(sim, "GET", DEPLOYMENTS + "/scaled")
    code, scale = call(sim, "GET", DEPLOYMENTS + "/scaled/scale")
    assert code == 200
    want = expected_scale(parent, 0, parent.get("status", {}).get("replicas", 0), "app=scaled,tier=web")
    want["spec"] = {}   # replicas 0 is omitted (omitempty)
    assert scale == want


def test_patch_and_put_change_the_parents_replicas(sim):
    call(sim, "POST", DEPLOYMENTS, deployment("patched", replicas=0))
    code, scale = call(sim, "PATCH", DEPLOYMENTS + "/patched/scale", {"spec": {"replicas": 3}},
                       "application/merge-patch+json")
    parent = call(sim, "GET", DEPLOYMENTS + "/patched")[1]
    assert code == 200 and parent["spec"]["replicas"] == 3
    assert scale["spec"] == {"replicas": 3} and scale["metadata"]["uid"] == parent["metadata"]["uid"]
    for content_type, patch in (("application/strategic-merge-patch+json", {"spec": {"replicas": 1}}),
                                ("application/json-patch+json", [{"op": "replace", "path": "/spec/replicas",
                                                                  "value": 0}])):
        assert call(sim, "PATCH", DEPLOYMENTS + "/patched/scale", patch, content_type)[0] == 200
    assert call(sim, "GET", DEPLOYMENTS + "/patched")[1]["spec"]["replicas"] == 0
    current = call(sim, "GET", DEPLOYMENTS + "/patched/scale")[1]
    code, put = call(sim, "PUT", DEPLOYMENTS + "/patched/scale", {**current, "spec": {"replicas": 2}})
    assert code == 200 and put["spec"] == {"replicas": 2}
    assert call(sim, "GET", DEPLOYMENTS + "/patched")[1]["spec"]["replicas"] == 2


def test_a_stale_resource_version_conflicts_and_a_dry_run_stores_nothing(sim):
    call(sim, "POST", DEPLOYMENTS, deployment("guarded"))
    stale = call(sim, "GET", DEPLOYMENTS + "/guarded/scale")[1]
    call(sim, "PATCH", DEPLOYMENTS + "/guarded", {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json")
    code, status = call(sim, "PUT", DEPLOYMENTS + "/guarded/scale", {**stale, "spec": {"replicas": 5}})
    assert code == 409 and status["reason"] == "Conflict"
    assert status["message"] == ('Operation cannot be fulfilled on deployments.apps "guarded": the object has been '
                                 'modified; please apply your changes to the latest version and try again')
    start = sim.clusters["workload"].store.rv
    at_start = call(sim, "GET", DEPLOYMENTS + "/guarded")[1]["metadata"]["resourceVersion"]
    code, dry = call(sim, "PATCH", DEPLOYMENTS + "/guarded/scale?dryRun=All", {"spec": {"replicas": 7}},
                     "application/merge-patch+json")
    assert code == 200 and dry["spec"] == {"replicas": 7}
    # nothing was written: the answer carries a version the Deployment had, and no version stored since (the
    # deployment controller may write its status meanwhile) has the dry run's 7 replicas
    since = [obj for _type, obj in stored_since(sim, "deployments.apps", start) if obj["metadata"]["name"] == "guarded"]
    assert all(obj["spec"]["replicas"] == 2 for obj in since)
    assert dry["metadata"]["resourceVersion"] in {at_start, *(obj["metadata"]["resourceVersion"] for obj in since)}
    assert call(sim, "GET", DEPLOYMENTS + "/guarded")[1]["spec"]["replicas"] == 2


def test_invalid_replicas_and_missing_parents(sim):
    call(sim, "POST", DEPLOYMENTS, deployment("bounded"))
    code, status = call(sim, "PATCH", DEPLOYMENTS + "/bounded/scale", {"spec": {"replicas": -1}},
                        "application/merge-patch+json")
    assert code == 422
    assert status["message"] == ('Scale.autoscaling "bounded" is invalid: spec.replicas: Invalid value: -1: must be '
                                 'greater than or equal to 0')
    code, status = call(sim, "GET", DEPLOYMENTS + "/absent/scale")
    assert code == 404 and status["message"] == 'deployments.apps "absent" not found'
    code, status = call(sim, "PATCH", DEPLOYMENTS + "/absent/scale", {"spec": {"replicas": 1}},
                        "application/merge-patch+json")
    assert code == 404 and status["message"] == 'deployments/scale.apps "absent" not found'
    assert status["details"] == {"name": "absent", "group": "apps", "kind": "deployments/scale"}


def test_replicasets_and_statefulsets_scale_too(sim):
    labels = {"app": "sts"}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "sts"},
           "spec": {"replicas": 1, "serviceName": "sts", "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    assert call(sim, "POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)[0] == 201
    code, scale = call(sim, "PATCH", "/apis/apps/v1/namespaces/default/statefulsets/sts/scale",
                       {"spec": {"replicas": 4}}, "application/merge-patch+json")
    assert code == 200 and scale["spec"] == {"replicas": 4} and scale["status"]["selector"] == "app=sts"
    assert call(sim, "GET", "/apis/apps/v1/namespaces/default/replicasets/absent/scale")[1]["message"] == \
        'replicasets.apps "absent" not found'


def test_a_virtual_machine_pool_scales_by_its_crd_paths(sim):
    pool = {"apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool", "metadata": {"name": "pool"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"p": "pool"}},
                     "virtualMachineTemplate": {"metadata": {"labels": {"p": "pool"}},
                                                "spec": {"runStrategy": "Halted", "template": {"spec": {}}}}}}
    code, created = call(sim, "POST", POOLS, pool)
    assert code == 201
    code, scale = call(sim, "PATCH", POOLS + "/pool/scale", {"spec": {"replicas": 2}}, "application/merge-patch+json")
    assert code == 200 and scale["spec"] == {"replicas": 2}
    assert call(sim, "GET", POOLS + "/pool")[1]["spec"]["replicas"] == 2
    code, status = call(sim, "PATCH", POOLS + "/pool/scale", {"spec": {"replicas": 1}},
                        "application/strategic-merge-patch+json")
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    code, status = call(sim, "GET", POOLS + "/absent/scale")
    assert code == 404 and status["message"] == 'virtualmachinepools.pool.kubevirt.io "absent" not found'


def test_kubectl_scale_deployment(sim):
    call(sim, "POST", DEPLOYMENTS, deployment("kubectl-scaled", replicas=1))
    assert kubectl(sim, "scale", "deployment", "kubectl-scaled", "--replicas=3") == "deployment.apps/kubectl-scaled scaled\n"
    assert call(sim, "GET", DEPLOYMENTS + "/kubectl-scaled")[1]["spec"]["replicas"] == 3
