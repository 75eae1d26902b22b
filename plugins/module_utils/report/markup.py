# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Markup built as strings for the HTML report and its SVG charts, escaped by construction: `tag()` escapes
every child that is not already `Markup` and every attribute value, so text from a report (a VM name, an
error message) can never open a tag. The output is well-formed XML as well as HTML5, so tests can parse it."""

from __future__ import annotations

import html
from typing import Any, Iterable, Mapping, Optional

SELF_CLOSING = frozenset(("meta", "br", "hr", "rect", "line", "circle", "ellipse", "path", "polyline", "polygon"))


class Markup(str):
    """Text that is already markup: `tag()` inserts it as it is."""


def escape(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def number(value: float) -> str:
    """A coordinate or a percent in at most two decimals, without trailing zeros (`72`, `64.75`, `0.5`)."""
    text = "{0:.2f}".format(float(value)).rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def attributes(attrs: Optional[Mapping[str, Any]]) -> str:
    """` key="value"` for each attribute that is not None; floats go through `number`."""
    parts = []
    for key, value in (attrs or {}).items():
        if value is None:
            continue
        shown = number(value) if isinstance(value, float) else value
        parts.append(' {0}="{1}"'.format(key, escape(shown)))
    return "".join(parts)


def content(children: Iterable[Any]) -> str:
    """Children in order: Markup as it is, None left out, lists flattened, anything else escaped as text."""
    parts = []
    for child in children:
        if child is None:
            continue
        if isinstance(child, Markup):
            parts.append(child)
        elif isinstance(child, (list, tuple)):
            parts.append(content(child))
        else:
            parts.append(escape(child))
    return "".join(parts)


def tag(name: str, attrs: Optional[Mapping[str, Any]] = None, *children: Any) -> Markup:
    """`<name attrs>children</name>`; a void HTML element or an SVG shape without children is closed in the XML way
    (`<rect .../>`), which HTML parsers read the same; any other element keeps its end tag (`<td></td>`: an HTML parser
    takes `<td/>` for a start tag)."""
    inner = content(children)
    if not inner and name in SELF_CLOSING:
        return Markup("<{0}{1}/>".format(name, attributes(attrs)))
    return Markup("<{0}{1}>{2}</{0}>".format(name, attributes(attrs), inner))


def join(parts: Iterable[Any]) -> Markup:
    return Markup(content(list(parts)))
