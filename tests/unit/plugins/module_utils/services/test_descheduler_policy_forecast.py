"""descheduler_policy with actual usage and the forecast: the rendering options reach the policy, the actual usage the VM
profile balances by is read once (for the nodes the policy selects, at prometheus_url_override) and given to the plan and
the forecast, and a forecast that refuses the policy stops it before any write or backup (check mode too) unless forced.
The planner, the forecast and the reader are stubs here: the service passes them what they need and obeys what they say."""
from __future__ import annotations

import copy

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import module_argument_spec
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import descheduler_policy as apply

from .. import k8s_objects as k8s
from .test_descheduler_policy import OPTIONS, FakeClient, NoClient, options, policy_options

URL = "https://prometheus-k8s.monitoring.svc:9091"
QUERY = "instance:node_cpu_utilisation:rate1m"
PROMETHEUS = {"metrics_source": "Prometheus", "prometheus_query": QUERY, "prometheus_url": URL,
              "prometheus_auth_secret": {"namespace": "descheduler", "name": "prometheus-token"},
              "thresholds": {"MetricResource": 20}, "target_thresholds": {"MetricResource": 40}}
USAGE = {"source": "Prometheus", "query": QUERY, "nodes": {"worker-a": {"MetricResource": 90}, "worker-b": {"MetricResource": 10}},
         "values": {"worker-a": 0.9, "worker-b": 0.1}}
REFUSAL = "worker-a and worker-b swap categories in cycle 2"


class Recorder:
    """Stub planner, forecast and actual-usage reader that record their calls."""

    def __init__(self, refusal=None, usage=None):
        self.refusal, self.usage = refusal, usage
        self.calls = []

    def plan(self, policy, nodes, pods, vm_profiles=(), actual_usage=None):
        self.calls.append(("plan", actual_usage))
        return {"nodes": [], "evictions": [], "stop_reason": None, "usage_source": (actual_usage or {}).get("source", "requests")}

    def forecast(self, policy, nodes, pods, vm_profiles=(), actual_usage=None, max_cycles=10):
        self.calls.append(("forecast", actual_usage, max_cycles))
        return {"cycles": [], "converged": self.refusal is None, "cycles_to_converge": 1, "migrations": 0, "swaps": [], "moved_back": [],
                "refusal": self.refusal}

    def read(self, client, policy, profile, prometheus_url=None, prometheus_token=None, nodes=None, url_option="prometheus_url"):
        self.calls.append(("read", profile["name"], prometheus_url, prometheus_token, nodes))
        return self.usage

    def run(self, opts, check_mode, client):
        return apply.run(opts, check_mode, client=client, planner=self.plan, forecaster=self.forecast, usage_reader=self.read)


def prometheus_options(tmp_path, **given):
    params = dict(PROMETHEUS)
    params.update(given)
    return policy_options(tmp_path, **params)


def test_actual_usage_is_read_once_and_given_to_the_plan_and_the_forecast(tmp_path):
    stubs = Recorder(usage=USAGE)
    result = stubs.run(prometheus_options(tmp_path, prometheus_url_override="http://localhost:9090", forecast_cycles=4), True, FakeClient(k8s.configmap()))
    assert stubs.calls == [("read", "vm-rebalance", "http://localhost:9090", None, ["worker-a", "worker-b"]),
                           ("plan", USAGE), ("forecast", USAGE, 4)]
    assert result["plan"]["usage_source"] == "Prometheus" and result["forecast"]["refusal"] is None
    args = result["policy"]["profiles"][0]["pluginConfig"][1]["args"]
    assert args["metricsUtilization"] == {"source": "Prometheus", "prometheus": {"query": QUERY}}
    assert result["policy"]["metricsProviders"][0]["prometheus"]["authToken"] == {
        "secretReference": {"namespace": "descheduler", "name": "prometheus-token"}}


def test_a_requests_policy_reads_no_usage(tmp_path):
    stubs = Recorder(usage=USAGE)
    stubs.run(policy_options(tmp_path), True, FakeClient(k8s.configmap()))
    assert stubs.calls == [("plan", None), ("forecast", None, 10)]


