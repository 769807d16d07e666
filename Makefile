# volcano-elastic developer entry points. `make demo` and `make test` are the README's two commands.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export VOLCANO_ELASTIC_CACHE ?= $(HOME)/.cache/volcano-elastic

.PHONY: help venv fmt lint types imports test test-unit test-integration test-e2e test-real node-packages images binaries demo bench clean dist pictures

help: ## list every target
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

$(BIN)/.installed: pyproject.toml jobkit/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,plot]' -e ./jobkit
	@touch $@

venv: $(BIN)/.installed ## create the virtualenv with every dependency

fmt: venv ## apply ruff's fixes (import order, modern syntax) in place
	$(BIN)/ruff check --fix .

types: venv ## mypy --strict over elastic_controller, webhook, certs and the job kit
	$(BIN)/mypy

imports: venv ## import-linter contracts (layers, independence; see ARCHITECTURE.md)
	$(BIN)/lint-imports

lint: venv types imports ## ruff, mypy --strict, import contracts
	$(BIN)/ruff check .

binaries: ## build (or reuse) kube-apiserver, etcd, Volcano, kwok, training-operator into the cache
	bash hack/build-binaries.sh

test-unit: venv ## the fast loop: pure code, no cluster
	$(BIN)/pytest -q tests/unit

test-integration: venv binaries ## real kube-apiserver + etcd
	$(BIN)/pytest -q -m integration tests/integration

test-e2e: venv binaries ## the whole box: Volcano, kwok GPU nodes, training operator
	$(BIN)/pytest -q -m e2e tests/e2e

node-packages: ## containerd, runc, CNI plugins, mmdebstrap at hack/versions.env's pins (root; for real nodes)
	@bash hack/install-node-packages.sh || echo "WARNING: the real-node packages are not installed: the real-node tier (tests/real) will SKIP" >&2

images: venv ## our image and the training image as OCI archives, without Docker (cached; root)
	PYTHON=$(BIN)/python bash hack/build-image.sh volcano-elastic
	PYTHON=$(BIN)/python bash hack/build-image.sh train

dist: venv ## what a release publishes, into dist/: both wheels, the chart package, the image built from the Dockerfile by buildah (OCI archive; root); sizes and sha256
	$(BIN)/python -m hack.dist

pictures: venv ## regenerate docs/img/ (the README's and docs/choosing.md's pictures; tests/unit/test_pictures.py fails when one is stale)
	$(BIN)/python -m hack.pictures

test-real: venv binaries node-packages ## the box with real nodes: our image, Helm install, real pods and torchrun
	$(BIN)/pytest -q -m real tests/real

test: lint binaries node-packages ## everything: lint, types, import rules, unit, integration, e2e, real nodes
	$(BIN)/pytest -q tests

demo: venv binaries node-packages ## elastic scaling live on a local control plane (webhook, agent, kwok GPU nodes), plan + simulate on bundled examples, then a real torchrun job on real nodes (root; else a RECORDED run, and why)
	bash hack/demo.sh

bench: venv ## benchmarks (numbers, not pass/fail)
	$(BIN)/python bench/plan_scale.py
	$(BIN)/python bench/plan_optimal.py
	$(BIN)/python bench/webhook_load.py
	$(BIN)/python bench/agent_cycle.py --gangs 1
	$(BIN)/python bench/simulate_scale.py
	$(BIN)/python bench/simulate_seeds.py
	@echo 'needs the box: bench/controller_burst.py --kubeconfig $$(hack/local-up.sh --profile core | tail -1); bench/agent_vs_native.py'

clean: ## remove the virtualenv and caches (not the binary cache)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
