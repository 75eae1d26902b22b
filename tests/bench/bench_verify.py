"""Verification cost (a script, not a test), on the `maintenance` scenario's live-migratable VM `vms/vm-live`:

  latency   time from the deciding event (the VirtualMachineInstanceMigration reaching Succeeded or Failed, seen
            by a watch of our own) to the return of vm_migration_verify's service, for --repeat passing and
            --repeat failing migrations (annotation kubesim.io/migration=fail)
  waiting   API requests while the module waits for a migration that never comes, for two waiting times: the
            requests made, and the requests per minute of waiting beyond the first seconds (the difference)

    .venv/bin/python tests/bench/bench_verify.py [--repeat 5] [--waits 10,40]"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / ".collections"))
sys.path.insert(0, str(ROOT))

from kubernetes import client, config, watch  # noqa: E402  # pylint: disable=wrong-import-position

from tests.support.simulator import start_kubesim, stop_kubesim  # noqa: E402  # pylint: disable=wrong-import-position
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params  # noqa: E402  # pylint: disable=wrong-import-position
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_verify  # noqa: E402  # pylint: disable=wrong-import-position

NAMESPACE, VM = "vms", "vm-live"


def module(sim, **given) -> dict:
    """vm_migration_verify's service in this process, on vms/vm-live, with the module's defaults otherwise."""
    # progress_every=0: one call, the wait itself rather than the controller's loop
    params = spec_params(vm_migration_verify.ARG_SPEC, kubeconfig=sim.kubeconfig, names=["{0}/{1}".format(NAMESPACE, VM)], progress_every=0, **given)
    return vm_migration_verify.run(vm_migration_verify.VmMigrationVerifyOptions.from_params(params), False)


def running_baseline(sim, deadline: float = 60) -> dict:
    """A baseline taken once the VM runs with its launcher (after a migration the old one is being removed)."""
    end = time.monotonic() + deadline
    while True:
        baseline = module(sim, mode="record")["baseline"]
        launchers = sim.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", "kubevirt.io/vm={0}".format(VM))["items"]
        if baseline.get(VM, {}).get("launcher") and len(launchers) == 1:
            # migrations created up to 2 s before a baseline count as its own (whole-second timestamps): let the last
            # one fall out of that window, else the verdict is decided by it (see docs/performance.md)
            time.sleep(3.1)
            return module(sim, mode="record")["baseline"]
        if time.monotonic() > end:
            raise RuntimeError("vm-live does not run: {0}".format(baseline))
        time.sleep(0.2)


def settle(sim, deadline: float = 120) -> None:
    """Until the VMI is no longer being evacuated and no migration of it is in flight."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        vmi = sim.kubectl_json("get", "vmi", VM, "-n", NAMESPACE)
        vmims = sim.kubectl_json("get", "vmim", "-n", NAMESPACE)["items"]
        if not (vmi.get("status") or {}).get("evacuationNodeName") and all(
                (m.get("status") or {}).get("phase") in ("Succeeded", "Failed") for m in vmims):
            return
        time.sleep(0.5)
    raise RuntimeError("vm-live does not come to rest")


def final_migration_at(sim, seen: dict, ready: threading.Event) -> None:
    api = client.CustomObjectsApi(config.new_client_from_config(sim.kubeconfig))
    listed = api.list_namespaced_custom_object("kubevirt.io", "v1", NAMESPACE, "virtualmachineinstancemigrations")
    known = {m["metadata"]["name"] for m in listed["items"]}
    ready.set()
    for event in watch.Watch().stream(api.list_namespaced_custom_object, "kubevirt.io", "v1", NAMESPACE,
                                      "virtualmachineinstancemigrations", timeout_seconds=120):
        obj = event["object"]
        if obj["metadata"]["name"] not in known and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            seen["at"] = time.monotonic()
            return


def one_latency(sim, fail: bool) -> float:
    sim.kubectl("annotate", "--overwrite", "vmi", VM, "-n", NAMESPACE, "kubesim.io/migration=fail" if fail else "kubesim.io/migration-")
    baseline = running_baseline(sim)
    seen, done, ready = {}, {}, threading.Event()
    watcher = threading.Thread(target=final_migration_at, args=(sim, seen, ready), daemon=True)
    watcher.start()
    ready.wait(30)

    def run() -> None:
        done["result"] = module(sim, baseline=baseline, timeout=90)
        done["at"] = time.monotonic()
    runner = threading.Thread(target=run)
    runner.start()
    time.sleep(1.0)  # the module is watching
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=baseline[VM]["launcher"], namespace=NAMESPACE))
    try:
        client.CoreV1Api(config.new_client_from_config(sim.kubeconfig)).create_namespaced_pod_eviction(baseline[VM]["launcher"], NAMESPACE, body)
    except client.exceptions.ApiException as error:
        if error.status != 429:  # KubeVirt answers 429 and migrates instead
            raise
    runner.join(120)
    watcher.join(10)
    if fail:  # KubeVirt retries a failed evacuation: let a retry succeed so that the next run starts from rest
        sim.kubectl("annotate", "--overwrite", "vmi", VM, "-n", NAMESPACE, "kubesim.io/migration-")
        settle(sim)
    verdict = done["result"]["vms"][0]["verdict"]
    if verdict != ("fail" if fail else "pass") or "at" not in seen:
        raise RuntimeError("unexpected verdict {0}: {1}".format(verdict, done["result"]["vms"][0]))
    return done["at"] - seen["at"]


def waiting(sim, seconds: float) -> dict:
    baseline = running_baseline(sim)
    sim.reset_counters()
    result = module(sim, baseline=baseline, timeout=seconds)
    if not result["timed_out"]:
        raise RuntimeError("the wait ended early: {0}".format(result["vms"]))
    return sim.admin("GET", "counters?cluster=workload")["workload"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--waits", default="10,40")
    args = parser.parse_args()
    sim = start_kubesim("maintenance", Path(tempfile.mkdtemp(prefix="bench-verify-")) / "sim")
    try:
        # the idle waits first: after a failed evacuation KubeVirt keeps retrying it, so the VM never rests again
        short, long_ = (float(x) for x in args.waits.split(","))
        counts = (waiting(sim, short), waiting(sim, long_))
        latencies = {kind: [one_latency(sim, kind == "fail") for _run in range(args.repeat)] for kind in ("pass", "fail")}
    finally:
        stop_kubesim(sim)
    print("| measurement | runs | median s | max s |")
    print("| --- | ---: | ---: | ---: |")
    for kind, values in latencies.items():
        print("| deciding event to return, migration {0} | {1} | {2:.3f} | {3:.3f} |".format(
            "succeeded" if kind == "pass" else "failed", len(values), statistics.median(values), max(values)))
    print()
    print("| waiting for a migration that never comes | requests |")
    print("| --- | ---: |")
    print("| {0:.0f} s | {1} |".format(short, counts[0]["total"]))
    print("| {0:.0f} s | {1} |".format(long_, counts[1]["total"]))
    print("| requests per minute of further waiting | {0:.1f} |".format((counts[1]["total"] - counts[0]["total"]) / (long_ - short) * 60))
    more = {k: v - counts[0]["requests"].get(k, 0) for k, v in counts[1]["requests"].items() if v != counts[0]["requests"].get(k, 0)}
    print()
    print("requests added by the longer wait: {0}".format(", ".join("{0} +{1}".format(k, v) for k, v in sorted(more.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
