"""Running one of the collection's roles against the simulator from a test: a one-play playbook on localhost with
the caller's `module_defaults` (kubeconfig and context for the action group, as the roles expect), the venv's
ansible-playbook and a per-run ANSIBLE_HOME and TMPDIR (a short path under the system temp directory: ansible-core's
RPC socket lives there and Unix socket paths are limited to about 100 bytes); the role's result fact comes back as a
dict."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

PLAY = """\
- name: Run the role under test
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/kubevirt_ops.rebalance.kubevirt_ops:
      kubeconfig: "{{ kubeconfig }}"
      context: "{{ context | default(omit) }}"
  tasks:
    - name: Run the role
      ansible.builtin.include_role:
        name: kubevirt_ops.rebalance.%(role)s
    - name: Keep the result fact for the test
      ansible.builtin.copy:
        content: "{{ %(fact)s | to_json }}"
        dest: "{{ role_run_result_file }}"
        mode: "0600"
      check_mode: false  # the test's own file, written in check mode too
      delegate_to: localhost
"""


@dataclass
class RoleRun:
    rc: int
    stdout: str
    stderr: str
    result: Optional[dict]

    @property
    def failed(self) -> bool:
        return self.rc != 0


def run_role(sim, role: str, variables: dict, check: bool = False, expect_failure: bool = False, fact: Optional[str] = None,
             name: str = "run") -> RoleRun:
    """Run `role` with `variables` (extra vars) on localhost against `sim`; asserts success or failure."""
    workdir = Path(sim.kubeconfig).parent / "roles" / name
    workdir.mkdir(parents=True, exist_ok=True)
    playbook = workdir / "play.yml"
    playbook.write_text(PLAY % {"role": role, "fact": fact or role + "_result"})
    result_file = workdir / "result.json"
    if result_file.exists():
        result_file.unlink()
    extra = workdir / "vars.json"
    extra.write_text(json.dumps({"kubeconfig": sim.kubeconfig, "role_run_result_file": str(result_file), **variables}))
    inventory = workdir / "inventory"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter={0}\n".format(sys.executable))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"), "ANSIBLE_HOME": str(workdir / "ansible"),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
           "TMPDIR": tempfile.mkdtemp(prefix="role-"), "PATH": "{0}:{1}".format(BIN, os.environ.get("PATH", ""))}
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook), "-e", "@" + str(extra)] + (["--check"] if check else [])
    process = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    run = RoleRun(process.returncode, process.stdout, process.stderr, json.loads(result_file.read_text()) if result_file.exists() else None)
    expected = "a failure" if expect_failure else "success"
    assert run.failed == expect_failure, "expected {0}:\n{1}\n{2}".format(expected, process.stdout, process.stderr)
    return run
