"""The failure paths of the Descheduler VM rebalance page (shared/reference/descheduler-vm-rebalance.md) with the
real kubectl against the simulator:

- `LowNodeUtilization.args.evictableNamespaces.include` makes every run fail with `only Exclude namespaces
  can be set, inclusion is not supported`, the Job's Pods fail and are retried, and nothing is evicted;
- an old package (`old-package`: no `--feature-gates=EvictionsInBackground=true`) logs KubeVirt's 429 as a
  failed eviction and nominates the same launcher again at the next run while KubeVirt already migrates it;
- existing VMIs keep their recorded eviction strategy after the HyperConverged default changes; a VM
  restarted afterwards gets the new one.

Descheduler runs are triggered deterministically: the CronJob is suspended and each run is a Job created with
`kubectl create job --from=cronjob/descheduler`. The scenarios run at timeScale 20."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from support.policy import PAGE_POLICY
from support.simulator import columns, kubectl_available, suspend_descheduler
from support.waiting import wait_for

from .ansible_run import edit_policy_as_page

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

VM_NS = "desched-test"
WEBHOOK = 'admission webhook \\"virt-launcher-eviction-interceptor.kubevirt.io\\" denied the request: '
INCLUSION = "only Exclude namespaces can be set, inclusion is not supported"
VMIM_COLUMNS = "custom-columns=NAME:.metadata.name,PHASE:.status.phase,VMI:.spec.vmiName"
VMI_COLUMNS = "custom-columns=NAME:.metadata.name,UID:.metadata.uid,NODE:.status.nodeName,STRATEGY:.spec.evictionStrategy"


# ------------------------------------------------------------------------------------------ helpers
def vmis(sim) -> dict[str, dict]:
    return {row["NAME"]: row for row in columns(sim.kubectl("get", "vmi", "-n", VM_NS, "-o", VMI_COLUMNS).stdout)}


def new_vmi(sim, name: str, old_uid: str) -> dict | None:
    """The VMI `name` if it exists with a UID other than `old_uid`."""
    row = vmis(sim).get(name)
    return row if row and row["UID"] not in (old_uid, "<none>") else None


def migrations(sim) -> list[dict]:
    return columns(sim.kubectl("get", "vmim", "-n", VM_NS, "-o", VMIM_COLUMNS).stdout)


def edit_policy(sim, tmp_path, policy: str) -> str:
    """`kubectl -n descheduler edit configmap descheduler` with an editor that replaces data.policy.yaml;
    returns the name of the ResourcePatch ACP records."""
    edited = edit_policy_as_page(sim, tmp_path, policy)
    assert edited.stdout.strip() == "configmap/descheduler edited"
    warning = re.search(r"Warning: The operation is allowed, and ResourcePatch (rp-[a-z0-9]+) is created", edited.stderr)
    assert warning, edited.stderr
    return warning.group(1)


def run_job(sim, name: str) -> None:
    """One Descheduler run, created from the CronJob and waited for."""
    out = sim.kubectl("-n", "descheduler", "create", "job", name, "--from=cronjob/descheduler").stdout
    assert out == f"job.batch/{name} created\n"
    waited = sim.kubectl("-n", "descheduler", "wait", "--for=condition=complete", f"job/{name}", "--timeout=30s").stdout
    assert waited == f"job.batch/{name} condition met\n"


def eviction_errors(log: str) -> list[tuple[str, str]]:
    """(pod, KubeVirt's message) of each `"Error evicting pod"` line of a descheduler log."""
    found = []
    for line in log.splitlines():
        match = re.search(r'"Error evicting pod" err="error when evicting pod \(ignoring\) \\"(virt-launcher-[^\\]+)\\": '
                          + re.escape(WEBHOOK) + r'(.*)" pod="' + VM_NS + r'/\1"', line)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


@pytest.fixture
def simulator(fresh_kubesim):
    return lambda scenario: fresh_kubesim(scenario, settle=True)


# ------------------------------------------------------------------ (a) evictableNamespaces.include fails
def test_evictable_namespaces_include_fails_every_run_and_evicts_nothing(simulator, tmp_path):
    sim = simulator("rebalance-two-workers")
    suspend_descheduler(sim)
    before = vmis(sim)
    launchers = sorted(p["metadata"]["name"] for p in sim.kubectl_json("get", "pods", "-n", VM_NS)["items"])
    # The page's bounded policy, scoped with an include list instead of the label selector.
    policy = yaml.safe_load(PAGE_POLICY)
    lnu = next(p for p in policy["profiles"][0]["pluginConfig"] if p["name"] == "LowNodeUtilization")
    lnu["args"]["evictableNamespaces"] = {"include": [VM_NS]}
    rp_name = edit_policy(sim, tmp_path, yaml.safe_dump(policy, sort_keys=False))

    # A run as the CronJob renders it: every Pod fails at start and the Job controller retries (backoff
    # 10 s, 20 s, 40 s ... simulated; backoffLimit 6 by default).
    out = sim.kubectl("-n", "descheduler", "create", "job", "include-1", "--from=cronjob/descheduler").stdout
    assert out == "job.batch/include-1 created\n"
    wait_for(lambda: sim.kubectl_json("get", "job", "include-1", "-n", "descheduler")["status"].get("failed", 0) >= 3,
             timeout=20, what="three failed attempts")
    pods = sim.kubectl_json("get", "pods", "-n", "descheduler", "-l", "job-name=include-1")["items"]
    failed = [p for p in pods if p["status"]["phase"] == "Failed"]
    assert len(failed) >= 3
    table = sim.kubectl("-n", "descheduler", "get", "pods", "-l", "job-name=include-1").stdout
    assert len(re.findall(r"include-1-[a-z0-9]+\s+0/1\s+Error\s", table)) >= 3, table
    for pod in failed:
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
        log = sim.kubectl("-n", "descheduler", "logs", pod["metadata"]["name"]).stdout
        assert re.search(r'^E\d{4} [\d:.]+ +1 server\.go:\d+\] "failed to run descheduler server" err="in profile '
                         r'vm-rebalance: ' + INCLUSION + '"$', log, re.MULTILINE), log
        assert f'"command failed" err="in profile vm-rebalance: {INCLUSION}"' in log
        assert "Number of evictions" not in log
    job = sim.kubectl_json("get", "job", "include-1", "-n", "descheduler")
    assert not any(c["type"] == "Complete" for c in job["status"].get("conditions", []))

    # A second run fails the same way; with backoffLimit 1 (a copy of the CronJob's Job, shortened so the
    # test need not wait the full default backoff) the Job reaches Failed.
    manifest = json.loads(sim.kubectl("-n", "descheduler", "create", "job", "include-2", "--from=cronjob/descheduler",
                                      "--dry-run=client", "-o", "json").stdout)
    manifest["spec"]["backoffLimit"] = 1
    sim.kubectl("create", "-f", "-", input=json.dumps(manifest))
    waited = sim.kubectl("-n", "descheduler", "wait", "--for=condition=failed", "job/include-2", "--timeout=30s").stdout
    assert waited == "job.batch/include-2 condition met\n"
    job = sim.kubectl_json("get", "job", "include-2", "-n", "descheduler")
    failed_condition = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed_condition["reason"] == "BackoffLimitExceeded" and job["status"]["failed"] == 2
    assert INCLUSION in sim.kubectl("-n", "descheduler", "logs", "job/include-2").stdout

    # Nothing was evicted: same launchers, same VMIs on the same node, no migration, no eviction events.
    assert sorted(p["metadata"]["name"] for p in sim.kubectl_json("get", "pods", "-n", VM_NS)["items"]) == launchers
    assert vmis(sim) == before
    assert migrations(sim) == []
    events = sim.kubectl("get", "events", "-n", VM_NS).stdout
    assert "Evicted" not in events and "Created Migration" not in events

    # "... until the policy is fixed": deleting the ResourcePatch restores the chart's policy; runs succeed.
    sim.kubectl("-n", "descheduler", "delete", "resourcepatch", rp_name)
    wait_for(lambda: "evictableNamespaces" not in sim.kubectl("-n", "descheduler", "get", "configmap", "descheduler", "-o",
                                                              "jsonpath={.data.policy\\.yaml}").stdout,
             timeout=20, what="the chart policy to come back")
    run_job(sim, "fixed-1")
    assert '"Number of evictions/requests" totalEvicted=0 evictionRequests=0' in sim.kubectl(
        "-n", "descheduler", "logs", "job/fixed-1").stdout


# ---------------------------------------------------------- (b) old package: the same launcher every run
def test_old_package_nominates_the_same_launcher_again_while_kubevirt_migrates_it(simulator, tmp_path):
    sim = simulator("old-package")
    suspend_descheduler(sim)
    # The page's prerequisite check shows the missing feature gate.
    args = sim.kubectl("-n", "descheduler", "get", "cronjob", "descheduler", "-o",
                       "jsonpath={.spec.jobTemplate.spec.template.spec.containers[0].args}{\"\\n\"}").stdout
    assert args == '["--policy-config-file=/policy-dir/policy.yaml","--v=3"]\n'
    launchers = {vm: next(p["metadata"]["name"] for p in sim.kubectl_json("get", "pods", "-n", VM_NS)["items"]
                          if p["metadata"]["name"].startswith(f"virt-launcher-{vm}-")) for vm in ("vm-1", "vm-2")}
    before = vmis(sim)

    # Keep the evacuations in flight across runs. A real CronJob run comes every two minutes while a 512Mi
    # VM migrates in about ten seconds, so this needs a migration that outlasts the interval (a large or
    # busy guest): simulated by the `kubesim.io/migration: hang` fault (simulator only). One outbound
    # migration per node (HyperConverged liveMigrationConfig, rendered into the KubeVirt CR) keeps the
    # second evacuation Pending, so only one migration target Pod weighs on worker-b and worker-b stays
    # underutilized; without it both targets push worker-b over the thresholds and the next run finds no
    # underutilized node.
    sim.kubectl("patch", "hyperconverged", "kubevirt-hyperconverged", "-n", "kubevirt", "--type=merge",
                "-p", '{"spec":{"liveMigrationConfig":{"parallelOutboundMigrationsPerNode":1}}}')
    wait_for(lambda: sim.kubectl("-n", "kubevirt", "get", "kubevirt", "kubevirt-kubevirt-hyperconverged", "-o",
                                 "jsonpath={.spec.configuration.migrations.parallelOutboundMigrationsPerNode}").stdout == "1",
             timeout=20, what="the migration limit to reach the KubeVirt CR")
    sim.kubectl("annotate", "vmi", "vm-1", "vm-2", "-n", VM_NS, "kubesim.io/migration=hang")
    edit_policy(sim, tmp_path, PAGE_POLICY)

    run_job(sim, "run-1")
    log_1 = sim.kubectl("-n", "descheduler", "logs", "job/run-1").stdout
    # Without the gate KubeVirt's 429 is a failed eviction ("(ignoring)"), logged at error level. A failed
    # eviction does not count against maxNoOfPodsToEvict*, so LowNodeUtilization goes on to the next
    # candidate: one run asks KubeVirt to evacuate both VMs although the policy allows one per cycle.
    # The two launchers rank equally: upstream tries them in no defined order.
    assert sorted(eviction_errors(log_1)) == [
        (launchers["vm-1"], 'Eviction triggered evacuation of VMI \\"desched-test/vm-1\\"'),
        (launchers["vm-2"], 'Eviction triggered evacuation of VMI \\"desched-test/vm-2\\"')]
    assert "Eviction in background" not in log_1
    assert '"Number of evictions/requests" totalEvicted=0 evictionRequests=0' in log_1
    # One evacuation migrates (and hangs), the other waits for the outbound slot.
    wait_for(lambda: sorted(row["PHASE"] for row in migrations(sim)) == ["Pending", "Running"], timeout=20, what="the migrations")
    first = {row["VMI"]: row for row in migrations(sim)}
    assert set(first) == {"vm-1", "vm-2"}
    assert all(row["NAME"].startswith("kubevirt-evacuation-") for row in first.values())

    run_job(sim, "run-2")
    log_2 = sim.kubectl("-n", "descheduler", "logs", "job/run-2").stdout
    # The next run nominates the same launchers again: nothing remembers the request (no gate, so the
    # eviction-in-progress annotation KubeVirt put on the source Pod is not read). KubeVirt answers that
    # the evacuation is already in progress; it is logged as a failed eviction once more.
    assert re.search(r'"Node has been classified" plugin="LowNodeUtilization" ExtensionPoint="Balance" '
                     r'category="underutilized" node="worker-b"', log_2)
    assert sorted(eviction_errors(log_2)) == [
        (launchers["vm-1"], 'Evacuation in progress: Eviction triggered evacuation of VMI \\"desched-test/vm-1\\"'),
        (launchers["vm-2"], 'Evacuation in progress: Eviction triggered evacuation of VMI \\"desched-test/vm-2\\"')]
    assert "Eviction in background" not in log_2
    assert '"Number of evictions/requests" totalEvicted=0 evictionRequests=0' in log_2
    # KubeVirt already migrates them: the same two migrations, no new ones; the VMIs are marked for
    # evacuation and have not moved yet (same UID, source node).
    assert {row["VMI"]: row for row in migrations(sim)} == first
    pending = {row["NAME"]: row for row in columns(sim.kubectl(
        "get", "vmi", "-n", VM_NS, "-o",
        "custom-columns=NAME:.metadata.name,UID:.metadata.uid,NODE:.status.nodeName,EVACUATION:.status.evacuationNodeName").stdout)}
    for vm in ("vm-1", "vm-2"):
        assert pending[vm]["UID"] == before[vm]["UID"]
        assert (pending[vm]["NODE"], pending[vm]["EVACUATION"]) == ("worker-a", "worker-a")
    marked = sim.kubectl_json("get", "pods", "-n", VM_NS, "-l", "kubevirt.io=virt-launcher",
                              "--field-selector", "spec.nodeName=worker-a")["items"]
    assert {p["metadata"]["name"] for p in marked} == set(launchers.values())
    assert any(p["metadata"].get("annotations", {}).get("descheduler.alpha.kubernetes.io/eviction-in-progress") == "true"
               for p in marked)


# -------------------------------------------- (c) existing VMIs keep their strategy after an HCO change
def test_existing_vmis_keep_their_recorded_strategy_after_the_hco_default_changes(simulator):
    sim = simulator("rebalance-two-workers")
    suspend_descheduler(sim)
    kubevirt_strategy = ("-n", "kubevirt", "get", "kubevirt", "kubevirt-kubevirt-hyperconverged", "-o",
                         "jsonpath={.spec.configuration.evictionStrategy}{\"\\n\"}")
    vmi_strategy = 'jsonpath={.spec.evictionStrategy} {.status.conditions[?(@.type=="LiveMigratable")].status}{"\\n"}'
    assert sim.kubectl(*kubevirt_strategy).stdout == "LiveMigrateIfPossible\n"
    before = vmis(sim)
    assert {row["STRATEGY"] for row in before.values()} == {"LiveMigrateIfPossible"}

    out = sim.kubectl("patch", "hyperconverged", "kubevirt-hyperconverged", "-n", "kubevirt", "--type=merge",
                      "-p", '{"spec":{"evictionStrategy":"None"}}').stdout
    assert out == "hyperconverged.hco.kubevirt.io/kubevirt-hyperconverged patched\n"
    # Propagates to the KubeVirt resource at once ...
    wait_for(lambda: sim.kubectl(*kubevirt_strategy).stdout == "None\n", timeout=20, what="the KubeVirt CR to follow HCO")
    # ... but the existing VMIs keep the value recorded when they were created.
    for vm in ("vm-1", "vm-2"):
        assert sim.kubectl("get", "vmi", vm, "-n", VM_NS, "-o", vmi_strategy).stdout == "LiveMigrateIfPossible True\n"
    assert vmis(sim) == before

    # A VM restarted afterwards (stop, start) gets the new default.
    sim.kubectl("patch", "vm", "vm-1", "-n", VM_NS, "--type=merge", "-p", '{"spec":{"runStrategy":"Halted"}}')
    wait_for(lambda: "vm-1" not in vmis(sim), timeout=20, what="vm-1 to stop")
    assert sim.kubectl("get", "vm", "vm-1", "-n", VM_NS, "-o", "jsonpath={.status.printableStatus}").stdout == "Stopped"
    sim.kubectl("patch", "vm", "vm-1", "-n", VM_NS, "--type=merge", "-p", '{"spec":{"runStrategy":"Always"}}')
    restarted = wait_for(lambda: new_vmi(sim, "vm-1", before["vm-1"]["UID"]), timeout=20, what="vm-1 to start again")
    assert restarted["UID"] != before["vm-1"]["UID"] and restarted["STRATEGY"] == "None"
    assert sim.kubectl("get", "vmi", "vm-2", "-n", VM_NS, "-o", "jsonpath={.spec.evictionStrategy}").stdout == \
        "LiveMigrateIfPossible"

    # The other way round, as the page words it: with the default back at LiveMigrateIfPossible, the VMI
    # that recorded None keeps it until its VM is restarted (here by deleting the VMI).
    sim.kubectl("patch", "hyperconverged", "kubevirt-hyperconverged", "-n", "kubevirt", "--type=merge",
                "-p", '{"spec":{"evictionStrategy":"LiveMigrateIfPossible"}}')
    wait_for(lambda: sim.kubectl(*kubevirt_strategy).stdout == "LiveMigrateIfPossible\n", timeout=20, what="the KubeVirt CR")
    assert sim.kubectl("get", "vmi", "vm-1", "-n", VM_NS, "-o", "jsonpath={.spec.evictionStrategy}").stdout == "None"
    sim.kubectl("delete", "vmi", "vm-1", "-n", VM_NS)
    again = wait_for(lambda: new_vmi(sim, "vm-1", restarted["UID"]), timeout=20, what="vm-1 to be started again by its VM")
    assert again["STRATEGY"] == "LiveMigrateIfPossible"
