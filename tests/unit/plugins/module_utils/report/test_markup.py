"""Markup by construction: text and attribute values are escaped unless they are Markup, empty SVG shapes close in
the XML way while HTML elements keep their end tag, and numbers are written short."""
from __future__ import annotations

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.report.markup import Markup, join, number, tag


def test_text_and_attribute_values_are_escaped():
    assert tag("td", {"title": 'say "hi"'}, "<none> & 'x'") == '<td title="say &quot;hi&quot;">&lt;none&gt; &amp; &#x27;x&#x27;</td>'


def test_markup_children_are_kept_none_left_out_lists_flattened():
    inner = tag("b", None, "x")
    assert tag("p", None, "a", None, [inner, ["<c>"]]) == "<p>a<b>x</b>&lt;c&gt;</p>"
    assert isinstance(join(["a", inner]), Markup)


def test_attributes_that_are_none_are_left_out_and_floats_are_short():
    assert tag("rect", {"x": 1.50, "y": None, "width": 48.0}) == '<rect x="1.5" width="48"/>'


@pytest.mark.parametrize("name, expected", [("rect", "<rect/>"), ("line", "<line/>"), ("td", "<td></td>"), ("title", "<title></title>"),
                                            ("g", "<g></g>")])
def test_only_void_elements_and_shapes_self_close(name, expected):
    assert tag(name) == expected


@pytest.mark.parametrize("value, expected", [(72.0, "72"), (64.75, "64.75"), (0.5, "0.5"), (1 / 3, "0.33"), (-0.001, "0"), (100, "100")])
def test_number_has_at_most_two_decimals_and_no_trailing_zeros(value, expected):
    assert number(value) == expected
