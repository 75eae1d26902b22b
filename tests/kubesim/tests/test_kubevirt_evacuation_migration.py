"""Evacuation: a marked VMI becomes a `kubevirt-evacuation-` migration that moves it to another node with
its UID unchanged and the markers cleared; the parallel-migration limits; the fail/hang/slow faults, the
retry backoff, cancellation and an unschedulable target."""
import time

from kubesim.kubevirt import objects
from kubesim.kubevirt.migration import FAILURE_REASON

from kubevirt_sim import NS, VM, VMI, VMIM, Sim

DESCHEDULER = {"requested-by": "sigs.k8s.io/descheduler"}
IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"


def phase(obj):
    return (obj or {}).get("status", {}).get("phase")


def condition(obj, ctype):
    return next((c for c in obj["status"].get("conditions") or [] if c["type"] == ctype), None)


def wait_noting_the_last_miss(sim, predicate, what):
    """sim.wait, and the time of its last poll before `predicate` held: no later than the change it waited for, so a
    duration measured from it is never shorter than the real one, however late the poll that saw the change came."""
    last_miss = [time.monotonic()]

    def noting():
        polled_at = time.monotonic()
        value = predicate()
        if not value:
            last_miss[0] = polled_at
        return value
    return sim.wait(noting, what=what), last_miss[0]


def test_evacuation_migrates_with_the_same_uid_and_clears_markers():
    sim = Sim([objects.vm("mover", NS, labels={"app": "desched-test"}, preferred_node="worker-a",
                          annotations={"kubesim.io/migration": "slow"})])
    try:
        before = sim.wait_running("mover")
        source = sim.launcher("mover")
        assert source["spec"]["nodeName"] == "worker-a"
        assert sim.evict(source["metadata"]["name"], annotations=DESCHEDULER).code == 429

        migration = sim.wait(lambda: phase((sim.migrations("mover") or [None])[0]) == "Running"
                             and sim.migrations("mover")[0], what="migration Running")
        name = migration["metadata"]["name"]
        assert name.startswith("kubevirt-evacuation-") and migration["metadata"]["generateName"] == "kubevirt-evacuation-"
        assert migration["metadata"]["annotations"]["kubevirt.io/evacuationMigration"] == "worker-a"
        assert migration["metadata"]["labels"]["kubevirt.io/vmi-name"] == "mover"
        assert ("SuccessfulCreate", f"Created Migration {name}") in sim.events("VirtualMachineInstance", "mover")
        # in flight: the markers
        assert sim.get("pods", source["metadata"]["name"])["metadata"]["annotations"][IN_PROGRESS] == "true"
        vmi = sim.get(VMI, "mover")
        assert vmi["status"]["evacuationNodeName"] == "worker-a"
        assert vmi["metadata"]["annotations"]["kubevirt.io/eviction-source"] == "descheduler"
        assert condition(vmi, "EvictionRequested")["status"] == "True"
        assert sim.get(VM, "mover")["status"]["printableStatus"] == "Migrating"

        done = sim.wait(lambda: phase(sim.get(VMIM, name)) == "Succeeded" and sim.get(VMIM, name),
                        what="migration Succeeded")
        phases = [p["phase"] for p in done["status"]["phaseTransitionTimestamps"]]
        assert phases == ["Pending", "Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running", "Succeeded"]
        state = done["status"]["migrationState"]
        assert state["sourceNode"] == "worker-a" and state["targetNode"] != "worker-a"
        assert state["completed"] is True and state["mode"] == "PreCopy" and not state.get("failed")
        assert state["sourcePod"] == source["metadata"]["name"] and state["startTimestamp"] and state["endTimestamp"]

        after = sim.wait_for(lambda: sim.get(VMI, "mover"), lambda v: "evacuationNodeName" not in v["status"],
                             what="markers cleared")
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["status"]["nodeName"] == state["targetNode"]
        assert after["metadata"]["labels"]["kubevirt.io/nodeName"] == state["targetNode"]
        assert "kubevirt.io/eviction-source" not in (after["metadata"].get("annotations") or {})
        assert condition(after, "EvictionRequested") is None
        assert after["status"]["migrationState"]["completed"] is True
        sim.wait(lambda: sim.get("pods", source["metadata"]["name"]) is None, what="old launcher gone")
        assert sim.launcher("mover")["spec"]["nodeName"] == state["targetNode"]
        sim.wait_event("VirtualMachineInstance", "mover", "Migrated",
                       f"The VirtualMachineInstance migrated to node {state['targetNode']}.")
        sim.wait(lambda: sim.get(VM, "mover")["status"]["printableStatus"] == "Running", what="VM Running")
    finally:
        sim.stop()


