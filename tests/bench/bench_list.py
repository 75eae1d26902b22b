"""Listing benchmark (a script, not a test): starts the simulator with the `scale` scenario (200 nodes,
10,000 VMIs, 10,000 virt-launcher Pods) and lists through the `kubernetes` Python client, paginated
(limit 500) and unpaginated:

  VMIs  CustomObjectsApi (dicts), DynamicClient (ResourceInstance), raw (_preload_content=False + json.loads)
  Pods  CoreV1Api typed (V1PodList: deserialisation is the slow part), raw (json.loads, the floor)

Each measurement runs in a child process of its own, so its peak memory (ru_maxrss, and the growth over the
RSS after imports) is its own. Also reports the simulator's startup time and RSS (VmRSS/VmHWM), the HTTP
floor (bytes off the socket, no parsing), and the request counters of each measurement.

    .venv/bin/python tests/bench/bench_list.py [--scenario scale] [--repeat 2] [--profile]

`--profile` then also loads the scenario in process and profiles the simulator's side of listing."""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tests" / "kubesim" / "kubesim"
NAMESPACE = "scale"
VMI = ("kubevirt.io", "v1", "virtualmachineinstances")

MEASUREMENTS = [
    # (name, what is listed, how)
    ("http-floor", "pods", "urllib, bytes only"),
    ("http-floor", "vmis", "urllib, bytes only"),
    ("raw", "vmis", "CustomObjectsApi(_preload_content=False) + json.loads"),
    ("custom", "vmis", "CustomObjectsApi"),
    ("dynamic", "vmis", "DynamicClient"),
    ("raw", "pods", "CoreV1Api(_preload_content=False) + json.loads"),
    ("typed", "pods", "CoreV1Api typed V1PodList"),
]


# ------------------------------------------------------------------------------------------ child side
def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def child(args: argparse.Namespace) -> None:
    """One measurement: import, note RSS, list everything, print JSON with time, items and memory."""
    from kubernetes import client, config
    from kubernetes.dynamic import DynamicClient

    api = config.new_client_from_config(config_file=args.kubeconfig, context="workload")
    base_url = api.configuration.host
    # the floor speaks TLS as the client does: the run's CA and the kubeconfig's admin certificate
    floor_context = ssl.create_default_context(cafile=api.configuration.ssl_ca_cert) if base_url.startswith("https") else None
    if floor_context is not None and api.configuration.cert_file:
        floor_context.load_cert_chain(api.configuration.cert_file, api.configuration.key_file)
    limit = args.limit or None
    dyn = None
    if args.client == "dynamic":
        dyn = DynamicClient(api, cache_file=os.path.join(args.workdir, "discovery.json"))
        vmis = dyn.resources.get(api_version="kubevirt.io/v1", kind="VirtualMachineInstance")
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    baseline = _rss_kb()

    def pages(fetch):
        """fetch(continue_token) -> (items, next_token); yields item counts."""
        token = None
        while True:
            items, token = fetch(token)
            yield len(items)
            if not token or not limit:
                return

    def http_floor(token):
        path = "/api/v1/namespaces/scale/pods" if args.what == "pods" else \
            "/apis/kubevirt.io/v1/namespaces/scale/virtualmachineinstances"
        query = "&".join(q for q in (f"limit={limit}" if limit else "", f"continue={token}" if token else "") if q)
        with urllib.request.urlopen(f"{base_url}{path}{'?' + query if query else ''}", context=floor_context) as response:
            data = response.read()
        # Only the tail is parsed, for the continue token; the items are counted, not decoded.
        meta_end = data.index(b',"items":[')
        meta = json.loads(data[:meta_end] + b"}")["metadata"]
        count = data.count(b'"creationTimestamp":')     # once per object, in its metadata
        return [None] * count, meta.get("continue")

    def fetch(token):
        kwargs = {"limit": limit} if limit else {}
        if token:
            kwargs["_continue"] = token
        if args.client == "http-floor":
            return http_floor(token)
        if args.client == "typed":
            result = core.list_namespaced_pod(NAMESPACE, **kwargs)
            return result.items, result.metadata._continue
        if args.client == "raw" and args.what == "pods":
            response = core.list_namespaced_pod(NAMESPACE, _preload_content=False, **kwargs)
            doc = json.loads(response.data)
            return doc["items"], doc["metadata"].get("continue")
        if args.client == "raw" and args.what == "vmis":
            response = custom.list_namespaced_custom_object(*VMI[:2], NAMESPACE, VMI[2],
                                                            _preload_content=False, **kwargs)
            doc = json.loads(response.data)
            return doc["items"], doc["metadata"].get("continue")
        if args.client == "custom":
            doc = custom.list_namespaced_custom_object(*VMI[:2], NAMESPACE, VMI[2], **kwargs)
            return doc["items"], doc["metadata"].get("continue")
        if args.client == "dynamic":
            result = vmis.get(namespace=NAMESPACE, **kwargs)
            return result.items, result.metadata["continue"]        # None when absent
        raise SystemExit(f"unknown client {args.client}")

    started = time.perf_counter()
    counts = list(pages(fetch))
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"wall": wall, "items": sum(counts), "pages": len(counts), "baseline_kb": baseline,
                      "peak_kb": peak}))


# ----------------------------------------------------------------------------------------- parent side
def proc_status(pid: int) -> dict[str, int]:
    result = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            key, _sep, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                result[key] = int(value.split()[0])
    return result


def admin(url: str, method: str, path: str, context: ssl.SSLContext | None) -> dict:
    request = urllib.request.Request(f"{url}/_kubesim/{path}", method=method)
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        return json.loads(response.read())


