# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run's id, made once per playbook run by the lookup `kubevirt_ops.rebalance.run_id`: the UTC start time to the second
(`20261207T152652Z`, as run ids were before, so ids still sort by time as text) and, after a dash, what tells two runs
of the same second apart: the AWX job id (`awx1234`) when AWX launched the run, else six random characters. Backup files,
reports and the cluster's Lease record are named from it, so two runs started in the same second never share them.

An id is also a label and taint value (the rehearsal's namespace, the rolling maintenance's taint): at most 63
characters of `[A-Za-z0-9._-]`, starting and ending with a letter or digit."""

from __future__ import annotations

import datetime
import random
import re
from typing import Any, Optional

TIME_FORMAT = "%Y%m%dT%H%M%SZ"
SUFFIX_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
SUFFIX_LENGTH = 6
# An id this collection makes; ids made before the suffix (the time alone) still match, with `suffix` None.
RUN_ID = re.compile(r"^(?P<time>[0-9]{8}T[0-9]{6}Z)(?:-(?P<suffix>[a-z0-9]{1,40}))?$")


def job_suffix(job_id: Any) -> Optional[str]:
    """`awx<id>` for an AWX job id (an integer or its digits), else None."""
    text = str(job_id).strip() if job_id is not None else ""
    return "awx" + text if text.isdigit() else None


def new_run_id(now: Optional[datetime.datetime] = None, job_id: Any = None, rng: Optional[random.Random] = None) -> str:
    """`<UTC time to the second>-<awx job id or 6 random characters>`; `now` without a zone is taken as UTC."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if now.tzinfo is not None:
        now = now.astimezone(datetime.timezone.utc)
    suffix = job_suffix(job_id)
    if suffix is None:
        chooser = rng or random.SystemRandom()
        suffix = "".join(chooser.choice(SUFFIX_CHARS) for _index in range(SUFFIX_LENGTH))
    return "{0}-{1}".format(now.strftime(TIME_FORMAT), suffix)


def run_time(run_id: str) -> Optional[datetime.datetime]:
    """The UTC start time an id names (also an id of the time alone, as made before the suffix); None for another text."""
    found = RUN_ID.match(run_id or "")
    if not found:
        return None
    return datetime.datetime.strptime(found.group("time"), TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
