"""The API semantics of one cluster: create, get, list, update, patch, delete and watch, with
resourceVersion concurrency, dry runs, admission hooks, finalizers, graceful Pod deletion and namespaces.
The HTTP layer (`server.py`) and the controllers both go through this class, as clients and controllers go
through a real API server."""
from __future__ import annotations

import bisect
import copy
import itertools
import random
import threading
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from . import conversion, errors, event_validation, managed_fields, patching, validation
from .defaults import apply_defaults, prepare_for_create
from .errors import ApiError
from . import listoptions
from .resources import Registry, ResourceType
from .selectors import field_matcher, label_matcher
from .store import Entry, Event, Store, Watcher

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply",
}


def now_iso(offset_seconds: float = 0) -> str:
    when = datetime.now(timezone.utc) + timedelta(seconds=offset_seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _shift_iso(timestamp: str, seconds: float) -> str:
    when = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) + timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RequestContext:
    """What one request carries besides its body: dry run, warnings to return, who asks. Admission hooks see
    `dry_run` as a webhook sees `request.dryRun` and must act as webhooks with `sideEffects: NoneOnDryRun`:
    decide and answer as for a real write, but change nothing."""
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)
    user: str = "system:kube-controller-manager"   # controllers; the HTTP layer sets the caller
    field_manager: str | None = None
    # the manager of writes without fieldManager: the caller's User-Agent product (controllers: their binary)
    default_field_manager: str = "kube-controller-manager"
    field_validation: str | None = None


@dataclass
class AdmissionRequest:
    operation: str              # CREATE, UPDATE, DELETE
    resource: ResourceType
    subresource: str
    namespace: str
    name: str
    obj: dict | None
    old: dict | None
    options: dict
    context: RequestContext


@dataclass
class ListResult:
    items: list[Entry]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


AdmissionHook = Callable[[AdmissionRequest], None]
SubresourceHandler = Callable[..., Any]


