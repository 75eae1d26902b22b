"""The execution environment of awx/execution-environment.yml as far as a machine without a container engine can
build it: `ansible-builder create` (offline: it only writes files) on a copy of the definition with a freshly built
collection tarball, and the build context it writes holds this collection, kubernetes.core, the Python and system
requirements, and the Containerfile steps that install them. The image itself is `ansible-builder build` (docs/awx.md)."""
from __future__ import annotations

import re

import pytest

from support.awx import ROOT, collection_manifest, create_build_context, introspect, load_yaml, requirement_names

DEFINITION = load_yaml(ROOT / "awx" / "execution-environment.yml")
GALAXY = load_yaml(ROOT / "galaxy.yml")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("ee")


@pytest.fixture(scope="module")
def context(work):
    return create_build_context(work)


def file_lines(path):
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_create_reaches_no_network_and_starts_no_process(context):
    assert context.attempts == []
    assert "Complete! The build context can be found at" in context.output


def test_the_context_holds_this_collections_tarball(context):
    tarballs = list((context.path / "_build" / "collection").glob("*.tar.gz"))
    assert [path.name for path in tarballs] == [context.tarball.name]
    assert tarballs[0].read_bytes() == context.tarball.read_bytes()
    manifest = collection_manifest(tarballs[0])
    assert (manifest["namespace"], manifest["name"], manifest["version"]) == ("kubevirt_ops", "rebalance", GALAXY["version"])


def test_the_galaxy_requirements_name_kubernetes_core_and_the_tarball_where_the_build_puts_it(context):
    collections = load_yaml(context.path / "_build" / "requirements.yml")["collections"]
    by_name = {entry["name"]: entry for entry in collections}
    assert by_name["kubernetes.core"]["version"] == GALAXY["dependencies"]["kubernetes.core"]
    local = [entry for entry in collections if entry.get("type") == "file"]
    assert len(local) == 1
    # the prepended step renames the copied tarball to the path the requirement names
    moved = re.search(r"^RUN mv /build/kubevirt_ops-rebalance-\*\.tar\.gz (\S+)$", context.containerfile, re.MULTILINE)
    assert moved and moved.group(1) == local[0]["name"]


def test_the_python_and_system_requirements_are_the_repositorys(context):
    assert file_lines(context.path / "_build" / "requirements.txt") == file_lines(ROOT / "requirements.txt")
    assert {"kubernetes", "pyyaml", "jmespath"} <= requirement_names(file_lines(context.path / "_build" / "requirements.txt"))
    assert file_lines(context.path / "_build" / "bindep.txt") == file_lines(ROOT / "bindep.txt")


def test_the_containerfile_installs_them_in_order(context):
    text = context.containerfile
    assert f'ARG EE_BASE_IMAGE="{DEFINITION["images"]["base_image"]["name"]}"' in text
    steps = [
        "COPY _build/collection/ /build/",
        "RUN mv /build/kubevirt_ops-rebalance-*.tar.gz",
        "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml",
        "COPY _build/requirements.txt requirements.txt",
        "COPY _build/bindep.txt bindep.txt",
        "introspect.py introspect --user-pip=requirements.txt --user-bindep=bindep.txt",
        "RUN /output/scripts/assemble",
        "RUN /output/scripts/install-from-bindep",
    ]
    positions = [text.find(step) for step in steps]
    assert -1 not in positions, [step for step, position in zip(steps, positions) if position < 0]
    assert positions == sorted(positions)


def test_the_image_would_install_the_collections_requirements_too(context, work):
    # the builder stage's introspection over the installed collections: the tarball's own requirements and
    # kubernetes.core's come on top of the definition's files
    found = introspect(context.path, work)
    python = requirement_names(found["python"])
    assert {"kubernetes", "pyyaml", "jmespath", "requests-oauthlib", "jsonpatch"} <= python
    assert any(line.endswith("# from collection kubevirt_ops.rebalance") and line.startswith("kubernetes") for line in found["python"])
    system = [line.split("#", 1)[0].strip() for line in found["system"]]
    assert set(file_lines(ROOT / "bindep.txt")) <= set(system)
