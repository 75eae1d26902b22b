#!/usr/bin/env bash
# Run every test tier that exists, keep going when one fails, print a per-tier table and one summary
# line `test-suite: N passed, N failed` (N counts tiers), and exit non-zero when any tier failed.
#
#   scripts/run-tests.sh                 all tiers (integration beside the tiers that only read files; see main)
#   scripts/run-tests.sh unit sanity     only the named tiers, one after the other
#
# Tiers: unit, integration, kubesim (pytest), sanity (ansible-test), lint (ansible-lint), docs (antsibull-docs),
# molecule; and cluster (`make test-cluster`, only when named: it runs against the cluster $KUBECONFIG names).
# A tier with nothing to run (no test files, no scenarios) is reported as "no tests" and counts
# neither as passed nor as failed. A pytest tier that has test files but collects none fails.
# Expects the environment `make` sets up (scripts/bootstrap.sh, PATH with .venv/bin,
# ANSIBLE_COLLECTIONS_PATH); `make test` is the way to call it.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}" || exit 2

ALL_TIERS=(unit integration kubesim sanity lint docs molecule)
SANITY_PYTHON="3.12"
SANITY_TREE="${ROOT}/.cache/sanity/ansible_collections/kubevirt_ops/rebalance"

declare -a RESULT_TIER=() RESULT_STATE=() RESULT_SECONDS=() RESULT_NOTE=()

banner() { printf '\n===== %s =====\n' "$*"; }

record() {  # tier state seconds note
    RESULT_TIER+=("$1"); RESULT_STATE+=("$2"); RESULT_SECONDS+=("$3"); RESULT_NOTE+=("$4")
}

has_test_files() {
    [[ -d "$1" ]] && [[ -n "$(find "$1" -name __pycache__ -prune -o -type f \( -name 'test_*.py' -o -name '*_test.py' \) -print -quit)" ]]
}

# ---- pytest tiers -----------------------------------------------------------------------------
pytest_tier() {  # tier directory [pytest options...]
    local tier="$1" dir="$2" start rc
    shift 2
    if [[ ! -d "${dir}" ]]; then
        record "${tier}" "no tests" 0 "${dir} does not exist yet"
        return
    fi
    if ! has_test_files "${dir}"; then
        record "${tier}" "no tests" 0 "${dir} has no test_*.py or *_test.py files"
        return
    fi
    banner "${tier}: pytest ${dir}"
    start=${SECONDS}
    python -m pytest "$@" "${dir}"
    rc=$?
    case ${rc} in
        0) record "${tier}" passed $((SECONDS - start)) "${dir}" ;;
        5) record "${tier}" failed $((SECONDS - start)) "${dir} has test files but pytest collected no tests" ;;
        *) record "${tier}" failed $((SECONDS - start)) "pytest exit code ${rc}" ;;
    esac
}

# ---- ansible-test sanity ----------------------------------------------------------------------
# ansible-test needs the collection at a real .../ansible_collections/<namespace>/<name> path (it
# resolves symlinks), so it runs on a copy of the files git knows about (tracked, plus untracked ones
# that are not ignored), next to kubernetes.core. The copy keeps tests/output between runs and is a git
# repository of its own (never committed to), so that ansible-test lists its files with git rather
# than with the checkout's repository, in which the whole copy is ignored.
sync_sanity_tree() {
    local path
    mkdir -p "${SANITY_TREE}/tests"
    find "${SANITY_TREE}" -mindepth 1 -maxdepth 1 ! -name tests ! -name .git -exec rm -rf {} +
    find "${SANITY_TREE}/tests" -mindepth 1 -maxdepth 1 ! -name output -exec rm -rf {} +
    git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
        [[ -e "${path}" || -L "${path}" ]] && printf '%s\0' "${path}"
    done | tar --null --no-recursion -T - -cf - | tar -xf - -C "${SANITY_TREE}"
    [[ -d "${SANITY_TREE}/.git" ]] || git -C "${SANITY_TREE}" init --quiet
    ln -sfn "${ROOT}/.collections/ansible_collections/kubernetes" "${SANITY_TREE}/../../kubernetes"
}

