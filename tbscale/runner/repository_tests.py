"""The repository a verifier script patches and then tests (SWE-bench style: terminal-bench's
SWE-bench Verified adapter, SWE-bench Pro as Harbor tasks): what of it the tests read besides the
solution, held to the baseline with the rules of the SWE-bench patch review
(verifiers/pytest_reads.py).

Such a script applies the instance's test patch where the agent worked and runs the repository's
own tests, which verifier_tests.py does not hold (SWE-bench lets a solution extend them). In a
repository made like such an instance (tests/fixtures), with the bug left in place, a `conftest.py`
whose hook reports every test passed, in the tests' folder, passed unseen. So in each folder where
the scripts run `git apply` or `patch`, the guard shell digests, at the baseline and after the
sweep, the files those rules read: Python files in test folders or with test names and
`conftest.py` (`RT PATH DIGEST`; `RT FOLDER other` for the folder, `many` past MAX_FILES), and
pytest's settings files and `setup.py` in the folders pytest looks for its settings in (from the
tests the scripts name up), which are read again from outside. What changed is
recorded as the patch review records a patch (`test_config_planted`, `tests_written`,
`test_plugin_added`); the files the scripts check out at a commit before their tests (terminal-bench's
adapter resets the test patch's files) are left out.
"""

from __future__ import annotations

import posixpath
from typing import Any

from tbscale.runner.findings import under
from tbscale.runner.script_folders import located
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun
from tbscale.verifiers.pytest_reads import (PLUGIN_FILES, SETTINGS_SECTIONS, WHOLE_SETTINGS, is_test_path,
                                           review_changes, script_tests)

MAX_FILES = 20_000
READ = (*sorted(SETTINGS_SECTIONS), *sorted(WHOLE_SETTINGS), "setup.py")
_PRUNED = (".git", "node_modules", "__pycache__", ".tox", ".nox", ".venv", ".mypy_cache", ".pytest_cache")


def repository_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """`r:FOLDER` for each folder the scripts apply a patch in (`git apply`, `patch`), relative
    ones the workdir's; then `c:PATH` for each file they check out at a commit before their tests,
    `t:PATH` for the other files their own test patch names, and `a:FOLDER` for the folders of
    those and each one above them (`.`, the repository's own), where pytest looks for its settings."""
    folders = []
    for places, inv in located(texts, tests_mount):
        if (inv.program == "git" and inv.args[:1] == ["apply"]) or inv.program == "patch":
            folders += [f"r:{place or '.'}" for place in places]
    if not folders:
        return []
    reset: set[str] = set()
    run: set[str] = set()
    for text in texts:
        r, u = script_tests(text)
        reset, run = reset | r, run | u
    # pytest's settings are read from the folder of the tests it is given and each one above it
    above = {"."} | {posixpath.dirname(p.rstrip("/")) or "." for p in run}
    for folder in list(above):
        while folder not in (".", "", "/"):
            folder = posixpath.dirname(folder) or "."
            above.add(folder)
    return (list(dict.fromkeys(folders)) + [f"c:{p}" for p in sorted(reset)]
            + [f"t:{p}" for p in sorted(run - reset)] + [f"a:{p}" for p in sorted(above)])


def settings_file(path: str) -> bool:
    """What is read again from outside: pytest's settings files, and a `setup.py` outside the test
    folders (one there, `tests/data/packages/x/setup.py`, is test data, which the shell digests
    as such: reading each of those from outside cost an engine call at every baseline)."""
    name = posixpath.basename(path)
    return name in READ and (name != "setup.py" or not is_test_path(path))


def read_text(path: str, data: bytes) -> dict[str, Any]:
    return {"text": data.decode("utf-8", errors="replace")}