def start_simulator(scenario: str, workdir: str) -> tuple[subprocess.Popen, str, float]:
    kubeconfig = os.path.join(workdir, "kubeconfig")
    command = [str(LAUNCHER), "serve", "--scenario", scenario, "--kubeconfig", kubeconfig]
    env = {**os.environ, "KUBESIM_PYTHON": os.environ.get("KUBESIM_PYTHON", sys.executable)}
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = process.stdout.readline().strip()
    startup = time.perf_counter() - started
    if not line.startswith("ready "):
        process.kill()
        raise SystemExit(f"the simulator did not start: {line!r}\n{process.stderr.read()}")
    return process, line.split(" ", 1)[1], startup


def server_profile(scenario: str) -> None:
    """In-process: the simulator's own cost of listing Pods (selection + joining cached JSON), without HTTP,
    unpaginated (cold: first encoding of each object; warm) and paginated by 500, with a cProfile of the
    paginated walk, and a profile of loading the scenario."""
    import cProfile
    import pstats
    sys.path.insert(0, str(ROOT / "tests"))
    from kubesim.simulator import Simulator
    from kubesim.store import encode

    loading = cProfile.Profile()
    started = time.perf_counter()
    loading.enable()
    sim = Simulator(scenario)
    loading.disable()
    print(f"\nserver side, in process: loading the scenario {time.perf_counter() - started:.2f} s (under cProfile)")
    cluster = sim.clusters["workload"]
    pods = cluster.registry.by_key("pods")

    def body(result) -> bytes:
        head = encode({"kind": pods.list_kind, "apiVersion": pods.api_version, "metadata": {}})[:-1]
        return head + b',"items":[' + b",".join(e.raw for e in result.items) + b"]}"

    for label in ("cold", "warm"):
        started = time.perf_counter()
        size = len(body(cluster.list(pods, NAMESPACE)))
        print(f"  list pods unpaginated ({label}): {time.perf_counter() - started:.3f} s, {size / 1e6:.1f} MB")
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    token, pages = None, 0
    while True:
        result = cluster.list(pods, NAMESPACE, limit=500, continue_token=token)
        body(result)
        pages += 1
        token = result.continue_token
        if not token:
            break
    profiler.disable()
    print(f"  list pods paginated: {pages} pages in {time.perf_counter() - started:.3f} s (under cProfile)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(6)
    print("loading the scenario (top 8 by cumulative time):")
    pstats.Stats(loading).sort_stats("cumulative").print_stats(8)


def stop_simulator(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="scale")
    parser.add_argument("--repeat", type=int, default=2, help="runs per measurement; the best wall time is shown")
    parser.add_argument("--profile", action="store_true", help="also profile listing inside the simulator")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--what", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    bench_started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-list-") as workdir:
        process, url, startup = start_simulator(args.scenario, workdir)
        # the launcher writes the run's CA next to the kubeconfig
        context = ssl.create_default_context(cafile=os.path.join(workdir, "ca.crt")) if url.startswith("https") else None
        try:
            admin(url, "GET", "settle?timeout=120", context)
            after_start = proc_status(process.pid)
            print(f"simulator: scenario {args.scenario}, startup {startup:.2f} s (until `ready`), "
                  f"RSS after start {after_start['VmRSS'] / 1024:.0f} MiB")
            rows = []
            for client_name, what, how in MEASUREMENTS:
                for limit in (0, 500):
                    best = None
                    for _attempt in range(args.repeat):
                        admin(url, "DELETE", "counters", context)
                        command = [sys.executable, __file__, "--child", "--client", client_name, "--what", what,
                                   "--limit", str(limit), "--kubeconfig", os.path.join(workdir, "kubeconfig"),
                                   "--workdir", workdir]
                        out = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
                        if out.returncode != 0:
                            raise SystemExit(f"measurement {client_name}/{what} failed:\n{out.stderr}")
                        result = json.loads(out.stdout.strip().splitlines()[-1])
                        counters = admin(url, "GET", "counters?cluster=workload", context)["workload"]["requests"]
                        result["requests"] = {k: v for k, v in counters.items() if k.startswith("list ")}
                        if best is None or result["wall"] < best["wall"]:
                            best = result
                    rows.append((client_name, what, how, limit, best))
            final = proc_status(process.pid)
        finally:
            stop_simulator(process)

        header = f"{'client':<11} {'what':<5} {'limit':>5} {'items':>6} {'pages':>5} {'wall s':>7} " \
                 f"{'items/s':>8} {'peak MiB':>8} {'+MiB':>6}  requests"
        print()
        print(header)
        print("-" * len(header))
        for client_name, what, _how, limit, r in rows:
            rate = r["items"] / r["wall"] if r["wall"] else 0
            requests = ", ".join(f"{k}={v}" for k, v in sorted(r["requests"].items()))
            print(f"{client_name:<11} {what:<5} {limit or '-':>5} {r['items']:>6} {r['pages']:>5} {r['wall']:>7.2f} "
                  f"{rate:>8.0f} {r['peak_kb'] / 1024:>8.0f} {(r['peak_kb'] - r['baseline_kb']) / 1024:>6.0f}  "
                  f"{requests}")
        print()
        print("peak MiB: client process ru_maxrss; +MiB: peak minus the RSS after imports and client set-up")
        for client_name, what, how in MEASUREMENTS:
            print(f"  {client_name:<11} {what:<5} {how}")
        print(f"simulator RSS: after start {after_start['VmRSS'] / 1024:.0f} MiB, at the end "
              f"{final['VmRSS'] / 1024:.0f} MiB, peak (VmHWM) {final['VmHWM'] / 1024:.0f} MiB")
        print(f"benchmark wall time: {time.perf_counter() - bench_started:.0f} s")
    if args.profile:
        server_profile(args.scenario)
    return 0


if __name__ == "__main__":
    sys.exit(main())
