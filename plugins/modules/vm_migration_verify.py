#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vm_migration_verify
short_description: Prove that KubeVirt VMs were live-migrated, by the five pass criteria, with evidence
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - In C(record) mode, returns a baseline of the selected VMIs (namespace, name, UID, node and launcher Pod) to keep before a change.
  - In C(verify) mode, waits until each baseline VM is decided by the five pass criteria of the Descheduler VM rebalance procedure, all of
    which must hold, because a Descheduler log line, an Eviction API response, or a changed Pod name alone is not a migration result.
  - The checks are C(node_changed) (the VMI runs on a node other than its baseline node), C(migration_succeeded) (a
    VirtualMachineInstanceMigration reached C(Succeeded) with C(migrationState.sourceNode) = the baseline node and C(targetNode) = the
    VMI's node), C(uid_unchanged) (a restart would change the UID), C(running_ready) (the VM is Running and Ready) and
    C(old_launcher_gone) (the old virt-launcher Pod has terminated); with I(require_trigger) also C(trigger).
  - The trigger is C(descheduler) (an evacuation migration while the VMI carried C(kubevirt.io/eviction-source=descheduler), or after
    completion a C(kubevirt-evacuation-*) migration created within seconds of the C(Eviction in background assumed) line for the VM's
    launcher in the log of a run the Descheduler CronJob keeps (its C(successfulJobsHistoryLimit), at least the last three)),
    C(drain) (an evacuation from a node that was cordoned, as C(kubectl drain) and
    M(kubevirt_ops.rebalance.kubevirt_node_drain) leave it, or that has the taint C(kubevirt.io/drain) or C(node.kubernetes.io/unschedulable)),
    C(manual) (not an evacuation), or C(unknown) (an evacuation with none of that evidence left, for example the Descheduler Job deleted
    by its history limit and the node not cordoned), never taken for a drain; C(trigger_reason) says what the trigger rests on.
  - Waits by watching VMIs, migrations, launcher Pods and VMs (list once, then watch from the resourceVersion, reconnecting on errors and
    relisting on 410 Gone), not by polling; returns as soon as every VM is decided. A migration that ends C(Failed) fails its VM at once
    with the failure reason; at the timeout, each VM in flight is reported with the checks that were still open.
  - Changes nothing in the cluster; check mode does the same.
options:
  mode:
    description:
      - C(record) returns I(baseline); C(verify) waits for and checks the migrations of the baseline VMs.
    type: str
    choices: [record, verify]
    default: verify
  names:
    description:
      - The VMIs, as C(name) (with I(namespace)) or C(namespace/name).
      - In C(verify) mode every name must be in I(baseline); without names, the baseline VMs in I(namespace) (all when omitted) are verified.
    type: list
    elements: str
  namespace:
    description:
      - The namespace of the VMs.
    type: str
  label_selector:
    description:
      - Only VMIs whose labels match this label selector, for example C(app=desched-test); used with I(namespace).
    type: str
  baseline:
    description:
      - Required in C(verify) mode. The I(baseline) returned by C(record) mode, or the result of
        M(kubevirt_ops.rebalance.kubevirt_eviction_facts) (its C(vmis) list is read), or a list of entries with C(namespace), C(name),
        C(uid), C(node) and optionally C(launcher).
    type: raw
  timeout:
    description:
      - Seconds to wait for the outcome in C(verify) mode.
    type: int
    default: 600
  require_trigger:
    description:
      - C(descheduler) or C(drain) adds the C(trigger) check; C(any) accepts any migration.
    type: str
    choices: [descheduler, drain, any]
    default: any
  min_moved:
    description:
      - How many of the selected VMs must pass (the bounded policy of the rebalance procedure moves one VM per cycle). VMs that never started moving are
        C(not_moved), which fails only when fewer than I(min_moved) VMs passed. Capped at the number of selected VMs.
    type: int
    default: 1
  evidence_path:
    description:
      - Write the result as JSON to this path (C(.json) is added when it has no extension) and a Markdown summary table next to it (C(.md)).
    type: path
  descheduler_namespace:
    description:
      - The namespace of the Descheduler CronJob (or Deployment) whose Job Pods' logs are read to classify the trigger.
    type: str
    default: descheduler
  descheduler_name:
    description:
      - The name of the Descheduler CronJob or Deployment, used when none carries C(app.kubernetes.io/name=descheduler).
    type: str
    default: descheduler
  run_log_lines:
    description:
      - Lines of the Descheduler's log the caller read already (C(log_lines) of M(kubevirt_ops.rebalance.descheduler_run)),
        evidence of the trigger that stays when the run's Job and Pods are gone before the migrations are verified (a
        CronJob keeps only its last Jobs; a watch cut by an API outage misses the eviction's annotation).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
  - kubevirt_ops.rebalance.progress
attributes:
  check_mode:
    support: full
    description: Reads only; the same result is returned in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.kubevirt_eviction_facts
  - module: kubevirt_ops.rebalance.descheduler_policy
"""

EXAMPLES = r"""
- name: Record where the test VMs run before changing the policy
  kubevirt_ops.rebalance.vm_migration_verify:
    mode: record
    namespace: desched-test
    label_selector: app=desched-test
  register: before

- name: Wait for one VM to be moved by the Descheduler, and keep the evidence
  kubevirt_ops.rebalance.vm_migration_verify:
    namespace: desched-test
    label_selector: app=desched-test
    baseline: "{{ before.baseline }}"
    timeout: 600
    require_trigger: descheduler
    min_moved: 1
    evidence_path: "{{ playbook_dir }}/evidence/vm-rebalance.json"
  register: verified
  failed_when: not verified.passed

- name: Verify from the facts read before a drain
  kubevirt_ops.rebalance.vm_migration_verify:
    names: [maintenance/vm-live]
    baseline: "{{ facts }}"
    require_trigger: drain
  register: drained
  failed_when: drained.counts.failed > 0
"""

RETURN = r"""
progress:
  description:
    - What the task printed while it waited (see I(progress_every)), C(lines) in the order they were shown, C(elapsed_seconds)
      of the whole wait, C(done) true.
  returned: when the module waited
  type: dict
  sample: {"done": true, "elapsed_seconds": 31.4, "lines": ["desched-test/vm-1 passed: worker-a -> worker-b in 8 s (1 of 2 decided)"]}
mode:
  description: The mode that ran.
  returned: always
  type: str
baseline:
  description: The selected VMIs by name (C(namespace/name) when names repeat across namespaces).
  returned: mode=record
  type: dict
  sample: {"vm-1": {"namespace": "desched-test", "name": "vm-1", "uid": "8f0c...", "node": "worker-a", "launcher": "virt-launcher-vm-1-x7k2p"}}
recorded_at:
  description: When the baseline was read (UTC).
  returned: mode=record
  type: str
missing:
  description: Names given that match no VMI.
  returned: mode=record
  type: list
  elements: str
passed:
  description: Every selected VM passed or was not moved, no check failed, and at least I(min_moved) VMs passed.
  returned: mode=verify
  type: bool
failed_vms:
  description: C(namespace/name) of the VMs that failed, timed out, or were not moved when fewer than I(min_moved) passed.
  returned: mode=verify
  type: list
  elements: str
counts:
  description: Counts for C(failed_when).
  returned: mode=verify
  type: dict
  sample: {"vms": 2, "moved": 1, "min_moved": 1, "failed": 0, "pass": 1, "fail": 0, "timeout": 0, "not_moved": 1}
timed_out:
  description: The timeout passed before every VM was decided.
  returned: mode=verify
  type: bool
timeout:
  description: The timeout in seconds.
  returned: mode=verify
  type: int
require_trigger:
  description: The trigger required.
  returned: mode=verify
  type: str
waited_seconds:
  description: Seconds from the start until the outcome was decided (or the timeout).
  returned: mode=verify
  type: float
verified_at:
  description: When the verification ended (UTC).
  returned: mode=verify
  type: str
vms:
  description: One entry per selected VM.
  returned: mode=verify
  type: list
  elements: dict
  contains:
    namespace:
      description: VMI namespace.
      type: str
    name:
      description: VMI name.
      type: str
    verdict:
      description: C(pass), C(fail), C(timeout) (in flight at the deadline) or C(not_moved) (never started moving).
      type: str
    reason:
      description: Why it failed, timed out or was not moved (the failed or open checks); null on pass.
      type: str
    checks:
      description: Each check (C(node_changed), C(migration_succeeded), C(uid_unchanged), C(running_ready), C(old_launcher_gone), and
        C(trigger) with I(require_trigger)) as C(result) (C(pass), C(fail), C(open)) and C(reason).
      type: dict
    open_checks:
      description: The checks still open.
      type: list
      elements: str
    failed_checks:
      description: The checks that failed.
      type: list
      elements: str
    moving:
      description: Something started for this VM (a migration, another node or UID, a stopped VMI).
      type: bool
    source_node:
      description: The baseline node.
      type: str
    node:
      description: Where the VMI runs now.
      type: str
    uid_before:
      description: The baseline UID.
      type: str
    uid_after:
      description: The UID now.
      type: str
    migration:
      description: The deciding VirtualMachineInstanceMigration (one that succeeded from the baseline node to the VMI's node, else the
        newest) with C(name), C(phase), C(source_node), C(target_node), C(evacuation), C(created), C(phase_timestamps), C(start), C(end),
        C(duration_seconds) and C(failure_reason); null without one.
      type: dict
    migrations:
      description: Names of every migration of the VMI, oldest first.
      type: list
      elements: str
    trigger:
      description: C(descheduler), C(drain), C(manual), C(unknown) (an evacuation without evidence of who asked for it), or null
        without a migration.
      type: str
    trigger_reason:
      description: The evidence the trigger rests on; for C(unknown), what was looked for and not found. Null without a migration.
      type: str
    descheduler_log:
      description: The C(Eviction in background assumed) lines of the Descheduler log for this VM's launcher, near the migration's creation.
      type: list
      elements: str
descheduler_log:
  description: Where the Descheduler log was read (C(namespace), C(pods)), how often (C(reads)) and the last C(error).
  returned: mode=verify
  type: dict
drain_evidence:
  description: The evacuated nodes seen cordoned or with a drain taint (C(nodes), node name to what was seen), read only for evacuations
    that no evidence ties to the Descheduler, and the nodes that could not be read (C(errors)).
  returned: mode=verify
  type: dict
watch:
  description: Requests of the wait (C(lists), C(watches), C(reconnects), C(relists_after_410), C(events)) and the last C(errors).
  returned: mode=verify
  type: dict
evidence:
  description: The paths written (C(json), C(markdown)).
  returned: when I(evidence_path) is set
  type: dict
api:
  description: Requests retried after 429, 5xx or connection errors (C(retries), C(retried)).
  returned: mode=verify
  type: dict
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_verify import (
    ARG_SPEC,
    SPEC_CHECKS,
    VmMigrationVerifyOptions,
    run,
)


def main() -> None:
    run_module(ARG_SPEC, VmMigrationVerifyOptions, run, **SPEC_CHECKS)


if __name__ == "__main__":
    main()
