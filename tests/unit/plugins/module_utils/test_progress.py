"""module_utils/progress: one call's share of a wait, its deadline across calls, and the status line's timing."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.progress import Progress, named, seconds


class Clocks:
    """A monotonic and a wall clock that move together."""

    def __init__(self, wall: float = 1000.0) -> None:
        self.mono, self.now = 50.0, wall

    def advance(self, by: float) -> None:
        self.mono += by
        self.now += by

    def progress(self, every: int, resume=None) -> Progress:
        return Progress(every, resume, clock=lambda: self.mono, wall=lambda: self.now)


def test_the_first_call_ends_when_the_status_line_is_due_and_carries_the_deadline():
    clocks = Clocks()
    first = clocks.progress(25)
    assert first.call_deadline(600) == pytest.approx(clocks.mono + 25)
    assert not first.call_over()
    clocks.advance(25)
    assert first.call_over()
    out = first.unfinished("awaiting vm-1", {"k": 1})
    assert out["done"] is False and out["lines"] == ["awaiting vm-1"]
    assert out["resume"] == {"started_at": 1000.0, "status_due_at": 1050.0, "state": {"k": 1}}

    clocks.advance(2)  # the controller prints and calls again
    second = clocks.progress(25, out["resume"])
    assert second.resumed and second.state == {"k": 1}
    assert second.elapsed() == pytest.approx(27)
    # the whole wait's deadline is the first call's: 600 s from its start
    assert second.deadline(600) == pytest.approx(clocks.mono - 27 + 600)
    assert second.call_deadline(600) == pytest.approx(clocks.mono + 23)


def test_a_finished_item_ends_the_call_soon_and_the_status_line_waits_until_due():
    clocks = Clocks()
    progress = clocks.progress(25)
    clocks.advance(0.5)
    progress.finished("vm-1 migrated")
    assert not progress.call_over()  # finishes close together share one call
    clocks.advance(1.5)
    assert progress.call_over()
    clocks.advance(3)
    out = progress.unfinished("awaiting vm-2", {})
    assert out["lines"] == ["vm-1 migrated"]  # no status line 5 s in: it is due at 25 s
    assert out["resume"]["status_due_at"] == 1025.0


def test_the_call_never_outlives_the_whole_deadline():
    clocks = Clocks()
    progress = clocks.progress(25, {"started_at": 1000.0 - 590, "status_due_at": 1020.0, "state": {}})
    assert progress.call_deadline(600) == pytest.approx(clocks.mono + 10)
    clocks.advance(10)
    assert progress.out_of_time(600)


def test_every_zero_waits_in_one_call():
    clocks = Clocks()
    progress = clocks.progress(0)
    assert progress.call_deadline(600) == pytest.approx(clocks.mono + 600)
    clocks.advance(599)
    progress.finished("vm-1 migrated")
    assert not progress.call_over()
    assert progress.done() == {"done": True, "lines": ["vm-1 migrated"], "elapsed_seconds": 599.0}


def test_bad_values_name_the_option():
    with pytest.raises(InvalidOption) as error:
        Progress(-1, None)
    assert error.value.as_dict()["path"] == "progress_every"
    progress = Progress(25, {"state": {"x": 1}})
    with pytest.raises(InvalidOption) as error:
        progress.require_state("x")  # no started_at: not what the module returned
    assert error.value.as_dict()["path"] == "resume"
    Progress(25, None).require_state("anything")  # a first call has no state to check


def test_status_words():
    assert named(["a", "b"]) == "a, b"
    assert named([str(i) for i in range(8)], limit=3) == "0, 1, 2 and 5 more"
    assert seconds(None) == "? s" and seconds(0.44) == "0.4 s" and seconds(12.6) == "13 s"
