"""The folders the verifier's Python searches before its own library, and the modules the agent phase
wrote there named like one of the library's (docs/tasks.md, "Verification integrity", *Python's
first folders*).

Python puts on sys.path, ahead of its standard library and its packages, the folder `python3 -m`
or `-c` runs in (the test scripts' usual `cd /app; python3 -m pytest /tests/test_outputs.py`), the
folder of a script it runs by path (`./tests/runtests.py`), the folder of a console script such as `pytest` (its `bin`, a
project `.venv`'s under `uv run`), and the folders of PYTHONPATH (where an empty entry is, again,
the folder it runs in). A module
there named like one of the standard library's, of pytest's or of an installed package is imported
in the library's place, before any test runs: an `/app/argparse.py` whose one line is `os._exit(0)`
passed the bundled edit-ini-config, nothing solved, with nothing recorded before 2026-12-07; so did
a package `/app/json/`. So, after the sweep, in each such folder, the modules the agent phase wrote
(a `NAME.py`, `.pyc` or extension module, a package `NAME/__init__.*`, a link to a package) whose
NAME is one of the standard library's (this Python's `sys.stdlib_module_names`), of pytest's own
packages, or of a module or package the verifier's interpreters find in their library folders, are
`module_shadowing`. A folder without `__init__` is no such package (Python would take the library's
regular package over it), and the agent's own modules under other names are what the tests import.
The guard shell's part: `PYTHON_PATH` below."""

from __future__ import annotations

import re
import sys
from pathlib import PurePosixPath

from tbscale.runner.findings import ENTRY_PATHS, SHADOWING, entry, under
from tbscale.runner.script_folders import located
from tbscale.shell.tampering import attribute_command
from tbscale.types.guard import Tampering, ToolRun

# `:env` asks the shell for the folders of the exec's own PATH (a console script's `bin`) and PYTHONPATH
ENVIRONMENT = ":env"
# pytest's packages and those it imports on every run, which a test script may install after the guard looked
RUNNER_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "exceptiongroup", "tomli", "pygments",
                   "colorama", "py")
LIBRARY_NAMES = tuple(sorted({*sys.stdlib_module_names, *RUNNER_PACKAGES} - {"__main__"}))
# The modules every CPython 3 has imported at start-up, site.py's own among them, before it puts the
# first folder on sys.path (read off 3.10 and 3.11 here): one of these names there changes nothing,
# and an honest `site.py` or `io.py` in the workdir is not flagged. PYTHONPATH's folders are on
# sys.path from the start (a `site.py` there is imported on 3.10, where site is not frozen): all count.
STARTUP_MODULES = ("abc", "codecs", "encodings", "genericpath", "io", "os", "posixpath", "site", "stat",
                   "_collections_abc", "_sitebuiltins", "time", "zipimport")
PYTHONPATH_MARK = "+"  # a line for a folder of PYTHONPATH
_RUNS_PYTHON = frozenset({"python", "pytest", "py.test", "coverage"})
_VALUED = frozenset({"-W", "-X", "--check-hash-based-pycs"})  # options that take the next word
_PYTHONPATH = re.compile(r"(?:^|[\s;&|(])PYTHONPATH=([\"']?)([^\"'\s;&|]*)\1")
_HERE = frozenset({"", ".", "$(pwd)", "`pwd`", "$PWD", "${PWD}"})


