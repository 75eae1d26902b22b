import pytest

from kubesim.errors import ApiError
from kubesim.selectors import field_matcher, label_matcher, match_label_selector_object


def obj(labels=None, **fields):
    return {"metadata": {"name": fields.get("name", "n"), "namespace": "ns", "labels": labels or {}},
            "spec": {"nodeName": fields.get("node", "")}, "status": {"phase": fields.get("phase", "")}}


@pytest.mark.parametrize("selector,labels,expected", [
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "db"}, False),
    ("app!=web", {}, True),
    ("app!=web", {"app": "web"}, False),
    ("app in (web,db)", {"app": "db"}, True),
    ("app in (web, db)", {"app": "x"}, False),
    ("app notin (web)", {}, True),
    ("app notin (web)", {"app": "web"}, False),
    ("app", {"app": ""}, True),
    ("app", {}, False),
    ("!app", {}, True),
    ("!app", {"app": "x"}, False),
    ("kubernetes.io/hostname in (worker-a,worker-b),tier=gold", {"kubernetes.io/hostname": "worker-b",
                                                                 "tier": "gold"}, True),
    ("", {"any": "thing"}, True),
])
def test_label_selector_operators(selector, labels, expected):
    assert label_matcher(selector)(obj(labels)) is expected


def test_label_selector_rejects_an_invalid_key():
    with pytest.raises(ApiError) as err:
        label_matcher("-bad=x")
    assert err.value.code == 400 and "invalid label key" in err.value.message


def test_field_selectors_on_supported_fields():
    supported = frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"})
    match = field_matcher("spec.nodeName=worker-a,status.phase!=Failed", supported, "pods")
    assert match(obj(node="worker-a", phase="Running"))
    assert not match(obj(node="worker-a", phase="Failed"))
    assert not match(obj(node="worker-b", phase="Running"))
    assert field_matcher("metadata.name==n", supported, "pods")(obj())


def test_field_selector_on_an_unsupported_field_is_a_bad_request():
    with pytest.raises(ApiError) as err:
        field_matcher("spec.bogus=x", frozenset({"metadata.name"}), "pods")
    assert err.value.code == 400 and err.value.message == "field label not supported: spec.bogus"


def test_label_selector_objects_with_match_expressions():
    selector = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                                     {"key": "legacy", "operator": "DoesNotExist"}]}
    assert match_label_selector_object(selector, {"app": "web", "tier": "gold"})
    assert not match_label_selector_object(selector, {"app": "web", "tier": "bronze"})
    assert not match_label_selector_object(selector, {"app": "web", "tier": "gold", "legacy": "1"})
    assert not match_label_selector_object(None, {"app": "web"})
    assert match_label_selector_object({}, {"anything": "x"})
