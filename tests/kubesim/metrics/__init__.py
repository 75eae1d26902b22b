"""Actual usage in the simulator: what a cluster's Pods and nodes use, and the two APIs that serve it.

- `usage.py`: the usage model of a scenario's `metrics:` section: each VM's guest load (constant or steps by
  simulated time, changed at run time by `POST /_kubesim/usage`), node overhead, non-VM Pods by requests or zero;
  the load moves with the VM (the launcher Pod on the VMI's node reports it).
- `api.py`: metrics-server's `metrics.k8s.io/v1beta1` (NodeMetrics, PodMetrics) as the aggregator serves it, routed
  by `server.py`.
- `prometheus.py`: the Prometheus HTTP API (`/api/v1/query`) behind the scenario's Prometheus Service (the API
  server's service proxy, an admin path standing in for a Route, or in-cluster for the descheduler), with the known
  per-node queries.

A cluster serves both only when its scenario has a `metrics:` section (`cluster.metrics` is the model, absent
otherwise). Each module's docstring names its upstream source and what it simplifies."""
