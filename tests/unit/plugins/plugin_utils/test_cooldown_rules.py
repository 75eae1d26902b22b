"""playbooks/cooldown.yml's variables through check_variables with its spec and the `cooldown` rules: durations in
seconds or with units, the longest cooldown at least the first, the breaker's limits 1 or more; each wrong variable
named once with its fix, the right ones never."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_checks import check_variables, spec_options
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_rules import rules_named

SPEC = Path(__file__).resolve().parents[4] / "playbooks" / "specs" / "cooldown.yml"


def problems(values: dict) -> dict:
    options = spec_options(yaml.safe_load(SPEC.read_text()))
    return {p.variable: p.line for p in check_variables(options, values, rules_named(["cooldown"]))}


def test_the_defaults_and_durations_with_units_pass():
    assert problems({}) == {}
    assert problems({"cooldown_period": "90s", "cooldown_max_period": "1h30m", "cooldown_history_window": 21600,
                     "cooldown_breaker_window": "2h", "cooldown_max_failed_migrations": 1, "cooldown_wait_timeout": 30}) == {}


@pytest.mark.parametrize("name", ["cooldown_period", "cooldown_max_period", "cooldown_history_window", "cooldown_breaker_window"])
@pytest.mark.parametrize("value", ["fifteen minutes", "0", "-5m", ""])
def test_a_wrong_duration_is_named_with_an_example(name, value):
    found = problems({name: value})
    assert list(found) == [name] and "is not a duration of more than 0 seconds" in found[name]
    assert "e.g. -e {0}=".format(name) in found[name]


def test_a_longest_cooldown_below_the_first_is_named_once():
    found = problems({"cooldown_period": "2h", "cooldown_max_period": "30m"})
    assert list(found) == ["cooldown_max_period"]
    assert found["cooldown_max_period"].startswith('cooldown_max_period: "30m" is shorter than cooldown_period ("2h")')
    # a wrong duration is named as such, not compared
    assert list(problems({"cooldown_period": "soon", "cooldown_max_period": "30m"})) == ["cooldown_period"]


@pytest.mark.parametrize("name", ["cooldown_max_failed_migrations", "cooldown_max_migrations_per_vm", "cooldown_wait_timeout"])
def test_the_breakers_limits_are_one_or_more(name):
    found = problems({name: 0})
    assert list(found) == [name] and "0 is less than 1" in found[name]
