#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: descheduler_policy
short_description: Render, validate, plan, back up, apply and restore a bounded VM rebalance Descheduler policy
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - Manages the policy ConfigMap of the ACP Descheduler plugin (a C(descheduler/v1alpha2) C(DeschedulerPolicy) in C(data.policy.yaml)),
    the step of the rebalance procedure (Configure a Bounded VM Rebalance Policy) done by hand with C(kubectl edit).
  - With I(state=present) the policy is rendered from options (a profile scoped to the VMs, C(PodsWithLocalStorage) in
    C(defaultDisabled), C(PodsWithPVC) not in C(extraEnabled), LowNodeUtilization in C(balance)) or taken whole from I(policy).
  - The policy is validated before anything changes, against the schema (unknown or mis-cased keys, which the descheduler silently
    drops), the upstream rules with the upstream messages, and the rebalance procedure's rules for a VM profile (local storage and PVC protections,
    a non-empty label selector, a minimum gap between thresholds and target thresholds, eviction limits set and not above KubeVirt's
    parallel migration limits read from the cluster, a node selector that leaves control-plane nodes out). Every error names the
    field path and the fix.
  - The current ConfigMap is backed up (the whole object as C(kubectl get) shows it, without C(metadata.managedFields), as YAML)
    and verified by reading it back before the update; the update carries the object's C(resourceVersion), so a concurrent edit
    fails with a conflict instead of being lost. The ResourcePatch that
    ACP creates for the edit is returned.
  - An equal policy (compared as parsed YAML, not as text) is no change. Check mode and C(--diff) show the change as YAML.
  - Check mode asks the API server; it sends the update (with I(state=absent), the deletes) as a server-side dry run, so that
    validation and admission run and a refusal fails the task; nothing is stored and no backup is written.
  - I(state=restored) re-applies the data of a backup file exactly. I(state=absent) deletes the ResourcePatches that override the
    ConfigMap, so the chart restores its own policy, and waits until the ConfigMap shows it.
  - Where ResourcePatches override the ConfigMap and the backup is the chart's rendering (taken while none did, or equal to the
    newest such backup in I(backup_dir)), I(state=restored) restores it as I(state=absent) does, since writing it would pin
    the chart's text in one more ResourcePatch.
  - With I(plan=true) the result has the plan, what LowNodeUtilization would do with this policy now (see RETURN).
  - Balancing by actual usage instead of requests (I(metrics_source)) renders LowNodeUtilization C(metricsUtilization) and the
    policy's C(metricsProviders) entry; a Prometheus token is never written into the policy, only the Secret that holds it is
    named (I(prometheus_auth_secret)). When the VM profile balances by actual usage, the plan and the forecast read it first,
    from the metrics server (C(metrics.k8s.io)) or with the profile's Prometheus query.
  - With I(forecast=true) the result has the forecast, every descheduler run planned in turn until nothing would move. A
    forecast that swaps nodes between categories or moves a VM back refuses the policy before anything is written (in check
    mode too), unless I(force=true).
