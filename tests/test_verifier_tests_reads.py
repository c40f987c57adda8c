"""The verifier's own tests where the agent works (runner/verifier_tests.py), without an engine: the
paths read off public test scripts' shapes, the findings from two looks, and the guard shell's part
run here with `sh`. The same against a real pytest in containers:
tests/test_verifier_tests_integrity.py."""

from __future__ import annotations

import os
import subprocess

from tbscale.runner.build_times import BUILD_TIMES
from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.runner.verifier_reads import read_verifier
from tbscale.runner.verifier_tests import ABOVE, MAX_FILES, TESTS, changed_tests, named_tests, pytest_settings
from tbscale.tasks.model import VerifierSpec
from tbscale.types.guard import ToolRun

# DevEval's Python and C++ run-tests.sh (rese1f/terminal-bench-datasets), shortened
DEVEVAL = """set -e
cd /app
export PYTHONPATH=$(pwd)
if (pytest --cov=. --cov-report=json:unit_test_cov.json --json-report --json-report-file=unit_test_report.json unit_tests) > /app/unit_test.log 2>&1; then echo "ALL_PASSED" >> /app/unit_test.log; else echo "ALL_FAILED" >> /app/unit_test.log; fi
if (chmod +x acceptance_tests/test.sh;./acceptance_tests/test.sh) > /app/acceptance_test.log 2>&1; then echo "ALL_PASSED" >> /app/acceptance_test.log; else echo "ALL_FAILED" >> /app/acceptance_test.log; fi
source $TEST_DIR/setup-uv-pytest.sh
bash $TEST_DIR/run-uv-pytest.sh
"""
# LiveCodeBench Pro's: its tests were copied into the image at /app/tests
LCB = "set -euo pipefail\nexport PYTEST_DISABLE_PLUGIN_AUTOLOAD=1\npython -m pytest /app/tests/test_outputs.py --tb=short -rA\n"
# SWE-bench Pro's Harbor adapter: the test patch applied to the repository's test file, then run
SWE = """cd /app || cd /testbed || cd /workspace
cat << 'TEST_PATCH_EOF' | git apply -v --allow-empty 2>&1
diff --git a/test/units/utils/test_vars.py b/test/units/utils/test_vars.py
--- a/test/units/utils/test_vars.py
+++ b/test/units/utils/test_vars.py
TEST_PATCH_EOF
python -m pytest test/units/utils/test_vars.py::TestVariableUtils::test_combine_vars_replace -v
"""
DEVEVAL_CPP = """cd /app
if (make test -f makefile_test) > /app/unit_test.log 2>&1; then echo "ALL_PASSED" >> /app/unit_test.log; else echo "ALL_FAILED" >> /app/unit_test.log; fi
if (chmod +x acceptance_tests/test.sh;./acceptance_tests/test.sh) > /app/acceptance_test.log 2>&1; then echo "ALL_PASSED" >> /app/acceptance_test.log; else echo "ALL_FAILED" >> /app/acceptance_test.log; fi
"""
AIDER = "cd /app\npytest .\n"  # Aider Polyglot's Python tasks: the whole project, solution and all


