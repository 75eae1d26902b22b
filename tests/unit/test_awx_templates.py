"""The AWX job templates under awx/ against the playbooks they run: every survey variable is one the playbook (its
spec in playbooks/specs/) or its roles document, with a fitting type, choices and default, and every variable a
person must give is asked or set. The checker itself (support/awx.py) is proved on a small repository written
here, with one broken template per rule."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from support.awx import ROOT, check_all, check_template, load_awx

REAL_AWX = load_awx(ROOT)


@pytest.mark.parametrize("template", REAL_AWX.templates, ids=[template["name"] for template in REAL_AWX.templates])
def test_job_template_matches_its_playbook(template):
    findings = check_template(template, REAL_AWX, ROOT)
    assert not findings, "\n".join(str(finding) for finding in findings)


def test_every_job_template_file_is_read():
    files = sorted(path.name for path in (ROOT / "awx" / "job_templates").glob("*.yml"))
    read = sorted({path.name for path in REAL_AWX.sources.values()})
    assert files and read == files
    names = [template["name"] for template in REAL_AWX.templates]
    assert len(names) == len(set(names)), "job template names must be unique: AWX keys them by name"
    playbooks = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "playbooks").glob("*.yml"))
    assert sorted(template["playbook"] for template in REAL_AWX.templates) == playbooks, "one job template per playbook"


@pytest.mark.parametrize("template", REAL_AWX.templates, ids=[template["name"] for template in REAL_AWX.templates])
def test_a_wrong_variable_in_a_real_survey_is_reported(template):
    broken = copy.deepcopy(template)
    broken["survey_spec"]["spec"][0]["variable"] = "not_a_playbook_variable"
    findings = [str(finding) for finding in check_template(broken, REAL_AWX, ROOT)]
    assert any("not_a_playbook_variable: not a variable that" in finding for finding in findings), findings


def real_template(playbook: str) -> dict:
    return copy.deepcopy(next(template for template in REAL_AWX.templates if template["playbook"] == playbook))


def test_the_playbooks_own_check_reports_what_a_person_must_give():
    maintenance = real_template("playbooks/maintenance.yml")
    questions = maintenance["survey_spec"]["spec"]
    questions[:] = [question for question in questions if question["variable"] != "maintenance_nodes_text"]
    assert ("KubeVirt node maintenance: launch: a job launched from the template fails playbooks/maintenance.yml's variable check on "
            "lab-east, prod-east-1, prod-east-2, prod-west-1: maintenance_nodes: is empty or not given; nothing to drain. Give the nodes "
            "to drain, in order, e.g. -e '{\"maintenance_nodes\": [\"worker-1\"]}' (or maintenance_nodes_text, one name per line or "
            "comma separated)") in [str(finding) for finding in check_template(maintenance, REAL_AWX, ROOT)]
    # the workers come from the inventory: a template on an inventory without them fails the rebalance check
    rebalance = dict(real_template("playbooks/rebalance.yml"), inventory="an-inventory-not-from-the-project")
    found = [str(finding) for finding in check_template(rebalance, REAL_AWX, ROOT)]
    assert any("fails playbooks/rebalance.yml's variable check on (no inventory): rebalance_nodes: " in finding for finding in found), found


# ---- the checker on a small repository ----------------------------------------------------------------------

DEMO_PLAYBOOK = [{
    "name": "Demo",
    "hosts": "all",
    "gather_facts": False,
    "module_defaults": {"group/kubevirt_ops.rebalance.kubevirt_ops": {"kubeconfig": "{{ kubeconfig | default(omit) }}"}},
    "tasks": [
        {"name": "Check the variables", "kubevirt_ops.rebalance.check_variables": {"spec": "{{ playbook_dir }}/specs/demo.yml"}},
        {"name": "Hand the variables that are set to the role", "ansible.builtin.include_tasks": "tasks/demo_inputs.yml"},
        {"name": "Run the role", "ansible.builtin.include_role": {"name": "kubevirt_ops.rebalance.demo_role"},
         "vars": {"demo_role_mode": "{{ demo_mode | default('fast') }}", "demo_role_node": "{{ demo_nodes[0] }}"}},
    ],
}]
DEMO_INPUTS = [{"name": "Pass the variables", "ansible.builtin.include_tasks": "role_inputs.yml",
                "vars": {"playbook_role_inputs": {"demo_timeout": ["demo_role_timeout"]}}}]
DEMO_SPEC = {
    "short_description": "Demo",
    "options": {
        "demo_nodes": {"type": "list", "elements": "str", "required": True, "description": "Nodes."},
        "demo_mode": {"type": "str", "choices": ["fast", "safe", "auto"], "default": "fast", "description": "Mode."},
        "demo_timeout": {"type": "int", "default": 600, "description": "Seconds."},
        "demo_force": {"type": "bool", "default": False, "description": "Force."},
        "demo_ratio": {"type": "float", "default": 0.5, "description": "Ratio."},
        "demo_retries": {"type": "int", "description": "Retries."},
    },
}
DEMO_ROLE_SPEC = {"argument_specs": {"main": {"short_description": "Demo role", "options": {
    "demo_role_mode": {"type": "str", "choices": ["fast", "safe"], "default": "fast"},
    "demo_role_node": {"type": "str", "required": True},
    "demo_role_timeout": {"type": "int", "default": 600},
    "demo_role_verbose": {"type": "bool", "default": False},
}}}}
DEMO_AWX = {
    "controller_credential_types": [{"name": "Kubeconfig", "kind": "cloud",
                                     "injectors": {"extra_vars": {"kubeconfig": "{{ tower.filename.kubeconfig }}"}}}],
    "controller_credentials": [{"name": "clusters", "credential_type": "Kubeconfig"}],
    "controller_projects": [{"name": "demo-project"}],
    "controller_execution_environments": [{"name": "demo-ee"}],
    "controller_inventories": [{"name": "demo-clusters"}],
    "controller_inventory_sources": [{"name": "from the project", "inventory": "demo-clusters", "source": "scm",
                                      "source_project": "demo-project", "source_path": "inventories/demo/hosts.yml"}],
}
DEMO_INVENTORY = {"all": {"children": {"fleet": {"hosts": {"east": None, "west": None}}}}}
DEMO_TEMPLATE = {
    "name": "Demo",
    "playbook": "playbooks/demo.yml",
    "project": "demo-project",
    "inventory": "demo-clusters",
    "execution_environment": "demo-ee",
    "credentials": ["clusters"],
    "survey_enabled": True,
    "survey_spec": {"name": "Demo", "description": "Demo", "spec": [
        {"question_name": "Nodes", "variable": "demo_nodes", "type": "text", "required": True},
        {"question_name": "Mode", "variable": "demo_mode", "type": "multiplechoice", "choices": ["fast", "safe"],
         "default": "fast", "required": True},
        {"question_name": "Timeout", "variable": "demo_timeout", "type": "integer", "min": 60, "max": 3600,
         "default": 600, "required": True},
        {"question_name": "Force", "variable": "demo_force", "type": "multiplechoice", "choices": ["false", "true"],
         "default": "false", "required": True},
        {"question_name": "Ratio", "variable": "demo_ratio", "type": "float", "default": 0.5, "required": False},
        {"question_name": "Verbose", "variable": "demo_role_verbose", "type": "multiplechoice", "choices": ["true", "false"],
         "default": "false", "required": False},
    ]},
}


def write_yaml(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


@pytest.fixture
def repo(tmp_path):
    write_yaml(tmp_path / "playbooks" / "demo.yml", DEMO_PLAYBOOK)
    write_yaml(tmp_path / "playbooks" / "tasks" / "demo_inputs.yml", DEMO_INPUTS)
    write_yaml(tmp_path / "playbooks" / "specs" / "demo.yml", DEMO_SPEC)
    write_yaml(tmp_path / "roles" / "demo_role" / "meta" / "argument_specs.yml", DEMO_ROLE_SPEC)
    write_yaml(tmp_path / "awx" / "project.yml", DEMO_AWX)
    write_yaml(tmp_path / "awx" / "job_templates" / "demo.yml", {"controller_templates": [DEMO_TEMPLATE]})
    write_yaml(tmp_path / "inventories" / "demo" / "hosts.yml", DEMO_INVENTORY)
    return tmp_path


def findings(repo: Path, template: dict) -> list[str]:
    return [str(finding) for finding in check_template(template, load_awx(repo), repo)]


def changed(asking: str, **fields) -> dict:
    """The demo template with the question asking for a variable changed (a field set to None is removed), or
    removed when no fields are given."""
    template = copy.deepcopy(DEMO_TEMPLATE)
    questions = template["survey_spec"]["spec"]
    question = next(question for question in questions if question["variable"] == asking)
    if not fields:
        questions.remove(question)
    for key, value in fields.items():
        if value is None:
            question.pop(key, None)
        else:
            question[key] = value
    return template


def test_the_valid_template_has_no_findings(repo):
    assert check_all(repo) == {"Demo": []}


@pytest.mark.parametrize("template, expected", [
    pytest.param(changed("demo_mode", variable="demo_speed"),
                 "demo_speed: not a variable that playbooks/demo.yml (playbooks/specs/demo.yml) or its roles (demo_role) document",
                 id="unknown variable"),
    pytest.param(changed("demo_timeout", type="text", min=None, max=None, default=None),
                 "demo_timeout: a text answer is a string, playbooks/specs/demo.yml's demo_timeout is int", id="text for an int"),
    pytest.param(changed("demo_timeout", type="float"),
                 "demo_timeout: a float answer, playbooks/specs/demo.yml's demo_timeout is int", id="float for an int"),
    pytest.param(changed("demo_nodes", type="textarea"),
                 "demo_nodes: a textarea answer is a string, playbooks/specs/demo.yml's demo_nodes is list; ansible-core splits a string "
                 "at commas, not lines", id="textarea for a list"),
    pytest.param(changed("demo_mode", type="text", choices=None),
                 "demo_mode: playbooks/specs/demo.yml's demo_mode is one of ['fast', 'safe', 'auto']: use multiplechoice",
                 id="free text for a variable with choices"),
    pytest.param(changed("demo_mode", choices=["fast", "safe", "reckless"]),
                 "demo_mode: choices ['reckless'] are not among playbooks/specs/demo.yml's demo_mode's choices", id="choice not documented"),
    pytest.param(changed("demo_mode", choices=["fast", "auto"]),
                 "demo_mode: choices ['auto'] are not among role demo_role's demo_role_mode's choices ['fast', 'safe']",
                 id="choice the role refuses"),
    pytest.param(changed("demo_force", choices=["no", "yes"], default="no"),
                 "demo_force: playbooks/specs/demo.yml's demo_force is a bool: the choices must be \"true\" and \"false\"", id="bool as yes/no"),
    pytest.param(changed("demo_force", type="multiselect", default=None),
                 "demo_force: a multiselect answer is a list, playbooks/specs/demo.yml's demo_force is bool", id="multiselect for a bool"),
    pytest.param(changed("demo_mode", default="slow"),
                 "demo_mode: default 'slow' is not one of the choices ['fast', 'safe']: AWX drops it", id="default not a choice"),
    pytest.param(changed("demo_timeout", default="600"),
                 "demo_timeout: default '600' is not an integer: AWX drops it", id="integer default as a string"),
    pytest.param(changed("demo_timeout", default=900),
                 "demo_timeout: default 900 differs from playbooks/specs/demo.yml's demo_timeout default 600", id="default differs"),
    pytest.param(changed("demo_force", default="true"),
                 "demo_force: default 'true' differs from playbooks/specs/demo.yml's demo_force default False", id="bool default differs"),
    pytest.param(changed("demo_timeout", min=4000), "demo_timeout: min 4000 is above max 3600", id="min above max"),
    pytest.param(changed("demo_timeout", min=700), "demo_timeout: default 600 is below min 700", id="default below min"),
    pytest.param(changed("demo_nodes"),
                 "survey: playbooks/demo.yml requires demo_nodes: add a required survey question for it or set it in extra_vars",
                 id="required variable not asked"),
    pytest.param(changed("demo_nodes", required=False),
                 "survey: playbooks/demo.yml requires demo_nodes: its question is optional and has no default", id="required variable optional"),
    pytest.param(changed("demo_role_verbose", variable="demo_role_mode", choices=["fast", "safe"], default="fast"),
                 "demo_role_mode: role demo_role's variable, which playbooks/demo.yml sets itself from demo_mode: an answer (an extra var) "
                 "would override it", id="role variable the playbook sets"),
    pytest.param(changed("demo_role_verbose", variable="demo_role_timeout", type="integer", choices=None, default=None),
                 "demo_role_timeout: role demo_role's variable, which playbooks/demo.yml sets itself from demo_timeout",
                 id="role variable the playbook passes on"),
    pytest.param(dict(DEMO_TEMPLATE, playbook="playbooks/missing.yml"),
                 "playbook: playbooks/missing.yml does not exist in the repository", id="missing playbook"),
    pytest.param(dict(DEMO_TEMPLATE, credentials=[]),
                 "references: playbooks/demo.yml passes `kubeconfig` to its modules, but no credential of the template injects it",
                 id="no kubeconfig credential"),
    pytest.param(dict(DEMO_TEMPLATE, project="other-project"),
                 "references: project 'other-project' is not defined in awx/ (controller_projects)", id="undefined project"),
    pytest.param(dict(DEMO_TEMPLATE, extra_vars={"demo_nodes_csv": "a,b"}),
                 "extra_vars.demo_nodes_csv: not a variable that playbooks/demo.yml", id="undocumented extra var"),
    pytest.param(dict(DEMO_TEMPLATE, extra_vars={"demo_retries": "twice"}),
                 "launch: a job launched from the template fails playbooks/demo.yml's variable check on east, west: demo_retries: ",
                 id="extra var the playbook's check refuses"),
])
def test_a_broken_template_is_reported(repo, template, expected):
    found = findings(repo, template)
    assert any(expected in finding for finding in found), "\n".join(found)
    assert all(finding.startswith("Demo: ") for finding in found)


def test_a_differing_default_is_accepted_when_the_description_says_why(repo):
    template = changed("demo_timeout", default=900, question_description="900 for AWX jobs, which run unattended (playbook default 600)")
    assert findings(repo, template) == []


def test_a_required_variable_may_come_from_extra_vars_or_from_every_host_of_the_inventory(repo):
    template = changed("demo_nodes")
    assert findings(repo, dict(template, extra_vars={"demo_nodes": "{{ demo_nodes_text.split() }}"})) == []
    write_yaml(repo / "inventories" / "demo" / "host_vars" / "east.yml", {"demo_nodes": ["e-1"]})
    assert any("requires demo_nodes" in finding for finding in findings(repo, template)), "one host without it is not enough"
    write_yaml(repo / "inventories" / "demo" / "group_vars" / "fleet.yml", {"demo_nodes": ["n-1"]})
    assert findings(repo, template) == []


def test_a_survey_default_that_overrides_the_inventory_is_reported(repo):
    write_yaml(repo / "inventories" / "demo" / "host_vars" / "west.yml", {"demo_mode": "safe", "demo_timeout": 600})
    assert findings(repo, DEMO_TEMPLATE) == [
        "Demo: demo_mode: the survey's default 'fast' (an extra var) overrides the inventory's demo_mode on west: "
        "leave the variable to the inventory, or make the default the inventory's value"]


def test_a_missing_spec_is_reported(repo):
    (repo / "playbooks" / "specs" / "demo.yml").unlink()
    assert findings(repo, DEMO_TEMPLATE) == ["Demo: playbook: playbooks/specs/demo.yml is missing: the playbook's variables are not documented"]


def test_a_disabled_survey_asks_nothing(repo):
    assert any("requires demo_nodes" in finding for finding in findings(repo, dict(DEMO_TEMPLATE, survey_enabled=False)))
