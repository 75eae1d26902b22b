#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: run_backup
short_description: Keep each run's backup in the cluster, and list the cluster's runs
version_added: 0.1.0
author:
  - kubevirt_ops.rebalance maintainers (@kubevirt-ops)
description:
  - The way back of a run, kept where every controller finds it. An AWX job runs in a fresh execution environment, so a
    backup file under C(backup_dir) is gone when the job ends; the copy in the cluster is not.
  - C(state=present) stores one run's backup files (the policy ConfigMap and the CronJob or Deployment, as the
    kubevirt_ops.rebalance.descheduler_backup role writes them) as one immutable ConfigMap in the Descheduler's namespace,
    named C(kubevirt-ops-backup-<run id>), labelled C(app.kubernetes.io/managed-by=kubevirt_ops.rebalance),
    C(app.kubernetes.io/component=run-backup), C(kubevirt-ops.io/cluster), C(kubevirt-ops.io/run-id) and
    C(kubevirt-ops.io/playbook). Its C(data) holds each file's text under the file's name without the run id, byte for
    byte; the annotation C(kubevirt-ops.io/run) (JSON) is the run's record (who, when, the files, the Secrets referred to).
    A second call for the same run keeps the first object (the state before any change of this run).
  - Then it deletes the backup objects past the newest I(retention) runs, except any that the collection's Lease record
    (M(kubevirt_ops.rebalance.run_lease)) still names, the run's own C(backup.cluster_object) or that of the unfinished
    run it took over.
  - Backups hold no Secret data. A file that holds any (an C(authToken) with more than its C(secretReference), a Secret's
    C(data)) is refused; the C(kubevirt_ops.rebalance.without_secret_data) filter keeps only the reference.
  - C(state=finished) adds the run's I(outcome) to its object's record, and with I(rollback_of) marks the run that a
    rollback undid. Only the metadata of an immutable ConfigMap can change, never the backup.
  - C(state=history) reads only. It lists the cluster's runs newest first (run id, playbook, who, when, outcome, backup
    object) from the backup objects and the Lease record (the last run, also one that made no backup), as C(helm history)
    does. With I(run_id) or I(backup_object) it returns that backup's files in C(backup.contents).
  - Check mode sends the writes as server-side dry runs; C(state=history) is the same in check mode.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubevirt_ops.rebalance.connection
