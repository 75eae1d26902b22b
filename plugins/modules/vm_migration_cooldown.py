#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vm_migration_cooldown
short_description: Keep VMs that migrated recently, or migrate now, out of the Descheduler's next runs
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - A per-VM cooldown after each live migration, as OpenShift's KubeVirtRelieveAndMigrate profile keeps one, with upstream's own
    mechanism, so that repeated nominations of the same VM (migration storms) stop.
  - Reads the VirtualMachineInstanceMigrations, the VMIs and the virt-launcher Pods in scope in a constant number of list calls
    (one per kind, or per kind and namespace with I(namespaces)).
  - A VM whose last migration succeeded less than its cooldown ago, or that is migrating now (a migration not C(Succeeded) or
    C(Failed)), is marked on the launcher Pod that runs its VMI now with the annotation
    C(descheduler.alpha.kubernetes.io/prefer-no-eviction) and the collection's C(kubevirt-ops.io/cooldown-until) (RFC 3339, UTC).
  - The cooldown is I(cooldown) for one migration that succeeded within I(history_window), doubled for each further one, at most
    I(max_cooldown). C(until) counts from the end of the last migration (from the start of one in flight, which counts as one more),
    so a second run writes the same value and changes nothing.
  - Marks of the collection whose time has passed are lifted (both annotations). A Pod that has C(prefer-no-eviction) without
    C(kubevirt-ops.io/cooldown-until) was marked by someone else and is left alone, and reported in I(not_marked); so is a Pod with
    C(descheduler.alpha.kubernetes.io/evict), which DefaultEvictor lets through before any no-eviction check.
  - The Descheduler honours the marks only where the profile's DefaultEvictor has C(noEvictionPolicy) C(Mandatory); with
    C(Preferred), the default, DefaultEvictor ignores the annotation (descheduler v0.36 C(defaultevictor.go)). With I(check_policy)
    the live policy is read and a profile that evicts without it is reported in I(findings) (code C(cooldown_not_enforced)).
  - The clock is the one of the host that runs the module, unless an object read carries a later timestamp (that host's clock is
    behind the cluster's), then the newest such timestamp; I(clock) in the result says which.
  - C(state=absent) lifts every mark of the collection in scope (the rollback does it for the whole cluster).
  - Check mode sends the same patches as server-side dry runs (admission and RBAC answer, nothing is stored) and reports them.
options:
  state:
    description:
      - C(present) marks the VMs in their cooldown and lifts the marks that are due; C(absent) lifts every mark of the collection.
    type: str
    choices: [present, absent]
    default: present
  namespaces:
    description:
      - The namespaces of the VMs; all namespaces when omitted.
    type: list
    elements: str
    aliases: [namespace]
  label_selector:
    description:
      - Only the VMs whose VMI labels match this label selector (KubeVirt copies them to the launcher Pods), for example C(app=desched-test).
    type: str
    aliases: [vm_selector]
  cooldown:
    description:
      - The cooldown after one migration, in seconds or as a duration such as C(15m), C(90s), C(1h30m) (units d, h, m, s).
    type: raw
    default: 15m
  max_cooldown:
    description:
      - The longest cooldown, however many migrations the VM had in the window; at least I(cooldown).
    type: raw
    default: 6h
  history_window:
    description:
      - How far back the succeeded migrations of a VM count, as I(cooldown).
    type: raw
    default: 6h
  check_policy:
    description:
      - Read the live Descheduler policy and report, in I(findings), a profile that evicts without DefaultEvictor C(noEvictionPolicy)
        C(Mandatory) (the marks would not hold). Only with C(state=present).
    type: bool
    default: true
  descheduler_namespace:
    description:
      - The namespace of the Descheduler whose policy is checked.
    type: str
    default: descheduler
  descheduler_name:
    description:
      - The name of the Descheduler CronJob or Deployment (or one labelled C(app.kubernetes.io/name=descheduler)).
    type: str
    default: descheduler
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
attributes:
  check_mode:
    support: full
    description: The patches go as server-side dry runs; the result says what would be marked and lifted.
  diff_mode:
    support: full
    description: The annotations of each launcher Pod written, before and after.
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.descheduler_storm_breaker
  - module: kubevirt_ops.rebalance.descheduler_policy
"""

EXAMPLES = r"""
- name: Keep recently migrated VMs out of the next Descheduler runs (15 min, doubling, at most 6 h)
  kubevirt_ops.rebalance.vm_migration_cooldown:
    namespaces: [desched-test]
    label_selector: app=desched-test
  register: cooldown

- name: A short cooldown for a test cluster
  kubevirt_ops.rebalance.vm_migration_cooldown:
    cooldown: 30s
    max_cooldown: 5m
    history_window: 30m

- name: Lift every cooldown mark of the collection
  kubevirt_ops.rebalance.vm_migration_cooldown:
    state: absent
"""

RETURN = r"""
marked:
  description: The VMs marked (or whose mark got a new time) by this run, as in I(vms).
  returned: always
  type: list
  elements: dict
  sample: [{"namespace": "desched-test", "vm": "vm-1", "pod": "virt-launcher-vm-1-x7k2p", "node": "worker-b",
            "last_migration": "2026-11-30T10:00:11Z", "migrations_in_window": 2, "migrating": false, "cooldown_seconds": 1800,
            "until": "2026-11-30T10:30:11Z"}]
kept:
  description: The VMs whose mark was already right.
  returned: always
  type: list
  elements: dict
lifted:
  description: The marks lifted, as in I(vms) (a Pod whose VM is out of its cooldown, or every mark with C(state=absent)).
  returned: always
  type: list
  elements: dict
not_marked:
  description:
    - VMs in their cooldown that were not marked, each with its C(reason) (no live launcher, a prefer-no-eviction set by someone
      else, an evict annotation, a Pod gone since it was listed).
    - Not called C(skipped), which Ansible reserves for the task's own result.
  returned: always
  type: list
  elements: dict
vms:
  description: Every VM in scope in its cooldown or with migrations in the window.
  returned: always
  type: list
  elements: dict
  contains:
    namespace:
      description: The VM's namespace.
      type: str
    vm:
      description: The VMI's name.
      type: str
    pod:
      description: The launcher Pod that runs the VMI now.
      type: str
    node:
      description: The launcher's node.
      type: str
    last_migration:
      description: When its last migration in the window succeeded.
      type: str
    migrations_in_window:
      description: Its migrations that succeeded within I(history_window).
      type: int
    migrating:
      description: A migration of it is not final yet.
      type: bool
    cooldown_seconds:
      description: Its cooldown (0 without a migration).
      type: int
    until:
      description: The end of its cooldown, RFC 3339 UTC.
      type: str
findings:
  description:
    - What keeps the marks from holding, each with C(code), C(severity), C(kind), C(namespace), C(name) and C(message).
    - C(cooldown_not_enforced) (warning) a profile that evicts has no DefaultEvictor C(noEvictionPolicy) C(Mandatory);
      C(cooldown_policy_unknown) (info) the policy could not be read.
  returned: always
  type: list
  elements: dict
clock:
  description: The time the decisions used (C(now)), its C(source) (C(local_clock) or C(newest_timestamp)), the C(local) clock, the
    C(newest_seen) timestamp of the objects read and how far the local clock was C(behind_seconds).
  returned: always
  type: dict
settings:
  description: C(cooldown_seconds), C(max_cooldown_seconds), C(history_window_seconds).
  returned: always
  type: dict
state:
  description: The state asked for.
  returned: always
  type: str
dry_run:
  description: The writes were server-side dry runs (check mode).
  returned: always
  type: bool
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.vm_migration_cooldown import ARG_SPEC, VmMigrationCooldownOptions, run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, VmMigrationCooldownOptions, run)


if __name__ == "__main__":
    main()