def repository_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                       snap: GuardSnapshot, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    """The entries for what the agent phase changed in each patched repository (`before`,
    `after`: path -> digest, the folder itself `other`, or `many` past MAX_FILES)."""
    lines = [line.partition(":") for line in run.folders]
    reset = {path for kind, _, path in lines if kind == "c"}
    tests_run = reset | {path for kind, _, path in lines if kind == "t"}
    roots = dict.fromkeys(posixpath.normpath(path if path.startswith("/") else posixpath.join(run.workdir or "/", path))
                          for kind, _, path in lines if kind == "r")
    entries: list[Tampering] = []
    for root in roots:
        state, now_state = before.get(root, "-"), after.get(root, "-")
        if state != "other":
            continue  # not a folder at the baseline, or more files than are listed
        if now_state == "many":
            entries.append({"kind": "tests_written", "source": "environment", "paths": [root],
                            "detail": f"the agent phase left more than {MAX_FILES} test files in {root}, the "
                                      "repository the verifier patches and tests: they cannot all be held"})
            continue
        was = {p[len(root) + 1:]: d for p, d in before.items() if p != root and under(p, root) and d != "-"}
        now = {p[len(root) + 1:]: d for p, d in after.items() if p != root and under(p, root) and d != "-"} \
            if now_state == "other" else {}
        files = [(rel, "added" if rel not in was else "removed" if rel not in now else "changed")
                 for rel in sorted(was.keys() | now.keys()) if was.get(rel) != now.get(rel)]

        def text(read: dict, rel: str) -> str | None:
            return (read.get(f"{root}/{rel}") or {}).get("text")

        plugins = [rel for rel, state in files if posixpath.basename(rel) in PLUGIN_FILES and state != "removed"
                   and "pytest11" in (text(read_after, rel) or "") and "pytest11" not in (text(read_before, rel) or "")]
        review = review_changes(files, reset, tests_run,
                                lambda paths: {p: (text(read_before, p), text(read_after, p)) for p in paths},
                                plugins, source="environment", who=f"the agent phase (in {root})")
        entries += review.tampering
    return entries


_NAMES = ("-name '*.py' \\( -path '*/test/*' -o -path '*/tests/*' -o -path '*/testing/*' -o -path '*/e2e/*' "
          "-o -name 'test_*' -o -name '*_test.py' -o -name '*_tests.py' -o -name tests.py -o -name runtests.py "
          "-o -name conftest.py \\) -o -path '*/bin/test'")

# the guard shell's part (`_fd`'s line format), at the baseline and after the sweep: per `r:` line
# of `TBSCALE_REPOSITORY_TESTS`, `RT FOLDER other` (`many` past __MAX__ files) and `RT PATH DIGEST`
# for each file the rules read there
REPOSITORY = r'''
if [ -n "${TBSCALE_REPOSITORY_TESTS+set}" ]; then
  # `RT PATH DIGEST` for each file under $1 that the find tests after it take, in one sha256sum run;
  # counted first (a walk costs little beside the digests): past __MAX__, `RT DIR many` and status 1
  _rt_walk() {
    _rtw=$1; shift
    if [ "$(find "$_rtw/" -xdev \( __PRUNED__ \) -prune -o \( -type f -o -type l \) "$@" -print 2>/dev/null \
            | head -n __MORE__ | wc -l)" -gt __MAX__ ]; then printf 'RT\t%s\tmany\n' "$_rtw"; return 1; fi
    find "$_rtw/" -xdev \( __PRUNED__ \) -prune -o \( -type f -o -type l \) "$@" -exec sha256sum {} + 2>/dev/null \
      | while IFS= read -r _h; do printf 'RT\t%s\t%s\n' "${_h#*  }" "${_h%% *}"; done
  }
  printf '%s\n' "$TBSCALE_REPOSITORY_TESTS" | while IFS= read -r _p; do
    case $_p in r:*) _r=${_p#r:} ;; *) continue ;; esac
    case $_r in /*) ;; *) _r=${TBSCALE_WORKDIR:-$PWD}/$_r ;; esac
    [ -d "$_r" ] && [ ! -L "$_r" ] || continue
    _r=$(cd "$_r" && pwd -P) && [ "$_r" != / ] || continue
    _rt_walk "$_r" \( __NAMES__ \) || continue
    printf 'RT\t%s\tother\n' "$_r"
    # the tests' data: every other file in or under the folders of the Python tests the scripts name
    # (`c:` and `t:` lines), but the repository's own
    printf '%s\n' "$TBSCALE_REPOSITORY_TESTS" | while IFS= read -r _d; do
      case $_d in [ct]:*/*.py) _d=${_d#?:}; _d=$_r/${_d%/*} ;; *) continue ;; esac
      printf '%s\n' "$_d"
    done | sort -u | while IFS= read -r _d; do
      [ -d "$_d" ] && [ ! -L "$_d" ] && _rt_walk "$_d" ! -name '*.py'
    done
    # pytest's settings (and setup.py) where pytest looks for them, from the tests up
    printf '%s\n' "$TBSCALE_REPOSITORY_TESTS" | while IFS= read -r _a; do
      case $_a in a:.) _a=$_r ;; a:*) _a=$_r/${_a#a:} ;; *) continue ;; esac
      for _f in __READ__; do _fd RT "$_a/$_f"; done
    done
  done
fi
'''.replace("__PRUNED__", " -o ".join(f"-name {name}" for name in _PRUNED)).replace("__NAMES__", _NAMES)\
    .replace("__MAX__", str(MAX_FILES)).replace("__MORE__", str(MAX_FILES + 1)).replace("__READ__", " ".join(READ))
