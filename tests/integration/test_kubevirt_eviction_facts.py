"""`kubevirt_ops.rebalance.kubevirt_eviction_facts` run by the venv's `ansible` (ad hoc, `ansible_connection=local`)
against the simulator: the facts and verdicts it returns, that each verdict is what the simulator then does
when the launcher is evicted, that its requests do not grow with the number of VMIs, that injected faults are
retried, that kinds which are not served are reported, that bad options fail with a message naming them, and that
actual usage (metrics server, Prometheus through the service proxy or directly with a token) stands beside requests
with a finding when a request-based policy would move the wrong VMs.

Scenarios: the bundled ones by name (`rebalance-two-workers`, `acp-default`, `maintenance`, `old-package`,
`deployment-mode`, `openshift`) and this directory's `scenarios/*.yaml` by path."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException
from kubernetes.utils.quantity import parse_quantity

from support.waiting import wait_for

from .ansible_run import short_temp_dir
from .conftest import ROOT

pytestmark = pytest.mark.simulator

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
ANSIBLE = Path(sys.executable).parent / "ansible"
MODULE = "kubevirt_ops.rebalance.kubevirt_eviction_facts"
WEBHOOK = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
NS = "verdicts"


# ------------------------------------------------------------------------------------------ helpers
def run_module(sim, check: bool = False, expect_failure: bool = False, tmpdir: str | None = None, **args) -> dict:
    """Run the module once against `sim` and return its result. `tmpdir` is where kubernetes.core keeps its
    discovery cache (the simulator's own folder by default, so later runs reuse it)."""
    workdir = Path(sim.kubeconfig).parent
    inventory = workdir / "inventory"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter={0}\n".format(sys.executable))
    args.setdefault("kubeconfig", sim.kubeconfig)
    temp = short_temp_dir(Path(tmpdir or workdir / "tmp"))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"), "ANSIBLE_HOME": str(workdir / "ansible"),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0", "TMPDIR": temp,
           "PATH": "{0}:{1}".format(Path(sys.executable).parent, os.environ.get("PATH", ""))}
    command = [str(ANSIBLE), "-i", str(inventory), "localhost", "-m", MODULE, "-a", json.dumps(args)] + (["--check"] if check else [])
    process = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    output = process.stdout
    match = re.search(r"^localhost \| (SUCCESS|FAILED!) => ", output, re.MULTILINE)
    assert match, "no module result:\n{0}\n{1}".format(output, process.stderr)
    result = json.loads(output[match.end():])
    if expect_failure:
        assert process.returncode != 0 and match.group(1) == "FAILED!" and result.get("msg"), output
    else:
        assert process.returncode == 0 and not result.get("failed"), "module failed:\n{0}\n{1}".format(output, process.stderr)
    return result


@pytest.fixture
def simulator(fresh_kubesim):
    return fresh_kubesim


def api_client(sim, context: str = "workload") -> client.ApiClient:
    return config.new_client_from_config(sim.kubeconfig, context=context)


def dynamic_client(sim) -> dynamic.DynamicClient:
    cache = Path(sim.kubeconfig).parent / "discovery-{0}.json".format(time.monotonic_ns())
    return dynamic.DynamicClient(api_client(sim), cache_file=str(cache))


def vmis_of(sim, namespace: str | None = None) -> dict:
    custom = client.CustomObjectsApi(api_client(sim))
    if namespace:
        items = custom.list_namespaced_custom_object("kubevirt.io", "v1", namespace, "virtualmachineinstances")["items"]
    else:
        items = custom.list_cluster_custom_object("kubevirt.io", "v1", "virtualmachineinstances")["items"]
    return {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in items}


def migrations_of(sim, namespace: str) -> list:
    custom = client.CustomObjectsApi(api_client(sim))
    return custom.list_namespaced_custom_object("kubevirt.io", "v1", namespace, "virtualmachineinstancemigrations")["items"]


def evict(sim, namespace: str, pod: str, descheduler: bool = False) -> dict:
    """POST an Eviction as the descheduler or kubectl drain would; the answer as {code, message}."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
    if descheduler:
        body["metadata"]["annotations"] = {"requested-by": "sigs.k8s.io/descheduler"}
    try:
        client.CoreV1Api(api_client(sim)).create_namespaced_pod_eviction(pod, namespace, body)
    except ApiException as error:
        return {"code": error.status, "message": json.loads(error.body).get("message")}
    return {"code": 201, "message": "Success"}


def pod_exists(sim, namespace: str, name: str) -> bool:
    try:
        pod = client.CoreV1Api(api_client(sim)).read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return pod.metadata.deletion_timestamp is None


def create_verdict_vms(sim) -> None:
    dyn = dynamic_client(sim)
    for obj in yaml.safe_load((SCENARIOS / "eviction-verdicts-vms.yaml").read_text())["items"]:
        dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).create(body=obj, namespace=obj["metadata"]["namespace"])

    def all_running():
        vmis = vmis_of(sim, NS)
        ready = [v for v in vmis.values() if (v.get("status") or {}).get("phase") == "Running"
                 and any(c.get("type") == "LiveMigratable" for c in v["status"].get("conditions") or [])]
        return len(ready) == 9 and len(vmis) == 9
    try:
        wait_for(all_running, timeout=60, what="the 9 VMIs of eviction-verdicts-vms.yaml to run")
    except AssertionError as error:
        phases = {name: (vmi.get("status") or {}).get("phase") for (_ns, name), vmi in vmis_of(sim, NS).items()}
        raise AssertionError("{0}; VMI phases: {1}".format(error, phases)) from None


def by_name(result: dict) -> dict:
    return {v["name"]: v for v in result["vmis"]}


def assert_verdict_matches_eviction(sim, fact: dict) -> dict:
    """Evict the VMI's launcher and compare the API's answer with the verdict's eviction_response."""
    answer = evict(sim, fact["namespace"], fact["launcher"]["name"])
    assert answer == fact["eviction_response"], "{0}/{1}: verdict {2} predicted {3}, the API answered {4}".format(
        fact["namespace"], fact["name"], fact["verdict"], fact["eviction_response"], answer)
    return answer


