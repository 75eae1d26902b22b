"""Running Ansible against the simulator from a test: one module ad hoc, or a playbook, with the venv's
ansible, this checkout's collections path and a per-test ANSIBLE_HOME and TMPDIR (so parallel or repeated
tests never share caches), plus the page's way of editing the policy ConfigMap (`kubectl edit`)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RESULT_LINE = re.compile(r"^localhost \| (SUCCESS|CHANGED|FAILED!) => ", re.MULTILINE)


def ansible_env(workdir: Path, **extra: str) -> dict:
    """The environment of an ansible command run for a test in `workdir`."""
    temp = workdir / "tmp"
    temp.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"), "ANSIBLE_HOME": str(workdir / "ansible"),
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
            "TMPDIR": str(temp), "PATH": "{0}:{1}".format(BIN, os.environ.get("PATH", "")), **extra}


def localhost_inventory(workdir: Path) -> Path:
    inventory = workdir / "inventory"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter={0}\n".format(sys.executable))
    return inventory


def run_ansible_module(sim, module: str, args: dict, check: bool = False, diff: bool = False,
                       expect_failure: Optional[bool] = False) -> dict:
    """Run `module` once on localhost with `args` (kubeconfig defaults to the simulator's) and return its result,
    with the text printed before the result in `_output`. `expect_failure` True/False asserts the outcome;
    None accepts either."""
    workdir = Path(sim.kubeconfig).parent
    args = {"kubeconfig": sim.kubeconfig, **args}
    command = [str(BIN / "ansible"), "-i", str(localhost_inventory(workdir)), "localhost", "-m", module, "-a", json.dumps(args)]
    command += (["--check"] if check else []) + (["--diff"] if diff else [])
    process = subprocess.run(command, capture_output=True, text=True, timeout=300, env=ansible_env(workdir), check=False)
    match = RESULT_LINE.search(process.stdout)
    assert match, "no module result:\n{0}\n{1}".format(process.stdout, process.stderr)
    result = json.loads(process.stdout[match.end():])
    result["_output"] = process.stdout[:match.start()]
    failed = match.group(1) == "FAILED!"
    if expect_failure is not None:
        assert failed == expect_failure, "expected {0}:\n{1}\n{2}".format(
            "a failure" if expect_failure else "success", process.stdout, process.stderr)
    if expect_failure:
        assert process.returncode != 0 and result.get("msg"), process.stdout
    return result


def edit_policy_as_page(sim, tmp_path: Path, policy: str) -> subprocess.CompletedProcess:
    """`kubectl -n descheduler edit configmap descheduler`, as the page does, with an editor that writes
    `policy` into data.policy.yaml."""
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(policy)
    editor = tmp_path / "editor.py"
    editor.write_text(textwrap.dedent(f"""\
        import sys, yaml
        doc = yaml.safe_load(open(sys.argv[1]))
        doc["data"]["policy.yaml"] = open({str(policy_file)!r}).read()
        yaml.safe_dump(doc, open(sys.argv[1], "w"))
        """))
    return sim.kubectl("-n", "descheduler", "edit", "configmap", "descheduler", env={"EDITOR": f"{sys.executable} {editor}"})


def run_playbook_file(playbook, inventory: Path, workdir: Path, extra_vars: Optional[dict] = None, check: bool = False,
                      expect_failure: Optional[bool] = False, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run one of the collection's playbooks (a path, or `kubevirt_ops.rebalance.<name>`) with `inventory`, from
    `workdir` (relative report and backup directories land there). `expect_failure` True/False asserts the
    outcome; None accepts either."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)] + (["--check"] if check else [])
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    # A short TMPDIR: ansible-core's local RPC server puts a Unix socket there (108-byte path limit).
    with tempfile.TemporaryDirectory(prefix="ap-") as temp:
        env = ansible_env(workdir, PWD=str(workdir), ANSIBLE_RETRY_FILES_ENABLED="0", TMPDIR=temp)
        for key in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "ANSIBLE_CONFIG"):
            env.pop(key, None)
        process = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir, check=False)
    if expect_failure is not None:
        assert (process.returncode != 0) == expect_failure, "expected {0} ({1}):\n{2}\n{3}".format(
            "a failure" if expect_failure else "success", process.returncode, process.stdout[-20000:], process.stderr[-5000:])
    return process
