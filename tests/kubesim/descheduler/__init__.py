"""The Descheduler of the ACP ModulePlugin package (kubernetes-sigs/descheduler v0.36) inside the simulator.

- `policy.py`: decoding and validating a `descheduler/v1alpha2` DeschedulerPolicy, the package's default policy;
- `evictor.py`: the DefaultEvictor filters;
- `lownodeutilization.py`: the LowNodeUtilization balance plugin, on requests or actual usage;
- `usageclients.py`: where LowNodeUtilization's usage comes from (requests, metrics server, Prometheus);
- `metricscollector.py`: the process's metrics collector (NodeMetrics, smoothed);
- `providers.py`: the process's metrics collector and Prometheus client, from the policy's metricsProviders;
- `run.py`: command-line flags, the pod evictor with its limits and EvictionsInBackground cache, one cycle;
- `program.py`: the `cluster.programs` entry that runs in the descheduler's Job or Deployment Pods;
- `klog.py`: klog text lines filtered by `--v`.
See each module's docstring for what it simplifies."""
