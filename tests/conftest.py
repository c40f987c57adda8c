"""Shared fixtures.

- `loopback_model`: a running tbscale.testing.LoopbackModel (an OpenAI-compatible server on
  127.0.0.1); set `.responder`, `.latency` or call `.fail_next(...)` on it, and build a model config
  with `.model_config()`. Closed after the test.
- `docker_available`: skips the test (with the reason) when no Docker engine answers; under CI
  (env CI set) that is a failure instead. Tests marked `@pytest.mark.docker` get it automatically.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

import pytest

# litellm otherwise downloads its price map at import time; tests never leave the machine.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# A proxy configured in the environment must not capture loopback traffic.
_no_proxy = {p for p in os.environ.get("NO_PROXY", os.environ.get("no_proxy", "")).split(",") if p}
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(sorted(_no_proxy | {"127.0.0.1", "localhost"}))

from tbscale_testing import LoopbackModel  # noqa: E402


@pytest.fixture
def loopback_model():
    with LoopbackModel(max_lifetime_sec=600) as srv:
        yield srv
    if srv.errors:  # a responder that raised is a broken test, even if the test did not notice
        raise srv.errors[0]


@functools.lru_cache(maxsize=None)
def docker_problem() -> str | None:
    """Why Docker cannot be used here (None: `docker info` answered)."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        res = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`docker info` failed: {type(e).__name__}"
    if res.returncode != 0:
        return f"`docker info` failed: {(res.stderr or res.stdout).strip().splitlines()[-1:] or res.returncode}"
    return None


@pytest.fixture(scope="session")
def docker_available() -> None:
    problem = docker_problem()
    if problem and os.environ.get("CI"):  # as tests/_docker.py: CI brings an engine up, so none is a failure
        pytest.fail(f"needs a Docker engine: {problem}")
    if problem:
        pytest.skip(f"needs a Docker engine: {problem} (run scripts/ensure_docker.sh)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("docker") and "docker_available" not in item.fixturenames:
            item.fixturenames.insert(0, "docker_available")
