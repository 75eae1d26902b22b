# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which resources the API server serves, read lazily and cached in a file between runs.

The requests are those of the kubernetes client's LazyDiscoverer as kubernetes.core uses it, so that a run costs the
same discovery requests on either path: without a cache, /version and /apis when the client is made, then each group
version when the resources are first listed; with a cache, none, except a group version whose resource list is empty
(one that serves only subresources), which is read again; `invalidate_cache()` reads everything again.

The cache is a JSON file in the temp dir, one per user, API server and credentials, written atomically and read
only when it belongs to the user.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from typing import Any, Callable, Dict, Iterator, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.k8s.transport import ApiError

CACHE_FORMAT = "kubevirt_ops.rebalance discovery 1"
SERVICE_UNAVAILABLE = 503


@dataclasses.dataclass(eq=False)  # compared and hashed by identity, as kubernetes.dynamic's Resource
class Resource:
    """A served resource: what the collection reads of kubernetes.dynamic's Resource, and its paths."""
    prefix: str
    group: str
    api_version: str
    kind: str
    name: str
    namespaced: bool = False
    preferred: bool = False

    @property
    def group_version(self) -> str:
        return "{0}/{1}".format(self.group, self.api_version) if self.group else self.api_version

    def path(self, name: Optional[str] = None, namespace: Optional[str] = None) -> str:
        """As kubernetes.dynamic's Resource.path: the namespace only for a namespaced resource."""
        path = "/{0}/{1}".format(self.prefix, self.group_version)
        if self.namespaced and namespace:
            path += "/namespaces/" + namespace
        path += "/" + self.name.lower()
        return path + "/" + name if name else path

    def __repr__(self) -> str:
        return "<Resource {0} {1}>".format(self.kind, self.group_version)


class GroupVersion:
    """One group version of the discovery tree: preferred or not, and its resources by kind once read."""

    def __init__(self, preferred: bool, resources: Optional[Dict[str, List[Resource]]] = None) -> None:
        self.preferred = preferred
        self.resources = resources or {}


def cache_path(host: str, credentials: str) -> str:
    """The cache file for an API server and credentials (their hash: the file name gives neither away)."""
    key = "\n".join((host, credentials, str(os.getuid() if hasattr(os, "getuid") else "")))
    return os.path.join(tempfile.gettempdir(), "kubevirt-ops-discovery-{0}.json".format(hashlib.sha256(key.encode("utf-8")).hexdigest()))


class Discovery:
    """The served resources, iterated as lists of resources per kind (as kubernetes' LazyDiscoverer yields them)."""

    def __init__(self, get_json: Callable[[str], Any], cache_file: str) -> None:
        self._get_json = get_json
        self._cache_file = cache_file
        self._tree: Dict[str, Dict[str, Dict[str, GroupVersion]]] = {}
        self.version: Dict[str, Any] = {}
        self._load(refresh=False)

    def _load(self, refresh: bool) -> None:
        cached = None if refresh else self._read()
        self.version = cached["version"] if cached else self._get_json("/version")
        if cached:
            self._tree = cached["tree"]
        else:
            self._tree = {}
            self.parse_api_groups()

    def invalidate_cache(self) -> None:
        """Read /version, /apis and (when iterated) every group version again."""
        self._load(refresh=True)

    def parse_api_groups(self, request_resources: bool = False) -> Dict[str, Dict[str, Dict[str, GroupVersion]]]:
        """The discovery tree (prefix -> group -> version), reading /apis when it is not known yet."""
        del request_resources   # resources are read when iterated
        if not self._tree:
            answer = self._get_json("/apis")
            groups: Dict[str, Dict[str, GroupVersion]] = {}
            for group in answer.get("groups") or []:
                groups[group["name"]] = {version["version"]: GroupVersion(version == group.get("preferredVersion"))
                                         for version in group.get("versions") or []}
            self._tree = {"api": {"": {"v1": GroupVersion(True)}}, "apis": groups}
            self._write()
        return self._tree

    def __iter__(self) -> Iterator[List[Resource]]:
        read = False
        for prefix, groups in self._tree.items():
            for group, versions in groups.items():
                for version, group_version in versions.items():
                    if not group_version.resources:
                        group_version.resources = self._resources(prefix, group, version, group_version.preferred)
                        read = True
                    yield from list(group_version.resources.values())
        if read:
            self._write()

    def _resources(self, prefix: str, group: str, version: str, preferred: bool) -> Dict[str, List[Resource]]:
        """A group version's resources by kind (subresources left out); none when its API is unavailable (503) or
        does not answer JSON, as the kubernetes client has it."""
        try:
            answer = self._get_json("/" + "/".join(part for part in (prefix, group, version) if part))
        except ApiError as error:
            if error.status != SERVICE_UNAVAILABLE:
                raise
            return {}
        except ValueError:
            return {}
        resources: Dict[str, List[Resource]] = {}
        for entry in answer.get("resources") or []:
            if "/" in entry["name"]:
                continue
            resource = Resource(prefix, group, version, entry["kind"], entry["name"], bool(entry.get("namespaced")), preferred)
            resources.setdefault(resource.kind, []).append(resource)
        return resources

    # ---------------------------------------------------------------------------------- the file
    def _read(self) -> Optional[Dict[str, Any]]:
        try:
            if hasattr(os, "getuid") and os.stat(self._cache_file).st_uid != os.getuid():
                return None
            with open(self._cache_file) as handle:
                data = json.load(handle)
            if data.get("format") != CACHE_FORMAT:
                return None
            tree = {prefix: {group: {version: GroupVersion(entry["preferred"], {
                kind: [Resource(prefix, group, version, kind, r["name"], r["namespaced"], entry["preferred"]) for r in listed]
                for kind, listed in entry["resources"].items()}) for version, entry in versions.items()}
                for group, versions in groups.items()} for prefix, groups in data["tree"].items()}
            return {"version": data["version"], "tree": tree}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _write(self) -> None:
        """Write the cache atomically (a reader never sees half a file); a temp dir that cannot be written costs
        only the cache."""
        data = {"format": CACHE_FORMAT, "version": self.version, "tree": {
            prefix: {group: {version: {"preferred": gv.preferred, "resources": {
                kind: [{"name": r.name, "namespaced": r.namespaced} for r in listed] for kind, listed in gv.resources.items()}}
                for version, gv in versions.items()} for group, versions in groups.items()} for prefix, groups in self._tree.items()}}
        folder = os.path.dirname(self._cache_file)
        try:
            descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".kubevirt-ops-discovery-")
        except OSError:
            return
        try:
            with os.fdopen(descriptor, "w") as handle:
                json.dump(data, handle)
            os.replace(temporary, self._cache_file)
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass
