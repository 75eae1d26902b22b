"""Scenario files: loading, `extends` with replacement and removal, errors that name the key."""
import pytest

from kubesim import scenario


def write(tmp_path, name, text):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def test_extends_replaces_objects_by_identity_and_removes_listed_ones(tmp_path):
    base = write(tmp_path, "base", """
name: base
timeScale: 5
clusters:
  workload:
    objects:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}, data: {v: "1"}}
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: default}}
""")
    child = write(tmp_path, "child", f"""
extends: {base}
name: child
clusters:
  workload:
    remove: [{{kind: ConfigMap, namespace: default, name: b}}]
    objects:
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: a, namespace: default}}, data: {{v: "2"}}}}
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c, namespace: default}}}}
""")
    loaded = scenario.load(child)
    objects = loaded.clusters["workload"]["objects"]
    assert [(o["metadata"]["name"], o.get("data")) for o in objects] == [("a", {"v": "2"}), ("c", None)]
    assert loaded.time_scale == 5 and loaded.name == "child"


def test_unknown_keys_are_named(tmp_path):
    bad = write(tmp_path, "bad", "name: x\nclusters:\n  workload:\n    objcts: []\n")
    with pytest.raises(scenario.ScenarioError) as err:
        scenario.load(bad)
    assert "objcts" in str(err.value) and "objects" in str(err.value)


def test_every_bundled_scenario_loads():
    names = scenario.available()
    assert "rebalance-two-workers" in names
    for name in names:
        assert scenario.load(name).clusters


def test_rbac_and_users_are_inherited_and_malformed_users_name_the_entry(tmp_path):
    base = write(tmp_path, "secured", "rbac: true\nusers: [{name: alice, token: t1}]\n")
    child = scenario.load(write(tmp_path, "child-rbac", f"extends: {base}\n"))
    assert child.rbac is True and child.users == [{"name": "alice", "token": "t1"}]
    with pytest.raises(scenario.ScenarioError, match=r"users\[0\]: needs name and token"):
        scenario.load(write(tmp_path, "bad-users", "rbac: true\nusers: [{name: bob}]\n"))
