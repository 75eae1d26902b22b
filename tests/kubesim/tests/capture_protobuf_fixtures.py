"""Regenerate the protobuf fixtures in fixtures/protobuf/ from the real kubectl.

`kubectl create <generator>` (configmap, namespace, job --from=cronjob/..., deployment, secret, ...) sends its
POST as `Content-Type: application/vnd.kubernetes.protobuf` and never falls back to JSON. This script records
those request bodies so that tests/kubesim/tests/test_protobuf.py can check tests/kubesim/protobuf.py against
what kubectl really sends.

Usage (from the repository root; needs a kubectl binary, nothing else):

    .venv/bin/python tests/kubesim/tests/capture_protobuf_fixtures.py [--kubectl PATH] [NAME ...]

With NAME arguments only those captures (see CAPTURES below) are redone. For every capture it:

1. starts a throwaway stdlib HTTP server on 127.0.0.1 that answers just what kubectl needs (/version,
   legacy discovery for /api and /apis, APIResourceLists, a CronJob `descheduler/nightly` for
   `create job --from=cronjob/nightly`) and, for a POST, records the raw body and answers 201 with a small
   JSON object of the right kind;
2. runs the kubectl command against it (temporary kubeconfig, HOME and --cache-dir) and writes the POST body
   to `<name>.bin`;
3. runs the same command with `--dry-run=client -o json` (kubectl prints the object, posts nothing) and writes
   that output, unchanged, to `<name>.json` as the independently obtained expectation;
4. records method, path, query, Content-Type, Accept and User-Agent of the POST in `index.json`.

This file is a helper, not a test: pytest does not collect it and the test suite never runs it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "protobuf"

SERVER_VERSION = {"major": "1", "minor": "35", "gitVersion": "v1.35.0", "platform": "linux/amd64"}

# group version -> [(resource, kind, namespaced, shortNames, verbs)]
CRUD = ["create", "delete", "get", "list", "patch", "update", "watch"]
RESOURCES: dict[str, list[tuple[str, str, bool, list[str], list[str]]]] = {
    "v1": [
        ("configmaps", "ConfigMap", True, ["cm"], CRUD),
        ("namespaces", "Namespace", False, ["ns"], CRUD),
        ("pods", "Pod", True, ["po"], CRUD),
        ("resourcequotas", "ResourceQuota", True, ["quota"], CRUD),
        ("secrets", "Secret", True, [], CRUD),
        ("serviceaccounts", "ServiceAccount", True, ["sa"], CRUD),
        ("serviceaccounts/token", "TokenRequest", True, [], ["create"]),
        ("services", "Service", True, ["svc"], CRUD),
    ],
    "apps/v1": [("deployments", "Deployment", True, ["deploy"], CRUD)],
    "batch/v1": [("cronjobs", "CronJob", True, ["cj"], CRUD), ("jobs", "Job", True, [], CRUD)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True, ["pdb"], CRUD)],
    "scheduling.k8s.io/v1": [("priorityclasses", "PriorityClass", False, ["pc"], CRUD)],
    "rbac.authorization.k8s.io/v1": [
        ("clusterrolebindings", "ClusterRoleBinding", False, [], CRUD),
        ("clusterroles", "ClusterRole", False, [], CRUD),
        ("rolebindings", "RoleBinding", True, [], CRUD),
        ("roles", "Role", True, [], CRUD),
    ],
    "networking.k8s.io/v1": [("ingresses", "Ingress", True, ["ing"], CRUD)],
}

# The CronJob served for `create job --from=cronjob/nightly`. kubectl decodes it into the Go type and copies
# spec.jobTemplate into the Job, so it exercises most of PodSpec. The pod template's creationTimestamp is
# set (a real server would send null) so that a real fixture carries a meta/v1 Time.
CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {
        "name": "nightly",
        "namespace": "descheduler",
        "uid": "6f1c2f3e-8a57-4d1e-9a52-2b7c1f0e9d11",
        "resourceVersion": "4242",
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {"app": "descheduler"},
    },
    "spec": {
        "schedule": "0 2 * * *",
        "concurrencyPolicy": "Forbid",
        "suspend": False,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {
            "metadata": {
                "labels": {"app": "descheduler", "tier": "batch"},
                "annotations": {"example.com/owner": "platform", "example.com/note": "nightly run"},
            },
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": 3600,
                "ttlSecondsAfterFinished": 600,
                "completions": 1,
                "parallelism": 1,
                "template": {
                    "metadata": {
                        "creationTimestamp": "2026-01-02T03:04:05Z",
                        "labels": {"app": "descheduler"},
                        "annotations": {"checksum/config": "abc123"},
                    },
                    "spec": {
                        "serviceAccountName": "descheduler-sa",
                        "restartPolicy": "Never",
                        "priorityClassName": "system-cluster-critical",
                        "terminationGracePeriodSeconds": 0,
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "tolerations": [
                            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                             "effect": "NoSchedule"},
                            {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoExecute",
                             "tolerationSeconds": 300},
                        ],
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [{"matchExpressions": [
                                        {"key": "kubernetes.io/arch", "operator": "In",
                                         "values": ["amd64", "arm64"]}]}]
                                }
                            },
                            "podAntiAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [{
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {
                                            "matchLabels": {"app": "descheduler"},
                                            "matchExpressions": [
                                                {"key": "tier", "operator": "NotIn", "values": ["web"]}],
                                        },
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }]
                            },
                        },
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 2000,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "initContainers": [
                            {"name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "echo init"],
                             "resources": {}},
                        ],
                        "containers": [{
                            "name": "descheduler",
                            "image": "registry.k8s.io/descheduler/descheduler:v0.32.0",
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/descheduler"],
                            "args": ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"],
                            "env": [
                                {"name": "LOG_LEVEL", "value": "debug"},
                                {"name": "POD_NAME", "valueFrom": {
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                                {"name": "MODE", "valueFrom": {"configMapKeyRef": {
                                    "name": "descheduler-policy", "key": "mode", "optional": True}}},
                            ],
                            "envFrom": [{"secretRef": {"name": "descheduler-env"}, "prefix": "DS_"}],
                            "ports": [{"name": "metrics", "containerPort": 10258, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"},
                                          "limits": {"cpu": "1", "memory": "1Gi"}},
                            "volumeMounts": [
                                {"name": "policy-volume", "mountPath": "/policy-dir", "readOnly": True},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 10258, "scheme": "HTTPS"},
                                              "initialDelaySeconds": 3, "periodSeconds": 10,
                                              "failureThreshold": 3},
                            "readinessProbe": {"tcpSocket": {"port": "metrics"}, "periodSeconds": 5},
                            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "privileged": False, "runAsUser": 0,
                                                "capabilities": {"drop": ["ALL"]}},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                        }],
                        "volumes": [
                            {"name": "policy-volume", "configMap": {
                                "name": "descheduler-policy", "defaultMode": 420,
                                "items": [{"key": "policy.yaml", "path": "policy.yaml"}]}},
                            {"name": "tmp", "emptyDir": {}},
                            {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                            {"name": "creds", "secret": {"secretName": "descheduler-creds", "optional": False}},
                            {"name": "data", "persistentVolumeClaim": {"claimName": "descheduler-data",
                                                                       "readOnly": True}},
                            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
                        ],
                    },
                },
            },
        },
    },
}

# name -> (kubectl arguments, name of the created object). Every entry must POST exactly once.
# (`create secret tls` is left out on purpose: its fixture would commit a private key.)
CAPTURES: dict[str, tuple[list[str], str]] = {
    "configmap": (["create", "configmap", "cm1", "--from-literal=a=1", "--from-literal=b=two", "-n", "default"],
                  "cm1"),
    "configmap_binary": (["create", "configmap", "cm2", "--from-file=blob.bin={datadir}/blob.bin",
                          "--from-literal=text=hello"], "cm2"),
    "namespace": (["create", "namespace", "ns1"], "ns1"),
    "job_from_cronjob": (["create", "job", "j1", "--from=cronjob/nightly", "-n", "descheduler"], "j1"),
    "job": (["create", "job", "j2", "--image=busybox", "--", "echo", "hi"], "j2"),
    "cronjob": (["create", "cronjob", "cj1", "--image=busybox", "--schedule=*/5 * * * *",
                 "--restart=OnFailure", "--", "date"], "cj1"),
    "deployment": (["create", "deployment", "web", "--image=nginx", "--replicas=2"], "web"),
    "deployment_ports": (["create", "deployment", "api", "--image=nginx", "--port=8080", "--replicas=0",
                          "-n", "apps"], "api"),
    "secret_generic": (["create", "secret", "generic", "s1", "--from-literal=k=v"], "s1"),
    "secret_docker_registry": (["create", "secret", "docker-registry", "reg1", "--docker-server=registry.example",
                                "--docker-username=u", "--docker-password=p", "--docker-email=u@example.com"],
                               "reg1"),
    "poddisruptionbudget": (["create", "poddisruptionbudget", "pdb1", "--selector=app=x", "--min-available=1"],
                            "pdb1"),
    "poddisruptionbudget_percent": (["create", "poddisruptionbudget", "pdb2", "--selector=app=y,tier in (a,b)",
                                     "--max-unavailable=50%"], "pdb2"),
    "priorityclass": (["create", "priorityclass", "pc1", "--value=1000"], "pc1"),
    "priorityclass_zero": (["create", "priorityclass", "pc0", "--value=0", "--description=zero",
                            "--preemption-policy=Never"], "pc0"),
    "service_clusterip": (["create", "service", "clusterip", "svc1", "--tcp=80:8080"], "svc1"),
    "service_headless": (["create", "service", "clusterip", "headless1", "--clusterip=None", "--tcp=80:http"],
                         "headless1"),
    "service_nodeport": (["create", "service", "nodeport", "np1", "--tcp=5678:8080", "--node-port=30080"], "np1"),
    "service_loadbalancer": (["create", "service", "loadbalancer", "lb1", "--tcp=443:8443"], "lb1"),
    "service_externalname": (["create", "service", "externalname", "ext1", "--external-name=db.example.com"],
                             "ext1"),
    "serviceaccount": (["create", "serviceaccount", "sa1"], "sa1"),
    "quota": (["create", "quota", "q1", "--hard=cpu=1,memory=1Gi,pods=2", "--scopes=NotTerminating"], "q1"),
    "role": (["create", "role", "r1", "--verb=get,list", "--resource=pods,configmaps",
              "--resource-name=a"], "r1"),
    "clusterrole": (["create", "clusterrole", "cr1", "--verb=get", "--non-resource-url=/healthz"], "cr1"),
    "rolebinding": (["create", "rolebinding", "rb1", "--clusterrole=view", "--user=alice",
                     "--serviceaccount=default:sa1"], "rb1"),
    "clusterrolebinding": (["create", "clusterrolebinding", "crb1", "--clusterrole=view", "--group=devs"], "crb1"),
    "ingress": (["create", "ingress", "ing1", "--class=nginx", "--rule=foo.example/bar*=svc1:8080,tls=foo-tls",
                 "--annotation=example.com/a=b"], "ing1"),
    "token": (["create", "token", "sa1", "--audience=https://example", "--duration=10m"], "sa1"),
}


def _group_list() -> dict:
    groups = []
    for gv in RESOURCES:
        if "/" not in gv:
            continue
        group, version = gv.split("/")
        entry = {"groupVersion": gv, "version": version}
        groups.append({"name": group, "versions": [entry], "preferredVersion": entry})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_list(gv: str) -> dict:
    resources = []
    for name, kind, namespaced, short, verbs in RESOURCES[gv]:
        item = {"name": name, "singularName": "" if "/" in name else kind.lower(), "namespaced": namespaced,
                "kind": kind, "verbs": verbs}
        if short:
            item["shortNames"] = short
        if name == "serviceaccounts/token":
            item.update(group="authentication.k8s.io", version="v1")
        resources.append(item)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.object_name = ""

    def add(self, req: dict) -> None:
        with self.lock:
            self.requests.append(req)

    def take(self) -> list[dict]:
        with self.lock:
            out, self.requests = self.requests, []
            return out


def make_handler(rec: Recorder, port_holder: list[int]):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # keep the capture output readable
            pass

        def _send(self, code: int, obj: dict) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _not_found(self) -> None:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                             "message": f"the server could not find the requested resource ({self.path})",
                             "code": 404})

        def _record(self, body: bytes) -> dict:
            url = urlsplit(self.path)
            req = {"method": self.command, "path": url.path, "query": parse_qs(url.query),
                   "headers": dict(self.headers.items()), "body": body}
            rec.add(req)
            return req

        def do_GET(self) -> None:
            self._record(b"")
            path = urlsplit(self.path).path.rstrip("/")
            if path == "/version":
                return self._send(200, SERVER_VERSION)
            if path == "/api":
                return self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port_holder[0]}"}]})
            if path == "/apis":
                return self._send(200, _group_list())
            if path == "/api/v1":
                return self._send(200, _resource_list("v1"))
            if path.startswith("/apis/") and path.count("/") == 3 and path[len("/apis/"):] in RESOURCES:
                return self._send(200, _resource_list(path[len("/apis/"):]))
            if path == "/apis/batch/v1/namespaces/descheduler/cronjobs/nightly":
                return self._send(200, CRONJOB)
            return self._not_found()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            req = self._record(body)
            parts = req["path"].strip("/").split("/")
            gv = "v1" if parts[0] == "api" else "/".join(parts[1:3])
            rest = parts[2:] if parts[0] == "api" else parts[3:]
            namespace = rest[1] if rest[0] == "namespaces" and len(rest) > 2 else None
            resource = rest[2] if namespace else rest[0]
            if rest[-1] == "token":
                return self._send(201, {
                    "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                    "metadata": {"name": rest[-2], "namespace": namespace},
                    "spec": {"audiences": ["https://example"]},
                    "status": {"token": "stub-token", "expirationTimestamp": "2026-01-02T03:14:05Z"}})
            kind = next(row[1] for row in RESOURCES[gv] if row[0] == resource)
            meta = {"name": rec.object_name, "uid": "0b7f3f0e-1111-4222-8333-944445555666",
                    "resourceVersion": "1", "creationTimestamp": "2026-01-02T03:04:05Z"}
            if namespace:
                meta["namespace"] = namespace
            self._send(201, {"apiVersion": gv, "kind": kind, "metadata": meta})

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubectl", default=shutil.which("kubectl") or "kubectl")
    ap.add_argument("names", nargs="*", help="captures to redo (default: all)")
    args = ap.parse_args(argv)
    unknown = set(args.names) - set(CAPTURES)
    if unknown:
        ap.error(f"unknown capture(s): {', '.join(sorted(unknown))}")

    rec = Recorder()
    port_holder = [0]
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(rec, port_holder))
    port_holder[0] = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()

    FIXTURES.mkdir(parents=True, exist_ok=True)
    index_path = FIXTURES / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() and args.names else {}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kubectl-capture-") as tmp:
        tmpdir = Path(tmp)
        datadir = tmpdir / "data"
        datadir.mkdir()
        (datadir / "blob.bin").write_bytes(bytes([0, 1, 2, 0xFE, 0xFF]) + b"not utf-8 \xc3\x28")
        kubeconfig = tmpdir / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{port_holder[0]}"}}],
            "users": [{"name": "stub", "user": {}}],
            "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": "default"}}],
            "current-context": "stub",
        }))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmpdir / "home"),
               "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(tmpdir / "cache")}
        base = [args.kubectl, "--cache-dir", str(tmpdir / "cache")]

        for name in args.names or list(CAPTURES):
            cmd_args, obj_name = CAPTURES[name]
            cmd_args = [a.replace("{datadir}", str(datadir)) for a in cmd_args]
            rec.object_name = obj_name
            rec.take()
            run = subprocess.run(base + cmd_args, env=env, capture_output=True, text=True, timeout=60, check=False)
            posts = [r for r in rec.take() if r["method"] == "POST"]
            if run.returncode != 0 or len(posts) != 1:
                print(f"FAIL {name}: rc={run.returncode} posts={len(posts)}\n{run.stdout}{run.stderr}")
                failures += 1
                continue
            post = posts[0]
            (FIXTURES / f"{name}.bin").write_bytes(post["body"])
            headers = {k.lower(): v for k, v in post["headers"].items()}
            index[name] = {
                "command": ["kubectl"] + [a.replace(str(datadir), "<datadir>") for a in cmd_args],
                "method": post["method"], "path": post["path"], "query": post["query"],
                "content_type": headers.get("content-type"), "accept": headers.get("accept"),
                "user_agent": headers.get("user-agent"), "body_bytes": len(post["body"]),
            }

            # flags go before a `--`, after which kubectl passes everything on as the container's command
            cut = cmd_args.index("--") if "--" in cmd_args else len(cmd_args)
            dry_args = cmd_args[:cut] + ["--dry-run=client", "-o", "json"] + cmd_args[cut:]
            dry = subprocess.run(base + dry_args, env=env,
                                 capture_output=True, text=True, timeout=60, check=False)
            dry_posts = [r for r in rec.take() if r["method"] == "POST"]
            if dry.returncode == 0 and not dry_posts:
                expected = json.loads(dry.stdout)
                (FIXTURES / f"{name}.json").write_text(json.dumps(expected, indent=2) + "\n")
                index[name]["expected"] = f"{name}.json"
            else:
                # e.g. `create token` has no client-side dry run; the test then only checks the decoding runs.
                (FIXTURES / f"{name}.json").unlink(missing_ok=True)
                index[name]["expected"] = None
                index[name]["dry_run_error"] = (dry.stderr or dry.stdout).strip()[:300]
            print(f"ok   {name}: {post['method']} {post['path']} {headers.get('content-type')} "
                  f"{len(post['body'])} bytes")

    server.shutdown()
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
