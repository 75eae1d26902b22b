# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Short failures for the roles: a module result turned into the few lines a person reads in a terminal or an AWX job log.

A role registers a module's result with `failed_when: false`, keeps it whole (the registered variable, the report file)
and fails with `ansible.builtin.fail` and these lines: what was refused or failed; one line per VM (node, object) with the
reason in the module's words and the fix, naming the variable a person sets; then where the full result is.

`variables` maps a module option (or a result's field) to the variables that set it, the role's first, then the
playbooks': `{"allow_loss": ["node_maintenance_allow_loss", "maintenance_allow_loss"]}`.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible.errors import AnsibleFilterError

# Every line fits a wide terminal; the full text stays in the registered result. A reason quoted from elsewhere
# (KubeVirt, the API server, a log line) is cut shorter, so that the fix after it stays on the line.
LINE_WIDTH = 300
REASON_WIDTH = 160
# The problem of one of this collection's errors keeps the API server's words (a 403 names the verb and resource).
PROBLEM_WIDTH = 240
# Items listed before "... and N more": the summary stays within a screen.
ITEM_LIMIT = 6
# KubeVirt's eviction webhook puts this before its refusals; the summary keeps KubeVirt's words after it.
WEBHOOK_PREFIX = re.compile(r'^admission webhook "[^"]+" denied the request: ')
# KubeVirt's failureReason wraps libvirt's message: `Live migration failed error encountered during MigrateToURI3 libvirt
# api call: virError(Code=1, Domain=10, Message='operation failed: ...')`.
LIBVIRT_ERROR = re.compile(r" error encountered during \S+ libvirt api call: virError\(Code=\d+, Domain=\d+, Message='(.*?)'\)")
# The start of every shutdown verdict (kube/kubevirt.py); what follows is what differs per VM.
SHUTDOWN_PREFIX = "the launcher Pod is deleted and the VM shuts down; "
# kubevirt_node_drain's per-VM results that are not a failure of the drain
DRAIN_OK_RESULTS = ("migrated", "restarted", "replaced", "deleted", "moved", "not_running", "blocked")
# vm_migration_wait's errors, whose result lists the migrations
WAIT_ERRORS = ("MigrationsUnfinished", "MigrationsFailed")

Variables = Optional[Mapping[str, Any]]


# ------------------------------------------------------------------------------------------ text
def one_line(text: Any, width: int = LINE_WIDTH) -> str:
    """`text` on one line (whitespace runs collapsed), cut at `width` characters, ending `[...]` where cut."""
    flat = " ".join(str(text if text is not None else "").split())
    return flat if len(flat) <= width else flat[:width - 6].rstrip() + " [...]"


def sentence(text: Any, width: int = LINE_WIDTH) -> str:
    """`text` on one line without its final full stop, so that `. Fix: ...` can follow; libvirt's error wrapper in a
    KubeVirt failure reason is reduced to libvirt's message."""
    text = LIBVIRT_ERROR.sub(r": \1", str(text or "").strip())
    return one_line(text.rstrip("."), width)


def mapping(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError("{0} expects a registered module result (a dict), got {1}".format(name, type(value).__name__))
    return value


# ------------------------------------------------------------------------------------------ variables
def variable_names(variables: Variables, option: str) -> List[str]:
    """The variables that set `option` (the role's first), or the option itself when none is known."""
    names = (variables or {}).get(option) or [option]
    return [str(names)] if isinstance(names, str) else [str(name) for name in names]


def playbook_part(names: List[str], lead: str) -> str:
    return "{0}playbook: {1}".format(lead, ", ".join(names[1:])) if len(names) > 1 else ""


def names_of(variables: Variables, option: str) -> str:
    """`role_var (playbook: playbook_var)`."""
    names = variable_names(variables, option)
    part = playbook_part(names, "")
    return names[0] + (" ({0})".format(part) if part else "")


def setting(variables: Variables, option: str, value: str) -> str:
    """`set role_var: value (playbook: playbook_var)`."""
    names = variable_names(variables, option)
    part = playbook_part(names, "")
    return "set {0}: {1}".format(names[0], value) + (" ({0})".format(part) if part else "")


def mapped_option(path: str, variables: Variables) -> Optional[str]:
    """The key of `variables` that a field path names: the path itself (an option), else its last segment that is a key
    (a policy field rendered from an option: `profiles[0].pluginConfig[1].args.thresholds.cpu` -> `thresholds`)."""
    if not variables:
        return None
    if path in variables:
        return path
    for segment in reversed(re.sub(r"\[[^\]]*\]", "", path).split(".")):
        if segment in variables:
            return segment
    return None


def field(path: Any, variables: Variables) -> str:
    """`path (from role_var; playbook: playbook_var): ` when the variables map the path, else `path: `; '' without a path."""
    if not path:
        return ""
    option = mapped_option(str(path), variables)
    if option is None:
        return "{0}: ".format(path)
    names = variable_names(variables, option)
    return "{0} (from {1}{2}): ".format(path, names[0], playbook_part(names, "; "))


# ------------------------------------------------------------------------------------------ the lines
def where_line(full: Optional[str], report: Optional[str]) -> List[str]:
    """The line that says where the whole result is: the registered variable (printed with -v) and the report file."""
    parts = (["{0} (-v prints it)".format(full)] if full else []) + ([str(report)] if report else [])
    return ["Full result: " + "; ".join(parts)] if parts else []


def failure_lines(items: Any, title: str, full: Optional[str] = None, report: Optional[str] = None, limit: int = ITEM_LIMIT,
                  fix: Optional[str] = None, note: Optional[str] = None) -> List[str]:
    """`title`; each item as `- item` (at most `limit`, then `- ... and N more`); the `note`; `Fix: fix`; where the full
    result is."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise AnsibleFilterError("failure_lines expects a list of items, got {0}".format(type(items).__name__))
    texts = [one_line(item) for item in items if item not in (None, "")]
    limit = max(1, int(limit))
    lines = [one_line(title)] + ["- " + text for text in texts[:limit]]
    if len(texts) > limit:
        lines.append("- ... and {0} more".format(len(texts) - limit))
    if note:
        lines.append(one_line(note))
    if fix:
        lines.append(one_line("Fix: " + sentence(fix) + "."))
    return lines + where_line(full, report)


# ------------------------------------------------------------------------------------------ any module
def problem_item(problem: Mapping[str, Any], variables: Variables = None, with_fix: bool = True) -> str:
    """`field (from variable): problem. Fix: fix.` for one of this collection's errors (or one policy problem)."""
    fix = " Fix: {0}.".format(sentence(problem["fix"])) if with_fix and problem.get("fix") else ""
    return "{0}{1}.{2}".format(field(problem.get("path"), variables), sentence(problem.get("problem"), PROBLEM_WIDTH), fix)


def migration_item(entry: Mapping[str, Any]) -> str:
    detail = entry.get("phase") or "no phase yet"
    if entry.get("phase") == "Failed":
        detail = "Failed: {0}".format(sentence(entry.get("failure_reason") or "no reason given", REASON_WIDTH))
    return "{0}/{1} (VMI {2}): {3}".format(entry.get("namespace"), entry.get("name"), entry.get("vmi"), detail)


def error_items(result: Mapping[str, Any], variables: Variables = None) -> Tuple[List[str], Optional[str]]:
    """What a failed module result says, as items and one fix: each policy problem (`error.errors`, each with its own
    fix); each error line of a failed Descheduler run (`error.run.errors`); each migration a wait ended on; or the
    error's field and problem; else (kubernetes.core, a crash) the lines of `msg`."""
    error = result.get("error") if isinstance(result.get("error"), Mapping) else {}
    problems = error.get("errors")
    if isinstance(problems, Sequence) and not isinstance(problems, str) and problems:
        return [problem_item(p, variables) for p in problems if isinstance(p, Mapping)], None
    fix = error.get("fix")
    run = error.get("run") if isinstance(error.get("run"), Mapping) else {}
    if run.get("errors"):
        return [one_line(line) for line in run["errors"]], fix  # the log lines as they are: no fix follows on their line
    if error.get("type") in WAIT_ERRORS and isinstance(result.get("migrations"), Sequence):
        # the problem lists the migrations on one line: here each is an item
        headline = str(error.get("problem") or "").split(": ", 1)[0]
        failed_only = error.get("type") == "MigrationsFailed"
        entries = [m for m in result["migrations"] if isinstance(m, Mapping) and ((m.get("phase") == "Failed") if failed_only else not m.get("final"))]
        return [field(error.get("path"), variables) + headline] + [migration_item(m) for m in entries], fix
    if error.get("problem"):
        return [problem_item(error, variables, with_fix=False)], fix
    return [line for line in str(result.get("msg") or "the module failed without a message").splitlines() if line.strip()], None


def module_failure_lines(result: Any, title: str, variables: Variables = None, full: Optional[str] = None,
                         report: Optional[str] = None) -> List[str]:
    """Any failed module result (this collection's errors, kubernetes.core's, a crash) as summary lines."""
    items, fix = error_items(mapping(result, "module_failure_lines"), variables)
    return failure_lines(items, title, full, report, fix=fix)


# ------------------------------------------------------------------------------------------ kubevirt_node_drain
def vm_key(entry: Mapping[str, Any]) -> str:
    return "{0}/{1}".format(entry.get("namespace"), entry.get("name"))


def shutdown_detail(vm: Mapping[str, Any]) -> str:
    """What happens to this VM after its shutdown, in the verdict's words (the part after the common start)."""
    reason = str(vm.get("reason") or "")
    return reason[len(SHUTDOWN_PREFIX):] if reason.startswith(SHUTDOWN_PREFIX) else reason


def refusal_item(problem: Mapping[str, Any], key: str, vm: Mapping[str, Any], preflight: Mapping[str, Any], variables: Variables) -> str:
    """One refused VM: the preflight's reason for it (drain_plan.problems' words) and the fix, naming the variable to set."""
    code = problem.get("code")
    if code == "vms_lost":
        return "{0}: would be shut down and never started again ({1}). Fix: stop it yourself, or {2}.".format(
            key, shutdown_detail(vm), setting(variables, "allow_loss", "true"))
    if code == "vms_shut_down":
        return "{0}: would be shut down and started again elsewhere (evictionStrategy None: a restart, not a live migration). " \
               "Fix: set evictionStrategy LiveMigrate on it, or {1}.".format(key, setting(variables, "allow_shutdown", "true"))
    if code == "vms_blocked":
        refusal = WEBHOOK_PREFIX.sub("", str(vm.get("blocked_message") or vm.get("reason") or "the eviction is refused"))
        if vm.get("live_migratable") is False:
            cause = "storage the other nodes can use (RWX) for live migration"
        elif vm.get("pdbs"):
            cause = "a PDB that allows a disruption (an integer minAvailable)"
        else:
            cause = "the cause"
        return "{0}: {1}. Fix: {2}, or {3} to leave it on the cordoned node.".format(
            key, sentence(refusal, REASON_WIDTH), cause, setting(variables, "allow_blocked", "true"))
    if code == "capacity":
        nodes = ", ".join((preflight.get("capacity") or {}).get("nodes") or []) or "none"
        return "{0}: the other schedulable nodes ({1}) cannot hold it by requests. Fix: add or uncordon a node, or {2}.".format(
            key, nodes, setting(variables, "require_capacity", "false"))
    return "{0}: {1}".format(key, problem.get("message"))


def refusal_items(preflight: Mapping[str, Any], variables: Variables) -> List[str]:
    """Per refused VM (and Pod) one item, in the order of the preflight's problems."""
    vms = {vm_key(vm): vm for vm in preflight.get("vms") or []}
    items: List[str] = []
    for problem in preflight.get("problems") or []:
        if problem.get("code") == "pods_refused":
            # kubectl drain's reasons name the module's own options (force, ignore_daemonsets, delete_emptydir_data)
            refused = (preflight.get("pods") or {}).get("refused") or []
            items += ["{0}: {1}".format(entry.get("pod"), entry.get("reason")) for entry in refused] or [str(problem.get("message"))]
            continue
        keys = problem.get("vms") or []
        items += [refusal_item(problem, key, vms.get(key, {}), preflight, variables) for key in keys] or [str(problem.get("message"))]
    return items


def unfinished_items(result: Mapping[str, Any], variables: Variables) -> List[str]:
    """Each VM (and Pod) of a drain that did not end well, with its result and reason, and the fix by result."""
    items = []
    for entry in list(result.get("vms") or []) + [dict(pod, kind="Pod") for pod in result.get("pods") or []]:
        outcome = entry.get("result")
        if outcome in DRAIN_OK_RESULTS or (entry.get("kind") == "Pod" and outcome == "evicted"):
            continue
        fix = {"timeout": "raise {0}, or run again to continue".format(names_of(variables, "timeout")),
               "failed": "the cause, then run again (it waits for VMs KubeVirt still evacuates)"}.get(outcome)
        items.append("{0}{1}: {2}{3}{4}".format(vm_key(entry), " (Pod)" if entry.get("kind") == "Pod" else "", outcome,
                                                ": " + sentence(entry.get("reason"), REASON_WIDTH) if entry.get("reason") else "",
                                                ". Fix: {0}.".format(fix) if fix else ""))
    return items


def drain_failure_lines(result: Any, variables: Variables = None, full: Optional[str] = None, report: Optional[str] = None) -> List[str]:
    """A failed `kubevirt_node_drain` result (a refused preflight, a drain that did not finish, or an error) as summary lines."""
    result = mapping(result, "drain_failure_lines")
    node = result.get("node") or "the node"
    preflight = result.get("preflight") if isinstance(result.get("preflight"), Mapping) else {}
    if preflight.get("problems"):
        return failure_lines(refusal_items(preflight, variables), "Preflight refused to drain {0}, nothing was changed:".format(node),
                             full, report)
    items = unfinished_items(result, variables)
    if not items and not result.get("resume"):
        return module_failure_lines(result, "Drain of {0} failed:".format(node), variables, full, report)
    moved, left = result.get("moved") or [], result.get("left") or []
    state = "Moved: {0}; still on the node: {1}. Run again to continue, or uncordon {2} to give up.".format(
        "{0} VM(s)".format(len(moved)) if moved else "none", ", ".join(left) or "no VMI", node)
    return failure_lines(items, "Drain of {0} did not finish; {0} stays cordoned:".format(node), full, report, note=state)


def left_on_node_lines(result: Any, variables: Variables = None, full: Optional[str] = None, report: Optional[str] = None) -> List[str]:
    """`kubevirt_node_drain` state=safe_to_shutdown that found VMIs still on the node, one line per VMI."""
    result = mapping(result, "left_on_node_lines")
    node = result.get("node") or "the node"
    safe = result.get("safe_to_shutdown") if isinstance(result.get("safe_to_shutdown"), Mapping) else None
    if safe is None:
        return module_failure_lines(result, "Checking what is left on {0} failed:".format(node), variables, full, report)
    vmis = safe.get("vmis") or []
    items = ["{0}: still runs on {1}".format(vmi, node) for vmi in vmis]
    return failure_lines(items, "{0} is not safe to shut down: {1} VMI(s) still run on it:".format(node, len(vmis)), full, report,
                         fix="move or stop them, or {0} to accept VMs left on the cordoned node".format(setting(variables, "allow_blocked", "true")))


# ------------------------------------------------------------------------------------------ vm_migration_verify
def not_moved_last(vm: Mapping[str, Any]) -> bool:
    return vm.get("verdict") == "not_moved"


def verify_items(result: Mapping[str, Any], variables: Variables) -> List[str]:
    """Each VM that did not pass, with its verdict and reason (the failed checks, or the open ones at the timeout)."""
    failed = set(result.get("failed_vms") or [])
    items = []
    # the VMs that failed or timed out first, then those that did not move
    for vm in sorted(result.get("vms") or [], key=not_moved_last):
        if (vm_key(vm) not in failed) if failed else vm.get("verdict") == "pass":
            continue
        fix = " Fix: raise {0}.".format(names_of(variables, "timeout")) if vm.get("verdict") == "timeout" and "timeout" in (variables or {}) else ""
        items.append("{0}: {1}: {2}.{3}".format(vm_key(vm), vm.get("verdict"), sentence(vm.get("reason") or "no reason given", REASON_WIDTH), fix))
    return items


def verify_failure_lines(result: Any, title: str = "Verification failed", variables: Variables = None, full: Optional[str] = None,
                         report: Optional[str] = None) -> List[str]:
    """A `vm_migration_verify` result that did not pass: per failed VM its verdict and reason."""
    result = mapping(result, "verify_failure_lines")
    if "vms" not in result:
        return module_failure_lines(result, sentence(title) + ":", variables, full, report)
    counts = result.get("counts") or {}
    header = "{0}: {1} of {2} VM(s) did not pass the checks (moved {3}, at least {4}):".format(
        sentence(title), counts.get("failed", len(result.get("failed_vms") or [])), counts.get("vms", len(result.get("vms") or [])),
        counts.get("moved", 0), counts.get("min_moved", 0))
    fix = None
    failed = [vm for vm in result.get("vms") or [] if vm.get("verdict") in ("fail", "timeout")]
    if not failed and counts.get("moved", 0) < counts.get("min_moved", 0) and "min_moved" in (variables or {}):
        fix = "fewer VMs moved than required: lower {0} if fewer moves are expected".format(names_of(variables, "min_moved"))
    return failure_lines(verify_items(result, variables), header, full, report, fix=fix)


# ------------------------------------------------------------------------------------------ descheduler_preflight
def preflight_failure_lines(problems: Any, title: Optional[str] = None, full: Optional[str] = None, report: Optional[str] = None,
                            limit: int = 3) -> List[str]:
    """The problems of the descheduler_preflight filter, each on two lines (the object, problem and observed value; then
    its fix), at most `limit` of them, then where the full result is."""
    if isinstance(problems, (str, bytes, Mapping)) or not isinstance(problems, Sequence):
        raise AnsibleFilterError("preflight_failure_lines expects the problems list of descheduler_preflight")
    problems = [p for p in problems if isinstance(p, Mapping)]
    limit = max(1, int(limit))
    lines = [one_line(title or "Preflight: {0} prerequisite(s) of the Descheduler VM rebalance missing:".format(len(problems)))]
    for index, problem in enumerate(problems[:limit], 1):
        what, _sep, fix = str(problem.get("text") or problem.get("message") or "").partition(". Fix: ")
        lines.append(one_line("{0}. {1}".format(index, what)))
        if fix:
            lines.append("   " + one_line("Fix: " + fix))
    if len(problems) > limit:
        lines.append("... and {0} more".format(len(problems) - limit))
    return lines + where_line(full, report)


class FilterModule:
    """kubevirt_ops.rebalance failure summaries."""

    def filters(self) -> Dict[str, Any]:
        return {"failure_lines": failure_lines, "module_failure_lines": module_failure_lines, "drain_failure_lines": drain_failure_lines,
                "left_on_node_lines": left_on_node_lines, "verify_failure_lines": verify_failure_lines,
                "preflight_failure_lines": preflight_failure_lines}
