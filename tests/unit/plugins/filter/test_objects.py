"""The object filters as Jinja sees them: `as_kubectl_shows` registered under its name, dropping only
metadata.managedFields, and refusing what is not an object."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubevirt_ops.rebalance.plugins.filter.objects import FilterModule

FILTERS = FilterModule().filters()


def test_as_kubectl_shows_drops_managed_fields_only():
    live = {"kind": "CronJob", "metadata": {"name": "d", "managedFields": [{"manager": "helm"}]}, "spec": {"suspend": False}}
    assert FILTERS["as_kubectl_shows"](live) == {"kind": "CronJob", "metadata": {"name": "d"}, "spec": {"suspend": False}}
    assert live["metadata"]["managedFields"] == [{"manager": "helm"}]


def test_as_kubectl_shows_refuses_what_is_not_an_object():
    with pytest.raises(AnsibleFilterError, match="expects a Kubernetes object"):
        FILTERS["as_kubectl_shows"]([{"kind": "ConfigMap"}])
