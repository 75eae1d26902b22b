"""The DefaultEvictor plugin of descheduler v0.36 (pkg/framework/plugins/defaultevictor: defaultevictor.go,
constraints.go, types.go): which Pods a strategy may evict.

`Filter` (decides removable versus non-removable Pods):
- the annotation `descheduler.alpha.kubernetes.io/evict` (key only) makes a Pod evictable, skipping every
  other check; `noEvictionPolicy: Mandatory` honours `descheduler.alpha.kubernetes.io/prefer-no-eviction`;
- mirror Pods (`kubernetes.io/config.mirror`), static Pods (`kubernetes.io/config.source` other than `api`)
  and terminating Pods (deletionTimestamp) are never evicted;
- protections, from `podProtections` (or, when it lists nothing, the deprecated booleans): on by default
  `PodsWithLocalStorage` (an emptyDir or hostPath volume), `SystemCriticalPods` (priority >= 2000000000, plus
  `priorityThreshold` {value|name}, default 2000000000), `FailedBarePods` (a Pod without ownerReferences is
  protected; with the protection disabled only a Failed bare Pod may go), `DaemonSetPods`; extra
  `PodsWithPVC` (any PVC volume, or only PVCs of `config.PodsWithPVC.protectedStorageClasses`),
  `PodsWithoutPDB` (no PodDisruptionBudget selects the Pod; an empty selector selects nothing),
  `PodsWithResourceClaims` (`spec.resourceClaims`);
- `labelSelector`, `minReplicas` (Pods of the same owner UID), `minPodAge` (from `status.startTime`).
Failures are logged at V(4): `"Pod fails the following checks" pod=... checks=...`.

`PreEvictionFilter` (checked just before an eviction):
- `nodeFit` (pkg/descheduler/node/node.go NodeFit, PodFitsAnyOtherNode): the Pod must fit on another Ready node
  (a node without a Ready condition is ready), restricted by the evictor's own `nodeSelector`, not the
  policy's. The first failing check is the node's error, logged at V(4) as `"Pod does not fit on node"`:
  nodeSelector and required node affinity (`pod node selector does not match the node label`; an empty
  term matches nothing), NoSchedule/NoExecute taints (`pod does not tolerate taints on the node`), every
  requested resource against allocatable minus the requests of the node's non-finished Pods, a resource
  the node does not list having nothing left (`insufficient <resource>`, then `insufficient pods`),
  `spec.unschedulable` whatever the Pod tolerates (`node is not schedulable`), the Pod's required
  anti-affinity against the node's Pods (`pod matches inter-pod anti-affinity rule of other pod on node`);
  no node -> the V(0) line `"pod does not fit on any other node because of nodeSelector(s), Taint(s), or
  nodes marked as unschedulable"`;
- `namespaceLabelSelector` (its `matchLabels`): the Pod's Namespace must match.

Simplified: a Pod's priority is `spec.priority`, or the value of its `priorityClassName` when that
PriorityClass exists (the simulator does not run the Priority admission plugin); PriorityClass lookups
read the cluster at each cycle; `minPodAge` compares it with the Pod's age in simulated seconds (wall-clock age
times the scenario's timeScale)."""
from __future__ import annotations

import calendar
import time

from ..controllers.scheduler import _match_node_selector_term, _tolerates
from ..quantity import is_terminal, parse, pod_requests
from ..selectors import Requirement, label_matcher, match_label_selector_object
from .klog import Logger, kobj
from .policy import SYSTEM_CRITICAL_PRIORITY, aggregate, effective_protections, format_duration

EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
_BUILTIN_PRIORITY = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}

SRC_DEFAULTEVICTOR = "defaultevictor.go"


class EvictorError(Exception):
    """The DefaultEvictor cannot be built (the profile then fails to build)."""


def _entries(cluster, key: str, namespace: str | None = None) -> list[dict]:
    if cluster.registry.by_key(key) is None:
        return []
    return [entry.obj for entry in cluster.store.entries(key, namespace)]


def priority_class_value(cluster, name: str) -> int | None:
    for obj in _entries(cluster, "priorityclasses.scheduling.k8s.io"):
        if obj["metadata"]["name"] == name:
            return int(obj.get("value", 0))
    return _BUILTIN_PRIORITY.get(name)


