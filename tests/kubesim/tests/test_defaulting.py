"""Defaulting and normalisation on every write, as the apiserver decodes and defaults each written object:
nulls and zero `omitempty` fields dropped, Secret stringData folded into data, the workload kinds' defaults
(StatefulSet, Deployment, DaemonSet, ReplicaSet, Job, CronJob) and their pod templates', on create, update,
every patch type and dry runs."""
import base64

import pytest

from kubesim.api import Cluster, RequestContext
from kubesim.clock import Clock
from kubesim.defaults import image_pull_policy
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate


@pytest.fixture
def cluster():
    c = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(100), history=50)
    populate(c, {})
    return c


def rt(cluster, key):
    return cluster.registry.by_key(key)


def body(obj: dict) -> dict:
    """`obj` without what the server generates (uid, timestamps, resourceVersion, managedFields)."""
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields")}
    return {**obj, "metadata": meta}


# The PodSpec defaults every pod template gets (SetDefaults_PodSpec + SetDefaults_Container).
TEMPLATE_SPEC = {
    "containers": [{"name": "app", "image": "registry:5000/app:1.2", "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "resources": {}}],
    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
    "securityContext": {}, "terminationGracePeriodSeconds": 30,
}
TEMPLATE = {"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "app", "image": "registry:5000/app:1.2"}]}}


def node(cluster, name="n1"):
    return cluster.create(rt(cluster, "nodes"), None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


@pytest.mark.parametrize("patch_type", ["strategic", "merge", "apply"])
def test_unschedulable_false_is_not_stored(cluster, patch_type):
    nodes = rt(cluster, "nodes")
    node(cluster)
    cluster.patch(nodes, None, "n1", "strategic", {"spec": {"unschedulable": True}})
    patch = {"spec": {"unschedulable": False}}
    if patch_type == "apply":
        patch = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, **patch}
    uncordoned = cluster.patch(nodes, None, "n1", patch_type, patch, RequestContext(field_manager="kubectl"))
    assert uncordoned["spec"] == {}
    assert cluster.get(nodes, None, "n1")["spec"] == {}


def test_zero_omitempty_fields_vanish_and_pointers_keep_false_and_zero(cluster):
    pods, cronjobs = rt(cluster, "pods"), rt(cluster, "cronjobs.batch")
    pod = cluster.create(pods, "default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {}, "annotations": {}},
        "spec": {"hostNetwork": False, "hostPID": False, "nodeName": "", "automountServiceAccountToken": False,
                 "containers": [{"name": "c", "image": "busybox", "tty": False, "stdin": False,
                                 "env": [{"name": "EMPTY", "value": ""}], "ports": [{"containerPort": 80,
                                                                                     "hostPort": 0}]}]}})
    assert "labels" not in pod["metadata"] and "annotations" not in pod["metadata"]
    spec = pod["spec"]
    assert not {"hostNetwork", "hostPID", "nodeName"} & spec.keys()
    assert spec["automountServiceAccountToken"] is False   # *bool: kept
    assert spec["containers"] == [{
        "name": "c", "image": "busybox", "imagePullPolicy": "Always",   # no tag: latest
        "env": [{"name": "EMPTY"}], "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": {}}]
    cron = cluster.create(cronjobs, "default", {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
        "spec": {"schedule": "*/2 * * * *", "suspend": False, "successfulJobsHistoryLimit": 0,
                 "jobTemplate": {"spec": {"template": TEMPLATE}}}})
    assert cron["spec"]["suspend"] is False and cron["spec"]["successfulJobsHistoryLimit"] == 0


def test_virtual_machine_nulls_are_pruned_and_a_repeated_merge_patch_is_a_no_op(cluster):
    vms = rt(cluster, "virtualmachines.kubevirt.io")
    vm_body = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
               "metadata": {"name": "vm1", "namespace": "default", "labels": None},
               "spec": {"runStrategy": None, "running": False,
                        "template": {"metadata": {"annotations": None}, "spec": {"domain": {"devices": {}}}}}}
    created = cluster.create(vms, "default", vm_body)
    assert "runStrategy" not in created["spec"] and "labels" not in created["metadata"]
    assert created["spec"]["template"] == {"metadata": {}, "spec": {"domain": {"devices": {}}}}
    again = cluster.patch(vms, "default", "vm1", "merge", {"spec": vm_body["spec"]})
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    replaced = cluster.update(vms, "default", "vm1", {**created, "spec": {**created["spec"], "runStrategy": None}})
    assert replaced == created


def test_nulls_are_dropped_for_built_in_kinds_on_create_and_update(cluster):
    deployments = rt(cluster, "deployments.apps")
    created = cluster.create(deployments, "default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "annotations": None},
        "spec": {"replicas": None, "paused": None, "selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE}})
    assert created["spec"]["replicas"] == 1 and "paused" not in created["spec"]   # null = unset: defaulted
    updated = cluster.update(deployments, "default", "d",
                             {**created, "spec": {**created["spec"], "minReadySeconds": None, "paused": False}})
    assert updated == created


def test_secret_string_data_becomes_data_and_type_defaults_to_opaque(cluster):
    secrets = rt(cluster, "secrets")
    created = cluster.create(secrets, "default", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"a": base64.b64encode(b"old").decode(), "keep": base64.b64encode(b"k").decode()},
        "stringData": {"a": "new", "b": "plain text"}})
    assert body(created) == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
                             "type": "Opaque",
                             "data": {"a": base64.b64encode(b"new").decode(), "keep": base64.b64encode(b"k").decode(),
                                      "b": base64.b64encode(b"plain text").decode()}}
    patched = cluster.patch(secrets, "default", "s", "merge", {"stringData": {"c": "x"}})
    assert "stringData" not in patched and patched["data"]["c"] == base64.b64encode(b"x").decode()
    assert patched["data"]["a"] == base64.b64encode(b"new").decode()