def test_the_tests_the_scripts_run_where_the_agent_works():
    assert named_tests([DEVEVAL], "/tests") == ["p:/app/unit_tests\t/app", "s:/app/acceptance_tests/test.sh\t/app"]
    assert named_tests([LCB], "/tests") == ["p:/app/tests/test_outputs.py\t"]
    # DevEval's C++ tasks: the makefile for tests their make is given (its tests are found in the image)
    assert named_tests([DEVEVAL_CPP], "/tests") == ["m:/app/makefile_test", "s:/app/acceptance_tests/test.sh\t/app"]
    assert named_tests(["make -C /app -f Makefile test\nmake -f /tests/makefile_test\n"], "/tests") == []
    # the compilers make starts for a makefile for tests are digested with the programs the scripts name
    assert {"g++", "cc"} <= set(read_verifier(VerifierSpec(command=DEVEVAL_CPP.replace("\n", "; ")), tests_dirs=[]).names)
    assert "g++" not in read_verifier(VerifierSpec(command=DEVEVAL.replace("\n", "; ")), tests_dirs=[]).names
    # the tests the verifier copies in, the project itself, a patched file: none
    assert named_tests([SWE], "/tests") == []
    # pytest given the folder it runs in: its settings and conftest.py files only (`c:`)
    assert named_tests([AIDER], "/tests") == ["c:/app\t/app"]
    assert named_tests(["python3 -m pytest -q ./ -v\ncd /srv && pytest /srv\n"], "/tests") == ["c:\t", "c:/srv\t/srv"]
    assert named_tests(["pytest /tests/test_outputs.py -rA\nbash /tests/run.sh\n"], "/tests") == []
    # a script that patches the repository runs its tests (which a solution may extend), but its runner is held
    assert named_tests([SWE.replace("python -m pytest", "./tests/runtests.py --parallel 1 utils_tests; pytest")]) == [
        "s:/app/tests/runtests.py\t/app", "s:/testbed/tests/runtests.py\t/testbed", "s:/workspace/tests/runtests.py\t/workspace"]
    # test ids that are no path (SWE-bench Pro's Go and JS ids handed to pytest)
    assert named_tests(['python -m pytest "TestDB" "TestPersistence" is a\n']) == []
    # where it starts (the workdir), a file's test id, options with values, doctests
    assert named_tests(["pytest -k slow -p no:cacheprovider tests/test_a.py::test_b unit_tests\n"]) == ["p:tests/test_a.py\t", "p:unit_tests\t"]
    assert named_tests(["pytest --doctest-modules src tests\n"]) == []
    # a script run by path whose path says test; one that does not is the solution's to write
    assert named_tests(["cd /app\nbash scripts/run_tests.sh\n./solve.sh\nsh ./check.sh\npython3 calc.py\n"
                        "python3 tests/runtests.py -v\n"]) == ["s:/app/scripts/run_tests.sh\t/app", "s:/app/tests/runtests.py\t/app"]
    # the paths reach the guard through the verifier's reads
    reads = read_verifier(VerifierSpec(command=DEVEVAL.replace("\n", "; ")), tests_dirs=[])
    assert reads.tools["tests_here"] == ["p:/app/unit_tests\t/app", "s:/app/acceptance_tests/test.sh\t/app"]


def kinds(before: dict[str, str], after: dict[str, str], folders=("p:/app/unit_tests", "s:/app/acceptance_tests/test.sh"),
          read_before=None, read_after=None):
    entries = changed_tests(before, after, read_before or {}, read_after or {}, {}, [(1, "printf x > /app/unit_tests/test_a.py")],
                            ToolRun(list(folders), "/app"))
    return [(e["kind"], e["paths"]) for e in entries]


def test_what_changed_in_the_tests_is_told():
    base = {"/app/unit_tests": "other", "/app/unit_tests/test_a.py": "a", "/app/unit_tests/test_b.py": "b",
            "/app/acceptance_tests/test.sh": "s"}
    assert kinds(base, dict(base)) == []
    for change, path in (({"/app/unit_tests/test_a.py": "x"}, "/app/unit_tests/test_a.py"),  # written
                         ({"/app/unit_tests/conftest.py": "c"}, "/app/unit_tests/conftest.py"),  # added
                         ({"/app/acceptance_tests/test.sh": "other"}, "/app/acceptance_tests/test.sh")):  # a link
        assert kinds(base, {**base, **change}) == [("tests_written", [path])], change
    removed = {k: v for k, v in base.items() if k != "/app/unit_tests/test_b.py"}
    assert kinds(base, removed) == [("tests_written", ["/app/unit_tests/test_b.py"])]
    # a flood of files hides nothing: a folder with more than the shell lists is a finding
    assert kinds(base, {**base, "/app/unit_tests": "many"}) == [("tests_written", ["/app/unit_tests/"])]
    # absent or empty at the baseline, the tests are the agent's to write (DevEval's unit-testing tasks)
    assert kinds({"/app/unit_tests": "-", "/app/acceptance_tests/test.sh": "-"},
                 {"/app/unit_tests": "other", "/app/unit_tests/test_a.py": "a", "/app/acceptance_tests/test.sh": "s"}) == []
    assert kinds({"/app/unit_tests": "other"}, {"/app/unit_tests": "other", "/app/unit_tests/test_a.py": "a"}) == []
    # a compiled test program run by path is the build's to remake
    assert kinds({"/app/build/run_tests": "binary"}, {"/app/build/run_tests": "x"}, folders=("s:/app/build/run_tests",)) == []
    # a relative line is the workdir's
    assert kinds({"/app/t/test_a.py": "a"}, {"/app/t/test_a.py": "b"}, folders=("p:t/test_a.py",)) == [
        ("tests_written", ["/app/t/test_a.py"])]


