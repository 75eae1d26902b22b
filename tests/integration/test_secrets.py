"""Secrets never reach module results, logs or written files: a playbook run with -vvv over HTTPS uses a kubeconfig
holding a bearer token and a client certificate with its key (the run's, so the key really authenticates), `api_key`
with `ca_cert`, and `client_cert`/`client_key` files, for every module (facts, a policy apply that writes a backup,
migration verify with evidence files); neither the token, the key nor the api_key appears in the output, the
registered results printed back, or any file the run wrote."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from support.policy import PAGE_OPTIONS
from support.simulator import running_kubesim

from .ansible_run import run_playbook

pytestmark = pytest.mark.simulator

TOKEN = "s3cr3t-token-5f1e9c7a"
API_KEY = "s3cr3t-apikey-8d2b4e6f"
CERT_USER = "cert-user"     # the simulator makes its client certificate and key for the run


def grant_everything(sim) -> None:
    rbac = "/apis/rbac.authorization.k8s.io/v1/"
    for plural, body in (("clusterroles", {"metadata": {"name": "all"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
                         ("clusterrolebindings", {"metadata": {"name": "all"}, "subjects": [{"kind": "Group", "name": "system:authenticated"}],
                                                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "all"}})):
        sim.request_json("POST", rbac + plural, dict(body, apiVersion="rbac.authorization.k8s.io/v1",
                                                     kind="ClusterRole" if plural == "clusterroles" else "ClusterRoleBinding"))


def client_files(sim) -> dict:
    """The certificate user's `cert` and `key` files, as `/_kubesim/info` names them."""
    return sim.info()["credentials"]["users"][CERT_USER]


def secret_kubeconfig(sim, path: Path) -> str:
    """A kubeconfig whose admin entry holds the token and the certificate user's certificate and key; answers the key."""
    files = client_files(sim)
    key = Path(files["key"]).read_text()
    config = yaml.safe_load(Path(sim.kubeconfig).read_text())
    config["users"] = [{"name": "kubesim-admin", "user": {
        "token": TOKEN, "client-key-data": base64.b64encode(key.encode()).decode(),
        "client-certificate-data": base64.b64encode(Path(files["cert"]).read_bytes()).decode()}}]
    path.write_text(yaml.safe_dump(config))
    return key


def key_secrets(key: str) -> list[str]:
    """What of a PEM key must never show: each line of its body, and the start of the base64 a kubeconfig holds."""
    body = [line for line in key.splitlines() if line and not line.startswith("-----")]
    return body + [base64.b64encode(key.encode()).decode()[:40]]


def test_no_token_key_or_api_key_in_output_results_or_files_with_vvv(tmp_path):
    # RBAC on, and only these two tokens known: a run without the secrets would get 401, so the check is not vacuous
    scenario = tmp_path / "secrets.yaml"
    scenario.write_text(yaml.safe_dump({"extends": "rebalance-two-workers", "name": "secrets", "rbac": True,
                                        "users": [{"name": "token-user", "token": TOKEN}, {"name": "key-user", "token": API_KEY},
                                                  {"name": CERT_USER, "certificate": True}]}))
    with running_kubesim(str(scenario), tmp_path / "sim") as sim:
        grant_everything(sim)
        kubeconfig = tmp_path / "secret-kubeconfig"
        client_key = secret_kubeconfig(sim, kubeconfig)
        files = client_files(sim)
        out = tmp_path / "out"
        play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
            {"name": "facts from a kubeconfig with a token and a client key",
             "kubevirt_ops.rebalance.kubevirt_eviction_facts": {"kubeconfig": str(kubeconfig)}, "register": "facts"},
            {"name": "facts with host and api_key",
             "kubevirt_ops.rebalance.kubevirt_eviction_facts": {
                 "host": sim.url, "api_key": API_KEY, "ca_cert": sim.ca_file, "include": ["vmis"]},
             "register": "facts_key"},
            {"name": "facts with host and a client certificate's files",
             "kubevirt_ops.rebalance.kubevirt_eviction_facts": {
                 "host": sim.url, "ca_cert": sim.ca_file, "client_cert": files["cert"], "client_key": files["key"], "include": ["vmis"]},
             "register": "facts_cert"},
            {"name": "apply a policy (backup written)",
             "kubevirt_ops.rebalance.descheduler_policy": dict(
                 PAGE_OPTIONS, host=sim.url, api_key=API_KEY, ca_cert=sim.ca_file, backup_dir=str(out / "backups"),
                 cluster_name="workload"),
             "register": "applied"},
            {"name": "record",
             "kubevirt_ops.rebalance.vm_migration_verify": {
                 "kubeconfig": str(kubeconfig), "mode": "record", "namespace": "desched-test", "label_selector": "app=desched-test"},
             "register": "baseline"},
            {"name": "verify with evidence files (nothing moves: a failed verdict is fine here)",
             "kubevirt_ops.rebalance.vm_migration_verify": {
                 "host": sim.url, "api_key": API_KEY, "ca_cert": sim.ca_file, "namespace": "desched-test",
                 "baseline": "{{ baseline.baseline }}", "timeout": 2,
                 "evidence_path": str(out / "evidence")},
             "register": "verified", "ignore_errors": True},
            {"name": "a refused connection's error", "ignore_errors": True, "register": "refused",
             "kubevirt_ops.rebalance.kubevirt_eviction_facts": {"host": "http://127.0.0.1:1", "api_key": API_KEY, "api_retries": 0}},
            {"name": "print every result back", "ansible.builtin.copy": {
                "content": "{{ {'facts': facts, 'facts_key': facts_key, 'facts_cert': facts_cert, 'applied': applied, "
                           "'baseline': baseline, 'verified': verified, "
                           "'refused': refused} | to_nice_json }}", "dest": str(out / "results.json"), "mode": "0600"}},
        ]}]
        playbook = tmp_path / "play.yml"
        playbook.write_text(yaml.safe_dump(play, sort_keys=False))
        out.mkdir()
        process = run_playbook(sim, playbook, options=("-vvv",), env={"ANSIBLE_LOG_PATH": str(out / "ansible.log")})
        results = json.loads((out / "results.json").read_text())
        assert results["facts"]["vmis"] and results["facts_cert"]["vmis"]
        assert results["applied"]["changed"] and results["applied"]["backup_path"]
        assert results["refused"]["failed"] and (out / "evidence.json").is_file() and (out / "evidence.md").is_file()
        texts = {"stdout": process.stdout, "stderr": process.stderr}
        texts.update({str(p): p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()})
        assert len(texts) >= 6  # stdout, stderr, the log, results, backup, evidence json and md
        secrets = [TOKEN, API_KEY, *key_secrets(client_key)]
        for where, text in texts.items():
            for secret in secrets:
                assert secret not in text, "{0} shows {1}".format(where, secret[:12])