def pod_priority(cluster, pod: dict) -> int | None:
    spec = pod.get("spec") or {}
    if spec.get("priorityClassName"):
        value = priority_class_value(cluster, spec["priorityClassName"])
        if value is not None:
            return value
    priority = spec.get("priority")
    return int(priority) if priority is not None else None


def is_ready(node: dict) -> bool:
    """nodeutil.IsReady: a Ready condition that is not True makes the node not ready."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return False
    return True


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """metav1.LabelSelectorAsSelector(...).Matches: nil or empty selects everything here."""
    if not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions")):
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        op = _OPS.get(expr.get("operator", ""))
        if op is None:
            raise EvictorError(f'"{expr.get("operator")}" is not a valid label selector operator')
        if not Requirement(expr.get("key", ""), op, tuple(expr.get("values") or ())).matches(labels):
            return False
    return True


def _requested(pod: dict) -> dict[str, int]:
    """resourcehelper.PodRequests for every resource the Pod names (cpu in millicores, the rest in units)."""
    spec = pod.get("spec") or {}
    basic = pod_requests(pod)
    names = {name for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
             for name in ((c.get("resources") or {}).get("requests") or {})} | set(spec.get("overhead") or {})
    requests = {name: basic[name] for name in ("cpu", "memory") if name in names}
    for name in sorted(names - {"cpu", "memory", "pods"}):
        total = sum(_units(c, name) for c in spec.get("containers") or [])
        for container in spec.get("initContainers") or []:
            total = max(total, _units(container, name))
        requests[name] = total + _units({"resources": {"requests": spec.get("overhead")}}, name)
    return requests


def _units(container: dict, name: str) -> int:
    value = ((container.get("resources") or {}).get("requests") or {}).get(name)
    return int(parse(value).to_integral_value(rounding="ROUND_CEILING"))


def _allocatable(node: dict, name: str) -> int:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(name)
    if value is None:
        return 0   # a resource the node does not list has nothing left
    quantity = parse(value) * (1000 if name == "cpu" else 1)
    return int(quantity.to_integral_value(rounding="ROUND_CEILING"))


def _anti_affinity_match(pod: dict, node: dict, pods_on_node: list[dict]) -> bool:
    terms = (((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}) \
        .get("requiredDuringSchedulingIgnoredDuringExecution") or []
    node_labels = node["metadata"].get("labels") or {}
    for term in terms:
        namespaces = term.get("namespaces") or [pod["metadata"].get("namespace")]
        selector = term.get("labelSelector")
        if selector is None or term.get("topologyKey") not in node_labels:
            continue   # a null selector selects nothing; the node must carry the topology key
        for other in pods_on_node:
            meta = other["metadata"]
            if meta["name"] == pod["metadata"]["name"] or meta.get("namespace") not in namespaces:
                continue
            if not selector or selector_matches(selector, meta.get("labels") or {}):
                return True
    return False


def node_fit_error(pod: dict, node: dict, pods_on_node: list[dict], used: dict[str, int]) -> str | None:
    """nodeutil.NodeFit: the first check the node fails, in upstream's words, or None."""
    spec, node_spec = pod.get("spec") or {}, node.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()) or (
            required is not None and not any((t.get("matchExpressions") or t.get("matchFields"))
                                             and _match_node_selector_term(t, node)
                                             for t in required.get("nodeSelectorTerms") or [])):
        return "pod node selector does not match the node label"
    if any(taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint)
           for taint in node_spec.get("taints") or []):
        return "pod does not tolerate taints on the node"
    if spec.get("nodeName") != node["metadata"]["name"]:
        for name, wanted in _requested(pod).items():
            if wanted > _allocatable(node, name) - used.get(name, 0):
                return f"insufficient {name}"
        if _allocatable(node, "pods") - len(pods_on_node) <= 0:
            return "insufficient pods"
    if node_spec.get("unschedulable"):
        return "node is not schedulable"
    if _anti_affinity_match(pod, node, pods_on_node):
        return "pod matches inter-pod anti-affinity rule of other pod on node"
    return None


