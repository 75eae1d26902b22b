"""`as=Table` responses (meta.k8s.io/v1 Table), with each row carrying the object (PartialObjectMetadata
unless `includeObject=Object`) so that `-A`, `--show-labels`, `-L` and `--sort-by` work."""
from __future__ import annotations

from typing import Any, Iterable

from .jsonpath import first
from .resources import Column, ResourceType

_DESCRIPTIONS = {"Name": "Name must be unique within a namespace.",
                 "Age": "CreationTimestamp is a timestamp representing the server time when this object was "
                        "created."}


def column_definitions(rt: ResourceType) -> list[dict]:
    return [{"name": c.name, "type": c.type, "format": c.format, "description": _DESCRIPTIONS.get(c.name, c.name),
             "priority": c.priority} for c in rt.columns]


def _cell(column: Column, obj: dict) -> Any:
    value = first(obj, column.path) if column.path else None
    if column.render is not None:
        return column.render(obj, value)
    if value is None:
        return "" if column.type == "string" else None
    if isinstance(value, (dict, list)):
        import json
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _embedded(obj: dict, include: str) -> dict | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def row(rt: ResourceType, obj: dict, include: str = "Metadata") -> dict:
    entry = {"cells": [_cell(c, obj) for c in rt.columns]}
    embedded = _embedded(obj, include)
    if embedded is not None:
        entry["object"] = embedded
    return entry


def table(rt: ResourceType, objects: Iterable[dict], metadata: dict, include: str = "Metadata",
          with_columns: bool = True) -> dict:
    body = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
            "rows": [row(rt, obj, include) for obj in objects]}
    if with_columns:
        body["columnDefinitions"] = column_definitions(rt)
    return body
