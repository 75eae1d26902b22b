"""klog line parsing with the lines of the rebalance page (descheduler v0.36, --v=3)."""
from __future__ import annotations

import datetime

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import klog

ASSUMED = 'I1130 22:11:23.123456       1 evictions.go:221] "Eviction in background assumed" pod="desched-test/virt-launcher-vm-1-x7k2p"'
COUNT = 'I1130 22:11:23.200000       1 profile.go:356] "Number of evictions/requests" totalEvicted=0 evictionRequests=1'
CLASSIFIED = ('I1130 22:11:23.000001       1 nodeutilization.go:211] "Node has been classified" category="overutilized" '
              'node="worker-a" usage={"cpu":"1200m","memory":"3Gi","pods":"12"} usagePercentage={"cpu":15,"memory":75.5,"pods":10.9}')
PODS = 'I1130 22:11:23.000002       1 lownodeutilization.go:300] "Pods on node" node="worker-a" allPods=12 nonRemovablePods=10 removablePods=2'


def test_header_message_and_string_field():
    record = klog.parse_line(ASSUMED, year=2026)
    assert record["time"] == "2026-11-30T22:11:23.123456Z"
    assert record["level"] == "info" and record["source"] == "evictions.go:221" and record["thread"] == 1
    assert record["message"] == "Eviction in background assumed"
    assert record["fields"] == {"pod": "desched-test/virt-launcher-vm-1-x7k2p"}
    assert record["line"] == ASSUMED


def test_numbers_are_numbers():
    assert klog.parse_line(COUNT, year=2026)["fields"] == {"totalEvicted": 0, "evictionRequests": 1}
    assert klog.parse_line(PODS, year=2026)["fields"]["removablePods"] == 2


def test_json_values_are_data():
    fields = klog.parse_line(CLASSIFIED, year=2026)["fields"]
    assert fields["category"] == "overutilized" and fields["node"] == "worker-a"
    assert fields["usage"] == {"cpu": "1200m", "memory": "3Gi", "pods": "12"}
    assert fields["usagePercentage"]["memory"] == 75.5


def test_quoted_escapes_and_other_levels():
    line = 'E1130 22:11:24.000000       1 evictions.go:250] "Error evicting pod" err="pods \\"x\\" is forbidden\\n" pod="a/b" ok=true none=<nil>'
    record = klog.parse_line(line, year=2026)
    assert record["level"] == "error"
    assert record["fields"] == {"err": 'pods "x" is forbidden\n', "pod": "a/b", "ok": True, "none": None}
    assert klog.parse_line(line.replace("E1130", "W1130", 1), year=2026)["level"] == "warning"


def test_printf_lines_keep_their_text():
    record = klog.parse_line("I1130 22:11:22.000000       1 descheduler.go:170] Building a pod evictor", year=2026)
    assert record["message"] == "Building a pod evictor" and record["fields"] == {}


def test_lines_without_a_header_are_skipped():
    assert klog.parse_line("goroutine 1 [running]:") is None
    assert len(klog.parse_lines([ASSUMED, "", "random", COUNT], year=2026)) == 2


def test_the_year_comes_from_a_reference_near_the_log():
    reference = datetime.datetime(2027, 1, 1, 0, 0, 5, tzinfo=datetime.timezone.utc)
    assert klog.parse_line("I1231 23:59:59.000000       1 a.go:1] \"x\"", reference=reference)["time"] == "2026-12-31T23:59:59Z"
    assert klog.parse_line(ASSUMED, reference=reference)["time"].startswith("2026-11-30T22:11:23")


def test_eviction_requests_for_one_pod():
    records = klog.parse_lines([ASSUMED, COUNT, ASSUMED.replace("vm-1-x7k2p", "vm-2-aaaaa")], year=2026)
    assert len(klog.eviction_requests(records)) == 2
    assert [r["fields"]["pod"] for r in klog.eviction_requests(records, "desched-test/virt-launcher-vm-1-x7k2p")] == [
        "desched-test/virt-launcher-vm-1-x7k2p"]


def test_parse_time():
    assert klog.parse_time("2026-11-30T22:11:23Z") == datetime.datetime(2026, 11, 30, 22, 11, 23, tzinfo=datetime.timezone.utc)
    assert klog.parse_time("not a time") is None and klog.parse_time(None) is None


