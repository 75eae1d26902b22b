"""The workload controllers in-process: Jobs, CronJobs on the simulated clock, Deployments and their
ReplicaSets, DaemonSets; with the scheduler and kubelet running, at a high time scale."""
import contextlib
import time
from datetime import datetime

from kubesim import events
from kubesim.api import Cluster, RequestContext
from kubesim.clock import Clock
from kubesim.components import COMPONENTS
from kubesim.controllers import ControllerManager
from kubesim.controllers.cronjobs import CronJobController, trigger
from kubesim.controllers.kubelet import finish_pod
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate
from support.waiting import wait_for


def node(name, **labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


CONTROL_PLANE = {**node("cp"), "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane",
                                                    "effect": "NoSchedule"}]}}


@contextlib.contextmanager
def simulated(time_scale=100, nodes=("worker-a", "worker-b")):
    cluster = Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(time_scale))
    populate(cluster, {"objects": [CONTROL_PLANE] + [node(n, role="worker") for n in nodes]})
    manager = ControllerManager(cluster)
    for register in COMPONENTS:
        register(cluster, manager)
    manager.start()
    try:
        yield cluster, manager
    finally:
        manager.stop()


def rt(cluster, key):
    return cluster.registry.by_key(key)


def objects(cluster, key, namespace="default", **labels):
    return sorted((e.obj for e in cluster.store.entries(key, namespace)
                   if all((e.obj["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())),
                  key=lambda o: (o["metadata"]["creationTimestamp"], o["metadata"]["name"]))


def reasons(cluster, kind, name, namespace="default"):
    return {(e["reason"], e["message"]) for e in events.for_object(cluster, namespace, kind, name)}


def conditions(obj):
    return {c["type"]: (c["status"], c.get("reason"), c.get("message"))
            for c in (obj.get("status") or {}).get("conditions") or []}


def finished_job(cluster, name, kind):
    """Wait until the Job has the condition `kind` (Complete, Failed) and return it."""
    def check():
        found = cluster.get(rt(cluster, "jobs.batch"), "default", name)
        return found if kind in conditions(found) else None
    return wait_for(check, interval=0.01, what=f"job {name} {kind}")


def pod_template(labels=None, restart="Never", **annotations):
    meta = {"labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"restartPolicy": restart,
                                       "containers": [{"name": "c", "image": "registry.example/c:1"}]}}


def job(name, **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": pod_template({"app": name}), **spec}}


class Programs:
    """Programs run in Pods: by the value of the Pod's `app` label, `fail`, `hold` (keep running) or the
    kubelet's default (succeed after 1 simulated second). Records when each Pod started."""

    def __init__(self, cluster, **behaviour):
        self.cluster, self.behaviour, self.started = cluster, behaviour, []
        cluster.programs.append(self)

    def __call__(self, pod):
        app = (pod["metadata"].get("labels") or {}).get("app")
        action = self.behaviour.get(app)
        if action is None:
            return False
        self.started.append((pod["metadata"]["name"], time.monotonic()))
        if action == "fail":
            finish_pod(self.cluster, pod["metadata"]["namespace"], pod["metadata"]["name"], 1, "boom")
        return True


# ------------------------------------------------------------------------------------------------ Jobs
def test_job_runs_pods_to_completion_with_upstream_labels_status_and_events():
    with simulated() as (cluster, manager):
        made = cluster.create(rt(cluster, "jobs.batch"), "default", job("batch", completions=2))
        uid = made["metadata"]["uid"]
        assert made["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        finished_job(cluster, "batch", "Complete")
        assert manager.wait_idle()
        done = cluster.get(rt(cluster, "jobs.batch"), "default", "batch")
        message = "Reached expected number of succeeded pods"
        assert conditions(done) == {"SuccessCriteriaMet": ("True", "CompletionsReached", message),
                                    "Complete": ("True", "CompletionsReached", message)}
        status = done["status"]
        assert status["startTime"] and status["completionTime"] and status["ready"] == 0
        assert status["terminating"] == 0 and status["uncountedTerminatedPods"] == {}
        assert "active" not in status and "failed" not in status
        pods = objects(cluster, "pods", **{"job-name": "batch"})
        assert len(pods) == 2 and all(p["status"]["phase"] == "Succeeded" for p in pods)
        pod = pods[0]
        assert pod["metadata"]["name"].startswith("batch-") and len(pod["metadata"]["name"]) == len("batch-") + 5
        assert pod["metadata"]["labels"] == {"app": "batch", "batch.kubernetes.io/controller-uid": uid,
                                             "batch.kubernetes.io/job-name": "batch", "controller-uid": uid,
                                             "job-name": "batch"}
        assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "batch",
                                                       "uid": uid, "controller": True, "blockOwnerDeletion": True}]
        assert pod["spec"]["nodeName"] in ("worker-a", "worker-b")
        said = reasons(cluster, "Job", "batch")
        assert {("SuccessfulCreate", f"Created pod: {p['metadata']['name']}") for p in pods} <= said
        assert ("Completed", "Job completed") in said


def test_failed_pods_are_replaced_with_exponential_backoff_until_the_limit():
    with simulated(time_scale=100) as (cluster, manager):
        programs = Programs(cluster, flaky="fail")
        cluster.create(rt(cluster, "jobs.batch"), "default", job("flaky", backoffLimit=2))
        failed = finished_job(cluster, "flaky", "Failed")
        assert manager.wait_idle()
        message = "Job has reached the specified backoff limit"
        assert conditions(failed) == {"FailureTarget": ("True", "BackoffLimitExceeded", message),
                                      "Failed": ("True", "BackoffLimitExceeded", message)}
        assert failed["status"]["failed"] == 3 and "completionTime" not in failed["status"]
        # backoffLimit 2 allows three tries; the retries wait 10 s and 20 s (0.1 s and 0.2 s at timeScale 100)
        starts = [when for _name, when in programs.started]
        assert len(starts) == 3
        assert starts[1] - starts[0] >= 0.09 and starts[2] - starts[1] >= 0.19
        assert ("BackoffLimitExceeded", message) in reasons(cluster, "Job", "flaky")
        assert len(objects(cluster, "pods", **{"job-name": "flaky"})) == 3


def test_an_evicted_job_pod_counts_as_failed_and_is_replaced():
    with simulated() as (cluster, manager):
        Programs(cluster, long="hold")
        cluster.create(rt(cluster, "jobs.batch"), "default", job("long"))
        first = wait_for(lambda: [p for p in objects(cluster, "pods", app="long")
                                  if (p.get("status") or {}).get("phase") == "Running"], 5, 0.01, what="a running pod")[0]
        cluster.subresources[("pods", "eviction")](cluster, "default", first["metadata"]["name"], {}, RequestContext())
        wait_for(lambda: len([p for p in objects(cluster, "pods", app="long")
                              if p["metadata"]["name"] != first["metadata"]["name"]]) == 1, 5, 0.01, what="a replacement")
        assert manager.wait_idle()
        status = cluster.get(rt(cluster, "jobs.batch"), "default", "long")["status"]
        wait_for(lambda: cluster.get(rt(cluster, "jobs.batch"), "default", "long")["status"].get("failed") == 1, interval=0.01,
                 what="the eviction counted")
        assert status["active"] == 1


def test_suspend_and_resume():
    with simulated() as (cluster, manager):
        jobs = rt(cluster, "jobs.batch")
        cluster.create(jobs, "default", job("paused", suspend=True))
        assert manager.wait_idle()
        paused = cluster.get(jobs, "default", "paused")
        assert conditions(paused) == {"Suspended": ("True", "JobSuspended", "Job suspended")}
        assert "startTime" not in paused["status"] and not objects(cluster, "pods", app="paused")
        cluster.patch(jobs, "default", "paused", "merge", {"spec": {"suspend": False}})
        wait_for(lambda: "Complete" in conditions(cluster.get(jobs, "default", "paused")), interval=0.01, what="completion")
        resumed = cluster.get(jobs, "default", "paused")
        assert conditions(resumed)["Suspended"] == ("False", "JobResumed", "Job resumed")
        assert {("Suspended", "Job suspended"), ("Resumed", "Job resumed")} <= reasons(cluster, "Job", "paused")


def test_active_deadline_fails_the_job_and_deletes_its_pods():
    with simulated() as (cluster, manager):
        Programs(cluster, slow="hold")
        jobs = rt(cluster, "jobs.batch")
        cluster.create(jobs, "default", job("slow", activeDeadlineSeconds=30))
        failed = finished_job(cluster, "slow", "Failed")
        assert conditions(failed)["Failed"] == ("True", "DeadlineExceeded", "Job was active longer than specified deadline")
        assert manager.wait_idle()
        wait_for(lambda: not objects(cluster, "pods", app="slow"), interval=0.01, what="the pods to go")


def test_ttl_after_finished_deletes_the_job_and_its_pods():
    with simulated() as (cluster, manager):
        jobs = rt(cluster, "jobs.batch")
        cluster.create(jobs, "default", job("short", ttlSecondsAfterFinished=20))
        wait_for(lambda: objects(cluster, "pods", app="short"), interval=0.01, what="a pod")
        wait_for(lambda: cluster.find(jobs, "default", "short") is None, interval=0.01, what="the TTL")
        assert manager.wait_idle()
        assert not objects(cluster, "pods", app="short")


# -------------------------------------------------------------------------------------------- CronJobs
def cronjob(name, schedule="* * * * *", template=None, **spec):
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}, "annotations": {"team": "ops"}},
                "spec": {"template": template or pod_template({"app": name})}}, **spec}}


