"""Docker availability for tests: skip without an engine locally, but never in CI, where a
missing engine is a failure (make test brings one up)."""

import os
import subprocess

import pytest


def docker_ok() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


requires_docker = pytest.mark.skipif(not os.environ.get("CI") and not docker_ok(),
                                     reason="no Docker engine (run scripts/ensure_docker.sh)")
