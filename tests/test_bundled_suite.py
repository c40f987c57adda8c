"""The bundled suite is honest: every oracle passes and every nop fails, through the real CLI."""

import subprocess
import sys
from pathlib import Path

import pytest

from tbscale_testing.tasks import write_harbor_task

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.docker
def test_tasks_check_whole_bundled_suite(tmp_path):
    res = subprocess.run([sys.executable, "-m", "tbscale.cli", "tasks", "check", str(ROOT / "tasks"),
                          "--concurrency", "4", "--keep", str(tmp_path / "check")],
                         capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "every oracle passes, every nop fails" in res.stdout
    rows = (tmp_path / "check" / "trials.jsonl").read_text().splitlines()
    n_tasks = len([p for p in (ROOT / "tasks").iterdir() if (p / "task.toml").is_file()])
    assert len(rows) == 2 * n_tasks


@pytest.mark.docker
def test_tasks_check_flags_a_dishonest_task(tmp_path):
    write_harbor_task(tmp_path / "tasks", "always-passes", instruction="Anything.\n",
                      task_toml="[agent]\ntimeout_sec = 30\n", solve="true\n",
                      test_sh="echo 1 > /logs/verifier/reward.txt\n")  # passes untouched
    res = subprocess.run([sys.executable, "-m", "tbscale.cli", "tasks", "check", str(tmp_path / "tasks")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 1
    assert "always-passes" in res.stdout and "nop passed" in res.stdout
