"""uv's folders where the verifier runs uv or uvx (runner/uv_cache.py), with no engine: the guard
shell's parts run here in a home of the test's own. Through the runner, in containers:
tests/test_uv_cache_integrity.py."""

from __future__ import annotations

import os
import subprocess

import pytest

from tbscale.runner.guard_shell import parse_snapshot
from tbscale.runner.uv_cache import UV_CLEAR, UV_FOLDERS
from tbscale.runner.verifier_reads import read_verifier


def _run(script: str, home, **env) -> dict:
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True,
                         env={"PATH": os.environ["PATH"], "HOME": str(home), **env}).stdout
    return parse_snapshot(out)


def test_the_folders_the_agent_phase_made_are_removed_and_named(tmp_path):
    (tmp_path / ".local/share/uv/tools").mkdir(parents=True)  # the image's own: kept
    base = _run(UV_FOLDERS, tmp_path, TBSCALE_UV="1")
    assert base["uv_absent"] == [f"{tmp_path}/.cache/uv", f"{tmp_path}/.local/share/uv/python"]
    assert "uv_absent" not in _run(UV_FOLDERS, tmp_path)  # the scripts run no uv
    # the agent phase: a cached environment, and a file in the image's own folder
    (tmp_path / ".cache/uv/archive-v0/x/lib").mkdir(parents=True)
    (tmp_path / ".local/share/uv/tools/t").write_text("x")
    after = _run(UV_CLEAR, tmp_path, TBSCALE_SINCE="1.0", TBSCALE_UV_CLEAR="\n".join(base["uv_absent"]))
    assert after["uv_removed"] == [f"{tmp_path}/.cache/uv"]
    assert not (tmp_path / ".cache/uv").exists() and (tmp_path / ".local/share/uv/tools/t").exists()
    # uv's variables name them
    moved = _run(UV_FOLDERS, tmp_path, TBSCALE_UV="1", UV_CACHE_DIR=str(tmp_path / "c"), XDG_DATA_HOME=str(tmp_path / "d"))
    assert moved["uv_absent"] == [f"{tmp_path}/c", f"{tmp_path}/d/uv/python", f"{tmp_path}/d/uv/tools"]


@pytest.mark.parametrize("script, uv", [
    ("uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA\n", True),
    ("source $HOME/.local/bin/env\nuv run pytest /tests\n", True),
    ("python3 -m pytest /tests -rA\n", False),
])
def test_uv_is_followed_where_the_scripts_run_it(tmp_path, script, uv):
    from types import SimpleNamespace

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text("#!/bin/bash\n" + script)
    verifier = SimpleNamespace(command="bash /tests/test.sh", tests_mount="/tests")
    assert read_verifier(verifier, [tests]).uv is uv
