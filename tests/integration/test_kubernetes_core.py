"""A playbook with kubernetes.core.k8s and kubernetes.core.k8s_info (tests/integration/playbooks/k8s_basics.yml)
run by the venv's ansible-playbook against the simulator: create, idempotent re-run, patch, check mode, diff,
wait for a Ready Pod, label and field selectors. Each run's task results are recorded as JSON by a small
callback written into the test's temporary directory; assertions look at those results, the PLAY RECAP and
the cluster itself (through the Python client)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from .ansible_run import BIN, RECORDER, short_temp_dir
from .conftest import ROOT

pytestmark = pytest.mark.simulator

COLLECTIONS = ROOT / ".collections"
KUBERNETES_CORE = COLLECTIONS / "ansible_collections" / "kubernetes" / "core"
PLAYBOOK = ROOT / "tests" / "integration" / "playbooks" / "k8s_basics.yml"
ANSIBLE_PLAYBOOK = BIN / "ansible-playbook"
NS = "k8s-basics"


class Run:
    def __init__(self, process: subprocess.CompletedProcess, record: dict):
        self.returncode, self.stdout, self.stderr = process.returncode, process.stdout, process.stderr
        self.tasks = {t["task"]: t for t in record.get("tasks", [])}
        self.stats = record.get("stats", {}).get("localhost", {})

    def result(self, task: str) -> dict:
        assert task in self.tasks, f"task {task!r} did not run; ran {list(self.tasks)}\n{self.stdout}"
        return self.tasks[task]["result"]

    def changed(self, task: str) -> bool:
        return bool(self.result(task).get("changed"))

    def recap(self) -> dict[str, int]:
        match = re.search(r"^localhost\s+:\s+(.*)$", self.stdout, re.MULTILINE)
        assert match, f"no PLAY RECAP line in:\n{self.stdout}"
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(1))}


@pytest.fixture(scope="module")
def kubernetes_core():
    if not (KUBERNETES_CORE / "plugins" / "modules" / "k8s.py").is_file():
        pytest.fail(f"kubernetes.core is missing: expected it under {KUBERNETES_CORE} (run `make collections`)",
                    pytrace=False)
    if not ANSIBLE_PLAYBOOK.is_file():
        pytest.fail(f"ansible-playbook is missing next to {sys.executable}", pytrace=False)
    return KUBERNETES_CORE


@pytest.fixture(scope="module")
def core(two_workers):
    return client.CoreV1Api(config.new_client_from_config(config_file=two_workers.kubeconfig, context="workload"))


@pytest.fixture(scope="module")
def play(kubernetes_core, two_workers, tmp_path_factory):
    """Run the playbook with extra vars and options; returns a Run with recorded results."""
    work = tmp_path_factory.mktemp("ansible")
    (work / "callback_plugins").mkdir()
    (work / "callback_plugins" / "record_results.py").write_text(RECORDER)
    inventory = work / "inventory"
    inventory.write_text(f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    runs = iter(range(1000))

    def run(*options: str, **extra_vars: str) -> Run:
        record_file = work / f"run-{next(runs)}.json"
        env = {**os.environ,
               "K8S_AUTH_KUBECONFIG": two_workers.kubeconfig,
               "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
               "ANSIBLE_CALLBACK_PLUGINS": str(work / "callback_plugins"),
               "ANSIBLE_CALLBACKS_ENABLED": "record_results",
               "ANSIBLE_STDOUT_CALLBACK": "default",
               "ANSIBLE_NOCOLOR": "1",
               "ANSIBLE_HOME": str(work / "ansible-home"),
               "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
               "ANSIBLE_RETRY_FILES_ENABLED": "0",
               # kubernetes.core caches discovery in the temp dir; keep it away from other runs' ports.
               "TMPDIR": short_temp_dir(work),
               "RECORD_RESULTS_FILE": str(record_file)}
        for key in ("K8S_AUTH_CONTEXT", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "ANSIBLE_CONFIG"):
            env.pop(key, None)
        command = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(PLAYBOOK), *options]
        for key, value in extra_vars.items():
            command += ["-e", f"{key}={value}"]
        process = subprocess.run(command, capture_output=True, text=True, env=env, timeout=180, cwd=work, check=False)
        record = json.loads(record_file.read_text()) if record_file.exists() else {}
        result = Run(process, record)
        assert process.returncode == 0, f"ansible-playbook failed ({process.returncode}):\n{process.stdout}\n" \
                                        f"{process.stderr}"
        return result
    return run


@pytest.fixture(scope="module")
def first_run(play):
    return play()


def configmap(core) -> client.V1ConfigMap:
    return core.read_namespaced_config_map("basics-cm", NS)


def test_first_run_creates_patches_and_waits(first_run, core):
    for task in ("Create the namespace", "Create the ConfigMap", "Patch the ConfigMap (merge)",
                 "Run a Pod and wait until it is Ready"):
        assert first_run.changed(task), task
    created = first_run.result("Create the ConfigMap")["result"]
    assert created["data"] == {"key": "one"}
    cm = configmap(core)
    assert cm.data == {"key": "one", "extra": "first"}
    assert cm.metadata.labels == {"app": "basics", "patched": "first"}
    # wait: true returned the Pod once Ready; the cluster agrees.
    waited = first_run.result("Run a Pod and wait until it is Ready")
    ready = {c["type"]: c["status"] for c in waited["result"]["status"]["conditions"]}
    assert ready["Ready"] == "True" and waited["result"]["status"]["phase"] == "Running"
    assert waited.get("duration", 0) >= 0
    pod = core.read_namespaced_pod("basics-pod", NS)
    assert pod.status.phase == "Running"
    assert first_run.stats["failures"] == 0 and first_run.stats["changed"] == 4
    assert first_run.recap()["changed"] == 4 and first_run.recap()["failed"] == 0


def test_k8s_info_label_and_field_selectors(first_run):
    pods = first_run.result("Find the running Pods of the app on worker-a")["resources"]
    assert [p["metadata"]["name"] for p in pods] == ["basics-pod"]
    configmaps = first_run.result("Find the patched ConfigMaps")["resources"]
    assert [c["metadata"]["name"] for c in configmaps] == ["basics-cm"]
    assert first_run.result("Find nothing on worker-b")["resources"] == []
    assert first_run.tasks["Check what k8s_info found"]["status"] == "ok"


def test_second_run_is_idempotent(first_run, play, core):
    before = configmap(core).metadata.resource_version
    second = play()
    assert not any(t["result"].get("changed") for t in second.tasks.values()), \
        [name for name, t in second.tasks.items() if t["result"].get("changed")]
    assert second.recap()["changed"] == 0 and second.stats["changed"] == 0
    assert configmap(core).metadata.resource_version == before


def test_check_mode_reports_changes_but_changes_nothing(first_run, play, core):
    before = configmap(core)
    checked = play("--check", basics_value="two", basics_patch="second")
    assert checked.changed("Create the ConfigMap")
    assert checked.changed("Patch the ConfigMap (merge)")
    assert checked.result("Create the ConfigMap")["result"]["data"]["key"] == "two"
    after = configmap(core)
    assert after.data == before.data == {"key": "one", "extra": "first"}
    assert after.metadata.labels["patched"] == "first"
    assert after.metadata.resource_version == before.metadata.resource_version


def test_diff_shows_the_change_and_applies_it(first_run, play, core):
    diffed = play("--diff", basics_value="three", basics_patch="third")
    assert diffed.changed("Create the ConfigMap")
    diff = diffed.result("Create the ConfigMap")["diff"]
    assert diff["before"]["data"]["key"] == "one" and diff["after"]["data"]["key"] == "three"
    # The default callback prints the diff: the old and new values on -/+ lines.
    assert re.search(r'^-\s+"key": "one"', diffed.stdout, re.MULTILINE), diffed.stdout
    assert re.search(r'^\+\s+"key": "three"', diffed.stdout, re.MULTILINE), diffed.stdout
    assert re.search(r'^\+\s+"patched": "third"', diffed.stdout, re.MULTILINE), diffed.stdout
    cm = configmap(core)
    assert cm.data == {"key": "three", "extra": "third"} and cm.metadata.labels["patched"] == "third"


def test_deleting_the_pod_and_rerunning_waits_again(first_run, play, core):
    core.delete_namespaced_pod("basics-pod", NS, grace_period_seconds=0)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("basics-pod", NS)
    assert gone.value.status == 404
    rerun = play(basics_value="three", basics_patch="third")
    assert rerun.changed("Run a Pod and wait until it is Ready")
    assert not rerun.changed("Create the ConfigMap")
    assert core.read_namespaced_pod("basics-pod", NS).status.phase == "Running"
