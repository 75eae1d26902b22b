"""Output content negotiation as the apiserver does it (apimachinery `endpoints/handlers/negotiation`,
`RequestScope.AllowsMediaTypeTransform`, `handlers/response.go`): the Accept clauses by quality, the first one it can
serve wins; `as=Table|PartialObjectMetadata|PartialObjectMetadataList;g=meta.k8s.io;v=v1|v1beta1` asks for a
transformed answer; a clause with any other `as`/`g`/`v` is skipped, and when none is left the answer is 406.
Answers are always JSON here (a protobuf or YAML clause gets JSON)."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError
from .resources import ResourceType

TABLE, PARTIAL, PARTIAL_LIST = "Table", "PartialObjectMetadata", "PartialObjectMetadataList"
META_GROUP = "meta.k8s.io"
SERIALIZERS = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")


@dataclass(frozen=True)
class Target:
    """What the answer is: the resource's own objects (kind "") or one of the meta.k8s.io transforms."""
    kind: str = ""
    version: str = "v1"

    @property
    def api_version(self) -> str:
        return f"{META_GROUP}/{self.version}"


def negotiate(accept: str) -> Target:
    """The Target of the first acceptable clause of an Accept header (none or empty: the object itself)."""
    if not accept.strip():
        return Target()
    for media, params in _clauses(accept):
        if not (media in SERIALIZERS or media in ("*/*", "application/*")):
            continue
        if not any(key in params for key in ("as", "g", "v")):
            return Target()
        kind, group, version = params.get("as", ""), params.get("g", ""), params.get("v", "")
        if group != META_GROUP or version not in ("v1", "v1beta1") or kind not in (TABLE, PARTIAL, PARTIAL_LIST):
            continue
        if kind == TABLE and media not in ("application/json", "application/yaml"):
            continue   # Table has no protobuf encoding
        return Target(kind, version)
    raise not_acceptable("only the following media types are accepted: " + ", ".join(SERIALIZERS))


def _clauses(accept: str) -> list[tuple[str, dict[str, str]]]:
    """(media type, parameters) of each clause with q > 0, highest q first (in header order among equals)."""
    parsed = []
    for index, clause in enumerate(accept.split(",")):
        media, *raw = [part.strip() for part in clause.split(";")]
        params = {}
        for item in raw:
            key, _sep, value = item.partition("=")
            params[key.strip()] = value.strip().strip('"')
        try:
            quality = float(params.pop("q", "1"))
        except ValueError:
            continue
        if media and quality > 0:
            parsed.append((-quality, index, media.lower(), params))
    return [(media, params) for _q, _i, media, params in sorted(parsed)]


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message)


def go_type(rt: ResourceType, is_list: bool) -> str:
    """The Go type the apiserver names in a 406 for a transform that does not fit (`%T` of the internal object)."""
    suffix = "List" if is_list else ""
    if not rt.builtin:
        return f"*unstructured.Unstructured{suffix}"
    package = "core" if rt.group in ("", "events.k8s.io") else rt.group.split(".")[0]
    return f"*{package}.{rt.kind}{suffix}"


def wrong_shape(target: Target, rt: ResourceType, is_list: bool) -> ApiError:
    """406 for PartialObjectMetadata asked of a list, or PartialObjectMetadataList of one object."""
    if is_list:
        return not_acceptable(f"you requested {PARTIAL}, but the requested object is a list ({go_type(rt, True)})")
    return not_acceptable(f"you requested {PARTIAL_LIST}, but the requested object is not a list "
                          f"({go_type(rt, False)})")


def partial(obj: dict, target: Target) -> dict:
    """meta.k8s.io PartialObjectMetadata: the object's metadata only."""
    return {"kind": PARTIAL, "apiVersion": target.api_version, "metadata": obj.get("metadata", {})}


def partial_list(objects, metadata: dict, target: Target) -> dict:
    return {"kind": PARTIAL_LIST, "apiVersion": target.api_version, "metadata": metadata,
            "items": [partial(obj, target) for obj in objects]}