def test_the_guard_shell_lists_the_tests_and_their_files(tmp_path):
    (tmp_path / "unit_tests" / "__pycache__").mkdir(parents=True)
    (tmp_path / "unit_tests" / "test_a.py").write_text("def test_a():\n    assert False\n")
    (tmp_path / "unit_tests" / "__pycache__" / "test_a.cpython-311.pyc").write_bytes(b"x")
    (tmp_path / "unit_tests" / ".hypothesis" / "examples").mkdir(parents=True)  # what running the tests leaves
    (tmp_path / "unit_tests" / ".hypothesis" / "examples" / "e").write_bytes(b"x")
    (tmp_path / "unit_tests" / ".coverage").write_bytes(b"x")
    (tmp_path / "unit_tests" / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "many").mkdir()
    for i in range(MAX_FILES + 1):
        (tmp_path / "many" / f"test_{i}.py").write_text("")
    (tmp_path / "run_tests").write_bytes(b"\x7fELF\x02\x01\x01")  # a test program the build made
    env = {"PATH": "/usr/bin:/bin", "TBSCALE_TESTS_HERE": "p:unit_tests\ns:many\ns:absent/test.sh\ns:run_tests",
           "TBSCALE_WORKDIR": str(tmp_path)}
    found = parse_snapshot(subprocess.run(["sh", "-c", PROJECT + TESTS], capture_output=True, text=True, check=True,
                                          env=env, timeout=60).stdout)["tests_here"]
    configs = {f"{str(d).rstrip('/')}/{c}": "-" for d in (tmp_path / "unit_tests", *tmp_path.parents) for c in ABOVE}
    configs[f"{tmp_path}/unit_tests/pytest.ini"] = found[f"{tmp_path}/unit_tests/pytest.ini"]
    assert found == {f"{tmp_path}/unit_tests": "other", f"{tmp_path}/unit_tests/test_a.py": found[f"{tmp_path}/unit_tests/test_a.py"],
                     f"{tmp_path}/many": "many", f"{tmp_path}/absent/test.sh": "-", f"{tmp_path}/run_tests": "binary", **configs, f"{tmp_path}/pytest.ini": "-",
                     f"{tmp_path}/pyproject.toml": found[f"{tmp_path}/pyproject.toml"], **{f"{tmp_path}/{c}": "-" for c in ABOVE if c not in ("pytest.ini", ".pytest.ini", "pyproject.toml")},
                     f"{tmp_path}/.pytest.ini": "-"}
    assert len(found[f"{tmp_path}/pyproject.toml"]) == 64
    assert len(found[f"{tmp_path}/unit_tests/test_a.py"]) == 64


