"""Bad input: a table of malformed options, policies, selectors, thresholds, names and backup files across the
modules. Each must fail with a message that names the field (the option, or the policy field path), and leave
the cluster exactly as it was (the resourceVersions of every object the modules could write are compared).
The modules run in-process with their argument specs (module_call.py) against one `rebalance-two-workers`."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from support.policy import PAGE_OPTIONS, PAGE_POLICY
from support.simulator import running_kubesim

from .module_call import call_module

pytestmark = pytest.mark.simulator

FACTS, POLICY, VERIFY = "kubevirt_eviction_facts", "descheduler_policy", "vm_migration_verify"
BASELINE = {"vm-1": {"namespace": "desched-test", "name": "vm-1", "uid": "u-1", "node": "worker-a"}}
GOOD_POLICY = yaml.safe_load(PAGE_POLICY)


def policy_with(change) -> str:
    policy = copy.deepcopy(GOOD_POLICY)
    change(policy)
    return yaml.safe_dump(policy, sort_keys=False)


def lnu_args(policy: dict) -> dict:
    return next(p for p in policy["profiles"][0]["pluginConfig"] if p["name"] == "LowNodeUtilization")["args"]


def evictor_args(policy: dict) -> dict:
    return next(p for p in policy["profiles"][0]["pluginConfig"] if p["name"] == "DefaultEvictor")["args"]


def page(**changes) -> dict:
    options = dict(PAGE_OPTIONS)
    for key, value in changes.items():
        if value is None:
            options.pop(key, None)
        else:
            options[key] = value
    return options


# (id, module, args, a text the message must contain: the field, with `{backups}` for the backup folder)
CASES = [
    # ---------------------------------------------------------------- kubevirt_eviction_facts options
    ("facts-namespace-upper", FACTS, {"namespaces": ["Desched_Test"]}, "namespaces[0]"),
    ("facts-namespace-too-long", FACTS, {"namespaces": ["a" * 64]}, "namespaces[0]"),
    ("facts-selector-unclosed-set", FACTS, {"label_selector": "app in (a,b"}, "label_selector"),
    ("facts-selector-no-key", FACTS, {"label_selector": "=web"}, "label_selector"),
    ("facts-name-invalid", FACTS, {"names": ["VM One"]}, "names[0]"),
    ("facts-descheduler-namespace", FACTS, {"descheduler_namespace": "Descheduler"}, "descheduler_namespace"),
    ("facts-descheduler-name", FACTS, {"descheduler_name": "bad name"}, "descheduler_name"),
    ("facts-include-unknown", FACTS, {"include": ["vmz"]}, "include"),
    ("facts-retries-negative", FACTS, {"api_retries": -1}, "api_retries"),
    ("facts-timeout-zero", FACTS, {"api_timeout": 0}, "api_timeout"),
    ("facts-retries-not-int", FACTS, {"api_retries": "many"}, "api_retries"),
    ("facts-kubeconfig-missing", FACTS, {"kubeconfig": "/nonexistent/kubeconfig"}, "kubeconfig"),
    ("facts-context-unknown", FACTS, {"context": "no-such-context"}, "no-such-context"),
    # ---------------------------------------------------------------- descheduler_policy: options
    ("policy-thresholds-over-100", POLICY, page(thresholds={"cpu": 170, "memory": 60, "pods": 20}), "thresholds"),
    ("policy-thresholds-negative", POLICY, page(thresholds={"cpu": -1, "memory": 60, "pods": 20}), "thresholds"),
    ("policy-thresholds-not-number", POLICY, page(thresholds={"cpu": "high", "memory": 60, "pods": 20}), "thresholds"),
    ("policy-thresholds-unknown-resource", POLICY, page(thresholds={"gpu": 10, "memory": 60, "pods": 20}), "thresholds"),
    ("policy-thresholds-different-resources", POLICY, page(thresholds={"cpu": 70}, target_thresholds={"memory": 68}),
     "thresholds and targetThresholds configured different resources"),
    ("policy-thresholds-above-targets", POLICY, page(thresholds={"cpu": 80, "memory": 60, "pods": 20}), "thresholds"),
    ("policy-threshold-gap-too-small", POLICY, page(thresholds={"cpu": 73, "memory": 66, "pods": 28}), "targetThresholds"),
    ("policy-target-thresholds-missing", POLICY, page(target_thresholds=None), "target_thresholds"),
    ("policy-thresholds-not-a-dict", POLICY, page(thresholds="70"), "thresholds"),
    ("policy-nodes-and-node-selector", POLICY, page(node_selector="kubernetes.io/hostname in (worker-a)"), "nodes|node_selector"),
    ("policy-vm-labels-and-selector", POLICY, page(vm_selector={"matchLabels": {"app": "x"}}), "vm_labels|vm_selector"),
    ("policy-node-selector-control-plane", POLICY, page(nodes=None, node_selector="kubernetes.io/hostname"), "nodeSelector"),
    ("policy-node-selector-malformed", POLICY, page(nodes=None, node_selector="kubernetes.io/hostname in (a"), "nodeSelector"),
    ("policy-node-name-invalid", POLICY, page(nodes=["worker a"]), "nodes[0]"),
    ("policy-vm-label-value-invalid", POLICY, page(vm_labels={"app": "bad value!"}), "vm_labels"),
    ("policy-per-node-limit-negative", POLICY, page(max_pods_to_evict_per_node=-1), "maxNoOfPodsToEvictPerNode"),
    ("policy-per-node-limit-above-migrations", POLICY, page(max_pods_to_evict_per_node=10), "maxNoOfPodsToEvictPerNode"),
    ("policy-total-limit-above-migrations", POLICY, page(max_pods_to_evict_total=50), "maxNoOfPodsToEvictTotal"),
    ("policy-exclude-namespace-invalid", POLICY, page(exclude_namespaces=["Bad_NS"]), "exclude_namespaces[0]"),
    ("policy-eviction-limit-negative", POLICY, page(eviction_limit_node=-2), "evictionLimits.node"),
    ("policy-state-unknown", POLICY, page(state="applied"), "state"),
    ("policy-and-render-options", POLICY, {"policy": PAGE_POLICY, "thresholds": {"cpu": 70}}, "policy"),
    # ---------------------------------------------------------------- descheduler_policy: whole policies
    ("policy-not-yaml", POLICY, {"policy": "profiles: [name: x"}, "policy"),
    ("policy-a-list", POLICY, {"policy": "- profiles"}, "policy"),
    ("policy-miscased-key", POLICY, {"policy": policy_with(lambda p: p.update(Profiles=p.pop("profiles")))}, "Profiles"),
    ("policy-include-namespaces", POLICY, {"policy": policy_with(lambda p: lnu_args(p).update(
        evictableNamespaces={"include": ["desched-test"]}))}, "evictableNamespaces"),
    ("policy-pvc-protection-name", POLICY, {"policy": policy_with(lambda p: evictor_args(p).update(
        podProtections={"extraEnabled": ["PodsWithPVCs"]}))}, "podProtections"),
    ("policy-match-label-invalid", POLICY, {"policy": policy_with(lambda p: evictor_args(p).update(
        labelSelector={"matchLabels": {"app": "a b"}}))}, "labelSelector.matchLabels"),
    ("policy-empty-label-selector", POLICY, {"policy": policy_with(lambda p: evictor_args(p).update(labelSelector={}))},
     "labelSelector"),
    ("policy-unregistered-plugin", POLICY, {"policy": policy_with(lambda p: p["profiles"][0]["pluginConfig"].append(
        {"name": "NoSuchPlugin", "args": {}}))}, "NoSuchPlugin"),
    ("policy-limit-not-int", POLICY, {"policy": policy_with(lambda p: p.update(maxNoOfPodsToEvictTotal="one"))},
     "maxNoOfPodsToEvictTotal"),
    # ---------------------------------------------------------------- descheduler_policy: backups and cluster
    ("restore-without-backup-file", POLICY, {"state": "restored"}, "backup_file"),
    ("restore-missing-file", POLICY, {"state": "restored", "backup_file": "{backups}/none.yaml"}, "backup_file"),
    ("restore-truncated", POLICY, {"state": "restored", "backup_file": "{backups}/truncated.yaml"}, "backup_file"),
    ("restore-not-yaml", POLICY, {"state": "restored", "backup_file": "{backups}/not-yaml.yaml"}, "backup_file"),
    ("restore-not-a-configmap", POLICY, {"state": "restored", "backup_file": "{backups}/secret.yaml"}, "backup_file"),
    ("restore-other-namespace", POLICY, {"state": "restored", "backup_file": "{backups}/other-namespace.yaml"}, "backup_file"),
    ("restore-other-cluster", POLICY, {"state": "restored", "backup_file": "{backups}/other-cluster.yaml"}, "backup_file"),
    ("policy-descheduler-namespace-missing", POLICY, page(descheduler_namespace="no-such-namespace"), "descheduler_namespace"),
    ("policy-backup-dir-is-a-file", POLICY, page(backup_dir="{backups}/not-yaml.yaml"), "backup_dir"),
    # ---------------------------------------------------------------- vm_migration_verify
    ("verify-without-baseline", VERIFY, {"mode": "verify", "namespace": "desched-test"}, "baseline"),
    ("verify-baseline-a-string", VERIFY, {"namespace": "desched-test", "baseline": "vm-1"}, "baseline"),
    ("verify-baseline-without-uid", VERIFY, {"namespace": "desched-test", "baseline": [{"name": "vm-1", "namespace": "desched-test"}]},
     "baseline"),
    ("verify-name-not-in-baseline", VERIFY, {"namespace": "desched-test", "names": ["vm-9"], "baseline": BASELINE}, "names"),
    ("verify-name-without-namespace", VERIFY, {"mode": "record", "names": ["vm-1"]}, "names[0]"),
    ("verify-namespace-invalid", VERIFY, {"mode": "record", "namespace": "Desched"}, "namespace"),
    ("verify-selector-malformed", VERIFY, {"mode": "record", "namespace": "desched-test", "label_selector": "app in ("},
     "label_selector"),
    ("verify-timeout-zero", VERIFY, {"namespace": "desched-test", "baseline": BASELINE, "timeout": 0}, "timeout"),
    ("verify-min-moved-negative", VERIFY, {"namespace": "desched-test", "baseline": BASELINE, "min_moved": -1}, "min_moved"),
    ("verify-record-nothing", VERIFY, {"mode": "record"}, "names"),
    ("verify-trigger-unknown", VERIFY, {"namespace": "desched-test", "baseline": BASELINE, "require_trigger": "cron"},
     "require_trigger"),
]


def write_backups(folder: Path, live: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    whole = yaml.safe_dump(live, sort_keys=False)
    (folder / "truncated.yaml").write_text(whole[: len(whole) // 2].rsplit("\n", 1)[0] + "\n  policy.yaml: |\n")
    (folder / "not-yaml.yaml").write_text("apiVersion: v1\nkind: ConfigMap\ndata: {policy.yaml: [unclosed\n")
    (folder / "secret.yaml").write_text(yaml.safe_dump(dict(live, kind="Secret")))
    (folder / "other-namespace.yaml").write_text(yaml.safe_dump(dict(live, metadata=dict(live["metadata"], namespace="kube-system"))))
    (folder / "other-cluster.yaml").write_text(yaml.safe_dump(dict(live, metadata=dict(
        live["metadata"], uid="00000000-0000-4000-8000-000000000000"), data={"policy.yaml": PAGE_POLICY})))


STATE_PATHS = ("/api/v1/configmaps", "/apis/operator.alauda.io/v1alpha1/resourcepatches", "/apis/kubevirt.io/v1/virtualmachines",
               "/apis/kubevirt.io/v1/virtualmachineinstancemigrations", "/apis/kubevirt.io/v1/kubevirts")


def state(sim) -> dict:
    """resourceVersions of the objects the modules could write, by kind, namespace and name."""
    result = {}
    for path in STATE_PATHS:
        with sim.request("GET", path) as response:
            for item in json.loads(response.read())["items"]:
                meta = item["metadata"]
                result[(item["kind"], meta.get("namespace"), meta["name"])] = meta["resourceVersion"]
    return result


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bad-input")
    with running_kubesim("rebalance-two-workers", workdir / "sim") as started:
        live = started.kubectl_json("-n", "descheduler", "get", "configmap", "descheduler")
        write_backups(workdir / "backups", live)
        started.backups = workdir / "backups"
        yield started


def test_the_table_has_at_least_forty_cases_over_every_module():
    assert len(CASES) >= 40 and len({case[0] for case in CASES}) == len(CASES)
    assert {case[1] for case in CASES} == {FACTS, POLICY, VERIFY}


@pytest.mark.parametrize("case_id,module,args,field", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(sim, tmp_path, case_id, module, args, field):
    args = {key: value.replace("{backups}", str(sim.backups)) if isinstance(value, str) else value for key, value in args.items()}
    args = {"kubeconfig": sim.kubeconfig, **args}
    if module == POLICY:
        args.setdefault("backup_dir", str(tmp_path / "written"))
        args.setdefault("cluster_name", "workload")
    before = state(sim)
    result = call_module(module, args)
    assert result["failed"], "{0}: accepted: {1}".format(case_id, {k: v for k, v in result.items() if k != "policy"})
    assert field in result["msg"], "{0}: the message does not name {1!r}: {2}".format(case_id, field, result["msg"])
    assert len(result["msg"]) < 2000 and "Traceback" not in result["msg"]
    assert state(sim) == before, case_id
    assert not (tmp_path / "written").exists() or not any((tmp_path / "written").iterdir()), \
        "{0}: a backup was written for a refused change".format(case_id)
