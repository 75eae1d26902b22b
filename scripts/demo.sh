#!/usr/bin/env bash
# The main job, run by `make demo`: start the simulator with the rehearsal scenario (KubeVirt, the Descheduler
# package and other workloads, no test VMs), show the cluster with the real kubectl, run playbooks/rehearse.yml end
# to end against it (preflight, size the imbalance from the cluster and predict it, create the test VMs, back up,
# apply the bounded policy, validate the live migration by the five checks, compare with the prediction, clean up)
# and print the Markdown report; the HTML report lies next to it. Reports and backups go to .cache/demo/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

SCENARIO="${DEMO_SCENARIO:-rehearsal}"
STATE="${ROOT}/.cache/demo"
KUBECONFIG_FILE="${STATE}/kubeconfig"
READY_TIMEOUT="${DEMO_READY_TIMEOUT:-60}"
KUBESIM="${ROOT}/tests/kubesim/kubesim"

say() { printf '\n--> %s\n' "$*"; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

[[ -x "${KUBESIM}" ]] || die "${KUBESIM#"${ROOT}/"} is missing or not executable"
command -v kubectl >/dev/null || die "kubectl is not on PATH"

mkdir -p "${STATE}"
rm -f "${KUBECONFIG_FILE}" "${STATE}/kubesim.out"

say "starting the simulator: kubesim serve --scenario ${SCENARIO}"
"${KUBESIM}" serve --scenario "${SCENARIO}" --kubeconfig "${KUBECONFIG_FILE}" \
    >"${STATE}/kubesim.out" 2>"${STATE}/kubesim.log" &
SIM_PID=$!

stop_simulator() {
    if kill -0 "${SIM_PID}" 2>/dev/null; then
        kill -TERM "${SIM_PID}" 2>/dev/null || true
        wait "${SIM_PID}" 2>/dev/null || true
    fi
}
trap stop_simulator EXIT
trap 'exit 130' INT TERM

# The simulator prints exactly one line `ready <url>` on stdout once it accepts requests.
URL=""
deadline=$((SECONDS + READY_TIMEOUT))
while [[ -z "${URL}" ]]; do
    if ! kill -0 "${SIM_PID}" 2>/dev/null; then
        wait "${SIM_PID}" && rc=0 || rc=$?
        tail -n 20 "${STATE}/kubesim.log" >&2 || true
        die "the simulator exited (code ${rc}) before it was ready; log: ${STATE#"${ROOT}/"}/kubesim.log"
    fi
    ((SECONDS < deadline)) || die "the simulator was not ready within ${READY_TIMEOUT}s; log: ${STATE#"${ROOT}/"}/kubesim.log"
    URL="$(sed -n 's/^ready \(.*\)$/\1/p' "${STATE}/kubesim.out" | head -n 1)"
    [[ -n "${URL}" ]] || sleep 0.1
done
echo "simulator ready at ${URL}; kubeconfig ${KUBECONFIG_FILE#"${ROOT}/"}"

export KUBECACHEDIR="${STATE}/kubectl-cache"
show() {
    say "kubectl --kubeconfig ${KUBECONFIG_FILE#"${ROOT}/"} $*"
    kubectl --kubeconfig "${KUBECONFIG_FILE}" "$@"
}
show get nodes
show get vmi -A -o wide
show -n descheduler get cronjob,configmap -l app.kubernetes.io/name=descheduler

RUN="${STATE}/run"
rm -rf "${RUN}"
mkdir -p "${RUN}"
say "ansible-playbook -i inventories/simulator playbooks/rehearse.yml"
# The playbook runs from .cache/demo/run so that its reports/ and backups/ land there.
if ! (cd "${RUN}" && KUBESIM_KUBECONFIG="${KUBECONFIG_FILE}" ANSIBLE_NOCOLOR="${ANSIBLE_NOCOLOR:-1}" \
        ansible-playbook -i "${ROOT}/inventories/simulator" "${ROOT}/playbooks/rehearse.yml" \
        -e rehearse_report_show=false >"${RUN}/ansible.log" 2>&1); then
    tail -n 40 "${RUN}/ansible.log" >&2
    REPORT="$(find "${RUN}/reports" -name 'rehearse-*.md' 2>/dev/null | head -n 1)"
    [[ -n "${REPORT}" ]] && cat "${REPORT}"
    die "the rehearsal failed; full output: ${RUN#"${ROOT}/"}/ansible.log"
fi
grep -E '^(PLAY RECAP|workload +:)' "${RUN}/ansible.log" || true

REPORT="$(find "${RUN}/reports" -name 'rehearse-*.md' | head -n 1)"
[[ -n "${REPORT}" ]] || die "the playbook wrote no report under ${RUN#"${ROOT}/"}/reports"
say "the report (${REPORT#"${ROOT}/"}; JSON and HTML next to it: ${REPORT%.md}.html)"
cat "${REPORT}"

say "what the rehearsal left: no test namespace, the package's policy, no ResourcePatch, the CronJob resumed"
show get namespace kubevirt-ops-rehearsal --ignore-not-found
show -n descheduler get resourcepatch
show -n descheduler get cronjob descheduler -o jsonpath='{.spec.suspend}{"\n"}'

say "stopping the simulator"
stop_simulator
trap - EXIT
echo "demo: done"