def test_what_pytest_reads_of_its_settings_where_it_runs_the_named_tests():
    assert pytest_settings("/app/pytest.ini", b"") == {"settings": "{}"}  # pytest takes it, empty or not
    # a mark only lets a test name it (a gold patch of SWE-bench Pro adds one to qutebrowser's pytest.ini)
    assert pytest_settings("/app/pytest.ini", b"[pytest]\nmarkers =\n    slow: s\n") == {"settings": "{}"}
    assert pytest_settings("/app/pyproject.toml", b"[project]\nname = 'x'\n") == {"settings": None}
    assert pytest_settings("/app/pyproject.toml", b"[tool.pytest.ini_options]\naddopts = '-x'\n")["settings"] == '{"addopts": "-x"}'
    assert pytest_settings("/app/tox.ini", b"[tox]\nenvlist = py\n") == {"settings": None}
    assert pytest_settings("/app/setup.cfg", b"[tool:pytest]\naddopts = --ignore=t\n") == {"settings": '{"addopts": "--ignore=t"}'}
    base = {"/app/unit_tests": "other", "/app/unit_tests/test_a.py": "a", "/app/pyproject.toml": "p0", "/app/pytest.ini": "-"}
    # a pytest.ini added where pytest looks (it ignores the failing test), a pyproject.toml's pytest section
    assert kinds(base, {**base, "/app/pytest.ini": "i"}, read_after={"/app/pytest.ini": {"settings": "[pytest]\naddopts = --ignore=x"}}) == [
        ("test_config_planted", ["/app/pytest.ini"])]
    assert kinds(base, {**base, "/app/pyproject.toml": "p1"}, read_before={"/app/pyproject.toml": {"settings": None}},
                 read_after={"/app/pyproject.toml": {"settings": '{"ini_options": {"addopts": "--ignore=x"}}'}}) == [
        ("test_config_planted", ["/app/pyproject.toml"])]
    # the project's own changes to pyproject.toml (a dependency) are the solution's; a script's tests are not pytest's
    assert kinds(base, {**base, "/app/pyproject.toml": "p1"}, read_before={"/app/pyproject.toml": {"settings": None}},
                 read_after={"/app/pyproject.toml": {"settings": None}}) == []
    # a conftest.py added above the tests: pytest loads it (one that deselects the failing test passed unseen)
    assert kinds(base, {**base, "/app/conftest.py": "c"}) == [("test_config_planted", ["/app/conftest.py"])]
    assert kinds(base, {**base, "/app/pytest.ini": "i"}, folders=("s:/app/unit_tests",),
                 read_after={"/app/pytest.ini": {"settings": ""}}) == []


def test_pytest_given_the_folder_it_runs_in_holds_its_settings_and_conftest_files_not_the_project():
    """Aider Polyglot's Python tasks copy the tests into /app and run `python3 -m pytest .` there: an
    `/app/conftest.py` whose import exits 0, or a `pytest.ini` with `addopts = --co` (pytest only
    collects, and exits 0), passed 4 of 4 of them with nothing recorded before 2026-12-07."""
    base = {"/app": "other", "/app/conftest.py": "-", "/app/pytest.ini": "-", "/conftest.py": "-",
            "/app/sub/conftest.py": "k"}
    folders = ("c:/app\t/app",)
    assert kinds(base, {**base, "/app/conftest.py": "c"}, folders=folders) == [("test_config_planted", ["/app/conftest.py"])]
    assert kinds(base, {**base, "/app/sub/conftest.py": "x"}, folders=folders) == [
        ("test_config_planted", ["/app/sub/conftest.py"])]
    assert kinds(base, {**base, "/app/pytest.ini": "i"}, folders=folders,
                 read_after={"/app/pytest.ini": {"settings": '{"addopts": "--co"}'}}) == [
        ("test_config_planted", ["/app/pytest.ini"])]
    # the project's own files, the solution among them, are not held
    assert kinds(base, {**base, "/app/affine_cipher.py": "s", "/app/helpers.py": "h"}, folders=folders) == []


def test_the_guard_shell_lists_the_conftest_files_of_the_folder_pytest_is_given(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "conftest.py").write_text("")
    (tmp_path / ".venv" / "lib").mkdir(parents=True)  # pytest does not collect there (norecursedirs)
    (tmp_path / ".venv" / "lib" / "conftest.py").write_text("")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "conftest.py").write_text("")
    (tmp_path / "solution.py").write_text("x = 1\n")
    env = {"PATH": "/usr/bin:/bin", "TBSCALE_TESTS_HERE": "c:\t", "TBSCALE_WORKDIR": str(tmp_path)}
    found = parse_snapshot(subprocess.run(["sh", "-c", PROJECT + TESTS], capture_output=True, text=True, check=True,
                                          env=env, timeout=60).stdout)["tests_here"]
    assert found[str(tmp_path)] == "other" and len(found[f"{tmp_path}/pkg/conftest.py"]) == 64
    assert found[f"{tmp_path}/conftest.py"] == "-" and found["/conftest.py"] == "-"
    assert f"{tmp_path}/solution.py" not in found and not any("/.venv/" in p or "node_modules" in p for p in found)


