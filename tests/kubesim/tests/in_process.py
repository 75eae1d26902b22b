"""Test support for the simulator's own tests: a cluster in this process with some controllers running."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from kubesim import scenario
from kubesim.api import Cluster
from kubesim.clock import Clock
from kubesim.controllers import ControllerManager
from kubesim.resources import DEFAULT_BUNDLES, Registry, resolve_bundles
from kubesim.scenario import populate


def bare_cluster() -> Cluster:
    """The workload cluster's default resource types, no objects, the clock at 100 s."""
    return Cluster("workload", Registry(resolve_bundles(DEFAULT_BUNDLES["workload"])), Clock(100))


@contextmanager
def running(cluster: Cluster, registers: Iterable[Callable], objects: dict | None = None,
            settle: bool = False) -> Iterator[tuple[Cluster, ControllerManager]]:
    """`cluster` with the controllers of `registers` running, populated with `objects` (a scenario's cluster spec)
    before they start; with `settle`, once they have nothing queued. Stops them afterwards."""
    manager = ControllerManager(cluster)
    for register in registers:
        register(cluster, manager)
    if objects is not None:
        populate(cluster, objects)
    manager.start()
    try:
        if settle:
            assert manager.wait_idle()
        yield cluster, manager
    finally:
        manager.stop()


@contextmanager
def running_scenario(name: str, registers: Iterable[Callable], settle: bool = False) -> Iterator[tuple[Cluster, ControllerManager]]:
    """The workload cluster of the scenario `name`, built and populated, with the controllers of `registers`."""
    spec = scenario.load(name).clusters["workload"]
    with running(scenario.build_cluster("workload", spec, Clock(100)), registers, spec, settle) as started:
        yield started