# ------------------------------------------------------------------------------------------ verdicts
@pytest.fixture
def verdicts(simulator):
    sim = simulator(str(SCENARIOS / "eviction-verdicts.yaml"))
    create_verdict_vms(sim)
    return sim


EXPECTED_VERDICTS = {
    "vm-migrate": "migrate", "vm-hang": "migrate", "vm-blocked": "blocked", "vm-restart": "shutdown_restart",
    "vm-once": "shutdown_lost", "vm-external": "external", "vm-pdb": "blocked", "vmi-bare": "shutdown_lost",
}


def test_verdicts_facts_and_findings_for_every_kind_of_vm(verdicts):
    result = run_module(verdicts, namespaces=[NS])
    vmis = by_name(result)
    replica = [name for name in vmis if name.startswith("vmirs")]
    assert len(replica) == 1 and vmis[replica[0]]["verdict"] == "shutdown_replace"
    assert {name: vmis[name]["verdict"] for name in EXPECTED_VERDICTS} == EXPECTED_VERDICTS
    assert vmis["vm-blocked"]["eviction_response"]["message"] == (
        WEBHOOK + "VMI vm-blocked is configured with an eviction strategy but is not live-migratable")
    assert vmis["vm-blocked"]["live_migratable_reason"] == "DisksNotLiveMigratable"
    assert vmis["vm-pdb"]["eviction_response"] == {"code": 429, "message": PDB_MESSAGE} and vmis["vm-pdb"]["pdbs"] == ["guarded"]
    assert vmis["vm-migrate"]["pvcs"][0]["read_write_many"] and vmis["vm-migrate"]["cluster_strategy"] == "LiveMigrate"
    assert vmis["vm-once"]["run_strategy"] == "Once" and vmis["vmi-bare"]["owner_kind"] is None
    assert vmis["vm-migrate"]["launcher"]["request_evict_only"] and vmis["vm-migrate"]["launcher"]["domain_annotation"]
    codes = {(f["code"], f["name"]) for f in result["findings"]}
    assert ("not_migratable_with_migrating_strategy", "vm-blocked") in codes
    assert ("not_migratable_with_migrating_strategy", "vm-restart") in codes
    assert ("strategy_differs_from_cluster", "vm-once") in codes
    assert ("pdb_needs_scale_subresource", "guarded") in codes
    assert result["pdbs"][0]["disruptions_allowed"] == 0 and result["pdbs"][0]["needs_scale_subresource"]
    assert result["cluster"]["eviction_strategy"] == "LiveMigrate"
    assert result["summary"]["verdicts"]["migrate"] == 2 and result["changed"] is False


def test_each_verdict_is_what_the_simulator_does_when_the_launcher_is_evicted(verdicts):
    before = by_name(run_module(verdicts, namespaces=[NS], include=["vmis"]))
    for fact in before.values():
        assert_verdict_matches_eviction(verdicts, fact)
    replica_name = [name for name in before if name.startswith("vmirs")][0]

    def outcome_reached():
        vmis = {name: vmi for (_ns, name), vmi in vmis_of(verdicts, NS).items()}
        # a VMI just created has no status yet
        status = {name: vmi.get("status") or {} for name, vmi in vmis.items()}
        migrate = vmis.get("vm-migrate")
        restarted = vmis.get("vm-restart")
        replacements = [n for n in vmis if n.startswith("vmirs") and n != replica_name and status[n].get("phase") == "Running"]
        return (migrate and status["vm-migrate"].get("nodeName") != before["vm-migrate"]["node"]
                and restarted and restarted["metadata"]["uid"] != before["vm-restart"]["uid"]
                and status["vm-restart"].get("phase") == "Running" and replacements
                and status.get("vm-once", {}).get("phase") in (None, "Failed", "Succeeded")
                and status.get("vmi-bare", {}).get("phase") in (None, "Failed", "Succeeded"))
    wait_for(outcome_reached, timeout=60, what="migrate, restart, replace and shutdown outcomes")
    vmis = {name: vmi for (_ns, name), vmi in vmis_of(verdicts, NS).items()}
    # migrate: same UID on another node, a Succeeded evacuation migration
    assert vmis["vm-migrate"]["metadata"]["uid"] == before["vm-migrate"]["uid"]
    succeeded = [m for m in migrations_of(verdicts, NS) if m["spec"]["vmiName"] == "vm-migrate"]
    assert succeeded and succeeded[0]["status"]["phase"] == "Succeeded" and succeeded[0]["metadata"]["name"].startswith("kubevirt-evacuation-")
    # blocked: nothing moved, the launcher is still there
    for name in ("vm-blocked", "vm-pdb"):
        assert vmis[name]["metadata"]["uid"] == before[name]["uid"] and pod_exists(verdicts, NS, before[name]["launcher"]["name"])
    # shutdown_lost: nothing started the VM again
    time.sleep(1.0)
    vmis = {name: vmi for (_ns, name), vmi in vmis_of(verdicts, NS).items()}
    for name in ("vm-once", "vmi-bare"):
        assert name not in vmis or vmis[name]["status"].get("phase") in ("Failed", "Succeeded"), vmis.get(name)
    after = by_name(run_module(verdicts, namespaces=[NS], include=["vmis"]))
    assert after["vm-migrate"]["verdict"] == "migrate" and after["vm-migrate"]["migrations"][0]["phase"] == "Succeeded"
    assert after["vm-once"]["verdict"] == "not_running" if "vm-once" in after else True


