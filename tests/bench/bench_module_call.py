"""The CPU of one module call (a script, not a test): what every task of the roles and playbooks costs the machine.

For kubevirt_eviction_facts and run_lease (state absent: one read) against the `api-basics` scenario, the AnsiballZ
payload Ansible sends is kept (ANSIBLE_KEEP_REMOTE_FILES) and run --repeat times as Ansible runs it; the figures are
the CPU seconds (user + system) of the module's process, median and minimum, for two connections:

  native     the kubeconfig as the modules get it: the collection's own HTTP client (plugins/module_utils/k8s/native.py)
  fallback   the same kubeconfig with `no_proxy` set, an option the native client leaves to kubernetes.core's client
             (the only client before issue 29), so its import of the kubernetes package is measured

and, for comparison, ansible.builtin.stat (the cost of any module: Python, the AnsiballZ payload, module_utils.basic).

    .venv/bin/python tests/bench/bench_module_call.py [--repeat 10]"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.simulator import running_kubesim  # noqa: E402  # pylint: disable=wrong-import-position

BIN = Path(sys.executable).parent
CALLS = {
    "kubevirt_eviction_facts": ("kubevirt_ops.rebalance.kubevirt_eviction_facts", {}),
    "run_lease (absent)": ("kubevirt_ops.rebalance.run_lease", {"state": "absent", "run_id": "bench"}),
}


def kept_payload(module: str, args: dict, workdir: Path) -> Path:
    """Run `module` once through `ansible` with the remote files kept; the AnsiballZ file it ran."""
    keep = Path(tempfile.mkdtemp(prefix="kept-", dir=workdir))
    env = {**os.environ, "ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TMP": str(keep), "ANSIBLE_HOME": str(workdir / "ansible"),
           "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections")}
    inventory = workdir / "inventory"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter={0}\n".format(sys.executable))
    process = subprocess.run([str(BIN / "ansible"), "-i", str(inventory), "localhost", "-m", module, "-a", json.dumps(args)],
                             capture_output=True, text=True, env=env, check=False)
    payloads = list(keep.glob("*/AnsiballZ_*.py"))
    if not payloads:
        raise RuntimeError("no AnsiballZ payload kept for {0}:\n{1}\n{2}".format(module, process.stdout, process.stderr))
    return payloads[0]


def cpu_of_runs(payload: Path, repeat: int) -> list:
    """CPU seconds (user + system) of each of `repeat` runs of the payload, as Ansible runs it (python, no arguments)."""
    seconds = []
    for _run in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, str(payload)], capture_output=True, check=False, cwd=payload.parent)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return seconds


def row(name: str, seconds: list) -> str:
    return "{0:<44} {1:>8.3f} {2:>8.3f}".format(name, statistics.median(seconds), min(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-module-") as temp, running_kubesim("api-basics", Path(temp) / "sim") as sim:
        workdir = Path(temp)
        print("{0:<44} {1:>8} {2:>8}".format("module call (CPU s per call)", "median", "min"))
        stat = kept_payload("ansible.builtin.stat", {"path": temp}, workdir)
        print(row("ansible.builtin.stat", cpu_of_runs(stat, options.repeat)), flush=True)
        for name, (module, args) in CALLS.items():
            for connection, extra in (("native", {}), ("fallback", {"no_proxy": "127.0.0.2"})):
                payload = kept_payload(module, {"kubeconfig": sim.kubeconfig, **args, **extra}, workdir)
                print(row("{0}, {1}".format(name, connection), cpu_of_runs(payload, options.repeat)), flush=True)


if __name__ == "__main__":
    main()
