"""playbooks/specs/: one spec per playbook, the documentation of its variables (AWX surveys are checked against them):
each variable typed and described, its documented default a value of its type, used by the playbook or the tasks files it
includes, and fleet_rollout.yml's rebalance variables the same entries as rebalance.yml's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_checks import check_variables, problem_lines, spec_options

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
SPECS = sorted((PLAYBOOKS / "specs").glob("*.yml"))
INCLUDED = re.compile(r"include_tasks:\s*([\w./-]+\.yml)")
TYPES = {"str", "int", "float", "bool", "list", "dict", "path", "raw"}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def playbook_text(playbook: Path) -> str:
    """The playbook and every tasks file it includes, transitively."""
    texts, pending, seen = [], [playbook], set()
    while pending:
        current = pending.pop()
        if current in seen or not current.is_file():
            continue
        seen.add(current)
        text = current.read_text()
        texts.append(text)
        for included in INCLUDED.findall(text):
            pending += [current.parent / included, PLAYBOOKS / included]
    return "\n".join(texts)


def test_every_playbook_has_a_spec():
    assert [spec.name for spec in SPECS] == sorted(p.name for p in PLAYBOOKS.glob("*.yml"))


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.stem)
def test_each_variable_is_typed_described_and_used(spec):
    doc = load(spec)
    assert doc["short_description"] and "\n" not in doc["short_description"]
    options = spec_options(doc)
    text = playbook_text(PLAYBOOKS / spec.name)
    for name, option in options.items():
        assert option.get("type") in TYPES, (name, option)
        assert option.get("elements") in (None, *TYPES), (name, option)
        assert isinstance(option.get("description"), str) and "\n" not in option["description"].strip(), name
        assert "default" not in option or not option.get("choices") or option["default"] in option["choices"], name
        assert re.search(r"\b{0}\b".format(name), text), f"{spec.name}: {name} is documented but not used by the playbook"
    for group in doc.get("required_one_of", []):
        assert set(group) <= set(options), group


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.stem)
def test_documented_defaults_are_values_of_their_type(spec):
    options = spec_options(load(spec))
    defaults = {name: option["default"] for name, option in options.items() if "default" in option}
    assert problem_lines(check_variables(options, defaults)) == []


def test_fleet_rollout_documents_the_rebalance_variables_as_rebalance_does():
    rebalance = spec_options(load(PLAYBOOKS / "specs" / "rebalance.yml"))
    fleet = spec_options(load(PLAYBOOKS / "specs" / "fleet_rollout.yml"))
    shared = {name: option for name, option in rebalance.items() if name != "rebalance_hosts"}
    assert {name: fleet.get(name) for name in shared} == shared
    assert load(PLAYBOOKS / "specs" / "fleet_rollout.yml")["required_one_of"] == load(PLAYBOOKS / "specs" / "rebalance.yml")["required_one_of"]
