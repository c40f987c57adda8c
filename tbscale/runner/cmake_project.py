"""What the verifier's cmake and make read besides the code under test, and what the agent phase
changed there (docs/tasks.md, "Verification integrity", *cargo and cmake*).

terminal-bench's Aider Polyglot C++ tasks (26 in rese1f/terminal-bench-datasets) run, in the folder
the agent worked in, `mkdir -p build && cd build`, `cmake .. && make`, and pass when the build
succeeds: the project's CMakeLists.txt runs the tests as part of the build (`add_custom_target(...
ALL ... COMMAND ${exercise})`), and the test binaries the script then runs by `find ... -exec`
cannot fail it (find exits 0). Before 2026-12-05 a failing solution passed with nothing recorded
when the agent took that line out of CMakeLists.txt, or left a `GNUmakefile` in `build` (make
reads it before the Makefile cmake writes). So:
* in each source folder the verifier's cmake configures, its CMakeLists.txt files and the `.cmake`
  files beside them (cmake's own output aside) are digested at the baseline and after the agent
  phase: a change is `build_file_changed`, unless the folder had no CMakeLists.txt at the baseline
  (the project is the agent's: the solution itself);
* in each build folder where its cmake writes a Makefile and its make runs, a `GNUmakefile` or
  `makefile` (which make reads first) is `build_file_changed` too.
The guard shell's part: `CMAKE` below."""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath

from tbscale.runner.findings import file_state, grouped_entries, under
from tbscale.runner.script_folders import located
from tbscale.types.guard import GuardSnapshot, Tampering

# cmake's options that take a value as the next word (the rest are flags or `-DX=Y` in one word)
_WITH_VALUE = frozenset({"-S", "-B", "-G", "-T", "-A", "-C", "-D", "-U", "--preset", "--toolchain",
                         "--install-prefix", "--graphviz", "--log-level", "-P"})
# what cmake writes into a build folder that ends in .cmake (its CMakeFiles folder is skipped whole)
GENERATED = ("cmake_install.cmake", "CTestTestfile.cmake", "CPackConfig.cmake", "CPackSourceConfig.cmake")
MAKEFILES = ("GNUmakefile", "makefile")  # read by make before the Makefile cmake writes


def _join(cwd: str, path: str) -> str | None:
    """`path` from the folder `cwd` ("" the workdir), None outside what the script names."""
    if path.startswith("/"):
        return posixpath.normpath(path)
    folder = posixpath.normpath(posixpath.join(cwd or ".", path))
    if folder == ".":
        return ""
    return None if folder == ".." or folder.startswith("../") else folder


def cmake_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """`s:FOLDER` for each source folder the verifier's cmake configures and `b:FOLDER` for each build
    folder it writes (where its `make` runs), as the scripts name them ("" the workdir)."""
    sources: list[str] = []
    builds: list[str] = []
    makes: list[str] = []
    for places, inv in located(texts, tests_mount):
        if inv.program == "make":
            makes += places
        if inv.program != "cmake" or not inv.args or inv.args[0] in ("--build", "--install", "-E", "-P", "--version"):
            continue
        source = build = None
        words, i = inv.args, 0
        while i < len(words):
            w = words[i]
            if w in ("-S", "-B") and i + 1 < len(words):
                source, build = (words[i + 1], build) if w == "-S" else (source, words[i + 1])
            elif w.startswith(("-S", "-B")) and len(w) > 2:
                source, build = (w[2:], build) if w[1] == "S" else (source, w[2:])
            elif not w.startswith("-"):
                source = source or w
            i += 2 if w in _WITH_VALUE else 1
        for place in places:
            src, out = _join(place, source or "."), _join(place, build or ".")
            sources += [s for s in [src] if s is not None and s not in sources]
            builds += [b for b in [out] if b is not None and b not in builds]
    return ([f"s:{s}" for s in sources] + [f"b:{b}" for b in builds if b in makes])[:12]


def cmake_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                  snap: GuardSnapshot, actions: list[tuple[int, str]]) -> list[Tampering]:
    """The cmake files (`before`, `after`: path -> digest, `-` absent, `other`; guard_shell `CM`
    lines) that changed: build files of the sources, a makefile that make reads before cmake's. A
    source folder without a CMakeLists.txt at the baseline holds a project the agent phase made,
    the solution itself: its build files are its own (a makefile before cmake's still counts)."""
    own = [str(PurePosixPath(p).parent) for p, d in before.items() if d == "-" and PurePosixPath(p).name == "CMakeLists.txt"]
    found = [f"{path} ({file_state(before.get(path, '-'), now)})" for path, now in after.items()
             if now != before.get(path, "-") and not (now == "-" and PurePosixPath(path).name in MAKEFILES)
             and (PurePosixPath(path).name in MAKEFILES or not any(under(path, folder) for folder in own))]
    return grouped_entries([("build_file_changed", found, "the build files the verifier's cmake and make read "
                             "(which decide what is built and whether the tests run) were changed")], actions)


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# `TBSCALE_CMAKE`, one a line as `cmake_folders` names them: for a source folder (`s:`) a `CM` line for
# each CMakeLists.txt and .cmake file in it and below it (four levels; not in cmake's CMakeFiles, a
# build folder the scripts name below it, .git or node_modules; not what cmake writes); for a build folder
# (`b:`) a `CM` line for its GNUmakefile and makefile. `_fd` and `_at` are guard_shell.PROJECT's.
CMAKE = r'''
if [ -n "${TBSCALE_CMAKE+set}" ]; then
  _cb=$(printf '%s\n' "$TBSCALE_CMAKE" | while IFS= read -r _p; do
    case "$_p" in b:*) _at "${_p#b:}"; printf '%s\n' "$_p";; esac
  done)
  printf '%s\n' "$TBSCALE_CMAKE" | while IFS= read -r _p; do
    _k=${_p%%:*}; _p=${_p#*:}
    _at "$_p"
    if [ "$_k" = b ]; then
      for _f in __MAKEFILES__; do _fd CM "${_p%/}/$_f"; done
    else
      _fd CM "${_p%/}/CMakeLists.txt"  # `-` when the project is not there yet: the agent's own, then
      [ -d "$_p" ] && find "$_p" -maxdepth 4 \( -name CMakeFiles -o -name .git -o -name node_modules \) -prune -o \
        \( -name CMakeLists.txt -o -name '*.cmake' \) ! -name __GENERATED__ -print 2>/dev/null | head -n 500 |
      while IFS= read -r _f; do
        _skip=; for _b in $_cb; do [ "${_b%/}" = "${_p%/}" ] || case "$_f" in "${_b%/}"/*) _skip=1;; esac; done
        [ -n "$_skip" ] || _fd CM "$_f"
      done
    fi
  done
fi
'''.replace("__MAKEFILES__", " ".join(MAKEFILES)).replace(
    "! -name __GENERATED__", " ".join(f"! -name {n}" for n in GENERATED))
