"""The module is thin: main() runs the shared module runner (tests/unit/plugins/module_utils/k8s/test_runner.py)
with the facts options and service; its argument spec is the shared specs, and the collection's exceptions
become one fail_json with the message and the error as data."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import ApiFailure
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services.kubevirt_eviction_facts import ARG_SPEC
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import module_argument_spec
from ansible_collections.kubevirt_ops.rebalance.plugins.modules import kubevirt_eviction_facts as module


def run(monkeypatch, capsys, service, **args):
    monkeypatch.setattr(module, "gather_eviction_facts", service)
    with patch_module_args(args), pytest.raises(SystemExit) as caught:
        module.main()
    return caught.value.code, json.loads(capsys.readouterr().out)


def test_argument_spec_is_auth_plus_retries_plus_facts_options():
    spec = module_argument_spec(ARG_SPEC)
    assert set(spec) == set(AUTH_ARG_SPEC) | {"api_retries", "api_timeout"} | set(ARG_SPEC)
    assert spec["include"]["default"] == ["cluster", "nodes", "descheduler", "vmis"]


def test_main_returns_the_service_result_unchanged(monkeypatch, capsys):
    calls = []

    def service(options, check_mode):
        calls.append((options, check_mode))
        return {"changed": False, "vmis": [], "findings": []}
    code, result = run(monkeypatch, capsys, service, kubeconfig="/k", namespaces="a,b", _ansible_check_mode=True)
    assert code == 0 and result["changed"] is False and result["vmis"] == []
    options, check_mode = calls[0]
    assert options.namespaces == ["a", "b"] and options.descheduler_namespace == "descheduler" and options.connection.api_retries == 5
    assert check_mode is True


def test_main_turns_collection_errors_into_fail_json(monkeypatch, capsys):
    def service(options, check_mode):
        raise ApiFailure("list virtualmachineinstances.kubevirt.io", 403, "Forbidden", "forbidden")
    code, result = run(monkeypatch, capsys, service, kubeconfig="/k")
    assert code == 1 and result["failed"]
    assert result["msg"].startswith("list virtualmachineinstances.kubevirt.io: 403 Forbidden: forbidden.")
    assert result["error"]["status"] == 403 and result["error"]["type"] == "ApiFailure"


def test_api_key_is_not_logged(monkeypatch, capsys):
    code, result = run(monkeypatch, capsys, lambda options, check_mode: {"changed": False, "echo": options.connection.auth["api_key"]},
                       host="https://k8s.example:6443", api_key="sekrit-token")
    assert code == 0 and "sekrit-token" not in json.dumps(result)


def test_usage_options_defaults_and_the_prometheus_token_is_not_logged(monkeypatch, capsys):
    spec = module_argument_spec(ARG_SPEC)
    assert spec["usage_source"]["default"] == "auto" and spec["usage_disagreement_points"]["default"] == 20
    assert spec["prometheus_token"]["no_log"] is True
    seen = []

    def service(options, check_mode):
        seen.append(options)
        return {"changed": False, "echo": options.prometheus_token}
    code, result = run(monkeypatch, capsys, service, kubeconfig="/k", prometheus_token="prom-s3cret", prometheus_query="up")
    assert code == 0 and "prom-s3cret" not in json.dumps(result) and seen[0].usage_source == "auto"


def test_a_token_and_its_secret_together_are_refused(monkeypatch, capsys):
    code, result = run(monkeypatch, capsys, lambda options, check_mode: {"changed": False}, kubeconfig="/k", prometheus_token="a-long-token",
                       prometheus_auth_secret={"namespace": "ns", "name": "s"})
    assert code == 1 and "mutually exclusive: prometheus_token|prometheus_auth_secret" in result["msg"]
