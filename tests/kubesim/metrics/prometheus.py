"""The Prometheus HTTP API of a scenario's `metrics.prometheus`, answering instant queries from the usage model.

```yaml
metrics:
  prometheus:
    namespace: monitoring            # the Service the simulator creates (with its namespace) unless the scenario has it
    service: prometheus-k8s
    port: 9091                       # the Service's port (named `web`, or `portName`)
    token: s3cret                    # optional: every request needs `Authorization: Bearer s3cret`, else 401
    tokenSecret: {namespace: descheduler, name: prometheus-auth}   # optional: a Secret with key prometheusAuthToken
    series:                          # optional: fixed answers for other queries (error paths, odd shapes)
      broken_query: [{metric: {instance: worker-a}, value: 1.5}]
```

Where it answers:
- through the API server's service proxy, `/api/v1/namespaces/<ns>/services/<[https:]name[:port]>/proxy/<path>`, as
  the apiserver proxies to a Service (RBAC resource `services/proxy`, verb get for GET, create for POST). As upstream,
  the API server removes the `Authorization` header of an authenticated request before proxying
  (`k8s.io/apiserver/pkg/endpoints/filters/authentication.go`), so a token-protected Prometheus answers 401 there;
- at `/_kubesim/prometheus[/<cluster>]/<path>`, standing in for a Route to Prometheus: the `Authorization` header
  reaches it (never faulted or counted, as every admin path);
- in-cluster, for the simulated descheduler (`InClusterClient`): a URL naming the Service (`<name>.<ns>.svc:<port>`,
  `...svc.cluster.local`, `<name>.<ns>`, or `<name>` in the descheduler's namespace) reaches it; another host fails
  as Go's HTTP client does (`dial tcp: lookup <host> on 10.96.0.10:53: no such host`, or `connection refused` for a
  Service that is not the Prometheus or a port it does not serve).

Paths: `GET|POST /api/v1/query` (`query`, `time` as Unix seconds or RFC 3339; POST as a form, whose values win over
the URL's), `/-/ready`, `/-/healthy`; others 404 `404 page not found`, other methods 405.
Answers, as Prometheus v2/v3 writes them: `{"status":"success","data":{"resultType":"vector","result":[{"metric":
{"__name__":..., "instance":"worker-a", "job":"node-exporter"},"value":[<unix seconds>,"0.73"]}]}}`; an expression
that names nothing known: success with an empty vector (as a series that does not exist); a malformed one: 400
`{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\": 1:1: parse error: ..."}`.

Known queries (the value of each node that reports, see usage.py; `instance` = the node's name):
- `instance:node_cpu_utilisation:rate1m` (node-exporter mixin): cpu usage / cpu capacity, in [0, 1];
- `instance:node_memory_utilisation:ratio`: memory usage / memory capacity, in [0, 1];
- `descheduler:node:linear_amplified_ideal_point_positive_distance:k3:avg1m`: the query of OpenShift's
  KubeVirtRelieveAndMigrate profile (openshift/cluster-kube-descheduler-operator `utilizationProfileToPrometheusQuery`,
  its default `PrometheusCPUMemoryCombinedProfile`). The recording rule's expression is not in the reference read, so
  the simulator stands in with its own: clamp(mean(u_cpu, u_mem) + 3 * mean(max(u_cpu - avg_cpu, 0),
  max(u_mem - avg_mem, 0)), 0, 1) over the reporting nodes (a node above the cluster mean is amplified three times);
- each of them with label matchers (`{instance="worker-a"}`, `=`, `!=`), and the scenario's `series`.

Simplified: no PromQL engine (a malformed expression is found by a bracket and character check only); `time` sets
the samples' timestamp, not the state evaluated (always now); no TLS of its own (the proxy and the in-cluster client
accept http and https alike); no pressure (PSI) metrics."""
from __future__ import annotations

import base64
import json
import math
import re
import time
from datetime import datetime
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

from ..errors import ApiError

CPU_QUERY = "instance:node_cpu_utilisation:rate1m"
MEMORY_QUERY = "instance:node_memory_utilisation:ratio"
PROFILE_QUERY = "descheduler:node:linear_amplified_ideal_point_positive_distance:k3:avg1m"
KNOWN_QUERIES = (CPU_QUERY, MEMORY_QUERY, PROFILE_QUERY)
AMPLIFICATION = 3.0
TOKEN_KEY = "prometheusAuthToken"
CLUSTER_DNS = "10.96.0.10:53"
_KEYS = {"namespace", "service", "port", "portName", "token", "tokenSecret", "series"}
_SELECTOR = re.compile(r'^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s*$', re.S)
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=|!=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ALLOWED = re.compile(r'[A-Za-z0-9_:{}()\[\]=!~"\'.,\s+\-*/^%<>@]')
_PAIRS = {"(": ")", "{": "}", "[": "]"}
_UNCLOSED = {"(": "unclosed left parenthesis", "{": "unexpected end of input inside braces",
             "[": "unclosed left bracket"}