def test_statefulset_defaults(cluster):
    created = cluster.create(rt(cluster, "statefulsets.apps"), "default", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "serviceName": "db", "template": TEMPLATE,
                 "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                     "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}})
    assert body(created) == {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
        "spec": {"replicas": 1, "podManagementPolicy": "OrderedReady", "revisionHistoryLimit": 10,
                 "selector": {"matchLabels": {"app": "a"}}, "serviceName": "db",
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                 "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                 "template": {"metadata": {"labels": {"app": "a"}}, "spec": TEMPLATE_SPEC},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                     "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}]},
        "status": {"replicas": 0, "availableReplicas": 0}}


def test_statefulset_on_delete_and_explicit_rolling_update_keep_rolling_update_unset(cluster):
    sts = rt(cluster, "statefulsets.apps")
    for name, strategy in (("a", {"type": "OnDelete"}), ("b", {"type": "RollingUpdate"})):
        created = cluster.create(sts, "default", {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE, "updateStrategy": strategy}})
        assert created["spec"]["updateStrategy"] == strategy


def test_deployment_daemonset_replicaset_defaults(cluster):
    spec = {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE}
    deployment = cluster.create(rt(cluster, "deployments.apps"), "default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec})
    assert deployment["spec"] == {
        "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
        "selector": {"matchLabels": {"app": "a"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "template": {"metadata": {"labels": {"app": "a"}}, "spec": TEMPLATE_SPEC}}
    assert deployment["status"] == {}
    daemonset = cluster.create(rt(cluster, "daemonsets.apps"), "default", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": spec})
    assert daemonset["spec"] == {
        "revisionHistoryLimit": 10, "selector": {"matchLabels": {"app": "a"}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
        "template": {"metadata": {"labels": {"app": "a"}}, "spec": TEMPLATE_SPEC}}
    assert daemonset["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                   "desiredNumberScheduled": 0, "numberReady": 0}
    replicaset = cluster.create(rt(cluster, "replicasets.apps"), "default", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"}, "spec": spec})
    assert replicaset["spec"] == {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
                                  "template": {"metadata": {"labels": {"app": "a"}}, "spec": TEMPLATE_SPEC}}
    assert replicaset["status"] == {"replicas": 0}


def test_job_and_cronjob_defaults(cluster):
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "registry:5000/app:1.2"}]}}
    job = cluster.create(rt(cluster, "jobs.batch"), "default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": template}})
    uid = job["metadata"]["uid"]
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "j",
                 "controller-uid": uid, "job-name": "j"}
    assert job["metadata"]["labels"] == generated   # a Job without labels takes its template's
    assert job["spec"] == {
        "parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": False,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
        "template": {"metadata": {"labels": generated}, "spec": {**TEMPLATE_SPEC, "restartPolicy": "Never"}}}
    queue = cluster.create(rt(cluster, "jobs.batch"), "default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "q", "labels": {"own": "x"}},
        "spec": {"parallelism": 3, "template": template}})
    assert "completions" not in queue["spec"] and queue["metadata"]["labels"] == {"own": "x"}
    cron = cluster.create(rt(cluster, "cronjobs.batch"), "default", {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
        "spec": {"schedule": "*/2 * * * *", "jobTemplate": {"spec": {"template": template}}}})
    assert cron["spec"] == {
        "schedule": "*/2 * * * *", "concurrencyPolicy": "Allow", "suspend": False,
        "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
        "jobTemplate": {"spec": {"template": {"spec": {**TEMPLATE_SPEC, "restartPolicy": "Never"}}}}}
    assert cron["status"] == {}


