"""What the verifier's own `make` reads in the folder it runs in, besides the solution
(docs/tasks.md, "Verification integrity", *cargo, cmake and make*).

Public test scripts run make on the project's own makefiles: DevEval's C++ tasks (11 in
rese1f/terminal-bench-datasets) run `make test -f makefile_test` in `/app`, where the agent
worked and the task ships that file; 24 Harbor tasks mined from GitHub repositories
(sjarmak/CodeContextBench_Dashboard) run `make test` where they start. A project's Makefile is often
the solution's to change (a new source file, a flag), so it is not held to its baseline, except
where the verifier's command is written. What is `build_file_changed`:
* a makefile the script names (`-f FILE`, `--file=FILE`, `--makefile=FILE`), the verifier's own
  recipe for its tests, changed;
* which file make reads where it is given none: GNU make takes the first of `GNUmakefile`,
  `makefile` and `Makefile` there, so one added ahead of the baseline's shadows it (a `test:` rule
  that only prints success);
* in the makefile it reads there, read from outside, the rule of a target the script asks for
  (`make test`: `test`; none: the default goal, which must stay the same target), its recipe or
  prerequisites changed, or what decides how every recipe runs (`_CONTROL`: `MAKEFLAGS += -i`
  ignores the tests' failure). The rules of those prerequisites are the build's, and the
  solution's to change.
Where the baseline had no makefile, the project is the agent's, and its makefile its own.
The times make decides by are not reset here (runner/build_times.py covers cmake's build folders,
where the outputs are known; in a plain make project they lie among the sources; beside a
makefile for tests, runner/verifier_tests.py sets back a time set forward). The guard
shell's part: `MAKE` below."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from tbscale.runner.cmake_project import cmake_folders
from tbscale.runner.findings import file_state, grouped_entries
from tbscale.runner.script_folders import located
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

ORDER = ("GNUmakefile", "makefile", "Makefile")  # GNU make reads the first of these that exists
# a rule's first line: its targets, then `:` or `::` (not `:=`, `::=`, `:::=`, an assignment)
_RULE = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)(?!:=)")
# what decides how every recipe runs, whatever its rule says: the shell and flags make runs recipes
# with (`MAKEFLAGS += -i` ignores their failures, `SHELL = /bin/true` runs none), the default goal,
# makefiles read besides this one, and the special targets that ignore errors or change the shell
_CONTROL = re.compile(r"^\s*(?:(?:override|export)\s+)*(?:(?:MAKEFLAGS|GNUMAKEFLAGS|SHELL|\.SHELLFLAGS|MAKESHELL|"
                      r"MAKEFILES|\.DEFAULT_GOAL|\.RECIPEPREFIX)\s*(?:[:?+!]|::|:::)?=|-?include\s|sinclude\s)")
_SPECIAL = frozenset({".IGNORE", ".DEFAULT", ".ONESHELL", ".POSIX"})
_GOAL = re.compile(r"^\s*(?:override\s+)?\.DEFAULT_GOAL\s*(?:[:?+!]|::|:::)?=\s*(\S*)")


def _join(cwd: str, path: str) -> str:
    """`path` from the folder `cwd` ("" the workdir), as the scripts name it."""
    return posixpath.normpath(path) if path.startswith("/") else posixpath.normpath(posixpath.join(cwd or ".", path))


def make_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """`d:FOLDER` for each folder the verifier's `make` runs in without naming a makefile, and
    `f:PATH` for each makefile it names, as the scripts name them ("" the workdir), each followed by
    a tab and the targets it asks for (none: the makefile's first)."""
    out: list[str] = []
    # a build folder cmake writes is cmake_project's (its makefiles are cmake's)
    written = {line[2:] for line in cmake_folders(texts, tests_mount) if line.startswith("b:")}
    for places, inv in located(texts, tests_mount):
        if inv.program not in ("make", "gmake"):
            continue
        named, targets, folder, words, i = [], [], ".", inv.args, 0
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
            elif not w.startswith("-") and "=" not in w:  # `NAME=value` sets a variable
                targets.append(w)
            i += 1
        if "-" in named:  # `-f -`: a makefile on make's input, not from a folder
            named = [f for f in named if f != "-"]
            if not named:
                continue
        for place in places:
            where = _join(place, folder)
            if not named and ("" if where == "." else where) in written:
                continue
            lines = [f"f:{_join(where, f)}\t{' '.join(targets)}" for f in named] if named else \
                [f"d:{'' if where == '.' else where}\t{' '.join(targets)}"]
            out += [line for line in lines if line not in out and not line.startswith(("f:..", "d:.."))]
    return out[:12]


def makefile_rules(path: str, data: bytes) -> dict[str, Any]:
    """A makefile's rules as text by target (`rules`: each line that names the target before its
    `:`, a target-specific variable's too, with the recipe lines after it), the target make builds
    when asked for none (`first`: its first, or `.DEFAULT_GOAL`), and what decides how every recipe
    runs (`controls`: `_CONTROL`'s lines and the rules of `_SPECIAL`'s targets). Read from outside
    the environment."""
    rules: dict[str, list[str]] = {}
    controls: list[str] = []
    first = goal = None
    current: list[list[str]] = []
    for line in data.decode("utf-8", errors="replace").replace("\\\n", " ").splitlines():
        if line.startswith("\t"):
            for block in current:
                block.append(line)
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        current = []
        if _CONTROL.match(line):
            controls.append(line.strip())
            named = _GOAL.match(line)
            goal = named.group(1) if named and named.group(1) else goal
            continue
        head = _RULE.match(line)
        if head:
            for target in head.group(1).split():
                block = rules.setdefault(target, [])
                block.append(line)
                current.append(block)
                if first is None and not target.startswith(".") and "%" not in target:
                    first = target
    controls += [line for target in sorted(_SPECIAL & set(rules)) for line in rules[target]]
    return {"rules": {t: "\n".join(b) for t, b in rules.items()}, "first": goal or first, "controls": controls}


def make_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                 snap: GuardSnapshot, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    """The makefiles (`before`, `after`: path -> digest, `-` absent, `other`; guard_shell `MK`
    lines) that changed what the verifier's make does: a makefile the script names changed, a
    folder whose first makefile is another than at the baseline, or, in the one it reads there, the
    rule of a target the script asks for (`run.folders`, `make_folders`' lines; the makefile's first
    target when it asks for none), read from outside as `makefile_rules` (`read_before`,
    `read_after`). A named file with one of make's own names (`-f Makefile`) counts as its folder's."""
    found = [f"{path} ({file_state(before.get(path, '-'), now)})" for path, now in after.items()
             if posixpath.basename(path) not in ORDER and now != before.get(path, "-")]
    places = sorted({posixpath.dirname(p) for p in after if posixpath.basename(p) in ORDER})
    asked = _targets(run)
    for folder in places:
        first = [next((n for n in ORDER if look.get(f"{folder}/{n}", "-") != "-"), None) for look in (before, after)]
        if first[0] is not None and first[1] != first[0]:
            found.append(f"{folder}/{first[1] or first[0]} (make now reads {first[1] or 'no makefile'} there, "
                         f"not the baseline's {first[0]})")
        elif first[0] is not None:
            path = f"{folder}/{first[0]}"
            was, now = read_before.get(path) or {}, read_after.get(path) or {}
            if before.get(path) == after.get(path) or not was or not now:
                continue
            if was.get("controls") != now.get("controls"):
                found.append(f"{path} (how make runs every recipe: its shell, flags, default goal, special "
                             f"targets or the makefiles it includes)")
            targets = asked.get(folder) or [None]
            if None in targets and was.get("first") != now.get("first"):
                found.append(f"{path} (make's default goal is now `{now.get('first')}`, not `{was.get('first')}`)")
            for target in dict.fromkeys(t or was.get("first") for t in targets):
                if target and was["rules"].get(target) != now["rules"].get(target):
                    found.append(f"{path} (the rule of `{target}` the verifier's make runs)")
    return grouped_entries([("build_file_changed", found, "what the verifier's make does was changed: a makefile "
                             "its script names, which makefile it takes where it names none, or the rule of a "
                             "target it asks for")], actions)


def _targets(run: ToolRun) -> dict[str, list[str | None]]:
    """The targets make is asked for in each folder (`d:` lines; None: the makefile's first), by
    the folder's path as the guard shell resolved it."""
    asked: dict[str, list[str | None]] = {}
    for line in run.folders:
        if line.startswith("d:"):
            folder, _, targets = line[2:].partition("\t")
            path = folder if folder.startswith("/") else posixpath.join(run.workdir or "/", folder)
            asked.setdefault(posixpath.normpath(path), []).extend(targets.split() or [None])
    return asked


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# `TBSCALE_MAKE`, one a line as `make_folders` names them (the targets after a tab are make_changed's):
# an `MK` line for a named makefile (`f:`) and for each of the three names make looks for in a folder
# (`d:`); `_fd` and `_at` are guard_shell.PROJECT's.
MAKE = r'''
if [ -n "${TBSCALE_MAKE+set}" ]; then
  _tab=$(printf '\t')
  printf '%s\n' "$TBSCALE_MAKE" | while IFS= read -r _p; do
    _k=${_p%%:*}; _p=${_p#*:}; _p=${_p%%"$_tab"*}
    _at "$_p"
    if [ "$_k" = f ]; then _fd MK "$_p"; else for _f in __ORDER__; do _fd MK "${_p%/}/$_f"; done; fi
  done
fi
'''.replace("__ORDER__", " ".join(ORDER))
