"""The one reader of a live Descheduler installation, through a fake client: the kinds in one discovery, the workload
(a CronJob before a Deployment), the policy source as descheduler_policy locates it, the workload's Pods and a Pod's
log (none when the Pod is gone since it was listed), and kinds that are not served read as empty."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import LOG_TAIL_LINES, DeschedulerInstallation
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, KindNotServed

from .. import k8s_objects as k8s

LINE = 'I1130 10:05:01.000000       1 x.go:1] "Number of evictions/requests" totalEvicted=0 evictionRequests=1'


class FakeClient:
    """Serves `objects` by kind (a kind missing from `served` is not served; one in `gone` was removed since discovery),
    records every call, and answers pods/log with `log`."""

    def __init__(self, objects=None, served=("CronJob", "Deployment", "Job", "Pod"), gone=(), log=LINE):
        self.objects = objects or {}
        self.served = served
        self.gone = gone
        self.log = log
        self.calls = []

    def find_kinds(self, wanted):
        wanted = list(wanted)
        self.calls.append(("find_kinds", tuple(kind for kind, _group in wanted)))
        return {(kind, group): (kind, group) if kind in self.served else None for kind, group in wanted}

    def list(self, resource, namespace=None, **selectors):
        self.calls.append(("list", resource[0], namespace))
        if resource[0] in self.gone:
            raise KindNotServed(resource[0], resource[1])
        return list(self.objects.get(resource[0], []))

    def pod_log(self, namespace, name, container=None, tail_lines=None):
        self.calls.append(("pod_log", namespace, name, container, tail_lines))
        return self.log


def installation(client, name="descheduler"):
    return DeschedulerInstallation(client, "descheduler", name)


def lists(client):
    return [call[1] for call in client.calls if call[0] == "list"]


# ------------------------------------------------------------------------------------------ kinds and workload
def test_kinds_in_one_discovery_none_where_not_served():
    client = FakeClient(served=("CronJob", "Job", "Pod"))
    assert installation(client).kinds() == {"CronJob": ("CronJob", "batch"), "Deployment": None, "Job": ("Job", "batch"), "Pod": ("Pod", "")}
    assert client.calls == [("find_kinds", ("CronJob", "Deployment", "Job", "Pod"))]


def test_workload_is_the_cronjob_before_a_deployment():
    client = FakeClient({"CronJob": [k8s.cronjob()], "Deployment": [k8s.deployment()]})
    kind, workload = installation(client).workload()
    assert kind == "CronJob" and workload["metadata"]["uid"] == "uid-cronjob"
    assert lists(client) == ["CronJob", "Deployment"] and all(call[2] == "descheduler" for call in client.calls if call[0] == "list")
    assert installation(FakeClient({"Deployment": [k8s.deployment()]})).workload()[0] == "Deployment"
    assert installation(FakeClient()).workload() == (None, None)


def test_kinds_not_served_or_removed_since_discovery_read_as_empty():
    client = FakeClient({"Deployment": [k8s.deployment()]}, served=("Deployment", "Pod"), gone=("Deployment",))
    assert installation(client).workload() == (None, None)
    assert lists(client) == ["Deployment"]   # the CronJob kind is not served: not listed


# ------------------------------------------------------------------------------------------ policy source
def test_policy_source_from_the_volume_behind_the_flag():
    assert installation(FakeClient({"CronJob": [k8s.cronjob()]})).policy_source() == ("descheduler", "policy.yaml")
    cronjob = k8s.cronjob()
    volume = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"][0]
    volume["configMap"] = {"name": "custom-policy", "items": [{"key": "data.yaml", "path": "policy.yaml"}]}
    assert installation(FakeClient({"CronJob": [cronjob]})).policy_source() == ("custom-policy", "data.yaml")
    assert installation(FakeClient({"Deployment": [k8s.deployment()]})).policy_source() == ("descheduler", "policy.yaml")


def test_policy_source_falls_back_to_the_installation_name_and_policy_yaml():
    assert installation(FakeClient(), name="mine").policy_source() == ("mine", "policy.yaml")   # no workload
    named = k8s.cronjob(["--v=3"], name="mine")   # no --policy-config-file
    assert installation(FakeClient({"CronJob": [named]}), name="mine").policy_source() == ("mine", "policy.yaml")


def test_policy_source_of_a_workload_already_read_lists_nothing():
    client = FakeClient()
    assert installation(client).policy_source("CronJob", k8s.cronjob()) == ("descheduler", "policy.yaml")
    assert lists(client) == []


# ------------------------------------------------------------------------------------------ pods and logs
def test_pods_of_a_cronjob_are_those_of_its_last_jobs():
    owned = {"metadata": {"name": "descheduler-1-x", "creationTimestamp": "2026-11-30T10:00:01Z",
                          "ownerReferences": [{"kind": "Job", "name": "descheduler-1"}]}, "status": {"phase": "Succeeded"}}
    stray = {"metadata": {"name": "other", "creationTimestamp": "2026-11-30T10:00:00Z"}, "status": {}}
    client = FakeClient({"Job": [k8s.job("descheduler-1", "2026-11-30T10:00:00Z")], "Pod": [stray, owned]})
    assert installation(client).pods("CronJob", k8s.cronjob()) == [owned]
    assert lists(client) == ["Job", "Pod"]


def test_pods_of_a_deployment_need_no_jobs():
    deployment = k8s.deployment()
    deployment["spec"]["selector"] = {"matchLabels": {"app": "descheduler"}}
    running = {"metadata": {"name": "descheduler-abc", "labels": {"app": "descheduler"}}, "status": {"phase": "Running"}}
    client = FakeClient({"Pod": [running]})
    assert installation(client).pods("Deployment", deployment) == [running]
    assert lists(client) == ["Pod"]
    assert installation(client).pods(None, None) == []


def test_log_of_a_pod_as_records_with_the_pod():
    client = FakeClient()
    pod = {"metadata": {"name": "descheduler-1-x", "creationTimestamp": "2026-11-30T10:00:00Z"}, "status": {"startTime": "2026-11-30T10:05:00Z"}}
    [record] = installation(client).log(pod, "descheduler")
    assert record["pod"] == "descheduler-1-x" and record["time"] == "2026-11-30T10:05:01Z" and record["fields"]["evictionRequests"] == 1
    assert client.calls[-1] == ("pod_log", "descheduler", "descheduler-1-x", "descheduler", LOG_TAIL_LINES)


class LogFailing(FakeClient):
    """pods/log answered with an API error of `status`."""

    def __init__(self, status):
        super().__init__()
        self.status = status

    def pod_log(self, namespace, name, container=None, tail_lines=None):
        raise ApiFailure("read the log of pod {0}/{1}".format(namespace, name), self.status, "NotFound" if self.status == 404 else "Forbidden", "")


def test_log_of_a_pod_gone_since_it_was_listed_is_none_and_other_errors_fail():
    pod = {"metadata": {"name": "descheduler-6c545b98cd-mncvx"}}
    assert installation(LogFailing(404)).log_unless_gone(pod, "descheduler") is None
    assert [r["pod"] for r in installation(FakeClient()).log_unless_gone(pod, "descheduler")] == ["descheduler-6c545b98cd-mncvx"]
    with pytest.raises(ApiFailure):
        installation(LogFailing(403)).log_unless_gone(pod, "descheduler")