# ------------------------------------------------------------------------------------------ run summary
PAGE_RUN = [
    'I1130 22:11:23.100000       1 descheduler.go:427] Resetting pod evictor counters',
    'I1130 22:11:23.110000       1 lownodeutilization.go:203] "Node has been classified" category="underutilized" node="worker-b" '
    'usagePercentage={"cpu":66,"memory":57,"pods":16}',
    'I1130 22:11:23.120000       1 lownodeutilization.go:203] "Node has been classified" category="overutilized" node="worker-a" '
    'usagePercentage={"cpu":66,"memory":72,"pods":18}',
    'I1130 22:11:23.125000       1 lownodeutilization.go:232] "Node is appropriately utilized" node="worker-c" usagePercentage={"cpu":50}',
    'I1130 22:11:23.130000       1 nodeutilization.go:162] "Pods on node" node="worker-a" allPods=46 nonRemovablePods=44 removablePods=2',
    'I1130 22:11:23.140000       1 evictions.go:548] "Eviction in background assumed" pod="desched-test/virt-launcher-vm-1-abcde"',
    'I1130 22:11:23.145000       1 evictions.go:415] "Eviction in background already requested (ignoring)" pod="desched-test/virt-launcher-vm-2-xyz"',
    'E1130 22:11:23.146000       1 evictions.go:429] "Error evicting pod" err="maximum number of evicted pods per node reached" limit=1',
    'I1130 22:11:23.150000       1 descheduler.go:442] "Number of evictions/requests" totalEvicted=0 evictionRequests=1',
]


def test_run_summary_reads_the_pages_lines():
    summary = klog.run_summary(klog.parse_lines(PAGE_RUN, year=2026))
    assert summary["classification"] == [
        {"node": "worker-b", "category": "underutilized", "usage_percent": {"cpu": 66, "memory": 57, "pods": 16}},
        {"node": "worker-a", "category": "overutilized", "usage_percent": {"cpu": 66, "memory": 72, "pods": 18}},
        {"node": "worker-c", "category": "appropriately_utilized", "usage_percent": {"cpu": 50}}]
    assert summary["pods_on_node"] == [{"node": "worker-a", "all": 46, "non_removable": 44, "removable": 2}]
    assert [(e["namespace"], e["name"]) for e in summary["background_evictions"]] == [("desched-test", "virt-launcher-vm-1-abcde")]
    assert summary["already_requested"][0]["pod"] == "desched-test/virt-launcher-vm-2-xyz"
    assert summary["failed_evictions"][0]["error"] == "maximum number of evicted pods per node reached"
    assert summary["failed_evictions"][0]["limit"] == 1
    assert summary["totals"] == {"total_evicted": 0, "eviction_requests": 1}
    assert summary["nothing_to_do"] is False and summary["stop_reason"] is None and summary["errors"] == []


def test_run_summary_stop_reason_and_errors():
    lines = ['I1130 22:11:23.100000       1 lownodeutilization.go:249] "No node is underutilized, nothing to do here, you might tune your '
             'thresholds further"',
             'E1130 22:11:24.100000       1 run.go:72] "command failed" err="in profile p: only Exclude namespaces can be set, inclusion is '
             'not supported"']
    summary = klog.run_summary(klog.parse_lines(lines, year=2026))
    assert summary["nothing_to_do"] is True
    assert summary["stop_reason"].startswith("No node is underutilized, nothing to do here")
    assert summary["errors"] == [lines[1]] and summary["totals"] is None


def test_split_cycles_ends_each_at_the_totals_line():
    records = klog.parse_lines(PAGE_RUN + PAGE_RUN[:2], year=2026)
    cycles = klog.split_cycles(records)
    assert [len(c) for c in cycles] == [len(PAGE_RUN), 2]
    assert klog.cycle_complete(cycles[0]) and not klog.cycle_complete(cycles[1])


