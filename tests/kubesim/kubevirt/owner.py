"""What KubeVirt's replica controllers share (VirtualMachinePool, VirtualMachineInstanceReplicaSet): an owner's
event syncs that owner; a dependent's event syncs the owner its controller reference names. Upstream: the
controllers' informer handlers in kubevirt/kubevirt `pkg/virt-controller/watch` (`pool/pool.go`, `replicaset/replicaset.go`)."""
from __future__ import annotations

from ..controllers import Controller
from ..store import DELETED, Event
from .common import controller_ref, find, meta, unmanaged


class ReplicaOwnerController(Controller):
    """Subclasses set `keys`, `owner_key` (the owner's resource) and `owner_kind`, and implement `reconcile`."""
    owner_key = ""
    owner_kind = ""

    def on_event(self, event: Event) -> None:
        if event.key == self.owner_key:
            if event.type != DELETED:
                self.sync(event.namespace, meta(event.obj)["name"])
            return
        ref = controller_ref(event.obj)
        if ref and ref.get("kind") == self.owner_kind:
            self.sync(event.namespace, ref.get("name", ""))

    def sync(self, namespace: str, name: str) -> None:
        """Reconcile the owner unless it is gone, being deleted, or left to another manager."""
        owner = find(self.cluster, self.owner_key, namespace, name)
        if owner is None or meta(owner).get("deletionTimestamp") or unmanaged(owner):
            return
        self.reconcile(owner)

    def reconcile(self, owner: dict) -> None:
        raise NotImplementedError
