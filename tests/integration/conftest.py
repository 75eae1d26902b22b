"""Fixtures that run the simulator (`tests/kubesim/kubesim serve`) as a separate process, as users and CI
do, and give tests its URL, kubeconfig, admin endpoint and a kubectl runner (tests/support/simulator.py); and
`cluster`, the real cluster of `make test-cluster` or else the simulator (tests/support/cluster.py).

A test that starts the simulator (one of SIMULATOR_FIXTURES, or running_kubesim/start_kubesim called by the test or
one of its module's fixtures) must be marked `simulator`: collection stops with an error naming it otherwise. In
cluster mode the tests marked `simulator` are deselected, so the summary counts only what ran."""
from __future__ import annotations

import inspect
import itertools
import types
from contextlib import ExitStack
from pathlib import Path

import pytest

from support.cluster import Cluster, ClusterConfigError, cluster_from_env, cluster_mode, simulated_cluster
# Re-exported: the integration tests have imported these from here.
from support.simulator import (LAUNCHER, ROOT, KubeSim, columns, kubectl_available, running_kubesim, start_kubesim, stop_kubesim,
                               suspend_descheduler)

__all__ = ["LAUNCHER", "ROOT", "KubeSim", "columns", "kubectl_available", "running_kubesim", "start_kubesim", "stop_kubesim",
           "suspend_descheduler"]

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
CLUSTER_SUPPORT = TESTS / "support" / "cluster.py"
# The fixtures below that start a simulator, and the functions that do.
SIMULATOR_FIXTURES = frozenset({"kubesim_factory", "fresh_kubesim", "two_workers", "rebalance_two_workers", "fresh_two_workers"})
SIMULATOR_STARTERS = (running_kubesim, start_kubesim)


@pytest.fixture(scope="module")
def kubesim_factory(tmp_path_factory):
    """Start simulators for named scenarios (options as running_kubesim's); all are stopped at the end of the module."""
    with ExitStack() as started:
        # a scenario is a name or a file's path (tests/support/simulator.py with_descheduler_suspended)
        yield lambda scenario, **options: started.enter_context(running_kubesim(scenario, tmp_path_factory.mktemp(Path(scenario).stem), **options))


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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    """The real cluster of `make test-cluster` (KUBEVIRT_OPS_TEST_KUBECONFIG), else the simulator with the rehearsal
    scenario; shared by the tests of one module, which leave it as they found it."""
    workdir = tmp_path_factory.mktemp("cluster")
    if cluster_mode():
        yield real_cluster(workdir)
    else:
        with simulated_cluster(workdir) as simulated:
            yield simulated


def real_cluster(workdir: Path) -> Cluster:
    """The environment's cluster, or the test's failure with the variable to fix (without a traceback)."""
    try:
        return cluster_from_env(workdir)
    except ClusterConfigError as error:
        problem = str(error)
    pytest.fail(problem, pytrace=False)


# ------------------------------------------------------------------------------------------ markers
def code_objects(code: types.CodeType):
    """`code` and the code of the functions, lambdas and comprehensions defined in it."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from code_objects(constant)


def starts_simulator(function, seen: set) -> bool:
    """Whether `function` calls running_kubesim/start_kubesim, itself or through the tests' own helpers (functions
    defined under tests/, support/cluster.py aside: its simulator stands in for a real cluster)."""
    function = inspect.unwrap(function)
    if not isinstance(function, types.FunctionType) or function in seen:
        return False
    seen.add(function)
    for code in code_objects(function.__code__):
        for name in code.co_names:
            value = function.__globals__.get(name)
            value = inspect.unwrap(value) if callable(value) else value
            if any(value is starter for starter in SIMULATOR_STARTERS):
                return True
            if isinstance(value, types.FunctionType) and is_test_helper(value) and starts_simulator(value, seen):
                return True
    return False


def is_test_helper(function: types.FunctionType) -> bool:
    path = Path(function.__code__.co_filename)
    return TESTS in path.parents and path != CLUSTER_SUPPORT


def simulator_use(item: pytest.Function) -> str:
    """What in `item` starts the simulator ("" when nothing does): a simulator fixture, or the test or a fixture of its
    module calling a starter. This conftest's other fixtures (`cluster`) are no such use."""
    fixtures = sorted(SIMULATOR_FIXTURES.intersection(item.fixturenames))
    if fixtures:
        return "fixture " + ", ".join(fixtures)
    functions = [item.function] + [getattr(item.module, name) for name in item.fixturenames if callable(getattr(item.module, name, None))]
    for function in functions:
        if starts_simulator(function, set()):
            return f"{inspect.unwrap(function).__name__}() starts it"
    return ""


# The modules whose tests run longest (`--durations` of a whole tier, docs/performance.md), longest first. The integration
# tier hands out whole modules to its workers in collection order (scripts/run-tests.sh: --dist loadfile
# --no-loadscope-reorder), so these start first and no worker is left with a long module while the others are done.
LONGEST_FIRST = (
    "test_rehearse_hold.py", "test_cluster_mode.py", "test_kill_points_rehearsal.py", "test_rehearse_failures.py",
    "test_kill_points_maintenance.py", "test_actual_load_rebalance.py", "test_playbooks.py", "test_cluster_maintenance.py",
    "test_kill_points_rebalance.py", "test_run_lease.py", "test_deployment_restart.py", "test_api_outage.py",
    "test_lease_renewal.py", "test_backup_in_cluster.py", "test_secrets.py",
)


def start_order(items: list) -> list:
    """`items` with this directory's modules of LONGEST_FIRST first, in its order, then its other modules by their
    number of tests, most first (what xdist's loadfile does without the list), then the tests of other directories as
    they were; the tests of a module keep their order."""
    counts: dict = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1

    def rank(item) -> tuple:
        if HERE not in item.path.parents:
            return (len(LONGEST_FIRST) + 1, 0)
        name = item.path.name
        return (LONGEST_FIRST.index(name), 0) if name in LONGEST_FIRST else (len(LONGEST_FIRST), -counts[item.path])
    return sorted(items, key=rank)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Refuse simulator tests without the `simulator` marker; in cluster mode, deselect the simulator tests; start the
    longest modules first."""
    ours = [item for item in items if isinstance(item, pytest.Function) and HERE in item.path.parents]
    unmarked = [f"{item.nodeid} ({use})" for item in ours
                if not item.get_closest_marker("simulator") and (use := simulator_use(item))]
    if unmarked:
        raise pytest.UsageError("these tests start the simulator but are not marked `simulator`:\n  " + "\n  ".join(unmarked)
                                + "\nAdd `pytestmark = pytest.mark.simulator` to the module (or @pytest.mark.simulator to the test), "
                                "or use the `cluster` fixture if the test needs no simulator controls.")
    if cluster_mode():
        deselected = [item for item in ours if item.get_closest_marker("simulator")]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            dropped = set(deselected)
            items[:] = [item for item in items if item not in dropped]
    items[:] = start_order(items)
