#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: descheduler_restart
short_description: Make a Descheduler Deployment read its policy again, by replacing its Pods
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - The descheduler reads its policy file once, when its process starts, and runs every cycle of C(--descheduling-interval) with it.
    When it runs as a Deployment (the upstream chart's C(kind=Deployment), ACP's Deployment mode), a change of the policy ConfigMap
    therefore reaches it only when its Pod is replaced.
  - This module deletes the Deployment's Pods that were not created after the policy ConfigMap was last written (the newest time of
    its C(managedFields); a Pod created in the same second counts as older), each with its own grace period and the Pod's UID as
    precondition, so that the ReplicaSet starts new Pods that mount the new policy. It then waits, by list and watch, until the old
    Pods are gone and a new Pod is Ready. A finished Pod (Succeeded or Failed) runs no process and is left alone.
  - The Deployment itself is not written. C(kubectl rollout restart) would edit its Pod template, which ACP records as a ResourcePatch
    on the chart-managed object.
  - A CronJob needs nothing (every run is a new process that reads the policy), nor does a Deployment scaled to 0 (no process runs;
    the Pods of its scale-up read the policy as it is then); the module says so in C(summary) and changes nothing.
  - When every Pod was created after the policy was written, nothing is deleted; the module waits for one of them to be Ready.
  - Fails when the Descheduler is not found, and when the old Pods are not gone or no new Pod is Ready within I(timeout).
options:
  descheduler_namespace:
    description:
      - The namespace of the Descheduler CronJob or Deployment.
    type: str
    default: descheduler
  descheduler_name:
    description:
      - The name of the Descheduler CronJob or Deployment, used when none carries C(app.kubernetes.io/name=descheduler).
    type: str
    default: descheduler
  timeout:
    description:
      - Seconds from the start until the old Pods are gone and a new Pod is Ready (the old Pods take their termination grace period).
    type: int
    default: 300
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
  - kubevirt_ops.rebalance.progress
attributes:
  check_mode:
    support: full
    description: The deletes are sent as server-side dry runs, so RBAC and admission answer but no Pod is deleted, and nothing is
      waited for; C(deleted_pods) names the Pods that would be deleted.
  diff_mode:
    support: none
    description: No object is edited; the Pods deleted are returned in C(deleted_pods).
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.descheduler_policy
  - module: kubevirt_ops.rebalance.descheduler_run
"""

EXAMPLES = r"""
- name: Apply the bounded policy
  kubevirt_ops.rebalance.descheduler_policy:
    thresholds: {cpu: 20, memory: 20, pods: 20}
    target_thresholds: {cpu: 50, memory: 50, pods: 50}
  register: applied

- name: Make a Descheduler Deployment read it (a CronJob needs nothing)
  kubevirt_ops.rebalance.descheduler_restart:
    timeout: 300
  when: applied is changed

- name: Show what would be restarted
  kubevirt_ops.rebalance.descheduler_restart:
  check_mode: true
  register: would

- name: Say it
  ansible.builtin.debug:
    msg: "{{ would.summary }}"
"""

RETURN = r"""
summary:
  description: What was done (or, in check mode, would be done), or why nothing was needed, in one line.
  returned: always
  type: str
  sample: "Deployment descheduler/descheduler: Pod(s) descheduler-7d9f-x2k4q deleted; Pod descheduler-7d9f-m8w2c reads the policy now"
skipped:
  description: True when the installation needs no restart (a CronJob, or a Deployment scaled to 0).
  returned: always
  type: bool
skip_reason:
  description: C(cronjob) or C(scaled_to_zero) when I(skipped), else null.
  returned: always
  type: str
descheduler:
  description: The Descheduler (C(namespace), C(name), C(kind) CronJob or Deployment).
  returned: always
  type: dict
replicas:
  description: The Deployment's C(spec.replicas).
  returned: when a Deployment was restarted or checked
  type: int
policy_configmap:
  description: The ConfigMap the descheduler reads its policy from.
  returned: when a Deployment was restarted or checked
  type: str
policy_written_at:
  description: When that ConfigMap was last written (UTC, from its managedFields); null when the API server keeps no managedFields
    (then every Pod is replaced).
  returned: when a Deployment was restarted or checked
  type: str
deleted_pods:
  description: The Pods deleted (in check mode, that would be deleted) because they started before the policy was written.
  returned: always
  type: list
  elements: str
kept_pods:
  description: The Pods left running because they were created after the policy was written.
  returned: always
  type: list
  elements: str
new_pods:
  description: The Pods of the Deployment at the end that are not among the old ones (those kept, and those the ReplicaSet created).
  returned: always
  type: list
  elements: str
ready_pod:
  description: A Pod created after the policy was written that is Ready; its process runs the policy. Null when skipped or in check mode.
  returned: always
  type: str
dry_run:
  description: True in check mode (the deletes were server-side dry runs).
  returned: check mode
  type: bool
waited_seconds:
  description: Seconds from the start until the old Pods were gone and a new Pod Ready.
  returned: when a Deployment was restarted
  type: float
progress:
  description:
    - What the task printed while it waited (see I(progress_every)), C(lines) in the order they were shown, C(elapsed_seconds)
      of the whole wait, C(done) true.
  returned: when the module waited
  type: dict
watch:
  description: Requests of the wait (C(lists), C(watches), C(reconnects), C(relists_after_410), C(events), C(errors)).
  returned: when the module waited
  type: dict
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_restart import ARG_SPEC, DeschedulerRestartOptions, run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, DeschedulerRestartOptions, run)


if __name__ == "__main__":
    main()
