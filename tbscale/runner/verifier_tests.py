"""The verifier's own tests where the agent works: the test files and folders its scripts hand to
pytest, and the test scripts they run by path, outside the tests folder the verifier copies in
(docs/tasks.md, "Verification integrity", *Tests the agent can reach*).

Public tasks keep their tests in the image, beside the solution:
* DevEval's 63 tasks (rese1f/terminal-bench-datasets) run `pytest unit_tests` and `pytest
  acceptance_tests` in `/app`, or `./acceptance_tests/test.sh`, from the folders the image ships;
* LiveCodeBench Pro's 599 tasks run `python -m pytest /app/tests/test_outputs.py`, copied into
  the image at build time.
An agent that writes `assert True` into such a file, or removes the test that fails, passes.
Where the baseline had such a file, or a folder with files, a change to it, a file added under it
or one removed is `tests_written`. From the folder of the tests pytest is given up to `/`, what
pytest reads of its settings (`pytest_settings`, read from outside) and the conftest.py files it
loads there, changed, are `test_config_planted`. After the sweep, pytest's compiled forms of the
tests and of those conftest.py files are removed: pytest takes one for its source when the time
and size it records match, so one compiled from another test passed with the source put back.
A path absent (or a folder empty) at the
baseline is the agent's to write, and so are the settings around it: DevEval's unit-testing
tasks remove `unit_tests` and ask the agent for it.

What the tests read is held with them, found in the environment by the guard shell (`held:` keys):
* the expected outputs and data a test names, a file or folder with `expected`, `golden`,
  `sample(s)`, `fixture(s)`, `testdata` or `test_data` in its name (`expected_outputs/$i.txt`,
  `acceptance_samples/hooli_renko_4.csv`), from the folder its command runs in or from the test's
  own: DevEval's acceptance scripts compare the program's output with `expected_outputs/`, and
  writing the wrong answer's output there passed;
* the test folders beside a makefile for tests that the verifier's make is given (`make test -f
  makefile_test`, DevEval's C++ tasks), those the makefile names (`unit_tests`): a unit test
  rewritten passed. After the sweep, an object file named for one of those tests is removed (make
  took one compiled from another test as up to date) and the tests are touched (make took a test
  program the agent wrote after its build as up to date); a file the agent phase dated in the
  future beside the makefile is set to the baseline's time and is `build_time_set_forward` (a test
  program dated 2099; runner/build_times.py).
  What a compiler leaves there (`*.o`, coverage data) is not listed. The files of the C and C++
  test libraries (googletest, gmock, Catch2, doctest) where the system keeps them, there at the
  baseline, changed or removed, are `test_library_changed`: `libgtest_main.a` made a main() that
  runs no test passed. One added is an install (DevEval's set-up installs googletest), but for
  another form of a library the folder had (a `.so` beside the `.a`, which the linker takes). The
  compilers make starts are digested with the programs the scripts name (`compilers`).

Not held to the baseline: a test file the script patches or checks out before it runs, and the
pytest paths of a script that applies a patch to the repository (SWE-bench style: those are the
repository's own tests, which SWE-bench lets a solution extend; its test runner run by path,
Django's `tests/runtests.py`, is held, and what else of the repository the tests read is held by
repository_tests.py); a path that is the folder the script runs in or above it
(`pytest .`: the project, solution and all; there only pytest's settings, from that folder up, and
the conftest.py files under it are held, `c:` lines: an `/app/conftest.py` that exits 0 as it is
imported passed Aider Polyglot's Python tasks unseen before); what pytest collects where it is given no path; data
a test reads under another name (`inputs/`, hone's `data_file/`).
The guard shell's part: `TESTS` below."""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from tbscale.runner.findings import PYTEST_CONFIGS, file_state, grouped_entries, under
from tbscale.runner.make_project import make_folders
from tbscale.runner.script_folders import located
from tbscale.verifiers import pytest_reads as reads
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

