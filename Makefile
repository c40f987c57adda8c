# Everything a fresh machine needs: a virtualenv with tbscale, a Docker engine, the base images.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= configs/demo.yaml

.PHONY: setup docker demo test check bench clean

$(BIN)/tbscale: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/tbscale

setup: $(BIN)/tbscale docker

docker:
	bash scripts/ensure_docker.sh

demo: setup
	$(BIN)/tbscale run $(CONFIG)

test: setup
	bash scripts/ensure_test_tools.sh
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -ra

check: setup
	$(BIN)/tbscale tasks check tasks/

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	$(BIN)/tbscale clean || true
