"""DeschedulerPolicy decoding and validation with the upstream messages (descheduler v0.36)."""
import pytest

from kubesim.descheduler import policy as pol
from kubesim.descheduler.run import run_once
from descheduler_cluster import lnu_policy, make_cluster, messages, node, policy

PATH = "/policy-dir/policy.yaml"


def load_error(text: str) -> str:
    with pytest.raises(pol.PolicyError) as err:
        pol.load(text, PATH)
    return err.value.message


def test_the_package_default_policy_loads_with_pvc_protection_and_local_storage_allowed():
    loaded = pol.load(pol.DEFAULT_POLICY)
    profile = loaded.profiles[0]
    evictor = profile.config("DefaultEvictor").args
    assert pol.effective_protections(evictor) == ["SystemCriticalPods", "FailedBarePods", "DaemonSetPods",
                                                  "PodsWithPVC"]
    assert profile.enabled("filter") == ["DefaultEvictor"] and profile.enabled("preevictionfilter") == ["DefaultEvictor"]
    assert "LowNodeUtilization" in profile.enabled("balance")


def test_unknown_and_miscased_keys_are_dropped_silently():
    loaded = pol.load(policy("""\
        nodeselector: "a=b"
        maxNoOfPodsToEvictTotal: 2
        bogus: 1
        profiles:
        - name: p
          pluginConfig:
          - name: DefaultEvictor
            args: {nodeFit: true, NodeFit: false, labelselector: {matchLabels: {a: b}}}
          - name: LowNodeUtilization
            args:
              thresholds: {cpu: 10}
              targetThresholds: {cpu: 20}
              targetThreshold: {cpu: 99}
              evictionLimits: {Node: 3}
          plugins:
            balance: {enabled: [LowNodeUtilization]}
            preEvictionFilter: {enabled: [Whatever]}
        """))
    assert loaded.node_selector is None and loaded.max_total == 2
    evictor = loaded.profiles[0].config("DefaultEvictor").args
    assert evictor == {"nodeFit": True}
    lnu = loaded.profiles[0].config("LowNodeUtilization").args
    assert lnu["targetThresholds"] == {"cpu": 20.0} and lnu["evictionLimits"] == {}
    assert loaded.profiles[0].enabled("preevictionfilter") == ["DefaultEvictor"]


@pytest.mark.parametrize("args, message", [
    ("thresholds: {cpu: 10}\n  targetThresholds: {cpu: 20}\n  evictableNamespaces: {include: [a]}",
     "in profile p: only Exclude namespaces can be set, inclusion is not supported"),
    ("targetThresholds: {cpu: 20}",
     "in profile p: thresholds config is not valid: no resource threshold is configured"),
    ("thresholds: {cpu: 120}\n  targetThresholds: {cpu: 20}",
     "in profile p: thresholds config is not valid: cpu threshold not in [0, 100] range"),
    ("thresholds: {cpu: 10}\n  targetThresholds: {cpu: -1}",
     "in profile p: targetThresholds config is not valid: cpu threshold not in [0, 100] range"),
    ("thresholds: {cpu: 10, memory: 10}\n  targetThresholds: {cpu: 20}",
     "in profile p: thresholds and targetThresholds configured different resources"),
    ("thresholds: {cpu: 10}\n  targetThresholds: {memory: 20}",
     "in profile p: thresholds and targetThresholds configured different resources"),
    ("thresholds: {cpu: 30}\n  targetThresholds: {cpu: 20}",
     "in profile p: thresholds' cpu percentage is greater than targetThresholds'"),
])
def test_low_node_utilization_validation_messages(args, message):
    body = "profiles:\n- name: p\n  pluginConfig:\n  - name: LowNodeUtilization\n    args:\n" + \
        "".join(f"      {line.strip()}\n" for line in args.split("\n"))
    assert load_error(policy(body)) == message


def test_deviation_thresholds_may_exceed_targets():
    pol.load(lnu_policy(thresholds="{cpu: 30}", targets="{cpu: 20}", lnu_extra="useDeviationThresholds: true"))


