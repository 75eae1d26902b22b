"""`make test-cluster` proved on the simulator: `scripts/run-tests.sh cluster` with KUBECONFIG pointing at a running
simulator (HTTPS with its CA, as a staging cluster's kubeconfig would be) runs exactly the integration tests not marked
`simulator`, none skipped, and passes; without a usable KUBECONFIG it stops before pytest with the fix. And the marker
guard of tests/integration/conftest.py: a test that starts the simulator without the marker stops collection naming
it, and in cluster mode the simulator tests are deselected, not skipped."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support.cluster import CONTEXT_ENV, KUBECONFIG_ENV, SIMULATOR_SCENARIO, VARS_ENV

from .conftest import ROOT

pytestmark = pytest.mark.simulator

SCRIPT = ROOT / "scripts" / "run-tests.sh"
TESTS = ROOT / "tests"
DESCHEDULER = {"rehearse_descheduler_namespace": "descheduler", "rehearse_descheduler_name": "descheduler"}


def script_env(**extra: str) -> dict:
    """The environment `make` gives scripts/run-tests.sh, without any cluster named by the caller's."""
    env = {key: value for key, value in os.environ.items()
           if key not in (KUBECONFIG_ENV, CONTEXT_ENV, VARS_ENV, "KUBECONFIG", "CONTEXT", "TEST_VARS", "PYTEST_ADDOPTS")}
    return {**env, "PATH": "{0}:{1}".format(Path(sys.executable).parent, env.get("PATH", "")),
            "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"), **extra}


def run_cluster_tier(env: dict, timeout: float = 2400) -> subprocess.CompletedProcess:
    """scripts/run-tests.sh cluster; `timeout` only stops a hung tier (it takes 9 minutes alone, 14 with a busy core)."""
    return subprocess.run([str(SCRIPT), "cluster"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout, check=False)


def collected(*options: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *options],
                          capture_output=True, text=True, cwd=cwd, env=env or script_env(), timeout=120, check=False)


def node_ids(output: str) -> set:
    return {line.strip() for line in output.splitlines() if "::" in line}


def junit_cases(path: Path) -> dict:
    """node id -> the outcomes recorded for it ("passed", "skipped", "failure", "error")."""
    cases = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname").replace(".", "/")
        outcomes = [child.tag for child in case if child.tag in ("skipped", "failure", "error")]
        cases[f"{module}.py::{case.get('name')}"] = outcomes or ["passed"]
    return cases


def test_cluster_tier_runs_exactly_the_tests_without_the_simulator_marker(fresh_kubesim, tmp_path):
    sim = fresh_kubesim(SIMULATOR_SCENARIO, settle=True)
    expected = node_ids(collected("-m", "not simulator", "tests/integration").stdout)
    simulator_tests = node_ids(collected("-m", "simulator", "tests/integration").stdout)
    assert expected and simulator_tests and not expected & simulator_tests
    junit = tmp_path / "cluster.xml"
    # a named context and variables, as on staging (the simulator's kubeconfig has the context `workload`)
    process = run_cluster_tier(script_env(KUBECONFIG=sim.kubeconfig, CONTEXT="workload", TEST_VARS=json.dumps(DESCHEDULER),
                                          PYTEST_ADDOPTS=f"-p no:cacheprovider --junitxml={junit}"))
    output = process.stdout + process.stderr
    assert process.returncode == 0, output[-20000:]
    assert "test-suite: 1 passed, 0 failed" in process.stdout, output[-5000:]
    ran = junit_cases(junit)
    assert set(ran) == expected, f"ran but not expected: {set(ran) - expected}; expected but not run: {expected - set(ran)}"
    assert all(outcome == ["passed"] for outcome in ran.values()), ran
    assert not set(ran) & simulator_tests


