"""Docker availability for tests.

A test that needs an engine says so with `@pytest.mark.docker` (or by asking for the
`docker_available` fixture, which marks it too): without an engine it skips locally and fails
under CI (env CI set), where `make test` brings one up. `requires_docker` is the same marker under
an older name."""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest

requires_docker = pytest.mark.docker


@functools.lru_cache(maxsize=None)
def docker_problem() -> str | None:
    """Why Docker cannot be used here (None: `docker info` answered)."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        res = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`docker info` failed: {type(e).__name__}"
    if res.returncode != 0:
        return f"`docker info` failed: {(res.stderr or res.stdout).strip().splitlines()[-1:] or res.returncode}"
    return None


def docker_ok() -> bool:
    return docker_problem() is None