def test_migration_takes_about_ten_simulated_seconds_for_512mi():
    # timeScale 5, not faster: the upper bound (30 simulated s) then leaves 4 real seconds for a loaded machine
    sim = Sim([objects.vm("timed", NS, preferred_node="worker-a")], time_scale=5)
    try:
        sim.wait_running("timed")
        start = time.monotonic()
        sim.evict(sim.launcher("timed")["metadata"]["name"])
        sim.wait(lambda: sim.migrations("timed") and phase(sim.migrations("timed")[0]) == "Succeeded",
                 what="the migration of timed Succeeded")
        simulated = (time.monotonic() - start) * sim.cluster.clock.time_scale
        assert 8 <= simulated <= 30, simulated
    finally:
        sim.stop()


def test_parallel_migration_limits():
    vms = [objects.vm(f"a{i}", NS, preferred_node="worker-a", annotations={"kubesim.io/migration": "hang"})
           for i in range(3)]
    vms += [objects.vm(f"b{i}", NS, preferred_node="worker-b", annotations={"kubesim.io/migration": "hang"})
            for i in range(2)]
    sim = Sim(vms, live_migration={"parallelMigrationsPerCluster": 3})
    try:
        kubevirt = sim.list("kubevirts.kubevirt.io", "kubevirt")[0]
        assert kubevirt["spec"]["configuration"]["migrations"]["parallelMigrationsPerCluster"] == 3
        assert kubevirt["spec"]["configuration"]["migrations"]["parallelOutboundMigrationsPerNode"] == 2
        for vm in vms:
            sim.wait_running(vm["metadata"]["name"])
        for vm in vms:
            assert sim.evict(sim.launcher(vm["metadata"]["name"])["metadata"]["name"]).code == 429
        sim.wait(lambda: len(sim.list(VMIM)) == 5 and sum(phase(m) == "Running" for m in sim.list(VMIM)) == 3,
                 what="three migrations running")
        sim.settle()
        time.sleep(0.2)
        migrations = sim.list(VMIM)
        running = [m for m in migrations if phase(m) == "Running"]
        assert len(running) == 3 and sum(phase(m) == "Pending" for m in migrations) == 2
        from_node = {}
        for migration in running:
            node = migration["metadata"]["annotations"]["kubevirt.io/evacuationMigration"]
            from_node[node] = from_node.get(node, 0) + 1
        assert max(from_node.values()) <= 2
        # cancelling one frees a slot: a pending migration starts
        sim.delete(VMIM, running[0]["metadata"]["name"])
        sim.wait(lambda: sim.get(VMIM, running[0]["metadata"]["name"]) is None, what="cancelled migration gone")
        sim.wait(lambda: sum(phase(m) == "Running" for m in sim.list(VMIM)) == 3, what="a pending one started")
        cancelled = running[0]["spec"]["vmiName"]
        sim.wait_event("VirtualMachineInstanceMigration", running[0]["metadata"]["name"], "FailedMigration",
                       "Migration failed due to being canceled")
        assert sim.get(VMI, cancelled)["status"]["migrationState"]["abortStatus"] == "Succeeded"
    finally:
        sim.stop()


def test_failing_migration_is_retried_with_a_doubling_backoff():
    sim = Sim([objects.vm("flaky", NS, preferred_node="worker-a", annotations={"kubesim.io/migration": "fail"})],
              time_scale=20)
    try:
        sim.wait_running("flaky")
        source = sim.launcher("flaky")
        sim.evict(source["metadata"]["name"])

        def nth_final(index):
            migrations = sorted(sim.migrations("flaky"), key=lambda m: m["metadata"]["creationTimestamp"])
            finals = [m for m in migrations if phase(m) == "Failed"]
            return finals[index] if len(finals) > index else None

        first, failed_at = wait_noting_the_last_miss(sim, lambda: nth_final(0), "first failure")
        assert first["status"]["migrationState"]["failed"] is True
        assert first["status"]["migrationState"]["failureReason"] == FAILURE_REASON
        vmi = sim.get(VMI, "flaky")
        assert vmi["status"]["nodeName"] == "worker-a" and vmi["status"]["evacuationNodeName"] == "worker-a"
        assert vmi["status"]["migrationState"]["failed"] is True
        assert condition(vmi, "EvictionRequested")["status"] == "True"
        sim.wait(lambda: ("MigrationBackoff", "backoff migrating vmi vms/flaky") in
                 sim.events("VirtualMachineInstance", "flaky"), what="backoff event")
        retry = sim.wait(lambda: [m for m in sim.migrations("flaky") if phase(m) == "Pending"],
                         what="a Pending retry after the first failure")[0]
        assert IN_PROGRESS not in (sim.get("pods", source["metadata"]["name"])["metadata"].get("annotations") or {})
        assert len([p for p in sim.launchers("flaky") if p["status"]["phase"] == "Running"]) == 1   # target gone
        sim.wait(lambda: phase(sim.get(VMIM, retry["metadata"]["name"])) not in ("Pending", None),
                 what="the first retry past its backoff")
        assert (time.monotonic() - failed_at) * 20 >= 16            # about 20 simulated seconds of backoff
        _second, second_at = wait_noting_the_last_miss(sim, lambda: nth_final(1), "second failure")
        third = sim.wait(lambda: [m for m in sim.migrations("flaky") if phase(m) == "Pending"],
                         what="a Pending retry after the second failure")[0]
        sim.wait(lambda: phase(sim.get(VMIM, third["metadata"]["name"])) not in ("Pending", None),
                 what="the second retry past its doubled backoff")
        assert (time.monotonic() - second_at) * 20 >= 34            # doubled: about 40 simulated seconds
    finally:
        sim.stop()