MAX_FILES = 500  # files listed under one folder; more are not listed (the folder's line says so)
# what running the tests leaves beside them (caches, coverage data), and what is no test: not listed
SKIPPED = ("__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", ".tox", ".nox", ".git",
           "node_modules", ".coverage", ".coverage.*", "*.o", "*.obj", "*.gcno", "*.gcda", "*.gcov")
HELD = "held:"  # the key of a path the shell found the tests read: the expected outputs they name, a makefile's tests
# a word in a test's text that names its expected outputs or the data it reads, by the names tests
# give them (`expected_outputs/$i.txt`, `../golden`, `acceptance_samples/hooli_renko_4.csv`, `testdata/`)
_DATA = r"[A-Za-z0-9_./-]*(expected|golden|samples?|fixtures?|testdata|test_data)[A-Za-z0-9_.-]*"
SOURCES = (".c", ".cc", ".cpp", ".cxx", ".C")  # what an object file beside its source is compiled from
LIBRARY = "lib:"  # the key of a file of the C and C++ test libraries a makefile's tests compile with
# those libraries: their header folders in the system's include folders, and their archives and
# shared objects in its library folders (googletest, as DevEval's makefiles link it: `-lgtest -lgtest_main`)
TEST_HEADERS = ("gtest", "gmock", "catch2", "doctest")
TEST_LIBRARIES = ("libgtest", "libgmock", "libCatch2", "libdoctest")
# pytest's options that take their value as the next word (`-k expr`, `-p plugin`, `--rootdir dir`)
_PYTEST_VALUE = frozenset({"-k", "-m", "-p", "-c", "-o", "-W", "-n", "--rootdir", "--confcutdir", "--basetemp",
                           "--deselect", "--ignore", "--ignore-glob", "--junitxml", "--junit-xml", "--log-file",
                           "--durations", "--maxfail", "--tb", "--cov", "--cov-report", "--cov-config",
                           "--json-report-file", "--html", "--timeout", "--import-mode", "--capture",
                           "--override-ini", "--config-file", "--dist", "--numprocesses", "--reruns"})
_PATH = re.compile(r"[A-Za-z0-9_.+/-]+")
# a path component that says it holds or is a test: tests, unit_tests, test.sh, run-tests.sh, spec
_TESTISH = re.compile(r"(^|[_.-])(tests?|specs?)([_.-]|$)", re.I)
# the files a script's own test patch (`diff --git a/X b/X`, `+++ b/X`) or `git checkout` sets
_PATCHED = re.compile(r"^(?:diff --git a/(\S+) b/|\+\+\+ b/(\S+))", re.M)
# a script that applies a patch to the repository: SWE-bench style, whose pytest runs the repository's tests
_APPLIES = re.compile(r"\bgit\s+apply\b|\bpatch\s+(?:-p|<|--)")


def _pytest_paths(program: str, args: list[str]) -> list[str]:
    """The paths a pytest command is given (`path::test` as its file). None where it collects
    doctests: the paths are then the project's modules."""
    if program in ("python", "python3") and args[:2] == ["-m", "pytest"]:
        args = args[2:]
    elif program not in ("pytest", "py.test"):
        return []
    if any(w.startswith(("--doctest-modules", "--doctest-glob")) for w in args):
        return []
    out, i = [], 0
    while i < len(args):
        word = args[i]
        if word in _PYTEST_VALUE:
            i += 2
            continue
        if not word.startswith("-"):
            out.append(word.split("::", 1)[0])
        i += 1
    return out


def _script_path(program: str, raw: str, args: list[str]) -> list[str]:
    """A script the command runs by path: itself (`./acceptance_tests/test.sh`) or the first
    argument of a shell or of Python (`bash tests/run.sh`, `python3 tests/runtests.py`)."""
    if "/" in raw:
        return [raw]
    if program in ("bash", "sh", "dash", "zsh", "python", "python3") and args and not args[0].startswith("-") \
            and "/" in args[0]:
        return [args[0]]
    return []