options:
  state:
    description:
      - C(present) stores the run's backup and applies the retention; C(finished) records the run's outcome; C(history) lists the
        runs.
    type: str
    choices: [present, finished, history]
    default: present
  namespace:
    description:
      - The Descheduler's namespace, where the backups are kept (C(kube-system) for the upstream chart).
    type: str
    default: descheduler
  run_id:
    description:
      - The run's id, the one in the backup files' names. Required with I(state=present) and I(state=finished).
      - With I(state=history), the run whose backup to return.
    type: str
  playbook:
    description:
      - The playbook that runs (C(rebalance), C(rehearse), ...), for the label and the record. Required with I(state=present).
    type: str
  cluster_name:
    description:
      - The cluster's name (the inventory host), for the label and the record. Required with I(state=present).
    type: str
  files:
    description:
      - The backup files to store, file name to its text (YAML). A leading C(<run id>_) is dropped from the key.
      - Required with I(state=present).
    type: dict
  retention:
    description:
      - How many runs' backups to keep in the namespace; older ones are deleted unless a Lease record names them.
    type: int
    default: 10
  outcome:
    description:
      - The run's final status, for I(state=finished).
    type: str
    choices: [complete, failed, rolled_back]
  rollback_of:
    description:
      - With I(state=finished), the run a rollback undid; its backup's record gets C(rolled_back_by).
    type: str
  backup_object:
    description:
      - With I(state=history), the backup object (C(<namespace>/<name>) or C(<name>)) whose files to return, as a Lease record
        names it.
    type: str
  lease_namespace:
    description:
      - The namespace of the collection's Lease (M(kubevirt_ops.rebalance.run_lease)).
    type: str
    default: kube-system
  lease_name:
    description:
      - The name of the collection's Lease.
    type: str
    default: kubevirt-ops-run
  launched_by:
    description:
      - Who launched the run, for the record (AWX's C(awx_user_name)); by default, the user the module runs as.
    type: str
attributes:
  check_mode:
    support: full
    description: The create, the deletions and the record's patches go as server-side dry runs; C(state=history) only reads.
  diff_mode:
    support: none
    description: The stored object is named in C(object); the files are the ones given.
notes:
  - RBAC needs get, list, create, patch and delete on C(configmaps) in I(namespace), and get on C(leases) in I(lease_namespace)
    (docs/rbac/run_backup.yaml).
requirements:
  - kubernetes >= 24.2.0
seealso:
  - module: kubevirt_ops.rebalance.run_lease
  - module: kubevirt_ops.rebalance.descheduler_policy
"""

EXAMPLES = r"""
- name: Keep the run's backup in the cluster before the policy changes
  kubevirt_ops.rebalance.run_backup:
    namespace: descheduler
    run_id: "{{ rebalance_run_id }}"
    playbook: rebalance
    cluster_name: "{{ inventory_hostname }}"
    files:
      configmap_descheduler_descheduler.yaml: "{{ configmap | to_nice_yaml(indent=2, sort_keys=False) }}"
    retention: 10

- name: Record how the run ended
  kubevirt_ops.rebalance.run_backup:
    state: finished
    namespace: descheduler
    run_id: "{{ rebalance_run_id }}"
    outcome: complete

- name: List the cluster's runs and read one run's backup
  kubevirt_ops.rebalance.run_backup:
    state: history
    namespace: descheduler
    run_id: 20261207T152652Z
  register: history
"""

RETURN = r"""
object:
  description: The run's backup object, C(<namespace>/<name>).
  returned: when state is present
  type: str
  sample: descheduler/kubevirt-ops-backup-20261207t152652z-1a2b3c4d
name:
  description: The name of the run's backup object.
  returned: when state is present
  type: str
created:
  description: This call stored the object (false when kept from earlier in the run).
  returned: when state is present
  type: bool
kept_earlier:
  description: The object of this run existed already and was kept.
  returned: when state is present
  type: bool
matches:
  description: The object's files equal the ones given (false when kept from earlier and the files differ).
  returned: when state is present
  type: bool
files:
  description: The data keys of the object.
  returned: when state is present
  type: list
  elements: str
pruned:
  description: The backup objects deleted by the retention (names).
  returned: when state is present
  type: list
  elements: str
kept:
  description: The backup objects left in the namespace (names).
  returned: when state is present
  type: list
  elements: str
protected_by_lease:
  description: The backup objects that a Lease record names, kept whatever their age (C(<namespace>/<name>)).
  returned: when state is present
  type: list
  elements: str
marked:
  description: The objects whose record was updated (C(<namespace>/<name>)).
  returned: when state is finished
  type: list
  elements: str
runs:
  description:
    - The runs, newest first, each with C(run_id), C(playbook), C(who), C(started), C(ended), C(outcome) (C(complete), C(failed),
      C(rolled_back), C(in_progress) or C(unknown)), C(backup) (C(<namespace>/<name>) or null), C(files), C(rolled_back_by),
      C(secret_references) and C(step).
  returned: when state is history
  type: list
  elements: dict
lines:
  description: The history as a table, one line per run, newest first.
  returned: when state is history
  type: list
  elements: str
lease_record:
  description: The Lease's run record (the last run), or null.
  returned: when state is history
  type: dict
backup:
  description:
    - The backup asked for with I(run_id) or I(backup_object) (C(name), C(namespace), C(object), C(run_id), C(playbook),
      C(files), C(contents) (data key to the file's text), C(record)); null when there is none.
  returned: when state is history
  type: dict
message:
  description: One line saying what was done.
  returned: always
  type: str
dry_run:
  description: The writes were server-side dry runs (check mode).
  returned: always
  type: bool
"""

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.run_backup import ARG_SPEC, REQUIRED_IF, RunBackupOptions, run
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import run_module


def main() -> None:
    run_module(ARG_SPEC, RunBackupOptions, run, required_if=REQUIRED_IF)


if __name__ == "__main__":
    main()