def test_in_progress_while_an_evacuation_runs_and_the_second_eviction_agrees(verdicts):
    before = by_name(run_module(verdicts, namespaces=[NS], names=["vm-hang"], include=["vmis"]))
    answer = evict(verdicts, NS, before["vm-hang"]["launcher"]["name"], descheduler=True)
    assert answer == before["vm-hang"]["eviction_response"]
    wait_for(lambda: [m for m in migrations_of(verdicts, NS) if m["spec"]["vmiName"] == "vm-hang"], what="the evacuation migration of vm-hang")
    fact = by_name(run_module(verdicts, namespaces=[NS], names=["vm-hang"], include=["vmis"]))["vm-hang"]
    assert fact["verdict"] == "in_progress" and fact["evacuation_node_name"] == before["vm-hang"]["node"]
    assert fact["eviction_source"] == "descheduler" and fact["unfinished_migrations"]
    in_progress = WEBHOOK + 'Evacuation in progress: Eviction triggered evacuation of VMI "verdicts/vm-hang"'
    assert fact["eviction_response"] == {"code": 429, "message": in_progress}
    assert_verdict_matches_eviction(verdicts, fact)


def test_external_strategy_marks_the_vmi_and_keeps_the_launcher(verdicts):
    fact = by_name(run_module(verdicts, namespaces=[NS], names=["vm-external"], include=["vmis"]))["vm-external"]
    assert_verdict_matches_eviction(verdicts, fact)
    marked = vmis_of(verdicts, NS)[(NS, "vm-external")]
    assert marked["status"].get("evacuationNodeName") == fact["node"] and pod_exists(verdicts, NS, fact["launcher"]["name"])


def test_external_strategy_gets_no_kubevirt_migration(verdicts):
    """Upstream `VMIMigratableOnEviction` is false for External: the VMI stays marked and nothing migrates it."""
    fact = by_name(run_module(verdicts, namespaces=[NS], names=["vm-external"], include=["vmis"]))["vm-external"]
    evict(verdicts, NS, fact["launcher"]["name"])
    verdicts.settle()
    time.sleep(1.0)
    assert not [m for m in migrations_of(verdicts, NS) if m["spec"]["vmiName"] == "vm-external"]
    after = vmis_of(verdicts, NS)[(NS, "vm-external")]
    assert after["metadata"]["uid"] == fact["uid"] and after["status"]["nodeName"] == fact["node"]
    assert after["status"].get("evacuationNodeName") == fact["node"]


def test_check_mode_and_a_second_run_change_nothing(verdicts):
    first = run_module(verdicts, namespaces=[NS])
    verdicts.reset_counters()
    second = run_module(verdicts, namespaces=[NS], check=True)
    assert second["changed"] is False
    assert [(v["name"], v["verdict"]) for v in second["vmis"]] == [(v["name"], v["verdict"]) for v in first["vmis"]]
    verbs = {key.split(" ", 1)[0] for key in verdicts.counters()}
    assert verbs <= {"get", "list"}, verdicts.counters()


# ------------------------------------------------------------------------------------------ request counts
SUBRESOURCE_DISCOVERY = "get /apis/subresources.kubevirt.io/"


def test_requests_do_not_depend_on_the_number_of_vmis(simulator, tmp_path):
    counts = {}
    for name, size in (("counts-small", 10), ("counts-large", 300)):
        sim = simulator(str(SCENARIOS / (name + ".yaml")))
        runs = []
        for _run in range(2):   # without a discovery cache, then with the cache the first run wrote
            sim.reset_counters()
            result = run_module(sim, tmpdir=str(tmp_path / name), include=["cluster", "nodes", "vmis", "descheduler"])
            assert len(result["vmis"]) == size and result["summary"]["verdicts"]["migrate"] == size
            assert result["served"]["ModuleInfo"] is False and result["served"]["KubeDescheduler"] is False
            runs.append(sim.counters())
        # The kubernetes client's discovery reads a cached group version again whenever its resource list is empty
        # (kubernetes/dynamic/discovery.py `if not rg.resources`), and virt-api's subresources.kubevirt.io lists only
        # subresources (`virtualmachines/start`, ...), which leave it empty: a run from the cache reads those twice.
        expected_second = dict(runs[0], **{key: count + 1 for key, count in runs[0].items() if key.startswith(SUBRESOURCE_DISCOVERY)})
        assert runs[1] == expected_second, "a run with the discovery cache differs:\nfirst {0}\nsecond {1}".format(*runs)
        counts[name] = runs[0]
    small, large = counts["counts-small"], counts["counts-large"]
    assert small == large, "requests differ:\nsmall {0}\nlarge {1}".format(small, large)
    assert not [key for key in small if key.startswith("get ") and not key.startswith("get /")], small   # no per-object GETs
    assert small["list virtualmachineinstances"] == 1 and small["list pods"] == 1
    # discovery: each group version once a run, although ModuleInfo and KubeDescheduler are never found
    discovery = {key: count for key, count in small.items() if key.startswith("get /api")}
    assert discovery and set(discovery.values()) == {1}, discovery
    assert sum(small.values()) <= 40, small


# ------------------------------------------------------------------------------------------ faults
@pytest.fixture
def small(simulator):
    return simulator(str(SCENARIOS / "counts-small.yaml"))


def test_503s_on_the_vmi_list_are_retried(small):
    run_module(small)   # fills the discovery cache
    small.add_fault(verb="list", resource="virtualmachineinstances", status=503, count=2)
    result = run_module(small, include=["vmis"])
    assert len(result["vmis"]) == 10 and result["api"]["retries"] == 2
    assert [r["status"] for r in result["api"]["retried"]] == [503, 503]


def test_429_with_retry_after_is_honoured(small):
    run_module(small)
    small.add_fault(verb="list", resource="pods", status=429, retryAfter=1, count=1)
    started = time.monotonic()
    result = run_module(small, include=["vmis"])
    assert time.monotonic() - started >= 1.0
    assert result["api"]["retried"] == [{"request": "list pods with labelSelector kubevirt.io=virt-launcher with fieldSelector "
                                                    "status.phase!=Succeeded,status.phase!=Failed", "status": 429,
                                         "reason": result["api"]["retried"][0]["reason"], "wait": 1.0}]


def test_dropped_connections_are_retried(small):
    run_module(small)
    small.add_fault(verb="list", resource="virtualmachines", drop=True, count=3)
    result = run_module(small, include=["vmis"])
    assert len(result["vmis"]) == 10
    assert [(r["request"], r["status"]) for r in result["api"]["retried"]] == [("list virtualmachines.kubevirt.io", 0)] * 3


