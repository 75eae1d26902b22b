#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: rehearsal_plan
short_description: Size a rehearsal's test VMs and thresholds from the live cluster and predict its migrations
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - The first step of the rehearsal (C(playbooks/rehearse.yml)), which does the Descheduler VM rebalance procedure's whole
    validation on a staging cluster with disposable test VMs.
  - Reads the two workers' request usage as LowNodeUtilization counts it, then picks the smallest test VMs and integer memory
    C(thresholds) and C(targetThresholds) such that the collection's planner predicts worker A overutilized, worker B
    underutilized, exactly I(moves) live migrations from A to B, no flapping, and nothing moved by the run after them.
  - Refuses, before anything exists, when fewer than two schedulable KubeVirt workers are found, a named worker is missing, not
    Ready or cordoned, the namespace exists without the rehearsal's labels or is left from an earlier run, the storage class does
    not exist, OpenShift's descheduler operator owns the policy (unless I(allow_operator_policy)), or the workers lack the free
    memory for the test VMs.
  - With I(confirm) (the C(sizing) of an earlier call), checks the same prediction on the running test VMs instead, with their
    launchers' real requests.
  - Reads only; check mode does the same.
options:
  nodes:
    description:
      - The worker to overload (A) and the worker to receive the VMs (B), in that order.
      - By default the busiest and the least busy schedulable KubeVirt workers by memory requests.
    type: list
    elements: str
  moves:
    description:
      - How many live migrations the rehearsal makes the Descheduler request.
    type: int
    default: 1
  namespace:
    description:
      - The disposable namespace of the test VMs.
    type: str
    default: kubevirt-ops-rehearsal
  vm_labels:
    description:
      - The scoping labels of the test VMs (the policy's DefaultEvictor C(labelSelector)).
    type: dict
    default: {app: kubevirt-ops-rehearsal}
  margin:
    description:
      - Percentage points kept between every usage and the threshold it must stay on one side of, for the launcher overhead
        estimate and Pods that come and go.
    type: float
    default: 2.0
  min_gap:
    description:
      - Least difference in points between C(targetThresholds) and C(thresholds) (the procedure's flapping pitfall).
    type: int
    default: 5
  vm_memory_min:
    description:
      - Smallest guest memory of a test VM; the search starts there and grows in steps of 256Mi.
    type: str
    default: 1Gi
  vm_memory_max:
    description:
      - Largest guest memory of a test VM; by default what worker A has free.
    type: str
  storage_class:
    description:
      - A StorageClass for the test VMs' RWX data disks; it must exist. Without one the test VMs use a containerDisk only.
    type: str
  allow_operator_policy:
    description:
      - Rehearse even though a C(KubeDescheduler) resource (OpenShift's descheduler operator) exists, for a cluster where the
        operator is scaled down and the policy ConfigMap is edited by hand.
    type: bool
    default: false
  confirm:
    description:
      - The C(sizing) an earlier call returned; check its prediction on the running test VMs instead of sizing again.
    type: dict
  timeout:
    description:
      - Seconds to wait, before the cluster is sized, for the rehearsal's namespace to be gone when it is still C(Terminating)
        (the cleanup of a rehearsal just before; its test VMs still hold memory). Refused when it is still there then.
    type: int
    default: 600
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
attributes:
  check_mode:
    support: full
    description: Reads only; the same plan in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.rehearsal_vms
  - module: kubevirt_ops.rebalance.descheduler_policy
"""

EXAMPLES = r"""
- name: Size the rehearsal from the live cluster and print the prediction
  kubevirt_ops.rebalance.rehearsal_plan:
    moves: 1
  register: rehearsal

- name: Show it
  ansible.builtin.debug:
    msg: "{{ rehearsal.lines }}"

- name: Check the prediction again once the test VMs run
  kubevirt_ops.rebalance.rehearsal_plan:
    confirm: "{{ rehearsal.sizing }}"
"""

RETURN = r"""
sizing:
  description: The rehearsal's sizing and the planner's prediction.
  returned: always
  type: dict
  contains:
    source:
      description: Worker A, where the test VMs start.
      type: str
    destination:
      description: Worker B, where the migrations go.
      type: str
    moves:
      description: The migrations asked for.
      type: int
    vm_count:
      description: How many test VMs.
      type: int
    vm_names:
      description: Their names.
      type: list
      elements: str
    vm_memory:
      description: The guest memory of each test VM (a quantity).
      type: str
    launcher_memory_estimate:
      description: The memory in bytes each test VM's launcher is expected to request (guest plus overhead).
      type: int
    thresholds:
      description: The policy's C(thresholds) (memory only).
      type: dict
    target_thresholds:
      description: The policy's C(targetThresholds) (memory only).
      type: dict
    policy:
      description: The bounded DeschedulerPolicy the prediction is for.
      type: dict
    policy_options:
      description: The same policy as the rebalance playbook's variables (C(rebalance_nodes), C(rebalance_thresholds), ...).
      type: dict
    figures:
      description: Per worker C(allocatable), C(requested), C(free) and C(percent) by requests before the test VMs.
      type: dict
    prediction:
      description:
        - C(holds), C(problems), C(moves), C(from), C(to), C(candidates) (the equally ranked test VMs, any of which the
          Descheduler may pick), C(first_run) and C(next_run) (nodes with usage and category, stop reason, evictions).
      type: dict
  sample: {"source": "worker-a", "destination": "worker-b", "moves": 1, "vm_count": 2, "vm_memory": "2816Mi",
           "thresholds": {"memory": 47}, "target_thresholds": {"memory": 52}}
lines:
  description: The prediction in a few lines, for the play output (first, how long an earlier rehearsal's namespace was waited for).
  returned: always
  type: list
  elements: str
waited_seconds:
  description: Seconds spent waiting for an earlier rehearsal's C(Terminating) namespace to be gone (0 when there was none).
  returned: always
  type: float
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.rehearsal_plan import ARG_SPEC, RehearsalPlanOptions, run


def main() -> None:
    run_module(ARG_SPEC, RehearsalPlanOptions, run)


if __name__ == "__main__":
    main()
