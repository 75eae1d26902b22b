"""Benchmark: maintain every worker of a cluster in turn, the node maintenance page's loop (`kubectl drain` with its
flags, then `kubectl uncordon`, node by node in name order) against `playbooks/cluster_maintenance.yml`, in one run,
each on a fresh simulator with the same scenario (tests/integration/drain_scenario.py `write_cluster_scenario`):
six full workers with ten LiveMigrate VMs each plus one VM of a six-replica pool whose PDB has minAvailable 5, and
the spare capacity of one worker as an empty seventh worker; the default migration limits (5 per cluster, 2
outbound per node); all seven workers maintained, no per-node work in between.

Prints a table: migrations per VM (Succeeded VirtualMachineInstanceMigrations per VMI, all namespaces: mean, max,
VMs moved more than once), failed migrations, VMs restarted (a new VMI UID), total wall time, the lower bound
ceil(VMs / parallelMigrationsPerCluster) x the mean migration time measured in the run and the ratio to it, the ratio
to what one full worker at a time allows (the spare room holds one worker's VMs: six workers x ceil(11 / 2) rounds),
the peak of concurrent migrations in the cluster and from one node, and PDB violations (both from
`/_kubesim/counters`).
Exits 1 if a tool did not finish (or left a VM not running where it should, or a node cordoned).

    .venv/bin/python tests/bench/bench_cluster_maintenance.py [--time-scale 15] [--tools page,collection] [--keep DIR]"""
from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / ".collections"))
sys.path.insert(0, str(ROOT))

from tests.bench.bench_drain import parse_time  # noqa: E402  # pylint: disable=wrong-import-position
from tests.integration.ansible_run import ansible_env, playbook_command  # noqa: E402  # pylint: disable=wrong-import-position
from tests.integration.drain_scenario import write_cluster_scenario  # noqa: E402  # pylint: disable=wrong-import-position
from tests.support.simulator import start_kubesim, stop_kubesim  # noqa: E402  # pylint: disable=wrong-import-position

PLAYBOOK = ROOT / "playbooks" / "cluster_maintenance.yml"
FULL_WORKERS, VMS_PER_WORKER, POOL_REPLICAS = 6, 10, 6
WORKERS = ["worker-{0}".format(i) for i in range(1, FULL_WORKERS + 2)]   # the last one is the empty spare
SPARE = WORKERS[-1]
PER_CLUSTER, PER_NODE = 5, 2   # parallelMigrationsPerCluster, parallelOutboundMigrationsPerNode: the defaults (the scenario sets no other)
TOOLS = {"page": "page's loop (kubectl drain + uncordon)", "collection": "cluster_maintenance.yml"}


def page_loop(sim, workdir: Path, timeout: int) -> str | None:
    """The page's procedure for every worker in name order (its output in `workdir`); the error of the first step
    that failed, else None."""
    workdir.mkdir(parents=True, exist_ok=True)
    with (workdir / "page-loop.log").open("w", encoding="utf-8") as log:
        for node in WORKERS:
            for command in (("drain", node, "--delete-emptydir-data", "--ignore-daemonsets=true", "--force",
                             "--pod-selector=kubevirt.io=virt-launcher", "--timeout={0}s".format(timeout)), ("uncordon", node)):
                result = sim.kubectl(*command, check=False, timeout=timeout + 60)
                log.write("$ kubectl {0}\n{1}{2}".format(" ".join(command), result.stdout, result.stderr))
                if result.returncode != 0:
                    return "kubectl {0} {1} failed ({2}): {3}".format(command[0], node, result.returncode, result.stderr.strip()[-500:])
    return None


def collection(sim, workdir: Path, timeout: int) -> str | None:
    """ansible-playbook playbooks/cluster_maintenance.yml for every worker, the simulator as the one inventory host
    (as tests/integration/ansible_run.py runs a playbook); the tail of its output when it failed, else None."""
    if not PLAYBOOK.exists():
        return "{0} does not exist".format(PLAYBOOK.relative_to(ROOT))
    variables = {"cluster_maintenance_nodes": WORKERS, "cluster_maintenance_timeout": timeout,
                 "cluster_maintenance_report_dir": str(workdir / "report")}
    command = playbook_command(sim, PLAYBOOK, variables, workdir / "ansible")
    with tempfile.TemporaryDirectory(prefix="ans-") as temp:   # a short TMPDIR for ansible-core's socket
        try:
            process = subprocess.run(command, capture_output=True, text=True, env=ansible_env(workdir / "ansible", temp),
                                     timeout=timeout * len(WORKERS), check=False)
        except subprocess.TimeoutExpired:
            return "ansible-playbook did not end in {0} s".format(timeout * len(WORKERS))
    (workdir / "ansible-playbook.log").write_text(process.stdout + process.stderr)
    if process.returncode != 0:
        return "ansible-playbook failed ({0}):\n{1}".format(process.returncode, (process.stdout + process.stderr)[-3000:])
    return None


