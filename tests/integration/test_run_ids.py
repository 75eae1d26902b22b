"""Honest run ids (issue 28): two runs started in the same second get different ids
(lookup kubevirt_ops.rebalance.run_id), and therefore different backup files and different backups in the cluster, where
the same second used to give the same names and the second run kept the first run's backup as its own."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from .ansible_run import run_tasks

pytestmark = pytest.mark.simulator

RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[a-z0-9]+$")


def test_two_runs_started_in_the_same_second_get_different_ids_and_different_backups(fresh_kubesim, tmp_path):
    sim = fresh_kubesim("rebalance-two-workers")
    ids = {"name": "Make two run ids at once, as two runs started in the same second do",
           "ansible.builtin.set_fact": {"run_ids": "{{ [lookup('kubevirt_ops.rebalance.run_id'), lookup('kubevirt_ops.rebalance.run_id')] }}"}}
    backups = [{"name": "Back up as run {0}".format(index), "ansible.builtin.include_role": {"name": "kubevirt_ops.rebalance.descheduler_backup"},
                "vars": {"descheduler_backup_run_id": "{{{{ run_ids[{0}] }}}}".format(index)}} for index in (0, 1)]
    run = run_tasks(sim, [ids] + backups, extra_vars={"descheduler_backup_dir": str(tmp_path / "backups"),
                                                      "descheduler_backup_cluster_name": "workload-1"})
    first_id, second_id = run.fact("run_ids")
    assert RUN_ID.match(first_id) and RUN_ID.match(second_id) and first_id != second_id
    first, second = [r["ansible_facts"]["descheduler_backup_result"] for r in run.results("Record the backup")]
    assert (first["run_id"], second["run_id"]) == (first_id, second_id)
    assert first["written"] and second["written"] and second["kept_earlier"] == []   # the second did not take the first's files
    names = {Path(first["path"]).name, Path(first["workload_path"]).name, Path(second["path"]).name, Path(second["workload_path"]).name}
    assert len(names) == 4 and sorted(p.name for p in (tmp_path / "backups" / "workload-1").iterdir()) == sorted(names)
    # the copy in the cluster is named from the run id too
    assert first["cluster_object"] and second["cluster_object"] and first["cluster_object"] != second["cluster_object"]