@pytest.mark.parametrize("args, message", [
    ("{evictLocalStoragePods: true, podProtections: {defaultDisabled: [DaemonSetPods]}}",
     "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or PodProtections.DefaultDisabled"),
    ("{podProtections: {extraEnabled: [PodsWithLocalStorage]}}",
     'invalid pod protection policy in ExtraEnabled: "PodsWithLocalStorage". Valid options are: '
     "[PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]"),
    ("{podProtections: {defaultDisabled: [PodsWithPVC]}}",
     'invalid pod protection policy in DefaultDisabled: "PodsWithPVC". Valid options are: '
     "[PodsWithLocalStorage SystemCriticalPods FailedBarePods DaemonSetPods]"),
    ("{podProtections: {defaultDisabled: [DaemonSetPods, DaemonSetPods]}}",
     "PodProtections.DefaultDisabled contains duplicate entries"),
    ("{podProtections: {extraEnabled: [PodsWithPVC, PodsWithPVC]}}",
     "PodProtections.ExtraEnabled contains duplicate entries"),
    ("{priorityThreshold: {value: 10, name: high}}",
     "priority threshold misconfigured, only one of priorityThreshold fields can be set"),
])
def test_default_evictor_validation_messages(args, message):
    assert load_error(lnu_policy(evictor_args=args)) == f"in profile test: {message}"


def test_several_errors_are_aggregated_and_unregistered_plugins_reported():
    text = policy("""\
        profiles:
        - name: a
          pluginConfig:
          - name: LowNodeUtilizaton
          - name: DefaultEvictor
            args: {podProtections: {extraEnabled: [Nope]}, evictDaemonSetPods: true}
        """)
    assert load_error(text) == (
        "[in profile a: plugin LowNodeUtilizaton in pluginConfig not registered, in profile a: [cannot use Deprecated "
        "fields alongside PodProtections.ExtraEnabled or PodProtections.DefaultDisabled, invalid pod protection "
        'policy in ExtraEnabled: "Nope". Valid options are: [PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]]]')


@pytest.mark.parametrize("text, message", [
    ("kind: DeschedulerPolicy\n", "Object 'apiVersion' is missing in '{\"kind\":\"DeschedulerPolicy\"}'"),
    ("apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n",
     'no kind "DeschedulerPolicy" is registered for version "descheduler/v1alpha1"'),
    (policy("maxNoOfPodsToEvictTotal: one\n"), "json: cannot unmarshal string into Go struct field "
     "DeschedulerPolicy.maxNoOfPodsToEvictTotal of type uint"),
    (policy("profiles: [\n"), "error converting YAML to JSON: yaml: line"),
])
def test_decode_errors(text, message):
    error = load_error(text)
    assert error.startswith(f'failed decoding descheduler\'s policy config "{PATH}": ') and message in error


def test_a_validation_failure_ends_the_process_with_the_upstream_error_lines():
    cluster = make_cluster()
    text = lnu_policy(lnu_extra="evictableNamespaces: {include: [apps]}")
    code, lines = run_once(cluster, [f"--policy-config-file={PATH}", "--v=3"], text)
    assert code == 1
    err = 'err="in profile test: only Exclude namespaces can be set, inclusion is not supported"'
    assert messages(lines) == [f'"failed to run descheduler server" {err}', f'"command failed" {err}']
    assert all(line.startswith("E") for line in lines)


def test_a_balance_plugin_that_does_not_exist_fails_the_profile_not_the_run():
    cluster = make_cluster()
    node(cluster, "worker-a")
    node(cluster, "worker-b")
    text = policy("""\
        profiles:
        - name: p
          pluginConfig:
          - name: LowNodeUtilization
            args: {thresholds: {cpu: 10}, targetThresholds: {cpu: 20}}
          plugins:
            balance: {enabled: [LowNodeUtilizaton]}
        """)
    code, lines = run_once(cluster, [f"--policy-config-file={PATH}", "--v=1"], text)
    assert code == 0
    assert ('"unable to create a profile" err="profile \\"p\\" configures balance extension point of non-existing '
            'plugins: [LowNodeUtilizaton]" profile="p"') in messages(lines)
    assert messages(lines)[-1] == '"Number of evictions/requests" totalEvicted=0 evictionRequests=0'
