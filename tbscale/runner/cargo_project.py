"""What the verifier's cargo commands read besides the code under test, and what the agent phase
changed there (docs/tasks.md, "Verification integrity", *cargo and cmake*).

terminal-bench's Aider Polyglot Rust tasks (30 in rese1f/terminal-bench-datasets) run `cd /app`
then `cargo test --verbose`, in the folder the agent worked in, and their instruction names
Cargo.toml among the files to change. Before 2026-12-05 each of these made a failing solution pass
with nothing recorded: a `runner = "true"` in a `.cargo/config.toml` (cargo then runs each test
binary through `true`), `autotests = false` in Cargo.toml (the tests in `tests/` are not built),
a `build.rs` (code that runs before the tests are compiled, and can rewrite them). So:
* cargo's settings files, the user's (`$CARGO_HOME/config.toml`) and the `.cargo/config.toml` of
  each folder from where cargo runs up to `/`, and rustup's (`settings.toml`, whose directory
  overrides name a folder's toolchain, and the `rust-toolchain` files there),
  are digested at the baseline and after the agent phase: a change is `installer_config_changed`;
* Cargo.toml there and above (a workspace's root) is read from outside: what decides which targets
  `cargo test` builds and how (`[lib]`, `[[test]]`, `autotests`, `build`, the profiles, the
  workspace) changed is `build_file_changed`, and a dependency taken from a path or a git
  repository, or a `[patch]`, is `project_source_added`. Dependencies from the registry are
  the solution's own business (the instruction asks for Cargo.toml);
* a `build.rs` added or changed beside a Cargo.toml is `build_file_changed`.
A package the agent made where the verifier's cargo runs (no Cargo.toml there at the baseline: a
task whose solution is the whole project) is the solution: its Cargo.toml is flagged only where it
decides targets (`autotests`, `[[test]]`, profiles, a workspace: what `cargo init` does not write,
and cargo finds the tests without), and its build.rs still is. The guard shell's part: `CARGO` below."""

from __future__ import annotations

import tomllib
from pathlib import PurePosixPath
from typing import Any

from tbscale.runner.findings import file_state, grouped_entries
from tbscale.runner.script_folders import located
from tbscale.types.guard import GuardSnapshot, Tampering

# cargo's subcommands that build (and run) the package in the folder they run in
_BUILDS = frozenset({"test", "t", "build", "b", "run", "r", "check", "c", "bench", "nextest", "llvm-cov", "tarpaulin"})
CARGO_READ = ("Cargo.toml",)  # read from outside (`cargo_settings`)
SETTINGS = ("config.toml", "config", "rust-toolchain", "rust-toolchain.toml", "settings.toml")
# Cargo.toml's tables and keys that decide which targets are built and run, and how; dependencies
# and the package's description are left to the solution
_TARGET_TABLES = ("lib", "bin", "test", "example", "bench", "profile", "workspace", "features")
_PACKAGE_KEYS = ("build", "links", "autotests", "autobins", "autoexamples", "autobenches", "autolib", "workspace")
_DEPENDENCY_TABLES = ("dependencies", "dev-dependencies", "build-dependencies")


def cargo_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """The folders the verifier's `cargo test`, `cargo build`, ... run in, as the scripts name them
    ("" the workdir; runner/script_folders.py)."""
    out: list[str] = []
    for places, inv in located(texts, tests_mount):
        if inv.program == "cargo" and any(a in _BUILDS for a in inv.args[:3] if not a.startswith("-")):
            out += [p for p in places if p not in out]
    return out[:8]


def _sources(deps: Any) -> list[str]:
    """The dependencies of a dependency table taken from a path or a git repository."""
    if not isinstance(deps, dict):
        return []
    return sorted(f"{name} = {spec!r}" for name, spec in deps.items()
                  if isinstance(spec, dict) and ({"path", "git"} & set(spec)))


def cargo_settings(path: str, data: bytes) -> dict[str, Any]:
    """What in a Cargo.toml decides the verifier's build: `build` (the tables and keys that decide
    which targets are built and run, and how) and `sources` (dependencies from a path or git, the
    `[patch]` and `[replace]` tables). A Cargo.toml that does not parse is `{"unreadable": True}`:
    cargo would not build from it either."""
    try:
        doc = tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError:
        return {"unreadable": True}
    package = doc.get("package") if isinstance(doc.get("package"), dict) else {}
    build = {key: doc[key] for key in _TARGET_TABLES if key in doc}
    build["package"] = {key: package[key] for key in _PACKAGE_KEYS if key in package}
    sources = [f"[{table}] {s}" for table in _DEPENDENCY_TABLES for s in _sources(doc.get(table))]
    for triple, table in (doc.get("target") or {}).items() if isinstance(doc.get("target"), dict) else ():
        if isinstance(table, dict):
            sources += [f"[target.{triple}.{t}] {s}" for t in _DEPENDENCY_TABLES for s in _sources(table.get(t))]
            rest = {k: v for k, v in table.items() if k not in _DEPENDENCY_TABLES}
            if rest:
                build.setdefault("target", {})[triple] = rest
    for table in ("patch", "replace"):
        if doc.get(table):
            sources.append(f"[{table}] {doc[table]!r}")
    return {"build": build, "sources": sorted(sources)}