def test_without_plan_and_forecast_nothing_is_read(tmp_path):
    stubs = Recorder(refusal=REFUSAL, usage=USAGE)
    result = stubs.run(prometheus_options(tmp_path, plan=False, forecast=False), False, FakeClient(k8s.configmap()))
    assert stubs.calls == [] and "plan" not in result and "forecast" not in result and result["changed"]


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_refusing_forecast_stops_before_any_write_or_backup(tmp_path, check_mode):
    stubs = Recorder(refusal=REFUSAL, usage=USAGE)
    client = FakeClient(k8s.configmap())
    with pytest.raises(apply.ForecastRefused) as error:
        stubs.run(prometheus_options(tmp_path), check_mode, client)
    assert error.value.message == "forecast: {0}. set force: true to apply anyway".format(REFUSAL)
    assert client.writes == [] and not (tmp_path / "backups").exists()
    partial = error.value.as_dict()["result"]
    assert partial["forecast"]["refusal"] == REFUSAL and "plan" in partial and partial["changed"] is False
    assert "diff" not in partial


def test_force_applies_a_refused_policy_and_says_so(tmp_path):
    stubs = Recorder(refusal=REFUSAL, usage=USAGE)
    client = FakeClient(k8s.configmap())
    result = stubs.run(prometheus_options(tmp_path, force=True), False, client)
    assert result["changed"] and [w["dry_run"] for w in client.writes] == [False] and result["backup_path"]
    forced, = [f for f in result["findings"] if f["code"] == "forecast_refusal_forced"]
    assert REFUSAL in forced["message"]


def test_a_policy_already_in_place_is_no_change_whatever_the_forecast(tmp_path):
    stubs = Recorder(refusal=REFUSAL)
    client = FakeClient(k8s.configmap(policy=k8s.VM_POLICY))
    result = stubs.run(policy_options(tmp_path), False, client)
    assert not result["changed"] and client.writes == [] and result["forecast"]["refusal"] == REFUSAL
    live, = [f for f in result["findings"] if f["code"] == "forecast_refuses_live_policy"]
    assert live["severity"] == "warning" and REFUSAL in live["message"] and "this is the policy in place" in live["message"]


def test_forecast_cycles_below_one_is_refused_before_any_request():
    with pytest.raises(InvalidOption) as error:
        apply.run(options(forecast_cycles=0, **OPTIONS), False, client=NoClient())
    assert error.value.path == "forecast_cycles"


def test_metrics_option_errors_come_before_any_request():
    given = dict(OPTIONS, metrics_source="Prometheus", prometheus_query=QUERY)
    with pytest.raises(InvalidOption) as error:
        apply.run(options(**given), False, client=NoClient())
    assert error.value.path == "prometheus_url"


def test_the_default_metrics_source_is_no_rendering_option_beside_a_whole_policy():
    whole = yaml.safe_dump(k8s.VM_POLICY)
    assert apply.wanted_policy(options(policy=whole, use_deviation_thresholds=False), None) == k8s.VM_POLICY
    with pytest.raises(InvalidOption) as error:
        apply.wanted_policy(options(policy=whole, metrics_source="KubernetesMetrics", no_eviction_policy="Mandatory"), None)
    assert error.value.path == "policy" and "metrics_source, no_eviction_policy" in error.value.problem


def test_the_cooldown_and_deviation_options_render():
    given = dict(OPTIONS, no_eviction_policy="Mandatory", use_deviation_thresholds=True)
    policy = apply.wanted_policy(options(**given), None)
    assert policy["profiles"][0]["pluginConfig"][0]["args"]["noEvictionPolicy"] == "Mandatory"
    assert policy["profiles"][0]["pluginConfig"][1]["args"]["useDeviationThresholds"] is True
    expected = copy.deepcopy(k8s.VM_POLICY)
    expected["profiles"][0]["pluginConfig"][0]["args"]["noEvictionPolicy"] = "Mandatory"
    expected["profiles"][0]["pluginConfig"][1]["args"]["useDeviationThresholds"] = True
    assert policy == expected


@pytest.mark.parametrize("secret, words", [
    ({"namespace": "descheduler"}, "missing required arguments: name found in prometheus_auth_secret"),
    ({"namespace": "descheduler", "name": "prometheus-token", "token": "s3cr3t-t0k3n"}, "prometheus_auth_secret.token"),
])
def test_the_argument_spec_takes_only_a_secret_reference(secret, words):
    validated = ArgumentSpecValidator(module_argument_spec(apply.ARG_SPEC), **apply.SPEC_CHECKS).validate({"prometheus_auth_secret": secret})
    message = "; ".join(validated.error_messages)
    assert words in message and "s3cr3t-t0k3n" not in message


def test_spec_defaults_of_the_new_options():
    parsed = options()
    assert (parsed.metrics_source, parsed.forecast, parsed.forecast_cycles, parsed.force) == ("requests", True, 10, False)
    assert parsed.use_deviation_thresholds is None and parsed.no_eviction_policy is None and parsed.prometheus_url_override is None
