from kubesim import printers
from kubesim.jsonpath import evaluate, first


def test_jsonpath_filters_indexes_and_escaped_keys():
    doc = {"metadata": {"labels": {"cpaas.io/cluster-name": "business-1"}},
           "status": {"conditions": [{"type": "Ready", "status": "True"},
                                     {"type": "LiveMigratable", "status": "False"}],
                      "interfaces": [{"ipAddress": "10.0.0.5"}]}}
    assert first(doc, '.status.conditions[?(@.type=="LiveMigratable")].status') == "False"
    assert first(doc, ".status.interfaces[0].ipAddress") == "10.0.0.5"
    assert first(doc, ".metadata.labels.cpaas\\.io/cluster-name") == "business-1"
    assert evaluate(doc, ".status.conditions[*].type") == ["Ready", "LiveMigratable"]
    assert first(doc, ".status.missing", "none") == "none"


def test_human_durations_match_the_api_machinery():
    assert [printers.human_duration(s) for s in (5, 119, 125, 600, 3 * 3600 + 5, 20 * 3600, 3 * 86400 + 3600,
                                                 30 * 86400, 3 * 365 * 86400)] == \
        ["5s", "119s", "2m5s", "10m", "3h", "20h", "3d1h", "30d", "3y"]


def test_pod_and_node_printers():
    pod = {"metadata": {}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
           "status": {"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 2},
                                                                {"ready": False, "restartCount": 1}]}}
    assert printers.pod_ready(pod) == "1/2" and printers.pod_restarts(pod) == 3
    assert printers.pod_status(pod) == "Running"
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert printers.pod_status(pod) == "Terminating"
    node = {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert printers.node_status(node) == "Ready,SchedulingDisabled"
    assert printers.node_roles(node) == "control-plane"
    pdb = {"spec": {"minAvailable": 3}}
    assert printers.pdb_min_available(pdb) == "3" and printers.pdb_max_unavailable(pdb) == "N/A"