def cron_controller(manager):
    return next(c for c in manager.controllers if isinstance(c, CronJobController))


def test_cronjob_runs_on_the_simulated_clock_and_keeps_its_history():
    # timeScale 120: a minute passes every 0.5 s (at 600, 0.1 s, a loaded machine could miss a minute, which the
    # controller then skips as upstream's does: the next run is the most recent missed time)
    with simulated(time_scale=120) as (cluster, manager):
        cronjobs = rt(cluster, "cronjobs.batch")
        created = cluster.create(cronjobs, "default", cronjob("tick"))
        wait_for(lambda: len([e for e in events.for_object(cluster, "default", "CronJob", "tick")
                              if e["reason"] == "SuccessfulDelete"]) >= 2, interval=0.01, what="five runs")
        cluster.patch(cronjobs, "default", "tick", "merge", {"spec": {"suspend": True}})
        assert manager.wait_idle()
        wait_for(lambda: all("Complete" in conditions(j) for j in objects(cluster, "jobs.batch")), interval=0.01, what="completion")
        assert manager.wait_idle()
        kept = objects(cluster, "jobs.batch")
        assert len(kept) == 3   # successfulJobsHistoryLimit
        minutes = [int(j["metadata"]["name"].rsplit("-", 1)[1]) for j in kept]
        assert minutes == list(range(minutes[0], minutes[0] + 3))
        first = kept[0]
        assert first["metadata"]["labels"] == {"app.kubernetes.io/name": "tick"}
        stamp = first["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        assert first["metadata"]["annotations"]["team"] == "ops" and stamp.endswith(":00Z")
        assert int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()) // 60 == minutes[0]
        assert first["metadata"]["ownerReferences"] == [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": created["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
        status = cluster.get(cronjobs, "default", "tick")["status"]
        assert status["lastScheduleTime"] and status["lastSuccessfulTime"] and "active" not in status
        said = reasons(cluster, "CronJob", "tick")
        assert {("SuccessfulCreate", f"Created job {j['metadata']['name']}") for j in kept} <= said
        assert (("SawCompletedJob", f"Saw completed job: {kept[0]['metadata']['name']}, condition: Complete")
                in said)
        deleted = {m for r, m in said if r == "SuccessfulDelete"}
        assert all(m.startswith("Deleted job tick-") for m in deleted)
        # deleted Jobs took their Pods with them (Background propagation)
        wait_for(lambda: {p["metadata"]["labels"]["job-name"] for p in objects(cluster, "pods", app="tick")}
                 == {j["metadata"]["name"] for j in kept}, 5, 0.01, what="old pods to go")
        # suspended: no more runs
        time.sleep(0.3)
        assert manager.wait_idle()
        assert [j["metadata"]["name"] for j in objects(cluster, "jobs.batch")] == [j["metadata"]["name"] for j in kept]


def test_cronjob_clock_runs_time_scale_times_faster():
    with simulated(time_scale=600) as (_cluster, manager):
        clock = cron_controller(manager).clock
        # each reading of the simulated clock between two of the real one: exact bounds, however long the thread
        # was held between the calls
        real_0, before, real_1 = time.monotonic(), clock.now(), time.monotonic()
        time.sleep(0.2)
        real_2, after, real_3 = time.monotonic(), clock.now(), time.monotonic()
        simulated_seconds = (after - before).total_seconds()
        assert (real_2 - real_1) * 600 - 0.001 <= simulated_seconds <= (real_3 - real_0) * 600 + 0.001


def test_forbid_skips_runs_while_a_job_is_active_and_replace_replaces_it():
    with simulated(time_scale=600) as (cluster, manager):
        Programs(cluster, forbid="hold", replace="hold")
        cronjobs = rt(cluster, "cronjobs.batch")
        cluster.create(cronjobs, "default", cronjob("forbid", concurrencyPolicy="Forbid"))
        cluster.create(cronjobs, "default", cronjob("replace", concurrencyPolicy="Replace"))
        wait_for(lambda: ("JobAlreadyActive", "Not starting job because prior execution is running and "
                          "concurrency policy is Forbid") in reasons(cluster, "CronJob", "forbid"), 5, 0.01, what="a skipped run")
        wait_for(lambda: any(r == "SuccessfulDelete" for r, _m in reasons(cluster, "CronJob", "replace")), interval=0.01,
                 what="a replaced run")
        for name in ("forbid", "replace"):
            cluster.patch(cronjobs, "default", name, "merge", {"spec": {"suspend": True}})
        assert manager.wait_idle()
        forbid_jobs = objects(cluster, "jobs.batch", **{"app.kubernetes.io/name": "forbid"})
        assert len(forbid_jobs) == 1
        active = cluster.get(cronjobs, "default", "forbid")["status"]["active"]
        assert [(a["kind"], a["name"], a["uid"]) for a in active] == [
            ("Job", forbid_jobs[0]["metadata"]["name"], forbid_jobs[0]["metadata"]["uid"])]
        wait_for(lambda: len([j for j in objects(cluster, "jobs.batch", **{"app.kubernetes.io/name": "replace"})
                              if not j["metadata"].get("deletionTimestamp")]) == 1, 5, 0.01, what="one replace job")
        active = cluster.get(cronjobs, "default", "replace")["status"]["active"]
        assert len(active) == 1


def test_failed_runs_keep_one_and_manual_runs_are_not_active():
    with simulated(time_scale=600) as (cluster, manager):
        Programs(cluster, broken="fail", manual="hold")
        cronjobs, jobs = rt(cluster, "cronjobs.batch"), rt(cluster, "jobs.batch")
        broken = cronjob("broken")
        broken["spec"]["jobTemplate"]["spec"]["backoffLimit"] = 0
        cluster.create(cronjobs, "default", broken)
        wait_for(lambda: any(r == "SuccessfulDelete" for r, _m in reasons(cluster, "CronJob", "broken")), interval=0.01,
                 what="a failed job cleaned up")
        cluster.patch(cronjobs, "default", "broken", "merge", {"spec": {"suspend": True}})
        assert manager.wait_idle()
        wait_for(lambda: len(objects(cluster, "jobs.batch", **{"app.kubernetes.io/name": "broken"})) == 1, interval=0.01,
                 what="failedJobsHistoryLimit 1")
        assert "lastSuccessfulTime" not in cluster.get(cronjobs, "default", "broken")["status"]

        cluster.create(cronjobs, "default", cronjob("manual", schedule="0 0 1 1 *",
                                                    template=pod_template({"app": "manual"})))
        run = trigger(cluster, "default", "manual")
        assert run["metadata"]["name"].startswith("manual-manual-")
        assert run["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
        wait_for(lambda: objects(cluster, "pods", app="manual"), interval=0.01, what="the manual run's pod")
        assert manager.wait_idle()
        assert "active" not in cluster.get(cronjobs, "default", "manual")["status"]
        assert ("UnexpectedJob", f"Saw a job that the controller did not create or forgot: {run['metadata']['name']}") \
            in reasons(cluster, "CronJob", "manual")
        pod = objects(cluster, "pods", app="manual")[0]
        finish_pod(cluster, "default", pod["metadata"]["name"], 0)
        wait_for(lambda: cluster.get(cronjobs, "default", "manual")["status"].get("lastSuccessfulTime"), interval=0.01,
                 what="lastSuccessfulTime from the manual run")
        assert "Complete" in conditions(cluster.get(jobs, "default", run["metadata"]["name"]))


def test_invalid_schedule_is_reported():
    with simulated() as (cluster, manager):
        cluster.create(rt(cluster, "cronjobs.batch"), "default", cronjob("bad", schedule="61 * * * *"))
        assert manager.wait_idle()
        assert ("InvalidSchedule", "invalid schedule: 61 * * * * : end of range (61) above maximum (59): 61") in \
            reasons(cluster, "CronJob", "bad")


# ----------------------------------------------------------------------------- Deployments, ReplicaSets
def deployment(name, replicas=3, image="web:1"):
    template = pod_template({"app": name}, restart="Always")
    template["spec"]["containers"][0]["image"] = image
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}}


