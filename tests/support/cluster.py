"""The cluster the cluster-safe integration tests run against: a real one named by the environment
(`make test-cluster`: KUBEVIRT_OPS_TEST_KUBECONFIG, KUBEVIRT_OPS_TEST_CONTEXT, KUBEVIRT_OPS_TEST_VARS), else the
simulator started with the rehearsal scenario. Either way a test sees one shape, `Cluster`, which the ansible
runners (tests/integration/ansible_run.py) accept as they accept a KubeSim: `kubeconfig`, `context`, a kubectl
runner, and `sim` only where the simulator's own controls exist."""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from support.simulator import KubeSim, running_kubesim

KUBECONFIG_ENV = "KUBEVIRT_OPS_TEST_KUBECONFIG"
CONTEXT_ENV = "KUBEVIRT_OPS_TEST_CONTEXT"
VARS_ENV = "KUBEVIRT_OPS_TEST_VARS"
# The simulated cluster: KubeVirt, the descheduler package and other workloads, no test VMs (the rehearsal's start).
SIMULATOR_SCENARIO = "rehearsal"


class ClusterConfigError(Exception):
    """The environment names a cluster the tests cannot use; the message names the variable and the fix."""


@dataclass
class Cluster:
    """A cluster for tests that need no simulator internals, shaped like a KubeSim where the ansible runners and
    tests look (`kubeconfig`, `kubectl`, `kubectl_json`), plus `context` (None: the kubeconfig's current one) and
    `workdir` (the runs' files; a real kubeconfig's folder is the user's). `sim` is the KubeSim in simulator mode,
    None on a real cluster; `extra_vars` are the run's extra variables: KUBEVIRT_OPS_TEST_VARS plus `context` when
    set, empty on the simulator."""
    kubeconfig: str
    context: Optional[str]
    workdir: Path
    env: dict
    extra_vars: dict = field(default_factory=dict)
    sim: Optional[KubeSim] = None

    @property
    def name(self) -> str:
        """The cluster's name in reports."""
        return self.context or "cluster"

    def kubectl(self, *args: str, check: bool = True, input: str | None = None, context: str | None = None,
                env: dict | None = None, timeout: float = 60):
        """kubectl with this cluster's kubeconfig and context, run as the simulator's runner runs it (same code)."""
        return KubeSim.kubectl(self, "--kubeconfig", self.kubeconfig, *args, input=input, check=check,  # type: ignore[arg-type]
                               context=context or self.context, env=env, timeout=timeout)

    # KubeSim's: `kubectl ... -o json` decoded, through this class's kubectl.
    kubectl_json = KubeSim.kubectl_json


def cluster_mode() -> bool:
    """Whether the environment names a real cluster (`make test-cluster`)."""
    return bool(os.environ.get(KUBECONFIG_ENV))


def cluster_from_env(workdir: Path) -> Cluster:
    """The real cluster the environment names; ClusterConfigError when its kubeconfig or variables are unusable."""
    kubeconfig = Path(os.environ[KUBECONFIG_ENV]).expanduser()
    if not (kubeconfig.is_file() and os.access(kubeconfig, os.R_OK)):
        raise ClusterConfigError(f"{KUBECONFIG_ENV}={kubeconfig}: not a readable file. Point it (make test-cluster KUBECONFIG=...) "
                                 "at the staging cluster's kubeconfig.")
    try:
        extra_vars = json.loads(os.environ.get(VARS_ENV) or "{}")
    except ValueError as error:
        raise ClusterConfigError(f"{VARS_ENV}: not JSON ({error}). Give a JSON object, e.g. "
                                 "TEST_VARS='{\"rehearse_descheduler_namespace\": \"kube-system\"}'.") from error
    if not isinstance(extra_vars, dict):
        raise ClusterConfigError(f"{VARS_ENV}: a JSON object of extra variables is expected, not {type(extra_vars).__name__}.")
    context = os.environ.get(CONTEXT_ENV) or None
    if context:
        extra_vars["context"] = context
    workdir.mkdir(parents=True, exist_ok=True)
    # The user's HOME stays: exec credential plugins (cloud CLIs, OIDC login) keep their state there.
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(workdir / "kube-cache")}
    env.pop("KUBECTL_EXTERNAL_DIFF", None)
    return Cluster(kubeconfig=str(kubeconfig), context=context, workdir=workdir, env=env, extra_vars=extra_vars)


@contextmanager
def simulated_cluster(workdir: Path, scenario: str = SIMULATOR_SCENARIO) -> Iterator[Cluster]:
    """The simulator with `scenario`, settled, as a Cluster; stopped on exit."""
    with running_kubesim(scenario, workdir / "sim", settle=True) as sim:
        yield Cluster(kubeconfig=sim.kubeconfig, context=None, workdir=workdir, env=sim.env, sim=sim)
