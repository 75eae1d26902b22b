"""plugin_utils/run_id.py and the lookup kubevirt_ops.rebalance.run_id: ids unique per run, sortable by time."""
from __future__ import annotations

import datetime
import random
import re

from ansible_collections.kubevirt_ops.rebalance.plugins.lookup.run_id import LookupModule
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.run_id import RUN_ID, new_run_id, run_time

SECOND = datetime.datetime(2026, 12, 7, 15, 26, 52, 123456, tzinfo=datetime.timezone.utc)
# a label value (the rehearsal namespace's label, the maintenance taint's value)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def test_two_runs_started_in_the_same_second_get_different_ids():
    ids = {new_run_id(SECOND) for _attempt in range(200)}
    assert len(ids) == 200
    assert all(i.startswith("20261207T152652Z-") for i in ids)


def test_the_awx_job_id_is_the_suffix_when_awx_launched_the_run():
    assert new_run_id(SECOND, job_id=1234) == "20261207T152652Z-awx1234"
    assert new_run_id(SECOND, job_id="77") == "20261207T152652Z-awx77"
    # not a job id: random, as without one
    assert re.match(r"^20261207T152652Z-[a-z0-9]{6}$", new_run_id(SECOND, job_id="{{ x }}"))


def test_ids_sort_by_start_time_as_text():
    rng = random.Random(1)
    times = [SECOND + datetime.timedelta(seconds=s) for s in (0, 1, 59, 3600, 86400 * 40)]
    ids = [new_run_id(t, rng=rng) for t in times]
    assert sorted(ids) == ids
    # and after an id of the time alone (made before the suffix) of an earlier second
    assert sorted(["20261207T152651Z", ids[0]]) == ["20261207T152651Z", ids[0]]


def test_the_id_is_a_valid_label_value_and_reads_back_as_its_time():
    for job in (None, 1, 10 ** 12):
        run_id = new_run_id(SECOND, job_id=job)
        assert LABEL_VALUE.match(run_id) and len(run_id) <= 63
        assert RUN_ID.match(run_id)
        assert run_time(run_id) == SECOND.replace(microsecond=0)
    assert run_time("20261207T152652Z") == SECOND.replace(microsecond=0)   # an id made before the suffix
    assert run_time("not-an-id") is None


def test_a_time_in_another_zone_is_written_in_utc():
    cet = datetime.timezone(datetime.timedelta(hours=1))
    assert new_run_id(datetime.datetime(2026, 12, 7, 16, 26, 52, tzinfo=cet), job_id=1) == "20261207T152652Z-awx1"


def test_the_lookup_reads_the_awx_job_id_from_the_play_and_else_is_random():
    lookup = LookupModule()
    assert re.match(r"^[0-9]{8}T[0-9]{6}Z-awx42$", lookup.run([], variables={"awx_job_id": 42})[0])
    assert re.match(r"^[0-9]{8}T[0-9]{6}Z-awx43$", lookup.run([], variables={"tower_job_id": "43"})[0])
    assert lookup.run([], variables={"awx_job_id": 42}, job_id="7")[0].endswith("-awx7")
    first, second = lookup.run([], variables={})[0], lookup.run([], variables={})[0]
    assert first != second and RUN_ID.match(first) and RUN_ID.match(second)
