"""Label selectors: the string form (parsed and refused with a reason before any request) and the LabelSelector
object form that PodDisruptionBudgets use."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import selectors


@pytest.mark.parametrize("text, labels, matches", [
    ("app=web", {"app": "web"}, True),
    ("app==web,tier!=db", {"app": "web", "tier": "db"}, False),
    ("tier in (a, b),!canary", {"tier": "b"}, True),
    ("tier notin (a,b)", {}, True),
    ("kubevirt.io/created-by", {"kubevirt.io/created-by": "uid"}, True),
    ("replicas>2", {"replicas": "3"}, True),
    ("replicas<2", {"replicas": "x"}, False),
    ("", {"any": "thing"}, True),
])
def test_string_selectors(text, labels, matches):
    assert selectors.matches_selector_string(selectors.parse_label_selector(text), labels) is matches


@pytest.mark.parametrize("text", ["app in (a,b", "app=web,,tier=db", "app=we b", "-bad=1", "app in ()", "count>two"])
def test_bad_string_selectors_raise_value_error(text):
    with pytest.raises(ValueError):
        selectors.parse_label_selector(text)


def test_label_selector_objects():
    selector = {"matchLabels": {"app": "vm"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]},
                                                                   {"key": "canary", "operator": "DoesNotExist"}]}
    assert selectors.match_label_selector(selector, {"app": "vm", "tier": "a"})
    assert not selectors.match_label_selector(selector, {"app": "vm", "tier": "a", "canary": "1"})
    assert selectors.match_label_selector({}, {"x": "y"})            # empty selects everything (policy/v1 PDB)
    assert not selectors.match_label_selector(None, {"x": "y"})      # null selects nothing
    assert not selectors.match_label_selector({"matchExpressions": [{"key": "a", "operator": "Near"}]}, {"a": "1"})
    assert selectors.selector_to_string(selector) == "app=vm,tier in (a),!canary"
    assert selectors.selector_to_string(None) is None


@pytest.mark.parametrize("name, label, subdomain", [("desched-test", True, True), ("a.b", False, True), ("Bad", False, False),
                                                    ("-x", False, False), ("x" * 64, False, True)])
def test_names(name, label, subdomain):
    assert selectors.is_dns_label(name) is label and selectors.is_dns_subdomain(name) is subdomain


def test_check_labels_names_the_bad_key_or_value():
    selectors.check_labels({"app": "desched-test", "kubevirt.io/domain": "vm-1", "empty": ""})
    with pytest.raises(ValueError, match="invalid label value 'a b'"):
        selectors.check_labels({"app": "a b"})
    with pytest.raises(ValueError, match="invalid label key"):
        selectors.check_labels({"-x": "y"})