# ansible-test bootstraps pip in each sanity venv with a get-pip.py it downloads from
# ci-files.testing.ansible.com unless a copy is cached; provide an offline stand-in there.
install_get_pip_standin() {
    local version cache marker='kubevirt_ops.rebalance get-pip stand-in'
    version="$(python - <<'EOF'
import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="3.12"))["pip"])
EOF
)" || return 1
    cache="${HOME}/.ansible/test/cache/get_pip_${version//./_}.py"
    if [[ -f "${cache}" ]] && ! grep -q "${marker}" "${cache}"; then
        return 0  # a real get-pip.py is cached: use it
    fi
    mkdir -p "${cache%/*}"
    cmp -s "${ROOT}/scripts/get_pip_standin.py" "${cache}" || cp "${ROOT}/scripts/get_pip_standin.py" "${cache}"
}

sanity_tier() {
    local start rc
    banner "sanity: ansible-test sanity --venv --python ${SANITY_PYTHON}"
    start=${SECONDS}
    if ! { sync_sanity_tree && install_get_pip_standin; }; then
        record sanity failed $((SECONDS - start)) "could not prepare the sanity tree"
        return
    fi
    (cd "${SANITY_TREE}" && ansible-test sanity --venv --python "${SANITY_PYTHON}" --color no)
    rc=$?
    if ((rc == 0)); then
        record sanity passed $((SECONDS - start)) "ansible-test sanity"
    else
        record sanity failed $((SECONDS - start)) "exit code ${rc}; details in ${SANITY_TREE#"${ROOT}/"}/tests/output"
    fi
}

# ---- ansible-lint -----------------------------------------------------------------------------
lint_tier() {
    local start rc
    banner "lint: ansible-lint --profile production"
    start=${SECONDS}
    ansible-lint --profile production
    rc=$?
    if ((rc == 0)); then
        record lint passed $((SECONDS - start)) "ansible-lint --profile production"
    else
        record lint failed $((SECONDS - start)) "exit code ${rc}"
    fi
}

# ---- docs -------------------------------------------------------------------------------------
# antsibull-docs' linter on the sanity tree (it needs a real ansible_collections/<namespace>/<name> path too): the
# modules', filters' and roles' docs against the schema, their markup and references (to this collection and to
# the collections it depends on), and the generated pages through rstcheck. It copies the collection and
# kubernetes.core to a temporary tree, with `git ls-files` when a path is inside a work tree; .collections is
# ignored by the checkout's git, so GIT_CEILING_DIRECTORIES keeps git from taking kubernetes.core for part of the
# checkout (it would copy none of its files). Then the pages in docs/collection/ must be what scripts/docs.sh
# (`make docs`) writes now.
docs_tier() {
    local start rc generated
    banner "docs: antsibull-docs lint-collection-docs --plugin-docs; docs/collection/ is what \`make docs\` writes"
    start=${SECONDS}
    if ! sync_sanity_tree; then
        record docs failed $((SECONDS - start)) "could not prepare the sanity tree"
        return
    fi
    (cd "${SANITY_TREE}" && GIT_CEILING_DIRECTORIES="${ROOT}/.collections" antsibull-docs lint-collection-docs \
        --plugin-docs --validate-collection-refs dependent --output-format simplified-rst .)
    rc=$?
    if ((rc != 0)); then
        record docs failed $((SECONDS - start)) "antsibull-docs lint-collection-docs: exit code ${rc}"
        return
    fi
    generated="$(mktemp -d)"
    if ! scripts/docs.sh "${generated}/collection"; then
        rm -rf "${generated}"
        record docs failed $((SECONDS - start)) "scripts/docs.sh failed"
        return
    fi
    diff -ru docs/collection "${generated}/collection"
    rc=$?
    rm -rf "${generated}"
    if ((rc == 0)); then
        record docs passed $((SECONDS - start)) "lint clean; docs/collection/ up to date"
    else
        record docs failed $((SECONDS - start)) "docs/collection/ differs from the generator's output: run \`make docs\`"
    fi
}