def test_a_lasting_500_fails_with_the_request_and_the_api_reason(small):
    run_module(small)
    small.add_fault(verb="list", resource="nodes", status=500, message="etcdserver: request timed out")
    result = run_module(small, expect_failure=True, api_retries=1, include=["nodes"])
    assert result["msg"].startswith("list nodes: 500 ")
    assert "etcdserver: request timed out" in result["msg"] and "gave up after 2 attempts" in result["msg"]
    assert result["error"]["status"] == 500 and result["error"]["type"] == "ApiFailure"


def test_a_deadline_shorter_than_retry_after_fails_fast(small):
    run_module(small)
    small.add_fault(verb="list", resource="virtualmachineinstances", status=429, retryAfter=30)
    started = time.monotonic()
    result = run_module(small, expect_failure=True, api_timeout=5, include=["vmis"])
    assert time.monotonic() - started < 20
    assert "would pass api_timeout (5s)" in result["msg"]


# ------------------------------------------------------------------------------------------ not served, options
def test_kinds_that_are_not_served_are_reported_not_a_crash(simulator):
    sim = simulator(str(SCENARIOS / "no-kubevirt.yaml"))
    result = run_module(sim)
    assert result["vmis"] == [] and result["cluster"]["kubevirt"]["served"] is False
    assert result["served"]["VirtualMachineInstance"] is False and result["served"]["ResourcePatch"] is False
    assert "kubevirt_not_served" in result["summary"]["findings"]
    assert result["descheduler"]["found"] is False and result["descheduler"]["module_info"]["served"] is False
    global_result = run_module(sim, context="global", include=["descheduler"])
    assert global_result["descheduler"]["module_info"]["served"] is True


@pytest.mark.parametrize("args, starts", [
    ({"namespaces": ["Bad_NS"]}, "namespaces[0]: 'Bad_NS' is not a valid namespace name"),
    ({"label_selector": "app in (a"}, "label_selector: "),
    ({"api_retries": -1}, "api_retries: must be 0 or more"),
    ({"api_timeout": 0}, "api_timeout: must be more than 0 seconds"),
    ({"descheduler_namespace": "Desched"}, "descheduler_namespace: 'Desched' is not a valid namespace name"),
])
def test_bad_options_fail_with_a_message_naming_the_option(small, args, starts):
    small.reset_counters()
    result = run_module(small, expect_failure=True, **args)
    assert result["msg"].startswith(starts), result["msg"]
    assert small.counters() == {}     # refused before any request


def test_unknown_section_and_missing_kubeconfig(small, tmp_path):
    result = run_module(small, expect_failure=True, include=["vmis", "everything"])
    assert "include" in result["msg"] and "everything" in result["msg"]
    result = run_module(small, expect_failure=True, kubeconfig=str(tmp_path / "missing"))
    assert result["msg"].startswith("kubeconfig: ") and "K8S_AUTH_" in result["msg"]


# ------------------------------------------------------------------------------------------ bundled scenarios
FINAL_VMI_PHASES = ("Succeeded", "Failed")
MODULE_INFO = {"name": "workload-0df2f876991707cc782c5a050f7a01a9", "cluster": "workload", "module": "descheduler",
               "phase": "Running", "version": "v0.36.0-5"}
NOT_MIGRATABLE = "VMI {0} is configured with an eviction strategy but is not live-migratable"


def all_migrations(sim) -> list:
    custom = client.CustomObjectsApi(api_client(sim))
    return custom.list_cluster_custom_object("kubevirt.io", "v1", "virtualmachineinstancemigrations")["items"]


def owner_name(vmi: dict) -> str | None:
    return next((o["name"] for o in vmi["metadata"].get("ownerReferences") or [] if o.get("controller")), None)


def missing_outcome(sim, fact: dict, before: dict, vmis: dict, migrations: list) -> str | None:
    """What the cluster does not show yet of the outcome `fact["verdict"]` predicts for an evicted launcher; None when it
    shows all of it. `before` holds the facts of every VMI before the evictions, `vmis` and `migrations` the cluster now."""
    key = (fact["namespace"], fact["name"])
    vmi = vmis.get(key)
    status = (vmi or {}).get("status") or {}
    own = [m for m in migrations if m["metadata"]["namespace"] == fact["namespace"] and m["spec"]["vmiName"] == fact["name"]]
    verdict = fact["verdict"]
    if verdict == "migrate":
        succeeded = [m for m in own if (m.get("status") or {}).get("phase") == "Succeeded"]
        if vmi is None or vmi["metadata"]["uid"] != fact["uid"]:
            return "the VMI is gone or has a new UID: {0}".format(vmi and vmi["metadata"]["uid"])
        if not succeeded or status.get("nodeName") == fact["node"] or status.get("evacuationNodeName"):
            return "no Succeeded evacuation migration off {0} yet (node {1}, migrations {2})".format(
                fact["node"], status.get("nodeName"), [(m["metadata"]["name"], (m.get("status") or {}).get("phase")) for m in own])
        migration = succeeded[-1]
        assert migration["metadata"]["name"].startswith("kubevirt-evacuation-"), migration["metadata"]
        assert migration["metadata"]["annotations"]["kubevirt.io/evacuationMigration"] == fact["node"], migration["metadata"]
        return None
    if verdict in ("blocked", "external"):
        if vmi is None or vmi["metadata"]["uid"] != fact["uid"] or status.get("nodeName") != fact["node"]:
            return "the VMI moved, restarted or went away"
        if not pod_exists(sim, fact["namespace"], fact["launcher"]["name"]):
            return "the launcher {0} is gone".format(fact["launcher"]["name"])
        if own:
            return "KubeVirt created migrations {0}".format([m["metadata"]["name"] for m in own])
        if verdict == "external" and status.get("evacuationNodeName") != fact["node"]:
            return "the VMI is not marked for evacuation"
        return None
    if verdict == "shutdown_restart":
        if vmi is None or vmi["metadata"]["uid"] == fact["uid"] or status.get("phase") != "Running":
            return "VirtualMachine {0} has not started a new VMI yet".format(fact["vm_name"])
        return None if owner_name(vmi) == fact["vm_name"] else "the new VMI is not owned by {0}".format(fact["vm_name"])
    if verdict == "shutdown_replace":
        if vmi is not None and status.get("phase") not in FINAL_VMI_PHASES:
            return "the VMI still runs"
        evicted = [f for f in before.values() if f["owner_name"] == fact["owner_name"] and f["verdict"] == verdict]
        new = [v for k, v in vmis.items() if k not in before and owner_name(v) == fact["owner_name"]
               and (v.get("status") or {}).get("phase") == "Running"]
        return None if len(new) >= len(evicted) else "{0} has {1} new Running VMIs of {2}".format(fact["owner_name"], len(new), len(evicted))
    if verdict == "shutdown_lost":
        return None if vmi is None or status.get("phase") in FINAL_VMI_PHASES else "the VMI is {0}".format(status.get("phase"))
    raise AssertionError("no outcome to check for verdict {0}".format(verdict))


