import pytest

from kubesim.errors import ApiError
from kubesim.patching import json_merge_patch, json_patch, strategic_merge_patch

POD = {"metadata": {"name": "p", "finalizers": ["a"], "labels": {"x": "1"}},
       "spec": {"containers": [{"name": "c1", "image": "i:1", "env": [{"name": "A", "value": "1"}]},
                               {"name": "c2", "image": "i:1"}],
                "tolerations": [{"key": "k1"}], "unschedulable": True}}


def test_merge_patch_sets_removes_and_replaces_lists():
    result = json_merge_patch(POD, {"metadata": {"labels": {"x": None, "y": "2"}},
                                    "spec": {"containers": [{"name": "only"}], "unschedulable": None}})
    assert result["metadata"]["labels"] == {"y": "2"}
    assert result["spec"]["containers"] == [{"name": "only"}]
    assert "unschedulable" not in result["spec"]
    assert POD["spec"]["unschedulable"] is True  # input untouched


def test_json_patch_operations():
    result = json_patch(POD, [
        {"op": "add", "path": "/metadata/labels/y", "value": "2"},
        {"op": "replace", "path": "/spec/containers/1/image", "value": "i:2"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
        {"op": "copy", "from": "/metadata/labels/x", "path": "/metadata/labels/z"},
        {"op": "move", "from": "/metadata/labels/y", "path": "/metadata/labels/w"},
        {"op": "test", "path": "/metadata/labels/w", "value": "2"},
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "k2"}},
    ])
    assert result["metadata"]["labels"] == {"x": "1", "z": "1", "w": "2"}
    assert result["spec"]["containers"][1]["image"] == "i:2"
    assert result["metadata"]["finalizers"] == []
    assert result["spec"]["tolerations"] == [{"key": "k1"}, {"key": "k2"}]


def test_json_patch_failures_are_invalid():
    with pytest.raises(ApiError) as err:
        json_patch(POD, [{"op": "remove", "path": "/metadata/missing"}])
    assert err.value.code == 422
    with pytest.raises(ApiError) as err:
        json_patch(POD, [{"op": "test", "path": "/metadata/name", "value": "other"}])
    assert err.value.code == 422 and "test failed" in err.value.message


def test_strategic_merge_merges_lists_by_key_and_primitives_by_union():
    result = strategic_merge_patch(POD, {
        "metadata": {"finalizers": ["b"]},
        "spec": {"containers": [{"name": "c1", "env": [{"name": "B", "value": "2"}]},
                                {"name": "c3", "image": "i:3"}],
                 "tolerations": [{"key": "only"}], "unschedulable": None}})
    assert [c["name"] for c in result["spec"]["containers"]] == ["c1", "c2", "c3"]
    assert result["spec"]["containers"][0]["image"] == "i:1"
    assert result["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert result["metadata"]["finalizers"] == ["a", "b"]
    assert result["spec"]["tolerations"] == [{"key": "only"}]   # no merge key: replaced
    assert "unschedulable" not in result["spec"]


def test_strategic_merge_directives():
    result = strategic_merge_patch(POD, {
        "$setElementOrder/finalizers": ["a"],
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "labels": {"$patch": "replace", "n": "1"}},
        "spec": {"$setElementOrder/containers": [{"name": "c2"}, {"name": "c1"}],
                 "containers": [{"name": "c1", "$patch": "delete"}]}})
    assert result["metadata"]["finalizers"] == []
    assert result["metadata"]["labels"] == {"n": "1"}
    assert [c["name"] for c in result["spec"]["containers"]] == ["c2"]


def test_strategic_merge_uses_container_port_for_container_ports():
    pod = {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "name": "http"}]}]}}
    result = strategic_merge_patch(pod, {"spec": {"containers": [{"name": "c", "ports": [
        {"containerPort": 443, "name": "https"}]}]}})
    assert [p["containerPort"] for p in result["spec"]["containers"][0]["ports"]] == [80, 443]
