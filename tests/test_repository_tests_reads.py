"""Where a verifier script patches a repository and tests it (SWE-bench style), what of the
repository the guard holds (runner/repository_tests.py), with no engine: the scripts read, the
guard shell run here, the findings. Against a real pytest in a container:
tests/test_repository_tests_integrity.py."""

from __future__ import annotations

import subprocess

from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.runner.repository_tests import (MAX_FILES, READ, REPOSITORY, repository_changed, repository_folders,
                                             settings_file)
from tbscale.types.guard import ToolRun

BASE = "0123456789abcdef0123456789abcdef01234567"
# terminal-bench's SWE-bench Verified adapter: the test files checked out, the test patch applied
ADAPTER = f"""#!/bin/bash
cd /testbed
git checkout {BASE} pkg/tests/test_core.py
echo 'diff --git a/pkg/tests/test_core.py b/pkg/tests/test_core.py
--- a/pkg/tests/test_core.py
+++ b/pkg/tests/test_core.py
' > /tmp/test_patch.diff
git apply /tmp/test_patch.diff
pytest -rA pkg/tests/test_core.py || true
git checkout {BASE} pkg/tests/test_core.py
"""
# SWE-bench Pro as Harbor tasks: the first of three folders that exists, the patch piped in, no checkout
PRO = """#!/bin/bash
cd /app || cd /testbed || cd /workspace
cat << 'TEST_PATCH_EOF' | git apply -v --allow-empty 2>&1
diff --git a/test/units/test_vars.py b/test/units/test_vars.py
TEST_PATCH_EOF
python -m pytest "test/units/test_vars.py::TestVars::test_one" -v 2>&1 | tee test_output.log
"""


def test_the_repository_the_scripts_patch_and_what_they_reset():
    assert repository_folders([ADAPTER], "/tests") == [
        "r:/testbed", "c:pkg/tests/test_core.py", "a:.", "a:pkg", "a:pkg/tests"]
    assert repository_folders([PRO], "/tests") == [
        "r:/app", "r:/testbed", "r:/workspace", "t:test/units/test_vars.py", "a:.", "a:test", "a:test/units"]
    assert repository_folders(["cd /app\npytest tests/test_x.py\n"], "/tests") == []  # nothing patched


def _snapshot(tmp_path, lines: str) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "TBSCALE_REPOSITORY_TESTS": lines, "TBSCALE_WORKDIR": str(tmp_path)}
    out = subprocess.run(["sh", "-c", PROJECT + REPOSITORY], capture_output=True, text=True, check=True, env=env,
                         timeout=60).stdout
    return parse_snapshot(out).get("repository_tests", {})


def test_the_guard_shell_digests_what_the_rules_read(tmp_path):
    repo = tmp_path / "repo"
    files = ["pkg/core.py", "pkg/tests/test_core.py", "pkg/tests/helpers.py", "pkg/conftest.py", "tests/data.json",
             "pkg/tests/__pycache__/helpers.cpython-311.pyc", ".git/config", "bin/test", "pkg/tests/setup.py",
             "vendored/pkg/setup.cfg", "setup.cfg"]
    for rel in files:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(rel)
    found = _snapshot(tmp_path, "r:repo\nc:pkg/tests/test_core.py\na:.\na:pkg\na:pkg/tests\nr:absent\n")
    digested = {p.removeprefix(f"{repo}/") for p, d in found.items() if len(d) == 64}
    # the tests, their helpers, conftest.py, the runner; settings files where pytest looks, from the tests up
    assert digested == {"pkg/tests/test_core.py", "pkg/tests/helpers.py", "pkg/conftest.py", "bin/test",
                        "pkg/tests/setup.py", "setup.cfg"}
    assert found[str(repo)] == "other"
    assert {p for p, d in found.items() if d == "-"} == {f"{repo}/{a}{n}" for a in ("", "pkg/", "pkg/tests/")
                                                         for n in READ} - {f"{repo}/{r}" for r in digested}
    (repo / "many").mkdir()
    for i in range(MAX_FILES + 1):
        (repo / "many" / f"test_{i}.py").write_text("")
    assert _snapshot(tmp_path, "r:repo\n")[str(repo)] == "many"


def _changed(before, after, folders, read_before=None, read_after=None):
    entries = repository_changed(before, after, read_before or {}, read_after or {}, {}, [],
                                 ToolRun(list(folders), "/"))
    return {e["kind"]: e["paths"] for e in entries}


def test_what_the_agent_phase_changed_there_is_told():
    root = "/testbed"
    base = {root: "other", f"{root}/pkg/tests/test_core.py": "t0", f"{root}/pkg/tests/helpers.py": "h0",
            f"{root}/setup.cfg": "s0", f"{root}/pkg/conftest.py": "-"}
    after = {**base, f"{root}/pkg/tests/test_core.py": "t1", f"{root}/pkg/tests/helpers.py": "h1",
             f"{root}/pkg/conftest.py": "c1", f"{root}/pkg/tests/pkg.py": "m1", f"{root}/pkg/tests/test_mine.py": "x",
             f"{root}/setup.cfg": "s1"}
    settings_before = {f"{root}/setup.cfg": {"text": "[metadata]\nname = pkg\n"}}
    settings_after = {f"{root}/setup.cfg": {"text": "[metadata]\nname = pkg\n[tool:pytest]\naddopts = -p no:python\n"}}
    adapter = repository_folders([ADAPTER], "/tests")
    assert _changed(base, after, adapter, settings_before, settings_after) == {
        "test_config_planted": ["pkg/conftest.py", "setup.cfg"],
        "tests_written": ["pkg/tests/helpers.py", "pkg/tests/pkg.py"]}  # test_core.py: checked out again
    # where nothing is checked out, the test patch's own file, edited, is what the tests run
    pro = ["r:/testbed", "t:pkg/tests/test_core.py", "a:."]
    assert _changed(base, {**base, f"{root}/pkg/tests/test_core.py": "t1"}, pro) == {
        "tests_written": ["pkg/tests/test_core.py"]}
    # the project's own settings (a dependency), a plugin declared, the repository gone, too many files
    assert _changed(base, after | {f"{root}/pkg/conftest.py": "-", f"{root}/pkg/tests/helpers.py": "h0",
                                   f"{root}/pkg/tests/pkg.py": "-"}, adapter, settings_before,
                    {f"{root}/setup.cfg": {"text": "[metadata]\nname = pkg\n[options]\ninstall_requires = x\n"}}) == {}
    assert _changed({**base, f"{root}/setup.py": "p0"}, {**base, f"{root}/setup.py": "p1"}, adapter,
                    {f"{root}/setup.py": {"text": "setup()"}},
                    {f"{root}/setup.py": {"text": "setup(entry_points={'pytest11': ['x = pkg.x']})"}}) == {
        "test_plugin_added": ["setup.py"]}
    assert _changed(base, {root: "many"}, adapter) == {"tests_written": [root]}
    assert _changed({root: "many"}, {root: "many"}, adapter) == {}  # more than can be held at the baseline


def test_what_is_read_again_from_outside():
    assert settings_file("/testbed/setup.cfg") and settings_file("/testbed/pkg/tests/pytest.ini")
    assert settings_file("/testbed/setup.py")  # the package's: a plugin it declares is loaded
    assert not settings_file("/testbed/tests/data/packages/x/setup.py")  # test data
    assert not settings_file("/testbed/pkg/core.py")
