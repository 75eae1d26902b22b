"""run_backup's service on an in-memory cluster: the Lease is read before any write, the run's backup is one immutable
ConfigMap with the files' text, the retention deletes past N except what the Lease names, check mode writes as dry runs,
a name held by another run's backup is refused, the outcome and the rollback go on the records' metadata only, the
history returns one run's files, and bad options are refused before any request."""
from __future__ import annotations

import datetime
import json

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_backup as rb
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.checks import run_lease as rl
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.errors import InvalidOption
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.runner import spec_params
from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.services import run_backup as svc

from .memory_cluster import MemoryCluster

NOW = datetime.datetime(2026, 12, 7, 15, 0, 0, tzinfo=datetime.timezone.utc)
TEXT = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: descheduler\ndata:\n  policy.yaml: 'kind: DeschedulerPolicy'\n"


def run(api, check_mode=False, minutes=0, **given):
    params = dict({"playbook": "rebalance", "cluster_name": "prod-1", "namespace": "descheduler"}, **given)
    if params.get("state", "present") == "present":
        params.setdefault("files", {"{0}_configmap_descheduler_descheduler.yaml".format(params["run_id"]): TEXT})
    options = svc.RunBackupOptions.from_params(spec_params(svc.ARG_SPEC, **params))
    return svc.run(options, check_mode, client=api, now=lambda: NOW + datetime.timedelta(minutes=minutes))


def lease(record: dict) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "kubevirt-ops-run", "namespace": "kube-system", "annotations": {rl.RECORD: json.dumps(record)}}, "spec": {}}


def stored(api) -> list:
    return sorted(o["metadata"]["name"] for o in api.objects.get("ConfigMap", []))


def test_the_lease_is_read_before_the_one_immutable_configmap_is_created():
    api = MemoryCluster([])
    result = run(api, run_id="R1")
    assert [r[:2] for r in api.requests] == [("list", "ConfigMap"), ("get", "Lease"), ("create", "ConfigMap")]
    (obj,) = api.objects["ConfigMap"]
    assert obj["immutable"] is True and obj["data"] == {"configmap_descheduler_descheduler.yaml": TEXT}
    assert obj["metadata"]["labels"][rb.PLAYBOOK_LABEL] == "rebalance" and rb.read_record(obj)["created"] == "2026-12-07T15:00:00.000000Z"
    assert result["object"] == "descheduler/" + rb.object_name("R1") and result["created"] and result["changed"]


def test_retention_deletes_past_n_except_the_backup_the_lease_names_and_check_mode_only_dry_runs():
    api = MemoryCluster([lease({"run_id": "R1", "status": "in_progress", "backup": {"cluster_object": "descheduler/" + rb.object_name("R1")}})])
    for minute, run_id in enumerate(("R1", "R2", "R3")):
        run(api, run_id=run_id, retention=2, minutes=minute)
    # R2 and R3 are the newest two; R1, older, stays as the Lease names it
    assert stored(api) == sorted(rb.object_name(r) for r in ("R1", "R2", "R3")) and not [w for w in api.writes() if w[0] == "delete"]
    planned = run(api, run_id="R4", retention=2, minutes=5, check_mode=True)
    assert planned["pruned"] == [rb.object_name("R2")] and planned["protected_by_lease"] == ["descheduler/" + rb.object_name("R1")]
    assert [w[0] for w in api.writes()[-2:]] == ["create", "delete"] and all(w[-1] is True for w in api.writes()[-2:])
    assert stored(api) == sorted(rb.object_name(r) for r in ("R1", "R2", "R3"))
    done = run(api, run_id="R4", retention=2, minutes=5)
    assert done["pruned"] == [rb.object_name("R2")] and stored(api) == sorted(rb.object_name(r) for r in ("R1", "R3", "R4"))


def test_a_second_store_of_a_run_keeps_the_first_and_a_name_held_by_another_run_is_refused():
    api = MemoryCluster([])
    run(api, run_id="R1")
    again = run(api, run_id="R1", files={"R1_configmap_descheduler_descheduler.yaml": TEXT.replace("name: descheduler", "name: other")})
    assert not again["changed"] and again["kept_earlier"] and not again["matches"]
    api.objects["ConfigMap"][0]["metadata"]["annotations"][rb.RECORD] = json.dumps({"run_id": "someone-else"})
    with pytest.raises(svc.BackupConflict, match="holds the backup of run 'someone-else', not of 'R1'"):
        run(api, run_id="R1")


def test_finished_records_the_outcome_and_the_rolled_back_run_on_metadata_only():
    api = MemoryCluster([])
    run(api, run_id="R1")
    first = run(api, state="finished", run_id="R1", outcome="complete")
    assert first["marked"] == ["descheduler/" + rb.object_name("R1")]
    undone = run(api, state="finished", run_id="R9", outcome="rolled_back", rollback_of="R1")
    assert undone["marked"] == ["descheduler/" + rb.object_name("R1")]   # R9 (the rollback) has no backup of its own
    patches = [r[4] for r in api.requests if r[0] == "patch"]
    assert all(set(p) == {"metadata"} for p in patches)
    history = run(api, state="history", run_id="R1")
    assert history["runs"][0]["outcome"] == "rolled_back" and history["runs"][0]["rolled_back_by"]["run_id"] == "R9"
    assert history["backup"]["contents"] == {"configmap_descheduler_descheduler.yaml": TEXT}
    assert not run(api, state="finished", run_id="R1", outcome="complete")["changed"], "said already"


@pytest.mark.parametrize("given,path", [
    ({"retention": 0}, "retention"),
    ({"namespace": "Not_A_Namespace"}, "namespace"),
    ({"files": {}}, "files"),
    ({"files": {"R1_x.yaml": "- just a list\n"}}, "files.R1_x.yaml"),
    ({"files": {"R1_x.yaml": "kind: Secret\nmetadata: {name: t}\ndata: {token: czNjcjN0}\n"}}, "files.R1_x.yaml"),
])
def test_bad_options_are_refused_before_any_request(given, path):
    api = MemoryCluster([])
    with pytest.raises(InvalidOption) as refused:
        run(api, run_id="R1", **given)
    assert refused.value.path == path and api.requests == []