def _first_folder(args: list[str]) -> str | None:
    """What Python puts first on sys.path for these arguments: "." the folder it runs in, a script's
    folder as the script names it, None nothing (`-I`, `-P`: isolated, safe path)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-m", "-c", "-") or (arg.startswith(("-m", "-c")) and not arg.startswith("--")):
            return "."
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-"):
            break
        if not arg.startswith("--") and {"I", "P"} & set(arg[1:]):
            return None
        i += 2 if arg in _VALUED else 1
    if i >= len(args):
        return "."  # a program read from stdin
    return str(PurePosixPath(args[i]).parent)


def _joined(place: str, folder: str) -> str:
    """`folder` ("." or relative: where the command runs) from `place` ("" the workdir)."""
    if folder.startswith("/"):
        return folder
    if folder in ("", "."):
        return place
    return str(PurePosixPath(place) / folder) if place else folder


def python_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """The folders the verifier's scripts have Python search first ("" the workdir; those of the
    PYTHONPATH they set marked `+`), and `:env` for those of the exec's PATH and PYTHONPATH, when
    the scripts run Python at all."""
    out: list[str] = []
    places_run: list[str] = []
    runs = False
    for places, inv in located(texts, tests_mount):
        if inv.raw_program.endswith(".py") and "/" in inv.raw_program:  # a Python script run by path
            runs = True  # (Django's `./tests/runtests.py` in SWE-bench's scripts): its folder comes first
            folder = str(PurePosixPath(inv.raw_program).parent)
            if not re.search(r"[$`]", folder):
                out += [f for p in places if (f := _joined(p, folder)) not in out]
            continue
        if inv.program not in _RUNS_PYTHON:
            continue
        runs = True  # where it runs may be a folder the script does not name (`cd "$DIR"`): PATH's still count
        places_run += [p for p in places if p not in places_run]
        # `coverage run -m pytest` puts the folder first as `python -m` does
        first = _first_folder(inv.args) if inv.program == "python" else \
            _first_folder(inv.args[1:]) if inv.program == "coverage" and inv.args[:1] == ["run"] else None
        if first is not None and not re.search(r"[$`]", first):  # not a folder named by a variable
            out += [f for p in places if (f := _joined(p, first)) not in out]
    if not runs:
        return []
    for text in texts:
        for match in _PYTHONPATH.finditer(text):
            for part in match.group(2).split(":"):
                if part in ("$PYTHONPATH", "${PYTHONPATH}"):
                    continue
                if part in _HERE:
                    out += [f for p in places_run if (f := PYTHONPATH_MARK + p) not in out]
                elif "$" not in part and "`" not in part:
                    out += [f for p in places_run if (f := PYTHONPATH_MARK + _joined(p, part)) not in out]
    folders = [f for f in out if not (tests_mount and f.lstrip(PYTHONPATH_MARK).startswith("/")
                                      and under(f.lstrip(PYTHONPATH_MARK), tests_mount))]
    return [*folders[:16], ENVIRONMENT]


def shadowing_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                      snap, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    """The modules the shell listed (`PS` lines: written by the agent phase, named like the
    library's, in a first folder), but those the guard's main listing already reports: a pytest
    module at the top of / or in the workdir (findings.SHADOWING)."""
    workdir = run.workdir or ""
    found = []
    for path, digest in after.items():
        if digest == before.get(path, "-") or digest == "-":
            continue
        pure = PurePosixPath(path)
        if any(path.endswith("/" + s) for s in SHADOWING) and (
                str(pure.parent) == "/" or (workdir not in ("", "/") and under(path, workdir))):
            continue
        found.append(path)
    if not found:
        return []
    found.sort()
    return [entry("module_shadowing", "a module named like one of the Python library's (the standard library's, "
                  "pytest's or an installed package's), written where the verifier's Python looks before its library "
                  "(the folder `python -m` runs in, a console script's folder, PYTHONPATH): " + ", ".join(found[:5])
                  + (f" and {len(found) - 5} more" if len(found) > 5 else ""), paths=found[:ENTRY_PATHS],
                  by_command=attribute_command(actions, found[0], found[:5]))]


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# After the sweep, in each folder of `TBSCALE_PYTHON_PATH` (one a line, as python_folders names them;
# `:env` adds the folders of PATH and PYTHONPATH, an empty PYTHONPATH entry the exec's folder, and
# the `bin` of each project `.venv` the verifier's uv commands use), a `PS`
# line (`_fd`, guard_shell.PROJECT's) for each module changed since the baseline's clock whose name
# is the standard library's or pytest's (LIBRARY_NAMES; outside PYTHONPATH's folders, `+` lines, not
# STARTUP_MODULES) or one the interpreters on PATH, /usr and /usr/local find in their library folders: a file (or link) `NAME.py`, `NAME.pyc` or `NAME.*so`, a
# package's `NAME/__init__.*`, or a link NAME to a folder with an `__init__` (Python imports those).
# `_newer` (guard_shell._NEWER): `find -newerct`, or each path's status change second where find lacks it.
PYTHON_PATH = r'''
if [ -n "${TBSCALE_PYTHON_PATH+set}" ] && [ -n "${TBSCALE_SINCE:-}" ]; then
  _ppn=' @LIBRARY_NAMES@ '
  _pps=' @STARTUP_MODULES@ '
  # the `.venv` of each project the verifier's uv commands use (verifier_reads.project_envs): `uv run
  # pytest` starts the console script in its `bin`
  _ppe=$(for _s in ${TBSCALE_PROJECT_ENVS:-}; do _v=${_s#\?}
         case "$_v" in /*) ;; *) _v="${TBSCALE_WORKDIR:-$PWD}/$_v" ;; esac; [ -d "$_v" ] && printf '%s\n' "$_v"; done)
  _ppd=
  for _v in $( { for _i in python3 python; do _r=$(command -v "$_i" 2>/dev/null) && printf '%s\n' "${_r%/bin/*}"; done
                 echo /usr; echo /usr/local; printf '%s\n' "$_ppe"; } | sort -u); do
    for _d in "$_v"/lib/python3*; do [ -d "$_d" ] && _ppd="$_ppd $_d $(printf '%s ' "$_d"/*-packages)"; done
  done
  _pplib() { for _d in $_ppd; do [ -e "$_d/$1.py" ] || [ -e "$_d/$1/__init__.py" ] && return 0
             for _s in "$_d/$1".*so; do [ -e "$_s" ] && return 0; done; done; return 1; }
  { printf '%s\n' "$TBSCALE_PYTHON_PATH"
    case "$TBSCALE_PYTHON_PATH" in *:env*)
      printf '%s\n' "$PATH" | tr ':' '\n'
      [ -z "$_ppe" ] || printf '%s\n' "$_ppe" | sed 's|$|/bin|'
      [ -n "${PYTHONPATH:-}" ] && printf '%s\n' "$PYTHONPATH" | tr ':' '\n' | sed 's/^$/./; s/^/+/' ;; esac
  } | sort -u | while IFS= read -r _p; do
    case "$_p" in :env) continue ;; +*) _ppx=; _p=${_p#+} ;; *) _ppx=$_pps ;; esac
    case "$_p" in .) _p= ;; esac
    _at "$_p"; [ -d "$_p" ] || continue
    _newer "${_p%/}/" -mindepth 1 -maxdepth 2 | while IFS= read -r _f; do
      _r=${_f#"${_p%/}/"}
      case "$_r" in
        */*/*) continue ;;
        */__init__.*) _n=${_r%%/*} ;;
        */*) continue ;;
        *.py|*.pyc|*.so) _n=${_r%%.*} ;;
        *) [ -L "$_f" ] && [ -d "$_f" ] || continue  # a link to a package
           for _s in "$_f"/__init__.*; do [ -e "$_s" ] && break; _s=; done; [ -n "$_s" ] || continue; _n=$_r ;;
      esac
      case "$_ppx" in *" $_n "*) continue ;; esac  # imported before the folder was on sys.path
      case "$_ppn" in *" $_n "*) _fd PS "$_f" ;; *) _pplib "$_n" && _fd PS "$_f" ;; esac
    done
  done
fi
'''.replace("@LIBRARY_NAMES@", " ".join(LIBRARY_NAMES)).replace("@STARTUP_MODULES@", " ".join(STARTUP_MODULES))
