#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: descheduler_storm_breaker
short_description: Pause the Descheduler when live migrations fail or one VM migrates too often, and reset it
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - A circuit breaker against migration storms on an unattended cluster. Within I(window) it counts the failed migrations
    (VirtualMachineInstanceMigration phase C(Failed)) and, per VM, the succeeded ones, from one list of the migrations in scope.
  - It trips when I(max_failed_migrations) or more migrations failed, or a VM migrated more than I(max_migrations_per_vm) times.
  - Tripped, it pauses the Descheduler as the rebalance procedure's Stop and Roll Back does, C(spec.suspend=true) on its CronJob or, for
    a Descheduler that runs as a Deployment, C(spec.replicas=0); the same write records what the object was in the annotation
    C(kubevirt-ops.io/storm-breaker) (JSON with the time and the reason), and a Deployment's replicas also in
    C(kubevirt-ops.io/rollback-replicas), which the descheduler_rollback role resumes to. Then it waits, by watching, until the
    migrations in flight are C(Succeeded) or C(Failed) (I(wait_timeout)), and says why in I(message) and I(reasons).
  - A Descheduler already paused with the breaker's record is no change; one paused by someone else is left as it is (reported).
  - C(state=reset) restores what the record says, removes it and notes the time in C(kubevirt-ops.io/storm-breaker-reset), from which
    the window starts from then on (the migrations that tripped the breaker do not trip it again). On ACP the ResourcePatches that
    only hold the pause (C(/spec/suspend), or C(/spec/replicas)) are deleted first, as the rollback's resume does.
  - Check mode sends the writes as server-side dry runs and waits for nothing.
options:
  state:
    description:
      - C(present) counts and trips the breaker when a limit is passed; C(reset) restores what the breaker recorded.
    type: str
    choices: [present, reset]
    default: present
  descheduler_namespace:
    description:
      - The namespace of the Descheduler.
    type: str
    default: descheduler
  descheduler_name:
    description:
      - The name of its CronJob or Deployment (or one labelled C(app.kubernetes.io/name=descheduler)).
    type: str
    default: descheduler
  namespaces:
    description:
      - The namespaces whose migrations count and are waited for; all namespaces when omitted.
    type: list
    elements: str
    aliases: [namespace]
  window:
    description:
      - How far back migrations count, in seconds or as a duration such as C(1h), C(30m) (units d, h, m, s); never further back than
        the last reset.
    type: raw
    default: 1h
  max_failed_migrations:
    description:
      - Trip at this many failed migrations within I(window).
    type: int
    default: 3
  max_migrations_per_vm:
    description:
      - Trip when one VM migrated more than this many times within I(window).
    type: int
    default: 3
  wait:
    description:
      - Once tripped, wait for the migrations in flight to be final.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait for them; at the timeout the module fails naming them, the Descheduler paused.
    type: int
    default: 600
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
attributes:
  check_mode:
    support: full
    description: The pause or the reset goes as a server-side dry run; nothing is waited for.
  diff_mode:
    support: full
    description: The Descheduler's C(suspend) (or C(replicas)) and the breaker's annotations, before and after.
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.vm_migration_cooldown
  - module: kubevirt_ops.rebalance.vm_migration_wait
"""

EXAMPLES = r"""
- name: Pause the Descheduler after 3 failed migrations, or a VM that moved more than 3 times, within an hour
  kubevirt_ops.rebalance.descheduler_storm_breaker:
    window: 1h
  register: breaker

- name: Say why
  ansible.builtin.debug:
    msg: "{{ breaker.message }}"
  when: breaker.tripped

- name: Resume once the cause is fixed
  kubevirt_ops.rebalance.descheduler_storm_breaker:
    state: reset
"""

RETURN = r"""
tripped:
  description: The breaker is open, tripped by this run or earlier (the Descheduler paused with its record).
  returned: always
  type: bool
tripped_now:
  description: This run tripped it (C(state=present)).
  returned: when state is present
  type: bool
message:
  description: Why, in one line (what failed, which VMs moved too often, what was paused); or that it is not tripped.
  returned: always
  type: str
  sample: "Storm breaker tripped: 3 failed migrations within 1h (max_failed_migrations 3): desched-test/m-1, desched-test/m-2,
    desched-test/m-3. CronJob descheduler/descheduler is paused; reset with state=reset (or roll back) once the cause is fixed."
reasons:
  description: The limits passed, one line each.
  returned: when state is present
  type: list
  elements: str
failed_migrations:
  description: The failed migrations within the window (C(namespace), C(name), C(vm), C(phase), C(source), C(target), C(finished),
    C(failure_reason)).
  returned: when state is present
  type: list
  elements: dict
frequent_movers:
  description: The VMs that migrated more than I(max_migrations_per_vm) times (C(namespace), C(vm), C(migrations), C(names)).
  returned: when state is present
  type: list
  elements: dict
in_flight:
  description: The migrations not final when the module read them, as in I(failed_migrations).
  returned: when state is present
  type: list
  elements: dict
unfinished:
  description: The migrations still in flight when the wait ended (empty unless it timed out).
  returned: when state is present
  type: list
  elements: dict
waited_seconds:
  description: How long the module waited for the migrations in flight.
  returned: when state is present
  type: float
descheduler:
  description: C(kind) (CronJob or Deployment), C(namespace), C(name), whether it is C(paused), and C(paused_by_breaker).
  returned: always
  type: dict
record:
  description: The breaker's record on the workload (C(tripped_at), C(kind), C(reason), and C(suspend) or C(replicas) before the
    pause); null without one.
  returned: always
  type: dict
restored:
  description: What the reset wrote back (C(suspend) or C(replicas)).
  returned: when state is reset and the breaker was tripped
  type: dict
reset:
  description: The reset restored a record.
  returned: when state is reset
  type: bool
resource_patches_deleted:
  description: The ACP ResourcePatches that only held the pause, deleted by the reset.
  returned: when state is reset
  type: list
  elements: str
window:
  description: C(seconds) and C(since), the start of the window (the last reset when that is later).
  returned: when state is present
  type: dict
limits:
  description: C(max_failed_migrations) and C(max_migrations_per_vm).
  returned: when state is present
  type: dict
clock:
  description: The time the decisions used (C(now)) and its C(source), as in M(kubevirt_ops.rebalance.vm_migration_cooldown).
  returned: when state is present, or a reset wrote
  type: dict
dry_run:
  description: The writes were server-side dry runs (check mode).
  returned: always
  type: bool
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.descheduler_storm_breaker import (
    ARG_SPEC,
    DeschedulerStormBreakerOptions,
    run,
)
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, DeschedulerStormBreakerOptions, run)


if __name__ == "__main__":
    main()
