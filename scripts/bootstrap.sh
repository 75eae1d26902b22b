#!/usr/bin/env bash
# Prepare a checkout for development and tests, idempotently and without Ansible Galaxy:
#   venv         .venv with Python 3.12 and the pinned packages of requirements-dev.txt
#   collections  .collections/ansible_collections/{kubevirt_ops/rebalance,kubernetes/core}
#   all          both (default)
#   debs         the Debian packages of tests/debian-packages.txt that are missing (chromium for the HTML report
#                test), with apt-get as root or through sudo; run by scripts/run-tests.sh before the tiers that
#                need them, not by `all`: the demo and the docs need no browser, and apt-get needs root
# A second run with unchanged inputs does nothing and takes milliseconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROOT}/.venv"
COLLECTIONS="${ROOT}/.collections"
DOWNLOADS="${ROOT}/.cache/downloads"
DEBIAN_PACKAGES="${ROOT}/tests/debian-packages.txt"

# kubernetes.core comes from the `ansible` community package on PyPI (Galaxy is not reachable from
# every machine this runs on). ansible 14.x is the release built on ansible-core 2.21.
ANSIBLE_BUNDLE_VERSION="14.5.0"
ANSIBLE_BUNDLE_SHA256="245623ccc2d31d0f6f4bdb63168d550cad305fb032cc43d96e8f61ce8ab0ba84"
BUNDLED_COLLECTIONS=(kubernetes/core)

log() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

# A Python that really runs (a pyenv shim for a version that is not selected exits non-zero) and is
# at least 3.12, which ansible-core 2.21 requires on the controller. Python 3.12 is preferred.
is_usable_python() {
    "$1" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info[:2] >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local candidate
    local -a candidates=()
    [[ -n "${PYTHON:-}" ]] && candidates+=("${PYTHON}")
    candidates+=(python3.12)
    # pyenv installs, newest 3.12 patch release first
    local -a pyenv_pythons=("${PYENV_ROOT:-${HOME}/.pyenv}"/versions/3.12*/bin/python3.12)
    if [[ -e "${pyenv_pythons[0]}" ]]; then
        mapfile -t pyenv_pythons < <(printf '%s\n' "${pyenv_pythons[@]}" | sort -rV)
        candidates+=("${pyenv_pythons[@]}")
    fi
    candidates+=(/usr/local/bin/python3.12 /usr/bin/python3.12 python3)
    for candidate in "${candidates[@]}"; do
        if is_usable_python "${candidate}"; then
            # resolve to the real interpreter so the venv does not depend on a shim
            "${candidate}" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}

venv_key() {
    # the venv is up to date when it was built by this key: the pinned requirements and the Python
    { sha256sum "${ROOT}/requirements-dev.txt" | cut -d' ' -f1; "${VENV}/bin/python" -c 'import sys; print(sys.version)'; } 2>/dev/null
}

ensure_venv() {
    local stamp="${VENV}/.kubevirt-ops-stamp"
    if [[ -x "${VENV}/bin/python" && -f "${stamp}" ]] && "${VENV}/bin/python" -c '' 2>/dev/null \
        && [[ "$(venv_key)" == "$(cat "${stamp}")" ]]; then
        return 0
    fi
    if ! [[ -x "${VENV}/bin/python" ]] || ! is_usable_python "${VENV}/bin/python"; then
        local python
        python="$(find_python)" || die "no usable Python >= 3.12 found (tried \$PYTHON, python3.12, pyenv 3.12, python3); set PYTHON=/path/to/python3.12"
        log "creating ${VENV} with ${python}"
        rm -rf "${VENV}"
        "${python}" -m venv "${VENV}"
    fi
    log "installing pinned packages from requirements-dev.txt"
    "${VENV}/bin/python" -m pip install --quiet --disable-pip-version-check -r "${ROOT}/requirements-dev.txt"
    venv_key >"${stamp}"
}

