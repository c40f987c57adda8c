# Everything a fresh machine needs: a virtualenv with tbscale, a Docker engine, the base images.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= configs/demo.yaml

.PHONY: setup docker demo test test-fast test-durations test-profile check bench clean

$(BIN)/tbscale: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,ray]'
	touch $(BIN)/tbscale

setup: $(BIN)/tbscale docker

docker:
	bash scripts/ensure_docker.sh

demo: setup
	$(BIN)/tbscale run $(CONFIG)

# The suite in three parts (tests/conftest.py says how it is laid out):
# - test-fast: ruff, lint-imports and every test that needs no Docker engine, on 2 workers, with
#   the engine out of reach, so a test that needs one and is not marked `docker` fails here; the
#   tests that import litellm (marked `litellm`) run on one of them, which alone pays its import;
# - the Docker tests, TEST_WORKERS at a time: they wait on the engine more than on the CPU;
# - the few marked `serial`, alone: they count what an engine-wide sweep removes.
# The Docker lanes end with their slowest tests (--durations), where the suite's time goes.
# Tests are handed out longest first, as measured (tests/conftest.py, tests/durations.json):
# --no-loadscope-reorder keeps that order (pytest-xdist would put groups with more tests first).
# `make test-durations` measures them again.
PYTEST := $(BIN)/python -m pytest -q -ra
# Python caches compiled modules (and pytest its rewritten tests) in __pycache__/ unless this is set:
# with it set, every worker and every `tbscale` a test starts compiles them all again (collecting
# test-fast took 6.2 s per worker, 1.9 s with the caches). The caches are ignored by git.
unexport PYTHONDONTWRITEBYTECODE
TEST_WORKERS ?= 4
NO_DOCKER := DOCKER_HOST=unix:///dev/null/no-docker-in-test-fast

test-fast: $(BIN)/tbscale
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(NO_DOCKER) $(PYTEST) -m "not docker" -n 2 --dist loadgroup --no-loadscope-reorder

test: setup
	bash scripts/ensure_test_tools.sh
	$(MAKE) --no-print-directory test-fast
	$(PYTEST) -m "docker and not serial" -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=15
	$(PYTEST) -m "docker and serial" --durations=5

test-durations: setup
	$(NO_DOCKER) $(PYTEST) -m "not docker" -n 2 --dist loadgroup --no-loadscope-reorder --update-durations
	$(PYTEST) -m "docker and not serial" -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --update-durations

# The Docker lane again, with the engine work (containers, execs, restarts, commits) each test
# caused and the machine's CPU over it: benchmarks/profile_docker_lane.py.
test-profile: setup
	$(BIN)/python benchmarks/profile_docker_lane.py

check: setup
	$(BIN)/tbscale tasks check tasks/

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	$(BIN)/tbscale clean || true
