"""metrics.k8s.io/v1beta1 as metrics-server serves it through the API aggregator (kubernetes-sigs/metrics-server
`pkg/api/node.go`, `pod.go`, `table.go`, `pkg/storage/types.go`), from the cluster's usage model (usage.py).

- Discovery: the group in `/apis` (preferred version v1beta1), `/apis/metrics.k8s.io` and the resource list
  `nodes` (NodeMetrics, cluster-scoped) and `pods` (PodMetrics, namespaced), verbs get and list, empty singularName.
- NodeMetrics: `metadata` (name, the node's labels, creationTimestamp = now), `timestamp` (the scrape),
  `window: 15s`, `usage` {cpu in nanocores, memory in Ki}, for every node that reports (usage.py); list with
  `labelSelector` (the node's labels) and `fieldSelector` (metadata.name), sorted by name; get of a node without
  metrics: 404 `nodemetrics.metrics.k8s.io "<name>" not found`, of a missing node `node "<name>" not found`.
- PodMetrics: `metadata` (name, namespace, the Pod's labels, creationTimestamp), `timestamp`, `window`, and
  `containers[]` {name, usage {cpu, memory}} for each Running Pod on a reporting node; list per namespace or across
  namespaces (`/apis/metrics.k8s.io/v1beta1/pods`), selectors on the Pod's labels and metadata.name /
  metadata.namespace, sorted by namespace and name; get of a Pod without metrics: 404
  `podmetrics.metrics.k8s.io "<ns>/<name>" not found`, of a missing Pod `pod "<name>" not found`.
- Quantities as metrics-server prints real scrapes: cpu `uint64Quantity(nanocores, DecimalSI, -9)` in Go's canonical
  form (`1500000000n` is `1500m`, `2000000000n` is `2`), memory in Ki (a working set is whole pages).
- `as=Table` (kubectl get nodes.metrics.k8s.io): columns Name, cpu, memory, Window, as metrics-server's table.go.
- RBAC, counters and faults as for other resources: group `metrics.k8s.io`, resources `nodes`, `pods`; counters and
  fault rules name them `nodes.metrics.k8s.io` and `pods.metrics.k8s.io` (not to mix with the core kinds).

Simplified: no watch (405, as metrics-server before watch support); the window is fixed; no `swap`; a list that
matches nothing is an empty list (metrics-server: the same)."""
from __future__ import annotations

from ..errors import ApiError, method_not_allowed
from ..resources import Column, ResourceType
from ..selectors import field_matcher, label_matcher
from .usage import model as usage_model, now_rfc3339

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
WINDOW = "15s"


def format_nanocores(millicores: int) -> str:
    """Go's canonical form of NewScaledQuantity(nanocores, -9) for a whole number of millicores."""
    nanos = millicores * 1_000_000
    if nanos == 0:
        return "0"
    if nanos % 1_000_000_000 == 0:
        return str(nanos // 1_000_000_000)
    return f"{nanos // 1_000_000}m"


def format_kibibytes(num_bytes: int) -> str:
    if num_bytes == 0:
        return "0"
    return f"{-(-num_bytes // 1024)}Ki"


def _usage(values: dict[str, int]) -> dict[str, str]:
    return {"cpu": format_nanocores(values["cpu"]), "memory": format_kibibytes(values["memory"])}


def _cell(resource: str):
    def render(obj: dict, _value) -> str:
        if "usage" in obj:
            return obj["usage"].get(resource, "")
        total = {"cpu": 0, "memory": 0}
        from ..quantity import cpu_millis, memory_bytes   # pylint: disable=import-outside-toplevel
        for container in obj.get("containers") or []:
            total["cpu"] += cpu_millis(container["usage"].get("cpu"))
            total["memory"] += memory_bytes(container["usage"].get("memory"))
        return _usage(total)[resource]
    return render


def _name(obj: dict, _value) -> str:
    return obj["metadata"]["name"]


_COLUMNS = (Column("Name", format="name", render=_name), Column("cpu", format="quantity", render=_cell("cpu")),
            Column("memory", format="quantity", render=_cell("memory")),
            Column("Window", format="duration", path=".window"))
NODE_METRICS = ResourceType(GROUP, VERSION, "NodeMetrics", "nodes", namespaced=False, verbs=("get", "list"),
                            columns=_COLUMNS, generation=False)
POD_METRICS = ResourceType(GROUP, VERSION, "PodMetrics", "pods", namespaced=True, verbs=("get", "list"),
                           columns=_COLUMNS, generation=False)
TYPES = {"nodes": NODE_METRICS, "pods": POD_METRICS}
_STORAGE_NAMES = {"nodes": "nodemetrics", "pods": "podmetrics"}


def served(cluster) -> bool:
    return usage_model(cluster) is not None


def lookup(version: str, plural: str) -> ResourceType | None:
    return TYPES.get(plural) if version == VERSION else None


def counted_resource(rt: ResourceType) -> str:
    """The name counters and fault rules use: `nodes.metrics.k8s.io`."""
    return f"{rt.plural}.{GROUP}"


def resource_list(version: str) -> dict | None:
    if version != VERSION:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION,
            "resources": [{"name": rt.plural, "singularName": "", "namespaced": rt.namespaced, "kind": rt.kind,
                           "verbs": list(rt.verbs)} for rt in TYPES.values()]}


