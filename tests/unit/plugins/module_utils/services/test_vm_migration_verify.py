"""Options of vm_migration_verify and the evidence files (the waiting itself runs against the simulator)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import vm_migration_verify as vf
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption


def test_names_take_the_namespace_option_or_their_own():
    options = vf.validate({"names": ["vm-1", "other/vm-2"], "namespace": "desched-test"})
    assert options["names"] == [("desched-test", "vm-1"), ("other", "vm-2")]


@pytest.mark.parametrize("params, path", [
    ({"names": ["vm-1"]}, "names[0]"),
    ({"namespace": "Bad_NS"}, "namespace"),
    ({"label_selector": "app in (a"}, "label_selector"),
    ({"timeout": 0}, "timeout"),
    ({"min_moved": -1}, "min_moved"),
])
def test_bad_options_name_the_option(params, path):
    with pytest.raises(InvalidOption) as error:
        vf.validate(params)
    assert error.value.path == path


def test_verify_needs_a_baseline():
    with pytest.raises(InvalidOption) as error:
        vf.verify({"baseline": None})
    assert error.value.path == "baseline"


def output(verdict="pass", reason=None):
    vm = {"namespace": "desched-test", "name": "vm-1", "verdict": verdict, "reason": reason, "source_node": "worker-a",
          "node": "worker-b", "trigger": "descheduler", "checks": {"uid_unchanged": {"result": "pass", "reason": ""}},
          "migration": {"name": "kubevirt-evacuation-abcde", "phase": "Succeeded", "duration_seconds": 10.0}}
    return {"passed": verdict == "pass", "verified_at": "2026-11-30T22:12:00Z", "waited_seconds": 12.5, "timeout": 600,
            "require_trigger": "descheduler", "counts": {"moved": 1, "vms": 1, "min_moved": 1}, "vms": [vm]}


def test_evidence_json_and_markdown(tmp_path):
    paths = vf.write_evidence(str(tmp_path / "out" / "evidence"), output())
    assert paths == {"json": str(tmp_path / "out" / "evidence.json"), "markdown": str(tmp_path / "out" / "evidence.md")}
    assert json.loads((tmp_path / "out" / "evidence.json").read_text())["passed"] is True
    table = (tmp_path / "out" / "evidence.md").read_text()
    assert table.startswith("# VM migration verification: PASSED")
    assert "| desched-test/vm-1 | pass | worker-a | worker-b | kubevirt-evacuation-abcde | Succeeded | 10 | descheduler | pass |  |" in table


def test_markdown_escapes_pipes_in_reasons():
    assert "a \\| b" in vf.markdown(output("fail", "a | b"))