def ready_deployment(cluster, name, replicas):
    def check():
        d = cluster.get(rt(cluster, "deployments.apps"), "default", name)
        status = d.get("status") or {}
        if status.get("availableReplicas", 0) == replicas and status.get("updatedReplicas", 0) == replicas and \
                status.get("replicas", 0) == replicas and status.get("observedGeneration") == d["metadata"]["generation"]:
            return d
        return None
    return wait_for(check, interval=0.01, what=f"deployment {name} at {replicas}")


def test_deployment_creates_a_hashed_replicaset_that_runs_the_pods():
    with simulated() as (cluster, manager):
        made = cluster.create(rt(cluster, "deployments.apps"), "default", deployment("web"))
        done = ready_deployment(cluster, "web", 3)
        assert manager.wait_idle()
        done = cluster.get(rt(cluster, "deployments.apps"), "default", "web")
        replica_sets = objects(cluster, "replicasets.apps")
        assert len(replica_sets) == 1
        rs = replica_sets[0]
        pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
        assert rs["metadata"]["name"] == f"web-{pod_hash}" and pod_hash.isalnum()
        assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": pod_hash}
        assert rs["metadata"]["annotations"] == {"deployment.kubernetes.io/desired-replicas": "3",
                                                 "deployment.kubernetes.io/max-replicas": "4",
                                                 "deployment.kubernetes.io/revision": "1"}
        assert rs["metadata"]["ownerReferences"][0]["uid"] == made["metadata"]["uid"]
        assert rs["status"]["replicas"] == rs["status"]["readyReplicas"] == rs["status"]["availableReplicas"] == 3
        assert done["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        assert done["status"]["readyReplicas"] == 3 and "unavailableReplicas" not in done["status"]
        assert conditions(done) == {
            "Available": ("True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
            "Progressing": ("True", "NewReplicaSetAvailable", f'ReplicaSet "{rs["metadata"]["name"]}" has successfully progressed.')}
        pods = objects(cluster, "pods", app="web")
        assert len(pods) == 3 and all(p["metadata"]["labels"]["pod-template-hash"] == pod_hash for p in pods)
        assert all(p["metadata"]["name"].startswith(rs["metadata"]["name"] + "-") for p in pods)
        assert all(p["status"]["phase"] == "Running" and p["spec"]["nodeName"] for p in pods)
        assert ("ScalingReplicaSet", f"Scaled up replica set {rs['metadata']['name']} to 3 from 0") in \
            reasons(cluster, "Deployment", "web")
        # the same template always gives the same hash
        cluster.create(rt(cluster, "namespaces"), None, {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": "other"}})
        cluster.create(rt(cluster, "deployments.apps"), "other", deployment("web"))
        assert manager.wait_idle()
        assert [r["metadata"]["name"] for r in objects(cluster, "replicasets.apps", "other")] == [rs["metadata"]["name"]]


def test_scaling_replacing_deleted_pods_and_rolling_out_a_new_template():
    with simulated() as (cluster, manager):
        deployments, pods_rt = rt(cluster, "deployments.apps"), rt(cluster, "pods")
        cluster.create(deployments, "default", deployment("api", replicas=2))
        ready_deployment(cluster, "api", 2)
        victim = objects(cluster, "pods", app="api")[0]
        cluster.delete(pods_rt, "default", victim["metadata"]["name"])
        wait_for(lambda: len([p for p in objects(cluster, "pods", app="api") if not p["metadata"].get("deletionTimestamp")
                              and p["status"].get("phase") == "Running"]) == 2, 5, 0.01, what="a replacement pod")
        assert victim["metadata"]["name"] not in [p["metadata"]["name"] for p in objects(cluster, "pods", app="api")
                                                  if not p["metadata"].get("deletionTimestamp")]
        cluster.patch(deployments, "default", "api", "merge", {"spec": {"replicas": 4}})
        ready_deployment(cluster, "api", 4)
        cluster.patch(deployments, "default", "api", "merge", {"spec": {"replicas": 1}})
        ready_deployment(cluster, "api", 1)
        wait_for(lambda: len(objects(cluster, "pods", app="api")) == 1, interval=0.01, what="scale down")
        old_rs = objects(cluster, "replicasets.apps")[0]["metadata"]["name"]
        cluster.patch(deployments, "default", "api", "strategic",
                      {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "web:2"}]}}}})
        done = ready_deployment(cluster, "api", 1)
        assert manager.wait_idle()
        by_name = {r["metadata"]["name"]: r for r in objects(cluster, "replicasets.apps")}
        new_rs = next(n for n in by_name if n != old_rs)
        assert by_name[old_rs]["spec"]["replicas"] == 0 and by_name[new_rs]["spec"]["replicas"] == 1
        assert by_name[new_rs]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        done = cluster.get(deployments, "default", "api")
        assert done["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        wait_for(lambda: [p["spec"]["containers"][0]["image"] for p in objects(cluster, "pods", app="api")] == ["web:2"], interval=0.01,
                 what="the old pod to go")
        said = reasons(cluster, "Deployment", "api")
        assert ("ScalingReplicaSet", f"Scaled down replica set {old_rs} to 0 from 1") in said
        assert ("ScalingReplicaSet", f"Scaled up replica set {new_rs} to 1 from 0") in said


