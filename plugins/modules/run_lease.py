#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: run_lease
short_description: One run at a time per cluster, with the run's progress recorded in the cluster
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - Takes, renews and releases the collection's C(coordination.k8s.io/v1) Lease, so that two runs that change one cluster
    (rebalance, rollback, rehearsal, node and cluster maintenance) never interleave. The playbooks take it before their first
    write and release it at the end; read-only runs (check mode, facts, compatibility checks) do not take it.
  - The Lease is used as client-go's leader election uses one. C(spec.holderIdentity) names the run, and C(spec.renewTime) plus
    C(spec.leaseDurationSeconds) say when it expires unless renewed. Each step of a playbook renews it, and so does the work inside a
    step. The collection's drain, Descheduler run and verification renew it between their progress calls (I(state=renewed)), every
    third of I(duration). A maintenance hook is covered by a timer (I(state=keepalive), run with C(async)). A release clears the
    holder, and C(spec.leaseTransitions) counts the changes of holder.
  - A renewal never takes the lease. When another run holds it (it took it over after this run's lease expired), or the renewals
    failed for two thirds of I(duration) (client-go's renew deadline), the renewal fails naming the holder, and the task stops before
    its next write.
  - The annotation C(kubevirt-ops.io/run) on the Lease is the run's record, as JSON. It holds the playbook, the run id, who
    started it (user, controller host, ansible-playbook pid, AWX job id and host from the job's C(JOB_ID) and C(AWX_HOST)), when,
    the step it is at, what it backed up and its status. The record stays after the release, so the next run knows how the last
    one ended.
  - A run takes the lease when nobody holds it, when the holder's lease expired, or when the holder ran on the same controller
    host and its ansible-playbook process has ended (a killed run). It then says whom it took the lease over from, and why.
    Otherwise it fails at once, naming the holder, when the holder started and when its lease expires.
  - A record still C(in_progress) whose holder is gone is an unfinished run, one that died between two steps. With
    I(unfinished=refuse), the default, a run does not start over it until a rollback takes it over. With I(unfinished=take), as
    the rollback uses, the run takes it over and returns it as C(unfinished_run), with that run's backup. With I(unfinished=resume),
    as the maintenance playbooks use, it takes over only an unfinished run of the same playbook.
  - Check mode sends the write as a server-side dry run. It decides, and refuses, as a real run would.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
options:
  state:
    description:
      - C(present) takes the lease for I(run_id), or renews it when this run holds it already, and moves the record to I(step).
      - C(absent) releases it with I(outcome) as the run's status. A lease held by another run is left alone (no change).
      - C(renewed) renews the lease I(run_id) holds, keeping the record's step unless I(step) is given. It never takes a lease. It fails,
        naming the run that holds it now, when another run holds it, or when it was released or deleted.
      - C(keepalive) renews the lease I(run_id) holds every third of I(duration) for as long as the record stays at I(step). It looks
        at the Lease every 2 seconds (client-go's retry period) and returns when the run moves on to another step (the next
        I(state=present) call) or releases the lease. It also returns when the ansible-playbook process that holds the lease
        (recorded on the same host) has ended, so a killed run's lease still expires. It fails like C(renewed), or when it could not
        renew for two thirds of I(duration). Run it with C(async) and C(poll=0) around a long task, and collect it with
        C(ansible.builtin.async_status) after the step (playbooks/tasks/run_lease_keepalive.yml). In check mode it does nothing.
    type: str
    choices: [present, absent, renewed, keepalive]
    default: present
  lease_namespace:
    description:
      - The namespace of the Lease. It is one Lease per cluster for every playbook of the collection, so it must be the same for all.
    type: str
    default: kube-system
  lease_name:
    description:
      - The name of the Lease.
    type: str
    default: kubevirt-ops-run
  run_id:
    description:
      - The run's id, the same for every call of one run. The playbooks use their run id, the start time.
    type: str
    required: true
  playbook:
    description:
      - The playbook that runs (C(rebalance), C(rollback), C(rehearse), C(maintenance), C(cluster_maintenance)), for the record and
        the messages.
      - Required with I(state=present).
    type: str
  step:
    description:
      - The step the run is at. A run that died after C(start) or C(preflight) changed nothing; any other step may have, so the next
        run treats it as unfinished.
      - When not given, a new run starts at C(start) and a renewal keeps the step the record has.
      - Required with I(state=keepalive), the step it covers.
    type: str
  backup:
    description:
      - What the run saved before it changed something, added to the record's C(backup) (for example C(policy_file), the backup of the
        policy ConfigMap). A rollback after a dead run finds it there.
    type: dict
  duration:
    description:
      - Seconds the lease holds without a renewal, 15 or more. Each step renews it, and long steps renew it every third of it while
        they work. A run killed on another controller holds the cluster until it expires. A killed run on the same controller host
        frees it at once.
      - The playbooks set it from C(run_lease_duration).
    type: int
    default: 1800
  unfinished:
    description:
      - What to do when the last run stopped without finishing. C(refuse) fails before any change, naming the run, its step and its
        backup. C(take) takes it over and returns it in C(unfinished_run) (a rollback). C(resume) takes it over only when it was a run
        of the same I(playbook) (a rerun of a maintenance continues it) and refuses any other.
    type: str
    choices: [refuse, resume, take]
    default: refuse
  outcome:
    description:
      - The run's final status, recorded by I(state=absent).
    type: str
    choices: [complete, failed, rolled_back]
    default: complete
  launched_by:
    description:
      - Who launched the run, for the record, for example AWX's C(awx_user_name). By default, the user the module runs as.
    type: str
notes:
  - RBAC needs get, create and update on C(leases) in API group C(coordination.k8s.io), in I(lease_namespace) (docs/rbac/run_lease.yaml).
  - Liveness of a holder on the same host is read from C(/proc) (Linux). Elsewhere, a killed run's lease is taken over when it expires.
"""

EXAMPLES = r"""
- name: Take the cluster's lease before the first write
  kubevirt_ops.rebalance.run_lease:
    run_id: "{{ rebalance_run_id }}"
    playbook: rebalance
    step: preflight
    launched_by: "{{ awx_user_name | default(omit) }}"

- name: Record the backup with the step
  kubevirt_ops.rebalance.run_lease:
    run_id: "{{ rebalance_run_id }}"
    playbook: rebalance
    step: apply
    backup:
      policy_file: "{{ descheduler_backup_result.configmap_file }}"

- name: A rollback takes over a run that died and reads its backup
  kubevirt_ops.rebalance.run_lease:
    run_id: "{{ rollback_run_id }}"
    playbook: rollback
    unfinished: take
  register: lease

- name: Renew the lease while a long task works (never takes it; fails naming the holder when it is lost)
  kubevirt_ops.rebalance.run_lease:
    state: renewed
    run_id: "{{ rebalance_run_id }}"

- name: Keep the lease alive around a long task, collected with async_status after it
  kubevirt_ops.rebalance.run_lease:
    state: keepalive
    run_id: "{{ run_lease_id }}"
    step: hook worker-1
  async: 86400
  poll: 0
  register: keepalive

- name: Release the lease with the run's outcome
  kubevirt_ops.rebalance.run_lease:
    state: absent
    run_id: "{{ rebalance_run_id }}"
    outcome: complete
"""

RETURN = r"""
action:
  description:
    - C(create) (no Lease yet), C(acquire) (released by the last run), C(renew) (this run holds it), C(take_over) (expired, or its
      process ended), C(release), C(keepalive) (a keepalive that ended), or C(none) (a release of a lease this run does not hold).
  returned: always
  type: str
  sample: take_over
lease:
  description: C(namespace), C(name), C(holder) (C(spec.holderIdentity)), C(expires), C(transitions) and C(duration)
    (C(spec.leaseDurationSeconds)) after the call.
  returned: always
  type: dict
record:
  description: The run's record as written (C(run_id), C(playbook), C(holder), C(started), C(updated), C(step), C(status), C(backup),
    C(took_over), C(unfinished_run)).
  returned: when state is present, absent or renewed
  type: dict
renewals:
  description: How many times the keepalive renewed the lease.
  returned: when state is keepalive
  type: int
stopped:
  description: Why the keepalive ended (the run moved on to another step, released the lease, or its process ended).
  returned: when state is keepalive, out of check mode
  type: str
seconds:
  description: How long the keepalive ran.
  returned: when state is keepalive, out of check mode
  type: float
failures:
  description: The last renewals that failed and were retried (at most five).
  returned: when state is keepalive, out of check mode
  type: list
  elements: str
took_over:
  description: Whom the lease was taken over from (C(run_id), C(playbook), C(step), C(holder)) and C(why); null otherwise.
  returned: when state is present
  type: dict
unfinished_run:
  description: The record of the run that stopped without finishing, taken over with I(unfinished=take), with its C(backup); null
    otherwise.
  returned: when state is present
  type: dict
previous:
  description: The record the Lease held before this run took it (how the last run ended); null when there was none.
  returned: when state is present
  type: dict
message:
  description: One line saying what was done.
  returned: always
  type: str
dry_run:
  description: The write was a server-side dry run (check mode).
  returned: always
  type: bool
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.run_lease import ARG_SPEC, REQUIRED_IF, RunLeaseOptions, run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, RunLeaseOptions, run, required_if=REQUIRED_IF)


if __name__ == "__main__":
    main()
