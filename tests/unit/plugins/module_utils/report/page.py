"""Reading the report's markup in tests: the page and its SVGs parsed as XML (the renderer writes markup that is
well-formed XML as well as HTML5), the report documents of tests/unit/data, and the geometry of the charts read
back from the SVG itself (the y of the 0 % and 100 % ticks), so that tests check the drawing, not the constants."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

DATA = Path(__file__).resolve().parents[3] / "data"
NS = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}


def document(name: str) -> dict:
    """tests/unit/data/report_<name>.json: `rebalance` (a real run of the demo), `failed` (a rehearsal whose migration
    failed and whose cleanup left objects), `check_mode` (a rehearsal's plan)."""
    return json.loads((DATA / "report_{0}.json".format(name)).read_text())


def parse(markup: str) -> ET.Element:
    return ET.fromstring(markup)


def classes(element: ET.Element) -> set:
    return set((element.get("class") or "").split())


def with_class(root: ET.Element, path: str, css: str) -> list:
    return [element for element in root.iterfind(path, NS) if css in classes(element)]


def all_text(element: ET.Element) -> str:
    return " ".join(" ".join(element.itertext()).split())


def tick_y(svg: ET.Element, percent: int) -> float:
    tick = svg.find(".//s:g[@class='tick'][@data-percent='{0}']/s:line".format(percent), NS)
    return float(tick.get("y1"))


def percent_scale(svg: ET.Element):
    """(y of 0 %, pixels per percent) read from the chart's own axis."""
    zero = tick_y(svg, 0)
    return zero, (zero - tick_y(svg, 100)) / 100


def seconds_scale(svg: ET.Element):
    """(x of 0 s, pixels per second) read from the timeline's own axis ticks."""
    ticks = sorted((float(g.get("data-seconds")), float(g.find("s:line", NS).get("x1"))) for g in svg.iterfind(".//s:g[@class='tick'][@data-seconds]", NS))
    (first_s, first_x), (last_s, last_x) = ticks[0], ticks[-1]
    return first_x, (last_x - first_x) / (last_s - first_s)
