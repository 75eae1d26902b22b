#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: kubevirt_eviction_facts
short_description: Read what an eviction would do to each KubeVirt VM, and what a person must know first
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - Reads a cluster once, in a constant number of list calls (one per kind, paged), whatever the number of VMs.
  - Returns the cluster (Kubernetes, KubeVirt and HyperConverged versions, the cluster eviction strategy, migration limits with
    upstream defaults), the nodes (allocatable, requests in use, cordoned, taints, control-plane role), the Descheduler installation
    (CronJob or Deployment, flags, feature gate, verbosity, suspension, last Jobs, the policy ConfigMap parsed with its profiles, the
    ACP ResourcePatches that change it, whether KubeDescheduler or ModuleInfo is served), and every VMI with its launcher Pod, PVCs,
    owner, run strategy, PDBs, migrations and a verdict.
  - The verdict says what an eviction of the VMI's virt-launcher Pod would do now, following KubeVirt's eviction webhook and then the
    PodDisruptionBudget check of the eviction API; I(eviction_response) is the answer the Descheduler or C(kubectl drain) would get.
  - Findings list what a person must read before moving VMs (a recorded strategy that differs from the cluster default, a
    non-migratable VM with a migrating strategy, PDBs that need the scale subresource, a missing EvictionsInBackground feature gate, a
    policy that protects PVC Pods or local storage, and more), each with a stable code.
  - With the nodes section, each node's actual usage stands beside its requests, from the metrics server (C(metrics.k8s.io), one list
    of NodeMetrics and one of PodMetrics) and from a Prometheus instant query (one value per node), the way the Descheduler's
    LowNodeUtilization reads them with C(metricsUtilization); finding C(requests_disagree_with_usage) says when a policy that balances
    by requests would move the wrong VMs.
  - Changes nothing; check mode returns the same facts.
