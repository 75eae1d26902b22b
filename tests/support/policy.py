"""The rebalance procedure's verification policy (shared/reference/descheduler-vm-rebalance.md, "Configure a Bounded
VM Rebalance Policy"): one literal, character for character with its placeholders; the text with the scenarios'
worker names, its parsed form and the descheduler_policy options that render it are derived from it."""
from __future__ import annotations

import yaml

PAGE_POLICY_TEXT = """\
apiVersion: "descheduler/v1alpha2"
kind: "DeschedulerPolicy"
nodeSelector: "kubernetes.io/hostname in (<worker-a>,<worker-b>)"
maxNoOfPodsToEvictPerNode: 1
maxNoOfPodsToEvictPerNamespace: 1
maxNoOfPodsToEvictTotal: 1
profiles:
- name: vm-rebalance
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
      labelSelector:
        matchLabels:
          app: desched-test
      podProtections:
        defaultDisabled:
        - PodsWithLocalStorage
  - name: LowNodeUtilization
    args:
      thresholds:
        cpu: 70
        memory: 60
        pods: 20
      targetThresholds:
        cpu: 75
        memory: 68
        pods: 30
  plugins:
    balance:
      enabled:
      - LowNodeUtilization
"""
PLACEHOLDERS = ("<worker-a>", "<worker-b>")
# The two workers of the `rebalance-two-workers` scenario (and of the simulator's own rebalance clusters).
WORKERS = ("worker-a", "worker-b")


def page_policy(nodes: tuple[str, str] = WORKERS) -> str:
    """The page's policy text with `nodes` in place of its <worker-a> and <worker-b>."""
    text = PAGE_POLICY_TEXT
    for placeholder, node in zip(PLACEHOLDERS, nodes):
        text = text.replace(placeholder, node)
    return text


PAGE_POLICY = page_policy()


def page_policy_data(nodes: tuple[str, str] = WORKERS) -> dict:
    """The page's policy, parsed (a new dict on every call, free to change)."""
    return yaml.safe_load(page_policy(nodes))


# descheduler_policy's options that render PAGE_POLICY.
PAGE_OPTIONS = {"nodes": list(WORKERS), "max_pods_to_evict_per_node": 1, "max_pods_to_evict_per_namespace": 1,
                "max_pods_to_evict_total": 1, "node_fit": True, "vm_labels": {"app": "desched-test"},
                "thresholds": {"cpu": 70, "memory": 60, "pods": 20}, "target_thresholds": {"cpu": 75, "memory": 68, "pods": 30}}