def test_pod_defaults_and_create_only_admission(cluster):
    pod = cluster.create(rt(cluster, "pods"), "default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"serviceAccount": "builder",
                 "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 60}],
                 "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "c"}}],
                 "containers": [{"name": "c", "image": "app@sha256:" + "0" * 64,
                                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                                 "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                                 "readinessProbe": {"httpGet": {"port": 8080}}}]}})
    spec = pod["spec"]
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "builder"
    assert spec["enableServiceLinks"] is True and spec["priority"] == 0
    assert spec["tolerations"] == [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    assert spec["volumes"] == [{"name": "scratch", "emptyDir": {}},
                               {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}}]
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"   # a digest, no tag
    assert container["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                      "requests": {"cpu": "1", "memory": "1Gi"}}
    assert container["env"][0]["valueFrom"]["fieldRef"] == {"apiVersion": "v1", "fieldPath": "spec.nodeName"}
    assert container["readinessProbe"] == {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                                           "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                           "failureThreshold": 3}
    assert pod["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}


def test_image_pull_policy_follows_the_tag():
    assert image_pull_policy("nginx") == "Always"
    assert image_pull_policy("nginx:latest") == "Always"
    assert image_pull_policy("registry:5000/nginx") == "Always"
    assert image_pull_policy("registry:5000/nginx:1.27") == "IfNotPresent"
    assert image_pull_policy("nginx@sha256:abc") == "IfNotPresent"


def test_service_namespace_and_pdb_defaults(cluster):
    service = cluster.create(rt(cluster, "services"), "default", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "selector": {"app": "a"}, "ports": [{"port": 80}]}})
    assert service["spec"] == {"type": "NodePort", "selector": {"app": "a"}, "sessionAffinity": "None",
                               "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
                               "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}
    assert service["status"] == {"loadBalancer": {}}
    namespaces = rt(cluster, "namespaces")
    cluster.create(namespaces, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    relabelled = cluster.patch(namespaces, None, "team", "merge",
                               {"metadata": {"labels": {"kubernetes.io/metadata.name": "other"}}})
    assert relabelled["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}   # defaulted on every write
    pdb = cluster.create(rt(cluster, "poddisruptionbudgets.policy"), "default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}})
    assert pdb["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def test_update_and_patch_default_again_and_dry_runs_too(cluster):
    deployments = rt(cluster, "deployments.apps")
    created = cluster.create(deployments, "default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE}})
    # a PUT without the defaulted fields is defaulted again: nothing changes
    bare = {**created, "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE}}
    assert cluster.update(deployments, "default", "d", bare) == created
    removed = cluster.patch(deployments, "default", "d", "json",
                            [{"op": "remove", "path": "/spec/strategy"}, {"op": "remove", "path": "/spec/replicas"}])
    assert removed == created
    recreate = {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}}
    dry = cluster.patch(deployments, "default", "d", "merge", recreate, RequestContext(dry_run=True))
    assert dry["spec"]["strategy"] == {"type": "Recreate"}
    assert cluster.get(deployments, "default", "d") == created
    dry_created = cluster.create(rt(cluster, "secrets"), "default", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}},
        RequestContext(dry_run=True))
    assert dry_created["type"] == "Opaque" and dry_created["data"] == {"k": "dg=="} and "stringData" not in dry_created
