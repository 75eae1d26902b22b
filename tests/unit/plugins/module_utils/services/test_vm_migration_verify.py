"""Options of vm_migration_verify, its descheduler log, and the evidence files (the waiting itself runs against the
simulator)."""
from __future__ import annotations

import json
import time

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_verify as vf
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.cluster.descheduler import DeschedulerInstallation
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import klog
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure, InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params

from .. import k8s_objects as k8s

BASELINE = {"vm-1": {"namespace": "desched-test", "name": "vm-1", "uid": "uid-vm-1", "node": "worker-a", "launcher": "virt-launcher-vm-1-abcde"}}


def options(**given):
    return vf.VmMigrationVerifyOptions.from_params(spec_params(vf.ARG_SPEC, **given))


def test_names_take_the_namespace_option_or_their_own():
    selected = vf.selection(options(mode="record", names=["vm-1", "other/vm-2"], namespace="desched-test"))
    assert selected.names == [("desched-test", "vm-1"), ("other", "vm-2")]


@pytest.mark.parametrize("given, path", [
    ({"names": ["vm-1"]}, "names[0]"),
    ({"namespace": "Bad_NS"}, "namespace"),
    ({"label_selector": "app in (a"}, "label_selector"),
    ({"timeout": 0}, "timeout"),
    ({"min_moved": -1}, "min_moved"),
])
def test_bad_options_name_the_option(given, path):
    with pytest.raises(InvalidOption) as error:
        vf.selection(options(**given))
    assert error.value.path == path


def test_min_moved_names_the_procedure_step_not_the_page():
    with pytest.raises(InvalidOption) as error:
        vf.selection(options(min_moved=-1))
    assert error.value.message == ("min_moved: must be 0 or more. Give how many of the VMs must move (the bounded policy of the rebalance "
                                   "procedure, Configure a Bounded VM Rebalance Policy, moves one per cycle).")
    assert "page" not in error.value.message


def test_verify_needs_a_baseline():
    with pytest.raises(InvalidOption) as error:
        vf.run(options(baseline=None), False)
    assert error.value.path == "baseline"


def test_record_needs_the_vms_and_verify_a_baseline_with_vms():
    with pytest.raises(InvalidOption) as error:
        vf.run(options(mode="record"), False)
    assert error.value.path == "names" and "record needs the VMs" in error.value.message
    with pytest.raises(InvalidOption) as error:
        vf.selection(options(baseline={"junk": {"namespace": "ns"}}))
    assert error.value.path == "baseline" and "no VM with namespace, name and node" in error.value.message


def test_verify_takes_the_baseline_keyed_by_namespace_and_name():
    selected = vf.selection(options(baseline=BASELINE, namespace="desched-test", label_selector="app=desched-test"))
    assert list(selected.baseline) == ["desched-test/vm-1"] and selected.baseline["desched-test/vm-1"]["node"] == "worker-a"
    assert (selected.namespace, selected.label_selector, selected.names) == ("desched-test", "app=desched-test", [])


# ------------------------------------------------------------------------------------------ descheduler log
class LogClient:
    """The descheduler CronJob with one finished and one pending Job Pod; pods/log answers per Pod, or fails."""

    def __init__(self, fail=False):
        self.fail = fail
        self.logs = []

    def find_kinds(self, wanted):
        return {pair: pair for pair in wanted}

    def list(self, resource, namespace=None, **_kwargs):
        pods = [{"metadata": {"name": "descheduler-1-" + suffix, "creationTimestamp": created,
                              "ownerReferences": [{"kind": "Job", "name": "descheduler-1"}]}, "status": {"phase": phase}}
                for suffix, created, phase in (("b", "2026-11-30T10:00:02Z", "Pending"), ("a", "2026-11-30T10:00:01Z", "Succeeded"))]
        return {"CronJob": [k8s.cronjob()], "Job": [k8s.job("descheduler-1", "2026-11-30T10:00:00Z")], "Pod": pods}.get(resource[0], [])

    def pod_log(self, namespace, name, container=None, tail_lines=None):
        if self.fail:
            raise RuntimeError("connection reset")
        self.logs.append((namespace, name, container))
        return 'I1130 10:00:05.000000       1 x.go:1] "Eviction in background assumed" pod="desched-test/virt-launcher-vm-1-abcde"'


def test_descheduler_log_reads_the_started_pods_of_the_last_jobs():
    client = LogClient()
    log = vf.DeschedulerLog(DeschedulerInstallation(client, "descheduler", "descheduler"))
    [record] = log.read()
    assert record["pod"] == "descheduler-1-a" and record["fields"]["pod"] == "desched-test/virt-launcher-vm-1-abcde"
    assert (log.pods, log.reads, log.error, log.namespace) == (["descheduler-1-a"], 1, None, "descheduler")
    assert client.logs == [("descheduler", "descheduler-1-a", "descheduler")]   # the pending Pod has no log yet


def test_descheduler_log_that_cannot_be_read_is_reported_not_raised():
    log = vf.DeschedulerLog(DeschedulerInstallation(LogClient(fail=True), "descheduler", "descheduler"))
    assert log.read() == [] and log.error == "connection reset" and log.reads == 1


class GoneJobsClient(LogClient):
    """The CronJob's history limit deleted the run's Job and Pods: nothing left to read."""

    def list(self, resource, namespace=None, **_kwargs):
        return [k8s.cronjob()] if resource[0] == "CronJob" else []


