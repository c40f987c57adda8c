"""What the verifier's go commands read besides the code under test, and what the agent phase changed
there (docs/tasks.md, "Verification integrity", *go*).

Test scripts run `go test -v ./...` where the agent worked: the 223 SWE-bench Pro Go instances of
sjarmak/CodeContextBench_Dashboard (`cd /app || cd /testbed || cd /workspace`), terminal-bench's
Aider Polyglot Go tasks (`cd /app`). Before 2026-12-05 each of these passed such a test with
nothing recorded: `go env -w GOFLAGS=-run=^$` (no test runs, `ok`), a `_test.go` of the agent's
whose `TestMain` exits 0 before the tests, a `replace` in go.mod that takes a module from a folder
of the agent's. So:
* Go's settings files (the user's `go env -w` file, `$GOROOT/go.env`) are digested at the baseline
  and after the agent phase: a change is `installer_config_changed`;
* in each folder the verifier's go commands run in, go.mod is read from outside: a `replace`
  directive added or changed is `project_source_added`, and so is a go.work added or changed
  there or in a folder above it (it decides which modules the build takes) or a vendor/modules.txt
  (the modules `-mod=vendor` takes, the default where it is);
* a `_test.go` file under those folders that the agent phase wrote and that declares `TestMain`
  (which decides what the test binary runs, and its exit status) or an `init` function (which runs
  before any test: `os.Exit(0)` there is `ok`) is `test_config_planted`.
The guard shell's part: `GO` below, and the `GT` lines of guard_shell.CHANGES."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from tbscale.runner.findings import file_state, grouped_entries
from tbscale.runner.script_folders import located
from tbscale.types.guard import Tampering

# go's subcommands that build or run the module in the folder they run in
_BUILDS = frozenset({"test", "build", "run", "vet", "install", "generate", "list"})
GO_READ = ("go.mod",)  # read from outside (`go_settings`)
MODULE_FILES = ("go.mod", "go.work", "vendor/modules.txt")


def go_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """The folders the verifier's `go test`, `go build`, `go run`, ... run in, as the scripts name
    them ("" the workdir; runner/script_folders.py)."""
    out: list[str] = []
    for places, inv in located(texts, tests_mount):
        if inv.program == "go" and inv.args[:1] and inv.args[0] in _BUILDS:
            out += [p for p in places if p not in out]
    return out[:8]


_REPLACE_BLOCK = re.compile(r"^replace\s*\(\s*$(.*?)^\s*\)", re.M | re.S)
_REPLACE_LINE = re.compile(r"^replace\s+(?!\()(.+)$", re.M)


def go_settings(path: str, data: bytes) -> dict[str, list[str]]:
    """What in a go.mod decides which code a build takes from elsewhere: its `replace` directives
    and its `toolchain` line (go 1.21 and later switch to the toolchain it names), as `replaces`,
    comments and spacing aside."""
    text = re.sub(r"//[^\n]*", "", data.decode("utf-8", errors="replace"))
    found = [m.group(1) for m in _REPLACE_LINE.finditer(text)]
    for block in _REPLACE_BLOCK.finditer(text):
        found += [line for line in block.group(1).splitlines() if line.strip()]
    toolchains = [f"toolchain {m.group(1)}" for m in re.finditer(r"^toolchain\s+(\S+)", text, re.M)]
    return {"replaces": sorted({"replace " + " ".join(r.split()) for r in found} | set(toolchains))}


def go_changed(before: dict[str, str], after: dict[str, str], read_before: dict[str, dict | None],
               read_after: dict[str, dict | None], test_mains: list[str],
               actions: list[tuple[int, str]]) -> list[Tampering]:
    """The go files (`before`, `after`: path -> digest, `-` absent, `other` a link, not a plain file
    or over 4 MB; guard_shell `GO` lines) that changed, go.mod read as `go_settings` at the baseline
    and after the sweep; `test_mains`: the `_test.go` files the agent phase wrote that declare
    `TestMain` (`GT` lines)."""
    settings, sources = [], []
    for path, now in after.items():
        was = before.get(path, "-")
        if now == was:
            continue
        state = file_state(was, now)
        name = PurePosixPath(path).name
        if name in ("env", "go.env"):
            settings.append(f"{path} ({state})")
        elif name == "go.mod" and now not in ("-", "other"):
            new, old = read_after.get(path) or {}, read_before.get(path) or {}
            sources += [f"{path}: {r}" for r in new.get("replaces", []) if r not in old.get("replaces", [])]
        elif now != "-":
            sources.append(f"{path} ({state})")
    return grouped_entries([
            ("installer_config_changed", settings, "a setting go reads (`go env -w`: the flags every go command "
             "takes, where modules come from) was added, changed or removed"),
            ("project_source_added", sources, "the module the verifier's go commands build now takes code from "
             "elsewhere (a `replace` in go.mod, a go.work, vendored modules)"),
            ("test_config_planted", test_mains, "a test file the agent phase wrote declares `TestMain` or an `init` "
             "function, which decide what the verifier's `go test` runs and how it exits")], actions)


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# The folders where the verifier's go commands run (`TBSCALE_GO`, one a line, as
# runner/go_project.go_folders names them): a `GO` line for go's settings files (the user's `go env -w`
# file, `$GOROOT/go.env`) and, in each folder, its go.mod and vendor/modules.txt and the go.work there
# or in a folder above it (go looks for one upwards); `_fd` and `_at` are guard_shell.PROJECT's.
GO = r'''
if [ -n "${TBSCALE_GO+set}" ]; then
  _groot=; _r=$(command -v go 2>/dev/null) && _r=$(readlink -f -- "$_r" 2>/dev/null) && _groot=${_r%/bin/go}
  for _f in "${XDG_CONFIG_HOME:-$HOME/.config}/go/env" ${_groot:+"$_groot/go.env"}; do _fd GO "$_f"; done
  printf '%s\n' "$TBSCALE_GO" | while IFS= read -r _p; do
    _at "$_p"
    _fd GO "${_p%/}/go.mod"; _fd GO "${_p%/}/vendor/modules.txt"
    _up=${_p%/}
    while :; do _fd GO "$_up/go.work"; [ -n "$_up" ] || break; _up=${_up%/*}; done
  done
fi
'''
