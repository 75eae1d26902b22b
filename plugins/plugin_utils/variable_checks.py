# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A playbook's variables checked against its spec (playbooks/specs/<playbook>.yml) and cross-variable rules, with
one line per wrong variable: `<variable>: <problem>. <fix, with an example>`. Nothing is said about the variables
that are right, and variables the spec does not name are not looked at (they may be inventory variables).

The types, choices, elements and `required` are checked by ansible-core's ArgumentSpecValidator, one variable at a
time so that every problem belongs to one variable; the rules (plugin_utils/variable_rules.py) then see the
converted values of the variables that passed. Used by the action plugin check_variables; pure, so unit-tested
without Ansible runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import ArgumentValueError, ElementError, RequiredError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import RebalanceError

TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false", "list": "a list",
              "dict": "a mapping", "path": "a path", "raw": "a value"}
# What an example of a variable without a default looks like, per type.
TYPE_EXAMPLES = {"int": 1, "float": 1.5, "bool": True, "list": ["name-1", "name-2"], "dict": {"key": "value"},
                 "path": "path/to/it", "str": "name", "raw": "value"}
ELEMENT_WORDS = {"str": "strings", "int": "integers", "float": "numbers", "bool": "booleans", "dict": "mappings", "path": "paths"}
SHOWN_CHARACTERS = 60  # a value longer than this is cut in messages (a whole policy would drown the line)


@dataclass(frozen=True)
class Problem:
    """One wrong variable (or field of one, `rebalance_thresholds.cpu`): what is wrong and how to fix it."""

    variable: str
    problem: str
    fix: str

    @property
    def line(self) -> str:
        return RebalanceError(self.problem, self.fix, path=self.variable).message


@dataclass(frozen=True)
class Rule:
    """A check across variables. `check` gets the given, correctly typed values (converted as the spec says) and
    returns its problems; the rule is skipped when one of its `variables` already has a problem (its own, or an earlier
    rule's), so that a variable is named once."""

    variables: Tuple[str, ...]
    check: Callable[[Mapping[str, Any]], Iterable[Problem]]


def shown(value: Any) -> str:
    """A value as it reads in a message: JSON, cut when long."""
    try:
        text = json.dumps(value, sort_keys=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS - 3] + "..."


def extra_var(name: str, value: Any) -> str:
    """How to give `name: value` on the command line: `-e name=value` for a plain scalar, else JSON."""
    if isinstance(value, bool):
        return "-e {0}={1}".format(name, "true" if value else "false")
    if isinstance(value, (int, float)) or (isinstance(value, str) and value and all(c.isalnum() or c in "._-/%~=" for c in value)):
        return "-e {0}={1}".format(name, value)
    return "-e '{0}'".format(json.dumps({name: value}))


def example_value(spec: Mapping[str, Any]) -> Any:
    """A value that passes `spec`: its default when that says something, else its first choice, else one per type."""
    default = spec.get("default")
    if default not in (None, "", [], {}):
        return default
    if spec.get("choices"):
        return list(spec["choices"])[0]
    if spec.get("type", "str") == "list" and spec.get("elements") not in (None, "str"):
        return [TYPE_EXAMPLES.get(spec["elements"], "value")]
    return TYPE_EXAMPLES.get(spec.get("type", "str"), "value")


def type_words(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type", "str")
    if kind == "list" and spec.get("elements"):
        return "a list of {0}".format(ELEMENT_WORDS.get(spec["elements"], spec["elements"]))
    return TYPE_WORDS.get(kind, "a " + str(kind))


def validate_one(name: str, spec: Mapping[str, Any], values: Mapping[str, Any]) -> Tuple[Optional[Problem], Any]:
    """The problem of one variable with ansible-core's validator (None when it is right) and its converted value."""
    validator = ArgumentSpecValidator({name: dict(spec)})
    result = validator.validate({name: values[name]} if name in values else {})
    example = extra_var(name, example_value(spec))
    for error in result.errors:
        if isinstance(error, RequiredError):
            return Problem(name, "is required and not given", "Give it, e.g. {0}".format(example)), None
        if isinstance(error, ArgumentValueError):
            choices = ", ".join(str(choice) for choice in spec.get("choices") or [])
            return Problem(name, "{0} is not one of {1}".format(shown(values[name]), choices), "Give one of them, e.g. {0}".format(example)), None
        if isinstance(error, ElementError):
            bad = [item for item in values[name] if validate_one("item", {"type": spec["elements"]}, {"item": item})[0]]
            element = TYPE_WORDS.get(spec["elements"], spec["elements"])
            return Problem(name, "{0} in the list is not {1}".format(", ".join(shown(item) for item in bad), element),
                           "Give {0}, e.g. {1}".format(type_words(spec), example)), None
        return Problem(name, "{0} is not {1}".format(shown(values[name]), type_words(spec)), "Give {0}, e.g. {1}".format(type_words(spec), example)), None
    return None, result.validated_parameters.get(name)


def check_variables(options: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any], rules: Sequence[Rule] = (),
                    unreadable: Optional[Mapping[str, str]] = None) -> List[Problem]:
    """Every problem of the variables in `options` (a spec's `options`) among `values` (the variables that are set,
    templated), then of the `rules`; one Problem per wrong variable, in the spec's order, then the rules' (a rule whose
    variables already have a problem, of their own or from an earlier rule, is not run).
    `unreadable`: variables whose templating failed (name -> error), reported as such."""
    problems: Dict[str, Problem] = {}
    checked: Dict[str, Any] = {}
    for name, spec in options.items():
        if unreadable and name in unreadable:
            problems[name] = Problem(name, "cannot be read ({0})".format(unreadable[name]),
                                     "Give a plain value or define what it refers to, e.g. {0}".format(extra_var(name, example_value(spec))))
            continue
        problem, value = validate_one(name, spec, values)
        if problem:
            problems[name] = problem
        elif name in values:
            checked[name] = value
    for rule in rules:
        if any(name in problems for name in rule.variables):
            continue
        for problem in rule.check(checked):
            problems.setdefault(problem.variable, problem)
    return list(problems.values())


def spec_options(spec: Any) -> Dict[str, Dict[str, Any]]:
    """The `options` of a loaded spec file; ValueError names what is wrong with it."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("options"), Mapping):
        raise ValueError("a spec is a mapping with `options` (variable name -> type, choices, default, required, description)")
    bad = [name for name, option in spec["options"].items() if not isinstance(option, Mapping)]
    if bad:
        raise ValueError("options {0}: each is a mapping (type, choices, default, required, description)".format(", ".join(map(str, bad))))
    return {str(name): dict(option) for name, option in spec["options"].items()}


def problem_lines(problems: Iterable[Problem]) -> List[str]:
    return [problem.line for problem in problems]