def test_hanging_migration_stays_running():
    sim = Sim([objects.vm("stuck", NS, annotations={"kubesim.io/migration": "hang"})])
    try:
        sim.wait_running("stuck")
        sim.evict(sim.launcher("stuck")["metadata"]["name"])
        migration = sim.wait(lambda: [m for m in sim.migrations("stuck") if phase(m) == "Running"], what="Running")[0]
        time.sleep(0.5)                                          # 100 simulated seconds
        assert phase(sim.get(VMIM, migration["metadata"]["name"])) == "Running"
        assert sim.get(VM, "stuck")["status"]["printableStatus"] == "Migrating"
        assert len([p for p in sim.launchers("stuck") if p["status"]["phase"] == "Running"]) == 2
    finally:
        sim.stop()


def test_unschedulable_target_fails_after_the_pending_timeout():
    sim = Sim([objects.vm("pinned", NS, preferred_node="worker-a")], nodes=2, time_scale=400)
    try:
        sim.wait_running("pinned")
        assert sim.launcher("pinned")["spec"]["nodeName"] == "worker-a"
        sim.cordon("worker-b")
        sim.evict(sim.launcher("pinned")["metadata"]["name"])
        migration = sim.wait(lambda: [m for m in sim.migrations("pinned") if phase(m) == "Scheduling"],
                             what="the migration of pinned Scheduling")[0]
        name = migration["metadata"]["name"]
        sim.wait(lambda: ("migrationTargetPodUnschedulable",
                          "Migration target pod for VMI [vms/pinned] is currently unschedulable.")
                 in sim.events("VirtualMachineInstanceMigration", name), what="unschedulable event")
        target = next(p for p in sim.launchers("pinned") if not p["spec"].get("nodeName"))
        affinity = target["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["worker-a"]} in \
            affinity["nodeSelectorTerms"][0]["matchExpressions"]
        assert phase(sim.get(VMIM, name)) == "Scheduling"
        sim.wait(lambda: phase(sim.get(VMIM, name)) == "Failed", what="timeout failure")
        sim.wait_event("VirtualMachineInstanceMigration", name, "FailedMigration",
                       "Migration target pod was removed during active migration.")
        assert sim.get(VMI, "pinned")["status"]["nodeName"] == "worker-a"
    finally:
        sim.stop()


def test_migration_of_a_missing_vmi_is_deleted():
    sim = Sim([])
    try:
        sim.create({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
                    "metadata": {"name": "orphan", "namespace": NS}, "spec": {"vmiName": "ghost"}})
        sim.wait(lambda: sim.get(VMIM, "orphan") is None, what="orphan migration deleted")
    finally:
        sim.stop()


def test_peaks_record_running_migrations_per_source_node_and_marked_vmis():
    vms = [objects.vm(f"p{i}", NS, preferred_node="worker-a", annotations={"kubesim.io/migration": "hang"}) for i in range(3)]
    vms.append(objects.vm("q0", NS, preferred_node="worker-b", annotations={"kubesim.io/migration": "hang"}))
    sim = Sim(vms)
    try:
        peaks = sim.cluster.migration_peaks
        for vm in vms:
            sim.wait_running(vm["metadata"]["name"])
        assert peaks.report()["peak"] == 0 and peaks.report()["marked_peak_per_node"] == {}
        for vm in vms:
            assert sim.evict(sim.launcher(vm["metadata"]["name"])["metadata"]["name"]).code == 429
        sim.wait(lambda: sum(phase(m) == "Running" for m in sim.list(VMIM)) == 3, what="three migrations running")
        sim.settle()
        report = peaks.report()
        # parallelOutboundMigrationsPerNode 2: the third VM of worker-a waits in Pending
        assert report["running"] == 3 and report["running_per_node"] == {"worker-a": 2, "worker-b": 1}
        assert report["peak"] == 3 and report["peak_per_node"] == {"worker-a": 2, "worker-b": 1}
        assert report["started"] == 3
        assert report["marked_peak_per_node"] == {"worker-a": 3, "worker-b": 1}
        # cancelling one lets the waiting one start: running stays at the limit, started counts it
        cancelled = next(m for m in sim.list(VMIM) if phase(m) == "Running" and m["spec"]["vmiName"].startswith("p"))
        sim.delete(VMIM, cancelled["metadata"]["name"])
        sim.wait(lambda: peaks.report()["started"] >= 4, what="the pending migration started")
        assert peaks.report()["peak_per_node"]["worker-a"] == 2
        peaks.reset()
        assert peaks.report()["peak_per_node"] == peaks.report()["running_per_node"]
        assert peaks.report()["started"] == 0
    finally:
        sim.stop()