RUNNERS = {"page": page_loop, "collection": collection}


def vmis(sim) -> dict:
    return {(v["metadata"]["namespace"], v["metadata"]["name"]): v for v in sim.kubectl_json("get", "vmi", "-A")["items"]}


def migrations(sim) -> tuple[Counter, list, int]:
    """Succeeded migrations per (namespace, VMI), their durations Scheduling to Succeeded (the part the limits bound)
    and the number of failed migrations, from every VirtualMachineInstanceMigration in the cluster."""
    per_vmi: Counter = Counter()
    durations, failed = [], 0
    for vmim in sim.kubectl_json("get", "vmim", "-A")["items"]:
        phase = (vmim.get("status") or {}).get("phase")
        failed += phase == "Failed"
        if phase != "Succeeded":
            continue
        per_vmi[(vmim["metadata"]["namespace"], vmim["spec"]["vmiName"])] += 1
        stamps = {p["phase"]: p["phaseTransitionTimestamp"] for p in vmim["status"].get("phaseTransitionTimestamps", [])}
        if "Scheduling" in stamps:
            durations.append(parse_time(stamps["Succeeded"]) - parse_time(stamps["Scheduling"]))
    return per_vmi, durations, failed


def end_state_problems(sim, before: dict) -> list:
    """What is wrong after a tool said it finished: VMs gone, not running or still marked for evacuation, nodes
    left cordoned."""
    now = vmis(sim)
    problems = []
    for (namespace, name) in before:
        vmi = now.get((namespace, name))
        if vmi is None:
            problems.append("{0}/{1} is gone".format(namespace, name))
        elif vmi["status"].get("phase") != "Running" or vmi["status"].get("evacuationNodeName"):
            problems.append("{0}/{1} is {2}, evacuation node {3}".format(namespace, name, vmi["status"].get("phase"),
                                                                         vmi["status"].get("evacuationNodeName")))
    cordoned = [n["metadata"]["name"] for n in sim.kubectl_json("get", "nodes")["items"] if n["spec"].get("unschedulable")]
    return problems + ["node {0} left cordoned".format(node) for node in cordoned]


def measure(tool: str, scenario: Path, workdir: Path, timeout: int) -> dict:
    sim = start_kubesim(str(scenario), workdir / tool)
    try:
        figures = measure_on(sim, tool, workdir, timeout)
    finally:
        stop_kubesim(sim)
    # a controller that raised (the simulator prints it and carries on) may have left an object unhandled
    figures["simulator_errors"] = [block.split("\n\n")[0] for block in sim.process.stderr.read().split("kubesim: controller error:\n")[1:]]
    return figures


def measure_on(sim, tool: str, workdir: Path, timeout: int) -> dict:
    sim.settle(60)
    before = vmis(sim)
    placement = Counter(v["status"].get("nodeName") for v in before.values())
    expected = {node: VMS_PER_WORKER + 1 for node in WORKERS[:-1]}
    assert dict(placement) == expected, "start placement {0}, expected {1}".format(dict(placement), expected)
    sim.kubectl("uncordon", SPARE)   # the scenario keeps it cordoned until the pool has spread over the others
    sim.reset_counters()
    started = time.monotonic()
    error = RUNNERS[tool](sim, workdir / tool, timeout)
    wall = time.monotonic() - started
    counters = sim.admin("GET", "counters?cluster=workload")["workload"]
    per_vmi, durations, failed = migrations(sim)
    moves = [per_vmi[key] for key in before]
    problems = [] if error else end_state_problems(sim, before)
    restarted = sum(1 for key, vmi in vmis(sim).items() if key in before and vmi["metadata"]["uid"] != before[key]["metadata"]["uid"])
    peaks = counters["migrations"]
    moved_again = Counter(before[key]["status"]["nodeName"] for key in before if per_vmi[key] > 1)
    return {"tool": tool, "error": error or "; ".join(problems[:5]) or None, "vms": len(before), "moves": moves,
            "moved_again": dict(sorted(moved_again.items())), "durations": durations, "failed": failed, "restarted": restarted,
            "wall": wall, "peak": peaks["peak"], "peak_node": max(peaks["peak_per_node"].values(), default=0),
            "pdb_violations": counters["pdbs"]["count"] if "pdbs" in counters else None}


