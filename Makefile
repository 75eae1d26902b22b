# kubevirt_ops.rebalance: one entry point for the demo, the tests and the build.
# Every target prepares what it needs (scripts/bootstrap.sh is idempotent and fast when nothing changed):
# .venv with Python 3.12 and requirements-dev.txt, and .collections/ansible_collections holding this
# checkout as kubevirt_ops.rebalance plus kubernetes.core (from the `ansible` package on PyPI, not Galaxy).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
COLLECTIONS := $(ROOT)/.collections

export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_HOME := $(ROOT)/.cache/ansible
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help demo test test-steady test-cluster venv collections sanity lint docs unit integration kubesim bench molecule build clean distclean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

demo: collections  ## the main job: rebalance the simulator (two workers) with playbooks/rebalance.yml and print the report
	@scripts/demo.sh

test: collections  ## run every test tier that exists; prints `test-suite: N passed, N failed`
	@scripts/run-tests.sh

test-steady: collections  ## the integration tier twice with a busy loop pinned to one core: [STEADY_RUNS=n] [PYTEST_ADDOPTS='-k name']
	@scripts/run-steady.sh

# The staging cluster is named on the command line only: a KUBECONFIG from the environment may point anywhere.
test-cluster: collections  ## cluster-safe integration tests on a real cluster: KUBECONFIG=path [CONTEXT=name] [TEST_VARS='{json}']
	@if [[ "$(origin KUBECONFIG)" != "command line" ]]; then \
		echo "make test-cluster: name the cluster on the command line: make test-cluster KUBECONFIG=/path/to/kubeconfig [CONTEXT=name]" >&2; exit 2; fi
	@scripts/run-tests.sh cluster

venv:  ## create .venv (Python 3.12) with the pinned packages of requirements-dev.txt
	@scripts/bootstrap.sh venv

collections:  ## make this checkout and kubernetes.core resolvable under .collections
	@scripts/bootstrap.sh collections

sanity: collections  ## ansible-test sanity, offline, Python 3.12
	@scripts/run-tests.sh sanity

lint: collections  ## ansible-lint --profile production
	@scripts/run-tests.sh lint

docs: collections  ## regenerate docs/collection/ (module, filter and role reference) with antsibull-docs
	@scripts/docs.sh

unit: collections  ## pytest tests/unit
	@scripts/run-tests.sh unit

integration: collections  ## pytest tests/integration (against the simulator)
	@scripts/run-tests.sh integration

kubesim: collections  ## pytest tests/kubesim/tests (the simulator's own tests)
	@scripts/run-tests.sh kubesim

bench: collections  ## benchmarks (not tests): facts and plan at scale vs the bare list and k8s_info loops; lists; verification; drain; module call CPU
	$(VENV)/bin/python tests/bench/bench_facts.py $(BENCH_ARGS)
	$(VENV)/bin/python tests/bench/bench_list.py
	$(VENV)/bin/python tests/bench/bench_verify.py
	$(VENV)/bin/python tests/bench/bench_drain.py
	$(VENV)/bin/python tests/bench/bench_cluster_maintenance.py
	$(VENV)/bin/python tests/bench/bench_module_call.py

molecule: collections  ## molecule test --all for the scenarios under extensions/molecule
	@scripts/run-tests.sh molecule

build: venv  ## build the collection tarball into .cache/build and list its contents
	@mkdir -p .cache/build
	@ansible-galaxy collection build --force --output-path .cache/build .
	@tar -tzf .cache/build/kubevirt_ops-rebalance-$$(sed -n 's/^version: *//p' galaxy.yml).tar.gz | sort

clean:  ## remove test output, build artifacts and caches (keeps .venv and downloads)
	rm -rf tests/output .cache/sanity .cache/build .cache/demo .cache/ansible .collections .pytest_cache
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -f kubevirt_ops-rebalance-*.tar.gz

distclean: clean  ## also remove .venv and the download cache
	rm -rf .venv .cache
