"""Assemble a simulator from a scenario: clusters with their controllers, hooks and subresources, and the
HTTPS server in front of them (plain HTTP only when asked), with the run's PKI."""
from __future__ import annotations

import os
import ssl
import threading

from . import scenario as scenarios
from .clock import Clock
from .components import COMPONENTS
from .controllers import ControllerManager
from . import kubeconfig
from .faults import Faults
from .rbac import ADMIN, MASTERS, Authorizer
from .server import KubeSimServer
from .tls import Authority, KeyPair, client_context


class Simulator:
    def __init__(self, scenario_name: str, host: str = "127.0.0.1", port: int = 0, verbose: bool = False,
                 plain_http: bool = False):
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
        self.faults.attach(*self.clusters.values())   # rules with `component` reach the in-process calls
        info = {"scenario": self.scenario.name, "timeScale": self.clock.time_scale, "rbac": self.scenario.rbac}
        self.credentials, tls = None, None
        if not plain_http:
            authority = Authority()
            tls = authority.server_context(authority.serving([host]))
            # a client certificate for the admin (as kubeadm's admin.conf) and for each user that asks for one
            self.credentials = kubeconfig.Credentials(
                authority.cert_pem, authority.client(ADMIN, [MASTERS]),
                {user["name"]: authority.client(user["name"], user.get("groups") or [])
                 for user in self.scenario.users if user.get("certificate")})
        self.server = KubeSimServer((host, port), self.clusters, self.scenario.kubernetes, self.faults,
                                    info=info, managers=self.managers, verbose=verbose,
                                    authorizer=Authorizer(self.scenario.rbac, self.scenario.users, kubeconfig.TOKEN),
                                    tls=tls)
        self._thread = threading.Thread(target=self.server.serve_forever, name="kubesim-http", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def urls(self) -> dict[str, str]:
        return {name: self.server.cluster_url(name) for name in self.clusters}

    def client_context(self, pair: KeyPair | None = None) -> ssl.SSLContext | None:
        """For in-process clients: TLS that trusts the run's CA (presenting `pair`, e.g. `credentials.admin`);
        None over plain HTTP."""
        return client_context(self.credentials.ca_pem, pair) if self.credentials else None

    def write_kubeconfig(self, path: str) -> dict:
        """The kubeconfig (and over HTTPS the PEM files next to it); their paths go into `/_kubesim/info`."""
        paths = kubeconfig.write(path, self.urls(), current="workload", users=self.scenario.users,
                                 credentials=self.credentials)
        self.server.info["kubeconfig"] = os.path.abspath(path)
        if paths:
            self.server.info["credentials"] = paths
        return paths

    def start(self) -> "Simulator":
        for manager in self.managers.values():
            manager.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown_all()
        for manager in self.managers.values():
            manager.stop()