def _patched(texts: list[str]) -> set[str]:
    out: set[str] = set()
    for text in texts:
        out |= {a or b for a, b in _PATCHED.findall(text)}
    for _, inv in located(texts):
        if inv.program == "git" and inv.args[:1] in (["checkout"], ["restore"]):
            out |= {w for w in inv.args[1:] if not w.startswith("-")}
    return {posixpath.normpath(p) for p in out}


def named_tests(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """`p:PATH` for each test file and folder the verifier's scripts hand to pytest, `s:PATH` for
    each test script they run by path, each followed by a tab and the folder the command runs in
    (the expected outputs the tests name are found from there), and `m:PATH` for each makefile
    their make is given by a name that says it is for tests (`make test -f makefile_test`), as the
    scripts name them (relative: the workdir's), outside the tests mount and `/logs`; not those the
    scripts patch or check out, nor the folder a command runs in or one above it: `c:PLACE` and
    its tab instead, where pytest is given that folder (its settings and conftest.py files)."""
    patched, swe = _patched(texts), any(_APPLIES.search(text) for text in texts)
    makefiles = [line[2:].partition("\t")[0] for line in make_folders(texts, tests_mount) if line.startswith("f:")]
    out = list(dict.fromkeys(f"m:{path}" for path in makefiles if _TESTISH.search(posixpath.basename(path))
                             and not (tests_mount and under(path, tests_mount)) and not under(path, "/logs")))
    for places, inv in located(texts, tests_mount):
        given = _pytest_paths(inv.program, inv.args)
        # pytest given the folder it runs in (`pytest .`, Aider Polyglot Python's): the project,
        # solution and all, whose files are not held; its settings and conftest.py files are (`c:`)
        for place in ([] if swe else places):
            if any(posixpath.normpath(posixpath.join(place or ".", w)) in (posixpath.normpath(place or "."), ".")
                   for w in given if _PATH.fullmatch(w)) and f"c:{place}\t{place}" not in out:
                out.append(f"c:{place}\t{place}")
        named = [] if swe else [w for w in given if "/" in w or w.endswith(".py") or _TESTISH.search(w)]
        scripts = [] if named else [p for p in _script_path(inv.program, inv.raw_program, inv.args)
                                    if any(_TESTISH.search(part) for part in p.split("/") if part not in ("", "."))]
        for word in named + scripts:
            if not _PATH.fullmatch(word):
                continue  # a variable, a glob: not a path the scripts name
            for place in places:
                path = posixpath.normpath(word if word.startswith("/") else posixpath.join(place or ".", word))
                relative = posixpath.normpath(word) if not word.startswith("/") else None
                if path.startswith("..") or path == "." or (place and under(place, path)) \
                        or under(path, "/logs") or (tests_mount and under(path, tests_mount)) \
                        or path in patched or relative in patched:
                    continue
                line = f"{'p' if word in named else 's'}:{path}\t{place}"
                if line not in out:
                    out.append(line)
    return out[:16]


def compilers(lines: list[str]) -> tuple[str, ...]:
    """What make starts by name to compile the tests of a makefile for tests (`m:` lines): its
    built-in rules' `cc` and `g++`, and the names makefiles give them. A compiler that rewrote the
    tests it was given (`unit_tests/*.cpp` swapped for a passing one) passed unseen."""
    return ("cc", "c++", "g++", "gcc") if any(line.startswith("m:") for line in lines) else ()


# read from the named tests' folder up: pytest's settings (`CONFIGS`, read from outside), and the
# conftest.py files it loads there
ABOVE = PYTEST_CONFIGS
CONFIGS = tuple(name for name in ABOVE if name != "conftest.py")


def pytest_settings(path: str, data: bytes) -> dict[str, Any]:
    """What of a config file pytest reads (`settings`; None: none), as verifiers/pytest_reads.py
    reads it: its pytest section (all of a pytest.ini, which pytest takes even when empty), as
    parsed, but for `markers`. Read from outside the environment."""
    found = reads.pytest_settings(posixpath.basename(path), data.decode("utf-8", errors="replace"))
    return {"settings": None if found is None else json.dumps(found, sort_keys=True, default=str)}


def _library_stem(key: str) -> str:
    """A library file's folder and name up to its first dot: `.a`, `.so` and `.so.1.14` are one library."""
    folder, _, name = key.rpartition("/")
    return f"{folder}/{name.split('.', 1)[0]}"


def _pytest_reads(kind: str, path: str, folder: str, root: str) -> bool:
    """Whether pytest reads `path` as its settings or a conftest.py for the tests of a `p:` or `c:`
    line (`root`, in `folder`): the configs in that folder and each one above it (in a `p:` folder
    itself they are test files, held as such), and for a `c:` folder every conftest.py under it."""
    name = posixpath.basename(path)
    if name not in ABOVE:
        return False
    if under(folder, posixpath.dirname(path)):
        return kind == "c" or not under(path, root)
    return kind == "c" and name == "conftest.py" and under(path, root)


def changed_tests(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                  snap: GuardSnapshot, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    """Under each path of `run.folders`, as the guard shell resolved it, and each path the shell
    found the tests read (`held:PATH` keys: the expected outputs they name, the test folders a
    named makefile compiles), where the baseline had a file or a folder with files: each file
    changed, added or removed (`before`, `after`: path -> digest, `-` absent, `other` a folder, a
    link or over 4 MB, `many` a folder with more files than the shell lists, `binary` a compiled
    program run by path, which the build remakes; `TESTS` lines). And the files of the test
    library a makefile's tests compile with (`lib:PATH` keys) that changed or went."""
    found: list[str] = []
    configs: list[str] = []
    roots = [(kind, posixpath.normpath(path if path.startswith("/") else posixpath.join(run.workdir or "/", path)))
             for kind, _, path in (line.partition("\t")[0].partition(":") for line in run.folders) if kind in ("p", "s", "c")]
    roots += [("held", key[len(HELD):]) for key in before if key.startswith(HELD)]
    for kind, root in roots:
        state, now_state = before.get(root, "-"), after.get(root, "-")
        if state in ("-", "many", "binary"):
            continue  # absent at the baseline (the agent's to write), more files than are listed, or a built program
        if kind in ("p", "c"):  # pytest's settings where it looks for them, from the tests up; conftest.py under a `c:` folder
            folder = root if state == "other" else posixpath.dirname(root)
            for path in sorted(p for p in before.keys() | after.keys() if _pytest_reads(kind, p, folder, root)
                               and before.get(p, "-") != after.get(p, "-")):
                was, now = (read_before.get(path) or {}).get("settings"), (read_after.get(path) or {}).get("settings")
                finding = f"{path} ({file_state(before.get(path, '-'), after.get(path, '-'))})"
                if (posixpath.basename(path) not in CONFIGS or was != now) and finding not in configs:
                    configs.append(finding)
            if kind == "c":
                continue  # the project's own files are not held
        was = {posixpath.normpath(p): d for p, d in before.items() if p != root and under(p, root) and d != "-"}
        if state == "other" and not was:
            continue  # a folder with no files at the baseline, or a link: the agent's to fill
        if now_state == "many":
            found.append(f"{root}/ (more than {MAX_FILES} files now)")
            continue
        now = {posixpath.normpath(p): d for p, d in after.items() if p != root and under(p, root) and d != "-"}
        if kind == "held" and HELD + root not in after:
            now, now_state = {}, "-"  # not where the tests read it now: what they read there is gone
        if state != "other":  # a file
            was, now = {root: state}, {root: now_state}
        for path in sorted(set(was) | set(now)):
            if was.get(path, "-") != now.get(path, "-"):
                found.append(f"{path} ({file_state(was.get(path, '-'), now.get(path, '-'))})")
    # the C and C++ test libraries a makefile's tests compile with: a file there at the baseline, changed
    # or removed; one added is an install (DevEval's own set-up installs googletest), but for another form
    # of a library the folder had (a `libgtest_main.so` beside the `.a`: the linker takes it first)
    library = [f"{key[len(LIBRARY):]} ({file_state(was, after.get(key, '-'))})" for key, was in sorted(before.items())
               if key.startswith(LIBRARY) and was != "-" and after.get(key, "-") != was]
    had = {_library_stem(key) for key, was in before.items() if key.startswith(LIBRARY) and was != "-"}
    library += [f"{key[len(LIBRARY):]} (added beside the baseline's)" for key, now in sorted(after.items())
                if key.startswith(LIBRARY) and now != "-" and before.get(key, "-") == "-" and _library_stem(key) in had]
    return grouped_entries([("tests_written", list(dict.fromkeys(found)), "a test the verifier runs from where the "
                             "agent worked (a file or folder its pytest is given, a test script it runs by path, "
                             "the expected outputs they name, the tests its named makefile compiles) was "
                             "changed, added or removed"),
                            ("test_config_planted", configs, "what pytest reads of its settings where the verifier runs "
                             "the tests it names, or a conftest.py it loads there, was changed (pytest.ini, or the "
                             "pytest section of pyproject.toml, tox.ini or setup.cfg)"),
                            ("test_library_changed", library, "a file of the C or C++ test library (googletest, Catch2, "
                             "doctest) that the tests a makefile for tests compiles include or link was changed or "
                             "removed")], actions)


# the guard shell's part (`_fd` and `_at` are guard_shell.PROJECT's). Per line of `TBSCALE_TESTS_HERE`,
# at the baseline and after the sweep: `WT PATH DIGEST` for the path and each file under it, pytest's
# configs from the tests' folder up (`p:`), `WT held:PATH data|make` and its files for the expected
# outputs a test names (`p:`, `s:`) and the test folders a named makefile compiles (`m:`), and
# `WT lib:PATH DIGEST` for the test libraries those compile with. After the sweep: pytest's compiled
# tests, and the object files named for those folders' tests, are removed, and those tests are
# touched (a time set forward beside the makefile: build_times.BUILD_TIMES).
TESTS = r'''
if [ -n "${TBSCALE_TESTS_HERE+set}" ]; then
  _tab=$(printf '\t')
  # `_wl FOLDER`: its line (`other`, or `many` past __MAX__ files) and each file under it, but what
  # running the tests or a compiler leaves there (SKIPPED)
  _wl() {
    _l=$(find "$1/" -xdev \( __SKIP__ \) -prune -o \( -type f -o -type l \) -print 2>/dev/null | head -n __MORE__)
    if [ -n "$_l" ] && [ "$(printf '%s\n' "$_l" | wc -l)" -gt __MAX__ ]; then printf 'WT\t%s\tmany\n' "$1"
    else printf 'WT\t%s\tother\n' "$1"
      [ -z "$_l" ] || printf '%s\n' "$_l" | while IFS= read -r _f; do _fd WT "$_f"; done; fi
  }
  _wh() { printf 'WT\t__HELD__%s\t%s\n' "$1" "$2"; if [ -d "$1" ]; then _wl "$1"; else _fd WT "$1"; fi; }
  # `_wx PATH CWD`: the expected outputs the text of PATH (a file, or the files under a folder)
  # names, found from the folder its command runs in or from the file's own; not that folder or
  # one above it, the tests mount or /logs
  _wx() {
    { if [ -d "$1" ]; then find "$1/" -xdev \( __SKIP__ \) -prune -o -type f -size -1024k -print 2>/dev/null | head -n 100
      else printf '%s\n' "$1"; fi; } | while IFS= read -r _f; do
      grep -IoiE '__DATA__' "$_f" 2>/dev/null | sort -u | head -n 16 | while IFS= read -r _w; do
        for _b in "$2" "${_f%/*}"; do
          case $_w in /*) _x=$_w ;; *) _x=${_b%/}/$_w ;; esac
          if [ -d "$_x" ] && [ ! -L "$_x" ]; then _x=$(cd "$_x" 2>/dev/null && pwd -P) || continue
          elif [ -f "$_x" ] && [ ! -L "$_x" ]; then _y=$(cd "${_x%/*}/" 2>/dev/null && pwd -P) || continue; _x=${_y%/}/${_x##*/}
          else continue; fi
          [ "$_x" != / ] || continue
          case "${2%/}/" in "$_x"/*) continue ;; esac
          case "$_x/" in /logs/*) continue ;; esac
          [ -z "${TBSCALE_TESTS:-}" ] || case "$_x/" in "${TBSCALE_TESTS%/}"/*) continue ;; esac
          printf '%s\n' "$_x"
        done
      done
    done | sort -u | head -n 8
  }
  printf '%s\n' "$TBSCALE_TESTS_HERE" | while IFS= read -r _p; do
    _k=${_p%%:*}; _r=${_p#*:}; _c=${_r#*"$_tab"}; [ "$_c" != "$_r" ] || _c=; _r=${_r%%"$_tab"*}
    _at "$_c"; _c=$_p; _at "$_r"; _p=${_p%/}; [ -n "$_p" ] || _p=/
    if [ "$_k" = m ]; then  # the test folders beside a makefile for tests that it names (`unit_tests`)
      [ -f "$_p" ] && [ ! -L "$_p" ] || continue
      _d=${_p%/*}; [ -n "$_d" ] || _d=/
      # after the sweep, the object files there, once for all its test folders
      [ -z "${TBSCALE_SINCE:-}" ] || _objs=$(find "$_d/" -xdev \( -name .git -o -name node_modules \) -prune -o -type f \
        \( -name '*.o' -o -name '*.obj' \) -print 2>/dev/null)
      for _t in "${_d%/}"/*; do
        [ -d "$_t" ] && [ ! -L "$_t" ] || continue
        _n=${_t##*/}
        printf '%s\n' "$_n" | grep -qiE '__TESTISH__' && grep -qF -- "$_n" "$_p" || continue
        # after the sweep: an object file named for one of its tests, beside it or in a folder for
        # objects (`obj/test_graph.o`), which make takes for the test when it is newer, is removed;
        # and the tests are touched, so that whatever make built from them (a test program) is older
        # and built again (a time set forward there: build_times.BUILD_TIMES)
        if [ -n "${TBSCALE_SINCE:-}" ]; then
          [ -z "$_objs" ] || printf '%s\n' "$_objs" | while IFS= read -r _o; do
            _b=${_o##*/}; _b=${_b%.*}; for _s in __SOURCES__; do [ -f "$_t/$_b$_s" ] && { rm -f "$_o"; break; }; done; done
          find "$_t/" -xdev -type f -exec touch -c {} + 2>/dev/null
        fi
        _wh "$_t" make
        _wx "$_t" "$_d" | while IFS= read -r _x; do _wh "$_x" data; done
      done
      continue
    fi
    if [ "$_k" = c ]; then  # pytest given the folder it runs in: the conftest.py files it collects there (then as `p:`)
      [ -d "$_p" ] || continue  # a link to a folder is walked where it points (the slash)
      find "$_p/" -xdev \( __SKIP__ -o -name '.?*' -o -name venv -o -name build -o -name dist -o -name '*.egg' \) -prune \
        -o -name conftest.py -type f -print 2>/dev/null | head -n __MAX__ | while IFS= read -r _f; do
        _fd WT "$_f"; [ -z "${TBSCALE_SINCE:-}" ] || rm -f "${_f%/*}/__pycache__/"conftest.*.pyc 2>/dev/null; done
      printf 'WT\t%s\tother\n' "$_p"
    fi
    if [ "$_k" = p ] || [ "$_k" = c ]; then  # pytest's settings and conftest.py, in the tests' folder and each one above it
      _d=$_p; [ -d "$_d" ] || _d=${_d%/*}
      while :; do
        for _f in __CONFIGS__; do _fd WT "$_d/$_f"; done
        [ -z "${TBSCALE_SINCE:-}" ] || rm -f "$_d/__pycache__/"conftest.*.pyc 2>/dev/null
        [ -n "$_d" ] || break; _d=${_d%/*}
      done
      [ "$_k" = p ] || continue
      # after the sweep: pytest's compiled tests, which it takes for the source when the time and size
      # they record match (one compiled from another test, the source put back, passed); it compiles them again
      if [ -n "${TBSCALE_SINCE:-}" ]; then
        if [ -d "$_p" ] && [ ! -L "$_p" ]; then find "$_p/" -xdev -type d -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
        else _b=${_p##*/}; rm -f "${_p%/*}/__pycache__/${_b%.py}".*.pyc 2>/dev/null; fi
      fi
    fi
    if [ -d "$_p" ] && [ ! -L "$_p" ]; then _wl "$_p"
    elif [ "$_k" = s ] && [ -f "$_p" ] && head -c 4 "$_p" 2>/dev/null | grep -q ELF; then printf 'WT\t%s\tbinary\n' "$_p"; continue
    else _fd WT "$_p"; fi
    [ -L "$_p" ] || _wx "$_p" "$_c" | while IFS= read -r _x; do _wh "$_x" data; done
  done
  # the test libraries a makefile for tests compiles with, where the system keeps them, once: a
  # `WT lib:PATH DIGEST` line for each file (`link:TARGET` for a link, which may be pointed elsewhere)
  if printf '%s\n' "$TBSCALE_TESTS_HERE" | grep -q '^m:'; then
    { for _h in /usr/include /usr/local/include; do for _n in __HEADERS__; do
        [ -d "$_h/$_n" ] && [ ! -L "$_h/$_n" ] && find "$_h/$_n/" -xdev \( -type f -o -type l \) 2>/dev/null | head -n __MAX__
      done; done
      # each folder once, as it is (`/lib` is a link to `/usr/lib` where /usr is merged)
      for _h in $(for _h in /usr/lib /usr/local/lib /usr/lib/*-linux-gnu /usr/local/lib/*-linux-gnu /lib/*-linux-gnu; do
                  [ -d "$_h" ] && (cd "$_h" && pwd -P); done | sort -u); do
        for _f in __LIBRARIES__; do [ -e "$_f" ] || [ -L "$_f" ] && printf '%s\n' "$_f"; done
      done; } | while IFS= read -r _f; do
      if [ -L "$_f" ]; then _fdd="link:$(readlink -- "$_f")"; else _fd WT "$_f" > /dev/null; fi
      printf 'WT\t__LIBRARY__%s\t%s\n' "$_f" "$_fdd"; done
  fi
fi
'''.replace("__MAX__", str(MAX_FILES)).replace("__MORE__", str(MAX_FILES + 1)).replace("__HELD__", HELD)\
    .replace("__CONFIGS__", " ".join(ABOVE)).replace("__SKIP__", " -o ".join(f"-name '{n}'" for n in SKIPPED))\
    .replace("__DATA__", _DATA).replace("__TESTISH__", _TESTISH.pattern).replace("__SOURCES__", " ".join(SOURCES))\
    .replace("__LIBRARY__", LIBRARY).replace("__HEADERS__", " ".join(TEST_HEADERS))\
    .replace("__LIBRARIES__", " ".join(f'"$_h"/{name}*' for name in TEST_LIBRARIES))