_UNEXPECTED = {")": "unexpected right parenthesis ')'", "}": "unexpected character: '}'",
               "]": "unexpected right bracket ']'"}


def parse_config(where: str, data) -> dict:
    from .usage import ConfigError   # pylint: disable=import-outside-toplevel
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(_KEYS)}")
    for key in ("namespace", "service"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ConfigError(f"{where}.{key}: required (a name)")
    port = data.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"{where}.port: required (a port number)")
    secret = data.get("tokenSecret")
    if secret is not None:
        if not isinstance(secret, dict) or set(secret) != {"namespace", "name"}:
            raise ConfigError(f"{where}.tokenSecret: expected {{namespace, name}}")
        if not data.get("token"):
            raise ConfigError(f"{where}.tokenSecret: needs `token` (the value the Secret holds)")
    series = data.get("series") or {}
    if not isinstance(series, dict):
        raise ConfigError(f"{where}.series: expected a mapping of query to samples")
    for query, samples in series.items():
        if not isinstance(samples, list) or not all(isinstance(s, dict) and "value" in s for s in samples):
            raise ConfigError(f"{where}.series.{query}: expected a list of {{metric, value}}")
    return {"namespace": data["namespace"], "service": data["service"], "port": port,
            "portName": data.get("portName", "web"), "token": data.get("token") or None, "tokenSecret": secret,
            "series": {str(q).strip(): list(s) for q, s in series.items()}}


def install(cluster, config: dict) -> None:
    """The Service (and its namespace), and the token Secret, unless the scenario created them itself."""
    def ensure(key: str, namespace: str | None, obj: dict) -> None:
        rt = cluster.registry.by_key(key)
        if rt is None or cluster.store.get(key, namespace or "", obj["metadata"]["name"]) is not None:
            return
        cluster.create(rt, namespace, obj, keep_status=True)
    for namespace in {config["namespace"]} | ({config["tokenSecret"]["namespace"]} if config["tokenSecret"] else set()):
        ensure("namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    labels = {"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/component": "prometheus"}
    ensure("services", config["namespace"], {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": config["service"], "namespace": config["namespace"], "labels": labels},
        "spec": {"type": "ClusterIP", "selector": labels,
                 "ports": [{"name": config["portName"], "port": config["port"], "targetPort": config["portName"],
                            "protocol": "TCP"}]}})
    if config["tokenSecret"]:
        secret = config["tokenSecret"]
        ensure("secrets", secret["namespace"], {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret["name"], "namespace": secret["namespace"]},
            "data": {TOKEN_KEY: base64.b64encode(config["token"].encode()).decode()}})


