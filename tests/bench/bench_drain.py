"""Benchmark: evacuate 20 LiveMigrate VMs from one node, `kubectl drain` with the flags of node maintenance (Evict
all VMs from a Node) against `kubevirt_node_drain`, in one run, each on a fresh simulator with the same scenario
(default migration limits: parallelOutboundMigrationsPerNode 2, parallelMigrationsPerCluster 5; a fixed
migration time).

Prints a table: wall time of each, the lower bound ceil(VMs / limit) x migration time, the ratio to it,
evictions sent, and the simulator's peak of running and marked migrations from the node.

    .venv/bin/python tests/bench/bench_drain.py [--vms 20] [--time-scale 5]

The migration time is measured in the run (the mean VMIM duration from its phase timestamps), so the bound
uses what the simulator actually did."""
from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / ".collections"))
sys.path.insert(0, str(ROOT))

from tests.support.simulator import start_kubesim, stop_kubesim  # noqa: E402  # pylint: disable=wrong-import-position
from tests.integration.drain_scenario import write_scenario  # noqa: E402  # pylint: disable=wrong-import-position
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params  # noqa: E402  # pylint: disable=wrong-import-position
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import (  # noqa: E402  # pylint: disable=wrong-import-position
    ARG_SPEC,
    KubevirtNodeDrainOptions,
    run,
)

NODE = "worker-1"


def parse_time(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp() \
        if "." not in text else datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def migration_seconds(sim) -> float:
    """Mean real duration of the Succeeded migrations, Scheduling to Succeeded (the part the limits bound)."""
    durations = []
    for vmim in sim.kubectl_json("get", "vmim", "-n", "vms")["items"]:
        stamps = {p["phase"]: p["phaseTransitionTimestamp"] for p in vmim["status"].get("phaseTransitionTimestamps", [])}
        if "Scheduling" in stamps and "Succeeded" in stamps:
            durations.append(parse_time(stamps["Succeeded"]) - parse_time(stamps["Scheduling"]))
    return sum(durations) / len(durations) if durations else float("nan")


def all_moved(sim, count: int) -> bool:
    items = sim.kubectl_json("get", "vmi", "-n", "vms")["items"]
    return len(items) == count and all(v["status"].get("nodeName") not in (None, NODE) and v["status"].get("phase") == "Running"
                                       and not v["status"].get("evacuationNodeName") for v in items)


def bench_kubectl(sim, count: int) -> dict:
    started = time.monotonic()
    result = sim.kubectl("drain", NODE, "--delete-emptydir-data", "--ignore-daemonsets=true", "--force",
                         "--pod-selector=kubevirt.io=virt-launcher", "--timeout=600s", timeout=700)
    wall = time.monotonic() - started
    assert result.stdout.endswith(f"node/{NODE} drained\n"), result.stdout
    assert all_moved(sim, count)
    return {"wall": wall, "evictions": sim.counters().get("create pods/eviction", 0)}


def bench_module(sim, count: int) -> dict:
    started = time.monotonic()
    # progress_every=0: one call, the drain itself rather than the controller's loop
    params = spec_params(ARG_SPEC, kubeconfig=sim.kubeconfig, node=NODE, timeout=600, api_timeout=60, progress_every=0)
    options = KubevirtNodeDrainOptions.from_params(params)
    result = run(options, False)
    wall = time.monotonic() - started
    assert result["drained"] and result["summary"] == {"migrated": count}, json.dumps(result.get("summary"))
    assert all_moved(sim, count)
    return {"wall": wall, "evictions": result["evictions"]["requests"]}


def measure(name: str, scenario: Path, count: int, workdir: Path) -> dict:
    sim = start_kubesim(str(scenario), workdir / name)
    try:
        sim.settle(30)
        on_node = [v for v in sim.kubectl_json("get", "vmi", "-n", "vms")["items"] if v["status"].get("nodeName") == NODE]
        assert len(on_node) == count, f"{len(on_node)} VMIs on {NODE}"
        sim.reset_counters()
        figures = (bench_kubectl if name == "kubectl drain" else bench_module)(sim, count)
        peaks = sim.admin("GET", "counters?cluster=workload")["workload"]["migrations"]
        figures.update(name=name, migration=migration_seconds(sim), peak=peaks["peak_per_node"].get(NODE, 0),
                       marked=peaks["marked_peak_per_node"].get(NODE, 0))
        return figures
    finally:
        stop_kubesim(sim)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--vms", type=int, default=20)
    parser.add_argument("--time-scale", type=float, default=5, help="simulated seconds per real second (migration ~10 simulated s)")
    args = parser.parse_args()
    limit = 2  # parallelOutboundMigrationsPerNode, the default (below parallelMigrationsPerCluster 5)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        scenario = write_scenario(workdir / "drain.yaml", count=args.vms, time_scale=args.time_scale)
        rows = [measure(name, scenario, args.vms, workdir) for name in ("kubectl drain", "kubevirt_node_drain")]
    migration = sum(r["migration"] for r in rows) / len(rows)
    bound = math.ceil(args.vms / limit) * migration
    print(f"\n{args.vms} LiveMigrate VMs on {NODE}, limit {limit} per node, migration {migration:.2f} s (measured), "
          f"lower bound ceil({args.vms}/{limit}) x {migration:.2f} = {bound:.1f} s\n")
    print(f"{'drain':<22}{'wall (s)':>10}{'ratio':>8}{'evictions':>11}{'peak running':>14}{'peak marked':>13}")
    for row in rows:
        print(f"{row['name']:<22}{row['wall']:>10.1f}{row['wall'] / bound:>8.2f}{row['evictions']:>11}{row['peak']:>14}{row['marked']:>13}")


if __name__ == "__main__":
    main()
