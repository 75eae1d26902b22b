#!/usr/bin/env bash
# Prove the integration tier steady on a busy machine: run `scripts/run-tests.sh integration` while a CPU hog (a busy
# loop at normal priority) is pinned to one core, then print each run's summary and time. The hog is killed however
# the script ends.
#
#   scripts/run-steady.sh                                   the whole tier twice in a row (issue 29's acceptance)
#   STEADY_RUNS=1 scripts/run-steady.sh                     once
#   PYTEST_ADDOPTS="-k fleet_rollout" scripts/run-steady.sh  a narrowed selection (pytest reads PYTEST_ADDOPTS)
#
# STEADY_HOG_CPU names the core the hog runs on (default 1, the second core); INTEGRATION_WORKERS is passed on to
# run-tests.sh. Expects the environment `make` sets up; `make test-steady` is the way to call it.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}" || exit 2

HOG_CPU="${STEADY_HOG_CPU:-1}"
RUNS="${STEADY_RUNS:-2}"

if ! command -v taskset >/dev/null; then
    echo "run-steady: taskset is not on PATH (util-linux); it pins the hog to one core" >&2
    exit 2
fi
if ((HOG_CPU >= $(nproc))); then
    echo "run-steady: STEADY_HOG_CPU=${HOG_CPU}, but this machine has $(nproc) core(s): name one of 0..$(($(nproc) - 1))" >&2
    exit 2
fi

taskset -c "${HOG_CPU}" bash -c 'while :; do :; done' &
HOG_PID=$!
LOGS="$(mktemp -d)"
# shellcheck disable=SC2064  # the hog's pid and the log folder are fixed now
trap "kill ${HOG_PID} 2>/dev/null; wait ${HOG_PID} 2>/dev/null; rm -rf '${LOGS}'" EXIT
trap 'exit 130' INT TERM
printf 'run-steady: CPU hog (pid %s) pinned to core %s; %s run(s) of the integration tier%s\n' \
    "${HOG_PID}" "${HOG_CPU}" "${RUNS}" "${PYTEST_ADDOPTS:+ with PYTEST_ADDOPTS=${PYTEST_ADDOPTS}}"

declare -a SUMMARY=()
failed=0
for ((run = 1; run <= RUNS; run++)); do
    began=${SECONDS}
    scripts/run-tests.sh integration 2>&1 | tee "${LOGS}/run-${run}.log"
    rc=${PIPESTATUS[0]}
    ((rc == 0)) || failed=1
    # pytest's closing line (counts and its own time) and run-tests.sh's table row and summary line
    SUMMARY+=("run ${run}: exit ${rc} in $((SECONDS - began))s"
              "$(grep -E '^=+ .*[0-9.]+s( \([0-9:]+\))? =+$' "${LOGS}/run-${run}.log" | tail -n 1)"
              "$(grep -E '^(integration |test-suite: )' "${LOGS}/run-${run}.log")")
done

printf '\n===== run-steady: the integration tier with a busy loop on core %s =====\n' "${HOG_CPU}"
printf '%s\n' "${SUMMARY[@]}"
exit "${failed}"