class Cluster:
    """One simulated cluster: its kinds, objects, hooks, subresources, logs and clock."""

    def __init__(self, name: str, registry: Registry, clock, history: int = 50_000):
        self.name = name
        self.registry = registry
        self.store = Store(history=history)
        self.clock = clock
        self.admission_hooks: list[AdmissionHook] = []
        self.eviction_guards: list[AdmissionHook] = []   # checks inside the eviction REST (PDBs), after admission
        # What runs inside containers: a program is called with each Pod the kubelet starts and returns True
        # when it takes the Pod over (it then ends it with controllers.kubelet.finish_pod).
        self.programs: list[Callable[[dict], bool]] = []
        self.subresources: dict[tuple[str, str], SubresourceHandler] = {}
        self.logs: dict[tuple[str, str, str], list[str]] = {}
        self.rng = random.Random(name)
        self.log_lock = threading.Lock()

    @property
    def lock(self):
        return self.store.lock

    # ------------------------------------------------------------------------------------- helpers
    def kind(self, api_version: str, kind: str) -> ResourceType:
        rt = self.registry.by_kind(api_version, kind)
        if rt is None:
            raise errors.ApiError(404, "NotFound", f'no matches for kind "{kind}" in version "{api_version}"')
        return rt

    def _generate_name(self, prefix: str, rng: random.Random | None = None) -> str:
        rng = rng or self.rng
        return prefix + "".join(rng.choice(_NAME_CHARS) for _index in range(5))

    def _check_namespace(self, rt: ResourceType, namespace: str | None, creating: bool) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise errors.bad_request("the server could not find the requested resource: a namespace is required")
        ns_rt = self.registry.by_key("namespaces")
        ns_entry = self.store.get("namespaces", "", namespace)
        if ns_entry is None and ns_rt is not None:
            raise errors.not_found(ns_rt, namespace)
        if creating and ns_entry and ns_entry.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", f'{errors.qualified(rt)} "" is forbidden: unable to create new '
                           f"content in namespace {namespace} because it is being terminated")
        return namespace

    def admit(self, request: AdmissionRequest) -> None:
        for hook in list(self.admission_hooks):
            hook(request)

    def _check_type(self, rt: ResourceType, body: dict) -> None:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected "
                                     f"API version ({rt.api_version})")
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")

    def _spec_part(self, obj: dict) -> dict:
        return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}

    # ------------------------------------------------------------------------------------- create
    def create(self, rt: ResourceType, namespace: str | None, body: dict, ctx: RequestContext | None = None,
               keep_status: bool = False, apply_config: dict | None = None) -> dict:
        """Create an object. Clients cannot set the status of kinds with a status subresource; scenario
        loading (keep_status) can. apply_config: the configuration of a server-side apply that creates it."""
        ctx = ctx or RequestContext()
        self._check_type(rt, body)
        obj = conversion.stored(rt, copy.deepcopy(body))   # an Event written through events.k8s.io: core form
        if not keep_status and "status" in rt.subresources:
            obj.pop("status", None)
        obj["apiVersion"], obj["kind"] = rt.storage_api_version, rt.kind
        meta = obj.setdefault("metadata", {})
        with self.lock:
            if rt.namespaced:
                body_ns = meta.get("namespace")
                if namespace and body_ns and body_ns != namespace:
                    raise errors.bad_request("the namespace of the provided object does not match the namespace "
                                             "sent on the request")
                namespace = self._check_namespace(rt, namespace or body_ns, creating=True)
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
                namespace = ""
            if not meta.get("name") and meta.get("generateName"):
                # A dry run gets a name of its own and leaves the cluster's name sequence alone.
                rng = random.Random() if ctx.dry_run else self.rng
                for _attempt in range(20):
                    meta["name"] = self._generate_name(meta["generateName"], rng)
                    if self.store.get(rt.key, namespace, meta["name"]) is None:
                        break
            name = meta.get("name") or ""
            for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(transient, None)
            if not (keep_status and meta.get("uid")):   # scenarios may fix UIDs, clients may not
                meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_iso()
            if rt.generation:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            apply_defaults(rt.key, obj)
            prepare_for_create(rt.key, obj)
            # As Store.Create: the strategy validates, then admission, then storage refuses a taken name.
            validation.validate_create(rt, obj)
            event_validation.validate_create(rt, obj)
            obj = self._manage_fields(rt, None, obj, ctx, "", apply_config)
            self.admit(AdmissionRequest("CREATE", rt, "", namespace, name, obj, None, {}, ctx))
            if self.store.get(rt.key, namespace, name) is not None:
                raise errors.already_exists(rt, name)
            if ctx.dry_run:
                return obj   # as it would be stored, without a resourceVersion (nothing was written)
            meta["resourceVersion"] = str(self.store.next_rv())
            self.store.put(rt.key, obj, "ADDED")
            return copy.deepcopy(obj)

    # ---------------------------------------------------------------------------------------- read
    def entry(self, rt: ResourceType, namespace: str | None, name: str) -> Entry:
        entry = self.store.get(rt.key, (namespace or "") if rt.namespaced else "", name)
        if entry is None:
            raise errors.not_found(rt, name)
        return entry

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict:
        return copy.deepcopy(self.entry(rt, namespace, name).obj)

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> dict | None:
        entry = self.store.get(rt.key, (namespace or "") if rt.namespaced else "", name)
        return copy.deepcopy(entry.obj) if entry else None

    def list(self, rt: ResourceType, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None, continue_token: str | None = None,
             resource_version: str | None = None, resource_version_match: str = "") -> ListResult:
        """A list as the apiserver serves it: the state at a resourceVersion (see _list_state), filtered, in key
        order, paginated with continue tokens that pin every page to the first page's resourceVersion."""
        labels = label_matcher(label_selector)
        fields = field_matcher(field_selector, rt.supported_fields, rt.plural)
        scope = namespace if rt.namespaced else None
        across = rt.namespaced and namespace is None
        start = None
        if continue_token:
            start, token_rv = listoptions.decode_continue(continue_token, namespace or "", across)
            if resource_version not in (None, "", "0"):
                raise errors.bad_request("specifying resource version is not allowed when using continue")
            rv, rows = self._continued_state(rt, scope, start, token_rv, across)
        else:
            rv, rows = self._list_state(rt, scope, resource_version, resource_version_match, bool(limit))
        # rows are in key order, so a continuation starts right after its key; a page reads up to limit+1 matches
        begin = bisect.bisect_right(rows, tuple(start), key=lambda row: (row[0], row[1])) if start is not None else 0
        items = []
        for ns, name, entry in itertools.islice(rows, begin, None):
            if labels(entry.obj) and fields(entry.obj):
                items.append((ns, name, entry))
                if limit and len(items) > limit:
                    break
        result = ListResult([row[2] for row in items], rv)
        if limit and len(items) > limit:
            result.items = result.items[:limit]
            result.continue_token = listoptions.encode_continue(items[limit - 1][:2], rv, across)
            # as the etcd3 store: remainingItemCount only for a list without selectors (it counts keys, not matches)
            result.remaining = None if (label_selector or field_selector) else len(rows) - begin - limit
        return result

    def _list_state(self, rt: ResourceType, scope: str | None, resource_version: str | None, match: str,
                    paged: bool) -> tuple[int, list[tuple[str, str, Entry]]]:
        """(resourceVersion, rows) a list reads: unset = the most recent state; "0" = any state (here the current);
        N with Exact, or the legacy N with a limit = exactly the state at N (410 when older than the history);
        N otherwise = not older than N (the current state, after waiting for the store to reach N). N newer than
        the store: 504 Too large resource version."""
        if resource_version in (None, "", "0"):
            with self.lock:
                return self.store.rv, self.store.sorted_entries(rt.key, scope)
        wanted = listoptions.parse_resource_version(resource_version)
        exact = match == listoptions.EXACT or (not match and paged)
        if not self.store.wait_until_fresh(wanted, 0 if exact else listoptions.FRESH_WAIT_SECONDS):
            raise listoptions.too_large(wanted, self.store.rv, retry_after=0 if exact else 1)
        with self.lock:
            if not exact:
                return self.store.rv, self.store.sorted_entries(rt.key, scope)
            try:
                return wanted, self.store.sorted_entries_at(rt.key, scope, wanted)
            except LookupError:
                raise errors.gone(listoptions.LIST_TOO_OLD) from None

    def _continued_state(self, rt: ResourceType, scope: str | None, start: tuple[str, str], token_rv: int,
                         across: bool) -> tuple[int, list[tuple[str, str, Entry]]]:
        """The state a continue token's page reads: its first page's, or the latest for a token issued after
        the history was lost; a token older than the history: 410 with such a token."""
        with self.lock:
            if token_rv == listoptions.LATEST:
                return self.store.rv, self.store.sorted_entries(rt.key, scope)
            try:
                return token_rv, self.store.sorted_entries_at(rt.key, scope, token_rv)
            except LookupError:
                raise listoptions.ExpiredContinue(listoptions.encode_continue(start, listoptions.LATEST,
                                                                              across)) from None

    # -------------------------------------------------------------------------------------- update
    def update(self, rt: ResourceType, namespace: str | None, name: str, body: dict,
               ctx: RequestContext | None = None, subresource: str = "") -> dict:
        ctx = ctx or RequestContext()
        self._check_type(rt, body)
        with self.lock:
            old = self.entry(rt, namespace, name).obj
            body_meta = body.get("metadata") or {}
            if body_meta.get("name") and body_meta["name"] != name:
                raise errors.bad_request(f"the name of the object ({body_meta['name']}) does not match the name on "
                                         f"the URL ({name})")
            wanted_rv = body_meta.get("resourceVersion")
            if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            new = self._prepare_update(rt, old, conversion.stored(rt, body), subresource)
            return self._commit_update(rt, old, new, ctx, subresource)

    def _prepare_update(self, rt: ResourceType, old: dict, body: dict, subresource: str) -> dict:
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            else:
                new.pop("status", None)
            return new
        new = copy.deepcopy(body)
        new["apiVersion"], new["kind"] = rt.storage_api_version, rt.kind
        if "status" in rt.subresources:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
        for fixed in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "namespace", "name", "generation"):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        return new

    def _commit_update(self, rt: ResourceType, old: dict, new: dict, ctx: RequestContext, subresource: str,
                       apply_config: dict | None = None, force: bool = False) -> dict:
        apply_defaults(rt.key, new)   # the updated or patched object is decoded, so defaulted, again
        new = self._manage_fields(rt, old, new, ctx, subresource, apply_config, force)
        meta = new["metadata"]
        if rt.generation and self._spec_part(new) != self._spec_part(old):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        validation.validate_update(rt, new, old)
        self.admit(AdmissionRequest("UPDATE", rt, subresource, meta.get("namespace", ""), meta["name"], new, old,
                                    {}, ctx))
        if new == old:
            return copy.deepcopy(old)   # a no-op write keeps the resourceVersion, as the real server does
        if ctx.dry_run:
            return new   # what would be stored, with the current resourceVersion (the dry-run GuaranteedUpdate)
        meta["resourceVersion"] = str(self.store.next_rv())
        if meta.get("deletionTimestamp") and not self._pending_finalizers(rt, new) and self._may_remove(rt, new):
            self.store.remove(rt.key, meta.get("namespace", ""), meta["name"], new)
            return copy.deepcopy(new)
        self.store.put(rt.key, new, "MODIFIED")
        return copy.deepcopy(new)

    @staticmethod
    def _manage_fields(rt: ResourceType, old: dict | None, new: dict, ctx: RequestContext, subresource: str,
                       apply_config: dict | None = None, force: bool = False) -> dict:
        """managedFields of the write, as the fieldmanager sets them before mutating admission: an apply owns
        its configuration (or answers a 409 conflict), any other write owns what it changed."""
        scope = managed_fields.Scope(rt.builtin, "status" in rt.subresources, subresource)
        if apply_config is not None:
            return managed_fields.record_apply(scope, rt.api_version, old, new, apply_config,
                                               ctx.field_manager or "", force, now_iso())
        manager = ctx.field_manager or ctx.default_field_manager
        managed_fields.record_update(scope, rt.api_version, old, new, manager, now_iso())
        return new

    @staticmethod
    def _pending_finalizers(rt: ResourceType, obj: dict) -> list[str]:
        """metadata.finalizers, plus a Namespace's spec.finalizers (the namespace controller's)."""
        pending = list(obj["metadata"].get("finalizers") or [])
        if rt.key == "namespaces":
            pending += list((obj.get("spec") or {}).get("finalizers") or [])
        return pending

    @staticmethod
    def _may_remove(rt: ResourceType, obj: dict) -> bool:
        """A Pod under graceful deletion goes only when its kubelet confirms with grace 0."""
        return rt.key != "pods" or obj["metadata"].get("deletionGracePeriodSeconds", 0) == 0

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch_type: str, patch: Any,
              ctx: RequestContext | None = None, subresource: str = "", force: bool = False) -> dict:
        ctx = ctx or RequestContext()
        if patch_type == "strategic" and not rt.builtin:
            raise errors.unsupported_media_type("application/strategic-merge-patch+json", [
                "application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"])
        with self.lock:
            entry = self.store.get(rt.key, (namespace or "") if rt.namespaced else "", name)
            if entry is None:
                if patch_type == "apply":
                    if not ctx.field_manager:
                        raise errors.invalid(rt, "PatchOptions", "", [("fieldManager", "Required value: is "
                                                                       "required for apply patch")],
                                             group="meta.k8s.io")
                    managed_fields.check_apply_config(patch)
                    body = copy.deepcopy(patch)
                    body.setdefault("metadata", {}).setdefault("name", name)
                    return self.create(rt, namespace, body, ctx, apply_config=patch)
                raise errors.not_found(rt, name)
            old = entry.obj
            base = conversion.served(rt, old)   # a patch applies to the form of the version it is sent to
            if patch_type == "merge":
                patched = patching.json_merge_patch(base, patch)
            elif patch_type == "json":
                patched = patching.json_patch(base, patch)
            elif patch_type == "strategic":
                patched = patching.strategic_merge_patch(base, patch)
            elif patch_type == "apply":
                if not ctx.field_manager:
                    raise errors.invalid(rt, "PatchOptions", "", [("fieldManager", "Required value: is "
                                                                   "required for apply patch")],
                                         group="meta.k8s.io")
                self._check_type(rt, patch)
                managed_fields.check_apply_config(patch)
                patched = (patching.strategic_merge_patch(base, patch) if rt.builtin
                           else patching.json_merge_patch(base, patch))
            else:
                raise errors.unsupported_media_type(patch_type, list(PATCH_TYPES))
            if not isinstance(patched, dict):
                raise errors.bad_request("the patch did not produce an object")
            patched = conversion.stored(rt, patched)
            wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            new = self._prepare_update(rt, old, patched, subresource)
            return self._commit_update(rt, old, new, ctx, subresource,
                                       apply_config=patch if patch_type == "apply" else None, force=force)

    # -------------------------------------------------------------------------------------- delete
    def delete(self, rt: ResourceType, namespace: str | None, name: str, options: dict | None = None,
               ctx: RequestContext | None = None, admit: bool = True) -> dict:
        """Delete an object as Store.Delete does: preconditions, admission, then graceful deletion or
        finalizers (a MODIFIED object with deletionTimestamp) or removal. The dry run (`ctx.dry_run`, or
        `dryRun: [All]` in the options) goes through every step and answers the same object, but stores
        nothing, keeps the resourceVersion and runs neither orphaning nor garbage collection. `admit=False`
        is the eviction REST's own delete (no admission of its own)."""
        ctx = ctx or RequestContext()
        options = options or {}
        if options.get("dryRun") and not ctx.dry_run:
            ctx = replace(ctx, dry_run=True)
        with self.lock:
            old = self.entry(rt, namespace, name).obj
            meta = old["metadata"]
            preconditions = options.get("preconditions") or {}
            if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
                raise errors.conflict(rt, name, f"Precondition failed: UID in precondition: {preconditions['uid']}"
                                      f", UID in object meta: {meta['uid']}")
            if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                                      f"{preconditions['resourceVersion']}, ResourceVersion in object meta: "
                                      f"{meta['resourceVersion']}")
            if admit:
                self.admit(AdmissionRequest("DELETE", rt, "", meta.get("namespace", ""), name, None, old, options,
                                            ctx))
            grace = self._grace_period(rt, old, options)
            policy = options.get("propagationPolicy") or ("Orphan" if options.get("orphanDependents") else
                                                          "Background")
            obj = copy.deepcopy(old)
            new_meta = obj["metadata"]
            finalizers = list(new_meta.get("finalizers") or [])
            if policy == "Foreground" and self.store.dependents(meta["uid"]) and \
                    "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if policy == "Orphan" and not ctx.dry_run:
                self._orphan_dependents(meta["uid"])
            if finalizers:
                new_meta["finalizers"] = finalizers
            if meta.get("deletionTimestamp"):
                current = meta.get("deletionGracePeriodSeconds", 0)
                if rt.key != "pods" or grace >= current:
                    if finalizers != list(meta.get("finalizers") or []):
                        return self._store_modified(rt, obj, ctx)
                    return obj
            if meta.get("deletionTimestamp"):   # a shorter grace period counts from the first deletion (BeforeDelete)
                new_meta["deletionTimestamp"] = _shift_iso(meta["deletionTimestamp"],
                                                           grace - int(meta.get("deletionGracePeriodSeconds", 0)))
            else:
                new_meta["deletionTimestamp"] = now_iso(grace if rt.key == "pods" else 0)
            new_meta["deletionGracePeriodSeconds"] = grace
            if rt.key == "namespaces":   # the namespace REST turns it Terminating in the same write
                obj.setdefault("status", {})["phase"] = "Terminating"
            if self._pending_finalizers(rt, obj) or (rt.key == "pods" and grace > 0):
                return self._store_modified(rt, obj, ctx)
            if ctx.dry_run:
                return obj
            new_meta["resourceVersion"] = str(self.store.next_rv())
            self.store.remove(rt.key, new_meta.get("namespace", ""), name, obj)
            return obj

    def _store_modified(self, rt: ResourceType, obj: dict, ctx: RequestContext | None = None) -> dict:
        if ctx is not None and ctx.dry_run:
            return obj   # the dry-run update answers what it would store, at the current resourceVersion
        obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
        self.store.put(rt.key, obj, "MODIFIED")
        return copy.deepcopy(obj)

    @staticmethod
    def _grace_period(rt: ResourceType, obj: dict, options: dict) -> int:
        if rt.key != "pods":
            return 0
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        return int(grace) if int(grace) >= 0 else 1   # BeforeDelete: a negative grace period means 1 s

    def _orphan_dependents(self, owner_uid: str) -> None:
        for key, ns, dep_name in self.store.dependents(owner_uid):
            entry = self.store.get(key, ns, dep_name)
            if entry is None:
                continue
            dep = copy.deepcopy(entry.obj)
            refs = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if refs:
                dep["metadata"]["ownerReferences"] = refs
            else:
                dep["metadata"].pop("ownerReferences", None)
            dep_rt = self.registry.by_key(key)
            if dep_rt is not None:
                self._store_modified(dep_rt, dep)

    def delete_collection(self, rt: ResourceType, namespace: str | None, label_selector: str | None,
                          field_selector: str | None, options: dict | None, ctx: RequestContext | None = None
                          ) -> list[dict]:
        result = self.list(rt, namespace, label_selector, field_selector)
        deleted = []
        for entry in result.items:
            meta = entry.obj["metadata"]
            try:
                deleted.append(self.delete(rt, meta.get("namespace"), meta["name"], options, ctx))
            except ApiError as err:
                if err.code != 404:
                    raise
        return deleted

    # --------------------------------------------------------------------------------------- watch
    def watch(self, rt: ResourceType, namespace: str | None, label_selector: str | None,
              field_selector: str | None, resource_version: str | None, send_initial_events: bool | None = None,
              allow_bookmarks: bool = False) -> Watcher:
        """A watch as the watch cache starts it. Legacy (send_initial_events None): from "" or "0" the current
        objects as ADDED events then changes, from N the changes after N (410 when older than the history).
        A streaming list (send_initial_events True, resourceVersionMatch NotOlderThan): the state at the most
        recent ("") / any ("0") / a not older than N resourceVersion as ADDED events, then, with bookmarks, the
        BOOKMARK annotated `k8s.io/initial-events-end: "true"` at that state's resourceVersion, then changes.
        send_initial_events False: changes from now ("", "0") or after N. N newer than the store: a streaming list
        waits for it, then answers 504 Too large resource version."""
        labels = label_matcher(label_selector)
        fields = field_matcher(field_selector, rt.supported_fields, rt.plural)
        since = None
        if resource_version not in (None, "", "0"):
            since = listoptions.parse_resource_version(resource_version)
        if send_initial_events and since is not None:
            if not self.store.wait_until_fresh(since, listoptions.FRESH_WAIT_SECONDS):
                raise listoptions.too_large(since, self.store.rv)
            since = None   # the current state is not older than N
        try:
            return self.store.watch(rt.key, namespace if rt.namespaced else None,
                                    lambda obj: labels(obj) and fields(obj), since, send_initial_events,
                                    end_bookmark=bool(send_initial_events and allow_bookmarks))
        except LookupError:
            raise errors.gone(f"too old resource version: {since} ({self.store.compacted_rv})") from None

    # ----------------------------------------------------------------------------------------- logs
    def append_log(self, namespace: str, pod: str, container: str, lines: list[str] | str) -> None:
        if isinstance(lines, str):
            lines = lines.splitlines()
        with self.log_lock:
            self.logs.setdefault((namespace, pod, container), []).extend(lines)

    def read_log(self, namespace: str, pod: str, container: str) -> list[str]:
        with self.log_lock:
            return list(self.logs.get((namespace, pod, container), []))

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        self.store.add_listener(listener)
