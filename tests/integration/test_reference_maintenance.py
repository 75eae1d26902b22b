"""The KubeVirt node maintenance page (shared/reference/kubevirt-node-maintenance.md), command by command with
the real kubectl against the `maintenance` scenario, asserting what the page documents as it holds for
KubeVirt v1.8 (upstream-facts.md: the page is partly older than v1.8):

- `--delete-local-data` is gone from kubectl 1.32 (it is the old spelling of `--delete-emptydir-data`);
- per-VMI PodDisruptionBudgets no longer exist (removed in v1.6): the eviction webhook protects VMs, and a
  drain evacuates LiveMigrate/LiveMigrateIfPossible VMs by live migration (same VMI UID), retrying the
  webhook's 429 every 5 s as kubectl does; only strategy None VMs power down and restart elsewhere;
- a LiveMigrate VM that cannot migrate (RWO PVC) blocks the drain until `--timeout`;
- a `maxUnavailable` (or percentage `minAvailable`) PDB over virt-launcher Pods allows no disruption
  (kubevirt/kubevirt#18063); an integer `minAvailable` does. The page says such a PDB blocks every drain: it
  blocks evictions that reach the PDB check, but KubeVirt's validating webhook answers a LiveMigrate
  launcher's eviction first (the eviction REST runs admission before the PDB checks), so a drain still
  live-migrates the pool's VMs;
- the obsolete `kubevirt.io/drain=draining:NoSchedule` taint still makes KubeVirt evacuate migratable VMIs.

kubectl drain's 5 s retry interval is real time: each drain that meets a 429 lasts at least 5 s. The
scenario runs at timeScale 20 (a 30 s grace period is 1.5 s, a 512Mi migration 0.5 s)."""
from __future__ import annotations

import re
import textwrap
import time

import pytest

from support.simulator import columns, kubectl_available, running_kubesim
from support.waiting import wait_for

pytestmark = [pytest.mark.simulator, pytest.mark.skipif(not kubectl_available(), reason="kubectl is not installed")]

NS = "vms"
WEBHOOK = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
VMI_COLUMNS = "custom-columns=NAME:.metadata.name,UID:.metadata.uid,NODE:.status.nodeName,PHASE:.status.phase"
VMIM_COLUMNS = ("custom-columns=NAME:.metadata.name,PHASE:.status.phase,VMI:.spec.vmiName,"
                "SOURCE:.status.migrationState.sourceNode,TARGET:.status.migrationState.targetNode")
PAGE_FLAGS = ("--ignore-daemonsets=true", "--force")
LAUNCHERS = "--pod-selector=kubevirt.io=virt-launcher"


# ------------------------------------------------------------------------------------------ helpers
def vmis(sim) -> dict[str, dict]:
    return {row["NAME"]: row for row in columns(sim.kubectl("get", "vmi", "-n", NS, "-o", VMI_COLUMNS).stdout)}


def launchers_on(sim, node: str) -> dict[str, dict]:
    """virt-launcher Pods bound to `node` that are not being deleted, by name."""
    items = sim.kubectl_json("get", "pods", "-n", NS, "-l", "kubevirt.io=virt-launcher",
                             "--field-selector", f"spec.nodeName={node}")["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def launcher_of(pods: dict[str, dict], vmi: str) -> str:
    names = [name for name in pods if name.startswith(f"virt-launcher-{vmi}-")]
    assert len(names) == 1, (vmi, sorted(pods))
    return names[0]


def running_vmi(sim, name: str, not_uid: str) -> dict | None:
    """The VMI `name` if it runs with a UID other than `not_uid` (a new instance), else None."""
    row = vmis(sim).get(name)
    return row if row and row["UID"] != not_uid and row["PHASE"] == "Running" else None


def node_status(sim, node: str) -> str:
    rows = {row["NAME"]: row for row in columns(sim.kubectl("get", "nodes").stdout)}
    return rows[node]["STATUS"]


def pdb_row(sim, name: str) -> list[str]:
    """NAME, MIN AVAILABLE, MAX UNAVAILABLE, ALLOWED DISRUPTIONS of `kubectl get pdb NAME -o wide`."""
    return sim.kubectl("get", "pdb", name, "-n", NS, "-o", "wide").stdout.splitlines()[1].split()[:4]


def retry_lines(stderr: str, pod: str) -> list[str]:
    prefix = f'error when evicting pods/"{pod}" -n "{NS}" (will retry after 5s): '
    return [line[len(prefix):] for line in stderr.splitlines() if line.startswith(prefix)]


@pytest.fixture(scope="module")
def cluster(kubesim_factory):
    """One simulator for the checks that change nothing a drain would see."""
    return kubesim_factory("maintenance", settle=True)


@pytest.fixture
def fresh(tmp_path):
    """A simulator of its own for a test that drains (cordons nodes, moves and restarts VMs). The descheduler
    CronJob of the scenario evicts nothing here (every node is underutilized) but is suspended so that only the
    drain moves Pods."""
    with running_kubesim("maintenance", tmp_path / "sim", suspend=True, settle=True) as sim:
        yield sim


# ------------------------------------------------------------------------------ read-only page steps
def test_get_nodes_lists_the_workers_to_choose_from(cluster):
    rows = {row["NAME"]: row for row in columns(cluster.kubectl("get", "nodes").stdout)}
    assert set(rows) == {"control-plane-1", "worker-1", "worker-2", "worker-3"}
    assert {row["STATUS"] for row in rows.values()} == {"Ready"}
    assert rows["worker-1"]["ROLES"] == "worker" and rows["control-plane-1"]["ROLES"] == "control-plane"
    # worker-1 is the node to drain: the VMs of every kind prefer it.
    on_worker_1 = {name for name, row in vmis(cluster).items() if row["NODE"] == "worker-1"}
    assert on_worker_1 == {"vm-live", "vm-if-possible", "vm-none", "vm-rwo", "bare-vmi"}


def test_the_pages_delete_local_data_flag_is_unknown_to_kubectl_1_32(cluster):
    # The page's literal command. kubectl removed the deprecated spelling; nothing is cordoned.
    result = cluster.kubectl("drain", "worker-1", "--delete-local-data", *PAGE_FLAGS, LAUNCHERS, check=False)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: unknown flag: --delete-local-data\n")
    assert result.stdout == ""
    assert node_status(cluster, "worker-1") == "Ready"
    assert "--delete-emptydir-data" in cluster.kubectl("drain", "--help").stdout


def test_maxunavailable_pdb_over_launchers_allows_no_disruption(cluster):
    header = cluster.kubectl("get", "pdb", "-n", NS, "-o", "wide").stdout.splitlines()[0]
    assert header.split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert pdb_row(cluster, "pool-pdb") == ["pool-pdb", "N/A", "1", "0"]
    # No per-VMI PDBs (KubeVirt dropped them in v1.6; the page's "a PodDisruptionBudget is created for each
    # VMI" is older): only the scenario's own PDBs exist, across all namespaces.
    names = cluster.kubectl("get", "pdb", "-A", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    assert not any(name.startswith("kubevirt-disruption-budget-") for name in names)
    assert {"pool-pdb", "pool-pdb-min"} <= set(names)
    status = cluster.kubectl_json("get", "pdb", "pool-pdb", "-n", NS)["status"]
    assert status["expectedPods"] == 0 and status["disruptionsAllowed"] == 0
    allowed = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    assert allowed["status"] == "False"
    events = cluster.kubectl("get", "events", "-n", NS, "--field-selector",
                             "involvedObject.kind=PodDisruptionBudget,involvedObject.name=pool-pdb").stdout
    assert re.search(r"Warning\s+CalculateExpectedPodCountFailed\s+poddisruptionbudget/pool-pdb\s+Failed to calculate the "
                     r"number of expected pods: virtualmachineinstances\.kubevirt\.io does not implement the scale "
                     r"subresource", events), events
    # Three healthy pool VMs do not help: the controller never gets that far.
    pool_launchers = cluster.kubectl_json("get", "pods", "-n", NS, "-l", "kubevirt.io/vmpool=pool")["items"]
    assert len(pool_launchers) == 3
    assert {p["status"]["phase"] for p in pool_launchers} == {"Running"}


def test_integer_min_available_pdb_counts_healthy_launchers(cluster):
    # The scenario's pool-pdb-min selects `kubevirt.io/vmpool: pool-min`, which no Pod carries: no disruption.
    assert cluster.kubectl_json("get", "pdb", "pool-pdb-min", "-n", NS)["status"]["disruptionsAllowed"] == 0
    # The page's recommended configuration, for this pool of three: keep at least two running.
    cluster.kubectl("apply", "-f", "-", input=textwrap.dedent("""\
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata:
          name: vmpool-pdb
          namespace: vms
        spec:
          minAvailable: 2
          selector:
            matchLabels:
              kubevirt.io/vmpool: pool
        """))

    # "ALLOWED DISRUPTIONS should be >= 1" (the page's Verifying step shows 1).
    assert wait_for(lambda: pdb_row(cluster, "vmpool-pdb")[3] != "0", timeout=20, what="vmpool-pdb status")
    assert pdb_row(cluster, "vmpool-pdb") == ["vmpool-pdb", "2", "N/A", "1"]
    status = cluster.kubectl_json("get", "pdb", "vmpool-pdb", "-n", NS)["status"]
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"]) == (3, 2, 3)
    events = cluster.kubectl("get", "events", "-n", NS, "--field-selector", "involvedObject.name=vmpool-pdb").stdout
    assert "CalculateExpectedPodCountFailed" not in events

    # The page's warning: a percentage minAvailable needs /scale too and fails like maxUnavailable.
    cluster.kubectl("apply", "-f", "-", input=textwrap.dedent("""\
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata:
          name: vmpool-pdb-percent
          namespace: vms
        spec:
          minAvailable: 75%
          selector:
            matchLabels:
              kubevirt.io/vmpool: pool
        """))

    def percent_events():
        out = cluster.kubectl("get", "events", "-n", NS, "--field-selector", "involvedObject.name=vmpool-pdb-percent").stdout
        return "CalculateExpectedPodCountFailed" in out and out

    events = wait_for(percent_events, timeout=20, what="the percentage PDB's event")
    assert "virtualmachineinstances.kubevirt.io does not implement the scale subresource" in events
    assert pdb_row(cluster, "vmpool-pdb-percent") == ["vmpool-pdb-percent", "75%", "N/A", "0"]
    cluster.kubectl("delete", "pdb", "vmpool-pdb", "vmpool-pdb-percent", "-n", NS)


# ------------------------------------------------------------------------------ Evict all VMs from a Node
def test_drain_vms_from_a_node_then_uncordon(fresh):
    sim = fresh
    before = vmis(sim)
    pods = launchers_on(sim, "worker-1")
    assert len(pods) == 5
    live, if_possible, none, rwo, bare = (launcher_of(pods, name) for name in
                                          ("vm-live", "vm-if-possible", "vm-none", "vm-rwo", "bare-vmi"))
    other_pods = {p["metadata"]["name"] for p in sim.kubectl_json("get", "pods", "-A", "--field-selector",
                                                                  "spec.nodeName=worker-1")["items"]} - set(pods)
    assert any(name.startswith("frontend-") for name in other_pods)

    # The RWO VM reports it cannot live-migrate, yet its strategy is LiveMigrate.
    rwo_state = sim.kubectl("get", "vmi", "vm-rwo", "-n", NS, "-o", 'jsonpath={.spec.evictionStrategy} '
                            '{.status.conditions[?(@.type=="LiveMigratable")].status} '
                            '{.status.conditions[?(@.type=="LiveMigratable")].reason}').stdout
    assert rwo_state == "LiveMigrate False DisksNotLiveMigratable"

    # First run, bounded: the RWO VM cannot migrate and the webhook refuses its eviction until --timeout.
    started = time.monotonic()
    blocked = sim.kubectl("drain", "worker-1", "--delete-emptydir-data", *PAGE_FLAGS, LAUNCHERS, "--timeout=8s",
                          check=False, timeout=60)
    elapsed = time.monotonic() - started
    assert blocked.returncode == 1, blocked
    assert blocked.stdout.startswith("node/worker-1 cordoned\n")
    for pod in (live, if_possible, none, rwo, bare):
        assert f"evicting pod {NS}/{pod}\n" in blocked.stdout
    # Strategy None: the eviction is allowed at once and the Pod is deleted.
    assert f"pod/{none} evicted\n" in blocked.stdout and f"pod/{bare} evicted\n" in blocked.stdout
    assert not retry_lines(blocked.stderr, none) and not retry_lines(blocked.stderr, bare)
    # LiveMigrate / LiveMigrateIfPossible: a 429 that triggers the evacuation, retried after 5 s; by then the
    # source launcher is gone (NotFound ends kubectl's loop for that Pod).
    assert retry_lines(blocked.stderr, live) == [WEBHOOK + 'Eviction triggered evacuation of VMI "vms/vm-live"']
    assert retry_lines(blocked.stderr, if_possible) == [WEBHOOK + 'Eviction triggered evacuation of VMI "vms/vm-if-possible"']
    # The non-migratable LiveMigrate VM: refused at every attempt (0 s and 5 s), then the global timeout.
    refused = retry_lines(blocked.stderr, rwo)
    assert refused == [WEBHOOK + "VMI vm-rwo is configured with an eviction strategy but is not live-migratable"] * 2
    timeout_line = f'error when evicting pods/"{rwo}" -n "{NS}": global timeout reached: 8s'
    assert f'There are pending pods in node "worker-1" when an error occurred: {timeout_line}\n' in blocked.stderr
    assert f'error: unable to drain node "worker-1" due to error: {timeout_line}, continuing command...' in blocked.stderr
    assert "There are pending nodes to be drained:\n worker-1\n" in blocked.stderr
    assert 8 <= elapsed < 20, elapsed
    assert node_status(sim, "worker-1") == "Ready,SchedulingDisabled"

    # Evacuated by live migration: same UID, another node, a Succeeded kubevirt-evacuation-* VMIM.
    after = vmis(sim)
    migrations = {row["VMI"]: row for row in columns(sim.kubectl("get", "vmim", "-n", NS, "-o", VMIM_COLUMNS).stdout)}
    assert set(migrations) == {"vm-live", "vm-if-possible"}
    for name in ("vm-live", "vm-if-possible"):
        assert after[name]["UID"] == before[name]["UID"]
        assert after[name]["PHASE"] == "Running" and after[name]["NODE"] not in ("worker-1", "control-plane-1")
        vmim = migrations[name]
        assert vmim["NAME"].startswith("kubevirt-evacuation-") and vmim["PHASE"] == "Succeeded"
        assert (vmim["SOURCE"], vmim["TARGET"]) == ("worker-1", after[name]["NODE"])
        annotations = sim.kubectl_json("get", "vmim", vmim["NAME"], "-n", NS)["metadata"]["annotations"]
        assert annotations["kubevirt.io/evacuationMigration"] == "worker-1"
    # Strategy None, VM with runStrategy Always: powered down and started again elsewhere, a new VMI UID.
    restarted = wait_for(lambda: running_vmi(sim, "vm-none", not_uid=before["vm-none"]["UID"]), timeout=20, what="vm-none restarted")
    assert restarted["NODE"] not in ("worker-1", "control-plane-1")
    # A bare VMI is not re-scheduled: it stays finished (the simulator reports Failed) and gets no new launcher.
    assert after["bare-vmi"]["UID"] == before["bare-vmi"]["UID"] and after["bare-vmi"]["PHASE"] in ("Failed", "Succeeded")
    assert sim.kubectl_json("get", "pods", "-n", NS, "-l", f"kubevirt.io/created-by={before['bare-vmi']['UID']}")["items"] == []
    # The RWO VM did not move.
    assert after["vm-rwo"]["NODE"] == "worker-1" and after["vm-rwo"]["UID"] == before["vm-rwo"]["UID"]
    assert set(launchers_on(sim, "worker-1")) == {rwo}

    # Resolve the blocker (shut the VM down), then drain again: nothing is left to evict.
    sim.kubectl("patch", "vm", "vm-rwo", "-n", NS, "--type=merge", "-p", '{"spec":{"runStrategy":"Halted"}}')
    sim.kubectl("wait", "--for=delete", f"pod/{rwo}", "-n", NS, "--timeout=30s")
    done = sim.kubectl("drain", "worker-1", "--delete-emptydir-data", *PAGE_FLAGS, LAUNCHERS, "--timeout=60s")
    assert done.stdout.endswith("node/worker-1 drained\n"), done.stdout
    assert "evicting pod" not in done.stdout
    assert launchers_on(sim, "worker-1") == {}
    stopped = sim.kubectl("get", "vm", "vm-rwo", "-n", NS, "-o", "jsonpath={.status.printableStatus}").stdout
    assert stopped == "Stopped"
    # --pod-selector left the other Pods alone: the frontend Pod and the DaemonSet Pods still run there.
    still = {p["metadata"]["name"] for p in sim.kubectl_json("get", "pods", "-A", "--field-selector",
                                                             "spec.nodeName=worker-1")["items"]}
    assert other_pods <= still
    # Cordoned: nothing new is placed there (the VM restarted elsewhere above).
    assert sim.kubectl("get", "node", "worker-1", "-o", "jsonpath={.spec.unschedulable}").stdout == "true"

    # Re-enabling a node after eviction.
    out = sim.kubectl("uncordon", "worker-1").stdout
    assert out == "node/worker-1 uncordoned\n"
    assert node_status(sim, "worker-1") == "Ready"
    assert sim.kubectl("get", "node", "worker-1", "-o", "jsonpath={.spec.unschedulable}").stdout == ""
    # The stopped VM, started again, may use the node again (it prefers worker-1).
    sim.kubectl("patch", "vm", "vm-rwo", "-n", NS, "--type=merge", "-p", '{"spec":{"runStrategy":"Always"}}')
    back = wait_for(lambda: running_vmi(sim, "vm-rwo", not_uid=before["vm-rwo"]["UID"]), timeout=20, what="vm-rwo running again")
    assert back["NODE"] == "worker-1"


# ------------------------------------------------------------- the obsolete drain taint is still respected
def test_obsolete_drain_taint_still_evacuates_migratable_vmis(fresh):
    sim = fresh
    before = vmis(sim)
    on_node = sorted(name for name, row in before.items() if row["NODE"] == "worker-2")
    movable = [name for name in on_node if name.startswith("pool-")]
    assert movable and any(name.startswith("web-rs") for name in on_node)
    out = sim.kubectl("taint", "nodes", "worker-2", "kubevirt.io/drain=draining:NoSchedule").stdout
    assert out == "node/worker-2 tainted\n"

    def evacuated():
        rows = vmis(sim)
        return all(rows[name]["NODE"] not in ("worker-2", "<none>") for name in movable) and rows

    after = wait_for(evacuated, timeout=20, what="the drain taint's evacuations")
    migrated = {row["VMI"]: row for row in columns(sim.kubectl("get", "vmim", "-n", NS, "-o", VMIM_COLUMNS).stdout)}
    for name in movable:
        assert after[name]["UID"] == before[name]["UID"]
        assert migrated[name]["NAME"].startswith("kubevirt-evacuation-")
        wait_for(lambda vmi=name: columns(sim.kubectl("get", "vmim", migrated[vmi]["NAME"], "-n", NS, "-o",
                                                      VMIM_COLUMNS).stdout)[0]["PHASE"] == "Succeeded",
                 timeout=20, what=f"{name}'s migration")
    # Strategy None VMIs are not evacuated by the taint: they stay until evicted or deleted.
    for name in on_node:
        if name not in movable:
            assert after[name] == before[name] and name not in migrated
    assert node_status(sim, "worker-2") == "Ready"   # a taint, not a cordon


# ------------------------------------------------------------------------ Evict all VMs and Pods from a Node
def test_drain_all_pods_moves_deployment_pods_and_skips_daemonsets(fresh):
    sim = fresh
    before = vmis(sim)
    on_node = {p["metadata"]["name"]: p for p in sim.kubectl_json("get", "pods", "-A", "--field-selector",
                                                                  "spec.nodeName=worker-3")["items"]}
    frontend = [name for name in on_node if name.startswith("frontend-")]
    daemons = sorted(f"{p['metadata']['namespace']}/{name}" for name, p in on_node.items()
                     if any(ref.get("kind") == "DaemonSet" for ref in p["metadata"].get("ownerReferences", [])))
    assert len(frontend) == 1 and len(daemons) == 2
    rs_vmis = [name for name, row in before.items() if name.startswith("web-rs") and row["NODE"] == "worker-3"]
    pool_vmis = [name for name, row in before.items() if name.startswith("pool-") and row["NODE"] == "worker-3"]
    assert len(rs_vmis) == 1 and len(pool_vmis) == 1

    # The page's second command without --pod-selector (and with the current spelling of the flag).
    result = sim.kubectl("drain", "worker-3", "--delete-emptydir-data", *PAGE_FLAGS, "--timeout=60s", timeout=90)
    assert result.stdout.startswith("node/worker-3 cordoned\n") and result.stdout.endswith("node/worker-3 drained\n")
    assert f"Warning: ignoring DaemonSet-managed Pods: {', '.join(daemons)}\n" in result.stderr
    for name in daemons:
        assert f"evicting pod {name}\n" not in result.stdout
    assert f"pod/{frontend[0]} evicted\n" in result.stdout
    # The pool's VM live-migrates: KubeVirt's webhook answers the eviction before the PDB check, so the
    # maxUnavailable PDB (0 allowed disruptions) does not come into play for a LiveMigrate launcher.
    pool_pod = launcher_of(on_node, pool_vmis[0])
    assert retry_lines(result.stderr, pool_pod) == [WEBHOOK + f'Eviction triggered evacuation of VMI "vms/{pool_vmis[0]}"']

    remaining = sim.kubectl_json("get", "pods", "-A", "--field-selector", "spec.nodeName=worker-3")["items"]
    assert sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in remaining) == daemons
    # The Deployment keeps three Pods, the replacement on another node.
    frontends = sim.kubectl_json("get", "pods", "-n", "apps", "-l", "app=frontend")["items"]
    live = [p for p in frontends if not p["metadata"].get("deletionTimestamp")]
    assert len(live) == 3 and all(p["spec"]["nodeName"] != "worker-3" for p in live)
    # The VMI replica set replaced its evicted VMI (strategy None) with a new one elsewhere.

    def replicas_back():
        rows = vmis(sim)
        running = [name for name, row in rows.items() if name.startswith("web-rs") and row["PHASE"] == "Running"]
        return len(running) == 2 and rows

    after = wait_for(replicas_back, timeout=20, what="the VMI replica set back at two replicas")
    assert rs_vmis[0] not in after
    assert all(row["NODE"] != "worker-3" for name, row in after.items() if name.startswith("web-rs"))
    # The pool VM kept its UID on another node.
    assert after[pool_vmis[0]]["UID"] == before[pool_vmis[0]]["UID"] and after[pool_vmis[0]]["NODE"] != "worker-3"
    assert sim.kubectl("uncordon", "worker-3").stdout == "node/worker-3 uncordoned\n"
