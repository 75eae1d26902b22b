"""klog line parsing with the lines of the rebalance page (descheduler v0.36, --v=3)."""
from __future__ import annotations

import datetime

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils import klog

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
