"""statskit as a Harbor task in the shape of the SWE-bench-style scripts that patch a repository and
test it there: terminal-bench's SWE-bench Verified adapter (rese1f/terminal-bench-datasets,
`datasets/swebench-verified/*/run-tests.sh`: `cd /testbed`, `git checkout BASE` of the test file, `git
apply` of the test patch, `pytest -rA` of that file) and SWE-bench Pro's Harbor scripts (the patch
piped into `git apply`, nothing checked out). median() of an even-length list is wrong; the tests
import a helper and read an expected value from tests/data/. For tests/test_repository_tests_integrity.py
and tests/test_repository_history_docker.py."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tbscale_testing.tasks import write_harbor_task

# the swebench demo image's first layers (tbscale_testing/swebench_demo.py), shared with it
DOCKERFILE = """FROM python:3.11-slim-bookworm
RUN pip install --no-cache-dir pytest==8.3.3
RUN apt-get update && apt-get install -y --no-install-recommends git patch && rm -rf /var/lib/apt/lists/*
RUN git config --global user.name tbscale && git config --global user.email tbscale@localhost \\
 && git config --global --add safe.directory /testbed
COPY repo /testbed
WORKDIR /testbed
"""
REPO = {
    "statskit/__init__.py": "from statskit.stats import median\n",
    "statskit/stats.py": "def median(values):\n    v = sorted(values)\n    return v[len(v) // 2]\n",
    "tests/helpers.py": "def close(a, b):\n    return abs(a - b) < 1e-9\n",
    "tests/test_stats.py": "from pathlib import Path\n\nfrom helpers import close\nfrom statskit import median\n\n\n"
                           "def test_median_odd():\n    assert close(median([3, 1, 2]), 2)\n",
    "tests/data/even.txt": "2.5\n",  # the expected value the added test reads
}
TEST_ADDED = ("\n\ndef test_median_even():\n"
              "    assert close(median([1, 2, 3, 4]), float((Path(__file__).parent / 'data/even.txt').read_text()))\n")
RUN_TESTS = """#!/bin/bash
cd /testbed
git checkout {base} tests/test_stats.py
git apply -v - <<'EOF_114329324912'
{test_patch}
EOF_114329324912
if python -m pytest -rA tests/test_stats.py > /logs/verifier/pytest.log 2>&1; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
git checkout {base} tests/test_stats.py
"""
# SWE-bench Pro as Harbor tasks: the patch piped into `git apply`, nothing checked out, the script
# going on when the patch does not apply, the reward from pytest's exit code
PRO_TESTS = """#!/bin/bash
set -uo pipefail
cd /app || cd /testbed || cd /workspace
cat << 'TEST_PATCH_EOF' | git apply -v --allow-empty 2>&1
{test_patch}
TEST_PATCH_EOF
if [ $? -ne 0 ]; then echo "WARNING: Test patch failed to apply."; fi
python -m pytest "tests/test_stats.py::test_median_odd" "tests/test_stats.py::test_median_even" -v 2>&1 | tee test_output.log
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""
FIX = "sed -i 's|return v\\[len(v) // 2\\]|return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2|' /testbed/statskit/stats.py"


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def statskit_task(root: Path, name: str = "swebench-adapter-like", script: str = RUN_TESTS,
                  history: Callable[[Path, str], None] | None = None) -> Path:
    """The task, with the repository at its base commit in the image and its test patch in the
    script; `history(repo, base)`, when given, adds to the repository's history before the image
    copies it (its work tree left at base)."""
    task = write_harbor_task(root, name, dockerfile=DOCKERFILE, test_sh="",
                             instruction="median() of an even-length list is wrong in /testbed: fix it.\n",
                             task_toml="[agent]\ntimeout_sec = 120\n[verifier]\ntimeout_sec = 120\n")
    repo = task / "environment" / "repo"
    for rel, text in REPO.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    if history is not None:
        history(repo, base)
    (repo / "tests/test_stats.py").write_text(REPO["tests/test_stats.py"] + TEST_ADDED)
    test_patch = git(repo, "diff")
    git(repo, "checkout", "--", "tests/test_stats.py")
    (task / "tests" / "test.sh").write_text(script.format(base=base, test_patch=test_patch.rstrip("\n")))
    return task


