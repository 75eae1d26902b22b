#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: descheduler_run
short_description: Observe one Descheduler run (waiting for it or starting it) and parse its log
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - Observes one run of the Descheduler of the ACP plugin package and returns what its log says, as the Validate Rebalancing
    section of the Descheduler VM rebalance procedure reads it (node classification, removable Pods, evictions requested in the
    background, totals, why it stopped).
  - With I(trigger=wait) the run is the next Job the CronJob schedules after the module started (a Job already running at the start
    does not count); when the Descheduler runs as a Deployment, the next complete descheduling cycle that starts after the module
    started, in its Pod's log.
  - With I(trigger=create) the module creates a Job from the CronJob's jobTemplate as C(kubectl create job --from=cronjob/<name>) does
    (annotation C(cronjob.kubernetes.io/instantiate=manual), the jobTemplate's labels and annotations, a controller ownerReference to the
    CronJob), named I(job_name) or C(<cronjob>-manual-<5 characters>). A Job can only be created from a CronJob, so I(trigger=create)
    is refused for a Deployment.
  - With I(trigger=auto) it creates a Job when the CronJob is suspended or its schedule has no run within I(timeout) seconds, and waits
    for the next scheduled run otherwise (also when it cannot read the schedule); a Deployment is always waited for.
  - Jobs and Pods are waited for by list and watch, not by polling. The log of the Job's Pod is read when the Pod has finished. A Job Pod
    that ends C(Failed) decides the run (the descheduler exits 1 on a policy it rejects and every retry reads the same policy); the
    module then fails with the error lines of the log. A Deployment's log has no watch, so in that one case the log is read every 2
    seconds.
  - Fails when the Descheduler is not found, at once when I(trigger=wait) and the CronJob is suspended (use I(trigger=create) or
    resume it), when the run fails, and when I(timeout) passes first.
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
  trigger:
    description:
      - C(wait) observes the next scheduled run, C(create) starts one now, C(auto) chooses as described above.
    type: str
    choices: [auto, create, wait]
    default: auto
  job_name:
    description:
      - The name of the Job to create (I(trigger=create) or C(auto)); default C(<cronjob>-manual-<5 characters>).
    type: str
  timeout:
    description:
      - Seconds from the start until the run's log is read; also the horizon of I(trigger=auto).
    type: int
    default: 600
  previous_run:
    description:
      - The result of an earlier run of this module (or its C(classification) list). Nodes classified C(overutilized) in one run and
        C(underutilized) in the other are returned in C(category_swaps).
    type: raw
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
  - kubevirt_ops.rebalance.progress
attributes:
  check_mode:
    support: full
    description: With I(trigger=create) the Job is sent with server-side dry run, so the API server validates and admits it but
      stores nothing, and nothing is waited for; the Job as the server would create it is returned in C(would_create). Waiting for a
      scheduled run changes nothing, so it is observed in check mode too.
  diff_mode:
    support: none
    description: The only change is a new Job, returned in C(job).
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.vm_migration_verify
  - module: kubevirt_ops.rebalance.descheduler_policy
"""

EXAMPLES = r"""
- name: Wait for the next scheduled Descheduler run and read its log
  kubevirt_ops.rebalance.descheduler_run:
    trigger: wait
    timeout: 300
  register: first_run

- name: Run the Descheduler now, as an administrator would with kubectl create job --from=cronjob/descheduler
  kubevirt_ops.rebalance.descheduler_run:
    trigger: create
    previous_run: "{{ first_run }}"
  register: second_run

- name: Stop when nodes keep swapping categories
  ansible.builtin.fail:
    msg: "{{ second_run.category_swaps | map(attribute='advice') | first }}"
  when: second_run.category_swaps | length > 0
"""

RETURN = r"""
progress:
  description:
    - What the task printed while it waited (see I(progress_every)), C(lines) in the order they were shown, C(elapsed_seconds)
      of the whole wait, C(done) true.
  returned: when the module waited
  type: dict
  sample: {"done": true, "elapsed_seconds": 31.4, "lines": ["descheduler: 25 of 600 s; awaiting the next Job of CronJob descheduler/descheduler"]}
trigger:
  description: What was done, C(create) or C(wait).
  returned: always
  type: str
trigger_reason:
  description: Why (the option, a suspended CronJob, the next scheduled run, a Deployment).
  returned: always
  type: str
descheduler:
  description: The Descheduler observed (C(namespace), C(name), C(kind) CronJob or Deployment).
  returned: always
  type: dict
job:
  description: The Job of the run (C(name), C(created), C(manual), C(result) Complete or Failed, C(created_at), C(start_time),
    C(completion_time), C(failed_pods)); null for a Deployment.
  returned: always
  type: dict
pod:
  description: The Pod whose log was read.
  returned: always
  type: str
would_create:
  description: The Job that would be created, as the API server answered its dry run.
  returned: check mode with I(trigger=create)
  type: dict
log_lines:
  description: The klog lines of the run.
  returned: always
  type: list
  elements: str
classification:
  description: One entry per node classified (C(node), C(category) C(underutilized), C(overutilized) or C(appropriately_utilized),
    C(usage_percent)).
  returned: always
  type: list
  elements: dict
  sample: [{"node": "worker-a", "category": "overutilized", "usage_percent": {"cpu": 66, "memory": 72, "pods": 18}}]
pods_on_node:
  description: The C(Pods on node) lines (C(node), C(all), C(non_removable), C(removable)).
  returned: always
  type: list
  elements: dict
background_evictions:
  description: C(Eviction in background assumed) lines (C(pod) as namespace/name, C(namespace), C(name), C(time), C(line)).
  returned: always
  type: list
  elements: dict
already_requested:
  description: C(Eviction in background already requested (ignoring)) lines, shaped like I(background_evictions).
  returned: always
  type: list
  elements: dict
failed_evictions:
  description: C(Error evicting pod) lines (C(pod), C(error), C(limit), C(line)).
  returned: always
  type: list
  elements: dict
evicted:
  description: C(Evicted pod) lines (Pods deleted, not migrated), with C(dry_run).
  returned: always
  type: list
  elements: dict
totals:
  description: The C(Number of evictions/requests) line (C(total_evicted), C(eviction_requests)); null when the run did not get there.
  returned: always
  type: dict
  sample: {"total_evicted": 0, "eviction_requests": 1}
stop_reason:
  description: The early exit of the run, such as C(No node is underutilized, nothing to do here, you might tune your thresholds further).
  returned: always
  type: str
nothing_to_do:
  description: The run ended early with nothing to do (no node underutilized, all nodes underutilized, fewer than two nodes, ...).
  returned: always
  type: bool
errors:
  description: Error lines of the log other than failed evictions (a policy the descheduler rejects, for example).
  returned: always
  type: list
  elements: str
category_swaps:
  description: With I(previous_run), nodes whose category went overutilized <-> underutilized (C(node), C(before), C(after),
    C(usage_before), C(usage_after), C(advice)).
  returned: always
  type: list
  elements: dict
started_at:
  description: When the module started (UTC).
  returned: always
  type: str
finished_at:
  description: When the log was read (UTC).
  returned: always
  type: str
waited_seconds:
  description: Seconds from the start to the log.
  returned: always
  type: float
watch:
  description: Requests of the wait (C(lists), C(watches), C(reconnects), C(relists_after_410), C(events), C(errors)).
  returned: when a Job was waited for
  type: dict
api:
  description: Requests retried after 429, 5xx or connection errors.
  returned: when a run was observed
  type: dict
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_run import ARG_SPEC, DeschedulerRunOptions, run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, DeschedulerRunOptions, run)


if __name__ == "__main__":
    main()