def _not_found(plural: str, name: str) -> ApiError:
    resource = _STORAGE_NAMES[plural]
    return ApiError(404, "NotFound", f'{resource}.{GROUP} "{name}" not found',
                    {"name": name, "group": GROUP, "kind": resource})


def _lister_not_found(kind: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{kind} "{name}" not found', {"name": name, "kind": kind})


def node_metrics(snapshot, name: str, created: str) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": dict(snapshot.node_labels.get(name) or {})},
            "timestamp": snapshot.timestamp, "window": WINDOW, "usage": _usage(snapshot.nodes[name])}


def pod_metrics(snapshot, key: tuple[str, str], created: str) -> dict:
    pod = snapshot.pods[key]
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "creationTimestamp": created,
                         "labels": dict(pod.labels)},
            "timestamp": snapshot.timestamp, "window": WINDOW,
            "containers": [{"name": name, "usage": _usage(values)} for name, values in pod.containers]}


def _typed(rt: ResourceType, obj: dict) -> dict:
    return {"kind": rt.kind, "apiVersion": API_VERSION, **obj}


def get(cluster, rt: ResourceType, namespace: str | None, name: str) -> dict:
    model = usage_model(cluster)
    snapshot = model.snapshot()
    created = now_rfc3339()
    if rt is NODE_METRICS:
        if cluster.store.get("nodes", "", name) is None:
            raise _lister_not_found("node", name)
        if name not in snapshot.nodes:
            raise _not_found("nodes", name)
        return _typed(rt, node_metrics(snapshot, name, created))
    if cluster.store.get("pods", namespace or "", name) is None:
        raise _lister_not_found("pod", name)
    if (namespace, name) not in snapshot.pods:
        raise _not_found("pods", f"{namespace}/{name}")
    return _typed(rt, pod_metrics(snapshot, (namespace or "", name), created))


def list_objects(cluster, rt: ResourceType, namespace: str | None, label_selector: str | None,
                 field_selector: str | None) -> list[dict]:
    """The items of a list (without kind/apiVersion, as Go serializes list items), in name order."""
    labels = label_matcher(label_selector)
    fields = field_matcher(field_selector, rt.supported_fields, rt.plural)
    snapshot = usage_model(cluster).snapshot()
    created = now_rfc3339()
    if rt is NODE_METRICS:
        items = [node_metrics(snapshot, name, created) for name in sorted(snapshot.nodes)]
    else:
        items = [pod_metrics(snapshot, key, created) for key in sorted(snapshot.pods)
                 if namespace in (None, "", key[0])]
    return [item for item in items if labels(item) and fields(item)]


def list_answer(rt: ResourceType, items: list[dict]) -> dict:
    return {"kind": rt.list_kind, "apiVersion": API_VERSION, "metadata": {}, "items": items}


def refuse(verb: str) -> None:
    """What metrics-server does not serve: watch and every write."""
    if verb not in ("get", "list"):
        raise method_not_allowed()
