"""A scenario builder for drains at scale (not a test module): `count` LiveMigrate VMs preferring worker-1 of
three workers, with the default migration limits, written as a kubesim scenario file. Used by
test_kubevirt_node_drain.py and tests/bench/bench_drain.py. The migration time is the simulator's (9
simulated seconds per 512Mi, about 10 s in all) divided by `time_scale`."""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kubesim.kubevirt import objects  # noqa: E402  # pylint: disable=wrong-import-position


def write_scenario(path: Path, count: int = 20, time_scale: float = 20, namespace: str = "vms") -> Path:
    nodes = [objects.worker_node("worker-{0}".format(i)) for i in (1, 2, 3)]
    vms = [objects.vm("vm-{0:02d}".format(i), namespace, eviction_strategy="LiveMigrate", preferred_node="worker-1",
                      labels={"app": "drain-bench"}) for i in range(count)]
    workload = {"namespaces": ["kubevirt", namespace], "objects": nodes + [objects.hyperconverged()] + vms}
    scenario = {"name": "drain-{0}-vms".format(count), "description": "{0} LiveMigrate VMs on worker-1".format(count),
                "timeScale": time_scale, "clusters": {"workload": workload}}
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path
