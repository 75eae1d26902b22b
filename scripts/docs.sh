#!/usr/bin/env bash
# Generate the collection's plugin and role reference with antsibull-docs, from the modules' and filters'
# DOCUMENTATION / EXAMPLES / RETURN and the roles' meta/argument_specs.yml:
#   scripts/docs.sh        regenerate docs/collection/ (what `make docs` runs)
#   scripts/docs.sh DIR    write the pages into DIR instead (a new or empty directory); the docs tier of
#                          scripts/run-tests.sh generates into a temporary DIR and compares it with docs/collection/
# The pages are antsibull-docs' `simplified-rst`: plain reStructuredText with the option and return value tables
# as HTML, which GitHub renders (the other format, `ansible-docsite`, needs Sphinx and the Ansible docsite's
# extensions). antsibull-docs 2.28 has no Markdown output. The directory's index is README.rst, so GitHub shows it
# when the folder is opened.
# Offline: it documents the kubevirt_ops.rebalance that ANSIBLE_COLLECTIONS_PATH resolves, which must be this
# checkout (.collections/ansible_collections/kubevirt_ops/rebalance, set up by `make`); kubernetes.core next to it
# provides the shared connection options and is not documented. Expects the environment `make` exports.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COLLECTION="kubevirt_ops.rebalance"
DEFAULT_DEST="${ROOT}/docs/collection"
DEST="${1:-${DEFAULT_DEST}}"
# what the header of every page says made it
COMMAND="make docs"

die() { printf 'docs: error: %s\n' "$*" >&2; exit 1; }

command -v antsibull-docs >/dev/null || die "antsibull-docs not found; run \`make docs\` (it installs requirements-dev.txt into .venv)"

resolved="$(python - <<'EOF'
import os

for entry in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep):
    path = os.path.join(os.path.expanduser(entry), "ansible_collections", "kubevirt_ops", "rebalance")
    if os.path.isdir(path):
        print(os.path.realpath(path))
        break
EOF
)"
[[ "${resolved}" == "${ROOT}" ]] || die "ANSIBLE_COLLECTIONS_PATH must resolve ${COLLECTION} to ${ROOT} (found: ${resolved:-nothing}); run \`make docs\`"

if [[ "${DEST}" != "${DEFAULT_DEST}" && -e "${DEST}" && -n "$(ls -A "${DEST}")" ]]; then
    die "${DEST} is not empty"
fi

version="$(antsibull-docs --version)"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
mkdir "${work}/out"

antsibull-docs --config-file "${ROOT}/scripts/antsibull-docs.cfg" collection \
    --use-current --squash-hierarchy --output-format simplified-rst --fail-on-error --no-add-antsibull-docs-version \
    --dest-dir "${work}/out" "${COLLECTION}"

# Post-processing: the generated-file header, the index as README.rst, and links that work on GitHub.
python - "${work}/out" "${ROOT}" "${COMMAND}" "antsibull-docs ${version}" <<'EOF'
import os
import re
import sys

out, root, command, generator = sys.argv[1:]
ours = "kubevirt_ops.rebalance"
docsite = "https://docs.ansible.com/ansible/latest/collections"

os.rename(os.path.join(out, "index.rst"), os.path.join(out, "README.rst"))


def source_of(page):
    if page == "README.rst":
        return "galaxy.yml and every plugin and role below"
    name, _, kind = page[: -len(".rst")].rpartition("_")
    if kind == "role":
        return f"roles/{name}/meta/argument_specs.yml"
    if kind == "module":
        return f"plugins/modules/{name}.py (DOCUMENTATION, EXAMPLES, RETURN)"
    for ext in (".yml", ".yaml", ".py"):
        candidate = f"plugins/{kind}/{name}{ext}"
        if os.path.exists(os.path.join(root, candidate)):
            return candidate
    sys.exit(f"docs: error: no source found for {page}")


# Links to plugins are relative to the Ansible docsite's tree: in the HTML tables ../../<ns>/<name>/<plugin>.html,
# in the text <plugin>.rst whatever collection the plugin is in. This collection's pages are next to each other
# here; other collections' are on docs.ansible.com.
HTML_LINK = re.compile(r"href='\.\./\.\./([a-z0-9_]+)/([a-z0-9_]+)/([a-z0-9_]+)\.html")
RST_LINK = re.compile(r"`(?P<text>[^`<]*?)\s*<(?P<target>[a-z0-9_]+\.rst)>`(?P<anon>_{1,2})")
CODE_ROLE = re.compile(r":code:`([^`]*)`")
FQCN = re.compile(r"([a-z0-9_]+)\.([a-z0-9_]+)\.([a-z0-9_]+)")


def html_link(match):
    namespace, name, page = match.groups()
    if f"{namespace}.{name}" == ours:
        return f"href='{page}.rst"
    return f"href='{docsite}/{namespace}/{name}/{page}.html"


def rst_link(match):
    fqcn = FQCN.search(match["text"].replace("\\", ""))
    if fqcn is None or f"{fqcn[1]}.{fqcn[2]}" == ours:
        return match[0]
    url = f"{docsite}/{fqcn[1]}/{fqcn[2]}/{match['target'][: -len('.rst')]}.html"
    return f"`{match['text']} <{url}>`{match['anon']}"


def tidy(lines):
    """At most two blank lines in a row before unindented text (never inside a code block), none at the end."""
    result = []
    blank = 0
    for line in lines:
        line = line.rstrip()
        if not line:
            blank += 1
            continue
        keep = blank if line[0].isspace() else min(blank, 2)
        result.extend([""] * keep)
        blank = 0
        result.append(line)
    return result


pages = sorted(page for page in os.listdir(out) if page.endswith(".rst"))
broken = []
for page in pages:
    path = os.path.join(out, page)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    lines = text.split("\n")
    if lines[0].startswith(".. Created with antsibull-docs"):
        lines = lines[1:]
    if page == "README.rst":
        # the index's title is the collection name title-cased (Kubevirt_Ops.Rebalance)
        lines = [ours if line == ours.title() else line for line in lines]
    text = "\n".join(tidy(lines)).strip("\n")
    # the templates escape the install command inside :code:, whose text docutils shows as it is (backslashes too)
    text = CODE_ROLE.sub(lambda match: ":code:`" + re.sub(r"\\(.)", r"\1", match[1]) + "`", text)
    text = HTML_LINK.sub(html_link, text)
    text = RST_LINK.sub(rst_link, text)
    for target in re.findall(r"<([^<>`\s]+\.rst)>`|href='([^'#:]+\.rst)", text):
        target = target[0] or target[1]
        if target not in pages and not (target == "index.rst" and "README.rst" in pages):
            broken.append(f"{page}: {target}")
    header = (
        "..\n"
        f"  Generated by `{command}` with {generator} (output format simplified-rst) from\n"
        f"  {source_of(page)}.\n"
        f"  Do not edit: change the source and run `{command}`; the docs tier of scripts/run-tests.sh fails\n"
        "  when this file is not what the generator writes.\n"
    )
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{header}\n{text}\n")
if broken:
    sys.exit("docs: error: links to pages that were not generated:\n  " + "\n  ".join(broken))
EOF

if [[ "${DEST}" == "${DEFAULT_DEST}" ]]; then
    # the folder holds only generated pages: a page whose plugin or role is gone goes too
    mkdir -p "${DEST}"
    find "${DEST}" -mindepth 1 -delete
else
    mkdir -p "${DEST}"
fi
cp -R "${work}/out/." "${DEST}/"
printf 'docs: %d pages in %s\n' "$(find "${DEST}" -name '*.rst' | wc -l)" "${DEST#"${ROOT}/"}"