# ---- molecule ---------------------------------------------------------------------------------
molecule_tier() {
    local start rc scenarios
    # extensions/molecule/default is molecule's placeholder (no steps; see its molecule.yml), not a scenario to count
    scenarios="$(find extensions/molecule -mindepth 2 -name molecule.yml ! -path 'extensions/molecule/default/*' 2>/dev/null | wc -l)"
    if ((scenarios == 0)); then
        record molecule "no tests" 0 "no scenarios under extensions/molecule"
        return
    fi
    # From the collection root molecule works in collection mode: scenarios from
    # extensions/molecule/**/molecule.yml, each merged over extensions/molecule/config.yml (prerun: false).
    banner "molecule: molecule test, ${MOLECULE_WORKERS:-2} scenarios at a time (${scenarios} scenarios)"
    start=${SECONDS}
    # Each scenario starts its own simulator in its own ephemeral directory, so scenarios run side by side: one
    # `molecule test -s NAME` process each, two at a time (molecule's experimental --workers skipped the shared create
    # step here). Each scenario's output goes to its log, printed whole when it failed.
    local logs
    logs="$(mktemp -d)"
    # shellcheck disable=SC2016  # the positional parameters are the inner bash's, expanded there
    find extensions/molecule -mindepth 2 -name molecule.yml ! -path 'extensions/molecule/default/*' -printf '%h\n' | xargs -n1 basename | sort \
        | xargs -P "${MOLECULE_WORKERS:-2}" -I{} bash -c '
            began=${SECONDS}
            if molecule test -s "$1" > "$2/$1.log" 2>&1; then echo "molecule $1: passed in $((SECONDS - began))s"
            else echo "molecule $1: FAILED in $((SECONDS - began))s"; tail -n 200 "$2/$1.log"; exit 1; fi' _ {} "${logs}"
    rc=$?
    rm -rf "${logs}"
    if ((rc == 0)); then
        record molecule passed $((SECONDS - start)) "${scenarios} scenarios"
    else
        record molecule failed $((SECONDS - start)) "a scenario failed (exit code ${rc}); its output is above"
    fi
}

