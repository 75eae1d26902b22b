"""What the API server's registry strategies validate before an object is stored (create and update, real
and dry-run alike), with the upstream field paths and messages:

- every kind: `metadata.name` is required (unless `generateName` is set) and must be a DNS subdomain
  (apimachinery `ValidateObjectMeta` + `NameIsDNSSubdomain`: `must be no more than 253 characters` and the
  RFC 1123 regex message);
- ConfigMap (`ValidateConfigMap`, `ValidateConfigMapUpdate`): keys of `data` and `binaryData` are config
  keys (`[-._a-zA-Z0-9]+`, at most 253 characters, not `.`/`..`/`..*`), a key may not be in both, the values
  of both together (binaryData counted decoded) hold at most `core.MaxSecretSize` = 1048576 bytes
  (`[]: Too long: may not be more than 1048576 bytes`), and an `immutable: true` ConfigMap keeps its data,
  binaryData and immutable.

Errors are (field, error body) pairs for `errors.invalid`, in upstream order; map keys are checked sorted
(Go ranges over maps in random order).

Upstream: kubernetes `pkg/apis/core/validation/validation.go` (ValidateConfigMap), apimachinery
`pkg/util/validation/validation.go` (IsDNS1123Subdomain, IsConfigMapKey, RegexError) and
`pkg/util/validation/field/errors.go` (TooLong, ErrorBody).
Simplified: only names are validated for other kinds (no per-kind spec validation), and the name rule is
the DNS subdomain for every kind (upstream, Namespaces and Services take DNS labels)."""
from __future__ import annotations

import base64
import binascii
import re

from . import errors

MAX_NAME = 253
MAX_CONFIGMAP_SIZE = 1048576      # core.MaxSecretSize, 1 MiB
_DNS_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS_SUBDOMAIN = re.compile(f"^{_DNS_SUBDOMAIN_FMT}$")
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY = re.compile(f"^{_CONFIG_KEY_FMT}$")


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery RegexError (with its double space after each example but the last)."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    return message + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def dns_subdomain_errors(value: str) -> list[str]:
    errs = []
    if len(value) > MAX_NAME:
        errs.append(max_len_error(MAX_NAME))
    if not _DNS_SUBDOMAIN.match(value):
        errs.append(regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                                "'-' or '.', and must start and end with an alphanumeric character",
                                _DNS_SUBDOMAIN_FMT, "example.com"))
    return errs


def config_key_errors(value: str) -> list[str]:
    errs = []
    if len(value) > MAX_NAME:
        errs.append(max_len_error(MAX_NAME))
    if not _CONFIG_KEY.match(value):
        errs.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def quote(value: str) -> str:
    """Go's %q for the printable strings names and keys are."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def name_errors(meta: dict) -> list[tuple[str, str]]:
    """ValidateObjectMeta's name rules: generateName (a prefix: a trailing '-' is fine), then name."""
    errs: list[tuple[str, str]] = []
    prefix = meta.get("generateName") or ""
    if prefix:
        masked = prefix[:-2] + "a" if len(prefix) > 1 and prefix.endswith("-") else prefix   # maskTrailingDash
        errs += [("metadata.generateName", f"Invalid value: {quote(prefix)}: {msg}")
                 for msg in dns_subdomain_errors(masked)]
    name = meta.get("name") or ""
    if not name:
        errs.append(("metadata.name", "Required value: name or generateName is required"))
    else:
        errs += [("metadata.name", f"Invalid value: {quote(name)}: {msg}") for msg in dns_subdomain_errors(name)]
    return errs


def _size(value, binary: bool) -> int:
    if not isinstance(value, str):
        return len(str(value).encode())
    if binary:
        try:
            return len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            return len(value)
    return len(value.encode("utf-8"))


def configmap_errors(obj: dict) -> list[tuple[str, str]]:
    errs: list[tuple[str, str]] = []
    data = obj.get("data") or {}
    binary = obj.get("binaryData") or {}
    total = 0
    for key in sorted(data) if isinstance(data, dict) else []:
        errs += [(f"data[{key}]", f"Invalid value: {quote(key)}: {msg}") for msg in config_key_errors(key)]
        if key in binary:
            errs.append((f"data[{key}]", f"Invalid value: {quote(key)}: duplicate of key present in binaryData"))
        total += _size(data[key], binary=False)
    for key in sorted(binary) if isinstance(binary, dict) else []:
        errs += [(f"binaryData[{key}]", f"Invalid value: {quote(key)}: {msg}") for msg in config_key_errors(key)]
        total += _size(binary[key], binary=True)
    if total > MAX_CONFIGMAP_SIZE:
        # field.NewPath("") prints as "[]": the error is about the whole object.
        errs.append(("[]", f"Too long: may not be more than {MAX_CONFIGMAP_SIZE} bytes"))
    return errs


def configmap_update_errors(new: dict, old: dict) -> list[tuple[str, str]]:
    errs: list[tuple[str, str]] = []
    if old.get("immutable") is True:
        message = "Forbidden: field is immutable when `immutable` is set"
        if new.get("immutable") is not True:
            errs.append(("immutable", message))
        if (new.get("data") or {}) != (old.get("data") or {}):
            errs.append(("data", message))
        if (new.get("binaryData") or {}) != (old.get("binaryData") or {}):
            errs.append(("binaryData", message))
    return errs


def validate_create(rt, obj: dict) -> None:
    """Raise 422 Invalid when obj may not be created."""
    meta = obj.get("metadata") or {}
    errs = name_errors(meta)
    if rt.key == "configmaps":
        errs += configmap_errors(obj)
    if errs:
        raise errors.invalid(rt, rt.kind, meta.get("name") or "", errs)


def validate_update(rt, new: dict, old: dict) -> None:
    """Raise 422 Invalid when old may not become new (names cannot change on update, so only the kind's
    own rules apply)."""
    errs: list[tuple[str, str]] = []
    if rt.key == "configmaps":
        errs += configmap_update_errors(new, old) + configmap_errors(new)
    if errs:
        raise errors.invalid(rt, rt.kind, new["metadata"].get("name", ""), errs)