def test_after_the_sweep_pytests_compiled_tests_are_removed(tmp_path):
    """pytest takes a compiled test for its source when the time and size it records match: the
    sweep's check removes them (and the compiled conftest.py files above), pytest compiles them again."""
    cache = tmp_path / "unit_tests" / "__pycache__"
    cache.mkdir(parents=True)
    (cache / "test_a.cpython-311-pytest-8.3.3.pyc").write_bytes(b"x")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "conftest.cpython-311-pytest-8.3.3.pyc").write_bytes(b"x")
    (tmp_path / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"x")  # the solution's: not the tests'
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__pycache__").mkdir()
    (tmp_path / "tests" / "__pycache__" / "test_b.cpython-311-pytest-8.3.3.pyc").write_bytes(b"x")
    env = {"PATH": "/usr/bin:/bin", "TBSCALE_TESTS_HERE": "p:unit_tests\np:tests/test_b.py", "TBSCALE_WORKDIR": str(tmp_path)}
    subprocess.run(["sh", "-c", PROJECT + TESTS], check=True, env=env, timeout=60)  # the baseline removes nothing
    assert (cache / "test_a.cpython-311-pytest-8.3.3.pyc").exists()
    subprocess.run(["sh", "-c", PROJECT + TESTS], check=True, env={**env, "TBSCALE_SINCE": "1"}, timeout=60)
    assert not cache.exists() and not (tmp_path / "tests" / "__pycache__" / "test_b.cpython-311-pytest-8.3.3.pyc").exists()
    assert sorted(p.name for p in (tmp_path / "__pycache__").iterdir()) == ["calc.cpython-311.pyc"]


def test_what_the_tests_read_is_held_with_them():
    """The expected outputs a test names, and the tests a makefile for tests compiles, found by the
    shell (`held:` keys): changed, removed or no longer where the tests read them, they are told."""
    base = {"held:/app/expected_outputs": "data", "/app/expected_outputs": "other", "/app/expected_outputs/1.txt": "e1",
            "held:/app/unit_tests": "make", "/app/unit_tests": "other", "/app/unit_tests/test_a.cpp": "t",
            "held:/app/expected.txt": "data", "/app/expected.txt": "x"}
    assert kinds(base, dict(base), folders=("m:/app/makefile_test",)) == []
    for change, path in (({"/app/expected_outputs/1.txt": "mine"}, "/app/expected_outputs/1.txt"),
                         ({"/app/unit_tests/test_b.cpp": "b"}, "/app/unit_tests/test_b.cpp"),
                         ({"/app/expected.txt": "y"}, "/app/expected.txt")):
        assert kinds(base, {**base, **change}, folders=()) == [("tests_written", [path])], change
    # not found where the tests read it now (the script was changed to read another folder): all of it is gone
    gone = {k: v for k, v in base.items() if k != "held:/app/expected_outputs"}
    assert kinds(base, gone, folders=()) == [("tests_written", ["/app/expected_outputs/1.txt"])]
    # found only after the agent phase (the agent wrote the test that names it): the agent's
    assert kinds({}, base, folders=()) == []
    # the test library the makefile's tests link, changed or removed; one installed is not a finding
    lib = {"lib:/usr/lib/x86_64-linux-gnu/libgtest_main.a": "g", "lib:/usr/include/gtest/gtest.h": "h"}
    assert kinds(lib, {**lib, "lib:/usr/lib/x86_64-linux-gnu/libgtest_main.a": "mine"}, folders=()) == [
        ("test_library_changed", ["/usr/lib/x86_64-linux-gnu/libgtest_main.a"])]
    assert kinds(lib, {"lib:/usr/lib/x86_64-linux-gnu/libgtest_main.a": "g"}, folders=()) == [
        ("test_library_changed", ["/usr/include/gtest/gtest.h"])]
    assert kinds({}, lib, folders=()) == [] and kinds(lib, {**lib, "lib:/usr/local/lib/libgtest.a": "new"}, folders=()) == []
    # but not another form of a library the folder had: the linker takes a `.so` before the `.a`
    assert kinds(lib, {**lib, "lib:/usr/lib/x86_64-linux-gnu/libgtest_main.so": "mine"}, folders=()) == [
        ("test_library_changed", ["/usr/lib/x86_64-linux-gnu/libgtest_main.so"])]