def evict_every_launcher_and_check_outcomes(sim, facts: list, timeout: float = 90) -> dict:
    """Evict the launcher of every VMI once: the API's answer is each verdict's eviction_response, then the cluster
    shows each verdict's outcome (migrate: a Succeeded evacuation migration, same UID, another node; blocked and
    external: nothing moved; shutdown_restart: the VM's new VMI, a new UID; shutdown_replace: a replacement VMI;
    shutdown_lost: the VMI gone or finished). Returns the facts before, by (namespace, name)."""
    before = {(f["namespace"], f["name"]): f for f in facts}
    evicted = [f for f in facts if f["launcher"] is not None]
    assert evicted
    for fact in evicted:
        assert_verdict_matches_eviction(sim, fact)

    def missing():
        vmis, migrations = vmis_of(sim), all_migrations(sim)
        gaps = {"{0}/{1} ({2})".format(f["namespace"], f["name"], f["verdict"]): missing_outcome(sim, f, before, vmis, migrations)
                for f in evicted}
        return {k: v for k, v in gaps.items() if v}
    try:
        wait_for(lambda: not missing(), timeout=timeout, what="the outcome of every verdict")
    except AssertionError as error:
        raise AssertionError("{0}: {1}".format(error, missing())) from None
    sim.settle()
    time.sleep(0.5)   # simulated seconds pass: nothing restarts a lost VM, nothing migrates a blocked one later
    assert not missing(), missing()
    return before


def test_rebalance_two_workers_facts_verdicts_and_evictions(simulator):
    sim = simulator("rebalance-two-workers")
    result = run_module(sim)
    cluster = result["cluster"]
    assert cluster["server_version"] == "v1.35.0"
    assert cluster["kubevirt"]["found"] and cluster["kubevirt"]["name"] == "kubevirt-kubevirt-hyperconverged"
    assert cluster["kubevirt"]["version"] == "v1.8.4" and cluster["hyperconverged"]["eviction_strategy"] == "LiveMigrateIfPossible"
    assert cluster["eviction_strategy"] == cluster["effective_default_strategy"] == "LiveMigrateIfPossible"
    assert cluster["migration_limits"]["parallel_migrations_per_cluster"] == 5
    assert cluster["migration_limits"]["parallel_outbound_migrations_per_node"] == 2
    nodes = {n["name"]: n for n in result["nodes"]}
    assert sorted(nodes) == ["control-plane-1", "worker-a", "worker-b"] and nodes["control-plane-1"]["control_plane"]
    assert nodes["worker-a"]["schedulable"] and nodes["worker-a"]["vmis"] == 2 and nodes["worker-b"]["vmis"] == 0
    # the two test VMs on worker-a, LiveMigrateIfPossible recorded and the cluster default: migrate
    vmis = by_name(result)
    assert sorted(vmis) == ["vm-1", "vm-2"]
    for fact in vmis.values():
        assert fact["namespace"] == "desched-test" and fact["labels"]["app"] == "desched-test"
        assert fact["node"] == "worker-a" and fact["phase"] == "Running" and fact["ready"]
        assert fact["recorded_strategy"] == fact["cluster_strategy"] == fact["effective_strategy"] == "LiveMigrateIfPossible"
        assert fact["live_migratable"] and fact["verdict"] == "migrate"
        assert fact["eviction_response"] == {"code": 429, "message": WEBHOOK + 'Eviction triggered evacuation of VMI "desched-test/{0}"'.format(
            fact["name"])}
        assert (fact["owner_kind"], fact["vm_name"], fact["run_strategy"]) == ("VirtualMachine", fact["name"], "Always")
        assert fact["launcher"]["request_evict_only"] and fact["launcher"]["node"] == "worker-a"
        assert [p["read_write_many"] for p in fact["pvcs"]] == [True] and fact["pdbs"] == [] and fact["migrations"] == []
    # the Descheduler: the package's CronJob with the feature gate and --v=3, the default policy and its profile
    desched = result["descheduler"]
    assert (desched["found"], desched["kind"], desched["name"], desched["suspended"]) == (True, "CronJob", "descheduler", False)
    assert "--feature-gates=EvictionsInBackground=true" in desched["args"] and "--v=3" in desched["args"]
    assert desched["evictions_in_background"] and desched["feature_gates"] == {"EvictionsInBackground": True} and desched["verbosity"] == 3
    policy = desched["policy"]
    assert policy["found"] and policy["error"] is None and (policy["configmap"], policy["key"]) == ("descheduler", "policy.yaml")
    assert policy["api_version"] == "descheduler/v1alpha2" and policy["kind"] == "DeschedulerPolicy"
    [profile] = policy["profiles"]
    assert profile["name"] == "default" and profile["evicts"] and "LowNodeUtilization" in profile["balance"]
    assert profile["default_evictor"] == {"podProtections": {"defaultDisabled": ["PodsWithLocalStorage"], "extraEnabled": ["PodsWithPVC"]}}
    assert profile["protections"] == ["DaemonSetPods", "FailedBarePods", "PodsWithPVC", "SystemCriticalPods"]
    assert profile["protects_pvc_pods"] and not profile["protects_local_storage"]
    # findings: the default policy protects PVC Pods, and nothing else is wrong
    assert [(f["code"], f["kind"], f["namespace"], f["name"]) for f in result["findings"]] == [
        ("policy_protects_pvc_pods", "ConfigMap", "descheduler", "descheduler")]
    assert "PodsWithPVC" in result["findings"][0]["message"]
    # ModuleInfo: not served on the workload cluster, read on the global one
    assert desched["module_info"] == {"served": False, "resources": []} and desched["kube_descheduler"]["served"] is False
    global_result = run_module(sim, context="global", include=["descheduler"])
    assert global_result["descheduler"]["module_info"] == {"served": True, "resources": [MODULE_INFO]}
    assert global_result["served"]["ModuleInfo"] is True and "cluster" not in global_result and "vmis" not in global_result

    evict_every_launcher_and_check_outcomes(sim, result["vmis"])
    after = by_name(run_module(sim, include=["vmis"]))
    for name, fact in vmis.items():
        assert after[name]["uid"] == fact["uid"] and after[name]["node"] == "worker-b" and after[name]["verdict"] == "migrate"
        assert after[name]["migrations"][-1]["phase"] == "Succeeded" and after[name]["migrations"][-1]["evacuation"]
        assert after[name]["migrations"][-1]["source_node"] == "worker-a" and after[name]["evacuation_node_name"] is None