def _has_local_storage(pod: dict) -> bool:
    return any("emptyDir" in volume or "hostPath" in volume for volume in (pod.get("spec") or {}).get("volumes") or [])


def _pvc_names(pod: dict) -> list[str]:
    return [volume["persistentVolumeClaim"].get("claimName", "")
            for volume in (pod.get("spec") or {}).get("volumes") or [] if volume.get("persistentVolumeClaim")]


def _owner_refs(pod: dict) -> list[dict]:
    return list(pod["metadata"].get("ownerReferences") or [])


class DefaultEvictor:
    """One profile's DefaultEvictor, built at the start of a cycle (as NewProfile builds it upstream)."""

    def __init__(self, cluster, args: dict, log: Logger, pods: list[dict] | None = None):
        self.cluster = cluster
        self.args = args
        self.log = log
        self.protections = effective_protections(args)
        self.constraints = []
        self._requests: dict[int, tuple[dict, dict]] = {}   # stored objects are immutable: cache by identity
        pods = pods if pods is not None else _entries(cluster, "pods")
        self._build(pods)

    # --------------------------------------------------------------------------------------- building
    def _build(self, pods: list[dict]) -> None:
        enabled = set(self.protections)
        if "SystemCriticalPods" in enabled:
            self.constraints.append(self._critical)
            threshold = self._priority_threshold()
            self.constraints.append(lambda pod: self._below_threshold(pod, threshold))
        else:
            self.log.info(1, f"{SRC_DEFAULTEVICTOR}:197", "Warning: System critical pod protection is disabled. This "
                          "could cause eviction of Kubernetes system pods.", "plugin", "DefaultEvictor")
        if "FailedBarePods" in enabled:
            self.constraints.append(lambda pod: "pod does not have any ownerRefs" if not _owner_refs(pod) else None)
        else:
            self.log.info(1, f"{SRC_DEFAULTEVICTOR}:177", "Warning: EvictFailedBarePods is set to True. This could cause "
                          "eviction of pods without ownerReferences.", "plugin", "DefaultEvictor")
            self.constraints.append(
                lambda pod: "pod does not have any ownerRefs and is not in failed phase"
                if not _owner_refs(pod) and (pod.get("status") or {}).get("phase") != "Failed" else None)
        if "PodsWithLocalStorage" in enabled:
            self.constraints.append(lambda pod: "pod has local storage and is protected against eviction"
                                    if _has_local_storage(pod) else None)
        if "DaemonSetPods" in enabled:
            self.constraints.append(lambda pod: "daemonset pods are protected against eviction"
                                    if any(ref.get("kind") == "DaemonSet" for ref in _owner_refs(pod)) else None)
        if "PodsWithPVC" in enabled:
            self._add_pvc_protection()
        if "PodsWithoutPDB" in enabled:
            pdbs = _entries(self.cluster, "poddisruptionbudgets.policy")
            self.constraints.append(lambda pod: None if self._covered_by_pdb(pod, pdbs) else
                                    "pod does not have a PodDisruptionBudget and is protected against eviction")
        if "PodsWithResourceClaims" in enabled:
            self.constraints.append(lambda pod: "pod has ResourceClaims and descheduler is configured to protect "
                                    "ResourceClaims pods" if (pod.get("spec") or {}).get("resourceClaims") else None)
        selector = self.args.get("labelSelector")
        if selector and (selector.get("matchLabels") or selector.get("matchExpressions")):
            selector_matches(selector, {})   # an invalid operator fails the build, as LabelSelectorAsSelector does
            self.constraints.append(lambda pod: None if selector_matches(selector, pod["metadata"].get("labels") or {})
                                    else "pod labels do not match the labelSelector filter in the policy parameter")
        min_replicas = int(self.args.get("minReplicas") or 0)
        if min_replicas > 1:
            by_owner: dict[str, int] = {}
            for pod in pods:
                for ref in _owner_refs(pod):
                    by_owner[ref.get("uid", "")] = by_owner.get(ref.get("uid", ""), 0) + 1
            self.constraints.append(lambda pod: self._min_replicas(pod, by_owner, min_replicas))
        min_age = self.args.get("minPodAge")
        if min_age is not None:
            scale = self.cluster.clock.time_scale
            self.constraints.append(lambda pod: self._min_age(pod, min_age, scale))

    def _priority_threshold(self) -> int:
        threshold = self.args.get("priorityThreshold") or {}
        if threshold.get("value") is not None:
            value = int(threshold["value"])
        elif threshold.get("name"):
            found = priority_class_value(self.cluster, threshold["name"])
            if found is None:
                self.log.error(f"{SRC_DEFAULTEVICTOR}:203", "unable to get priority value from the priority class: "
                               f'priorityclasses.scheduling.k8s.io "{threshold["name"]}" not found',
                               "Failed to get threshold priority from args")
                return 0
            value = found
        else:
            return SYSTEM_CRITICAL_PRIORITY
        if value > SYSTEM_CRITICAL_PRIORITY:
            self.log.error(f"{SRC_DEFAULTEVICTOR}:203", f"priority threshold can't be greater than "
                           f"{SYSTEM_CRITICAL_PRIORITY}", "Failed to get threshold priority from args")
            return 0
        return value

    def _critical(self, pod: dict) -> str | None:
        priority = pod_priority(self.cluster, pod)
        if priority is not None and priority >= SYSTEM_CRITICAL_PRIORITY:
            return "pod has system critical priority and is protected against eviction"
        return None

    def _below_threshold(self, pod: dict, threshold: int) -> str | None:
        priority = pod_priority(self.cluster, pod)
        if priority is None or priority < threshold:
            return None
        return "pod has higher priority than specified priority class threshold"

    def _add_pvc_protection(self) -> None:
        config = ((self.args.get("podProtections") or {}).get("config") or {}).get("PodsWithPVC") or {}
        protected = {sc.get("name") for sc in config.get("protectedStorageClasses") or []}
        if not protected:
            self.constraints.append(lambda pod: "pod with PVC is protected against eviction" if _pvc_names(pod) else None)
            return
        claims = {(obj["metadata"].get("namespace"), obj["metadata"]["name"]): obj
                  for obj in _entries(self.cluster, "persistentvolumeclaims")}

        def check(pod: dict) -> str | None:
            namespace = pod["metadata"].get("namespace")
            for claim_name in _pvc_names(pod):
                claim = claims.get((namespace, claim_name))
                if claim is None:
                    return (f'failed to get persistent volume claim "{namespace}"/"{claim_name}": '
                            f'persistentvolumeclaim "{claim_name}" not found')
                storage_class = (claim.get("spec") or {}).get("storageClassName")
                if not storage_class:
                    return f'failed to resolve storage class for pod "{namespace}"/"{claim_name}"'
                if storage_class in protected:
                    return f'pod using protected storage class "{storage_class}"'
            return None
        self.constraints.append(check)

    @staticmethod
    def _covered_by_pdb(pod: dict, pdbs: list[dict]) -> bool:
        labels = pod["metadata"].get("labels") or {}
        for pdb in pdbs:
            if pdb["metadata"].get("namespace") != pod["metadata"].get("namespace"):
                continue
            selector = (pdb.get("spec") or {}).get("selector")
            if not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions")):
                continue   # a nil or empty selector matches nothing here (the PDB lister's rule)
            if match_label_selector_object(selector, labels):
                return True
        return False

    @staticmethod
    def _min_replicas(pod: dict, by_owner: dict[str, int], minimum: int) -> str | None:
        refs = _owner_refs(pod)
        if len(refs) != 1:
            return None
        count = by_owner.get(refs[0].get("uid", ""), 0)
        if count < minimum:
            return f"owner has {count} replicas which is less than minReplicas of {minimum}"
        return None

    @staticmethod
    def _min_age(pod: dict, min_age: float, time_scale: float) -> str | None:
        started = (pod.get("status") or {}).get("startTime")
        age = None
        if started:
            try:
                age = (time.time() - calendar.timegm(time.strptime(started, "%Y-%m-%dT%H:%M:%SZ"))) * time_scale
            except ValueError:
                age = None
        if age is None or age < min_age:
            return f"pod age is not older than MinPodAge: {format_duration(min_age)} seconds"
        return None

    # ------------------------------------------------------------------------------------ extension points
    def filter(self, pod: dict) -> bool:
        meta = pod["metadata"]
        annotations = meta.get("annotations") or {}
        if EVICT_ANNOTATION in annotations:
            return True
        if self.args.get("noEvictionPolicy") == "Mandatory" and NO_EVICTION_ANNOTATION in annotations:
            return False
        problems = []
        if "kubernetes.io/config.mirror" in annotations:
            problems.append("pod is a mirror pod")
        source = annotations.get("kubernetes.io/config.source")
        if source is not None and source != "api":
            problems.append("pod is a static pod")
        if meta.get("deletionTimestamp"):
            problems.append("pod is terminating")
        for constraint in self.constraints:
            problem = constraint(pod)
            if problem:
                problems.append(problem)
        if problems:
            self.log.info(4, f"{SRC_DEFAULTEVICTOR}:415", "Pod fails the following checks", "pod", kobj(pod),
                          "checks", aggregate(problems))
            return False
        return True

    def pre_eviction_filter(self, pod: dict) -> bool:
        if self.args.get("nodeFit") and not self.fits_other_node(pod):
            self.log.info(0, f"{SRC_DEFAULTEVICTOR}:378", "pod does not fit on any other node because of "
                          "nodeSelector(s), Taint(s), or nodes marked as unschedulable", "pod", kobj(pod))
            return False
        ns_selector = self.args.get("namespaceLabelSelector") or {}
        if not ns_selector.get("matchLabels"):
            return True
        namespace = next((ns for ns in _entries(self.cluster, "namespaces")
                          if ns["metadata"]["name"] == pod["metadata"].get("namespace")), None)
        if namespace is None or not selector_matches({"matchLabels": ns_selector["matchLabels"]},
                                                     namespace["metadata"].get("labels") or {}):
            self.log.info(0, f"{SRC_DEFAULTEVICTOR}:391", "pod namespace do not match the namespaceLabelSelector "
                          "filter in the policy parameter", "pod", kobj(pod))
            return False
        return True

    def fits_other_node(self, pod: dict) -> bool:
        """nodeutil.PodFitsAnyOtherNode over the Ready nodes selected by the evictor's nodeSelector."""
        matcher = label_matcher(self.args.get("nodeSelector") or None)
        on_node: dict[str, list[dict]] = {}
        for other in _entries(self.cluster, "pods"):
            node_name = (other.get("spec") or {}).get("nodeName")
            if node_name and not is_terminal(other):
                on_node.setdefault(node_name, []).append(other)
        wanted = tuple(_requested(pod))
        for node in _entries(self.cluster, "nodes"):
            name = node["metadata"]["name"]
            if name == (pod.get("spec") or {}).get("nodeName") or not is_ready(node) or not matcher(node):
                continue
            pods_here = on_node.get(name, [])
            used = {resource: sum(self._requests_of(other).get(resource, 0) for other in pods_here) for resource in wanted}
            error = node_fit_error(pod, node, pods_here, used)
            if error is None:
                return True
            self.log.info(4, "node.go:166", "Pod does not fit on node", "pod", kobj(pod), "node", name, "err", error)
        return False

    def _requests_of(self, pod: dict) -> dict[str, int]:
        cached = self._requests.get(id(pod))
        if cached is None or cached[0] is not pod:
            cached = self._requests[id(pod)] = (pod, _requested(pod))
        return cached[1]


class EvictionError(Exception):
    """An eviction that failed; the message is the error the descheduler logs."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class EvictionNodeLimitError(EvictionError):
    def __init__(self, node: str):
        super().__init__("maximum number of evicted pods per node reached")
        self.node = node


class EvictionNamespaceLimitError(EvictionError):
    def __init__(self, namespace: str):
        super().__init__("maximum number of evicted pods per namespace reached")
        self.namespace = namespace


class EvictionTotalLimitError(EvictionError):
    def __init__(self):
        super().__init__("maximum number of evicted pods per a descheduling cycle reached")
