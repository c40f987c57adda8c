"""What pytest reads besides the tests it is given, in a repository whose tests a script runs
(SWE-bench style), and the rules that say which changes to it reach the tests' verdict: the
SWE-bench patch review (swebench_review.py) and the verifier guard's reading of a repository a
verifier script patches (runner/repository_tests.py) share them.

- `test_config_planted`: a `conftest.py` added, changed or removed; pytest's settings changed (the
  `[pytest]` section of a `pytest.ini`, `.pytest.ini` or `tox.ini`, `[tool:pytest]` of a
  `setup.cfg`, `[tool.pytest...]` of a `pyproject.toml`, compared as parsed, `markers` left out; a
  pytest.ini added or removed, which pytest takes even empty);
- `tests_written`: a Python test file not reset before the tests run, changed or removed (a `.py`
  file in a `test`, `tests`, `testing` or `e2e` folder, or named as pytest's test modules are,
  `tests.py`, `runtests.py`, or sympy's `bin/test`); an `__init__.py` added under such a folder; a
  module added beside the tests the script runs that is not itself a test module; any other file
  changed or removed in or under the folder of a Python test the script runs (the tests' data: an
  expected value written to what the bug gives passed);
- `test_plugin_added`: a `pytest11` entry point declared.
Not: the files the script resets (checks out at a commit) before its tests; test modules added
(`test_*.py`: the script runs the files it names); other sections of the settings files; the test
files of other languages (SWE-bench Pro's gold patches change Go and TypeScript test helpers the
eval does not reset: 16 of 731).
"""

from __future__ import annotations

import configparser
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from tbscale.shell.parse import invocation, split_segments
from tbscale.types.guard import Tampering

TEST_FOLDERS = frozenset({"test", "tests", "testing", "e2e"})
# pytest's default test modules (test_*.py, *_test.py), Django's tests.py, and the runners
TEST_NAME = re.compile(r"^(test_.*|.*_tests?|tests?|conftest|runtests)\.py$|^test$")
TEST_MODULE = re.compile(r"^(test_.*|.*_tests?)\.py$")
# the pytest section of each file pytest may read its settings from; a pytest.ini is read even without one
SETTINGS_SECTIONS = {"tox.ini": "pytest", "setup.cfg": "tool:pytest", "pyproject.toml": "tool.pytest"}
WHOLE_SETTINGS = frozenset({"pytest.ini", ".pytest.ini"})
PLUGIN_FILES = frozenset({"setup.py", "setup.cfg", "pyproject.toml", "entry_points.txt"})
# a file a test patch in the script names; the first may follow the `echo '` that writes the patch
_PATCHED = re.compile(r"^(?:\s*echo ')?diff --git a/(\S+) b/", re.M)
COMMIT = re.compile(r"[0-9a-f]{7,40}")
START_MARKER = ">>>>> Start Test Output"  # swebench.harness.constants.START_TEST_OUTPUT


@dataclass
class ReadsReview:
    tampering: list[Tampering] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)  # test files in the patch that the eval script resets
    error: str | None = None  # the patch could not be read as a diff

    def as_details(self) -> dict:
        out: dict = {}
        if self.tampering:
            out["patch_tampering"] = self.tampering
        if self.reset:
            out["patch_tests_reset"] = self.reset
        if self.error:
            out["patch_review_error"] = self.error
        return out


def reset_paths(eval_script: str) -> set[str]:
    """The files the eval script checks out at a commit (`git checkout SHA [--] FILES`) before its
    tests run, read with the shell parser (so also after a `cd DIR &&`)."""
    out: set[str] = set()
    for segment in split_segments(eval_script.split(START_MARKER, 1)[0]):
        inv = invocation(segment)
        if inv.program == "git" and inv.args[:1] == ["checkout"] and len(inv.args) > 2 and COMMIT.fullmatch(inv.args[1]):
            out |= {a.removeprefix("./") for a in inv.args[2:] if a != "--" and not a.startswith("-")}
    return out


def is_test_path(path: str) -> bool:
    """A Python file of the tests or their runner (`bin/test`). Only Python's: SWE-bench Pro's gold
    patches change Go and TypeScript test helpers the eval does not reset (16 of 731), and so
    would be recorded."""
    parts = PurePosixPath(path).parts
    if not parts[-1].endswith(".py") and parts[-1] != "test":
        return False
    return any(p in TEST_FOLDERS for p in parts[:-1]) or bool(TEST_NAME.match(parts[-1]))


