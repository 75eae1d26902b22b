# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters on Kubernetes objects; the logic is in module_utils/kube/kubevirt.py, shared with the modules."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks.run_backup import scrub
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube.kubevirt import as_kubectl_shows


def as_kubectl_shows_filter(obj):
    if not isinstance(obj, dict):
        raise AnsibleFilterError("as_kubectl_shows expects a Kubernetes object (a dict), for example a k8s_info resource")
    return as_kubectl_shows(obj)


def without_secret_data_filter(obj):
    if not isinstance(obj, dict):
        raise AnsibleFilterError("without_secret_data expects a Kubernetes object (a dict), for example a k8s_info resource")
    return scrub(obj)[0]


class FilterModule:
    """kubevirt_ops.rebalance object filters."""

    def filters(self):
        return {"as_kubectl_shows": as_kubectl_shows_filter, "without_secret_data": without_secret_data_filter}
