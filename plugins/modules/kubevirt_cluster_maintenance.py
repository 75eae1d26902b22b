#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: kubevirt_cluster_maintenance
short_description: Plan and record a rolling maintenance of many nodes so that each VM live-migrates at most once
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - The state of a rolling maintenance of a set of nodes (the playbook C(kubevirt_ops.rebalance.cluster_maintenance) drives it; the
    drains are M(kubevirt_ops.rebalance.kubevirt_node_drain)'s), kept in the cluster in a ConfigMap so that a run that stopped
    continues where it was.
  - C(state=planned) reads the cluster once (the eviction facts, the virt-launcher Pods, the run's ConfigMap) and decides the order
    and the batches. Every node still to be maintained gets the taint C(kubevirt-ops.io/maintenance-pending=<run id>:PreferNoSchedule),
    which kube-scheduler's TaintToleration score makes it avoid while an untainted node has room, so the VMs of each drained node
    land on maintained or spare nodes. The order is fewest second migrations first (an empty spare worker first); a batch holds as many
    nodes as KubeVirt's limits keep busy (C(parallelMigrationsPerCluster) over C(parallelOutboundMigrationsPerNode), rounded up),
    at most I(max_nodes_in_parallel), while all its VMs fit on untainted nodes by requests and no PodDisruptionBudget has more of its
    Pods on the batch than it allows disruptions.
  - A plan that live-migrates VMs twice (the spare room cannot take the next node's VMs) is refused before any change, with the VMs
    named and the cost with one node at a time, unless I(allow_double_migrations).
  - A recorded run that did not finish (status C(in_progress) or C(stopped)) is continued when the same nodes are given; its
    finished nodes are skipped and its started ones go first. I(restart) starts over.
  - C(state=started) records the start of a batch (I(nodes)); C(state=node_done) records a node as done with its I(steps) and lifts
    its taint; C(state=finished) and C(state=stopped) lift every taint of the collection and return the run's report (per node its
    steps, per VM every migration since the run began with source, target and seconds, and the totals); C(state=absent) lifts the
    taints and deletes the record.
options:
  state:
    description:
      - What to do; see the description.
    type: str
    choices: [planned, started, node_done, finished, stopped, absent]
    default: planned
  nodes:
    description:
      - With C(state=planned), the nodes to maintain by name (or I(node_selector)); with C(state=started), the nodes of the batch
        that starts.
    type: list
    elements: str
  node_selector:
    description:
      - With C(state=planned), the nodes to maintain by label selector (as C(kubectl get nodes -l) takes it), instead of I(nodes).
    type: str
  node:
    description:
      - With C(state=node_done), the node that is done.
    type: str
  steps:
    description:
      - With C(state=node_done), what the node's steps took (for example C(drain), C(hook), C(ready), C(uncordon), each a dict with
        C(start), C(end), C(seconds)); kept in the record and the report as given.
    type: dict
  reason:
    description:
      - With C(state=stopped), why the run stopped (shown in the report).
    type: str
  max_nodes_in_parallel:
    description:
      - The most nodes drained at once; the plan may drain fewer (KubeVirt's limits, the spare room, the PDBs).
    type: int
    default: 3
  allow_double_migrations:
    description:
      - Accept a plan that live-migrates some VMs twice.
    type: bool
    default: false
  restart:
    description:
      - Start a new run even when the recorded one did not finish.
    type: bool
    default: false
  progress_namespace:
    description:
      - The namespace of the ConfigMap that records the run.
    type: str
    default: kube-system
  progress_name:
    description:
      - The name of the ConfigMap that records the run (key C(run.json)).
    type: str
    default: kubevirt-ops-cluster-maintenance
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
attributes:
  check_mode:
    support: full
    description: The plan is decided and returned; the record and the taints are sent as server-side dry runs.
  diff_mode:
    support: partial
    description: With C(state=planned), the tainted nodes before and after.
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.kubevirt_node_drain
  - module: kubevirt_ops.rebalance.kubevirt_eviction_facts
"""

EXAMPLES = r"""
- name: Plan the maintenance of every worker (check mode changes nothing)
  kubevirt_ops.rebalance.kubevirt_cluster_maintenance:
    node_selector: node-role.kubernetes.io/worker=
  check_mode: true
  register: plan

- name: Record the run and taint the pending nodes
  kubevirt_ops.rebalance.kubevirt_cluster_maintenance:
    nodes: [worker-1, worker-2, worker-3]
    max_nodes_in_parallel: 2
  register: plan

- name: A node is done
  kubevirt_ops.rebalance.kubevirt_cluster_maintenance:
    state: node_done
    node: worker-1
    steps:
      drain: {seconds: 42}

- name: Lift the taints and get the report
  kubevirt_ops.rebalance.kubevirt_cluster_maintenance:
    state: finished
  register: done
"""

RETURN = r"""
state:
  description: The state asked for.
  returned: always
  type: str
run_id:
  description: The run's id (also the taint's value), from its start time.
  returned: always
  type: str
resumed:
  description: Whether a recorded unfinished run is continued.
  returned: state=planned
  type: bool
nodes:
  description: The nodes of the run.
  returned: state=planned
  type: list
  elements: str
done:
  description: The nodes done in this run.
  returned: state=planned or state=node_done
  type: list
  elements: str
pending:
  description: The nodes still to be maintained.
  returned: state=planned
  type: list
  elements: str
plan:
  description:
    - C(order), C(batches) (each with C(nodes), C(max_parallel) per node, C(vms), C(migrations), C(second_migrations),
      C(unplaced)), C(nodes_at_once), C(limits), C(vms), C(migrations), C(second_migrations) (each C(vm), C(from), C(lands_on)),
      C(unplaced), C(migrations_per_vm).
  returned: state=planned
  type: dict
problems:
  description: What refused the plan, each with C(code), C(message) and the C(option) that allows it.
  returned: state=planned
  type: list
  elements: dict
tainted:
  description: The nodes carrying the pending taint after the call.
  returned: state=planned and the plan was accepted
  type: list
  elements: str
taint_lifted:
  description: Whether the node's taint was lifted by this call.
  returned: state=node_done
  type: bool
left:
  description: The nodes not done yet.
  returned: state=node_done
  type: list
  elements: str
lifted:
  description: The nodes whose taint this call lifted.
  returned: state=finished, stopped or absent
  type: list
  elements: str
taints_changed:
  description: Per node changed, C(node), its taints C(before) and C(after).
  returned: always
  type: list
  elements: dict
report:
  description:
    - C(run_id), C(status), C(started_at), C(ended_at), C(stopped), C(plan), C(nodes) (per node C(state), C(started_at), C(done_at),
      C(steps)), C(vms) (per VM its C(migrations) since the run began, each C(name), C(phase), C(source_node), C(target_node),
      C(created), C(start), C(end), C(phase_timestamps), C(duration_seconds), C(failure_reason)) and C(totals) (C(nodes), C(nodes_done), C(vms_migrated),
      C(migrations), C(failed_migrations), C(vms_migrated_twice_or_more), C(migrations_per_vm), C(max_migrations_of_a_vm),
      C(peak_concurrent_migrations), C(seconds)).
    - With state=stopped also C(still_evacuating), the VMs KubeVirt is still evacuating from the nodes not done (each C(vm), C(node),
      C(result) C(evacuating) and C(reason) with the way out; M(kubevirt_ops.rebalance.kubevirt_node_drain) state=uncordon cancels them).
      The Markdown and HTML reports list them, and the evacuations each node's uncordon cancelled (its C(steps.uncordon.evacuations)).
  returned: state=finished or state=stopped, when a run is recorded
  type: dict
markdown:
  description: The report as Markdown.
  returned: state=finished or state=stopped, when a run is recorded
  type: str
html:
  description: The report as a self-contained HTML page (the totals, the nodes, every migration on a timeline).
  returned: state=finished or state=stopped, when a run is recorded
  type: str
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_cluster_maintenance import (
    ARG_SPEC, KubevirtClusterMaintenanceOptions, run)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, KubevirtClusterMaintenanceOptions, run)


if __name__ == "__main__":
    main()
