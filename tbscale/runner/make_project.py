"""What the verifier's own `make` reads in the folder it runs in, besides the solution
(docs/tasks.md, "Verification integrity", *cargo, cmake and make*).

Public test scripts run make on the project's own makefiles: DevEval's C++ tasks (11 in
rese1f/terminal-bench-datasets) run `make test -f makefile_test` in `/app`, where the agent
worked and the task ships that file; 24 Harbor tasks mined from GitHub repositories
(sjarmak/CodeContextBench_Dashboard) run `make test` where they start. A project's Makefile is often
the solution's to change (a new source file, a flag), so it is not held to its baseline. What is:
* a makefile the script names (`-f FILE`, `--file=FILE`, `--makefile=FILE`): the verifier's own
  recipe for its tests; a change is `build_file_changed`;
* which file make reads where it is given none: GNU make takes the first of `GNUmakefile`,
  `makefile` and `Makefile` there, so one added ahead of the baseline's shadows it (a `test:` rule
  that only prints success); a different first file is `build_file_changed`. Where the baseline had
  none, the project is the agent's, and its makefile its own.
The times make decides by are not reset here (runner/build_times.py covers cmake's build folders,
where the outputs are known; in a plain make project they lie among the sources). The guard
shell's part: `MAKE` below."""

from __future__ import annotations

import posixpath

from tbscale.runner.cmake_project import cmake_folders
from tbscale.runner.findings import file_state, grouped_entries
from tbscale.runner.script_folders import located
from tbscale.types.guard import GuardSnapshot, Tampering

ORDER = ("GNUmakefile", "makefile", "Makefile")  # GNU make reads the first of these that exists


def _join(cwd: str, path: str) -> str:
    """`path` from the folder `cwd` ("" the workdir), as the scripts name it."""
    return posixpath.normpath(path) if path.startswith("/") else posixpath.normpath(posixpath.join(cwd or ".", path))


def make_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """`d:FOLDER` for each folder the verifier's `make` runs in without naming a makefile, and
    `f:PATH` for each makefile it names, as the scripts name them ("" or "." the workdir)."""
    out: list[str] = []
    # a build folder cmake writes is cmake_project's (its makefiles are cmake's)
    written = {line[2:] for line in cmake_folders(texts, tests_mount) if line.startswith("b:")}
    for places, inv in located(texts, tests_mount):
        if inv.program not in ("make", "gmake"):
            continue
        named, folder, words, i = [], ".", inv.args, 0
        while i < len(words):
            w, value = words[i], words[i + 1] if i + 1 < len(words) else None
            if w in ("-f", "--file", "--makefile") and value is not None:
                named.append(value)
                i += 1
            elif w in ("-C", "--directory") and value is not None:
                folder = posixpath.join(folder, value)
                i += 1
            elif w.startswith(("--file=", "--makefile=")):
                named.append(w.split("=", 1)[1])
            elif w.startswith("--directory="):
                folder = posixpath.join(folder, w.split("=", 1)[1])
            elif w.startswith(("-f", "-C")) and len(w) > 2:
                if w[1] == "f":
                    named.append(w[2:])
                else:
                    folder = posixpath.join(folder, w[2:])
            i += 1
        if "-" in named:  # `-f -`: a makefile on make's input, not from a folder
            named = [f for f in named if f != "-"]
            if not named:
                continue
        for place in places:
            where = _join(place, folder)
            if not named and ("" if where == "." else where) in written:
                continue
            lines = [f"f:{_join(where, f)}" for f in named] if named else [f"d:{'' if where == '.' else where}"]
            out += [line for line in lines if line not in out and not line.startswith(("f:..", "d:.."))]
    return out[:12]


def make_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                 snap: GuardSnapshot, actions: list[tuple[int, str]]) -> list[Tampering]:
    """The makefiles (`before`, `after`: path -> digest, `-` absent, `other`; guard_shell `MK`
    lines) that changed what the verifier's make reads: a makefile the script names changed, or a
    folder whose first makefile is another than at the baseline. A named file with one of make's
    own names (`-f Makefile`) counts as its folder's: the solution may change that one."""
    found = [f"{path} ({file_state(before.get(path, '-'), now)})" for path, now in after.items()
             if posixpath.basename(path) not in ORDER and now != before.get(path, "-")]
    for folder in sorted({posixpath.dirname(p) for p in after if posixpath.basename(p) in ORDER}):
        first = [next((n for n in ORDER if look.get(f"{folder}/{n}", "-") != "-"), None) for look in (before, after)]
        if first[0] is not None and first[1] != first[0]:
            found.append(f"{folder}/{first[1] or first[0]} (make now reads {first[1] or 'no makefile'} there, "
                         f"not the baseline's {first[0]})")
    return grouped_entries([("build_file_changed", found, "what the verifier's make reads was changed: a makefile "
                             "its script names, or which makefile it takes where it names none")], actions)


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# `TBSCALE_MAKE`, one a line as `make_folders` names them: an `MK` line for a named makefile (`f:`)
# and for each of the three names make looks for in a folder (`d:`); `_fd` is guard_shell.PROJECT's.
MAKE = r'''
if [ -n "${TBSCALE_MAKE+set}" ]; then
  _w=${TBSCALE_WORKDIR:-$PWD}
  printf '%s\n' "$TBSCALE_MAKE" | while IFS= read -r _p; do
    _k=${_p%%:*}; _p=${_p#*:}
    case "$_p" in /*) ;; ''|.) _p=$_w ;; *) _p=${_w%/}/$_p ;; esac
    if [ "$_k" = f ]; then _fd MK "$_p"; else for _f in __ORDER__; do _fd MK "${_p%/}/$_f"; done; fi
  done
fi
'''.replace("__ORDER__", " ".join(ORDER))