def pytest_settings(name: str, text: str | None) -> object:
    """What pytest reads from one of its settings files: its pytest section (None: none there, or
    no file). Text that does not parse is compared as it is."""
    if text is None:
        return None
    section = "pytest" if name in WHOLE_SETTINGS else SETTINGS_SECTIONS[name]
    try:
        if name == "pyproject.toml":
            found = tomllib.loads(text).get("tool", {}).get("pytest")
            found = dict(found.get("ini_options", {}), **{k: v for k, v in found.items() if k != "ini_options"}) \
                if isinstance(found, dict) else found
        else:
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            parser.read_string(text)
            found = dict(parser.items(section)) if parser.has_section(section) else None
    except (tomllib.TOMLDecodeError, configparser.Error, AttributeError):
        return text
    if name in WHOLE_SETTINGS and found is None:
        found = {}  # pytest takes a pytest.ini as its settings even with no [pytest] in it
    if isinstance(found, dict):
        found.pop("markers", None)  # only lets a test name a mark (a gold patch of SWE-bench Pro adds one)
    return found


def script_tests(script: str) -> tuple[set[str], set[str]]:
    """(reset, run): the files the script checks out at a commit before its tests run, and those
    with the files its own test patch names (`diff --git a/X b/X`): the tests it runs."""
    reset = reset_paths(script)
    return reset, reset | set(_PATCHED.findall(script))


def review_changes(files: list[tuple[str, str]], reset: set[str], run: set[str],
                   read_files: Callable[[list[str]], dict[str, tuple[str | None, str | None]]],
                   plugins: list[str], *, source: str, who: str) -> ReadsReview:
    """The entries for what changed in a repository whose tests `run` names (`files`: each path,
    relative to the repository, `added`, `removed` or `changed`; `plugins`: the files that now
    declare a pytest plugin), `who` having changed it. `read_files(paths)` gives each settings
    file's text before and after (None: absent); it is called only when one of them changed."""
    review = ReadsReview()
    test_folders = {str(PurePosixPath(p).parent) for p in run}
    # the folders of the Python tests that run, but the repository's own: what else is in them or
    # under them is their data (an expected output, a fixture)
    data_folders = {PurePosixPath(p).parent for p in run if p.endswith(".py")} - {PurePosixPath(".")}
    config: list[tuple[str, str]] = []
    tests: list[tuple[str, str]] = []
    settings: dict[str, str] = {}
    for path, state in files:
        name = PurePosixPath(path).name
        if path in reset:
            review.reset.append(path)
            continue
        if name == "conftest.py":
            config.append((path, state))
            continue
        if name in SETTINGS_SECTIONS or name in WHOLE_SETTINGS:
            settings[path] = state
        if state != "added" and is_test_path(path):
            tests.append((path, state))
        elif state == "added" and name.endswith(".py") and not TEST_MODULE.match(name) and (
                str(PurePosixPath(path).parent) in test_folders or (name == "__init__.py" and is_test_path(path))):
            tests.append((path, "added beside the tests"))
        elif state != "added" and not name.endswith(".py") and path not in settings \
                and any(PurePosixPath(path).is_relative_to(folder) for folder in data_folders):
            tests.append((path, f"{state}: the tests' data"))
    if settings:
        for path, (before, after) in read_files(sorted(settings)).items():
            name = PurePosixPath(path).name
            if pytest_settings(name, before) != pytest_settings(name, after):
                config.append((path, f"pytest's settings {settings[path]}"))

    def entry(kind: str, detail: str, found: list[tuple[str, str]]) -> Tampering:
        listed = ", ".join(f"{path} ({what})" for path, what in found[:20])
        return {"kind": kind, "source": source, "detail": f"{who} {detail}: {listed}",
                "paths": [path for path, _ in found]}

    if config:
        review.tampering.append(entry("test_config_planted", "changed what pytest loads or reads before the tests "
                                      "(a conftest.py, pytest's settings)", sorted(config)))
    if tests:
        review.tampering.append(entry("tests_written", "changed test files that are not reset before the tests "
                                      "run, or added a module beside the tests", sorted(tests)))
    if plugins:
        review.tampering.append(entry("test_plugin_added", "declared a pytest plugin (`pytest11`)",
                                      [(path, "pytest11") for path in sorted(plugins)]))
    return review