def test_replicaset_adopts_matching_orphans():
    with simulated() as (cluster, manager):
        cluster.create(rt(cluster, "pods"), "default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "stray", "labels": {"tier": "cache"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
        rs = cluster.create(rt(cluster, "replicasets.apps"), "default", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "cache"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"tier": "cache"}},
                     "template": pod_template({"tier": "cache"}, restart="Always")}})
        wait_for(lambda: (cluster.get(rt(cluster, "replicasets.apps"), "default", "cache").get("status") or {})
                 .get("readyReplicas") == 2, 5, 0.01, what="two ready replicas")
        assert manager.wait_idle()
        pods = objects(cluster, "pods", tier="cache")
        assert len(pods) == 2 and "stray" in [p["metadata"]["name"] for p in pods]
        stray = cluster.get(rt(cluster, "pods"), "default", "stray")
        assert stray["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]


# ------------------------------------------------------------------------------------------ DaemonSets
def daemonset(name, **pod_spec):
    template = pod_template({"app": name}, restart="Always")
    template["spec"].update(pod_spec)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": template}}


def daemon_pods(cluster, name):
    return {p["spec"].get("nodeName"): p for p in objects(cluster, "pods", app=name)
            if not p["metadata"].get("deletionTimestamp")}


def test_daemonset_runs_one_pod_per_eligible_node_and_follows_node_changes():
    with simulated() as (cluster, manager):
        nodes, pods_rt = rt(cluster, "nodes"), rt(cluster, "pods")
        cluster.create(rt(cluster, "daemonsets.apps"), "default", daemonset("agent"))
        wait_for(lambda: set(daemon_pods(cluster, "agent")) == {"worker-a", "worker-b"}, interval=0.01, what="a pod per worker")
        assert manager.wait_idle()
        pod = daemon_pods(cluster, "agent")["worker-a"]
        assert pod["metadata"]["labels"]["pod-template-generation"] == "1"
        assert pod["metadata"]["labels"]["controller-revision-hash"]
        assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-a"]}]}]}
        assert {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]} == {
            ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")}
        status = cluster.get(rt(cluster, "daemonsets.apps"), "default", "agent")["status"]
        assert status == {"currentNumberScheduled": 2, "numberMisscheduled": 0, "desiredNumberScheduled": 2,
                          "numberReady": 2, "observedGeneration": 1, "updatedNumberScheduled": 2, "numberAvailable": 2}
        # a new node gets a pod; a cordoned node keeps its pod
        cluster.create(nodes, None, node("worker-c", role="worker"))
        cluster.patch(nodes, None, "worker-a", "strategic", {"spec": {"unschedulable": True}})
        wait_for(lambda: set(daemon_pods(cluster, "agent")) == {"worker-a", "worker-b", "worker-c"}, interval=0.01, what="worker-c")
        # a deleted pod is replaced on its node
        old = daemon_pods(cluster, "agent")["worker-b"]["metadata"]["name"]
        cluster.delete(pods_rt, "default", old)
        wait_for(lambda: daemon_pods(cluster, "agent").get("worker-b", {}).get("metadata", {}).get("name") not in (None, old), interval=0.01,
                 what="a replacement on worker-b")
        assert ("SuccessfulCreate", f"Created pod: {pod['metadata']['name']}") in reasons(cluster, "DaemonSet", "agent")


def test_daemonset_honours_node_selector_and_taints():
    with simulated() as (cluster, manager):
        nodes, daemonsets = rt(cluster, "nodes"), rt(cluster, "daemonsets.apps")
        cluster.create(daemonsets, "default", daemonset("everywhere", tolerations=[
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]))
        cluster.create(daemonsets, "default", daemonset("selective", nodeSelector={"handler": "yes"}))
        wait_for(lambda: set(daemon_pods(cluster, "everywhere")) == {"cp", "worker-a", "worker-b"}, interval=0.01, what="everywhere")
        assert manager.wait_idle()
        assert daemon_pods(cluster, "selective") == {}
        cluster.patch(nodes, None, "worker-b", "merge", {"metadata": {"labels": {"handler": "yes"}}})
        wait_for(lambda: set(daemon_pods(cluster, "selective")) == {"worker-b"}, interval=0.01, what="the labelled node")
        cluster.patch(nodes, None, "worker-b", "merge", {"metadata": {"labels": {"handler": None}}})
        wait_for(lambda: daemon_pods(cluster, "selective") == {}, interval=0.01, what="the pod to leave the unlabelled node")
        # an untolerated NoExecute taint removes the pod
        cluster.patch(nodes, None, "worker-a", "strategic",
                      {"spec": {"taints": [{"key": "maintenance", "value": "yes", "effect": "NoExecute"}]}})
        wait_for(lambda: set(daemon_pods(cluster, "everywhere")) == {"cp", "worker-b"}, interval=0.01, what="the tainted node")
        assert manager.wait_idle()
        status = cluster.get(daemonsets, "default", "everywhere")["status"]
        assert status["desiredNumberScheduled"] == 2 and status["currentNumberScheduled"] == 2
        assert cluster.get(daemonsets, "default", "selective")["status"]["desiredNumberScheduled"] == 0