_INIT: dict[str, Any] = {"build": {"package": {}}, "sources": []}  # `cargo_settings` of what `cargo init` writes


def cargo_changed(before: dict[str, str], after: dict[str, str], read_before: dict[str, dict | None],
                  read_after: dict[str, dict | None], snap: GuardSnapshot,
                  actions: list[tuple[int, str]]) -> list[Tampering]:
    """The cargo files (`before`, `after`: path -> digest, `-` absent, `other` a link, not a plain
    file or over 4 MB; guard_shell `CG` lines) that changed, Cargo.toml read as `cargo_settings` at
    the baseline and after the sweep. A package the agent phase made where the verifier's cargo runs
    (no Cargo.toml there at the baseline) is the solution itself: its Cargo.toml counts only where
    it decides targets, as one `cargo init` writes does not."""
    settings, builds, sources = [], [], []
    # the folders cargo runs in are those with a build.rs line (CARGO lists one for those alone)
    runs = {str(PurePosixPath(p).parent) for p in after if PurePosixPath(p).name == "build.rs"}
    own = {folder for folder in runs if before.get(f"{folder.rstrip('/')}/Cargo.toml", "-") == "-"}
    for path, now in after.items():
        was = before.get(path, "-")
        if now == was:
            continue
        state, name = file_state(was, now), PurePosixPath(path).name
        if name in SETTINGS:
            settings.append(f"{path} ({state})")
        elif name == "build.rs":
            if now != "-":
                builds.append(f"{path} ({state})")
        elif name == "Cargo.toml" and now == "other":
            builds.append(f"{path} ({state})")
        elif name == "Cargo.toml" and now != "-":
            new, old = read_after.get(path) or {}, read_before.get(path) or {}
            if str(PurePosixPath(path).parent) in own:
                old = _INIT  # the agent's own package: measured against what `cargo init` writes
            if (was == "-" and old is not _INIT) or new.get("unreadable") or new.get("build") != old.get("build"):
                builds.append(f"{path} ({state}: {_what_changed(old, new)})")
            sources += [f"{path}: {s}" for s in new.get("sources", []) if s not in old.get("sources", [])]
    return grouped_entries([
            ("installer_config_changed", settings, "a setting cargo or rustup reads (a test runner, a compiler "
             "wrapper, flags, the toolchain) was added, changed or removed"),
            ("build_file_changed", builds, "what decides which targets the verifier's cargo builds and runs "
             "(Cargo.toml's targets, `autotests`, profiles, workspace; a build script) was changed"),
            ("project_source_added", sources, "the package the verifier's cargo builds now takes code from "
             "elsewhere (a path or git dependency, a `[patch]`)")], actions)


def _what_changed(old: dict, new: dict) -> str:
    if new.get("unreadable"):
        return "does not parse"
    keys = sorted({k for k in {**old.get("build", {}), **new.get("build", {})}
                   if (old.get("build") or {}).get(k) != (new.get("build") or {}).get(k)})
    return "new" if not old else ", ".join(keys) or "build"


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# The folders where the verifier's cargo commands run (`TBSCALE_CARGO`, one a line, as
# `cargo_folders` names them): a `CG` line for the user's cargo settings and rustup's (its directory
# overrides name the toolchain a folder builds with) and, in each folder and each
# folder above it (cargo and rustup look upwards), its Cargo.toml, `.cargo/config(.toml)` and
# `rust-toolchain(.toml)`, and the folder's build.rs; `_fd` and `_at` are guard_shell.PROJECT's.
CARGO = r'''
if [ -n "${TBSCALE_CARGO+set}" ]; then
  _ch=${CARGO_HOME:-$HOME/.cargo}
  for _f in "$_ch/config.toml" "$_ch/config" "${RUSTUP_HOME:-$HOME/.rustup}/settings.toml"; do _fd CG "$_f"; done
  printf '%s\n' "$TBSCALE_CARGO" | while IFS= read -r _p; do
    _at "$_p"
    _fd CG "${_p%/}/build.rs"
    _up=${_p%/}
    while :; do
      for _f in Cargo.toml .cargo/config.toml .cargo/config rust-toolchain rust-toolchain.toml; do _fd CG "$_up/$_f"; done
      [ -n "$_up" ] || break; _up=${_up%/*}
    done
  done
fi
'''
