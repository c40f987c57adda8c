"""Nothing left behind in the temp folder: `tasks list` on a thousand tasks, `tasks check` and `run`,
whether they finish or are interrupted (SIGINT, as Ctrl-C). Each command runs with TMPDIR set to a
folder of its own, which must be empty again when the command has exited."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tbscale_testing.tasks import write_harbor_task
from tbscale_testing.cli import Started, tbscale
from tbscale_testing.engine import containers


def legacy_task(root: Path, name: str, yaml_text: str = "instruction: Do it.\n") -> None:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text(yaml_text)
    (d / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (d / "run-tests.sh").write_text("bash $TEST_DIR/test.sh\n")
    (d / "tests" / "test.sh").write_text(  # what the pytest parser reads (pytest -rA)
        "echo '=== short test summary info ==='\n"
        "if [ -f /tmp/solved ]; then echo 'PASSED test_x.py::test_solved'; else echo 'FAILED test_x.py::test_solved'; fi\n")
    (d / "solution.sh").write_text("touch /tmp/solved\n")


def with_tmpdir(tmpdir: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmpdir)}


def leftovers(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.iterdir())


def test_tasks_list_on_a_thousand_tasks_leaves_the_temp_folder_unchanged(tmp_path):
    root = tmp_path / "tasks"
    for i in range(1050):
        legacy_task(root, f"legacy-{i:04d}")
    legacy_task(root, "variants", "descriptions:\n  - key: base\n    description: B.\n  - key: hard\n"
                                  "    description: H.\n")
    write_harbor_task(root, "harbor-one")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    result = tbscale("tasks", "list", root, env=with_tmpdir(tmpdir), timeout=600)
    assert result.returncode == 0, result.stderr
    assert "1053 tasks in" in result.stdout  # 1050 + two variants + one Harbor task
    assert leftovers(tmpdir) == []


@pytest.mark.docker
def test_tasks_check_and_run_leave_nothing_when_they_finish(tmp_path):
    root = tmp_path / "tasks"
    write_harbor_task(root, "quick-harbor")
    legacy_task(root, "quick-legacy")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    check = tbscale("tasks", "check", root, env=with_tmpdir(tmpdir), timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    assert leftovers(tmpdir) == []
    config = tmp_path / "exp.yaml"
    config.write_text(f"name: tmpcheck\ntasks: {{path: {root}}}\noutput_dir: {tmp_path / 'results'}\n"
                      "settings: [{name: oracle, agent: oracle}]\n")
    run = tbscale("run", config, env=with_tmpdir(tmpdir), timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert leftovers(tmpdir) == []


@pytest.mark.docker
@pytest.mark.parametrize("command", ["check", "run"])
def test_an_interrupted_check_or_run_leaves_nothing(tmp_path, command):
    root = tmp_path / "tasks"
    name = f"slow-{command}"
    write_harbor_task(root, name, solve="#!/bin/bash\nsleep 120; echo done > /app/out.txt\n",
                      task_toml="[agent]\ntimeout_sec = 300\n[verifier]\ntimeout_sec = 30\n")
    legacy_task(root, f"legacy-{command}")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    if command == "check":
        args = ["tasks", "check", str(root)]
    else:
        config = tmp_path / "exp.yaml"
        config.write_text(f"name: tmpkill\ntasks: {{path: {root}}}\noutput_dir: {tmp_path / 'results'}\n"
                          "settings: [{name: oracle, agent: oracle}]\n")
        args = ["run", str(config), "--no-report"]
    with Started(*args, env=with_tmpdir(tmpdir)) as run:
        run.wait_until(lambda: bool(containers(f"org.tbscale.task={name}", under=tmp_path)), "no container started",
                       timeout=120)
        assert leftovers(tmpdir) != [] or command == "run"  # a check keeps its run folder there while it runs
        err = run.interrupt()
    assert run.returncode == 130, err
    assert containers(f"org.tbscale.task={name}", under=tmp_path) == []
    assert leftovers(tmpdir) == []
