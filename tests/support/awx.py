"""The AWX configuration as code (awx/) checked against what it runs, without an AWX: each job template
(infra.aap_configuration's `controller_templates` shape) against its playbook's documented variables
(playbooks/specs/<playbook>.yml, ansible-core argument_spec format) and its roles' (roles/<role>/meta/argument_specs.yml),
and the execution environment definition through `ansible-builder create`, which writes the build context and
needs no container engine.

The survey rules follow AWX's own handling of survey answers (awx/main/models/mixins.py): every answer and every
survey default is an extra var, so it beats inventory and playbook values; a multiplechoice answer is a string; a
default that does not validate for its question is dropped silently. So a finding is:
- a survey variable that neither the playbook's spec nor an included role documents, or a role variable the
  playbook sets itself (the answer would replace what the playbook computes);
- a question type the variable's type does not accept, choices outside the documented ones (a bool as
  multiplechoice "true"/"false" is fine), a default AWX would drop, min/max that contradict each other or the
  default;
- a survey default that differs from the documented default, unless the question's description says why by
  naming the "playbook default"; or from the value the template's inventory gives a host;
- a variable the spec marks `required` (or one of a `required_one_of` group) that neither a required or
  defaulted question, the template's extra_vars nor the inventory (every host) gives;
- a job launched from the template as AWX would launch it (survey defaults, a sample answer to each required
  question without one, a blank optional text answer as the empty string AWX passes, the extra_vars, each
  inventory host's variables) that fails the playbook's own variable check (its check_variables task: the spec
  and the rule sets it names, such as "the nodes to drain"), run here with the collection's code;
- a playbook, project, inventory, execution environment or credential the template names that does not exist,
  and a playbook that passes `kubeconfig` to its modules run without the kubeconfig credential.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_checks import check_variables
from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.variable_rules import rules_named

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COLLECTION_PREFIX = "kubevirt_ops.rebalance."

INCLUDE_ROLE = {"include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role"}
INCLUDE_TASKS = {"include_tasks", "import_tasks", "ansible.builtin.include_tasks", "ansible.builtin.import_tasks"}
SET_FACT = {"set_fact", "ansible.builtin.set_fact"}
CHECK_VARIABLES = {"kubevirt_ops.rebalance.check_variables", "check_variables"}
# `{{ name }}`, optionally with filters that keep the value: the playbook hands its variable on unchanged
PASS_THROUGH = re.compile(r"^\{\{\s*([A-Za-z_]\w*)\s*(?:\|\s*(?:default\([^()]*\)|bool|int|float|string|trim)\s*)*\}\}$")
TEXT_TYPES = {"text", "textarea", "password"}
# a question's description that names the playbook default explains why the survey's default differs from it
DEFAULT_EXPLAINED = "playbook default"
AWX_FILES = ("awx/*.yml", "awx/job_templates/*.yml")


@dataclass(frozen=True)
class Finding:
    """One problem of one job template: the template, the variable or field, what is wrong and the fix."""
    template: str
    subject: str
    problem: str

    def __str__(self) -> str:
        return f"{self.template}: {self.subject}: {self.problem}"


@dataclass
class AwxConfig:
    """Every controller_* list of the awx/ files, by key (controller_templates, controller_credentials, ...)."""
    objects: dict[str, list[dict]] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)  # template name -> the file that defines it

    def names(self, key: str) -> set[str]:
        return {item.get("name") for item in self.objects.get(key, [])}

    def by_name(self, key: str, name: str) -> Optional[dict]:
        return next((item for item in self.objects.get(key, []) if item.get("name") == name), None)

    @property
    def templates(self) -> list[dict]:
        return self.objects.get("controller_templates", [])


@dataclass
class PlaybookVariables:
    """What a playbook documents and does with variables, read from its files without running it."""
    playbook: str
    spec_path: Path
    options: Optional[dict[str, dict]]  # None: no spec file
    required_one_of: list[list[str]]
    role_options: dict[str, tuple[str, dict]]  # role variable -> (role, its argument spec)
    passed_to: dict[str, set[str]]  # playbook variable -> role variables it is handed to unchanged
    assigned: set[str]  # variables the playbook sets itself (include_role vars, set_fact, role inputs)
    uses_kubeconfig: bool  # its module_defaults pass `kubeconfig` to the modules
    roles: set[str]
    rule_sets: Optional[list[str]] = None  # the rule sets of its check_variables task; None: it has none


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_awx(root: Path = ROOT) -> AwxConfig:
    """The controller objects of awx/*.yml and awx/job_templates/*.yml (configure.yml, a playbook, has none)."""
    config = AwxConfig()
    for pattern in AWX_FILES:
        for path in sorted(root.glob(pattern)):
            data = load_yaml(path)
            if not isinstance(data, dict):
                continue
            for key, items in data.items():
                if key.startswith("controller_") and isinstance(items, list):
                    config.objects.setdefault(key, []).extend(items)
                    if key == "controller_templates":
                        config.sources.update({item.get("name"): path for item in items})
    return config


def role_name(name: str) -> str:
    return name[len(COLLECTION_PREFIX):] if name.startswith(COLLECTION_PREFIX) else name


def walk(node: Any):
    """Every mapping in a YAML document, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def note_assignments(values: Any, variables: PlaybookVariables) -> None:
    """Variables set from a mapping (include_role vars, set_fact): set by the playbook; `{{ x }}` passes x on."""
    if not isinstance(values, dict):
        return
    for name, value in values.items():
        if not isinstance(name, str) or "{{" in name or name == "cacheable":
            continue
        variables.assigned.add(name)
        match = PASS_THROUGH.match(value.strip()) if isinstance(value, str) else None
        if match:
            variables.passed_to.setdefault(match.group(1), set()).add(name)


def included_file(reference: Any, including: Path, playbook_dir: Path) -> Optional[Path]:
    """The tasks file an include_tasks names, as ansible-core looks for it: beside the including file, then in the
    playbook's directory; None for a templated name."""
    name = reference.get("file") if isinstance(reference, dict) else reference
    if not isinstance(name, str) or "{{" in name:
        return None
    for base in (including.parent, playbook_dir, playbook_dir / "tasks"):
        if (base / name).is_file():
            return (base / name).resolve()
    return None


def read_playbook(root: Path, playbook: str) -> PlaybookVariables:
    """The playbook's spec, the roles it includes (in it and the tasks files it includes) and their specs, and which
    variables it sets or hands on to the roles."""
    path = root / playbook
    spec_path = root / "playbooks" / "specs" / path.name
    spec = load_yaml(spec_path) if spec_path.is_file() else None
    variables = PlaybookVariables(
        playbook=playbook, spec_path=spec_path,
        options=None if spec is None else (spec or {}).get("options") or {},
        required_one_of=list((spec or {}).get("required_one_of") or []),
        role_options={}, passed_to={}, assigned=set(), uses_kubeconfig=False, roles=set())
    entry_points: dict[str, set[str]] = {}
    pending, seen = [path.resolve()], set()
    while pending:
        current = pending.pop()
        if current in seen or not current.is_file():
            continue
        seen.add(current)
        for node in walk(load_yaml(current)):
            for key, value in node.items():
                if key in INCLUDE_ROLE and isinstance(value, dict) and value.get("name"):
                    entry_points.setdefault(role_name(value["name"]), set()).add(value.get("tasks_from", "main"))
                    note_assignments(node.get("vars"), variables)
                elif key == "roles" and isinstance(value, list):
                    for role in value:
                        name = (role.get("role") or role.get("name")) if isinstance(role, dict) else role
                        if isinstance(name, str):
                            entry_points.setdefault(role_name(name), set()).add("main")
                elif key in INCLUDE_TASKS:
                    found = included_file(value, current, path.parent)
                    if found:
                        pending.append(found)
                elif key in SET_FACT:
                    note_assignments(value, variables)
                elif key == "playbook_role_inputs" and isinstance(value, dict):
                    for source, targets in value.items():
                        variables.passed_to.setdefault(source, set()).update(targets)
                        variables.assigned.update(targets)
                elif key in CHECK_VARIABLES and isinstance(value, dict):
                    rules = value.get("rules") or []
                    variables.rule_sets = (variables.rule_sets or []) + ([rules] if isinstance(rules, str) else list(rules))
                elif key == "module_defaults" and isinstance(value, dict):
                    variables.uses_kubeconfig |= any(isinstance(group, dict) and "kubeconfig" in group for group in value.values())
    variables.roles = set(entry_points)
    for role, entries in entry_points.items():
        spec_file = root / "roles" / role / "meta" / "argument_specs.yml"
        if not spec_file.is_file():
            continue
        specs = (load_yaml(spec_file) or {}).get("argument_specs") or {}
        for entry in sorted(entries):
            for name, option in ((specs.get(entry) or {}).get("options") or {}).items():
                variables.role_options[name] = (role, option)
    return variables


def survey_choices(question: dict) -> list[str]:
    """A question's choices: a list, or AWX's newline-separated text."""
    choices = question.get("choices") or []
    if isinstance(choices, str):
        return [choice for choice in choices.splitlines() if choice.strip()]
    return [str(choice) for choice in choices]


def as_documented(value: Any, option: dict) -> Any:
    """A survey value (a string for text and multiplechoice) as the variable's type reads it."""
    kind = option.get("type", "str")
    try:
        if kind == "bool":
            return str(value).lower() in ("true", "yes", "on", "1") if isinstance(value, str) else bool(value)
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except (TypeError, ValueError):
        return value
    if kind == "list" and isinstance(value, str):
        return [item.strip() for item in value.split(",")]
    if kind in ("str", "path") and value is not None:
        return str(value)
    return value


def type_problems(question: dict, option: dict, where: str) -> list[str]:
    """Whether the answers the question can give are values the documented variable accepts."""
    qtype, kind = question.get("type"), option.get("type", "str")
    documented = [str(choice) for choice in option.get("choices") or []]
    choices = survey_choices(question)
    if kind == "raw":
        return []
    if qtype in TEXT_TYPES:
        if kind == "list" and qtype == "text":
            return []  # ansible-core's list type splits a string at commas
        if kind not in ("str", "path"):
            return [f"a {qtype} answer is a string, {where} is {kind}" + (
                "; ansible-core splits a string at commas, not lines: use text with commas, or a variable the playbook splits"
                if kind == "list" else f": use the question type for {kind}")]
        if documented:
            return [f"{where} is one of {documented}: use multiplechoice with those choices"]
        return []
    if qtype == "integer":
        return [] if kind in ("int", "float") else [f"an integer answer, {where} is {kind}"]
    if qtype == "float":
        return [] if kind == "float" else [f"a float answer, {where} is {kind}"]
    if qtype == "multiplechoice":
        if kind == "bool":
            return [] if sorted(choices) == ["false", "true"] else [f"{where} is a bool: the choices must be \"true\" and \"false\", not {choices}"]
        if kind == "int" and not all(re.fullmatch(r"-?\d+", choice) for choice in choices):
            return [f"{where} is an int: choices {choices} are not all integers"]
        if kind not in ("str", "path", "int"):
            return [f"a multiplechoice answer is one string, {where} is {kind}"]
    elif qtype == "multiselect":
        if kind != "list":
            return [f"a multiselect answer is a list, {where} is {kind}"]
    else:
        return [f"question type {qtype!r} is not an AWX survey type (text, textarea, password, integer, float, multiplechoice, multiselect)"]
    outside = [choice for choice in choices if documented and choice not in documented]
    return [f"choices {outside} are not among {where}'s choices {documented}"] if outside else []


def default_problems(question: dict) -> list[str]:
    """A default AWX keeps (it drops one that does not validate for its question) and min/max that agree with it."""
    qtype, default, problems = question.get("type"), question.get("default"), []
    low, high = question.get("min"), question.get("max")
    if low not in ("", None) and high not in ("", None) and float(low) > float(high):
        problems.append(f"min {low} is above max {high}")
    if default in ("", None):
        return problems
    choices = survey_choices(question)
    if qtype in TEXT_TYPES:
        if not isinstance(default, str):
            return problems + [f"default {default!r} is not a string: AWX drops it"]
        size = len(default)
    elif qtype in ("integer", "float"):
        if isinstance(default, bool) or not isinstance(default, (int, float)) or (qtype == "integer" and not isinstance(default, int)):
            return problems + [f"default {default!r} is not {'an integer' if qtype == 'integer' else 'a number'}: AWX drops it"]
        size = default
    elif qtype == "multiplechoice":
        return problems + ([] if str(default) in choices else [f"default {default!r} is not one of the choices {choices}: AWX drops it"])
    elif qtype == "multiselect":
        values = default.splitlines() if isinstance(default, str) else list(default)
        outside = [value for value in values if str(value) not in choices]
        return problems + ([f"default values {outside} are not among the choices {choices}"] if outside else [])
    else:
        return problems
    if low not in ("", None) and size < float(low):
        problems.append(f"default {default!r} is below min {low}")
    if high not in ("", None) and size > float(high):
        problems.append(f"default {default!r} is above max {high}")
    return problems


@dataclass
class Documented:
    """Where a variable of the template is documented: the option, its source, and the role variables it feeds."""
    option: Optional[dict]
    where: str
    problem: str = ""
    feeds: list[tuple[str, dict]] = field(default_factory=list)


def documentation(name: str, variables: PlaybookVariables) -> Documented:
    options = variables.options or {}
    spec = variables.spec_path.name
    if name in options:
        feeds = [(f"role {variables.role_options[target][0]}'s {target}", variables.role_options[target][1])
                 for target in sorted(variables.passed_to.get(name, ())) if target in variables.role_options]
        return Documented(options[name], f"playbooks/specs/{spec}'s {name}", feeds=feeds)
    if name in variables.role_options:
        role, option = variables.role_options[name]
        if name in variables.assigned:
            sources = sorted(source for source, targets in variables.passed_to.items() if name in targets)
            return Documented(None, "", f"role {role}'s variable, which {variables.playbook} sets itself"
                              + (f" from {', '.join(sources)}" if sources else "")
                              + ": an answer (an extra var) would override it; survey the playbook's variable instead")
        return Documented(option, f"role {role}'s {name}")
    roles = ", ".join(sorted(variables.roles)) or "none"
    return Documented(None, "", f"not a variable that {variables.playbook} (playbooks/specs/{spec}) or its roles ({roles}) document")


def inventory_host_vars(root: Path, awx: AwxConfig, inventory: str) -> dict[str, dict]:
    """Each host's variables in the inventory a template names, when the project sources it from a YAML file of this
    repository (hosts.yml with group_vars/ and host_vars/ beside it); {} when that cannot be read here."""
    source = next((item for item in awx.objects.get("controller_inventory_sources", [])
                   if item.get("inventory") == inventory and item.get("source") == "scm" and item.get("source_path")), None)
    path = root / source["source_path"] if source else None
    if not path or not path.is_file():
        return {}
    host_groups: dict[str, list[str]] = {}
    group_vars: dict[str, dict] = {}
    host_inline: dict[str, dict] = {}

    def visit(group: str, body: Any, ancestors: list[str]) -> None:
        body = body or {}
        group_vars[group] = dict(body.get("vars") or {})
        for host, inline in (body.get("hosts") or {}).items():
            host_groups.setdefault(host, []).extend(ancestors + [group])
            host_inline.setdefault(host, {}).update(inline or {})
        for child, child_body in (body.get("children") or {}).items():
            visit(child, child_body, ancestors + [group])

    for group, body in (load_yaml(path) or {}).items():
        visit(group, body, [] if group == "all" else ["all"])
    group_vars.setdefault("all", {})
    for group in group_vars:
        group_file = path.parent / "group_vars" / f"{group}.yml"
        if group_file.is_file():
            group_vars[group].update(load_yaml(group_file) or {})
    hosts = {}
    for host, groups in host_groups.items():
        merged: dict = {}
        for group in dict.fromkeys(groups):  # outer groups first, as ansible-core orders them by depth
            merged.update(group_vars.get(group, {}))
        merged.update(host_inline.get(host, {}))
        host_file = path.parent / "host_vars" / f"{host}.yml"
        if host_file.is_file():
            merged.update(load_yaml(host_file) or {})
        hosts[host] = merged
    return hosts


def template_extra_vars(template: dict) -> dict:
    extra = template.get("extra_vars") or {}
    return (yaml.safe_load(extra) or {}) if isinstance(extra, str) else dict(extra)


def reference_findings(template: dict, awx: AwxConfig, variables: Optional[PlaybookVariables]) -> list[str]:
    problems = []
    for key, collection in (("project", "controller_projects"), ("inventory", "controller_inventories"),
                            ("execution_environment", "controller_execution_environments")):
        if template.get(key) and template[key] not in awx.names(collection):
            problems.append(f"{key} {template[key]!r} is not defined in awx/ ({collection})")
    credentials = template.get("credentials") or []
    for credential in credentials:
        if credential not in awx.names("controller_credentials"):
            problems.append(f"credential {credential!r} is not defined in awx/ (controller_credentials)")
    if variables and variables.uses_kubeconfig:
        injecting = {credential.get("name") for credential in awx.objects.get("controller_credentials", [])
                     if "kubeconfig" in ((awx.by_name("controller_credential_types", credential.get("credential_type")) or {})
                                         .get("injectors", {}).get("extra_vars") or {})}
        if not injecting & set(credentials):
            problems.append(f"{template.get('playbook')} passes `kubeconfig` to its modules, but no credential of the template "
                            f"injects it: add one of {sorted(injecting) or ['a kubeconfig credential']} to credentials")
    return problems


def check_template(template: dict, awx: AwxConfig, root: Path = ROOT) -> list[Finding]:
    """Every finding for one job template (see the module's docstring for the rules)."""
    name = template.get("name", "?")
    findings: list[Finding] = []

    def add(subject: str, problems: list[str]) -> None:
        findings.extend(Finding(name, subject, problem) for problem in problems)

    playbook = template.get("playbook") or ""
    if not playbook or not (root / playbook).is_file():
        add("playbook", [f"{playbook or '(none)'} does not exist in the repository"])
        add("references", reference_findings(template, awx, None))
        return findings
    variables = read_playbook(root, playbook)
    add("references", reference_findings(template, awx, variables))
    if variables.options is None:
        add("playbook", [f"{variables.spec_path.relative_to(root)} is missing: the playbook's variables are not documented"])
        return findings
    hosts = inventory_host_vars(root, awx, template.get("inventory") or "")
    # AWX ignores the survey of a template whose survey is not enabled
    questions = ((template.get("survey_spec") or {}).get("spec") or []) if template.get("survey_enabled") else []
    extra_vars = template_extra_vars(template)
    for question in questions:
        variable = question.get("variable") or "(no variable)"
        documented = documentation(variable, variables)
        add(variable, default_problems(question))
        if documented.option is None:
            add(variable, [documented.problem])
            continue
        add(variable, type_problems(question, documented.option, documented.where))
        for where, option in documented.feeds:
            add(variable, type_problems(question, option, where))
        add(variable, documented_default_problems(question, documented))
        add(variable, inventory_override_problems(question, documented.option, hosts))
    for variable in extra_vars:
        documented = documentation(variable, variables)
        if documented.option is None:
            add(f"extra_vars.{variable}", [documented.problem])
    add("survey", missing_required(variables, questions, extra_vars, hosts))
    add("launch", launch_problems(variables, questions, extra_vars, hosts))
    return findings


def documented_default_problems(question: dict, documented: Documented) -> list[str]:
    default, option = question.get("default"), documented.option or {}
    if default in ("", None) or option.get("default") is None:
        return []
    if as_documented(default, option) == as_documented(option["default"], option):
        return []
    if DEFAULT_EXPLAINED in (question.get("question_description") or "").lower():
        return []
    return [f"default {default!r} differs from {documented.where} default {option['default']!r}: use the documented default, "
            f"or say why in question_description (naming the {DEFAULT_EXPLAINED})"]


def inventory_override_problems(question: dict, option: dict, hosts: dict[str, dict]) -> list[str]:
    default, variable = question.get("default"), question.get("variable")
    if default in ("", None):
        return []
    differing = sorted(host for host, host_vars in hosts.items()
                       if variable in host_vars and "{{" not in str(host_vars[variable])
                       and as_documented(host_vars[variable], option) != as_documented(default, option))
    if not differing:
        return []
    return [f"the survey's default {default!r} (an extra var) overrides the inventory's {variable} on {', '.join(differing)}: "
            "leave the variable to the inventory, or make the default the inventory's value"]


def missing_required(variables: PlaybookVariables, questions: list[dict], extra_vars: dict, hosts: dict[str, dict]) -> list[str]:
    """The variables a person must give that the template does not guarantee."""
    asked = {question.get("variable"): question for question in questions}
    guaranteed = {name for name, question in asked.items() if question.get("required") or question.get("default") not in ("", None)}
    guaranteed |= set(extra_vars)
    if hosts:
        guaranteed |= set.intersection(*(set(host_vars) for host_vars in hosts.values()))
    problems = []
    for name, option in sorted((variables.options or {}).items()):
        if option.get("required") and name not in guaranteed:
            problems.append(f"{variables.playbook} requires {name}: " + (
                "its question is optional and has no default: make it required" if name in asked
                else "add a required survey question for it or set it in extra_vars"))
    for group in variables.required_one_of:
        if not guaranteed & set(group):
            problems.append(f"{variables.playbook} requires one of {', '.join(group)}: add a required survey question for one "
                            "of them, set one in extra_vars, or in the inventory for every host")
    return problems


def sample_answer(question: dict) -> Any:
    """What a person might answer to a required question without a default: the lowest allowed number, the first
    choice, a name."""
    qtype, choices = question.get("type"), survey_choices(question)
    if qtype in ("integer", "float"):
        return question.get("min") if question.get("min") not in ("", None) else 1
    if qtype == "multiplechoice":
        return choices[0]
    if qtype == "multiselect":
        return choices[:1]
    return "sample-1"


def launched_values(questions: list[dict], extra_vars: dict) -> dict:
    """The extra vars of a job launched from the template as AWX builds them: the template's extra_vars, then the
    survey defaults, a sample answer to each required question without a default, and an empty string for a blank
    optional text question (AWX 24 passes one; other blank optional answers are left out)."""
    values = dict(extra_vars)
    for question in questions:
        variable, default = question.get("variable"), question.get("default")
        if default not in ("", None):
            values[variable] = default
        elif question.get("required"):
            values[variable] = sample_answer(question)
        elif question.get("type") in TEXT_TYPES:
            values[variable] = ""
    return values


def launch_problems(variables: PlaybookVariables, questions: list[dict], extra_vars: dict, hosts: dict[str, dict]) -> list[str]:
    """The playbook's own variable check (its spec and rule sets, the collection's code) on each host of a job
    launched from the template; inventory values that are templates are left out (they are read at run time)."""
    if variables.rule_sets is None:
        return []
    options, rules = variables.options or {}, rules_named(variables.rule_sets)
    launched = launched_values(questions, extra_vars)
    problems: dict[str, list[str]] = {}
    for host, host_vars in sorted((hosts or {"(no inventory)": {}}).items()):
        values = dict(host_vars, **launched)
        # a template is read at run time, from what this check cannot know: its variable and rules go unchecked
        unknown = {name for name, value in values.items() if "{{" in str(value)}
        known_options = {name: option for name, option in options.items() if name not in unknown}
        known_rules = [rule for rule in rules if not unknown & set(rule.variables)]
        values = {name: value for name, value in values.items() if name in known_options}
        for problem in check_variables(known_options, values, known_rules):
            problems.setdefault(problem.line, []).append(host)
    return [f"a job launched from the template fails {variables.playbook}'s variable check on {', '.join(hosts_)}: {line}"
            for line, hosts_ in problems.items()]


def check_all(root: Path = ROOT) -> dict[str, list[Finding]]:
    """Findings per job template under awx/."""
    awx = load_awx(root)
    return {template.get("name"): check_template(template, awx, root) for template in awx.templates}


# ---- the execution environment's build context -----------------------------------------------------------

# Runs `ansible-builder create` in this interpreter with an audit hook that refuses and records every network
# connection, name lookup and child process: `create` only writes files.
CREATE_OFFLINE = r'''
import json, os, sys
ATTEMPTS = os.environ["AWX_CREATE_ATTEMPTS_FILE"]
REFUSED = ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "subprocess.Popen",
           "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork")

def refuse(event, args):
    if event in REFUSED:
        with open(ATTEMPTS, "a", encoding="utf-8") as handle:
            handle.write(json.dumps([event, repr(args)[:300]]) + "\n")
        raise PermissionError("refused during ansible-builder create: " + event)

sys.addaudithook(refuse)
from ansible_builder.cli import run
sys.argv = ["ansible-builder"] + sys.argv[1:]
run()
'''


@dataclass
class BuildContext:
    """The output of `ansible-builder create`: the context folder, its Containerfile's text, the attempts it made
    to reach the network or start a process, and the collection tarball it was given."""
    path: Path
    containerfile: str
    attempts: list
    tarball: Path
    output: str


def ansible_env(home: Path, collections: Path = ROOT / ".collections") -> dict:
    """The venv's Ansible with its own home; no PYTHONPATH, through which ansible-galaxy would see the development
    collections (a link to this checkout) as installed wherever it is asked to install."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return dict(env, ANSIBLE_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(collections), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def build_collection(dest: Path, env: dict) -> Path:
    """`ansible-galaxy collection build` of this checkout into dest; the tarball."""
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(dest), str(ROOT)],
                   check=True, capture_output=True, text=True, env=env)
    version = load_yaml(ROOT / "galaxy.yml")["version"]
    return dest / f"kubevirt_ops-rebalance-{version}.tar.gz"


def create_build_context(work: Path) -> BuildContext:
    """The repository's layout in work (awx/execution-environment.yml reads ../requirements.txt and ../bindep.txt and
    takes the tarball from beside it), then `ansible-builder create --context work/context` there, offline."""
    env = ansible_env(work / "ansible-home")
    (work / "awx").mkdir(parents=True)
    shutil.copy(ROOT / "awx" / "execution-environment.yml", work / "awx")
    for name in ("requirements.txt", "bindep.txt"):
        shutil.copy(ROOT / name, work)
    tarball = build_collection(work / "awx", env)
    attempts = work / "attempts.jsonl"
    attempts.touch()
    context = work / "context"
    result = subprocess.run([sys.executable, "-c", CREATE_OFFLINE, "create", "-f", "execution-environment.yml", "--context", str(context),
                             "--output-filename", "Containerfile", "-v", "2"],
                            cwd=work / "awx", capture_output=True, text=True, check=False,
                            env=dict(env, AWX_CREATE_ATTEMPTS_FILE=str(attempts)))
    assert result.returncode == 0, f"ansible-builder create failed:\n{result.stdout}\n{result.stderr}"
    return BuildContext(path=context, containerfile=(context / "Containerfile").read_text(encoding="utf-8"),
                        attempts=[json.loads(line) for line in attempts.read_text(encoding="utf-8").splitlines()],
                        tarball=tarball, output=result.stdout + result.stderr)


def collection_manifest(tarball: Path) -> dict:
    with tarfile.open(tarball) as archive:
        return json.load(archive.extractfile("MANIFEST.json"))["collection_info"]


def introspect(context: Path, work: Path) -> dict:
    """What the image's builder stage computes (the context's own introspect.py, as the Containerfile runs it): the
    Python and system requirements of the collections installed from the context's galaxy requirements, here this
    collection's tarball (installed offline) and the development kubernetes.core, with the EE's own files."""
    collections = work / "collections"
    # only the folder installed into: the development path already has this collection (a link to the checkout)
    env = ansible_env(work / "ansible-home", collections)
    tarball = next((context / "_build" / "collection").glob("kubevirt_ops-rebalance-*.tar.gz"))
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "-p", str(collections), str(tarball)],
                   check=True, capture_output=True, text=True, env=env)
    shutil.copytree(ROOT / ".collections" / "ansible_collections" / "kubernetes", collections / "ansible_collections" / "kubernetes")
    result = subprocess.run([sys.executable, str(context / "_build" / "scripts" / "introspect.py"), "introspect",
                             f"--user-pip={context / '_build' / 'requirements.txt'}", f"--user-bindep={context / '_build' / 'bindep.txt'}",
                             str(collections)], check=True, capture_output=True, text=True, env=env)
    return yaml.safe_load(result.stdout)


def requirement_names(lines: list[str]) -> set[str]:
    """Distribution names of pip requirement lines (comments and versions dropped), lower case."""
    names = set()
    for line in lines:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#", 1)[0])
        if match:
            names.add(match.group(1).lower())
    return names
