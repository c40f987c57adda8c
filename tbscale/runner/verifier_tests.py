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

Not held to the baseline: a test file the script patches or checks out before it runs, and the
pytest paths of a script that applies a patch to the repository (SWE-bench style: those are the
repository's own tests, which SWE-bench lets a solution extend; its test runner run by path,
Django's `tests/runtests.py`, is held); a path that is the folder the script runs in or above it
(`pytest .`: the project, solution and all); and what pytest collects where it is given no path.
The guard shell's part: `TESTS` below."""

from __future__ import annotations

import configparser
import json
import posixpath
import re
import tomllib
from typing import Any

from tbscale.runner.findings import PYTEST_CONFIGS, file_state, grouped_entries, under
from tbscale.runner.script_folders import located
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

MAX_FILES = 500  # files listed under one folder; more are not listed (the folder's line says so)
# what running the tests leaves beside them (caches, coverage data), and what is no test: not listed
SKIPPED = ("__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", ".tox", ".nox", ".git",
           "node_modules", ".coverage", ".coverage.*")
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
    each test script they run by path, as the scripts name them (relative: the workdir's), outside
    the tests mount and `/logs`; not those the scripts patch or check out, nor the folder a command
    runs in or one above it."""
    patched, swe = _patched(texts), any(_APPLIES.search(text) for text in texts)
    out: list[str] = []
    for places, inv in located(texts, tests_mount):
        named = [] if swe else [w for w in _pytest_paths(inv.program, inv.args)
                                if "/" in w or w.endswith(".py") or _TESTISH.search(w)]
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
                line = f"{'p' if word in named else 's'}:{path}"
                if line not in out:
                    out.append(line)
    return out[:16]


# read from the named tests' folder up: pytest's settings (`CONFIGS`, read from outside), and the
# conftest.py files it loads there
ABOVE = PYTEST_CONFIGS
CONFIGS = tuple(name for name in ABOVE if name != "conftest.py")


def pytest_settings(path: str, data: bytes) -> dict[str, Any]:
    """What of a config file pytest reads (`settings`; None: none): all of a pytest.ini (pytest takes
    one even when empty), `[tool.pytest.ini_options]` of a pyproject.toml, `[pytest]` of a tox.ini,
    `[tool:pytest]` of a setup.cfg. Read from outside the environment."""
    text = data.decode("utf-8", errors="replace")
    name = posixpath.basename(path)
    if name in ("pytest.ini", ".pytest.ini"):
        return {"settings": text.strip()}
    if name == "pyproject.toml":
        try:
            tool = tomllib.loads(text).get("tool") or {}
        except (tomllib.TOMLDecodeError, AttributeError):
            return {"settings": "unreadable"}
        found = tool.get("pytest") if isinstance(tool, dict) else None
        return {"settings": None if found is None else json.dumps(found, sort_keys=True, default=str)}
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return {"settings": "unreadable"}
    section = "pytest" if name == "tox.ini" else "tool:pytest"
    return {"settings": json.dumps(dict(parser.items(section)), sort_keys=True) if parser.has_section(section) else None}


def changed_tests(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                  snap: GuardSnapshot, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    """Under each path of `run.folders`, as the guard shell resolved it, where the baseline had a
    file or a folder with files: each file changed, added or removed (`before`, `after`: path ->
    digest, `-` absent, `other` a folder, a link or over 4 MB, `many` a folder with more files than
    the shell lists, `binary` a compiled program run by path, which the build remakes; `TESTS`
    lines)."""
    found: list[str] = []
    configs: list[str] = []
    for line in run.folders:
        kind, _, line = line.partition(":")
        root = posixpath.normpath(line if line.startswith("/") else posixpath.join(run.workdir or "/", line))
        state, now_state = before.get(root, "-"), after.get(root, "-")
        if state in ("-", "many", "binary"):
            continue  # absent at the baseline (the agent's to write), more files than are listed, or a built program
        if kind == "p":  # pytest's settings where it looks for them, from the tests up
            folder = root if state == "other" else posixpath.dirname(root)
            for path in sorted(p for p in before.keys() | after.keys() if posixpath.basename(p) in ABOVE
                               and under(folder, posixpath.dirname(p)) and not under(p, root)  # in it: a test file
                               and before.get(p, "-") != after.get(p, "-")):
                was, now = (read_before.get(path) or {}).get("settings"), (read_after.get(path) or {}).get("settings")
                finding = f"{path} ({file_state(before.get(path, '-'), after.get(path, '-'))})"
                if (posixpath.basename(path) not in CONFIGS or was != now) and finding not in configs:
                    configs.append(finding)
        was = {posixpath.normpath(p): d for p, d in before.items() if p != root and under(p, root) and d != "-"}
        if state == "other" and not was:
            continue  # a folder with no files at the baseline, or a link: the agent's to fill
        if now_state == "many":
            found.append(f"{root}/ (more than {MAX_FILES} files now)")
            continue
        now = {posixpath.normpath(p): d for p, d in after.items() if p != root and under(p, root) and d != "-"}
        if state != "other":  # a file
            was, now = {root: state}, {root: now_state}
        for path in sorted(set(was) | set(now)):
            if was.get(path, "-") != now.get(path, "-"):
                found.append(f"{path} ({file_state(was.get(path, '-'), now.get(path, '-'))})")
    return grouped_entries([("tests_written", found, "a test the verifier runs from where the agent worked (a "
                             "file or folder its pytest is given, a test script it runs by path) was changed, "
                             "added or removed"),
                            ("test_config_planted", configs, "what pytest reads of its settings where the verifier runs "
                             "the tests it names, or a conftest.py it loads there, was changed (pytest.ini, or the "
                             "pytest section of pyproject.toml, tox.ini or setup.cfg)")], actions)


TESTS = r'''
if [ -n "${TBSCALE_TESTS_HERE+set}" ]; then
  printf '%s\n' "$TBSCALE_TESTS_HERE" | while IFS= read -r _p; do
    _k=${_p%%:*}; _at "${_p#*:}"; _p=${_p%/}; [ -n "$_p" ] || _p=/
    if [ "$_k" = p ]; then  # pytest's settings and conftest.py, in the tests' folder and each one above it
      _d=$_p; [ -d "$_d" ] || _d=${_d%/*}
      while :; do
        for _f in __CONFIGS__; do _fd WT "$_d/$_f"; done
        [ -z "${TBSCALE_SINCE:-}" ] || rm -f "$_d/__pycache__/"conftest.*.pyc 2>/dev/null
        [ -n "$_d" ] || break; _d=${_d%/*}
      done
      # after the sweep: pytest's compiled tests, which it takes for the source when the time and size
      # they record match (one compiled from another test, the source put back, passed); it compiles them again
      if [ -n "${TBSCALE_SINCE:-}" ]; then
        if [ -d "$_p" ] && [ ! -L "$_p" ]; then find "$_p/" -xdev -type d -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
        else _b=${_p##*/}; rm -f "${_p%/*}/__pycache__/${_b%.py}".*.pyc 2>/dev/null; fi
      fi
    fi
    if [ -d "$_p" ] && [ ! -L "$_p" ]; then
      _l=$(find "$_p/" -xdev \( __SKIP__ \) -prune -o \( -type f -o -type l \) -print 2>/dev/null | head -n __MORE__)
      if [ -n "$_l" ] && [ "$(printf '%s\n' "$_l" | wc -l)" -gt __MAX__ ]; then printf 'WT\t%s\tmany\n' "$_p"
      else printf 'WT\t%s\tother\n' "$_p"
        [ -z "$_l" ] || printf '%s\n' "$_l" | while IFS= read -r _f; do _fd WT "$_f"; done; fi
    elif [ "$_k" = s ] && [ -f "$_p" ] && head -c 4 "$_p" 2>/dev/null | grep -q ELF; then printf 'WT\t%s\tbinary\n' "$_p"
    else _fd WT "$_p"; fi
  done
fi
'''.replace("__MAX__", str(MAX_FILES)).replace("__MORE__", str(MAX_FILES + 1))\
    .replace("__CONFIGS__", " ".join(ABOVE)).replace("__SKIP__", " -o ".join(f"-name '{n}'" for n in SKIPPED))
