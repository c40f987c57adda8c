"""What the verifier's cargo, cmake and make read (runner/cargo_project.py, runner/cmake_project.py),
and the times the sweep sets where they build (runner/build_times.py), without an engine: the
folders read off a test script, Cargo.toml read for what decides the build, the findings from two
looks, and the guard shell's parts run here with `sh`. The same against
real cargo and cmake in containers: tests/test_cargo_and_cmake_integrity.py."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tbscale.runner.build_times import BUILD_TIMES
from tbscale.runner.build_tools import TOOLS
from tbscale.runner.cargo_project import CARGO, cargo_changed, cargo_folders, cargo_settings
from tbscale.runner.cmake_project import CMAKE, cmake_changed, cmake_folders
from tbscale.runner.go_project import GO
from tbscale.runner.guard_shell import PROJECT, parse_snapshot
from tbscale.runner.make_project import MAKE, make_changed, make_folders, makefile_rules
from tbscale.runner.npm_project import NPM
from tbscale.runner.verifier_reads import read_verifier
from tbscale.tasks.model import VerifierSpec
from tbscale.types.guard import ToolRun

# The shapes of terminal-bench's Aider Polyglot Rust and C++ test scripts (rese1f/terminal-bench-datasets)
RUST = """set -Eeuo pipefail
cd /app
if [ -f Cargo.toml ]; then
    cargo add regex 2>/dev/null || true
    cargo generate-lockfile 2>/dev/null || true
fi
find $TEST_DIR -name "*test*.rs" -exec cp {} src/ \\; 2>/dev/null || echo none
if [ -f "Cargo.toml" ]; then
    cargo test --verbose
fi
"""
CPP = """set -Eeuo pipefail
cd /app
if [ -f "CMakeLists.txt" ]; then
    mkdir -p build && cd build
    if cmake .. && make; then
        find . -name "*test*" -executable -type f -exec {} \\;
    fi
fi
"""


def test_the_folders_cargo_cmake_and_make_run_in():
    assert cargo_folders([RUST], "/tests") == ["/app"]
    assert cargo_folders(["cargo --version", "cd /tests && cargo test"], "/tests") == []
    assert cargo_folders(["cd /repo || cd /testbed\ncargo +stable test --workspace -- --nocapture"]) == ["/repo", "/testbed"]
    assert cmake_folders([CPP], "/tests") == ["s:/app", "b:/app/build"]
    assert cmake_folders(["cmake -S src -B out && cd out && make -j2"]) == ["s:src", "b:out"]
    assert cmake_folders(["mkdir build; cd build; cmake -DX=1 -G 'Unix Makefiles' ..; make"]) == ["s:", "b:build"]
    # a build folder make does not run in: no makefile of it is read; `cmake --build` configures nothing
    assert cmake_folders(["cmake -B out . && cmake --build out"]) == ["s:"]
    assert cmake_folders(["cd /app && cmake --build build"]) == []


def test_the_verifier_reads_name_each_build_tool_and_the_programs_it_starts(tmp_path):
    assert len({t.tag for t in TOOLS}) == len(TOOLS) and len({t.env for t in TOOLS}) == len(TOOLS)
    (tmp_path / "test.sh").write_text(RUST + CPP)
    reads = read_verifier(VerifierSpec(tests_dirs=[tmp_path], command="bash /tests/test.sh"))
    # (the shared libraries' check, runner/shared_libraries.py, runs for every verifier with a script)
    assert reads.tools == {"cargo": ["/app"], "cmake": ["s:/app", "b:/app/build"], "shared_libraries": [":loader"],
                           "perl_path": [":perl"]}
    # what cargo and cmake's Makefiles start by name from PATH is digested with what the script runs
    assert {"cargo", "rustc", "rustdoc", "cc", "cmake", "make", "c++", "g++", "gcc"} <= set(reads.names)
    (tmp_path / "test.sh").write_text("cd /app && python3 -m pytest /tests\n")
    reads = read_verifier(VerifierSpec(tests_dirs=[tmp_path], command="bash /tests/test.sh"))
    # no build tool there; Python's first folders (runner/python_path.py) are asked for
    assert reads.tools == {"python_path": ["/app", ":env"], "shared_libraries": [":loader"], "perl_path": [":perl"]} \
        and "rustc" not in reads.names and "make" not in reads.names


def test_cargo_toml_is_read_for_what_decides_the_build():
    assert cargo_settings("/app/Cargo.toml", b'[package]\nname = "a"\nedition = "2021"\nversion = "0.1.0"\n') == {
        "build": {"package": {}}, "sources": []}
    doc = cargo_settings("/app/Cargo.toml", b"""[package]
