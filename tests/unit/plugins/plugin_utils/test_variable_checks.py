"""A playbook's variables against its spec (ansible-core's validator, one variable at a time) and rules: one line per
wrong variable with the problem and the fix, nothing about the right ones or the ones the spec does not name."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_checks import (
    Problem, Rule, check_variables, extra_var, problem_lines, spec_options)

OPTIONS = {
    "timeout": {"type": "int", "default": 600, "description": "Seconds."},
    "trigger": {"type": "str", "choices": ["wait", "create", "auto"], "default": "wait"},
    "nodes": {"type": "list", "elements": "int"},
    "labels": {"type": "dict"},
    "enabled": {"type": "bool", "default": False},
    "name": {"type": "str", "required": True},
}


def lines(values: dict, rules=(), unreadable=None) -> list[str]:
    return problem_lines(check_variables(OPTIONS, values, rules, unreadable))


def test_right_variables_and_unknown_ones_say_nothing():
    assert lines({"name": "x", "timeout": "30", "trigger": "auto", "nodes": ["1", 2], "enabled": "yes", "inventory_var": object()}) == []


def test_each_wrong_variable_is_one_line_with_its_problem_and_fix_in_spec_order():
    assert lines({"name": "x", "trigger": "later", "timeout": "soon", "labels": "not a mapping", "enabled": "maybe"}) == [
        'timeout: "soon" is not an integer. Give an integer, e.g. -e timeout=600',
        'trigger: "later" is not one of wait, create, auto. Give one of them, e.g. -e trigger=wait',
        'labels: "not a mapping" is not a mapping. Give a mapping, e.g. -e \'{"labels": {"key": "value"}}\'',
        'enabled: "maybe" is not true or false. Give true or false, e.g. -e enabled=false',
    ]


def test_a_wrong_element_names_the_item():
    assert lines({"name": "x", "nodes": [1, "two", 3]}) == [
        'nodes: "two" in the list is not an integer. Give a list of integers, e.g. -e \'{"nodes": [1]}\'']


def test_a_required_variable_that_is_not_given():
    assert lines({}) == ["name: is required and not given. Give it, e.g. -e name=name"]


def test_a_variable_whose_template_failed_is_named_as_unreadable():
    assert lines({"name": "x"}, unreadable={"timeout": "'worker_count' is undefined"}) == [
        "timeout: cannot be read ('worker_count' is undefined). Give a plain value or define what it refers to, e.g. -e timeout=600"]


def test_rules_see_converted_values_and_skip_variables_that_are_already_wrong():
    seen = []

    def at_most_two(values):
        seen.append(dict(values))
        return [Problem("nodes", "has {0} items".format(len(values["nodes"])), "Give two.")] if len(values.get("nodes", [])) > 2 else []

    rule = Rule(("nodes",), at_most_two)
    assert lines({"name": "x", "nodes": ["1", "2", "3"]}, [rule]) == ["nodes: has 3 items. Give two."]
    assert seen[-1]["nodes"] == [1, 2, 3]
    seen.clear()
    assert lines({"name": "x", "nodes": ["one"]}, [rule])[0].startswith('nodes: "one" in the list is not an integer')
    assert not seen, "the rule must not run on a variable with a type problem"


def odd(values):
    return [Problem("timeout", "is odd", "Make it even.")] if values["timeout"] % 2 else []


def small(values):
    return [Problem("timeout", "is small", "Make it larger.")] if values["timeout"] < 10 else []


def test_a_variable_is_one_line_when_rules_find_more():
    assert lines({"name": "x", "timeout": 5}, [Rule(("timeout",), odd), Rule(("timeout",), small)]) == ["timeout: is odd. Make it even."]
    assert lines({"name": "x", "timeout": 4}, [Rule(("timeout",), odd), Rule(("timeout",), small)]) == ["timeout: is small. Make it larger."]


@pytest.mark.parametrize("value, shown", [
    (600, "-e t=600"), (True, "-e t=true"), ("app=desched-test", "-e t=app=desched-test"), ("25%", "-e t=25%"),
    ("two words", "-e '{\"t\": \"two words\"}'"), (["a", "b"], "-e '{\"t\": [\"a\", \"b\"]}'"), ("", "-e '{\"t\": \"\"}'"),
])
def test_extra_var_examples_are_what_a_shell_takes(value, shown):
    assert extra_var("t", value) == shown


def test_spec_options_refuses_what_is_not_a_spec():
    assert spec_options({"options": {"a": {"type": "int"}}}) == {"a": {"type": "int"}}
    with pytest.raises(ValueError, match="a mapping with `options`"):
        spec_options({"argument_specs": {}})
    with pytest.raises(ValueError, match="options a: each is a mapping"):
        spec_options({"options": {"a": "int"}})
