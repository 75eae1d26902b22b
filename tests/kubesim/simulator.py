"""Assemble a simulator from a scenario: clusters with their controllers, hooks and subresources, and the
HTTP server in front of them."""
from __future__ import annotations

import threading

from . import scenario as scenarios
from .clock import Clock
from .components import COMPONENTS
from .controllers import ControllerManager
from . import kubeconfig
from .faults import Faults
from .rbac import Authorizer
from .server import KubeSimServer


class Simulator:
    def __init__(self, scenario_name: str, host: str = "127.0.0.1", port: int = 0, verbose: bool = False):
        self.scenario = scenarios.load(scenario_name)
        self.clock = Clock(self.scenario.time_scale)
        self.clusters = {}
        self.managers = {}
        for name, spec in self.scenario.clusters.items():
            cluster = scenarios.build_cluster(name, spec or {}, self.clock)
            manager = ControllerManager(cluster)
            for register in COMPONENTS:
                register(cluster, manager)
            self.clusters[name] = cluster
            self.managers[name] = manager
        for name, spec in self.scenario.clusters.items():
            scenarios.populate(self.clusters[name], spec or {})
        self.faults = Faults()
        info = {"scenario": self.scenario.name, "timeScale": self.clock.time_scale, "rbac": self.scenario.rbac}
        self.server = KubeSimServer((host, port), self.clusters, self.scenario.kubernetes, self.faults,
                                    info=info, managers=self.managers, verbose=verbose,
                                    authorizer=Authorizer(self.scenario.rbac, self.scenario.users, kubeconfig.TOKEN))
        self._thread = threading.Thread(target=self.server.serve_forever, name="kubesim-http", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def urls(self) -> dict[str, str]:
        return {name: self.server.cluster_url(name) for name in self.clusters}

    def start(self) -> "Simulator":
        for manager in self.managers.values():
            manager.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown_all()
        for manager in self.managers.values():
            manager.stop()