ensure_bundle_wheel() {
    local wheel="${DOWNLOADS}/ansible-${ANSIBLE_BUNDLE_VERSION}-py3-none-any.whl"
    if [[ ! -f "${wheel}" ]]; then
        log "downloading ansible==${ANSIBLE_BUNDLE_VERSION} from PyPI (only for its bundled collections)"
        mkdir -p "${DOWNLOADS}"
        "${VENV}/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
            --only-binary=:all: --dest "${DOWNLOADS}" "ansible==${ANSIBLE_BUNDLE_VERSION}"
    fi
    if [[ "$(sha256sum "${wheel}" | cut -d' ' -f1)" != "${ANSIBLE_BUNDLE_SHA256}" ]]; then
        rm -f "${wheel}"
        die "checksum mismatch for ${wheel##*/}; removed it, run again"
    fi
    printf '%s\n' "${wheel}"
}

ensure_collections() {
    local ac="${COLLECTIONS}/ansible_collections"
    mkdir -p "${ac}/kubevirt_ops"
    # this checkout, resolvable as kubevirt_ops.rebalance (relative link: survives moving the checkout)
    if [[ "$(readlink "${ac}/kubevirt_ops/rebalance" 2>/dev/null)" != "../../.." ]]; then
        rm -rf "${ac}/kubevirt_ops/rebalance"
        ln -s ../../.. "${ac}/kubevirt_ops/rebalance"
    fi

    local name missing=()
    for name in "${BUNDLED_COLLECTIONS[@]}"; do
        if [[ "$(cat "${ac}/${name}/.kubevirt-ops-source" 2>/dev/null)" != "ansible==${ANSIBLE_BUNDLE_VERSION}" ]]; then
            missing+=("${name}")
        fi
    done
    ((${#missing[@]})) || return 0

    local wheel
    wheel="$(ensure_bundle_wheel)"
    for name in "${missing[@]}"; do
        log "extracting ${name/\//.} from ${wheel##*/}"
        rm -rf "${ac:?}/${name:?}"
        "${VENV}/bin/python" - "${wheel}" "ansible_collections/${name}/" "${COLLECTIONS}" <<'EOF'
import sys
import zipfile

wheel, prefix, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    members = [member for member in archive.namelist() if member.startswith(prefix)]
    if not members:
        sys.exit(f"{prefix} not found in {wheel}")
    archive.extractall(dest, members)
EOF
        printf 'ansible==%s\n' "${ANSIBLE_BUNDLE_VERSION}" >"${ac}/${name}/.kubevirt-ops-source"
    done
}

# Installed means dpkg's status `installed` (dpkg -s also answers for removed packages that left their config files).
# Nothing missing: one dpkg-query per package and no output. Something missing: apt-get update first (a clean
# machine has no package lists), then apt-get install without recommends; sudo -n, so a password prompt fails
# instead of hanging a CI run.
ensure_debian_packages() {
    local name
    local -a wanted=() missing=() as_root=()
    if ! command -v dpkg-query >/dev/null; then
        log "no dpkg-query (not Debian): install the packages of ${DEBIAN_PACKAGES#"${ROOT}/"} with the system's package manager"
        return 0
    fi
    mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "${DEBIAN_PACKAGES}")
    for name in "${wanted[@]}"; do
        [[ "$(dpkg-query -W -f='${db:Status-Status}' "${name}" 2>/dev/null)" == installed ]] || missing+=("${name}")
    done
    ((${#missing[@]})) || return 0
    if ((EUID != 0)); then
        command -v sudo >/dev/null || die "Debian packages missing (${missing[*]}) and not root: install them as root"
        as_root=(sudo -n)
    fi
    log "installing Debian packages: ${missing[*]}"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
}

case "${1:-all}" in
    venv) ensure_venv ;;
    collections) ensure_venv; ensure_collections ;;
    all) ensure_venv; ensure_collections ;;
    debs) ensure_debian_packages ;;
    *) die "usage: $0 [venv|collections|all|debs]" ;;
esac