options:
  namespaces:
    description:
      - Read VMIs (and their VMs, migrations, PDBs, PVCs and launcher Pods) only in these namespaces, one list call per namespace and
        kind. All namespaces when omitted.
      - Nodes, the KubeVirt and HyperConverged resources and the Descheduler are read cluster-wide or in their own namespace anyway.
    type: list
    elements: str
    aliases: [namespace]
  label_selector:
    description:
      - Only VMIs whose labels match this Kubernetes label selector, for example C(app=desched-test) or C(tier in (db,web),!canary).
      - Labels of a VM's C(spec.template.metadata.labels) are on its VMI and its launcher Pod.
    type: str
  names:
    description:
      - Only the VMIs with these names (in any of the selected namespaces).
    type: list
    elements: str
  descheduler_namespace:
    description:
      - The namespace of the Descheduler plugin (its CronJob or Deployment, policy ConfigMap, Jobs and ResourcePatches).
    type: str
    default: descheduler
  descheduler_name:
    description:
      - The name of the Descheduler CronJob or Deployment and of its policy ConfigMap, used when no object carries the label
        C(app.kubernetes.io/name=descheduler) and when no volume names the policy ConfigMap.
    type: str
    default: descheduler
  include:
    description:
      - The sections to read. Leaving one out saves its list calls. An empty list is refused (leave the option out to read
        every section).
      - C(nodes) needs every non-finished Pod of the cluster (for requests in use); without it only virt-launcher Pods are read.
    type: list
    elements: str
    choices: [cluster, nodes, descheduler, vmis]
    default: [cluster, nodes, descheduler, vmis]
  usage_source:
    description:
      - Where the nodes' actual usage comes from, beside their requests (needs the C(nodes) section).
      - C(auto) reads the metrics server when the API server serves C(metrics.k8s.io), and queries Prometheus when I(prometheus_query)
        is given or the installed policy's LowNodeUtilization reads Prometheus; what it cannot read is reported in
        RV(actual_usage) and does not fail the module.
      - C(requests) reads no actual usage.
      - C(KubernetesMetrics) reads the metrics server and fails when it is not served (install metrics-server).
      - C(Prometheus) queries Prometheus (I(prometheus_query) or the installed policy's query, at I(prometheus_url) or the installed
        policy's C(metricsProviders) URL) and fails on any error, with upstream's words where the Descheduler has some.
    type: str
    choices: [auto, requests, KubernetesMetrics, Prometheus]
    default: auto
  prometheus_url:
    description:
      - The base URL of the Prometheus HTTP API (the one that serves C(/api/v1/query)), reachable from where the module runs; it
        overrides the installed policy's C(metricsProviders[].prometheus.url).
      - An in-cluster URL (C(https://<service>.<namespace>.svc:<port>)) whose host does not resolve from here is queried through the
        API server's service proxy with the connection's credentials. No Prometheus token goes there (the API server takes the
        Authorization header for itself and removes it), so a Prometheus that needs a token needs a URL reachable from here.
      - TLS is verified as for the API server (I(validate_certs)), against the system's CAs and the cluster CA.
    type: str
  prometheus_query:
    description:
      - A PromQL instant query returning one sample per node, labelled C(instance=<node name>), with a value between 0 and 1, as
        LowNodeUtilization's C(metricsUtilization.prometheus.query); for example C(instance:node_cpu_utilisation:rate1m).
      - Without it, the installed policy's query is used.
    type: str
  prometheus_auth_secret:
    description:
      - The Secret whose C(prometheusAuthToken) key holds the bearer token for Prometheus, as the policy's
        C(metricsProviders[].prometheus.authToken.secretReference) names it; without it that reference is used.
      - The token is sent only in the Authorization header of a direct query, never returned or logged.
    type: dict
    suboptions:
      namespace:
        description: The Secret's namespace.
        type: str
        required: true
      name:
        description: The Secret's name.
        type: str
        required: true
  prometheus_token:
    description:
      - The bearer token for Prometheus itself, instead of I(prometheus_auth_secret).
    type: str
  usage_disagreement_points:
    description:
      - How many percentage points a node's actual usage may be from its requested percent before finding
        C(requests_disagree_with_usage) reports it.
      - Two nodes whose order by requests is the reverse of their order by actual usage (each by more than 5 points) are reported
        whatever this value.
    type: int
    default: 20
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
attributes:
  check_mode:
    support: full
    description: Reads only; the same facts are returned in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
seealso:
  - name: KubeVirt node maintenance
    description: How evictions of virt-launcher Pods become live migrations, restarts or shutdowns.
    link: https://kubevirt.io/user-guide/cluster_admin/node_maintenance/
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Read the eviction facts of the test VMs
  kubevirt_ops.rebalance.kubevirt_eviction_facts:
    kubeconfig: "{{ kubeconfig }}"
    context: workload
    namespaces: [desched-test]
    label_selector: app=desched-test
  register: facts

- name: Refuse to go on when a VM would not live-migrate
  ansible.builtin.assert:
    that:
      - facts.vmis | rejectattr('verdict', 'equalto', 'migrate') | list | length == 0
    fail_msg: "{{ facts.vmis | rejectattr('verdict', 'equalto', 'migrate') | map(attribute='verdict_reason') | list }}"

- name: Show the VMs that would shut down instead of migrating
  ansible.builtin.debug:
    msg: "{{ facts.vmis | selectattr('verdict', 'match', '^shutdown_') | map(attribute='name') | list }}"

- name: Stop on warnings (a missing feature gate, a policy that protects PVC Pods, ...)
  ansible.builtin.fail:
    msg: "{{ facts.findings | selectattr('severity', 'equalto', 'warning') | map(attribute='message') | list }}"
  when: facts.summary.warnings > 0

- name: Compare requests with the load the metrics server measures
  kubevirt_ops.rebalance.kubevirt_eviction_facts:
    include: [nodes]
    usage_source: KubernetesMetrics
  register: usage

- name: Show requested and actual CPU per node
  ansible.builtin.debug:
    msg: "{{ item.name }}: cpu {{ item.usage_percent.cpu }}% requested, {{ item.actual_percent.cpu }}% used"
  loop: "{{ usage.nodes }}"
  loop_control:
    label: "{{ item.name }}"

- name: Stop when a request-based policy would move the wrong VMs
  ansible.builtin.fail:
    msg: "{{ usage.findings | selectattr('code', 'equalto', 'requests_disagree_with_usage') | map(attribute='message') | first }}"
  when: usage.summary.findings.requests_disagree_with_usage is defined

- name: The load as the OpenShift Prometheus sees it, through the API server's service proxy
  kubevirt_ops.rebalance.kubevirt_eviction_facts:
    include: [nodes]
    usage_source: Prometheus
    prometheus_url: https://prometheus-k8s.monitoring.svc:9091
    prometheus_query: instance:node_cpu_utilisation:rate1m

- name: Only the Descheduler section, from the global cluster (ModuleInfo is served there)
  kubevirt_ops.rebalance.kubevirt_eviction_facts:
    context: global
    include: [descheduler]
  register: global_facts
"""

RETURN = r"""
include:
  description: The sections that were read.
  returned: always
  type: list
  elements: str
  sample: [cluster, nodes, descheduler, vmis]
cluster:
  description: Versions, the cluster eviction strategy and migration limits.
  returned: when I(include) has C(cluster)
  type: dict
  contains:
    server_version:
      description: The Kubernetes server version (C(gitVersion) of C(/version)).
      type: str
      sample: v1.35.0
    server_version_info:
      description: C(major), C(minor), C(gitVersion) and C(platform) of C(/version).
      type: dict
    kubevirt:
      description: The KubeVirt resource.
      type: dict
      contains:
        served:
          description: Whether the API server serves the KubeVirt kind.
          type: bool
        found:
          description: Whether a KubeVirt resource exists.
          type: bool
        name:
          description: Its name.
          type: str
          sample: kubevirt-kubevirt-hyperconverged
        namespace:
          description: Its namespace.
          type: str
          sample: kubevirt
        version:
          description: C(status.observedKubeVirtVersion).
          type: str
          sample: v1.8.4
        phase:
          description: C(status.phase).
          type: str
        eviction_strategy:
          description: C(spec.configuration.evictionStrategy); null when unset.
          type: str
        feature_gates:
          description: C(spec.configuration.developerConfiguration.featureGates).
          type: list
          elements: str
        migrations:
          description: Same as I(migration_limits).
          type: dict
    hyperconverged:
      description: The HyperConverged resource (HCO), which renders the KubeVirt resource.
      type: dict
      contains:
        served:
          description: Whether the API server serves the HyperConverged kind.
          type: bool
        found:
          description: Whether a HyperConverged resource exists.
          type: bool
        name:
          description: Its name.
          type: str
          sample: kubevirt-hyperconverged
        namespace:
          description: Its namespace.
          type: str
        version:
          description: C(status.versions[name=operator].version).
          type: str
          sample: 1.18.1
        eviction_strategy:
          description: C(spec.evictionStrategy), which HCO propagates to the KubeVirt resource.
          type: str
        live_migration_config:
          description: C(spec.liveMigrationConfig) as it is.
          type: dict
    eviction_strategy:
      description: The cluster default eviction strategy (KubeVirt C(spec.configuration.evictionStrategy)); null when unset.
      type: str
      sample: LiveMigrateIfPossible
    effective_default_strategy:
      description: What KubeVirt uses for a VMI without its own strategy (C(None) when the cluster has none).
      type: str
      sample: None
    migration_limits:
      description: C(spec.configuration.migrations) of the KubeVirt resource with the upstream defaults filled in.
      type: dict
      contains:
        parallel_migrations_per_cluster:
          description: Migrations at once in the cluster (default 5).
          type: int
        parallel_outbound_migrations_per_node:
          description: Outbound migrations at once per node (default 2).
          type: int
        bandwidth_per_migration:
          description: Bandwidth limit per migration; null is unlimited.
          type: str
        completion_timeout_per_gib:
          description: Seconds per GiB before a migration is cancelled (default 150).
          type: int
        progress_timeout:
          description: Seconds without progress before a migration is cancelled (default 150).
          type: int
        allow_post_copy:
          description: Whether post-copy is allowed (default false).
          type: bool
        configured:
          description: The fields that are set in the resource (the others are defaults).
          type: list
          elements: str
nodes:
  description: Every node with its capacity for VMs.
  returned: when I(include) has C(nodes)
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
    ready:
      description: The Ready condition is True.
      type: bool
    cordoned:
      description: C(spec.unschedulable) is true.
      type: bool
    schedulable:
      description: Ready and not cordoned (taints are listed separately).
      type: bool
    control_plane:
      description: Labelled C(node-role.kubernetes.io/control-plane) or C(master).
      type: bool
    roles:
      description: The C(node-role.kubernetes.io/*) roles.
      type: list
      elements: str
    kubevirt_schedulable:
      description: Labelled C(kubevirt.io/schedulable=true) by virt-handler.
      type: bool
    taints:
      description: C(key), C(value) and C(effect) of each taint.
      type: list
      elements: dict
    allocatable:
      description: C(cpu) in millicores, C(memory) in bytes, C(pods).
      type: dict
    requested:
      description: Sum of the requests of the node's running and pending Pods, as the scheduler and LowNodeUtilization count them.
      type: dict
    usage_percent:
      description: I(requested) in percent of I(allocatable), as LowNodeUtilization's usagePercentage.
      type: dict
    pods:
      description: Non-finished Pods on the node.
      type: int
    vmis:
      description: VMIs (in scope) on the node.
      type: int
    actual_usage:
      description: C(cpu) in millicores and C(memory) in bytes of the node's NodeMetrics (metrics server); null when not read.
      type: dict
    actual_percent:
      description: I(actual_usage) in percent of I(allocatable), as LowNodeUtilization's usagePercentage; null when not read.
      type: dict
    prometheus_value:
      description: The Prometheus query's sample for the node (0 to 1); null when not queried or when the node has no sample.
      type: float
    prometheus_percent:
      description: C(int(prometheus_value * 100)), the MetricResource usage LowNodeUtilization compares with its thresholds.
      type: int
    usage_deviation_points:
      description:
        - Actual minus requested percent, C(cpu) and C(memory) from the metrics server, C(prometheus) the query against CPU
          requests; null when nothing was read.
      type: dict
      sample: {"cpu": 41.5, "memory": -3.2}
actual_usage:
  description: Where the nodes' actual usage came from, and why a source could not be read.
  returned: when I(include) has C(nodes) and I(usage_source) is not C(requests)
  type: dict
  contains:
    source:
      description: I(usage_source) as given.
      type: str
    disagreement_points:
      description: I(usage_disagreement_points).
      type: int
    metrics_server:
      description: C(served) (metrics.k8s.io is in discovery) and C(error) (why it could not be read, null when it was); null when not asked.
      type: dict
    prometheus:
      description: C(url) (without credentials), C(query), C(via) (C(direct) or C(service_proxy)), C(token_sent) and C(error); null when not asked.
      type: dict
descheduler:
  description: The Descheduler installation in I(descheduler_namespace).
  returned: when I(include) has C(descheduler)
  type: dict
  contains:
    namespace:
      description: Where it was looked for.
      type: str
    found:
      description: Whether a CronJob or Deployment was found.
      type: bool
    kind:
      description: C(CronJob) or C(Deployment); null when not found.
      type: str
    name:
      description: Its name.
      type: str
    args:
      description: The container's arguments as they are.
      type: list
      elements: str
      sample: ["--policy-config-file=/policy-dir/policy.yaml", "--feature-gates=EvictionsInBackground=true", "--v=3"]
    feature_gates:
      description: C(--feature-gates) as a name to bool mapping.
      type: dict
    evictions_in_background:
      description: C(--feature-gates) sets C(EvictionsInBackground=true).
      type: bool
    verbosity:
      description: The C(--v) value; null when unset.
      type: int
    dry_run:
      description: C(--dry-run) is set.
      type: bool
    suspended:
      description: The CronJob's C(spec.suspend); null for a Deployment.
      type: bool
    schedule:
      description: The CronJob's schedule.
      type: str
    last_schedule_time:
      description: The CronJob's C(status.lastScheduleTime).
      type: str
    last_successful_time:
      description: The CronJob's C(status.lastSuccessfulTime).
      type: str
    descheduling_interval:
      description: C(--descheduling-interval) (Deployment mode).
      type: str
    policy_config_file:
      description: C(--policy-config-file).
      type: str
    image:
      description: The container image.
      type: str
    replicas:
      description: The Deployment's C(spec.replicas); null for a CronJob.
      type: int
    ready_replicas:
      description: The Deployment's C(status.readyReplicas).
      type: int
    last_jobs:
      description: The newest Jobs of the CronJob, newest first (at most 3).
      type: list
      elements: dict
      contains:
        name:
          description: Job name.
          type: str
        created:
          description: Creation time.
          type: str
        start_time:
          description: C(status.startTime).
          type: str
        completion_time:
          description: C(status.completionTime).
          type: str
        active:
          description: Active Pods.
          type: int
        succeeded:
          description: Succeeded Pods.
          type: int
        failed:
          description: Failed Pods.
          type: int
        result:
          description: C(Complete), C(Failed), C(Running) or C(Pending).
          type: str
    policy:
      description: The policy ConfigMap behind C(--policy-config-file); null when no descheduler was found.
      type: dict
      contains:
        configmap:
          description: ConfigMap name.
          type: str
        key:
          description: Data key of the policy.
          type: str
          sample: policy.yaml
        found:
          description: The ConfigMap and key exist.
          type: bool
        error:
          description: Why the policy could not be parsed; null when it parsed.
          type: str
        text:
          description: The policy text as stored.
          type: str
        parsed:
          description: The policy as data.
          type: dict
        api_version:
          description: C(apiVersion) of the policy.
          type: str
        kind:
          description: C(kind) of the policy.
          type: str
        node_selector:
          description: C(nodeSelector).
          type: str
        max_pods_to_evict_per_node:
          description: C(maxNoOfPodsToEvictPerNode).
          type: int
        max_pods_to_evict_per_namespace:
          description: C(maxNoOfPodsToEvictPerNamespace).
          type: int
        max_pods_to_evict_total:
          description: C(maxNoOfPodsToEvictTotal).
          type: int
        profiles:
          description: Each profile with what its DefaultEvictor protects.
          type: list
          elements: dict
          contains:
            name:
              description: Profile name.
              type: str
            balance:
              description: Enabled balance plugins.
              type: list
              elements: str
            deschedule:
              description: Enabled deschedule plugins.
              type: list
              elements: str
            evicts:
              description: The profile enables a balance or deschedule plugin.
              type: bool
            default_evictor:
              description: The DefaultEvictor args; null when not configured.
              type: dict
            label_selector:
              description: DefaultEvictor C(labelSelector).
              type: dict
            protections:
              description: The Pod protections in force (defaults minus defaultDisabled plus extraEnabled; deprecated booleans understood).
              type: list
              elements: str
            protects_pvc_pods:
              description: C(PodsWithPVC) is in force.
              type: bool
            protects_local_storage:
              description: C(PodsWithLocalStorage) is in force.
              type: bool
            deprecated_fields:
              description: Deprecated DefaultEvictor booleans that are set.
              type: list
              elements: str
            plugin_config:
              description: Names of the configured plugins.
              type: list
              elements: str
    resource_patch_served:
      description: Whether the ResourcePatch kind (ACP) is served.
      type: bool
    resource_patches:
      description: ResourcePatches whose C(spec.target) is the descheduler's CronJob/Deployment or policy ConfigMap, oldest first.
      type: list
      elements: dict
      contains:
        name:
          description: ResourcePatch name.
          type: str
        namespace:
          description: Its namespace.
          type: str
        created:
          description: Creation time.
          type: str
        release:
          description: C(spec.release).
          type: str
        target:
          description: C(kind), C(namespace), C(name) of the target.
          type: dict
        operations:
          description: Number of JSON patch operations.
          type: int
    module_info:
      description: ModuleInfo resources of the descheduler plugin (served on the ACP global cluster only).
      type: dict
      contains:
        served:
          description: Whether the ModuleInfo kind is served here.
          type: bool
        resources:
          description: C(name), C(cluster), C(module), C(phase), C(version) of each.
          type: list
          elements: dict
    kube_descheduler:
      description: OpenShift KubeDescheduler resources.
      type: dict
      contains:
        served:
          description: Whether the KubeDescheduler kind is served.
          type: bool
        resources:
          description: C(name), C(namespace), C(profiles), C(mode), C(interval_seconds) of each.
          type: list
          elements: dict
vmis:
  description: Every VMI in scope, sorted by namespace and name.
  returned: when I(include) has C(vmis)
  type: list
  elements: dict
  contains:
    name:
      description: VMI name.
      type: str
    namespace:
      description: VMI namespace.
      type: str
    uid:
      description: VMI UID (unchanged by a live migration).
      type: str
    node:
      description: C(status.nodeName).
      type: str
    phase:
      description: C(status.phase).
      type: str
    ready:
      description: The Ready condition is True.
      type: bool
    labels:
      description: VMI labels.
      type: dict
    recorded_strategy:
      description: C(spec.evictionStrategy) recorded in the VMI when it was created; null when unset.
      type: str
    vm_strategy:
      description: C(spec.template.spec.evictionStrategy) of the VM; null without a VM or when the template leaves it to the cluster.
      type: str
    cluster_strategy:
      description: The cluster default (KubeVirt C(spec.configuration.evictionStrategy)); null when unset.
      type: str
    effective_strategy:
      description: What KubeVirt's eviction webhook uses, I(recorded_strategy) else I(cluster_strategy) else C(None).
      type: str
      sample: LiveMigrate
    live_migratable:
      description: The LiveMigratable condition is True.
      type: bool
    live_migratable_reason:
      description: The condition's reason.
      type: str
      sample: DisksNotLiveMigratable
    live_migratable_message:
      description: The condition's message.
      type: str
    launcher:
      description: The source virt-launcher Pod (label C(kubevirt.io/created-by=<uid>), on the VMI's node, not finished); null when none.
      type: dict
      contains:
        name:
          description: Pod name.
          type: str
        node:
          description: Pod node.
          type: str
        phase:
          description: Pod phase.
          type: str
        request_evict_only:
          description: Annotation C(descheduler.alpha.kubernetes.io/request-evict-only) is present.
          type: bool
        eviction_in_progress:
          description: Annotation C(descheduler.alpha.kubernetes.io/eviction-in-progress) is C(true).
          type: bool
        domain_annotation:
          description: Annotation C(kubevirt.io/domain) is present (without it the webhook lets the eviction through).
          type: bool
    pvcs:
      description: PVCs of the VMI (claims and DataVolumes).
      type: list
      elements: dict
      contains:
        name:
          description: Claim name.
          type: str
        found:
          description: The PVC exists.
          type: bool
        access_modes:
          description: Access modes.
          type: list
          elements: str
        read_write_many:
          description: ReadWriteMany is among them.
          type: bool
        storage_class:
          description: Storage class.
          type: str
        volume_mode:
          description: Filesystem or Block.
          type: str
        phase:
          description: PVC phase.
          type: str
    evacuation_node_name:
      description: C(status.evacuationNodeName), set while an evacuation is requested.
      type: str
    eviction_source:
      description: Annotation C(kubevirt.io/eviction-source) (C(descheduler) while a descheduler-triggered evacuation runs).
      type: str
    migrations:
      description: The VMI's VirtualMachineInstanceMigrations, oldest first.
      type: list
      elements: dict
      contains:
        name:
          description: Migration name.
          type: str
        phase:
          description: Migration phase.
          type: str
        evacuation:
          description: Created by an evacuation (annotation C(kubevirt.io/evacuationMigration)).
          type: bool
        source_node:
          description: Source node.
          type: str
        target_node:
          description: Target node.
          type: str
        created:
          description: Creation time.
          type: str
        finished:
          description: Succeeded or Failed.
          type: bool
    unfinished_migrations:
      description: Names of migrations not yet Succeeded or Failed.
      type: list
      elements: str
    pdbs:
      description: Names of the PodDisruptionBudgets that select the launcher.
      type: list
      elements: str
    owner_kind:
      description: C(VirtualMachine), C(VirtualMachinePool) (a VM of a pool), C(VirtualMachineInstanceReplicaSet), another kind, or null.
      type: str
    owner_name:
      description: The owner's name.
      type: str
    vm_name:
      description: The VirtualMachine's name, when the VMI has one.
      type: str
    run_strategy:
      description: The VM's run strategy (C(spec.runStrategy), or C(Always)/C(Halted) from C(spec.running)).
      type: str
    verdict:
      description:
        - What an eviction of the launcher would do now.
        - C(migrate) KubeVirt marks the VMI, answers 429 and live-migrates it.
        - C(in_progress) an evacuation or migration is already under way.
        - C(blocked) the eviction is refused (I(eviction_response) has the message) and nothing moves.
        - C(external) strategy External, KubeVirt marks the VMI and an external controller must act.
        - C(shutdown_restart) the Pod is deleted, the VM shuts down and its VM starts it again elsewhere.
        - C(shutdown_replace) the Pod is deleted and a VMI replica set creates a new VMI.
        - C(shutdown_lost) the Pod is deleted and nothing starts the VM again.
        - C(not_running) no live launcher Pod, nothing to evict.
      type: str
      sample: migrate
    verdict_reason:
      description: One sentence why.
      type: str
    eviction_response:
      description: The answer of C(POST pods/<launcher>/eviction), C(code) (429, 500 or 201) and C(message); null for C(not_running).
      type: dict
      sample:
        code: 429
        message: >-
          admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request:
          Eviction triggered evacuation of VMI "ns/vm"
pdbs:
  description: PodDisruptionBudgets that select at least one virt-launcher Pod in scope.
  returned: when I(include) has C(vmis)
  type: list
  elements: dict
  contains:
    name:
      description: PDB name.
      type: str
    namespace:
      description: PDB namespace.
      type: str
    min_available:
      description: C(spec.minAvailable).
      type: raw
    max_unavailable:
      description: C(spec.maxUnavailable).
      type: raw
    disruptions_allowed:
      description: What the eviction API would read (0 when the PDB needs the VMI's scale subresource, kubevirt/kubevirt#18063).
      type: int
    needs_scale_subresource:
      description: Uses maxUnavailable or a percentage minAvailable.
      type: bool
    selects_launchers:
      description: Always true here.
      type: bool
    launchers:
      description: The launcher Pods it selects.
      type: list
      elements: str
findings:
  description: What a person must read before moving VMs; docs/modules/kubevirt_eviction_facts.md explains each code.
  returned: always
  type: list
  elements: dict
  contains:
    code:
      description:
        - C(strategy_differs_from_cluster), C(not_migratable_with_migrating_strategy), C(pdb_needs_scale_subresource),
          C(pdb_blocks_eviction), C(feature_gate_missing), C(verbosity_below_3), C(descheduler_dry_run), C(descheduler_suspended),
          C(descheduler_not_found), C(policy_missing), C(policy_unparseable), C(policy_protects_pvc_pods),
          C(policy_protects_local_storage), C(kubevirt_not_served), C(kubevirt_cr_missing), C(migration_unfinished),
          C(requests_disagree_with_usage).
      type: str
    severity:
      description: C(warning) or C(info).
      type: str
    kind:
      description: Kind of the object it is about.
      type: str
    namespace:
      description: Its namespace.
      type: str
    name:
      description: Its name.
      type: str
    message:
      description: What is wrong, the upstream behaviour and the fix.
      type: str
served:
  description: For each kind the module looked up, whether the API server serves it.
  returned: always
  type: dict
  sample: {"VirtualMachineInstance": true, "ModuleInfo": false, "ResourcePatch": true}
summary:
  description: Counts for quick checks.
  returned: always
  type: dict
  contains:
    vmis:
      description: VMIs in scope.
      type: int
    verdicts:
      description: VMIs per verdict (every verdict is a key).
      type: dict
      sample: {"migrate": 3, "blocked": 1, "in_progress": 0, "external": 0, "shutdown_restart": 0, "shutdown_replace": 0,
               "shutdown_lost": 0, "not_running": 0}
    findings:
      description: Findings per code.
      type: dict
    warnings:
      description: Findings of severity warning.
      type: int
api:
  description: How reading went.
  returned: always
  type: dict
  contains:
    retries:
      description: Requests retried after 429, 5xx or connection errors.
      type: int
    retried:
      description: The last 20 retries with C(request), C(status), C(reason) and C(wait) in seconds.
      type: list
      elements: dict
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_eviction_facts import (
    ARG_SPEC,
    MUTUALLY_EXCLUSIVE,
    KubevirtEvictionFactsOptions,
    gather_eviction_facts,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, KubevirtEvictionFactsOptions, gather_eviction_facts, mutually_exclusive=MUTUALLY_EXCLUSIVE)


if __name__ == "__main__":
    main()
