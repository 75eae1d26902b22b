"""plugin_utils/progress_action.call_until_done: the action plugin's loop over a module that reports progress."""
from __future__ import annotations

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.progress_action import call_until_done


def scripted(*results):
    """A module that answers `results` in turn and records the arguments of each call."""
    calls = []

    def call(args):
        calls.append(args)
        return dict(results[len(calls) - 1])
    return call, calls


def test_calls_again_with_the_state_and_shows_every_line_in_order():
    call, calls = scripted(
        {"changed": True, "progress": {"done": False, "lines": ["vm-1 migrated"], "resume": {"state": 1}}},
        {"changed": True, "progress": {"done": False, "lines": ["awaiting vm-2"], "resume": {"state": 2}}},
        {"changed": True, "moved": ["vm-1", "vm-2"], "progress": {"done": True, "lines": ["vm-2 migrated"], "elapsed_seconds": 40}})
    shown = []
    result = call_until_done(call, {"node": "worker-1"}, shown.append)
    assert shown == ["vm-1 migrated", "awaiting vm-2", "vm-2 migrated"]
    assert calls == [{"node": "worker-1"}, {"node": "worker-1", "resume": {"state": 1}}, {"node": "worker-1", "resume": {"state": 2}}]
    assert result["moved"] == ["vm-1", "vm-2"]
    assert result["progress"] == {"done": True, "lines": shown, "elapsed_seconds": 40}


def test_a_failed_call_ends_the_loop_with_its_result():
    call, calls = scripted({"progress": {"done": False, "lines": ["vm-1 migrated"], "resume": {}}},
                           {"failed": True, "msg": "API down"})
    shown = []
    result = call_until_done(call, {}, shown.append)
    assert len(calls) == 2 and result["failed"] and result["msg"] == "API down" and shown == ["vm-1 migrated"]


def test_a_module_without_progress_is_called_once():
    call, calls = scripted({"changed": False, "node": "worker-1"})
    assert call_until_done(call, {"node": "worker-1"}, lambda line: None) == {"changed": False, "node": "worker-1"}
    assert len(calls) == 1


def test_the_state_between_calls_stays_out_of_the_result():
    call, _calls = scripted({"progress": {"done": True, "lines": [], "resume": {"big": "state"}}})
    assert "resume" not in call_until_done(call, {}, lambda line: None)["progress"]
