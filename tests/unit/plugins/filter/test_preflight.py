"""The preflight filters as Jinja sees them: registered under their names, refusing input that is not the
facts module's result, and numbering the problems for the failure message."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubevirt_ops.rebalance.plugins.filter.preflight import FilterModule

FILTERS = FilterModule().filters()


def test_filters_are_registered():
    assert set(FILTERS) == {"descheduler_preflight", "preflight_problem_lines"}


def test_input_that_is_not_the_facts_result_is_refused():
    with pytest.raises(AnsibleFilterError, match="registered result of kubevirt_eviction_facts"):
        FILTERS["descheduler_preflight"]("facts")
    with pytest.raises(AnsibleFilterError, match="nodes must be a list"):
        FILTERS["descheduler_preflight"]({}, nodes="worker-a")


def test_empty_facts_report_every_missing_piece_as_lines():
    result = FILTERS["descheduler_preflight"]({}, min_workers="2", namespace="", label_selector="")
    codes = [p["code"] for p in result["problems"]]
    assert codes == ["descheduler_not_found", "cluster_strategy_not_migrating", "too_few_workers", "no_vms_in_scope"]
    lines = FILTERS["preflight_problem_lines"](result["problems"])
    assert [line.split(".", 1)[0] for line in lines] == ["1", "2", "3", "4"]
    assert "all namespaces, label selector none" in lines[3]
    assert FILTERS["preflight_problem_lines"](None) == []
