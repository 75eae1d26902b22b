"""The virt-handler DaemonSet as virt-operator deploys it, for scenarios and tests: the simulated
DaemonSet controller (`controllers/daemonsets.py`) runs its Pods on every node that matches, so every
worker running VMs also runs a virt-handler Pod (what `kubectl drain --ignore-daemonsets` skips).

Shape: namespace of the KubeVirt install, labels `kubevirt.io=virt-handler`, selector
`kubevirt.io=virt-handler`, Pod template with that label, nodeSelector `kubernetes.io/os: linux`,
toleration CriticalAddonsOnly, priorityClassName `kubevirt-cluster-critical`, terminationGracePeriodSeconds
330, one container `virt-handler` requesting 10m CPU and 325Mi memory, hostPath volumes.

Upstream source: kubevirt/kubevirt `pkg/virt-operator/resource/generate/components/daemonsets.go`
(NewHandlerDaemonSet). Simplified: no init container (node-labeller), probes, certificates or env; the
handler does not label nodes (scenarios label workers `kubevirt.io/schedulable: "true"` themselves)."""
from __future__ import annotations

from .defaults import KUBEVIRT_REGISTRY, KUBEVIRT_VERSION

HANDLER_LABELS = {"kubevirt.io": "virt-handler"}


def virt_handler_daemonset(namespace: str = "kubevirt", version: str = KUBEVIRT_VERSION) -> dict:
    host_paths = (("libvirt-runtimes", "/var/run/kubevirt-libvirt-runtimes"), ("virt-share-dir", "/var/run/kubevirt"),
                  ("virt-private-dir", "/var/run/kubevirt-private"), ("kubelet-pods", "/var/lib/kubelet/pods"),
                  ("kubelet", "/var/lib/kubelet"), ("node-labeller", "/var/lib/kubevirt-node-labeller"))
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "virt-handler", "namespace": namespace,
                     "labels": {**HANDLER_LABELS, "app.kubernetes.io/managed-by": "virt-operator",
                                "app.kubernetes.io/version": version,
                                "kubevirt.io/supports-migration-cn-types": "true"}},
        "spec": {
            "selector": {"matchLabels": dict(HANDLER_LABELS)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {**HANDLER_LABELS, "prometheus.kubevirt.io": "true",
                                        "app.kubernetes.io/managed-by": "virt-operator"},
                             "annotations": {"openshift.io/required-scc": "kubevirt-handler"}},
                "spec": {
                    "serviceAccountName": "kubevirt-handler",
                    "hostPID": True,
                    "priorityClassName": "kubevirt-cluster-critical",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                    "terminationGracePeriodSeconds": 330,
                    "containers": [{
                        "name": "virt-handler",
                        "image": f"{KUBEVIRT_REGISTRY}/virt-handler:{version}",
                        "command": ["virt-handler"],
                        "args": ["--port", "8443", "--hostname-override", "$(NODE_NAME)", "--pod-ip-address",
                                 "$(MY_POD_IP)", "--max-metric-requests", "3", "--console-server-port", "8186",
                                 "--graceful-shutdown-seconds", "315", "-v", "2"],
                        "resources": {"requests": {"cpu": "10m", "memory": "325Mi"}},
                        "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": n, "mountPath": p} for n, p in host_paths],
                    }],
                    "volumes": [{"name": n, "hostPath": {"path": p}} for n, p in host_paths],
                },
            },
        },
    }