def test_acp_default_policy_protects_pvc_pods(simulator):
    sim = simulator("acp-default")
    result = run_module(sim)
    vmis = by_name(result)
    assert sorted(vmis) == ["db-1", "db-2", "db-3"]
    assert {(f["node"], f["verdict"], f["pvcs"][0]["read_write_many"]) for f in vmis.values()} == {("worker-a", "migrate", True)}
    desched = result["descheduler"]
    assert desched["found"] and desched["kind"] == "CronJob" and desched["evictions_in_background"]
    assert [p["protects_pvc_pods"] for p in desched["policy"]["profiles"]] == [True]
    pvc = [f for f in result["findings"] if f["code"] == "policy_protects_pvc_pods"]
    assert [(f["severity"], f["kind"], f["namespace"], f["name"]) for f in pvc] == [("warning", "ConfigMap", "descheduler", "descheduler")]
    assert pvc[0]["message"].startswith("ConfigMap descheduler/descheduler key policy.yaml: profiles[0] (default): ")
    assert set(result["summary"]["findings"]) == {"policy_protects_pvc_pods"}
    global_result = run_module(sim, context="global", include=["descheduler"])
    assert global_result["descheduler"]["module_info"] == {"served": True, "resources": [MODULE_INFO]}
    evict_every_launcher_and_check_outcomes(sim, result["vmis"])


def test_old_package_lacks_the_feature_gate(simulator):
    sim = simulator("old-package")
    result = run_module(sim, include=["descheduler"])
    desched = result["descheduler"]
    assert desched["found"] and desched["kind"] == "CronJob" and desched["verbosity"] == 3
    assert not desched["evictions_in_background"] and desched["feature_gates"] == {}
    assert not [a for a in desched["args"] if a.startswith("--feature-gates")]
    gate = [f for f in result["findings"] if f["code"] == "feature_gate_missing"]
    assert [(f["severity"], f["kind"], f["namespace"], f["name"]) for f in gate] == [("warning", "CronJob", "descheduler", "descheduler")]
    assert "--feature-gates=EvictionsInBackground=true" in gate[0]["message"]
    assert result["summary"]["findings"]["feature_gate_missing"] == 1 and result["summary"]["warnings"] == 2   # + PodsWithPVC


def test_deployment_mode_is_found(simulator):
    sim = simulator("deployment-mode")
    result = run_module(sim, include=["descheduler"])
    desched = result["descheduler"]
    assert (desched["found"], desched["kind"], desched["namespace"], desched["name"]) == (True, "Deployment", "descheduler", "descheduler")
    assert desched["replicas"] == 1 and desched["descheduling_interval"] == "2m" and desched["evictions_in_background"]
    assert desched["suspended"] is None and desched["schedule"] is None and desched["last_jobs"] == []
    assert desched["policy"]["found"] and [p["name"] for p in desched["policy"]["profiles"]] == ["default"]
    assert set(result["summary"]["findings"]) == {"policy_protects_pvc_pods"}


def test_openshift_serves_kube_descheduler(simulator):
    sim = simulator("openshift")
    result = run_module(sim)
    assert result["served"]["KubeDescheduler"] is True and result["served"]["ModuleInfo"] is False
    assert result["descheduler"]["kube_descheduler"] == {"served": True, "resources": [
        {"name": "cluster", "namespace": "openshift-kube-descheduler-operator", "profiles": ["DevKubeVirtRelieveAndMigrate"],
         "mode": "Automatic", "interval_seconds": 60}]}
    assert {f["verdict"] for f in result["vmis"]} == {"migrate"}
    evict_every_launcher_and_check_outcomes(sim, result["vmis"])


MAINTENANCE_VERDICTS = {"vm-live": "migrate", "vm-if-possible": "migrate", "vm-none": "shutdown_restart", "vm-rwo": "blocked",
                        "bare-vmi": "shutdown_lost", "pool-0": "migrate", "pool-1": "migrate", "pool-2": "migrate"}


