"""run_module: the shared main() of every module: options, check mode, one service call, one fail_json."""
from __future__ import annotations

import dataclasses
import json
from typing import List, Optional

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import (
    ModuleOptions,
    module_argument_spec,
    run_module,
    spec_params,
)

OWN_SPEC = {"mode": {"type": "str", "choices": ["a", "b"], "default": "a"}, "things": {"type": "list", "elements": "str"}}


@dataclasses.dataclass(frozen=True)
class OwnOptions(ModuleOptions):
    mode: str
    things: Optional[List[str]]


def run(capsys, service, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as caught:
        run_module(OWN_SPEC, OwnOptions, service, required_if=[["mode", "b", ["things"]]])
    return caught.value.code, json.loads(capsys.readouterr().out)


def test_spec_has_the_connection_options_and_a_copy_of_the_own_ones():
    spec = module_argument_spec(OWN_SPEC)
    assert {"kubeconfig", "context", "api_key", "api_retries", "api_timeout", "mode", "things"} <= set(spec)
    spec["mode"]["default"] = "b"
    assert OWN_SPEC["mode"]["default"] == "a"


def test_service_gets_typed_options_and_check_mode_and_its_result_is_returned(capsys):
    calls = []

    def service(options, check_mode):
        calls.append((options.mode, options.things, options.connection.api_retries, options.connection.auth["context"], check_mode))
        return {"changed": False, "answer": 42}
    code, result = run(capsys, service, things="x,y", context="ctx", _ansible_check_mode=True)
    assert code == 0 and result["answer"] == 42
    assert calls == [("a", ["x", "y"], 5, "ctx", True)]


def test_an_option_with_a_default_given_as_null_is_refused_by_ansible_core(capsys):
    # why a default never needs restating in code: a defaulted option is never None after parsing
    code, result = run(capsys, lambda options, check_mode: {"changed": False}, api_timeout=None)
    assert code == 1 and "api_timeout" in result["msg"]


def test_spec_params_fill_the_spec_defaults_and_refuse_unknown_names():
    params = spec_params(OWN_SPEC, things=["x"])
    assert params["mode"] == "a" and params["things"] == ["x"] and params["api_timeout"] == 120 and params["kubeconfig"] is None
    options = OwnOptions.from_params(params)
    assert (options.mode, options.things, options.connection.api_timeout) == ("a", ["x"], 120)
    with pytest.raises(KeyError, match="thing"):
        spec_params(OWN_SPEC, thing=["x"])


def test_module_kwargs_reach_the_module(capsys):
    code, result = run(capsys, lambda options, check_mode: {"changed": False}, mode="b")
    assert code == 1 and "things" in result["msg"]


def test_collection_errors_become_one_fail_json_with_the_error_as_data(capsys):
    def service(options, check_mode):
        raise InvalidOption("'Bad' is not a name", "Use lower-case letters.", path="things[0]")
    code, result = run(capsys, service, things="Bad")
    assert code == 1 and result["failed"]
    assert result["msg"].startswith("things[0]: ")
    assert result["error"]["type"] == "InvalidOption"


def test_a_partial_result_carried_by_the_error_is_reported_beside_it(capsys):
    def service(options, check_mode):
        raise InvalidOption("timed out", "Wait longer.", path="timeout", result={"unfinished": 2, "migrations": ["a", "b"]})
    code, result = run(capsys, service)
    assert code == 1 and result["unfinished"] == 2 and result["migrations"] == ["a", "b"]
    assert "result" not in result["error"] and result["error"]["path"] == "timeout"