name = "a"
autotests = false
build = "gen.rs"

[dependencies]
regex = "1"
evil = { path = "/tmp/evil" }

[target.'cfg(unix)'.dev-dependencies]
checker = { git = "https://example.com/checker" }

[[test]]
name = "t"
harness = false

[patch.crates-io]
regex = { path = "/tmp/regex" }
""")
    assert doc["build"]["package"] == {"autotests": False, "build": "gen.rs"}
    assert doc["build"]["test"] == [{"name": "t", "harness": False}]
    assert doc["sources"] == ["[dependencies] evil = {'path': '/tmp/evil'}",
                              "[patch] {'crates-io': {'regex': {'path': '/tmp/regex'}}}",
                              "[target.cfg(unix).dev-dependencies] checker = {'git': 'https://example.com/checker'}"]
    assert cargo_settings("/app/Cargo.toml", b"[package\nname =") == {"unreadable": True}


def test_what_cargo_reads_changed_is_told_by_kind():
    before = {"/root/.cargo/config.toml": "-", "/app/.cargo/config.toml": "-", "/app/Cargo.toml": "a",
              "/app/build.rs": "-", "/Cargo.toml": "-", "/app/rust-toolchain.toml": "-"}
    base = {"/app/Cargo.toml": cargo_settings("", b'[package]\nname = "a"\n')}

    def kinds(after: dict, cargo_toml: bytes | None = None) -> list[str]:
        read = {"/app/Cargo.toml": cargo_settings("", cargo_toml)} if cargo_toml else {}
        return [e["kind"] for e in cargo_changed(before, {**before, **after}, base, read, {}, [(1, "cmd")])]

    assert kinds({}) == []
    # the solution's own dependencies from the registry (the instruction names Cargo.toml)
    assert kinds({"/app/Cargo.toml": "b"}, b'[package]\nname = "a"\n[dependencies]\nregex = "1"\n') == []
    assert kinds({"/app/Cargo.toml": "b"}, b'[package]\nname = "a"\nautotests = false\n') == ["build_file_changed"]
    assert kinds({"/app/Cargo.toml": "b"}, b'[package]\nname = "a"\n[lib]\ntest = false\n') == ["build_file_changed"]
    assert kinds({"/app/Cargo.toml": "b"}, b"[package\n") == ["build_file_changed"]
    assert kinds({"/app/Cargo.toml": "b"}, b'[package]\nname = "a"\n[dev-dependencies]\nx = { path = "/x" }\n') == [
        "project_source_added"]
    assert kinds({"/app/.cargo/config.toml": "c"}) == ["installer_config_changed"]
    assert kinds({"/root/.cargo/config.toml": "c"}) == ["installer_config_changed"]
    assert kinds({"/app/rust-toolchain.toml": "c"}) == ["installer_config_changed"]
    assert kinds({"/app/build.rs": "d"}) == ["build_file_changed"]
    assert kinds({"/Cargo.toml": "e"}) == ["build_file_changed"]  # a workspace above takes the package in
    found = cargo_changed(before, {**before, "/app/build.rs": "d"}, base, {}, {}, [(3, "cat > build.rs")])
    assert found[0]["paths"] == ["/app/build.rs"] and found[0]["by_command"]["turn"] == 3
    # a package the agent made where cargo runs is the solution itself, as far as `cargo init` goes;
    # what keeps the verifier's tests from running, a build script and the settings still count
    fresh = {**before, "/app/Cargo.toml": "-"}
    made = {**fresh, "/app/Cargo.toml": "a"}
    init = {"/app/Cargo.toml": cargo_settings("", b'[package]\nname = "a"\nedition = "2021"\n[dependencies]\nrand = "0.8"\n')}
    assert cargo_changed(fresh, made, {}, init, {}, [(1, "cargo init")]) == []
    skip = {"/app/Cargo.toml": cargo_settings("", b'[package]\nname = "a"\nautotests = false\n')}
    found = cargo_changed(fresh, made, {}, skip, {}, [(1, "cmd")])
    assert [e["kind"] for e in found] == ["build_file_changed"] and "/app/Cargo.toml (added: package)" in found[0]["detail"]
    assert [e["kind"] for e in cargo_changed(fresh, {**made, "/app/build.rs": "b"}, {}, init, {},
                                             [(1, "cmd")])] == ["build_file_changed"]
    assert [e["kind"] for e in cargo_changed(fresh, {**made, "/app/.cargo/config.toml": "c"}, {}, init, {},
                                             [(1, "cmd")])] == ["installer_config_changed"]


def test_what_cmake_and_make_read_changed_is_told_by_kind():
    before = {"/app/CMakeLists.txt": "a", "/app/build/GNUmakefile": "-", "/app/build/makefile": "-"}

    def kinds(after: dict) -> list[str]:
        return [e["kind"] for e in cmake_changed(before, {**before, **after}, {}, {}, {}, [(1, "cmd")])]

    assert kinds({}) == []
    assert kinds({"/app/CMakeLists.txt": "b"}) == ["build_file_changed"]
    assert kinds({"/app/build/GNUmakefile": "c"}) == ["build_file_changed"]
    assert kinds({"/app/cmake/flags.cmake": "d"}) == ["build_file_changed"]
    # a project the agent made (no CMakeLists.txt at the baseline) is the solution itself
    fresh = {**before, "/app/CMakeLists.txt": "-"}
    made = {**fresh, "/app/CMakeLists.txt": "a", "/app/cmake/flags.cmake": "b", "/app/src/CMakeLists.txt": "c"}
    assert cmake_changed(fresh, made, {}, {}, {}, [(1, "cmd")]) == []
    assert [e["kind"] for e in cmake_changed(fresh, {**made, "/app/build/GNUmakefile": "d"}, {}, {}, {},
                                             [(1, "cmd")])] == ["build_file_changed"]


@pytest.mark.parametrize("tool", ["cargo", "cmake"])
def test_the_guard_shell_lists_what_they_read(tmp_path, tool):
    app, home = tmp_path / "app", tmp_path / "home"
    (home / ".cargo").mkdir(parents=True)
    (app / "src").mkdir(parents=True)
    (app / "Cargo.toml").write_text('[package]\nname = "a"\n')
    (home / ".cargo" / "config.toml").write_text("[build]\n")
    (app / "CMakeLists.txt").write_text("project(a)\n")
    (app / "cmake").mkdir()
    (app / "cmake" / "flags.cmake").write_text("set(X 1)\n")
    # what an honest agent's own `cmake .. && make` leaves in the build folder is cmake's
    (app / "build" / "CMakeFiles").mkdir(parents=True)
    (app / "build" / "cmake_install.cmake").write_text("# generated\n")
    (app / "build" / "CMakeFiles" / "x.cmake").write_text("# generated\n")
    (app / "build" / "GNUmakefile").write_text("all:\n\t@true\n")
    folders = {"cargo": "\n/tests", "cmake": "s:\nb:build"}[tool]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), f"TBSCALE_{tool.upper()}": folders, "TBSCALE_WORKDIR": str(app)}
    out = subprocess.run(["sh", "-c", PROJECT + CARGO + CMAKE], capture_output=True, text=True, check=True, env=env,
                         timeout=60)
    found = parse_snapshot(out.stdout)[tool]
    if tool == "cmake":  # a build in the source folder itself (`cmake . && make`): its files are still read
        env["TBSCALE_CMAKE"] = "s:\nb:"
        inside = parse_snapshot(subprocess.run(["sh", "-c", PROJECT + CMAKE], capture_output=True, text=True,
                                               check=True, env=env, timeout=60).stdout)["cmake"]
        assert f"{app}/CMakeLists.txt" in inside and f"{app}/cmake/flags.cmake" in inside
        assert f"{app}/build/cmake_install.cmake" not in inside
        # a source folder with no project yet: its CMakeLists.txt is listed as absent
        env["TBSCALE_CMAKE"] = "s:new\nb:new/build"
        empty = parse_snapshot(subprocess.run(["sh", "-c", PROJECT + CMAKE], capture_output=True, text=True,
                                              check=True, env=env, timeout=60).stdout)["cmake"]
        assert empty == {f"{app}/new/CMakeLists.txt": "-", f"{app}/new/build/GNUmakefile": "-",
                         f"{app}/new/build/makefile": "-"}
    if tool == "cargo":
        assert len(found[f"{app}/Cargo.toml"]) == 64 and len(found[f"{home}/.cargo/config.toml"]) == 64
        assert found[f"{app}/build.rs"] == "-" and found[f"{app}/.cargo/config.toml"] == "-"
        # every Cargo.toml and .cargo/config.toml from the folder up to /, once for each folder
        assert {"/Cargo.toml", "/.cargo/config.toml", "/tests/Cargo.toml"} <= set(found)
    else:
        assert sorted(found) == [f"{app}/CMakeLists.txt", f"{app}/build/GNUmakefile", f"{app}/build/makefile",
                                 f"{app}/cmake/flags.cmake"]
        assert found[f"{app}/build/makefile"] == "-" and len(found[f"{app}/build/GNUmakefile"]) == 64


@pytest.mark.parametrize("script, key, shell, read", [
    ("cargo test", "cargo", CARGO, "Cargo.toml"),
    ("go test ./...", "go", GO, "go.mod"),
    ("npm test", "npm", NPM, "package.json")], ids=["cargo", "go", "npm"])
def test_a_tool_the_script_runs_where_it_starts_is_read_in_the_workdir(tmp_path, script, key, shell, read):
    # A script that runs the tool without a `cd` runs it in the workdir: the one folder is "", and
    # its block still runs (it once took the empty list for none).
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(f"#!/bin/bash\n{script}\n")
    reads = read_verifier(VerifierSpec(tests_dirs=[tests], command="bash /tests/test.sh"))
    folders = reads.npm if key == "npm" else reads.tools[key]
    assert folders == [""]
    (tmp_path / read).write_text("x\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), f"TBSCALE_{key.upper()}": "\n".join(folders),
           "TBSCALE_WORKDIR": str(tmp_path)}
    out = subprocess.run(["sh", "-c", PROJECT + shell], capture_output=True, text=True, check=True, env=env, timeout=60)
    assert len(parse_snapshot(out.stdout)[key][f"{tmp_path}/{read}"]) == 64


@pytest.mark.parametrize("clock", ["fraction", "second"])
def test_the_sweep_touches_what_the_agent_changed_where_they_build_and_undates_the_future(tmp_path, clock):
    # runner/build_times.py's shell here with `sh`: `fraction` as GNU find's -newerct takes the
    # baseline's clock, `second` as an environment without it (whole seconds, from stat)
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "untouched.rs").write_text("// from the image\n")
    os.utime(app / "src" / "untouched.rs", (1_500_000_000, 1_500_000_000))
    was = os.stat(app / "src" / "untouched.rs").st_ctime
    while time.time() < (int(was) + 1 if clock == "second" else was + 0.05):
        time.sleep(0.01)  # the agent phase starts after the image's files were written
    since = time.time() if clock == "fraction" else int(time.time())
    while time.time() < (since + 1 if clock == "second" else since + 0.05):
        time.sleep(0.01)
    for path, when in {"src/lib.rs": 1_577_836_800,  # the failing source, dated back to 2020
                       "src/new.rs": None, "target/debug/libanswer.rlib": None,
                       "target/debug/.fingerprint/answer/lib": 4_070_908_800,  # dated forward, to 2099
                       "build/answer.o": 4_070_908_800, "build/CMakeCache.txt": None}.items():
        (app / path).parent.mkdir(parents=True, exist_ok=True)
        (app / path).write_text("x\n")
        if when:
            os.utime(app / path, (when, when))
    # files written in bulk do not push one out (`zz.rs` comes last), and a link's target is touched
    (app / "src" / "bulk").mkdir()
    for i in range(5100):  # more than a cut-off of 5,000 would have kept
        (app / "src" / "bulk" / f"{i}.rs").write_text("\n")
    (tmp_path / "elsewhere.rs").write_text("x\n")
    os.utime(tmp_path / "elsewhere.rs", (1_577_836_800, 1_577_836_800))
    (app / "src" / "zz.rs").symlink_to(tmp_path / "elsewhere.rs")
    env = {"PATH": "/usr/bin:/bin", "TBSCALE_WORKDIR": str(app), "TBSCALE_SINCE": str(since),
           "TBSCALE_CARGO": "", "TBSCALE_CMAKE": "s:\nb:build"}
    out = subprocess.run(["sh", "-c", PROJECT + BUILD_TIMES], capture_output=True, text=True, check=True, env=env, timeout=60)
    snap = parse_snapshot(out.stdout)
    assert snap["build_times_forward"] == [f"{app}/build/answer.o", f"{app}/target/debug/.fingerprint/answer/lib"]
    # src/lib.rs, src/new.rs, the bulk and the link: not the build folders' files
    assert snap["build_sources_touched"] == 2 + 5100 + 1
    assert os.stat(app / "src" / "lib.rs").st_mtime >= since and os.stat(tmp_path / "elsewhere.rs").st_mtime >= since
    assert int(os.stat(app / "build" / "answer.o").st_mtime) == int(since)
    assert os.stat(app / "src" / "untouched.rs").st_mtime == 1_500_000_000
    assert os.stat(app / "target" / "debug" / "libanswer.rlib").st_mtime < os.stat(app / "src" / "lib.rs").st_mtime
    # the tool blocks unset: nothing
    env.pop("TBSCALE_CARGO"), env.pop("TBSCALE_CMAKE")
    assert subprocess.run(["sh", "-c", PROJECT + BUILD_TIMES], capture_output=True, text=True, env=env, timeout=60).stdout == ""


def test_what_the_verifiers_own_make_reads_and_what_changing_it_is():
    # DevEval's C++ tasks name their test makefile; GitHub-mined Harbor tasks run `make test` where they start
    assert make_folders(["cd /app\nmake test -f makefile_test"]) == ["f:/app/makefile_test\ttest"]
    assert make_folders(["make test CC=gcc"]) == ["d:\ttest"]
    assert make_folders(["make -C src check", "make --file=mk/t.mk all", "make -C /src -ft.mk"]) == [
        "d:src\tcheck", "f:mk/t.mk\tall", "f:/src/t.mk\t"]
    assert make_folders(["make -f - test"]) == []  # its makefile comes on its input
    assert make_folders(["mkdir -p build && cd build\ncmake .. && make"]) == []  # cmake's build folder: CMAKE's
    base = {"/app/GNUmakefile": "-", "/app/makefile": "-", "/app/Makefile": "a", "/app/makefile_test": "t"}
    rules = makefile_rules("", b"all: answer\n\ttrue\nanswer: answer.cpp\n\tg++ -o $@ $^\ntest: answer\n\t./answer\n")

    def kinds(changes: dict[str, str], before: dict[str, str] = base, now: bytes | None = None,
              folders: tuple[str, ...] = ("d:\ttest",)) -> list[str]:
        read = {"/app/Makefile": makefile_rules("", now)} if now else {"/app/Makefile": rules}
        return [e["kind"] for e in make_changed(before, {**before, **changes}, {"/app/Makefile": rules}, read,
                                                {}, [(1, "cmd")], ToolRun(list(folders), "/app"))]
    # the project's own makefile: the solution's to change, but for the rule the verifier runs
    assert kinds({"/app/Makefile": "b"}, now=b"all: answer\n\ttrue\nanswer: answer.cpp x.cpp\n\tg++ -o $@ $^\n"
                                          b"test: answer\n\t./answer\n") == []
    assert kinds({"/app/Makefile": "b"}, now=b"all: answer\nanswer: answer.cpp\n\tg++ -o $@ $^\ntest:\n\ttrue\n") == [
        "build_file_changed"]
    assert kinds({"/app/Makefile": "b"}, now=b"all:\n\techo ok\ntest: answer\n\t./answer\n", folders=("d:\t",)) == [
        "build_file_changed"]  # asked for no target: the first, `all`
    assert kinds({"/app/GNUmakefile": "c"}) == ["build_file_changed"]  # read ahead of the Makefile
    assert kinds({"/app/makefile": "c"}) == ["build_file_changed"]
    assert kinds({"/app/Makefile": "-"}) == ["build_file_changed"]  # none left: make fails, or another is read
    assert kinds({"/app/makefile_test": "u"}) == ["build_file_changed"]  # the one the script names
    fresh = {**base, "/app/Makefile": "-"}
    assert kinds({"/app/GNUmakefile": "c"}, fresh) == []  # no makefile at the baseline: the project is the agent's
    assert makefile_rules("", b"X := 1\n.PHONY: t\nt u:: a\n\tr \\\n  s\nt: V = 2\n") == {
        "rules": {".PHONY": ".PHONY: t", "t": "t u:: a\n\tr    s\nt: V = 2", "u": "t u:: a\n\tr    s"}, "first": "t",
        "controls": []}
    # what decides how every recipe runs: each of these made a failing `make test` exit 0
    makefile = b"all: answer\n\ttrue\nanswer: answer.cpp\n\tg++ -o $@ $^\ntest: answer\n\t./answer\n"
    for line in (b"MAKEFLAGS += -i", b".IGNORE:", b"SHELL = /bin/true", b"include evil.mk", b"override .SHELLFLAGS := -c true"):
        assert kinds({"/app/Makefile": "b"}, now=line + b"\n" + makefile) == ["build_file_changed"], line
    # asked for no target: a new first rule, or another default goal, is another target
    assert kinds({"/app/Makefile": "b"}, now=b"fake:\n\t@true\n" + makefile, folders=("d:\t",)) == ["build_file_changed"]
    assert kinds({"/app/Makefile": "b"}, now=makefile + b".DEFAULT_GOAL := fake\nfake:\n", folders=("d:\t",)) == [
        "build_file_changed"]


def test_the_guard_shell_lists_the_makefiles_make_would_read(tmp_path):
    (tmp_path / "Makefile").write_text("test:\n\t@false\n")
    (tmp_path / "makefile_test").write_text("test:\n\t@false\n")
    env = {"PATH": "/usr/bin:/bin", "TBSCALE_MAKE": "d:\ttest\nf:makefile_test\t", "TBSCALE_WORKDIR": str(tmp_path)}
    found = parse_snapshot(subprocess.run(["sh", "-c", PROJECT + MAKE], capture_output=True, text=True, check=True,
                                          env=env, timeout=60).stdout)["make"]
    assert found[f"{tmp_path}/GNUmakefile"] == "-" and found[f"{tmp_path}/makefile"] == "-"
    assert len(found[f"{tmp_path}/Makefile"]) == 64 and len(found[f"{tmp_path}/makefile_test"]) == 64