def test_readonly_checks_find_the_upstream_chart_where_test_vars_say(fresh_kubesim):
    """Plain Kubernetes with the upstream chart in kube-system: found there once TEST_VARS say so, not found otherwise."""
    sim = fresh_kubesim("rehearsal-upstream-chart", settle=True)
    readonly = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/integration/test_cluster_readonly.py"]
    runs = {}
    for namespace in ("kube-system", "descheduler"):
        env = script_env(**{KUBECONFIG_ENV: sim.kubeconfig, CONTEXT_ENV: "workload",
                            VARS_ENV: json.dumps({**DESCHEDULER, "rehearse_descheduler_namespace": namespace})})
        runs[namespace] = subprocess.run(readonly, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)
    assert runs["kube-system"].returncode == 0, runs["kube-system"].stdout[-10000:]
    assert runs["descheduler"].returncode == pytest.ExitCode.TESTS_FAILED, runs["descheduler"].stdout[-10000:]
    assert "no Descheduler CronJob or Deployment descheduler in descheduler on workload" in runs["descheduler"].stdout


@pytest.mark.parametrize("kubeconfig,message", [
    (None, "KUBECONFIG is not set"),
    ("/nonexistent/kubeconfig", "KUBECONFIG=/nonexistent/kubeconfig is not a readable file"),
])
def test_cluster_tier_without_a_readable_kubeconfig_stops_before_pytest(kubeconfig, message):
    process = run_cluster_tier(script_env(**({"KUBECONFIG": kubeconfig} if kubeconfig else {})), timeout=60)
    assert process.returncode != 0 and message in process.stdout, process.stdout + process.stderr
    assert "test-suite: 0 passed, 1 failed" in process.stdout and "===== cluster" not in process.stdout


# A test module for a copy of the guard: the simulator tests in it are marked, or not.
MODULE_START = "import pytest\nfrom support.simulator import running_kubesim\n"
MARKED = textwrap.dedent('''\


    @pytest.mark.simulator
    def test_marked(fresh_two_workers):
        assert fresh_two_workers


    def test_on_any_cluster(cluster):
        assert cluster
    ''')
UNMARKED = textwrap.dedent('''\


    def test_unmarked_factory(kubesim_factory):
        assert kubesim_factory


    def test_unmarked_direct(tmp_path):
        with running_kubesim("api-basics", tmp_path):
            pass
    ''')


@pytest.fixture
def guarded_tree(tmp_path) -> Path:
    """A copy of the tests' conftests and support, and this checkout's pytest.ini, for a test module of its own."""
    tree = tmp_path / "tree"
    shutil.copytree(TESTS / "support", tree / "tests" / "support", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "tests" / "integration").mkdir()
    for name in ("conftest.py", "integration/__init__.py", "integration/conftest.py"):
        shutil.copy(TESTS / name, tree / "tests" / name)
    shutil.copy(ROOT / "pytest.ini", tree / "pytest.ini")
    return tree


def test_simulator_tests_without_the_marker_stop_collection_naming_them(guarded_tree):
    (guarded_tree / "tests" / "integration" / "test_guarded.py").write_text(MODULE_START + MARKED + UNMARKED)
    process = collected("tests/integration", cwd=guarded_tree)
    output = process.stdout + process.stderr
    assert process.returncode == pytest.ExitCode.USAGE_ERROR, output
    error = output.partition("ERROR: these tests start the simulator but are not marked `simulator`:")[2]
    named = {line.strip() for line in error.splitlines() if "::" in line}
    assert named == {"tests/integration/test_guarded.py::test_unmarked_factory (fixture kubesim_factory)",
                     "tests/integration/test_guarded.py::test_unmarked_direct (test_unmarked_direct() starts it)"}, output
    assert "Add `pytestmark = pytest.mark.simulator` to the module" in error, output


def test_cluster_mode_deselects_the_simulator_tests(guarded_tree):
    (guarded_tree / "tests" / "integration" / "test_guarded.py").write_text(MODULE_START + MARKED)
    process = collected("tests/integration", cwd=guarded_tree, env=script_env(**{KUBECONFIG_ENV: str(guarded_tree / "pytest.ini")}))
    assert process.returncode == 0, process.stdout + process.stderr
    assert node_ids(process.stdout) == {"tests/integration/test_guarded.py::test_on_any_cluster"}, process.stdout
    assert "1/2 tests collected (1 deselected)" in process.stdout, process.stdout