# ------------------------------------------------------------------------------------------ values
def format_value(value: float) -> str:
    """strconv.FormatFloat(v, 'f', -1, 64): the shortest decimal that reads back, never an exponent."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(float(value))), "f")
    return text[:-2] if text.endswith(".0") else text


def _clamp(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def node_values(snapshot, query: str) -> dict[str, float]:
    """The per-node value of a known query (see the module docstring)."""
    cpu, memory = {}, {}
    for name, usage in snapshot.nodes.items():
        capacity = snapshot.capacity.get(name) or {}
        cpu[name] = _clamp(usage["cpu"] / capacity["cpu"]) if capacity.get("cpu") else 0.0
        memory[name] = _clamp(usage["memory"] / capacity["memory"]) if capacity.get("memory") else 0.0
    if query == CPU_QUERY:
        return cpu
    if query == MEMORY_QUERY:
        return memory
    if not cpu:
        return {}
    avg_cpu, avg_mem = sum(cpu.values()) / len(cpu), sum(memory.values()) / len(memory)
    return {name: _clamp((cpu[name] + memory[name]) / 2 +
                         AMPLIFICATION * (max(cpu[name] - avg_cpu, 0) + max(memory[name] - avg_mem, 0)) / 2)
            for name in cpu}


class QueryError(Exception):
    """A request Prometheus refuses: HTTP code, errorType and the error text."""

    def __init__(self, code: int, error_type: str, message: str):
        super().__init__(message)
        self.code, self.error_type, self.message = code, error_type, message


def _parse_error(query: str) -> str | None:
    """`<line>:<column>: parse error: <what>` for what a bracket and character check finds, else None."""
    if not query.strip():
        return "1:1: parse error: no expression found in input"
    stack: list[tuple[str, int]] = []
    in_string = None
    for index, char in enumerate(query):
        column = index + 1
        if in_string:
            if char == in_string and query[index - 1] != "\\":
                in_string = None
            continue
        if char in "\"'":
            in_string = char
        elif char in _PAIRS:
            stack.append((char, column))
        elif char in _UNEXPECTED:
            if not stack or _PAIRS[stack[-1][0]] != char:
                return f"1:{column}: parse error: {_UNEXPECTED[char]}"
            stack.pop()
        elif not _ALLOWED.match(char):
            return f"1:{column}: parse error: unexpected character: {char!r}"
    if in_string:
        return f"1:{len(query)}: parse error: unterminated quoted string"
    if stack:
        char, column = stack[-1]
        return f"1:{column}: parse error: {_UNCLOSED[char]}"
    return None


def _matchers(text: str | None) -> list[tuple[str, str, str]] | None:
    if not text or not text.strip():
        return []
    found, pos = [], 0
    while pos < len(text):
        match = _MATCHER.match(text, pos)
        if not match:
            return None
        found.append((match.group(1), match.group(2), bytes(match.group(3), "utf-8").decode("unicode_escape")))
        pos = match.end()
    return found


def evaluate(model, query: str) -> list[dict]:
    """The samples of an instant query now: [{"metric": {...}, "value": float}]; QueryError for a bad one."""
    problem = _parse_error(query)
    if problem:
        raise QueryError(400, "bad_data", f'invalid parameter "query": {problem}')
    config = model.config.prometheus or {}
    static = (config.get("series") or {}).get(query.strip())
    if static is not None:
        return [{"metric": dict(s.get("metric") or {}), "value": float(s["value"])} for s in static]
    match = _SELECTOR.match(query)
    matchers = _matchers(match.group(2)) if match else None
    if not match or matchers is None or match.group(1) not in KNOWN_QUERIES:
        return []
    name = match.group(1)
    samples = []
    for node, value in sorted(node_values(model.snapshot(), name).items()):
        labels = {"__name__": name, "instance": node, "job": "node-exporter"}
        if all((labels.get(k, "") == v) == (op == "=") for k, op, v in matchers):
            samples.append({"metric": labels, "value": value})
    return samples


def _eval_time(text: str | None) -> float:
    if text in (None, ""):
        return time.time()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise QueryError(400, "bad_data", f'invalid parameter "time": cannot parse "{text}" to a valid timestamp') \
            from None


def _json(code: int, body: dict) -> tuple[int, str, bytes]:
    return code, "application/json", json.dumps(body, separators=(",", ":")).encode()


def serve(model, method: str, path: str, query_string: str, body: bytes, content_type: str,
          authorization: str | None) -> tuple[int, str, bytes]:
    """One HTTP request to the Prometheus: (status, content type, body)."""
    config = model.config.prometheus or {}
    if config.get("token") and (authorization or "") != f"Bearer {config['token']}":
        return 401, "text/plain; charset=utf-8", b"Unauthorized\n"
    path = "/" + path.lstrip("/")
    if path in ("/-/ready", "/-/healthy"):
        text = "Prometheus Server is Ready.\n" if path == "/-/ready" else "Prometheus Server is Healthy.\n"
        return 200, "text/plain; charset=utf-8", text.encode()
    if path != "/api/v1/query":
        return 404, "text/plain; charset=utf-8", b"404 page not found\n"
    if method not in ("GET", "POST"):
        return 405, "text/plain; charset=utf-8", b"Method Not Allowed\n"
    values = {k: v[-1] for k, v in parse_qs(query_string or "", keep_blank_values=True).items()}
    if method == "POST" and (content_type or "").split(";")[0].strip() == "application/x-www-form-urlencoded":
        values.update({k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()})
    try:
        at = _eval_time(values.get("time"))
        samples = evaluate(model, values.get("query", ""))
    except QueryError as err:
        return _json(err.code, {"status": "error", "errorType": err.error_type, "error": err.message})
    stamp = round(at, 3)
    result = [{"metric": s["metric"], "value": [stamp, format_value(s["value"])]} for s in samples]
    return _json(200, {"status": "success", "data": {"resultType": "vector", "result": result}})


# ------------------------------------------------------------------------------------- service proxy
def parse_service_ref(ref: str) -> tuple[str, str, str]:
    """`[scheme:]name[:port]` of a services/proxy path: (scheme, name, port)."""
    parts = ref.split(":")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2:
        return ("", parts[0], parts[1]) if parts[0] not in ("http", "https") else (parts[0], parts[1], "")
    return "", ref, ""


def _serves_port(service: dict, port: str) -> bool:
    ports = (service.get("spec") or {}).get("ports") or []
    if not port:
        return len(ports) == 1
    return any(str(p.get("port")) == port or p.get("name") == port for p in ports)


def _is_prometheus(model, namespace: str, name: str) -> bool:
    config = model.config.prometheus if model is not None else None
    return bool(config) and config["namespace"] == namespace and config["service"] == name


def proxy(cluster, namespace: str, ref: str, method: str, path: str, query_string: str, body: bytes,
          content_type: str) -> tuple[int, str, bytes]:
    """The API server's service proxy: the Service must exist and be the simulated Prometheus on that port."""
    from .usage import model as usage_model   # pylint: disable=import-outside-toplevel
    _scheme, name, port = parse_service_ref(ref)
    services = cluster.registry.by_key("services")
    service = cluster.find(services, namespace, name)
    if service is None:
        raise ApiError(404, "NotFound", f'services "{name}" not found', {"name": name, "kind": "services"})
    model = usage_model(cluster)
    if not _is_prometheus(model, namespace, name) or not _serves_port(service, port):
        raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{ref}"')
    # the authentication filter removed the caller's Authorization header before the proxy
    return serve(model, method, path, query_string, body, content_type, None)