def test_the_runs_own_log_lines_stay_evidence_when_its_job_is_gone():
    given = klog.parse_lines(['I1130 10:00:05.000000       1 x.go:1] "Eviction in background assumed" '
                              'pod="desched-test/virt-launcher-vm-1-abcde"'])
    log = vf.DeschedulerLog(DeschedulerInstallation(GoneJobsClient(), "descheduler", "descheduler"), given)
    assert log.records == given and log.read() == given and log.pods == []
    failing = vf.DeschedulerLog(DeschedulerInstallation(LogClient(fail=True), "descheduler", "descheduler"), given)
    assert failing.read() == given and failing.error == "connection reset"


def output(verdict="pass", reason=None):
    vm = {"namespace": "desched-test", "name": "vm-1", "verdict": verdict, "reason": reason, "source_node": "worker-a",
          "node": "worker-b", "trigger": "descheduler", "checks": {"uid_unchanged": {"result": "pass", "reason": ""}},
          "migration": {"name": "kubevirt-evacuation-abcde", "phase": "Succeeded", "duration_seconds": 10.0}}
    return {"passed": verdict == "pass", "verified_at": "2026-11-30T22:12:00Z", "waited_seconds": 12.5, "timeout": 600,
            "require_trigger": "descheduler", "counts": {"moved": 1, "vms": 1, "min_moved": 1}, "vms": [vm]}


def test_evidence_json_and_markdown(tmp_path):
    paths = vf.write_evidence(str(tmp_path / "out" / "evidence"), output())
    assert paths == {"json": str(tmp_path / "out" / "evidence.json"), "markdown": str(tmp_path / "out" / "evidence.md")}
    assert json.loads((tmp_path / "out" / "evidence.json").read_text())["passed"] is True
    table = (tmp_path / "out" / "evidence.md").read_text()
    assert table.startswith("# VM migration verification: PASSED")
    assert "| desched-test/vm-1 | pass | worker-a | worker-b | kubevirt-evacuation-abcde | Succeeded | 10 | descheduler | pass |  |" in table


def test_markdown_escapes_pipes_in_reasons():
    assert "a \\| b" in vf.markdown(output("fail", "a | b"))


# ------------------------------------------------------------------------------------------ trigger evidence
class GoneEvidenceClient:
    """vm-1 moved worker-a -> worker-b by an evacuation that Succeeded; the descheduler's Jobs and Pods are gone (its
    history limit), the VMI no longer carries the eviction source; worker-a cordoned or not; watches send nothing."""

    def __init__(self, cordoned=False, forbid_nodes=False):
        self.cordoned = cordoned
        self.forbid_nodes = forbid_nodes
        self.retried = []
        self.last_resource_version = "1"
        self.gets = []
        self.vmim = k8s.vmim("kubevirt-evacuation-abcde", vmi_name="vm-1", phase="Succeeded")
        self.vmim["metadata"]["annotations"] = {"kubevirt.io/evacuationMigration": "worker-a"}

    def find_kinds(self, wanted):
        return {pair: pair for pair in wanted}

    def require_kind(self, kind, group=None, fix=None):
        return (kind, group)

    def list(self, resource, namespace=None, **_kwargs):
        moved = k8s.vmi("vm-1", node="worker-b")
        vm = k8s.vm("vm-1")
        vm["status"] = {"printableStatus": "Running", "ready": True}
        return {"VirtualMachineInstance": [moved], "VirtualMachineInstanceMigration": [self.vmim], "VirtualMachine": [vm],
                "CronJob": [k8s.cronjob()]}.get(resource[0], [])

    def watch(self, *_args, **_kwargs):
        time.sleep(0.05)
        return iter(())

    def get(self, resource, name, namespace=None):
        self.gets.append((resource[0], name))
        if self.forbid_nodes:
            raise ApiFailure("get nodes " + name, 403, "Forbidden", 'nodes "{0}" is forbidden'.format(name))
        return k8s.node(name, unschedulable=self.cordoned)

    def pod_log(self, *_args, **_kwargs):
        raise AssertionError("no Pod left to read")


def verify_gone(client, require):
    opts = options(mode="verify", baseline=BASELINE, names=["desched-test/vm-1"], require_trigger=require, timeout=5)
    return vf.verify(opts, vf.selection(opts), client)


def test_an_evacuation_whose_evidence_is_gone_is_reported_unknown_with_the_reason_not_drain():
    client = GoneEvidenceClient()
    result = verify_gone(client, "drain")
    [vm] = result["vms"]
    assert vm["trigger"] == "unknown" and vm["verdict"] == "fail" and vm["checks"]["trigger"]["result"] == "fail"
    assert "no evidence left" in vm["trigger_reason"] and "not taken for a drain" in vm["trigger_reason"]
    assert client.gets == [("Node", "worker-a")]   # the evacuated node was read once, for evidence of a drain
    assert result["drain_evidence"] == {"nodes": {}, "errors": []}
    assert "- desched-test/vm-1: trigger unknown: an evacuation from worker-a" in vf.markdown(result)


def test_an_evacuation_from_a_cordoned_node_is_a_drain():
    result = verify_gone(GoneEvidenceClient(cordoned=True), "drain")
    [vm] = result["vms"]
    assert vm["trigger"] == "drain" and vm["verdict"] == "pass", vm
    assert vm["trigger_reason"] == "an evacuation while node worker-a is cordoned (spec.unschedulable)"
    assert result["drain_evidence"]["nodes"] == {"worker-a": "node worker-a is cordoned (spec.unschedulable)"}


def test_a_node_that_cannot_be_read_is_no_evidence_and_is_reported():
    result = verify_gone(GoneEvidenceClient(forbid_nodes=True), "any")
    [vm] = result["vms"]
    assert result["passed"] and vm["trigger"] == "unknown"
    assert result["drain_evidence"]["errors"] and "forbidden" in result["drain_evidence"]["errors"][0]