def test_category_swaps_only_between_over_and_under():
    before = [{"node": "a", "category": "overutilized"}, {"node": "b", "category": "underutilized"}, {"node": "c", "category": "overutilized"}]
    after = [{"node": "a", "category": "underutilized"}, {"node": "b", "category": "overutilized"},
             {"node": "c", "category": "appropriately_utilized"}, {"node": "d", "category": "underutilized"}]
    swaps = klog.category_swaps(before, after)
    assert [(s["node"], s["before"], s["after"]) for s in swaps] == [("a", "overutilized", "underutilized"), ("b", "underutilized", "overutilized")]
    assert "widen the gap between thresholds and targetThresholds instead of lowering the eviction limits" in swaps[0]["advice"]
    assert klog.category_swaps([], after) == [] and klog.category_swaps(None, None) == []


# The lines as descheduler v0.36 prints them: the plugin logger's values before the call's pairs, `usage` before
# `usagePercentage`, the per-extension-point total whose key has a space (klog prints keys as they are).
V036 = [
    'I1201 12:00:00.000001       1 descheduler.go:427] Resetting pod evictor counters',
    'I1201 12:00:00.000002       1 lownodeutilization.go:215] "Node has been classified" plugin="LowNodeUtilization" '
    'ExtensionPoint="Balance" category="underutilized" node="worker-b" usage={"cpu":"6600m","memory":"5836Mi","pods":"1"} '
    'usagePercentage={"cpu":66,"memory":57,"pods":5}',
    'I1201 12:00:00.000003       1 lownodeutilization.go:215] "Node has been classified" plugin="LowNodeUtilization" '
    'ExtensionPoint="Balance" category="overutilized" node="worker-a" usage={"cpu":"6600m","memory":"7372Mi","pods":"3"} '
    'usagePercentage={"cpu":66,"memory":72,"pods":15}',
    'I1201 12:00:00.000004       1 lownodeutilization.go:241] "Node is appropriately utilized" plugin="LowNodeUtilization" '
    'ExtensionPoint="Balance" node="worker-c" usage={"cpu":"5","memory":"5Gi","pods":"4"} usagePercentage={"cpu":50,"memory":50,"pods":4}',
    'I1201 12:00:00.000005       1 nodeutilization.go:200] "Pods on node" node="worker-a" allPods=3 nonRemovablePods=1 removablePods=2',
    'I1201 12:00:00.000006       1 evictions.go:548] "Eviction in background assumed" pod="desched-test/virt-launcher-vm-1-x7k2p"',
    'I1201 12:00:00.000007       1 profile.go:376] "Total number of evictions/requests" extension point="Balance" evictedPods=0 '
    'evictionRequests=1',
    'I1201 12:00:00.000008       1 descheduler.go:442] "Number of evictions/requests" totalEvicted=0 evictionRequests=1',
]


def test_v036_lines_carry_the_plugin_logger_values_and_usage():
    record = klog.parse_line(V036[2], year=2026)
    assert record["source"] == "lownodeutilization.go:215" and record["message"] == "Node has been classified"
    assert record["fields"] == {"plugin": "LowNodeUtilization", "ExtensionPoint": "Balance", "category": "overutilized",
                                "node": "worker-a", "usage": {"cpu": "6600m", "memory": "7372Mi", "pods": "3"},
                                "usagePercentage": {"cpu": 66, "memory": 72, "pods": 15}}


def test_a_key_with_a_space_is_one_key():
    fields = klog.parse_line(V036[6], year=2026)["fields"]
    assert fields == {"extension point": "Balance", "evictedPods": 0, "evictionRequests": 1}


def test_run_summary_reads_the_v036_lines():
    summary = klog.run_summary(klog.parse_lines(V036, year=2026))
    assert summary["classification"] == [
        {"node": "worker-b", "usage_percent": {"cpu": 66, "memory": 57, "pods": 5}, "category": "underutilized"},
        {"node": "worker-a", "usage_percent": {"cpu": 66, "memory": 72, "pods": 15}, "category": "overutilized"},
        {"node": "worker-c", "usage_percent": {"cpu": 50, "memory": 50, "pods": 4}, "category": "appropriately_utilized"}]
    assert summary["pods_on_node"] == [{"node": "worker-a", "all": 3, "non_removable": 1, "removable": 2}]
    assert [item["pod"] for item in summary["background_evictions"]] == ["desched-test/virt-launcher-vm-1-x7k2p"]
    assert summary["totals"] == {"total_evicted": 0, "eviction_requests": 1}
    assert summary["errors"] == [] and summary["stop_reason"] is None