# ------------------------------------------------------------------------------------ in-cluster client
class ClientError(Exception):
    """What the Go Prometheus client returns for a query (the text after `unable to capture prometheus metrics: `)."""


class InClusterClient:
    """promv1.NewAPI(client).Query as the descheduler calls it from its Pod: a POST form to `<url>/api/v1/query`."""

    def __init__(self, cluster, url: str, token: str | None, pod_namespace: str):
        self.cluster = cluster
        self.url = url
        self.token = token
        self.pod_namespace = pod_namespace

    def _endpoint(self) -> tuple[str, str]:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/api/v1/query", parts.path.rstrip("/")

    def _resolve(self, host: str) -> tuple[str, str] | None:
        labels = host.split(".")
        if host.endswith(".svc.cluster.local"):
            labels = labels[:-3]
        elif host.endswith(".svc"):
            labels = labels[:-1]
        if len(labels) == 1:
            return self.pod_namespace, labels[0]
        if len(labels) == 2:
            return labels[1], labels[0]
        return None

    def query(self, query: str) -> tuple[str, list[tuple[dict, float]]]:
        """(resultType, samples as (labels, value)); ClientError with the Go client's text for a failed request."""
        from .usage import model as usage_model   # pylint: disable=import-outside-toplevel
        endpoint, prefix = self._endpoint()
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https"):
            raise ClientError(f'Post "{endpoint}": unsupported protocol scheme "{parts.scheme}"')
        host = parts.hostname or ""
        port = str(parts.port or (443 if parts.scheme == "https" else 80))
        target = self._resolve(host)
        services = self.cluster.registry.by_key("services")
        service = self.cluster.find(services, target[0], target[1]) if target and services is not None else None
        if service is None:
            raise ClientError(f'Post "{endpoint}": dial tcp: lookup {host} on {CLUSTER_DNS}: no such host')
        model = usage_model(self.cluster)
        if not _is_prometheus(model, target[0], target[1]) or not any(
                str(p.get("port")) == port for p in (service.get("spec") or {}).get("ports") or []):
            address = (service.get("spec") or {}).get("clusterIP") or host
            raise ClientError(f'Post "{endpoint}": dial tcp {address}:{port}: connect: connection refused')
        form = f"query={_quote(query)}&time={format_value(time.time())}".encode()
        code, _type, body = serve(model, "POST", prefix + "/api/v1/query" if prefix else "/api/v1/query", "", form,
                                  "application/x-www-form-urlencoded",
                                  f"Bearer {self.token}" if self.token else None)
        return _read_answer(code, body)


def _quote(text: str) -> str:
    from urllib.parse import quote   # pylint: disable=import-outside-toplevel
    return quote(text, safe="")


def _read_answer(code: int, body: bytes) -> tuple[str, list[tuple[dict, float]]]:
    """client_golang's apiClientImpl.Do and Query: errors as `<errorType>: <message>`."""
    if code // 100 != 2 and code not in (400, 422):
        kind = "client_error: client error" if code // 100 == 4 else \
            "server_error: server error" if code // 100 == 5 else "bad_response: bad response code"
        raise ClientError(f"{kind}: {code}" if code // 100 in (4, 5) else f"{kind} {code}")
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise ClientError(f"bad_response: {exc}") from None
    if answer.get("status") == "error":
        raise ClientError(f"{answer.get('errorType', '')}: {answer.get('error', '')}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        return str(data.get("resultType") or ""), []
    return "vector", [(dict(item.get("metric") or {}), float(item["value"][1])) for item in data.get("result") or []]
