"""Facts and plan at scale (a script, not a test). For each size (nodes x VMs) the simulator serves a generated
cluster, and each measurement runs in a child process of its own (wall time, peak RSS, API requests):

  floor       urllib + json.loads of the same lists (nodes, pods, VMIs): what any reader must pay
  facts       kubevirt_eviction_facts' service (module_utils), all sections
  plan        descheduler_policy's service in check mode with the plan (reads, validation, plan; no write)
  k8s_info    the kubernetes.core way: one ansible-playbook k8s_info list of VMIs, then one k8s_info per VM in a
              loop (its Pod by label); measured on a sample of --sample VMs and extrapolated to all VMs

    .venv/bin/python tests/bench/bench_facts.py [--sizes 50x1000,500x10000] [--sample 20]"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.support.simulator import ADMIN_TOKEN, start_kubesim, stop_kubesim  # noqa: E402  # pylint: disable=wrong-import-position

CHILD = r"""
import json, resource, ssl, sys, time, urllib.request
kind, kubeconfig, url, ca_file, token = sys.argv[1:6]
started = time.monotonic()
if kind == "floor":
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    for path in ("/api/v1/nodes", "/api/v1/pods", "/apis/kubevirt.io/v1/virtualmachineinstances"):
        request = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + token})
        json.loads(urllib.request.urlopen(request, timeout=600, context=context).read())
elif kind == "facts":
    from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
    from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_eviction_facts import (
        ARG_SPEC, KubevirtEvictionFactsOptions, gather_eviction_facts)
    result = gather_eviction_facts(KubevirtEvictionFactsOptions.from_params(spec_params(ARG_SPEC, kubeconfig=kubeconfig, api_timeout=600)), False)
    assert result["vmis"] is not None
elif kind == "plan":
    from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
    from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_policy import (
        ARG_SPEC, DeschedulerPolicyOptions, run)
    params = spec_params(ARG_SPEC, kubeconfig=kubeconfig, api_timeout=600, node_selector="node-role.kubernetes.io/worker",
                         vm_labels={"kubevirt.io": "virt-launcher"}, thresholds={"cpu": 20, "memory": 20, "pods": 20},
                         target_thresholds={"cpu": 50, "memory": 50, "pods": 50}, max_pods_to_evict_per_node=1, max_pods_to_evict_total=5,
                         configmap_name="descheduler")
    result = run(DeschedulerPolicyOptions.from_params(params), True)
print(json.dumps({"seconds": time.monotonic() - started, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def requests(sim) -> int:
    return sim.admin("GET", "counters?cluster=workload")["workload"]["total"]


def measure(sim, kind: str, env: dict) -> dict:
    sim.reset_counters()
    process = subprocess.run([sys.executable, "-c", CHILD, kind, sim.kubeconfig, sim.url, sim.ca_file or "", ADMIN_TOKEN],
                             capture_output=True, text=True,
                             env=env, timeout=1800, check=False)
    if process.returncode != 0:
        return {"error": process.stderr.strip().splitlines()[-1:]}
    result = json.loads(process.stdout.strip().splitlines()[-1])
    result["requests"] = requests(sim)
    return result


def k8s_info_way(sim, sample: int, vms: int, workdir: Path, env: dict) -> dict:
    """One list of VMIs, then `sample` per-VM lookups of the launcher Pod by label; extrapolated to `vms`."""
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"kubernetes.core.k8s_info": {"kubeconfig": sim.kubeconfig, "api_version": "kubevirt.io/v1", "kind": "VirtualMachineInstance"},
         "register": "vmis"},
        {"kubernetes.core.k8s_info": {"kubeconfig": sim.kubeconfig, "kind": "Pod", "namespace": "{{ item.metadata.namespace }}",
                                      "label_selectors": ["kubevirt.io/created-by={{ item.metadata.uid }}"]},
         "loop": "{{ vmis.resources[:%d] }}" % sample, "loop_control": {"label": "{{ item.metadata.name }}"}}]}]
    playbook = workdir / "k8s_info.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    inventory = workdir / "inventory"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter={0}\n".format(sys.executable))
    sim.reset_counters()
    started = time.monotonic()
    process = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook)],
                             capture_output=True, text=True, env=env, timeout=3600, check=False)
    seconds = time.monotonic() - started
    if process.returncode != 0:
        return {"error": process.stdout[-500:]}
    counted = requests(sim)
    list_share = seconds / (1 + sample)  # rough: the list task costs about one loop item
    per_vm = (seconds - list_share) / max(1, sample)
    return {"seconds": list_share + per_vm * vms, "requests": int(1 + (counted - 1) / max(1, sample) * vms), "peak_mib": None,
            "note": "extrapolated from {0} VMs ({1:.1f}s, {2} requests measured)".format(sample, seconds, counted)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50x1000,500x10000")
    parser.add_argument("--sample", type=int, default=20)
    args = parser.parse_args()
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), PYTHONPATH=str(ROOT / ".collections"))
    rows = []
    for size in args.sizes.split(","):
        nodes, vms = (int(x) for x in size.split("x"))
        workdir = Path(tempfile.mkdtemp(prefix="bench-facts-"))
        scenario = workdir / "scenario.yaml"
        scenario.write_text(yaml.safe_dump({"name": "bench-{0}".format(size), "timeScale": 10, "clusters": {"workload": {
            "namespaces": ["descheduler"], "generate": {"nodes": nodes, "vms": vms, "namespaces": 1, "namespace": "scale", "seed": 1},
            "objects": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "descheduler", "namespace": "descheduler"},
                         "data": {"policy.yaml": "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n"}}]}}}))
        started = time.monotonic()
        sim = start_kubesim(str(scenario), workdir / "sim")
        startup = time.monotonic() - started
        try:
            results = {kind: measure(sim, kind, env) for kind in ("floor", "facts", "plan")}
            results["k8s_info"] = k8s_info_way(sim, args.sample, vms, workdir, env)
        finally:
            stop_kubesim(sim)
        rows.append((nodes, vms, startup, results))
    print("| nodes | VMs | measurement | wall s | peak MiB | API requests | x floor | note |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |")
    for nodes, vms, startup, results in rows:
        floor = results["floor"].get("seconds") or 0
        for kind, value in results.items():
            if "error" in value:
                print("| {0} | {1} | {2} | error: {3} | | | | |".format(nodes, vms, kind, value["error"]))
                continue
            ratio = value["seconds"] / floor if floor else 0
            peak = "{0:.0f}".format(value["peak_mib"]) if value.get("peak_mib") else ""
            cells = (nodes, vms, kind, value["seconds"], peak, value["requests"], ratio, value.get("note", ""))
            print("| {0} | {1} | {2} | {3:.2f} | {4} | {5} | {6:.1f} | {7} |".format(*cells))
        print("| {0} | {1} | simulator start | {2:.1f} | | | | |".format(nodes, vms, startup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
