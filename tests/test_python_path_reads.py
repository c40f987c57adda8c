"""The folders the verifier's Python searches before its library (runner/python_path.py), without an
engine: read off test scripts, the guard shell's part run here with `sh` over a folder of planted
and honest modules, and the findings. Against a real verifier in a container:
tests/test_python_startup_integrity.py (`stdlib-module-in-workdir` and the cases after it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.runner.python_path import ENVIRONMENT, PYTHON_PATH, python_folders, shadowing_changed
from tbscale.types.guard import ToolRun

# The shapes of public test scripts: terminal-bench's Aider Polyglot Python (`cd /app`, `python3 -m
# pytest .`), LiveCodeBench Pro (`python -m pytest /app/tests/...` in the image's WORKDIR), DevEval
# (`export PYTHONPATH=$(pwd)`, then `pytest`), and the bundled tasks (`cd /app; python3 -m pytest`).
POLYGLOT = "set -e\ncd /app\npip3 install pytest\nif command -v pytest; then\n    python3 -m pytest . -v --tb=short\nfi\n"
LIVECODEBENCH = "export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1\npython -m pytest /app/tests/test_outputs.py -rA -v"
DEVEVAL = "cd /app\nexport PYTHONPATH=$(pwd)\npytest unit_tests\n"


def test_the_folders_python_searches_first_read_off_the_scripts():
    assert python_folders([POLYGLOT], "/tests") == ["/app", ENVIRONMENT]
    assert python_folders([LIVECODEBENCH], "/tests") == ["", ENVIRONMENT]  # the workdir
    assert python_folders([DEVEVAL], "/tests") == ["+/app", ENVIRONMENT]  # PYTHONPATH's $(pwd); pytest's bin via :env
    # a script's own folder; the tests folder is the verifier's own (guarded apart), and left out
    assert python_folders(["python3 /tests/check.py\ncd /srv && python3 tools/run.py"], "/tests") == [
        "/srv/tools", ENVIRONMENT]
    # PYTHONPATH's literal folders, relative ones from where Python runs, an empty entry as the folder itself
    assert python_folders(["cd /app\nPYTHONPATH=/opt/lib:src: python3 -m unittest"], "/tests") == [
        "/app", "+/opt/lib", "+/app/src", "+/app", ENVIRONMENT]
    # options before -m, `uv run python -m`, and isolated runs (-I, -P), which put no folder first
    assert python_folders(["python3 -u -W ignore -m pytest x", "uv run python -c 'print(1)'"], None) == ["", ENVIRONMENT]
    assert python_folders(["python3 -I -m pytest x\npython3 -P -m pytest y"], None) == [ENVIRONMENT]
    assert python_folders(["cd /srv\ncoverage run --branch -m pytest tests"], None) == ["/srv", ENVIRONMENT]
    # a Python script run by path (SWE-bench's Django: `./tests/runtests.py`)
    assert python_folders(["cd /testbed\n./tests/runtests.py --verbosity 2 utils_tests"], "/tests") == [
        "/testbed/tests", ENVIRONMENT]
    assert python_folders(["bash /tests/run.sh\ngo test ./..."], "/tests") == []  # no Python: nothing asked
    # a folder the script does not name: PATH's and PYTHONPATH's folders still count
    assert python_folders(['cd "$REPO"\npython3 -m pytest\npython3 "$TEST_DIR/run.py"'], "/tests") == [ENVIRONMENT]


def test_the_guard_shell_lists_modules_written_under_the_librarys_names(tmp_path):
    app, bin_, lib = tmp_path / "app", tmp_path / "bin", tmp_path / "lib"
    for folder in (app, bin_, lib):
        folder.mkdir()
    (app / "kept.py").write_text("import os\n")  # the image's, before the clock
    (app / "argparse.py").write_text("x = 1\n")  # there before the clock, unchanged: not listed
    time.sleep(0.05)
    since = f"{time.time():.9f}"
    time.sleep(0.05)
    exits = "import os\nos._exit(0)\n"
    (app / "solution.py").write_text("def answer():\n    return 42\n")  # the agent's own module
    (app / "inspect.py").write_text(exits)  # the standard library's name
    (app / "yaml.py").write_text(exits)  # a package this interpreter has installed
    (app / "pluggy.pyc").write_bytes(b"\x00")  # pytest's, compiled
    (app / "zlib.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (app / "json").mkdir()
    (app / "json" / "__init__.py").write_text(exits)  # a package
    (app / "logging").mkdir()
    (app / "logging" / "app.log").write_text("")  # a folder of logs: no package, not a shadow
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(exits)
    (app / "email").symlink_to(pkg)  # a link to a package
    (app / "html").symlink_to(app / "logging")  # a link to a folder that is none
    (app / "deep").mkdir()
    (app / "deep" / "os.py").write_text(exits)  # not at the top: Python does not look there
    (bin_ / "typing.py").write_text(exits)  # beside a console script on PATH
    (lib / "csv.py").write_text(exits)  # in PYTHONPATH
    (lib / "site.py").write_text(exits)  # there too: on sys.path as site.py is imported (Python 3.10)
    (app / "site.py").write_text("# a static site's generator\n")  # imported before the workdir is on sys.path
    # the project's .venv a `uv run pytest` uses: its bin, and the packages installed in it
    venv = app / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / "python3.11" / "site-packages" / "venvonlypkg").mkdir(parents=True)
    (venv / "lib" / "python3.11" / "site-packages" / "venvonlypkg" / "__init__.py").write_text("")
    (venv / "bin" / "shlex.py").write_text(exits)
    (app / "venvonlypkg.py").write_text(exits)
    env = {"PATH": f"{bin_}:{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(lib),
           "TBSCALE_PYTHON_PATH": f"\n{ENVIRONMENT}", "TBSCALE_WORKDIR": str(app), "TBSCALE_SINCE": since,
           "TBSCALE_PROJECT_ENVS": ".venv"}
    run = subprocess.run(["sh", "-c", PROJECT + PYTHON_PATH], capture_output=True, text=True, check=True,
                         env=env, timeout=60)
    found = parse_snapshot(run.stdout).get("python_path", {})
    assert sorted(found) == sorted(str(p) for p in (
        app / "inspect.py", app / "yaml.py", app / "pluggy.pyc", app / "zlib.cpython-311-x86_64-linux-gnu.so",
        app / "json" / "__init__.py", app / "email", bin_ / "typing.py", lib / "csv.py", lib / "site.py",
        venv / "bin" / "shlex.py",
        app / "venvonlypkg.py")), run.stdout
    assert all(len(d) == 64 for p, d in found.items() if not p.endswith("/email"))
    # at the baseline (no clock yet) nothing is listed: only what the agent phase wrote counts
    baseline = {k: v for k, v in env.items() if k != "TBSCALE_SINCE"}
    assert subprocess.run(["sh", "-c", PROJECT + PYTHON_PATH], capture_output=True, text=True, check=True,
                          env=baseline, timeout=60).stdout == ""
    assert os.path.isdir(app / "logging")


def test_the_findings_leave_the_workdirs_pytest_module_to_the_main_listing():
    after = {"/app/argparse.py": "a" * 64, "/app/pytest.py": "b" * 64, "/usr/local/bin/pytest.py": "c" * 64}
    (entry,) = shadowing_changed({}, after, {}, {}, {}, [(3, "printf 'import os' > /app/argparse.py")],
                                 ToolRun(["/app", ENVIRONMENT], "/app"))
    assert entry["kind"] == "module_shadowing"
    # /app/pytest.py is the main listing's (findings.SHADOWING in the workdir); on PATH it is this check's
    assert entry["paths"] == ["/app/argparse.py", "/usr/local/bin/pytest.py"]
    assert entry["by_command"] == {"turn": 3, "command": "printf 'import os' > /app/argparse.py"}
    assert shadowing_changed(after, after, {}, {}, {}, [], ToolRun([], "/app")) == []
