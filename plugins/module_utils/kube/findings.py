# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Findings: things a person must read before moving VMs, each with a stable code, a severity and a
message that names the object, the upstream behaviour and the fix. The codes are part of the modules'
RETURN documentation; roles filter on them."""

from __future__ import annotations

from typing import Dict, Optional

WARNING = "warning"
INFO = "info"

# code -> severity; docs/modules/kubevirt_eviction_facts.md explains each one
CODES: Dict[str, str] = {
    "strategy_differs_from_cluster": WARNING,
    "not_migratable_with_migrating_strategy": WARNING,
    "pdb_needs_scale_subresource": WARNING,
    "pdb_blocks_eviction": WARNING,
    "multiple_pdbs": WARNING,
    "feature_gate_missing": WARNING,
    "verbosity_below_3": INFO,
    "descheduler_dry_run": INFO,
    "descheduler_suspended": INFO,
    "descheduler_not_found": INFO,
    "policy_missing": WARNING,
    "policy_unparseable": WARNING,
    "policy_protects_pvc_pods": WARNING,
    "policy_protects_local_storage": WARNING,
    "kubevirt_not_served": WARNING,
    "kubevirt_cr_missing": WARNING,
    "migration_unfinished": INFO,
    "requests_disagree_with_usage": WARNING,
    # vm_migration_cooldown's check of the live policy (docs/modules/vm_migration_cooldown.md)
    "cooldown_not_enforced": WARNING,
    "cooldown_policy_unknown": INFO,
}


def finding(code: str, message: str, kind: Optional[str] = None, name: Optional[str] = None,
            namespace: Optional[str] = None) -> dict:
    """One finding; `kind`/`namespace`/`name` point at the object it is about."""
    if code not in CODES:
        raise KeyError("unknown finding code {0!r}".format(code))
    return {"code": code, "severity": CODES[code], "kind": kind, "namespace": namespace, "name": name,
            "message": message}
