#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: kubevirt_node_drain
short_description: Drain a node of KubeVirt VMs by live migration, with a preflight, limits, per-VM results and a resumable state
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - The KubeVirt node maintenance procedure (C(kubectl drain <node> --delete-emptydir-data --ignore-daemonsets=true --force
    --pod-selector=kubevirt.io=virt-launcher), or without the selector for all Pods), done for VMs.
  - Before anything changes, and in check mode, a preflight from the eviction facts of
    M(kubevirt_ops.rebalance.kubevirt_eviction_facts) says for each VMI on the node whether it will live-migrate, shut down and restart
    elsewhere (evictionStrategy None with a VirtualMachine), be replaced (VMI replica set), be lost (a bare VMI), or is blocked (for
    example LiveMigrate on a VMI that is not live-migratable, with KubeVirt's message); lists the PodDisruptionBudgets over the node's
    launchers (the C(maxUnavailable) or percentage C(minAvailable) trap of kubevirt/kubevirt#18063); and checks by requests that the other
    schedulable nodes can hold the VMs. I(allow_shutdown), I(allow_loss), I(allow_blocked) and I(require_capacity) decide what stops the
    drain; a refused drain changes nothing.
  - Then cordons the node and evicts. KubeVirt's 429 answers C(Eviction triggered evacuation) and C(Evacuation in progress) are progress,
    not failures; live migrations are requested at most I(max_parallel) at a time (by default KubeVirt's
    C(parallelOutboundMigrationsPerNode), never more than C(parallelMigrationsPerCluster)); each VM is then followed by watching VMIs,
    migrations, the node's Pods and PDBs, not evicted again on a timer. A Pod refused by a PDB is asked again when a PDB changes.
    Any other 429 is asked again every 5 seconds until I(timeout), as C(kubectl drain) does. KubeVirt's webhook answers 429 when it
    could not read or mark the VMI (C(kubevirt failed getting the vmi), C(kubevirt failed marking the vmi for eviction)) and for a
    hotplug volume Pod while its VM still runs on the node (that Pod goes with the VM's launcher). Still refused at I(timeout), the
    VM or Pod is C(timeout) with the last refusal and the module fails.
  - Every VM gets a result (C(migrated) with the migration and target node, C(restarted) with the new UID, C(replaced), C(deleted),
    C(blocked), C(failed) with the reason, C(timeout)). On failure or at I(timeout) the module fails with what moved, what is left, and the
    node still cordoned; running it again continues (a VM already marked for evacuation is waited for, not evicted again).
  - C(state=uncordon) makes the node schedulable again; C(state=safe_to_shutdown) checks, read-only, that no VMI runs on the node and lists
    the other Pods.
  - Before it uncordons, C(state=uncordon) takes back from KubeVirt what a stopped drain left (a timeout, a failure, a cancelled job).
    KubeVirt goes on creating C(kubevirt-evacuation-*) migrations for every VMI still marked with C(status.evacuationNodeName) of the node,
    after each one that ends, even once the node is schedulable (kubevirt/kubevirt#9585). Where the API server serves virt-api's
    C(virtualmachineinstances/evacuate/cancel) (read from discovery of C(subresources.kubevirt.io/v1), KubeVirt v1.7.0 and newer), each
    mark is cleared through it, as C(virtctl evacuate-cancel) does, and the VMI's evacuation migrations that have not started are deleted,
    as C(--migrate-cancel) does (one already under way finishes). RV(evacuations) says which VMs stayed where they were and why. Without
    the subresource nothing is cancelled, and RV(evacuations.advice) says which VMs KubeVirt keeps evacuating and the commands that stop it.
    Marks the Descheduler set (annotation C(kubevirt.io/eviction-source=descheduler)) are a rebalance and are left alone. In check mode
    the cancels and deletions go as server-side dry runs.
  - With I(nodes), several nodes are drained at once in one call (a batch of a rolling maintenance). The eviction facts are read once and
    every node's preflight comes first; when any node's preflight refuses, nothing changes and the module fails with each node's
    problems. The capacity check places the VMs of the whole batch together on the nodes outside it. Then every node is cordoned and one
    drain runs over all of them. Each node keeps at most its share of live migrations in flight (I(max_parallel_per_node), else as for
    one node), the whole drain at most C(parallelMigrationsPerCluster), the nodes taking turns. Progress lines start with the node. The
    result holds each node's result as a one-node call returns it (RV(nodes_results)) and the totals.
options:
  node:
    description:
      - The node to drain, uncordon or check.
      - Exactly one of I(node) and I(nodes) is required (they are mutually exclusive).
    type: str
  nodes:
    description:
      - The nodes to drain at once, with I(state=drained) only; for the other states loop over I(node).
      - Exactly one of I(node) and I(nodes) is required (they are mutually exclusive).
      - The result then has RV(nodes_results) and the batch's totals instead of one node's keys at the top.
    type: list
    elements: str
  max_parallel_per_node:
    description:
      - Per node (the key) the live migrations kept in flight at once (a whole number of 1 or more), for example a rolling
        maintenance's share of C(parallelMigrationsPerCluster) over its batch (5 shared as 2, 2 and 1 over three nodes).
      - Never more than KubeVirt's C(parallelOutboundMigrationsPerNode) and C(parallelMigrationsPerCluster). A node not listed uses
        I(max_parallel), or KubeVirt's limits when that is unset. Keys must be nodes of this drain.
    type: dict
  state:
    description:
      - C(drained) cordons and evacuates; C(uncordon) re-enables scheduling; C(safe_to_shutdown) only reads.
    type: str
    choices: [drained, uncordon, safe_to_shutdown]
    default: drained
  pods:
    description:
      - C(launchers) evicts the virt-launcher Pods only (C(--pod-selector=kubevirt.io=virt-launcher) in node maintenance, Evict all VMs
        from a Node); C(all) every Pod of the node (node maintenance, Evict all VMs and Pods from a Node).
    type: str
    choices: [launchers, all]
    default: launchers
  ignore_daemonsets:
    description:
      - Leave DaemonSet Pods on the node (C(--ignore-daemonsets)); without it a DaemonSet Pod stops the drain in preflight.
    type: bool
    default: true
  delete_emptydir_data:
    description:
      - Evict Pods with emptyDir volumes (C(--delete-emptydir-data), C(--delete-local-data) in node maintenance); every virt-launcher Pod
        has them.
    type: bool
    default: true
  force:
    description:
      - Evict Pods without a controller (C(--force)); without it such a Pod stops the drain in preflight.
    type: bool
    default: true
  allow_shutdown:
    description:
      - Accept VMs that shut down and start again elsewhere (evictionStrategy None under a VirtualMachine with runStrategy Always, or a VMI
        replica set's VMI). Without it the drain is refused before any change.
    type: bool
    default: false
  allow_loss:
    description:
      - Accept VMs that shut down and are never started again (a bare VMI, or a VM whose run strategy does not restart it).
    type: bool
    default: false
  allow_blocked:
    description:
      - Drain the rest when some VMs cannot be evicted (KubeVirt or a PDB refuses); they stay on the cordoned node and are reported as
        C(blocked). Without it the drain is refused before any change.
    type: bool
    default: false
  require_capacity:
    description:
      - Refuse the drain when the other schedulable nodes cannot hold the VMs by requests.
    type: bool
    default: true
  max_parallel:
    description:
      - At most this many live migrations requested at once; unset uses KubeVirt's limits (the lower of
        C(parallelOutboundMigrationsPerNode) and C(parallelMigrationsPerCluster)).
      - With I(nodes), per node (for the nodes I(max_parallel_per_node) does not list); the whole drain stays within
        C(parallelMigrationsPerCluster).
    type: int
  timeout:
    description:
      - Seconds the whole drain may take, preflight included (with I(nodes), of all the nodes together).
    type: int
    default: 600
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
  - kubevirt_ops.rebalance.progress
attributes:
  check_mode:
    support: full
    description: Runs the preflight and reports what would change; cordons and evicts nothing (the cordon is sent as a server-side dry
      run).
  diff_mode:
    support: partial
    description: The node's C(unschedulable) before and after.
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.kubevirt_eviction_facts
  - module: kubevirt_ops.rebalance.vm_migration_verify
  - module: kubernetes.core.k8s_drain
"""

EXAMPLES = r"""
- name: Preflight only
  kubevirt_ops.rebalance.kubevirt_node_drain:
    node: worker-1
  check_mode: true
  register: preflight

- name: Evacuate the VMs of worker-1 by live migration, accepting restarts of strategy None VMs
  kubevirt_ops.rebalance.kubevirt_node_drain:
    node: worker-1
    allow_shutdown: true
    timeout: 1800
  register: drain

- name: Evict every Pod of the node (node maintenance, Evict all VMs and Pods from a Node)
  kubevirt_ops.rebalance.kubevirt_node_drain:
    node: worker-3
    pods: all
    allow_shutdown: true

- name: Drain a batch of three nodes at once, sharing parallelMigrationsPerCluster (5) as 2, 2 and 1
  kubevirt_ops.rebalance.kubevirt_node_drain:
    nodes: [worker-1, worker-2, worker-3]
    max_parallel_per_node:
      worker-1: 2
      worker-2: 2
      worker-3: 1
    timeout: 1800
  register: batch

- name: Show what moved from each node
  ansible.builtin.debug:
    msg: "{{ item.key }}: {{ item.value.moved | length }} moved, drained {{ item.value.drained }}"
  loop: "{{ batch.nodes_results | dict2items }}"
  loop_control:
    label: "{{ item.key }}"

- name: Is the node safe to power off?
  kubevirt_ops.rebalance.kubevirt_node_drain:
    node: worker-1
    state: safe_to_shutdown
  register: safe
  failed_when: not safe.safe_to_shutdown.safe

- name: Re-enable the node
  kubevirt_ops.rebalance.kubevirt_node_drain:
    node: worker-1
    state: uncordon
"""

RETURN = r"""
progress:
  description:
    - What the task printed while it waited (see I(progress_every)), C(lines) in the order they were shown, C(elapsed_seconds)
      of the whole wait, C(done) true.
  returned: when the module waited
  type: dict
  sample: {"done": true, "elapsed_seconds": 31.4, "lines": ["worker-1: vms/vm-a migrated worker-1 -> worker-3 in 9 s (1 of 6 done)"]}
node:
  description: The node.
  returned: with I(node)
  type: str
nodes:
  description: The nodes drained at once, as given.
  returned: with I(nodes)
  type: list
  elements: str
nodes_results:
  description:
    - With I(nodes), per node (the key) its result as a call with I(node) returns it (RV(preflight), RV(vms), RV(moved), RV(migrated),
      RV(left), RV(drained), RV(safe_to_shutdown), RV(peak_in_flight), RV(evictions), RV(concurrency), RV(cordoned), RV(was_cordoned) and,
      when it did not finish, C(failed), C(msg) and C(resume)). C(waited_seconds) is the time until that node's last VM had its result,
      C(timed_out) whether some of its VMs had none at the timeout.
  returned: with I(nodes)
  type: dict
  sample: {"worker-1": {"node": "worker-1", "drained": true, "moved": ["vms/vm-a"], "migrated": ["vms/vm-a"], "peak_in_flight": 2}}
state:
  description: The state that ran.
  returned: always
  type: str
was_cordoned:
  description: The node was unschedulable before this run (with I(nodes), in each node's RV(nodes_results)).
  returned: state=drained or state=uncordon, with I(node)
  type: bool
cordoned:
  description: The node is unschedulable after this run (in check mode, as it was); with I(nodes), every node is.
  returned: always
  type: bool
drained:
  description:
    - Every VM and Pod to evict has its result and no VMI is left on the node except VMs reported C(blocked).
    - With I(nodes), every node is drained.
  returned: state=drained
  type: bool
preflight:
  description:
    - With I(node); with I(nodes) in each node's RV(nodes_results).
    - What the drain decided before any change. C(vms) (per VMI on the node C(action) of C(live_migrate), C(restart), C(replace),
      C(lost), C(blocked), C(external), C(not_running) with C(reason), C(blocked_message), C(eviction_response), owner, launcher and
      requests), C(counts) by action, C(pods) (C(evict), C(other), C(ignored), C(skipped), C(refused) as kubectl drain's filters),
      C(capacity) (C(fits), C(nodes), C(placements), C(unplaced); with I(nodes) also C(batch), the nodes whose VMs were placed
      together), C(pdbs) over the node's launchers with C(blocks_evictions) and their
      findings, C(findings) about the node's VMIs, C(limits), C(concurrency) and C(problems) (each with C(code), C(message) and the
      C(option) that allows it).
  returned: state=drained
  type: dict
vms:
  description: One entry per VMI that was on the node (with I(nodes), in each node's RV(nodes_results)).
  returned: state=drained with I(node)
  type: list
  elements: dict
  contains:
    namespace:
      description: VMI namespace.
      type: str
    name:
      description: VMI name.
      type: str
    action:
      description: The preflight action.
      type: str
    result:
      description: C(migrated), C(restarted), C(replaced), C(deleted), C(moved) (strategy External), C(blocked), C(not_running),
        C(failed), C(timeout), or C(pending) (not started, in check mode or after a refused preflight).
      type: str
    reason:
      description: Why, in KubeVirt's words where there are some.
      type: str
    source_node:
      description: The drained node.
      type: str
    target_node:
      description: Where the VM runs now (migrated or restarted).
      type: str
    uid_before:
      description: The VMI UID before the drain.
      type: str
    uid_after:
      description: The VMI UID after (the same after a live migration, a new one after a restart).
      type: str
    migration:
      description: The VirtualMachineInstanceMigration that moved (or failed to move) the VM.
      type: str
    eviction:
      description: The answer to the eviction (C(code), C(message)).
      type: dict
pods:
  description: The other Pods evicted (pods=all), each with C(result) C(evicted) or C(timeout) and C(reason).
  returned: state=drained with I(node), after a drain
  type: list
  elements: dict
summary:
  description: VM results counted by result.
  returned: state=drained with I(node)
  type: dict
moved:
  description: C(namespace/name) of the VMs that run elsewhere now; with I(nodes), of every node.
  returned: state=drained
  type: list
  elements: str
migrated:
  description:
    - C(namespace/name) of the VMs that live-migrated (for M(kubevirt_ops.rebalance.vm_migration_verify) I(names)); with I(nodes), of
      every node.
  returned: when the drain ran
  type: list
  elements: str
left:
  description: C(namespace/name) of the VMIs still running on the node; with I(nodes), on any of them.
  returned: state=drained
  type: list
  elements: str
safe_to_shutdown:
  description: C(safe) (no VMI runs on the node), C(vmis) left, C(other_pods) (neither DaemonSet nor launcher), C(daemonset_pods), C(note).
  returned: state=safe_to_shutdown, or after a drain with I(node)
  type: dict
resume:
  description: How to continue after a failed or timed-out drain.
  returned: when the drain did not finish
  type: str
concurrency:
  description: How many live migrations this drain kept in flight at most (with I(nodes), in each node's RV(nodes_results)).
  returned: state=drained with I(node)
  type: int
concurrency_per_node:
  description: With I(nodes), per node how many live migrations from it were kept in flight at most.
  returned: state=drained with I(nodes)
  type: dict
peak_in_flight:
  description: The most live migrations this drain had requested and not yet finished at once (with I(nodes), over all of them).
  returned: when the drain ran
  type: int
evictions:
  description: Eviction C(requests) and C(responses) by HTTP code (with I(nodes), of all of them).
  returned: when the drain ran
  type: dict
timed_out:
  description: The timeout passed before every VM had its result (with I(nodes), of any node).
  returned: when the drain ran
  type: bool
waited_seconds:
  description: Seconds the drain took (with I(nodes), all of it; each node's own in RV(nodes_results)).
  returned: when the drain ran
  type: float
watch:
  description: Requests of the wait (C(lists), C(watches), C(reconnects), C(relists_after_410), C(events)).
  returned: when the drain ran
  type: dict
api:
  description: Requests retried after 429, 5xx or connection errors.
  returned: when the drain ran
  type: dict
ready:
  description: The node's Ready condition.
  returned: state=uncordon
  type: bool
evacuations:
  description:
    - What became of the VMs still marked for evacuation from the node (the VMs a stopped drain had not moved), each list of
      C(namespace/name).
  returned: state=uncordon
  type: dict
  contains:
    served:
      description: Whether the API server serves C(evacuate/cancel); null when no VM was marked (discovery was not read).
      type: bool
    marked:
      description: The VMs marked for evacuation from the node when the task began.
      type: list
      elements: str
    stayed:
      description: Evacuation cancelled and nothing left that would move the VM (its pending evacuation migrations deleted).
      type: list
      elements: str
    moving:
      description: Evacuation cancelled, but a migration was already under way; it finishes and the VM moves once.
      type: list
      elements: str
    continuing:
      description: KubeVirt does not serve the cancel; it keeps evacuating these VMs (see RV(evacuations.advice)).
      type: list
      elements: str
    failed:
      description: The cancel was refused (for example the node carries KubeVirt's legacy drain taint); KubeVirt keeps evacuating them.
      type: list
      elements: str
    deleted_migrations:
      description: The evacuation migrations deleted because they had not started.
      type: list
      elements: str
    vms:
      description: Per VM C(namespace), C(name), C(node), C(result) (one of the lists above), C(reason) and C(deleted_migrations).
      type: list
      elements: dict
    advice:
      description: For the VMs C(continuing) or C(failed), what KubeVirt goes on doing and the commands that stop it; null otherwise.
      type: str
  sample: {"served": true, "marked": ["vms/vm-a"], "stayed": ["vms/vm-a"], "moving": [], "continuing": [], "failed": [],
           "deleted_migrations": [], "advice": null,
           "vms": [{"namespace": "vms", "name": "vm-a", "node": "worker-1", "result": "stayed", "deleted_migrations": [],
                    "reason": "evacuation cancelled; the VM stays on worker-1"}]}
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_node_drain import ARG_SPEC, KubevirtNodeDrainOptions, run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, KubevirtNodeDrainOptions, run)


if __name__ == "__main__":
    main()
