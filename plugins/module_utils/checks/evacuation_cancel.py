# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cancel what a stopped drain started: the pure decisions behind giving a node back (uncordon) while KubeVirt still
evacuates it.

A drain's evictions mark each VMI with `status.evacuationNodeName`; KubeVirt's evacuation controller creates a
`kubevirt-evacuation-*` migration for every VMI so marked, and again after each failure, whether or not the node is
still cordoned (kubevirt/kubevirt#9585). virt-api's `evacuate/cancel` subresource (group `subresources.kubevirt.io`,
served since KubeVirt v1.7.0: kubevirt/kubevirt#15957, backported as #16097) clears the mark: a PUT of
`EvacuateCancelOptions` whose `evacuationNodeName` must equal the VMI's (a JSON patch `test`). It leaves migrations
already created alone; a Pending one would still move the VM, so, as `virtctl evacuate-cancel --migrate-cancel` does,
the unfinished evacuation migration is deleted, but only while it has not started (a migration already scheduling or
running is left to finish: the VM then moves once and stays). Where the subresource is not served, nothing can clear
the mark from here: the result says which VMs KubeVirt goes on evacuating and how to stop it.

Upstream: kubevirt/kubevirt `pkg/virt-api/rest/evacuate_cancel.go`, `pkg/virtctl/vm/evacuate_cancel.go`,
`pkg/virtctl/vm/migrate_cancel.go`, `pkg/virt-controller/watch/drain/evacuation/evacuation.go`.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ansible_collections.kubevirt_ops.rebalance.plugins.module_utils.kube import kubevirt as kv

GROUP_VERSION = "subresources.kubevirt.io/v1"
RESOURCE = "virtualmachineinstances/evacuate/cancel"
NOT_STARTED_PHASES = ("", "Pending")      # a migration in these phases has no target Pod yet: deleting it moves nothing
RESULTS = ("stayed", "moving", "continuing", "failed")


def served(resource_list: Optional[dict]) -> bool:
    """Whether virt-api's APIResourceList (`/apis/subresources.kubevirt.io/v1`, None when not served) lists the cancel."""
    return any(r.get("name") == RESOURCE for r in (resource_list or {}).get("resources") or [])


def path(namespace: str, name: str) -> str:
    return "/apis/{0}/namespaces/{1}/virtualmachineinstances/{2}/evacuate/cancel".format(GROUP_VERSION, namespace, name)


def options(node: str) -> dict:
    """The PUT body: the node the VMI is marked for (the handler's JSON patch tests it). A dry run goes in `dryRun`."""
    return {"kind": "EvacuateCancelOptions", "apiVersion": "kubevirt.io/v1", "evacuationNodeName": node}


def marked(vmis: List[dict], node: str) -> List[dict]:
    """The VMIs still marked for evacuation from `node` (the VMs that had not moved), sorted by namespace/name. A mark the
    Descheduler's eviction set (annotation `kubevirt.io/eviction-source: descheduler`) is a rebalance, not the drain's:
    it is left alone."""
    found = [v for v in vmis if (v.get("status") or {}).get("evacuationNodeName") == node
             and (v.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
             and kv.annotations(v).get(kv.EVICTION_SOURCE_ANNOTATION) != "descheduler"]
    return sorted(found, key=kv.ref)


def plan(vmis: List[dict], vmims: List[dict], node: str) -> List[dict]:
    """Per VM marked for `node`: where it runs, the unfinished evacuation migrations not yet started (to delete after the
    cancel) and the one already under way (left to finish)."""
    entries = []
    for vmi in marked(vmis, node):
        namespace, name = kv.ref(vmi)
        pending, started = [], None
        for vmim in kv.migrations_of(vmi, vmims):
            facts = kv.migration_facts(vmim)
            if facts["finished"] or kv.meta(vmim).get("deletionTimestamp"):
                continue
            if (facts["phase"] or "") in NOT_STARTED_PHASES:
                pending.append({"name": facts["name"], "uid": kv.meta(vmim).get("uid"), "evacuation": facts["evacuation"]})
            else:
                started = {"name": facts["name"], "phase": facts["phase"]}
        entries.append({"namespace": namespace, "name": name, "node": (vmi.get("status") or {}).get("nodeName"),
                        "pending": sorted(pending, key=lambda m: m["name"]), "started": started})
    return entries


def _name(entry: dict) -> str:
    return "{0}/{1}".format(entry["namespace"], entry["name"])


def outcome(entry: dict, cancelled: bool, error: Optional[str] = None, is_served: bool = True) -> dict:
    """What becomes of one marked VM: `stayed` (mark cleared, nothing left that would move it), `moving` (mark cleared, a
    migration already under way finishes), `continuing` (KubeVirt does not serve the cancel: it keeps evacuating) or
    `failed` (the cancel was refused); with the reason a person reads."""
    result = {"namespace": entry["namespace"], "name": entry["name"], "node": entry["node"],
              "deleted_migrations": [m["name"] for m in entry["pending"]] if cancelled else []}
    if not is_served:
        result.update(result="continuing", reason="KubeVirt here does not serve evacuate/cancel (v1.7.0 and newer do): its "
                      "evacuation controller keeps creating migrations for the VMI until it has left {0}".format(entry["node"]))
    elif error:
        result.update(result="failed", reason="the cancel was refused, KubeVirt keeps evacuating it: " + error)
    elif entry["started"]:
        result.update(result="moving", reason="evacuation cancelled, but migration {0} was already {1}: it finishes and the VM "
                      "moves once".format(entry["started"]["name"], entry["started"]["phase"]))
    else:
        deleted = result["deleted_migrations"]
        result.update(result="stayed", reason="evacuation cancelled{0}; the VM stays on {1}".format(
            ", pending migration {0} deleted".format(", ".join(deleted)) if deleted else "", entry["node"]))
    return result


def advice(node: str, results: List[dict]) -> Optional[str]:
    """How a person stops the evacuations KubeVirt goes on with (the subresource missing, or a cancel refused)."""
    going = [r for r in results if r["result"] in ("continuing", "failed")]
    if not going:
        return None
    steps = ["kubectl patch vmi {0} -n {1} --type=json -p '[{{\"op\":\"test\",\"path\":\"/status/evacuationNodeName\",\"value\":\"{2}\"}},"
             "{{\"op\":\"remove\",\"path\":\"/status/evacuationNodeName\"}}]'".format(r["name"], r["namespace"], node) for r in going]
    steps += ["virtctl migrate-cancel {0} -n {1}".format(r["name"], r["namespace"]) for r in going]
    return ("KubeVirt goes on evacuating {0} from {1} (new kubevirt-evacuation-* migrations after each one that ends without moving "
            "the VM). To stop it: with KubeVirt v1.7 or newer run `virtctl evacuate-cancel node {1}`; before that, clear the mark as "
            "evacuate/cancel does, then cancel the VMI's unfinished migration (virtctl migrate-cancel deletes it): {2}".format(
                ", ".join(_name(r) for r in going), node, "; ".join(steps)))


def summary(node: str, is_served: Optional[bool], results: List[dict]) -> dict:
    """The `evacuations` entry of an uncordon's result: what each VM marked for the node became, and the advice; `served` is
    None when nothing was marked (discovery was not asked)."""
    by_result: Dict[str, List[str]] = {key: [] for key in RESULTS}
    for r in results:
        by_result[r["result"]].append(_name(r))
    return dict(by_result, served=is_served, marked=[_name(r) for r in results], vms=results,
                deleted_migrations=sorted("{0}/{1}".format(r["namespace"], m) for r in results for m in r["deleted_migrations"]),
                advice=advice(node, results))


def left_marked(vmis: List[dict], nodes: List[str]) -> List[dict]:
    """For a rolling maintenance that stopped: the VMs still marked for evacuation from its nodes (KubeVirt keeps migrating
    them while the node stays cordoned, and after an uncordon that does not cancel them), each with the way out."""
    return [{"vm": "{0}/{1}".format(*kv.ref(vmi)), "node": node, "result": "evacuating",
             "reason": "KubeVirt is still evacuating it from {0}: run again to continue, or give the node back with kubevirt_node_drain "
                       "state=uncordon, which cancels the evacuation so that the VM stays".format(node)}
            for node in nodes for vmi in marked(vmis, node)]
