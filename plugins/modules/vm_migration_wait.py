#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vm_migration_wait
short_description: Wait until every KubeVirt VirtualMachineInstanceMigration in scope is Succeeded or Failed
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - Waits until every VirtualMachineInstanceMigration in scope has reached C(Succeeded) or C(Failed), as the Descheduler VM
    rebalance procedure demands before the Descheduler CronJob is re-enabled after a rollback.
  - Lists the migrations once, then watches them from the list's resourceVersion (reconnecting on errors, listing again on 410 Gone),
    with no fixed-interval polling; returns at the first event after which nothing in scope is unfinished.
  - A C(Failed) migration is final and does not fail the module unless I(fail_on_failed) is set.
  - At the I(timeout) the module fails and names the migrations still unfinished with their phases.
  - Changes nothing in the cluster; check mode does the same.
options:
  namespaces:
    description:
      - The namespaces of the migrations; all namespaces when omitted.
    type: list
    elements: str
    aliases: [namespace]
  label_selector:
    description:
      - Only migrations whose labels match this label selector, for example C(kubevirt.io/vmi-name=vm-1).
    type: str
  vmi_names:
    description:
      - Only migrations of these VMIs (C(spec.vmiName)), as C(name) (in any namespace in scope) or C(namespace/name).
    type: list
    elements: str
  timeout:
    description:
      - Seconds to wait.
    type: int
    default: 600
  fail_on_failed:
    description:
      - Fail when a migration in scope ended C(Failed). By default a C(Failed) migration is final like a C(Succeeded) one.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
  - kubevirt_ops.rebalance.progress
attributes:
  check_mode:
    support: full
    description: Reads only; the same wait happens in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.vm_migration_verify
  - module: kubevirt_ops.rebalance.descheduler_policy
"""

EXAMPLES = r"""
- name: Wait for every migration in the cluster to be final before resuming the Descheduler
  kubevirt_ops.rebalance.vm_migration_wait:
    timeout: 600
  register: waited

- name: Wait for the migrations of two VMs and fail when one failed
  kubevirt_ops.rebalance.vm_migration_wait:
    namespaces: [desched-test]
    vmi_names: [vm-1, vm-2]
    fail_on_failed: true
    timeout: 300
"""

RETURN = r"""
migrations:
  description: The migrations in scope at return, sorted by namespace and name.
  returned: always
  type: list
  elements: dict
  contains:
    namespace:
      description: Namespace of the migration.
      type: str
    name:
      description: Name of the migration (C(kubevirt-evacuation-*) for an evacuation).
      type: str
    vmi:
      description: The VMI migrated (C(spec.vmiName)).
      type: str
    phase:
      description: The migration phase, null before KubeVirt set one.
      type: str
    source:
      description: The source node (C(migrationState.sourceNode), or the evacuation annotation).
      type: str
    target:
      description: The target node.
      type: str
    started:
      description: When the migration started (C(migrationState.startTimestamp), else its creation).
      type: str
    finished:
      description: When the migration ended (C(migrationState.endTimestamp) or the phase transition), null while it runs.
      type: str
    final:
      description: The phase is C(Succeeded) or C(Failed).
      type: bool
    evacuation:
      description: An evacuation migration (annotation C(kubevirt.io/evacuationMigration)), created for an eviction or a drain.
      type: bool
    failure_reason:
      description: Why a failed migration failed.
      type: str
  sample: [{"namespace": "desched-test", "name": "kubevirt-evacuation-x7k2p", "vmi": "vm-1", "phase": "Succeeded",
            "source": "worker-a", "target": "worker-b", "started": "2025-01-01T10:00:01Z", "finished": "2025-01-01T10:00:11Z",
            "final": true, "evacuation": true, "failure_reason": null}]
unfinished:
  description: How many migrations in scope were not final at return (0 unless the module failed on the timeout).
  returned: always
  type: int
failed_migrations:
  description:
    - The migrations in scope that ended C(Failed), as in I(migrations).
    - Not called C(failed), which Ansible reserves for the task's own result.
  returned: always
  type: list
  elements: dict
waited_seconds:
  description: Seconds from the start until every migration was final (or the timeout).
  returned: always
  type: float
timeout:
  description: The timeout in seconds.
  returned: always
  type: int
deleted_while_waiting:
  description: C(namespace/name) of migrations in scope that were deleted while the module waited.
  returned: always
  type: list
  elements: str
watch:
  description: Requests of the wait (C(lists), C(watches), C(reconnects), C(relists_after_410), C(events)) and the last C(errors).
  returned: always
  type: dict
progress:
  description:
    - What the task printed while it waited (see I(progress_every)), C(lines) in the order they were shown (a line per migration as
      it ended, a status line of those still unfinished), C(elapsed_seconds) of the whole wait, C(done) true.
  returned: when I(progress_every) is more than 0
  type: dict
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_wait import ARG_SPEC, VmMigrationWaitOptions, run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, VmMigrationWaitOptions, run)


if __name__ == "__main__":
    main()
