#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: rehearsal_vms
short_description: Create a rehearsal's disposable namespace and test VMs and wait until they can live-migrate, or delete them
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - The rehearsal's validation steps 1 and 2 (test VMs with the scoping label, a bounded and reversible imbalance) and its
    cleanup.
  - With I(state=present), creates the namespace (labelled C(app.kubernetes.io/managed-by=kubevirt_ops.rebalance) and
    C(kubevirt-ops.io/rehearsal=true)), one RWX PVC per VM when I(storage_class) is given, and the test VMs (runStrategy Always,
    evictionStrategy LiveMigrate, one vCPU, the scoping labels on the VM and its template, a containerDisk boot disk, a preferred
    node affinity to I(source) and a required one to I(source) and I(destination)); then waits until every VMI is Running with
    C(LiveMigratable=True) and returns each VM's name, UID and node. A rehearsal namespace still C(Terminating) (the cleanup of a
    rehearsal just before) is first waited for until it is gone, within I(timeout), as the API refuses new objects in it.
  - With I(state=absent), deletes the namespace (so everything in it) and waits until it is gone.
  - Never writes to or deletes a namespace without the rehearsal's labels; such a namespace is refused before any write.
  - Idempotent; check mode creates or deletes the namespace with server-side dry run and reports the rest.
options:
  state:
    description:
      - C(present) creates and waits; C(absent) deletes and waits.
    type: str
    choices: [present, absent]
    default: present
  namespace:
    description:
      - The rehearsal's namespace.
    type: str
    default: kubevirt-ops-rehearsal
  run_id:
    description:
      - The run that creates the namespace, kept in its annotation C(kubevirt-ops.io/rehearsal-run).
    type: str
    default: ""
  vms:
    description:
      - The test VM names (the C(vm_names) of M(kubevirt_ops.rebalance.rehearsal_plan)); required with I(state=present).
    type: list
    elements: str
    default: []
  vm_memory:
    description:
      - The guest memory of each test VM (C(spec.domain.resources.requests.memory)).
    type: str
    default: 1Gi
  vm_labels:
    description:
      - The scoping labels of the test VMs.
    type: dict
    default: {app: kubevirt-ops-rehearsal}
  source:
    description:
      - Worker A, preferred by the test VMs' node affinity; required with I(state=present).
    type: str
  destination:
    description:
      - Worker B, the only other node the test VMs may run on; required with I(state=present).
    type: str
  storage_class:
    description:
      - A StorageClass for one ReadWriteMany data disk per VM, so that the launchers mount a PVC; none for containerDisk only.
    type: str
  pvc_size:
    description:
      - Size of each data disk.
    type: str
    default: 1Gi
  volume_mode:
    description:
      - The data disks' C(volumeMode); the storage class's default when omitted (RBD needs C(Block) for RWX).
    type: str
    choices: [Block, Filesystem]
  image:
    description:
      - The containerDisk image the test VMs boot from.
    type: str
    default: quay.io/kubevirt/cirros-container-disk-demo:v1.4.0
  timeout:
    description:
      - Seconds to wait for the VMs to run (including the wait for an earlier rehearsal's C(Terminating) namespace to go), or for
        the namespace to be gone.
    type: int
    default: 600
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
attributes:
  check_mode:
    support: full
    description: The namespace is created or deleted with server-side dry run; nothing else is sent.
  diff_mode:
    support: none
    description: The objects created are returned in C(created).
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.rehearsal_plan
  - module: kubevirt_ops.rebalance.vm_migration_verify
"""

EXAMPLES = r"""
- name: Create the test VMs the plan sized and wait until they can live-migrate
  kubevirt_ops.rebalance.rehearsal_vms:
    vms: "{{ rehearsal.sizing.vm_names }}"
    vm_memory: "{{ rehearsal.sizing.vm_memory }}"
    source: "{{ rehearsal.sizing.source }}"
    destination: "{{ rehearsal.sizing.destination }}"
  register: test_vms

- name: Delete the rehearsal's namespace and wait until it is gone
  kubevirt_ops.rebalance.rehearsal_vms:
    state: absent
"""

RETURN = r"""
namespace:
  description: The rehearsal's namespace.
  returned: always
  type: str
created:
  description: C(Kind/name) of what this call created (or would create in check mode).
  returned: state=present
  type: list
  elements: str
vms:
  description: Each test VM as recorded once it runs (validation step 1).
  returned: state=present
  type: list
  elements: dict
  contains:
    name:
      description: The VM's name.
      type: str
    uid:
      description: The VMI's UID.
      type: str
    node:
      description: The node the VMI runs on.
      type: str
    phase:
      description: The VMI's phase.
      type: str
    live_migratable:
      description: C(LiveMigratable=True).
      type: bool
    reason:
      description: Why it is not live-migratable, when it is not.
      type: str
    launcher:
      description: The running virt-launcher Pod.
      type: str
    launcher_memory:
      description: The launcher's memory request in bytes.
      type: int
removed:
  description: C(Kind/name) of what this call deleted.
  returned: state=absent
  type: list
  elements: str
left:
  description: What is still there after a failed delete (the namespace and its phase).
  returned: state=absent
  type: list
  elements: str
waited_seconds:
  description: Seconds spent waiting.
  returned: always
  type: float
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.rehearsal_vms import ARG_SPEC, RehearsalVmsOptions, run


def main() -> None:
    run_module(ARG_SPEC, RehearsalVmsOptions, run)


if __name__ == "__main__":
    main()