def test_maintenance_verdicts_agree_with_evictions(simulator):
    sim = simulator("maintenance")
    result = run_module(sim, namespaces=["vms"])
    assert result["cluster"]["eviction_strategy"] == "LiveMigrate"
    vmis = by_name(result)
    replicas = sorted(name for name in vmis if name.startswith("web-rs"))
    assert len(replicas) == 2 and sorted(vmis) == sorted(list(MAINTENANCE_VERDICTS) + replicas)
    assert {name: vmis[name]["verdict"] for name in MAINTENANCE_VERDICTS} == MAINTENANCE_VERDICTS
    # blocked: LiveMigrate on a VM with a ReadWriteOnce disk, refused by KubeVirt's webhook with its exact words
    rwo = vmis["vm-rwo"]
    assert rwo["eviction_response"] == {"code": 429, "message": WEBHOOK + NOT_MIGRATABLE.format("vm-rwo")}
    assert rwo["effective_strategy"] == "LiveMigrate" and not rwo["live_migratable"] and rwo["live_migratable_reason"] == "DisksNotLiveMigratable"
    assert rwo["pvcs"][0]["access_modes"] == ["ReadWriteOnce"]
    # shutdown_restart: a VM with evictionStrategy None (recorded, not the cluster's LiveMigrate) and runStrategy Always
    none = vmis["vm-none"]
    assert (none["recorded_strategy"], none["cluster_strategy"], none["effective_strategy"]) == ("None", "LiveMigrate", "None")
    assert (none["owner_kind"], none["run_strategy"], none["eviction_response"]) == ("VirtualMachine", "Always", {"code": 201, "message": "Success"})
    # shutdown_replace: the VMI replica set's VMIs; shutdown_lost: the bare VMI
    for name in replicas:
        assert (vmis[name]["verdict"], vmis[name]["owner_kind"], vmis[name]["owner_name"]) == (
            "shutdown_replace", "VirtualMachineInstanceReplicaSet", "web-rs")
    assert vmis["bare-vmi"]["owner_kind"] is None and vmis["bare-vmi"]["run_strategy"] is None
    # the pool: a maxUnavailable PDB over its launchers allows no disruption (kubevirt/kubevirt#18063), but KubeVirt's webhook
    # answers before the PDB check, so the LiveMigrate pool VMs still migrate
    for name in ("pool-0", "pool-1", "pool-2"):
        assert (vmis[name]["owner_kind"], vmis[name]["owner_name"], vmis[name]["pdbs"]) == ("VirtualMachinePool", "pool", ["pool-pdb"])
    [pdb] = result["pdbs"]
    assert (pdb["name"], pdb["max_unavailable"], pdb["disruptions_allowed"], pdb["needs_scale_subresource"]) == ("pool-pdb", 1, 0, True)
    assert pdb["launchers"] == sorted(vmis[name]["launcher"]["name"] for name in ("pool-0", "pool-1", "pool-2"))
    live_pdb = client.PolicyV1Api(api_client(sim)).read_namespaced_pod_disruption_budget("pool-pdb", "vms").status
    assert (live_pdb.disruptions_allowed, live_pdb.expected_pods) == (0, 0)
    events = client.CoreV1Api(api_client(sim)).list_namespaced_event("vms").items
    assert [e.reason for e in events if e.involved_object.name == "pool-pdb"].count("CalculateExpectedPodCountFailed") >= 1
    codes = {(f["code"], f["name"]) for f in result["findings"]}
    assert ("pdb_needs_scale_subresource", "pool-pdb") in codes
    assert "kubevirt/kubevirt#18063" in next(f["message"] for f in result["findings"] if f["code"] == "pdb_needs_scale_subresource")
    assert ("not_migratable_with_migrating_strategy", "vm-rwo") in codes
    assert {name for code, name in codes if code == "strategy_differs_from_cluster"} == {"vm-if-possible", "vm-none", "bare-vmi", *replicas}

    evict_every_launcher_and_check_outcomes(sim, result["vmis"])
    after = by_name(run_module(sim, namespaces=["vms"], include=["vmis"]))
    for name in ("vm-live", "vm-if-possible", "pool-0", "pool-1", "pool-2"):
        assert after[name]["uid"] == vmis[name]["uid"] and after[name]["node"] != vmis[name]["node"]
        assert after[name]["migrations"][-1]["phase"] == "Succeeded" and after[name]["verdict"] == "migrate"
    assert after["vm-none"]["uid"] != none["uid"] and after["vm-none"]["verdict"] == "shutdown_restart"
    assert after["vm-rwo"]["uid"] == rwo["uid"] and after["vm-rwo"]["verdict"] == "blocked"
    assert "bare-vmi" not in after or after["bare-vmi"]["verdict"] == "not_running"
    new_replicas = [name for name in after if name.startswith("web-rs") and name not in replicas]
    assert len(new_replicas) == 2 and {after[name]["verdict"] for name in new_replicas} == {"shutdown_replace"}


# ------------------------------------------------------------------------------------------ actual usage
HOT_SCENARIO = "actual-load-hot-worker"
HOT_SCENARIO_FILE = ROOT / "tests" / "kubesim" / "scenarios" / (HOT_SCENARIO + ".yaml")
CPU_QUERY = "instance:node_cpu_utilisation:rate1m"


def hot_metrics_settings() -> dict:
    """The scenario's `metrics` section of the workload cluster (Prometheus Service, the VMs' load)."""
    return yaml.safe_load(HOT_SCENARIO_FILE.read_text())["clusters"]["workload"]["metrics"]


def served_node_usage(sim) -> dict:
    """NodeMetrics as the API serves them, converted here with the kubernetes client's own quantity parser: cpu in
    millicores and memory in bytes, rounded up."""
    items = sim.request_json("GET", "/apis/metrics.k8s.io/v1beta1/nodes")["items"]
    return {item["metadata"]["name"]: {"cpu": int(math.ceil(parse_quantity(item["usage"]["cpu"]) * 1000)),
                                       "memory": int(math.ceil(parse_quantity(item["usage"]["memory"])))} for item in items}


def disagreement(result: dict) -> list:
    return [f["message"] for f in result["findings"] if f["code"] == "requests_disagree_with_usage"]


@pytest.fixture(scope="module")
def hot(kubesim_factory):
    """Requests balanced, one worker hot; the descheduler suspended so that nothing moves between the reads."""
    return kubesim_factory(HOT_SCENARIO, suspend=True, settle=True)