def test_the_shell_finds_what_the_tests_read(tmp_path):
    app = tmp_path / "app"
    (app / "acceptance_tests").mkdir(parents=True)
    (app / "acceptance_tests" / "test.sh").write_text(
        'EXPECTED_DIR="./expected_outputs"\ncd acceptance_tests\ndiff out ../golden/a.txt\n'
        'cmp x expected_missing/1.txt\ncat ../expected.txt /logs/expected\n')
    (app / "expected_outputs").mkdir()
    (app / "expected_outputs" / "1.txt").write_text("3.142\n")
    (app / "golden").mkdir()
    (app / "golden" / "a.txt").write_text("a\n")
    (app / "expected.txt").write_text("e\n")
    (app / "unit_tests").mkdir()
    (app / "unit_tests" / "test_a.cpp").write_text('TEST(A, B) { std::ifstream in("testdata/in.txt"); }\n')
    (app / "testdata").mkdir()  # the data a makefile's test reads, from where make runs it
    (app / "testdata" / "in.txt").write_text("3\n")
    (app / "unit_tests" / "test_a.o").write_bytes(b"\x7fELFo")  # compiled from the source beside it
    (app / "unit_tests" / "helper.o").write_bytes(b"\x7fELFo")  # no source beside it: shipped as it is
    (app / "unit_tests" / "test_a.gcno").write_bytes(b"g")
    (app / "obj").mkdir()  # objects kept apart from their sources (DevEval's graph-cpp)
    (app / "obj" / "test_a.o").write_bytes(b"\x7fELFo")
    (app / "obj" / "main.o").write_bytes(b"\x7fELFo")
    (app / "tests_other").mkdir()  # a test folder the makefile does not name
    (app / "tests_other" / "t.cpp").write_text("")
    (app / "makefile_test").write_text("TEST_DIR = ./unit_tests\ntest: run_tests\n\t./run_tests\n")
    (app / "run_tests").write_text("#!/bin/sh\nexit 0\n")
    os.utime(app / "run_tests", (4_000_000_000, 4_000_000_000))  # dated in the future: make takes it as built
    env = {"PATH": "/usr/bin:/bin", "TBSCALE_TESTS_HERE": f"m:makefile_test\ns:{app}/acceptance_tests/test.sh\t{app}",
           "TBSCALE_WORKDIR": str(app), "TBSCALE_TESTS": "/tests"}
    # with the seal's part that sets a time set forward back (build_times.BUILD_TIMES)
    run = lambda **more: parse_snapshot(subprocess.run(["sh", "-c", PROJECT + TESTS + BUILD_TIMES], capture_output=True, text=True,  # noqa: E731
                                                       check=True, env={**env, **more}, timeout=60).stdout)
    found = run()["tests_here"]
    held = {k: v for k, v in found.items() if k.startswith("held:")}
    assert held == {f"held:{app}/expected_outputs": "data", f"held:{app}/golden": "data", f"held:{app}/expected.txt": "data",
                    f"held:{app}/unit_tests": "make", f"held:{app}/testdata": "data"}
    assert {k for k in found if k.startswith(f"{app}/unit_tests/")} == {f"{app}/unit_tests/test_a.cpp"}
    assert len(found[f"{app}/expected_outputs/1.txt"]) == len(found[f"{app}/golden/a.txt"]) == 64
    assert (app / "unit_tests" / "test_a.o").exists() and "build_times_forward" not in run()  # the baseline removes nothing
    os.utime(app / "unit_tests" / "test_a.cpp", (1_600_000_000, 1_600_000_000))
    after = run(TBSCALE_SINCE="1700000000")
    assert (app / "unit_tests" / "test_a.cpp").stat().st_mtime > 1_700_000_000  # touched: what make built from it is older
    assert not (app / "unit_tests" / "test_a.o").exists() and (app / "unit_tests" / "helper.o").exists()
    assert not (app / "obj" / "test_a.o").exists() and (app / "obj" / "main.o").exists()
    assert after["build_times_forward"] == [f"{app}/run_tests"] and (app / "run_tests").stat().st_mtime == 1_700_000_000