def print_table(rows: list, time_scale: float) -> None:
    durations = [d for row in rows for d in row["durations"]]
    migration = sum(durations) / len(durations) if durations else float("nan")
    vms = rows[0]["vms"]
    bound = math.ceil(vms / PER_CLUSTER) * migration
    # The spare room of one worker takes the VMs of one full worker: draining one full worker at a time, each at
    # PER_NODE outbound, is what a rolling order that moves every VM once can do at best here.
    per_worker = VMS_PER_WORKER + POOL_REPLICAS // FULL_WORKERS
    serial_rounds = FULL_WORKERS * math.ceil(per_worker / PER_NODE)
    print("\n{0} workers x {1} LiveMigrate VMs + a pool of {2} (PDB minAvailable {3}) = {4} VMs, spare {5} (empty), "
          "limits {6} per cluster / {7} per node, time scale {8:g}; migration {9:.2f} s (mean of {10} measured); "
          "lower bound ceil({4}/{6}) x {9:.2f} = {11:.1f} s; one full worker at a time: {0} workers x ceil({12}/{7}) = {13} "
          "rounds x {9:.2f} = {14:.1f} s\n".format(
              FULL_WORKERS, VMS_PER_WORKER, POOL_REPLICAS, POOL_REPLICAS - 1, vms, SPARE, PER_CLUSTER, PER_NODE, time_scale,
              migration, len(durations), bound, per_worker, serial_rounds, serial_rounds * migration))
    header = ("| tool | finished | migrations per VM (mean) | max | VMs moved twice or more | failed migrations | VMs restarted "
              "| wall s | x lower bound | x one worker at a time | peak migrations (cluster) | peak migrations (one node) | PDB violations |")
    print(header)
    print("| --- | --- |" + " ---: |" * (header.count("|") - 3))
    for row in rows:
        moves = row["moves"]
        pdb = "not counted (no `pdbs` in the counters)" if row["pdb_violations"] is None else row["pdb_violations"]
        print("| {0} | {1} | {2:.2f} | {3} | {4} | {5} | {6} | {7:.1f} | {8:.2f} | {9:.2f} | {10} | {11} | {12} |".format(
            TOOLS[row["tool"]], "no" if row["error"] else "yes", sum(moves) / len(moves), max(moves),
            sum(1 for m in moves if m > 1), row["failed"], row["restarted"], row["wall"], row["wall"] / bound,
            row["wall"] / (serial_rounds * migration), row["peak"], row["peak_node"], pdb))
    print()
    for row in rows:
        print("{0}: VMs moved twice or more by the node they started on: {1}".format(
            TOOLS[row["tool"]], ", ".join("{0} {1}".format(node, count) for node, count in row["moved_again"].items()) or "none"))
    for row in rows:
        if row["simulator_errors"]:
            print("\n{0}: the simulator's controllers raised {1} time(s) during the run (the figures may be off); the first:\n{2}".format(
                TOOLS[row["tool"]], len(row["simulator_errors"]), row["simulator_errors"][0].rstrip()))
        if row["error"]:
            print("\n{0} did not finish: {1}".format(TOOLS[row["tool"]], row["error"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--time-scale", type=float, default=15,
                        help="simulated seconds per real second (a 2Gi VM's migration is ~37 simulated s)")
    parser.add_argument("--tools", default="page,collection", help="comma-separated: page, collection")
    parser.add_argument("--timeout", type=int, default=180,
                        help="drain timeout per node (per batch for the collection), seconds; raise it with a lower --time-scale")
    parser.add_argument("--keep", type=Path, help="keep the run's files here (the loop's output, ansible-playbook's, the report)")
    args = parser.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        parser.error("unknown tools {0}; choose from {1}".format(unknown, ", ".join(TOOLS)))
    with tempfile.TemporaryDirectory(prefix="bench-cm-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        scenario = write_cluster_scenario(workdir / "cluster.yaml", workers=FULL_WORKERS, vms_per_worker=VMS_PER_WORKER,
                                          pool_replicas=POOL_REPLICAS, time_scale=args.time_scale)
        rows = [measure(tool, scenario, workdir, args.timeout) for tool in tools]
    print_table(rows, args.time_scale)
    return 1 if any(row["error"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