# ---- cluster (make test-cluster) -------------------------------------------------------------
# The integration tests not marked `simulator` against the cluster $KUBECONFIG (and $CONTEXT) names, with $TEST_VARS
# (a JSON object) as extra variables: tests/support/cluster.py reads them as KUBEVIRT_OPS_TEST_*. One test at a time
# (no xdist): the cluster is shared and the tests leave it as they found it.
cluster_tier() {
    local start rc kubeconfig="${KUBECONFIG:-}"
    # relative to where the script was called from (OLDPWD: the `cd` above)
    [[ -z "${kubeconfig}" || "${kubeconfig}" == /* ]] || kubeconfig="${OLDPWD}/${kubeconfig}"
    if [[ -z "${kubeconfig}" ]]; then
        record cluster failed 0 "KUBECONFIG is not set: make test-cluster KUBECONFIG=/path/to/kubeconfig [CONTEXT=name] [TEST_VARS='{...}']"
        return
    fi
    if [[ ! -f "${kubeconfig}" || ! -r "${kubeconfig}" ]]; then
        record cluster failed 0 "KUBECONFIG=${kubeconfig} is not a readable file"
        return
    fi
    if ! command -v kubectl >/dev/null; then
        record cluster failed 0 "kubectl is not on PATH (the tests drive it)"
        return
    fi
    if ! python -c 'import json, sys; assert isinstance(json.loads(sys.argv[1] or "{}"), dict)' "${TEST_VARS:-}" 2>/dev/null; then
        record cluster failed 0 "TEST_VARS is not a JSON object: ${TEST_VARS:-}"
        return
    fi
    banner "cluster: pytest -m 'not simulator' tests/integration against ${kubeconfig}${CONTEXT:+ context ${CONTEXT}}"
    start=${SECONDS}
    KUBEVIRT_OPS_TEST_KUBECONFIG="${kubeconfig}" KUBEVIRT_OPS_TEST_CONTEXT="${CONTEXT:-}" KUBEVIRT_OPS_TEST_VARS="${TEST_VARS:-}" \
        python -m pytest -p no:xdist -m "not simulator" tests/integration
    rc=$?
    case ${rc} in
        0) record cluster passed $((SECONDS - start)) "against ${kubeconfig}${CONTEXT:+ context ${CONTEXT}}" ;;
        5) record cluster failed $((SECONDS - start)) "no test without the simulator marker was collected" ;;
        *) record cluster failed $((SECONDS - start)) "pytest exit code ${rc}" ;;
    esac
}

# The Debian packages the tier's tests need (chromium for the HTML report); a tier without them fails, saying why.
debian_packages_for() {  # tier
    scripts/bootstrap.sh debs && return 0
    record "$1" failed 0 "scripts/bootstrap.sh debs could not install tests/debian-packages.txt"
    return 1
}

run_tier() {
    case "$1" in
        unit) pytest_tier unit tests/unit ;;
        # Integration tests mostly wait on simulated clusters and Ansible start-up (a load of about 1.4 on two cores with two
        # workers), so three workers, one test file each (module-scoped simulators stay in one process): 982 s against 1211 s
        # with two on a clean clone. Files are handed out in collection order (--no-loadscope-reorder), which starts the
        # longest first (tests/integration/conftest.py LONGEST_FIRST). The slowest tests are listed after the run
        # (--durations). The tests not marked `simulator` run once, inside test_cluster_mode.py's proof of
        # `make test-cluster` against a simulator (every one of them must pass there), rather than a second time here.
        integration) debian_packages_for integration && pytest_tier integration tests/integration -m simulator \
                         -n "${INTEGRATION_WORKERS:-3}" --dist loadfile --no-loadscope-reorder --durations=15 ;;
        # The simulator's own tests start their servers on free ports: two workers, one per core.
        kubesim) pytest_tier kubesim tests/kubesim/tests -n "${KUBESIM_WORKERS:-2}" ;;
        sanity) sanity_tier ;;
        lint) lint_tier ;;
        docs) docs_tier ;;
        molecule) molecule_tier ;;
        cluster) debian_packages_for cluster && cluster_tier ;;
        *) printf 'run-tests: unknown tier %s (known: %s cluster)\n' "$1" "${ALL_TIERS[*]}" >&2; exit 2 ;;
    esac
}

# A whole run (no tier named) starts the integration tier first, in the background, and runs every other tier beside
# it, one after another: the integration tier keeps about 1.7 of the two cores busy (its tests wait on simulated time
# part of the time), and no tier depends on having the machine to itself (each test waits for the state it needs, with
# deadlines for a busy machine: `make test-steady`). The simulators of kubesim and molecule listen on free ports of
# their own. The integration tier's output is printed whole when it ends, its progress (one line a minute) while the
# others run.
BESIDE_INTEGRATION=(unit kubesim molecule lint docs sanity)

tests_done() {  # pytest log: "N of M tests done" from its progress characters (one per test) and its "[M items]"
    local total finished
    total="$(grep -Eo '\[[0-9]+ items\]' "$1" 2>/dev/null | grep -Eo '[0-9]+' | head -n1)"
    finished="$(grep -E '^[.FEsxX]+( +\[ *[0-9]+%\])?$' "$1" 2>/dev/null | grep -Eo '^[.FEsxX]+' | tr -d '\n' | wc -c)"
    printf '%s of %s tests done' "${finished}" "${total:-?}"
}

print_last_record() {
    printf '%s\t%s\t%s\t%s\n' "${RESULT_TIER[-1]}" "${RESULT_STATE[-1]}" "${RESULT_SECONDS[-1]}" "${RESULT_NOTE[-1]}"
}

run_integration_beside() {  # tiers...
    local scratch pid tier fields began
    scratch="$(mktemp -d)"
    # a subshell of its own: its record (the last one it adds) comes back through a file
    (run_tier integration; print_last_record > "${scratch}/record") > "${scratch}/integration.log" 2>&1 &
    pid=$!
    began=${SECONDS}
    printf '\n===== integration: started in the background (output when it ends: %s) =====\n' "${scratch}/integration.log"
    for tier in "$@"; do
        run_tier "${tier}"
    done
    local polls=0
    while kill -0 "${pid}" 2>/dev/null; do
        if ((polls++ % 12 == 0)); then
            printf 'integration: still running after %d min, %s\n' $(((SECONDS - began) / 60)) "$(tests_done "${scratch}/integration.log")"
        fi
        sleep 5
    done
    wait "${pid}"
    cat "${scratch}/integration.log"
    if [[ -s "${scratch}/record" ]]; then
        IFS=$'\t' read -r -a fields < "${scratch}/record"
        record "${fields[@]}"
    else
        record integration failed 0 "the tier ended without a result (see its output above)"
    fi
    rm -rf "${scratch}"
}

main() {
    local tier i passed=0 failed=0
    local -a tiers=("$@")
    if ((${#tiers[@]})); then
        for tier in "${tiers[@]}"; do
            run_tier "${tier}"
        done
    else
        run_integration_beside "${BESIDE_INTEGRATION[@]}"
    fi

    printf '\n%-12s %-9s %6s  %s\n' tier result time note
    for i in "${!RESULT_TIER[@]}"; do
        printf '%-12s %-9s %5ss  %s\n' "${RESULT_TIER[i]}" "${RESULT_STATE[i]}" "${RESULT_SECONDS[i]}" "${RESULT_NOTE[i]}"
        case "${RESULT_STATE[i]}" in
            passed) passed=$((passed + 1)) ;;
            failed) failed=$((failed + 1)) ;;
        esac
    done
    printf 'test-suite: %d passed, %d failed\n' "${passed}" "${failed}"
    ((failed == 0))
}

main "$@"