def test_actual_usage_stands_beside_balanced_requests_and_names_the_hot_worker(hot):
    with hot.without_faults():
        result = run_module(hot, include=["nodes", "descheduler"])
        counts = hot.counters()
    served = served_node_usage(hot)
    nodes = {n["name"]: n for n in result["nodes"]}
    assert result["actual_usage"]["metrics_server"] == {"served": True, "error": None} and result["served"]["NodeMetrics"] is True
    for name, usage in served.items():
        assert nodes[name]["actual_usage"] == usage, name
        allocatable = nodes[name]["allocatable"]
        assert nodes[name]["actual_percent"]["cpu"] == round(100.0 * usage["cpu"] / allocatable["cpu"], 2)
    workers = [name for name in nodes if not nodes[name]["control_plane"]]
    hottest = max(workers, key=lambda name: served[name]["cpu"] / nodes[name]["allocatable"]["cpu"])
    coolest = min(workers, key=lambda name: served[name]["cpu"] / nodes[name]["allocatable"]["cpu"])
    # requests balanced: the scenario's premise, which is what a request-based policy sees
    requested = [nodes[name]["usage_percent"]["cpu"] for name in workers]
    assert max(requested) - min(requested) < result["actual_usage"]["disagreement_points"]
    assert nodes[hottest]["actual_percent"]["cpu"] - nodes[coolest]["actual_percent"]["cpu"] > result["actual_usage"]["disagreement_points"]
    [message] = disagreement(result)
    assert "{0} actual cpu".format(hottest) in message and "metrics_source KubernetesMetrics or Prometheus" in message
    assert counts.get("list nodes.metrics.k8s.io") == 1 and counts.get("list pods.metrics.k8s.io") == 1, counts


def test_prometheus_through_the_service_proxy_sees_the_same_hot_worker(hot):
    prometheus = hot_metrics_settings()["prometheus"]
    url = "https://{service}.{namespace}.svc:{port}".format(**prometheus)
    args = {"include": ["nodes"], "usage_source": "Prometheus", "prometheus_url": url, "prometheus_query": CPU_QUERY}
    if prometheus.get("token"):
        # the API server keeps the Authorization header for itself: a token-protected Prometheus refuses the proxied query
        failed = run_module(hot, expect_failure=True, **args)
        assert failed["msg"].startswith("prometheus_url: unable to capture prometheus metrics: 401") and "port-forward" in failed["msg"]
        assert prometheus["token"] not in json.dumps(failed)
        return
    result = run_module(hot, **args)
    section = result["actual_usage"]["prometheus"]
    assert (section["via"], section["url"], section["query"], section["token_sent"], section["error"]) == (
        "service_proxy", url, CPU_QUERY, False, None)
    nodes = {n["name"]: n for n in result["nodes"]}
    served = served_node_usage(hot)
    capacity = {item["metadata"]["name"]: int(math.ceil(parse_quantity(item["status"]["capacity"]["cpu"]) * 1000))
                for item in hot.kubectl_json("get", "nodes")["items"]}
    for name, node in nodes.items():
        assert node["prometheus_value"] == pytest.approx(min(1.0, served[name]["cpu"] / capacity[name]), abs=0.01), name   # clamped
        assert node["prometheus_percent"] == int(node["prometheus_value"] * 100)
    workers = [name for name in nodes if not nodes[name]["control_plane"]]
    hottest = max(workers, key=lambda name: nodes[name]["prometheus_value"])
    assert "{0} the Prometheus query".format(hottest) in disagreement(result)[0]


def test_a_direct_query_sends_the_token_of_the_secret(hot):
    prometheus = hot_metrics_settings()["prometheus"]
    secret = prometheus.get("tokenSecret")
    direct = hot.url + "/_kubesim/prometheus/workload"     # stands in for a Route to Prometheus, reachable from here
    args = {"include": ["nodes"], "usage_source": "Prometheus", "prometheus_url": direct, "prometheus_query": CPU_QUERY}
    if secret:
        args["prometheus_auth_secret"] = {"namespace": secret["namespace"], "name": secret["name"]}
    elif prometheus.get("token"):
        args["prometheus_token"] = prometheus["token"]
    result = run_module(hot, **args)
    section = result["actual_usage"]["prometheus"]
    assert section["via"] == "direct" and section["error"] is None
    assert section["token_sent"] is bool(secret or prometheus.get("token"))
    assert all(n["prometheus_value"] is not None for n in result["nodes"])
    if prometheus.get("token"):
        assert prometheus["token"] not in json.dumps(result)
        wrong_args = {key: value for key, value in args.items() if key != "prometheus_auth_secret"}
        wrong = run_module(hot, expect_failure=True, prometheus_token="not-the-token", **wrong_args)
        assert "unable to capture prometheus metrics: 401" in wrong["msg"] and "not-the-token" not in wrong["msg"]


def test_the_finding_follows_the_load_when_it_changes(hot):
    vms = hot_metrics_settings()["vms"]
    loads = {name: (spec if isinstance(spec, dict) else spec[0]) for name, spec in vms.items()}
    hot_vm = max(loads, key=lambda name: parse_quantity(str(loads[name]["cpu"])))
    before = run_module(hot, include=["nodes"], usage_source="KubernetesMetrics")
    assert disagreement(before)
    hot.admin("POST", "usage", {"cluster": "workload", "vm": hot_vm, "cpu": "100m", "memory": str(loads[hot_vm]["memory"])})
    try:
        after = run_module(hot, include=["nodes"], usage_source="KubernetesMetrics")
        served = served_node_usage(hot)
        assert {n["name"]: n["actual_usage"] for n in after["nodes"]} == served
        assert sum(u["cpu"] for u in served.values()) < sum(n["actual_usage"]["cpu"] for n in before["nodes"])
        assert not disagreement(after), disagreement(after)
    finally:
        hot.admin("POST", "usage", {"cluster": "workload", "vm": hot_vm, "cpu": str(loads[hot_vm]["cpu"]), "memory": str(loads[hot_vm]["memory"])})