options:
  state:
    description:
      - C(present) applies the policy; C(restored) re-applies I(backup_file); C(absent) removes the ACP override.
    type: str
    choices: [present, restored, absent]
    default: present
  policy:
    description:
      - A whole DeschedulerPolicy, as a mapping or as YAML text. Mutually exclusive with the rendering options.
    type: raw
  profile_name:
    description:
      - The name of the rendered VM profile.
    type: str
    default: vm-rebalance
  vm_profiles:
    description:
      - The profiles that move VMs, to which the rebalance procedure's rules for a VM profile apply. Defaults to I(profile_name).
      - Other profiles that evict and protect PVC Pods are reported as findings.
    type: list
    elements: str
  merge:
    description:
      - Keep the other profiles and top-level fields of the current policy and replace (or add) only the profile I(profile_name).
      - When false the policy holds only the VM profile.
    type: bool
    default: false
  nodes:
    description:
      - Node names; rendered as C(nodeSelector) C(kubernetes.io/hostname in (a,b)).
    type: list
    elements: str
  node_selector:
    description:
      - The policy's C(nodeSelector) as a label selector string.
    type: str
  vm_labels:
    description:
      - Labels of the VMs to move (C(matchLabels) of C(DefaultEvictor.labelSelector)); labels of a VM's C(spec.template.metadata.labels)
        reach its virt-launcher Pod.
    type: dict
  vm_selector:
    description:
      - A whole label selector (C(matchLabels), C(matchExpressions)) for the VMs' launchers.
    type: dict
  thresholds:
    description:
      - LowNodeUtilization C(thresholds), percent of allocatable per resource (C(cpu), C(memory), C(pods)).
    type: dict
  target_thresholds:
    description:
      - LowNodeUtilization C(targetThresholds), percent of allocatable per resource.
    type: dict
  max_pods_to_evict_per_node:
    description:
      - C(maxNoOfPodsToEvictPerNode).
    type: int
  max_pods_to_evict_per_namespace:
    description:
      - C(maxNoOfPodsToEvictPerNamespace).
    type: int
  max_pods_to_evict_total:
    description:
      - C(maxNoOfPodsToEvictTotal).
    type: int
  eviction_limit_node:
    description:
      - LowNodeUtilization C(evictionLimits.node).
    type: int
  exclude_namespaces:
    description:
      - LowNodeUtilization C(evictableNamespaces.exclude). Upstream does not support C(include).
    type: list
    elements: str
  node_fit:
    description:
      - DefaultEvictor C(nodeFit).
    type: bool
    default: true
  metrics_source:
    description:
      - What LowNodeUtilization classifies nodes by. C(requests) (the Pods' requests) renders nothing.
      - C(KubernetesMetrics) renders C(metricsUtilization.source) C(KubernetesMetrics) and the policy's provider of that source,
        actual usage from the metrics server.
      - C(Prometheus) renders C(metricsUtilization.source) C(Prometheus) with I(prometheus_query), and the Prometheus provider at
        I(prometheus_url); I(thresholds) and I(target_thresholds) then name the one resource C(MetricResource), the query's value
        in percent.
    type: str
    choices: [requests, KubernetesMetrics, Prometheus]
    default: requests
  prometheus_query:
    description:
      - With I(metrics_source=Prometheus), the instant query that returns one sample from 0 to 1 per node, labelled
        C(instance) with the node's name, for example C(instance:node_cpu_utilisation:rate1m).
    type: str
  prometheus_url:
    description:
      - With I(metrics_source=Prometheus), the URL the descheduler reaches Prometheus at (the provider's C(prometheus.url)), for
        example C(https://prometheus-k8s.monitoring.svc:9091). A URL with user information is refused.
    type: str
  prometheus_auth_secret:
    description:
      - With I(metrics_source=Prometheus), the Secret that holds the bearer token under the key C(prometheusAuthToken),
        rendered as the provider's C(authToken.secretReference). Without it the descheduler uses its service account's token.
      - Only the reference is written into the policy, never a token.
    type: dict
    suboptions:
      namespace:
        description:
          - The Secret's namespace (the descheduler's own is where its RBAC reads Secrets).
        type: str
        required: true
      name:
        description:
          - The Secret's name.
        type: str
        required: true
  use_deviation_thresholds:
    description:
      - LowNodeUtilization C(useDeviationThresholds). I(thresholds) and I(target_thresholds) are then percentage points below and
        above the mean usage of the nodes. Unset or false renders nothing.
    type: bool
  no_eviction_policy:
    description:
      - DefaultEvictor C(noEvictionPolicy). C(Mandatory) never evicts a Pod annotated
        C(descheduler.alpha.kubernetes.io/prefer-no-eviction), which the migration cooldown marks launcher Pods with; C(Preferred)
        evicts such Pods only when nothing else is left.
    type: str
    choices: [Preferred, Mandatory]
  min_threshold_gap:
    description:
      - The least number of percentage points between a threshold and its target threshold in a VM profile, so that moving one VM
        does not make two nodes swap categories.
    type: int
    default: 5
  plan:
    description:
      - Return the plan, what the first run would do with this policy on the live nodes and Pods.
    type: bool
    default: true
  forecast:
    description:
      - Return the forecast, each run planned on the state the previous one leaves (every planned move applied, the target chosen
        as the scheduler would), until nothing would move or I(forecast_cycles) runs.
      - A forecast whose runs swap nodes between categories or move a VM back refuses the policy, before any backup or write and in
        check mode alike, unless I(force=true).
    type: bool
    default: true
  forecast_cycles:
    description:
      - The most runs the forecast plans; 1 or more.
    type: int
    default: 10
  force:
    description:
      - Apply a policy the forecast refuses; the result then has the finding C(forecast_refusal_forced).
    type: bool
    default: false
  prometheus_url_override:
    description:
      - For the plan and the forecast only, a Prometheus URL reachable from where the module runs (a Route, an Ingress, a
        port-forward), used instead of the policy's in-cluster URL; never written into the policy.
      - Without it an in-cluster URL (C(<service>.<namespace>.svc)) is queried through the API server's service proxy with the
        connection's credentials; a Prometheus that requires a token needs a URL reachable from here.
      - The token is read from the Secret the policy's provider names and never returned.
    type: str
  descheduler_namespace:
    description:
      - The namespace of the Descheduler plugin.
    type: str
    default: descheduler
  descheduler_name:
    description:
      - The name of the CronJob or Deployment (and of the ConfigMap when no volume names one).
    type: str
    default: descheduler
  configmap_name:
    description:
      - The policy ConfigMap. By default the one mounted by the Descheduler's CronJob or Deployment.
    type: str
  policy_key:
    description:
      - The data key of the policy when I(configmap_name) is given.
    type: str
    default: policy.yaml
  backup_dir:
    description:
      - The directory on the controller for backups, named C(<cluster>_<namespace>_<name>_<UTC timestamp>.yaml).
    type: path
    default: ~/.ansible/descheduler-backups
  backup_file:
    description:
      - The backup to re-apply with I(state=restored).
    type: path
  cluster_name:
    description:
      - The cluster's name in backup file names. Defaults to I(context), else the API server URL.
    type: str
  wait_timeout:
    description:
      - Seconds to wait, with I(state=absent), until the ConfigMap shows the chart's policy again; more than 0.
    type: int
    default: 120
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
attributes:
  check_mode:
    support: full
    description: Validates, plans and reports the change and its diff, and sends the write as a server-side dry run; writes no
      backup and changes nothing.
  diff_mode:
    support: full
    description: The policy text before and after.
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
seealso:
  - module: kubevirt_ops.rebalance.kubevirt_eviction_facts
  - name: Descheduler policy API
    description: The DeschedulerPolicy v1alpha2 fields and plugins.
    link: https://github.com/kubernetes-sigs/descheduler
"""

EXAMPLES = r"""
- name: Apply the bounded VM rebalance policy of the rebalance procedure
  kubevirt_ops.rebalance.descheduler_policy:
    kubeconfig: "{{ kubeconfig }}"
    nodes: [worker-a, worker-b]
    vm_labels: {app: desched-test}
    thresholds: {cpu: 70, memory: 60, pods: 20}
    target_thresholds: {cpu: 75, memory: 68, pods: 30}
    max_pods_to_evict_per_node: 1
    max_pods_to_evict_per_namespace: 1
    max_pods_to_evict_total: 1
  register: applied

- name: Show what the first run would move
  ansible.builtin.debug:
    msg: "{{ applied.plan.evictions | map(attribute='pod') | list }}"

- name: Add the VM profile next to the package's default profile
  kubevirt_ops.rebalance.descheduler_policy:
    merge: true
    node_selector: node-role.kubernetes.io/worker
    vm_labels: {app: desched-test}
    thresholds: {memory: 60}
    target_thresholds: {memory: 70}
    max_pods_to_evict_per_node: 1
    max_pods_to_evict_total: 2

- name: Balance by actual CPU load from Prometheus, around the nodes' mean, with the migration cooldown honoured
  kubevirt_ops.rebalance.descheduler_policy:
    nodes: [worker-a, worker-b, worker-c]
    vm_labels: {app: desched-test}
    metrics_source: Prometheus
    prometheus_query: instance:node_cpu_utilisation:rate1m
    prometheus_url: https://prometheus-k8s.monitoring.svc:9091
    prometheus_auth_secret: {namespace: descheduler, name: prometheus-token}
    prometheus_url_override: https://prometheus.apps.example.com
    use_deviation_thresholds: true
    thresholds: {MetricResource: 10}
    target_thresholds: {MetricResource: 10}
    no_eviction_policy: Mandatory
    max_pods_to_evict_per_node: 1
    max_pods_to_evict_total: 2
  register: by_load

- name: Show how many runs the forecast needs to converge
  ansible.builtin.debug:
    msg: "{{ by_load.forecast.cycles_to_converge }} runs, {{ by_load.forecast.migrations }} migrations"

- name: Re-apply the backup taken before the change
  kubevirt_ops.rebalance.descheduler_policy:
    state: restored
    backup_file: "{{ applied.backup_path }}"

- name: Remove the override so the chart's policy comes back
  kubevirt_ops.rebalance.descheduler_policy:
    state: absent
"""

RETURN = r"""
changed:
  description: Whether the ConfigMap was (or in check mode would be) changed.
  returned: always
  type: bool
configmap:
  description: The policy ConfigMap (namespace, name, key).
  returned: always
  type: dict
  sample: {namespace: descheduler, name: descheduler, key: policy.yaml}
policy:
  description: The wanted policy as data.
  returned: state=present
  type: dict
policy_yaml:
  description: The wanted policy as the YAML text written to the ConfigMap.
  returned: state=present
  type: str
findings:
  description: What to know that does not stop the change (for example a non-VM profile that protects PVC Pods), each with code,
    severity, path and message.
  returned: always
  type: list
  elements: dict
backup_path:
  description: The backup of the ConfigMap taken before the change; null when nothing changed or in check mode.
  returned: always
  type: str
  sample: /home/ops/.ansible/descheduler-backups/workload_descheduler_descheduler_20261130T101500.000000Z.yaml
resource_patch:
  description: The ResourcePatch ACP created for the edit (name, namespace, source C(warning) or C(lookup)); null where none was found.
  returned: always
  type: dict
warnings_from_api:
  description: The C(Warning) headers of the update (in check mode, of its dry run; with I(state=absent), of the dry-run deletes).
  returned: always
  type: list
  elements: str
dry_run:
  description: True when check mode sent the change to the API server as a server-side dry run (nothing was stored).
  returned: in check mode, when there was a change to send
  type: bool
resource_version:
  description: The ConfigMap's resourceVersion after the change.
  returned: when changed and not in check mode
  type: str
kubevirt_migration_limits:
  description: KubeVirt's migration limits the policy's eviction limits were checked against (upstream defaults filled in).
  returned: state=present
  type: dict
resource_patches_removed:
  description: The ResourcePatches deleted (or, in check mode, to delete) with I(state=absent).
  returned: state=absent
  type: list
  elements: str
chart_policy_from:
  description:
    - With I(state=absent), the backup in I(backup_dir) that shows the chart's own policy (the newest one this module
      took while no ResourcePatch targeted the ConfigMap; its first line says so), or null when there is none.
    - When known, the module also stops waiting once the ConfigMap holds that text, which it may already do (after a
      I(state=restored) that wrote the chart's text back, removing the ResourcePatches changes nothing).
  returned: state=absent and a ResourcePatch was removed
  type: str
restored_from:
  description: The backup file re-applied.
  returned: state=restored
  type: str
plan:
  description:
    - What LowNodeUtilization would do with the policy now, by requests; see docs/modules/descheduler_policy.md.
    - C(nodes) (usage percent, category), C(evictions) (the Pods and VMs the first run would request to move, in order, with the
      equally ranked alternatives), C(candidates) per overutilized node (removable or not and why; C(node_fit) has the descheduler's
      NodeFit error per node tried when nodeFit refused it), C(stop_reason), C(warnings) (flapping, with the gap that avoids it).
    - C(profiles[].not_evaluated) lists, per field as C(Plugin.path), what the policy sets and the plan does not evaluate.
    - C(usage_source) (also per node row) is what the nodes were classified by, C(requests), C(KubernetesMetrics) or C(Prometheus);
      with C(useDeviationThresholds) each node row has C(thresholds_percent) (C(low), C(high)) around the mean. A VM profile that
      balances by actual usage is planned with the usage read from the metrics server or its Prometheus query.
  returned: state=present and plan=true
  type: dict
forecast:
  description:
    - Every run of the descheduler planned in turn on the state the previous one leaves, until nothing would move or
      I(forecast_cycles) runs.
  returned: state=present and forecast=true
  type: dict
  contains:
    cycles:
      description: Per run, its number (C(cycle), from 1), the planned C(evictions) (C(vm), C(namespace), C(pod), C(source),
        C(destination)) and the nodes' C(categories) (node name to category).
      type: list
      elements: dict
    converged:
      description: Whether a run was reached that moves nothing.
      type: bool
    cycles_to_converge:
      description: The runs that move something before the one that moves nothing; null when the forecast did not converge.
      type: int
    migrations:
      description: The migrations the forecast requests over all its runs.
      type: int
    swaps:
      description: Each node that changes category between runs (C(node), C(from), C(to), C(cycle)).
      type: list
      elements: dict
    moved_back:
      description: Each VM the forecast moves back to a node it left (C(vm), C(namespace), C(cycle), C(nodes) in visiting order).
      type: list
      elements: dict
    refusal:
      description: Why the policy is refused (swaps or moves back), in one line; null when it is not. Set, without I(force), it
        fails the task before anything is written, with this line and what to set.
      type: str
  sample:
    cycles:
      - cycle: 1
        evictions: [{vm: vm-hot, namespace: desched-test, pod: virt-launcher-vm-hot-x2k9p, source: worker-a, destination: worker-b}]
        categories: {worker-a: overutilized, worker-b: underutilized}
    converged: true
    cycles_to_converge: 1
    migrations: 1
    swaps: []
    moved_back: []
    refusal: null
error:
  description:
    - On failure, the error as data (type, path, problem, fix; C(errors) with every policy problem).
    - C(type) C(ForecastRefused) is a refusal by the forecast (path C(forecast)); the result then also has C(policy), C(plan) and
      C(forecast), and nothing was written.
  returned: failure
  type: dict
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_policy import (
    ARG_SPEC,
    SPEC_CHECKS,
    DeschedulerPolicyOptions,
    run,
)


def main() -> None:
    run_module(ARG_SPEC, DeschedulerPolicyOptions, run, **SPEC_CHECKS)


if __name__ == "__main__":
    main()
