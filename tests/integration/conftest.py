"""Fixtures that run the simulator (`tests/kubesim/kubesim serve`) as a separate process, as users and CI
do, and give tests its URL, kubeconfig, admin endpoint and a kubectl runner (tests/support/simulator.py)."""
from __future__ import annotations

import itertools
from contextlib import ExitStack

import pytest

# Re-exported: the integration tests have imported these from here.
from support.simulator import (LAUNCHER, ROOT, KubeSim, columns, kubectl_available, running_kubesim, start_kubesim, stop_kubesim,
                               suspend_descheduler)

__all__ = ["LAUNCHER", "ROOT", "KubeSim", "columns", "kubectl_available", "running_kubesim", "start_kubesim", "stop_kubesim",
           "suspend_descheduler"]


@pytest.fixture(scope="module")
def kubesim_factory(tmp_path_factory):
    """Start simulators for named scenarios (options as running_kubesim's); all are stopped at the end of the module."""
    with ExitStack() as started:
        yield lambda scenario, **options: started.enter_context(running_kubesim(scenario, tmp_path_factory.mktemp(scenario), **options))


@pytest.fixture
def fresh_kubesim(tmp_path):
    """Start simulators of the test's own for named scenarios (options as running_kubesim's); stopped after the test."""
    numbers = itertools.count()
    with ExitStack() as started:
        yield lambda scenario, **options: started.enter_context(running_kubesim(scenario, tmp_path / f"sim{next(numbers)}", **options))


@pytest.fixture(scope="module")
def two_workers(kubesim_factory) -> KubeSim:
    """The `api-basics` scenario (two workers, plain Pods), shared by the tests of one module."""
    return kubesim_factory("api-basics")


@pytest.fixture(scope="module")
def rebalance_two_workers(kubesim_factory) -> KubeSim:
    """The `rebalance-two-workers` scenario, shared by the tests of one module (each leaves it as it found it)."""
    return kubesim_factory("rebalance-two-workers")


@pytest.fixture
def fresh_two_workers(tmp_path) -> KubeSim:
    """A simulator of its own for a test that changes the cluster in ways others must not see."""
    with running_kubesim("api-basics", tmp_path / "sim") as sim:
        yield sim
