"""What the verifier guard's checks find (runner/guard.py): the tampering entries read off two
snapshots of what the verifier depends on, and the review of a verdict in their light (an
obstructed verifier is the agent's failure, not the harness's). Pure functions: no environment.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import PurePosixPath
from collections.abc import Callable
from typing import Any

from tbscale.shell.tampering import attribute_command
from tbscale.types.guard import GuardSnapshot, Tampering

VERIFIER_LOGS = "/logs/verifier"
REWARD_FILES = ("reward.txt", "reward.json")
# Files that change what a Python test run does without touching the tests (the interpreter loads
# them at start-up, or pytest reads them from the tests' folder and its ancestors).
STARTUP_HOOKS = ("sitecustomize.py", "usercustomize.py")
PYTEST_CONFIGS = ("conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
SHADOWING = ("pytest.py", "pytest/__init__.py", "_pytest/__init__.py")
_SITE = re.compile(r"/(site|dist)-packages/")
# pytest's own packages and the ones it imports on every run (runner/guard.py `_CHANGES` lists them).
TEST_RUNNER = re.compile(r"/(site|dist)-packages/(_pytest|pytest|pluggy|iniconfig|packaging|exceptiongroup|tomli)(/|$)"
                          r"|/(site|dist)-packages/(py|pytest)\.py$")
# The interpreter's own library: the standard modules (outside the packages' folders) and a zip of
# them, which sys.path puts before the folder (/usr/lib/python311.zip).
_PYTHON_LIBRARY = re.compile(r"^/(usr/|usr/local/)?lib/python3[0-9.]*(/|\.zip$)")
_PYTHON_SETTINGS = re.compile(r"^/etc/python3[0-9.]*(/|$)")  # Debian's sitecustomize.py lives here
# A folder of the library, one right under it (dist-packages, lib-dynload), or any path in the
# standard library that is not a module: listed by the check inside only when it was made a link
# (guard_shell.CHANGES), whose target is not walked (and a virtualenv's the verifier activates,
# wherever it is). What is inside a packages folder is not: those the check lists are judged above.
_LIBRARY_FOLDER = re.compile(r"^/(.+/)?lib/python3[0-9.]*(/[^/]+)*$")
# The files pip and uv read their settings from, system-wide and under each home (pip also beside
# the interpreter, in sys.prefix): an index or find-links there decides what a test script's `pip
# install pytest` or `uvx ... pytest` installs. The shell lists them (guard_shell.CHANGES), root's
# home and each one under /home. uv.toml also counts at the top of / and in the workdir
# (checked_path), where uv looks from the script's working folder up. The files, not their folders:
# uv's installer writes a receipt beside uv.toml.
INSTALLER_SETTINGS = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", "/usr/pip.conf", "/usr/local/pip.conf",
                      "/etc/uv/uv.toml", "/etc/xdg/uv/uv.toml")
HOME_INSTALLER_SETTINGS = (".pip/pip.conf", ".config/pip/pip.conf", ".config/uv/uv.toml")
_INSTALLER_CONFIG = re.compile("^(" + "|".join(map(re.escape, INSTALLER_SETTINGS)) + "|/(root|home/[^/]+)/("
                               + "|".join(map(re.escape, HOME_INSTALLER_SETTINGS)) + "))$")
INSTALLER_CONFIG = "uv.toml"
VENV_INSTALLER_CONFIG = "pip.conf"  # in the workdir: a virtualenv's there, which a test script may install into


# The lines of the env script an installer writes to put its folder first on PATH, as the guard
# digests them (guard_shell.SOURCED: comment lines and blanks dropped): uv's installer (cargo-dist's
# template) writes it to ~/.local/bin/env and keeps one already there; rustup writes the same lines
# to ~/.cargo/env. A script the verifier sources with these lines is what an honest install leaves.
_ENV_SCRIPT_LINES = ('case ":${{PATH}}:" in', '*:"{0}":*)', ";;", "*)", 'export PATH="{0}:$PATH"', ";;", "esac")
INSTALLER_ENV_SCRIPTS = frozenset(
    hashlib.sha256("".join(line.format(folder) + "\n" for line in _ENV_SCRIPT_LINES).encode()).hexdigest()
    for folder in ("$HOME/.local/bin", "$HOME/.cargo/bin"))


ENTRY_PATHS = 20  # the paths an entry names at most (its detail names the first 5)


def entry(kind: str, detail: str, **more: Any) -> Tampering:
    return {  # type: ignore[return-value]  (`more` holds Tampering's optional keys)
        "kind": kind, "source": "environment", "detail": detail, **{k: v for k, v in more.items() if v is not None}}


def listed_entry(kind: str, what: str, found: list[str], actions: list[tuple[int, str]]) -> Tampering:
    """An entry that says `what` and lists the first five of the paths `found` (and names the first
    ENTRY_PATHS), with the command that wrote the first; `what` alone where none was listed."""
    listed = (": " + ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")) if found else ""
    return entry(kind, what + listed, paths=found[:ENTRY_PATHS] or None,
                 by_command=attribute_command(actions, PurePosixPath(found[0]).name, found[:5]) if found else None)


def file_state(was: str, now: str) -> str:
    """How a digested file changed: digests `-` absent, `other` a link, not a plain file or over 4 MB."""
    return "removed" if now == "-" else "added" if was == "-" else \
        "a link, not a plain file, or over 4 MB" if now == "other" else "changed"


def grouped_entries(groups: list[tuple[str, list[str], str]], actions: list[tuple[int, str]]) -> list[Tampering]:
    """One entry for each (kind, findings, what) with findings, each finding a path with what was
    found of it after it (` (added)`, `: replace ...`, ` scripts.test = ...`)."""
    out = []
    for kind, found, what in groups:
        if found:
            paths = sorted({re.split(r" \(|: | scripts\.", f, maxsplit=1)[0] for f in found})
            out.append(entry(kind, f"{what}: " + "; ".join(found[:5])[:700], paths=paths[:ENTRY_PATHS],
                             by_command=attribute_command(actions, PurePosixPath(paths[0]).name, paths[:5])))
    return out


TEXT = "?text"  # `PATH?text HEX`: a file's bytes at the baseline, printed by guard_shell.PROJECT's `_ft`


def texts_at_baseline(before: dict[str, str], parse: Callable[[str, bytes], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`parse` of each file a tool's shell printed with its bytes at the baseline (`PATH?text`
    lines), by path; a file whose line cannot be read is left out (as one that was not there)."""
    out = {}
    for key, text in before.items():
        if key.endswith(TEXT):
            try:
                out[key[:-len(TEXT)]] = parse(key[:-len(TEXT)], bytes.fromhex(text))
            except ValueError:
                continue
    return out


def under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


def tampering_entries(before: GuardSnapshot | None, after: GuardSnapshot, tests_mount: str,
                      actions: list[tuple[int, str]]) -> list[Tampering]:
    """The differences between two snapshots that touch the verifier: its toolchain, its mount
    points, and files the engine saw written that the verifier reads or is steered by."""
    out: list[Tampering] = []
    before = before or GuardSnapshot(tools={}, mounts={}, now=None, changes=None)
    tb, ta = before.get("tools") or {}, after.get("tools") or {}
    linked = venv_interpreters(tb, ta)
    for name in ta:
        b, a = tb.get(name), ta.get(name)
        if b == a or (b and b.get("builtin")) or (a and a.get("builtin")) or name in linked:
            continue
        by = attribute_command(actions, name, [x.get("path") for x in (b, a) if x] + [x.get("real") for x in (b, a) if x])
        if b is None:
            out.append(entry("toolchain_added", f"`{name}` now resolves to {a['path']}, where it resolved to nothing",
                             tool=name, after=a, by_command=by))
        elif a is None:
            out.append(entry("toolchain_removed", f"`{name}` ({b['path']}) no longer resolves", tool=name, before=b,
                             by_command=by))
        elif a.get("path") != b.get("path") or a.get("real") != b.get("real") or a.get("sha256") != b.get("sha256"):
            out.append(entry("toolchain_replaced", f"`{name}` changed: {b['path']} -> {a['path']}"
                             + (" (new content)" if a.get("sha256") != b.get("sha256") else ""),
                             tool=name, before=b, after=a, by_command=by))
    mb, ma = before.get("mounts") or {}, after.get("mounts") or {}
    tb_mount, ta_mount = mb.get(tests_mount), ma.get(tests_mount)
    if tb_mount and ta_mount and tb_mount.get("type") != "absent" and tb_mount != ta_mount:
        out.append(entry("tests_written", f"{tests_mount} changed during the agent phase ({tb_mount} -> {ta_mount})",
                         path=tests_mount, by_command=attribute_command(actions, tests_mount, [tests_mount])))
    if before.get("home") and after.get("home") and before["home"] != after["home"]:
        # pip's and uv's user settings and Python's user site are read under it: moved, they are
        # read where nothing is listed
        out.append(entry("verifier_home_moved", f"root's home moved during the agent phase (/etc/passwd): "
                         f"{before['home']} -> {after['home']}", paths=["/etc/passwd"],
                         by_command=attribute_command(actions, "/etc/passwd", ["/etc/passwd"])))
    out += sourced_changed(before.get("sourced") or {}, after.get("sourced") or {}, actions)
    out += _path_entries(changed_groups(before, after, tests_mount), after.get("changes") or {}, tests_mount, actions)
    if after.get("flooded"):
        places = after["flooded"]
        out.append(entry("listing_flooded", "more paths changed during the agent phase in a place the verifier "
                         "depends on than the check lists of one (20,000 when it lists it again): "
                         + ", ".join(places[:10])))
    return out


# The sha256 of the `_virtualenv.py` uv writes into each virtualenv it makes, beside a
# `_virtualenv.pth` whose one line imports it: uv 0.3 and 0.4, and 0.5 to 0.10 (0.13 writes
# neither). Such a `.pth` is uv's own, not a start-up hook (guard_shell.CHANGES, `uv_own_pth`).
UV_VIRTUALENV_MODULES = ("e3e10c8a19a62a49928c139b8e6824eac92dcdda7639953bcd10921011cbbdff",
                         "6cf30c56faf2a55228914dbbd17f8088ed371ebb08f5e7fa6fd931f913fcaf1d")


def uv_own_pth(path: str, data: bytes, module: bytes | None) -> bool:
    """Whether the `.pth` file at `path` (`data`) is uv's own `_virtualenv.pth`, given the
    `_virtualenv.py` beside it (`module`, None when it cannot be read)."""
    return (PurePosixPath(path).name == "_virtualenv.pth" and data.rstrip(b"\n") == b"import _virtualenv"
            and module is not None and hashlib.sha256(module).hexdigest() in UV_VIRTUALENV_MODULES)


def pth_module(path: str, modules: set[str] | frozenset[str]) -> bool:
    """Whether `path` is a file of one of `modules` (what the `.pth` files import at every start)
    right in a packages' folder: `_virtualenv.py`, `_distutils_hack/__init__.py`, `m.cpython-311-x86_64-linux-gnu.so`."""
    site = _SITE.search(path)
    if not site or path.endswith(".pth"):
        return False
    rel = path[site.end():]
    head, name = rel.split("/", 1)[0], rel.rsplit("/", 1)[-1]
    if "." not in name or "/__pycache__" in path:
        return False  # a folder (an outside listing names one as changed with its files), compiled modules
    return (head if "/" in rel else head.split(".", 1)[0]) in modules


def _copy_key(path: str) -> str:
    """A start-up file of setuptools' by what it is wherever it lies: `_distutils_hack/override.py`."""
    pure = PurePosixPath(path)
    return f"{pure.parent.name}/{pure.name}" if pure.parent.name == "_distutils_hack" else pure.name


def venv_homes(data: bytes) -> set[str]:
    """The `home` values of a pyvenv.cfg: the folder its Python takes as its base interpreter's, the
    standard library searched for from there (CPython's getpath). Every spelling a reader of lines
    may take (lines split at `\\n` alone, or at any line break) is given."""
    text = data.decode("utf-8", errors="replace")
    out = set()
    for line in [*text.split("\n"), *text.splitlines()]:
        key, equals, value = line.partition("=")
        if equals and key.strip().lower() == "home":
            out.add(value.strip().rstrip("/") or "/")
    return out


def interpreter_homes(tools: dict) -> set[str]:
    """The folders of the interpreters the baseline digested (`python3`, `python`, `python3.X`, as
    resolved and as their real paths): where a virtualenv made from one of them has its home."""
    out = set()
    for name, state in tools.items():
        if state and re.fullmatch(r"python(3(\.[0-9]+)?)?", name):
            out |= {str(PurePosixPath(state[k]).parent) for k in ("path", "real") if state.get(k)}
    return out


# A virtualenv's interpreter, looked for in its bin folder (verifier_reads: `~/...`, `/...` or relative)
_VENV_PYTHON = re.compile(r"/bin/python(3(\.[0-9]+)?)?$")


def venv_interpreters(before: dict, after: dict) -> set[str]:
    """The interpreters looked for in a virtualenv's bin folder (`python`, `python3`, `python3.X`)
    that are now a link to, or a copy of, an interpreter the baseline digested (`python3 -m venv`,
    `uv venv`): the program the verifier runs anyway, not one added or replaced."""
    known = {(t.get("real"), t.get("sha256")) for t in before.values() if t and t.get("sha256")}
    return {name for name, a in after.items() if a and _VENV_PYTHON.search(name) and a.get("sha256")
            and (a.get("real"), a.get("sha256")) in known}


def path_folder(script: str) -> str | None:
    """The folder a script the verifier sources puts first on PATH, when it is an installer's env
    script (`~/.local/bin/env`; rustup's `~/.cargo/env`) or a virtualenv's `bin/activate`."""
    pure = PurePosixPath(script)
    if pure.name in ("activate", "env") and pure.parent.name == "bin":
        return str(pure.parent)
    if pure.name == "env" and pure.parent.name == ".cargo":
        return f"{pure.parent}/bin"
    return None


def sourced_changed(before: dict[str, str], after: dict[str, str], actions: list[tuple[int, str]]) -> list[Tampering]:
    """The scripts the verifier sources (verifier_reads.sourced_scripts) whose lines that run changed
    since the baseline: an installer's env script (`~/.local/bin/env`, which uv's installer keeps
    when one is there) unless it is the installer's own, and a virtualenv's `activate` the image
    shipped. An `activate` the image did not have is the agent's to make (a virtualenv the task asks
    for); other sourced files (`~/.bashrc`, a config script of the task's) are what a task may ask
    the agent to change, and running them is running the agent's own code (docs/tasks.md). And the virtualenvs the verifier makes (their `pyvenv.cfg`,
    verifier_reads.verifier_venvs): one there before the verifier ran is `verifier_venv_planted`."""
    found, venvs = [], []
    for path, now in after.items():
        was = before.get(path)
        if PurePosixPath(path).name == "pyvenv.cfg":
            if now != "-" and was in (None, "-"):
                venvs.append(path.removesuffix("/pyvenv.cfg"))
            continue
        if now in (was, "-") or now in INSTALLER_ENV_SCRIPTS or not path_folder(path):
            continue  # other scripts (an rc file, a config script of the task's) are the agent's to change
        if PurePosixPath(path).name == "env" or was not in (None, "-"):
            found.append(path)
    out = []
    if venvs:
        out.append(entry("verifier_venv_planted", "a virtualenv the verifier's script makes was there before it ran "
                         "(made during the agent phase: what is in it, a .pth line, runs in the verifier's Python): "
                         + ", ".join(venvs[:5]), paths=venvs[:ENTRY_PATHS],
                         by_command=attribute_command(actions, PurePosixPath(venvs[0]).name, venvs[:5])))
    if not found:
        return out
    return out + [entry("sourced_script_changed", "a script the verifier's shell sources (what it defines runs there: a "
                  "function named like a tool, a folder first on PATH, a trap) was written during the agent phase: "
                  + ", ".join(found[:5]), paths=found[:ENTRY_PATHS],
                  by_command=attribute_command(actions, found[0], [p.replace("~/", "", 1) for p in found[:5]]))]


# A requirement that names where its package comes from (PEP 508 `name @ URL`: a file, a folder, a
# URL, a git repository) rather than asking the index for it.
_DIRECT_REFERENCE = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*@")


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _table(doc: Any, key: str) -> dict:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}


# The files that pin the Python uv makes a project's `.venv` with (`uv init` keeps one already there):
# a request in them that is no version (`3.12`, `>=3.11`, `cpython@3.12`) names an interpreter, as a
# path (`/tmp/evil/python3`) or a program name, and uv makes the verifier's `.venv` with it.
PYTHON_PINS = (".python-version", ".python-versions")
_VERSION = r"\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?t?"
_VERSION_REQUEST = re.compile(rf"(?:(?:cpython|pypy|graalpy|pyodide|cp|pp|gp)[@-]?{_VERSION}(?:-[A-Za-z0-9_]+)*|{_VERSION})$"
                              rf"|[<>=!~]{{1,2}}\s*{_VERSION}(?:\.\*)?(?:\s*,\s*[<>=!~]{{1,2}}\s*{_VERSION}(?:\.\*)?)*$")


def project_settings(path: str, data: bytes) -> dict[str, Any] | None:
    """What in a file of the workdir's Python project decides where the verifier's uv commands
    install from (None when it does not parse: uv then fails, and so does the verifier, on its own):
    a pyproject.toml's `[tool.uv]` table (`tool_uv`, as canonical JSON) and the requirements that
    name their own source (`sources`: the project's dependencies, extras, dependency groups and build
    requirements); a uv.lock's packages that come from outside a registry (`sources`), the project
    itself (`.`) aside; the requests of a `.python-version` that name an interpreter, not a version
    (`interpreters`)."""
    if PurePosixPath(path).name in PYTHON_PINS:
        requests = [line.strip() for line in data.decode("utf-8", errors="replace").splitlines()]
        return {"tool_uv": None, "sources": [], "interpreters": sorted(
            {r for r in requests if r and not r.startswith("#") and not _VERSION_REQUEST.match(r)})}
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if PurePosixPath(path).name == "uv.lock":
        found = set()
        for package in doc.get("package") if isinstance(doc.get("package"), list) else []:
            source = _table(package, "source")
            if source and not ("registry" in source or source.get("editable") == "." or source.get("virtual") == "."):
                found.add(f"{package.get('name')}: {json.dumps(source, sort_keys=True, default=str)}")
        return {"sources": sorted(found)}
    project = _table(doc, "project")
    requirements = _strings(project.get("dependencies")) + _strings(_table(doc, "build-system").get("requires"))
    for group in [*_table(project, "optional-dependencies").values(), *_table(doc, "dependency-groups").values()]:
        requirements += _strings(group)
    tool_uv = _table(doc, "tool").get("uv")
    return {"tool_uv": None if tool_uv is None else json.dumps(tool_uv, sort_keys=True, default=str),
            "sources": sorted({r.strip() for r in requirements if _DIRECT_REFERENCE.match(r)})}


def project_changed(before: dict[str, str], after: dict[str, str], read_before: dict[str, dict[str, Any] | None],
                    read_after: dict[str, dict[str, Any] | None], actions: list[tuple[int, str]]) -> list[Tampering]:
    """The workdir's project files whose digest changed (`before`, `after`: path -> digest, guard_shell
    `PROJECT`), read as `project_settings` at the baseline and after the sweep: a `[tool.uv]` table
    added or changed, or a file made a link, not a plain file or over 4 MB, is `installer_config_changed`; a
    package the project now takes from outside the index, which the verifier's `uv run` or `uv sync`
    installs, is `project_source_added`."""
    settings, sources = [], []
    for path, now in after.items():
        if now in (before.get(path), "-"):
            continue
        if now == "other":
            settings.append(f"{path} (a link, not a plain file, or over 4 MB)")
            continue
        new, old = read_after.get(path), read_before.get(path) or {}
        if new is None:
            continue
        if new.get("tool_uv") is not None and new.get("tool_uv") != old.get("tool_uv"):
            settings.append(f"{path} ([tool.uv])")
        settings += [f"{path} (names the interpreter {r})" for r in new.get("interpreters", [])
                     if r not in old.get("interpreters", [])]
        sources += [f"{path}: {s}" for s in new["sources"] if s not in old.get("sources", [])]
    out = []
    if settings:
        paths = [s.split(" (")[0] for s in settings]
        out.append(entry("installer_config_changed", "a setting uv reads from the workdir's project was added or "
                         "changed: " + ", ".join(settings[:5]), paths=paths,
                         by_command=attribute_command(actions, PurePosixPath(paths[0]).name, paths[:5])))
    if sources:
        paths = sorted({s.split(": ")[0] for s in sources})
        out.append(entry("project_source_added", "the workdir's project, which the verifier's uv installs, now takes "
                         "a package from outside the index: " + "; ".join(sources[:5])[:600], paths=paths,
                         by_command=attribute_command(actions, PurePosixPath(paths[0]).name, paths)))
    return out


def changed_groups(before: GuardSnapshot | None, after: GuardSnapshot, tests_mount: str) -> dict[str, list[str]]:
    """The paths `after`'s listing found changed since `before`'s, by the kind of entry each makes
    (all of them: an entry names the first 20)."""
    cb, ca = (before or {}).get("changes"), after.get("changes")
    if ca is None:
        return {}
    cb = cb or {}
    new = sorted(p for p, k in ca.items() if cb.get(p) != k)
    # uv's own module, and setuptools' start-up files as the image had them (a virtualenv made)
    genuine = {(_copy_key(p), d) for p, d in ((before or {}).get("startup_copies") or {}).items()}
    own = set(after.get("uv_own") or ()) | {p for p, d in (after.get("startup_copies") or {}).items()
                                             if (_copy_key(p), d) in genuine}
    return _groups([p for p in new if p not in own], ca, tests_mount, executes=set(after.get("executes") or ()),
                   plugins=set(after.get("plugins") or ()), modules=set(after.get("pth_modules") or ()))


def _groups(paths: list[str], kinds: dict[str, int], tests_mount: str, *, executes: set[str], plugins: set[str],
            modules: set[str]) -> dict[str, list[str]]:
    """`executes`: the changed `.pth` files with a line site.py executes; `plugins`: the changed
    entry_points.txt files that declare a pytest plugin; `modules`: what the `.pth` files import."""
    groups: dict[str, list[str]] = {}
    for p in paths:
        name = PurePosixPath(p).name
        parent = str(PurePosixPath(p).parent)
        if under(p, VERIFIER_LOGS) and p != VERIFIER_LOGS:
            groups.setdefault("reward_file_written" if name in REWARD_FILES else "verifier_logs_written", []).append(p)
        elif under(p, tests_mount):
            groups.setdefault("tests_written", []).append(p)
        elif under(p, "/solution") and p != "/solution":
            groups.setdefault("solution_written", []).append(p)
        elif (name in STARTUP_HOOKS or p == "/etc/ld.so.preload" or p in executes or _PYTHON_SETTINGS.match(p)
              or pth_module(p, modules)):
            groups.setdefault("startup_hook_planted", []).append(p)
        elif p in plugins:
            groups.setdefault("test_plugin_added", []).append(p)
        elif _INSTALLER_CONFIG.match(p) or name in (INSTALLER_CONFIG, VENV_INSTALLER_CONFIG):
            groups.setdefault("installer_config_changed", []).append(p)
        elif name in PYTEST_CONFIGS and (parent == "/" or under(tests_mount, parent)):
            groups.setdefault("test_config_planted", []).append(p)
        elif any(p.endswith("/" + s) for s in SHADOWING) and not _SITE.search(p):
            groups.setdefault("module_shadowing", []).append(p)
        elif TEST_RUNNER.search(p) and "/__pycache__/" not in p and kinds.get(p) != 1:
            groups.setdefault("test_library_changed", []).append(p)
        elif (_PYTHON_LIBRARY.match(p) and not _SITE.search(p) and "/__pycache__/" not in p
              and p.endswith((".py", ".so", ".zip"))):
            groups.setdefault("python_library_changed", []).append(p)
        elif _LIBRARY_FOLDER.match(p) and not _SITE.search(p) and "/__pycache__/" not in p:
            groups.setdefault("python_library_changed", []).append(p)
    return groups


def _path_entries(groups: dict[str, list[str]], kinds: dict[str, int], tests_mount: str,
                  actions: list[tuple[int, str]]) -> list[Tampering]:
    """An entry for each kind of `changed_groups`, naming its first paths."""
    what = {"reward_file_written": "the agent phase wrote the reward file", "verifier_logs_written":
            "the agent phase wrote into /logs/verifier", "tests_written": f"the agent phase wrote under {tests_mount}",
            "solution_written": "the agent phase wrote under /solution", "startup_hook_planted":
            "a file every interpreter start loads or runs was added or changed", "test_config_planted":
            "a pytest configuration or conftest.py where pytest looks for one from the tests",
            "module_shadowing": "a module that shadows the test runner", "test_library_changed":
            "the test runner's own library changed", "test_plugin_added": "a package now declares a pytest plugin, "
            "which pytest loads on every run", "python_library_changed": "the interpreter's standard library changed",
            "installer_config_changed": "a setting pip or uv reads (where a test script's installs come from) was "
            "added or changed"}
    out = []
    for kind, found in groups.items():
        kind_of = {0: "changed", 1: "added", 2: "deleted"}
        out.append(entry(kind, f"{what[kind]}: " + ", ".join(f"{p} ({kind_of.get(kinds.get(p), '?')})" for p in found[:5])
                         + (f" and {len(found) - 5} more" if len(found) > 5 else ""),
                         paths=found[:ENTRY_PATHS], by_command=attribute_command(actions, found[0], found[:5])))
    return out


OBSTRUCTION_KINDS = frozenset({"toolchain_removed", "toolchain_replaced", "toolchain_added", "init_killed",
                               "verifier_path_obstructed", "startup_hook_planted", "test_config_planted",
                               "module_shadowing", "test_library_changed", "tests_written", "verifier_output_forged",
                               "check_stalled", "test_plugin_added", "python_library_changed", "listing_flooded",
                               "installer_config_changed", "verifier_home_moved", "sourced_script_changed",
                               "project_source_added", "verifier_venv_planted", "npm_script_changed",
                               "build_file_changed", "build_time_set_forward", "git_hook_planted", "apt_hook_planted",
                               "apt_package_planted", "dpkg_program_changed",
                               "reward_written_after_tests", "shared_library_changed", "check_incomplete",
                               "openssl_settings_changed", "perl_module_changed"})
UNRUNNABLE = ("tests_not_run", "reward_missing", "no_tests_parsed")


def review(verdict, sealed: list[Tampering], *, writers_kept: bool = False, peers_kept: bool = False):
    """The verdict of one verification and the tampering its run revealed: what the fresh
    /logs/verifier had to undo, tests that changed while they ran, what a SWE-bench patch changes
    that the tests read besides the solution. A verifier that gave no
    verdict after the agent changed what it depends on was obstructed by the agent: a failed
    attempt (reward 0, `details.obstructed_by_agent`), not an infrastructure error. So is a
    reward file missing or unreadable (`reward_missing`) when the agent wrote reward files and
    its processes were kept running through the verification (`writers_kept`): one of them may
    have been writing it when it was read (seen under load: an empty reward.json, truncated by a
    kept `echo > reward.json` loop just as it was read). So, too, is a verification one of whose
    commands (preparing, digesting or running the tests) did not end by its timeout plus grace
    (`abandoned`) while the agent's processes ran beside it (`peers_kept`: the sweep was off):
    one of them can stop a command (SIGSTOP)."""
    from tbscale.verifiers import VerifierResult

    found: list[Tampering] = []
    logs = verdict.details.get("verifier_logs") or {}
    seen = {e["kind"] for e in sealed}
    rewards = [f for f in logs.get("found", []) if PurePosixPath(f.rstrip("/")).name in REWARD_FILES]
    if rewards and "reward_file_written" not in seen:
        found.append(entry("reward_file_written", "the agent phase left a reward file: " + ", ".join(rewards),
                           paths=rewards))
    if logs.get("obstructed"):
        found.append(entry("verifier_path_obstructed", "; ".join(logs["obstructed"])
                           + (" (" + ", ".join(f for f in logs.get("found", []) if f.endswith("/")) + ")"
                              if any(f.endswith("/") for f in logs.get("found", [])) else ""),
                           paths=logs.get("found", [])[:20]))
    elif any(f.endswith("/") and PurePosixPath(f.rstrip("/")).name in REWARD_FILES for f in logs.get("found", [])):
        found.append(entry("verifier_path_obstructed", "a reward path was a folder: "
                           + ", ".join(f for f in logs["found"] if f.endswith("/"))))
    found += verdict.details.get("patch_tampering") or []  # a SWE-bench patch's (verifiers/swebench_review.py)
    if verdict.details.get("tests_changed"):
        found.append(entry("tests_modified_during_verification", "the tests changed while they ran",
                           **verdict.details["tests_changed"]))
    if late := verdict.details.get("reward_written_late"):
        outlived = verdict.details.get("outlived") or []
        found.append(entry("reward_written_after_tests", ("a reward file changed after the verifier's command had ended: "
                           if late.get("ended") is not None else "the shell that ran the verifier's command was killed "
                           "before it ended, so a reward file written after its end cannot be told: ")
                           + ", ".join(late["files"]) + (f"; the verification left {len(outlived)} process(es) running, "
                           "killed before the verdict was read: " + "; ".join(outlived[:3]) if outlived else ""),
                           paths=late["files"]))
    if verdict.details.get("output_conflicts"):
        found.append(entry("verifier_output_forged", "a line the verifier's harness reads was given twice with "
                           "different values (something beside it wrote into its output): "
                           + ", ".join(verdict.details["output_conflicts"][:10])))
    if verdict.details.get("abandoned") and peers_kept:
        found.append(entry("check_stalled", "a command of the verifier's did not end by its timeout plus grace "
                           "while the agent's processes ran beside it (something stopped it)"))
    if verdict.error in UNRUNNABLE or (verdict.error == "verifier_timeout" and verdict.details.get("abandoned")
                                       and peers_kept):
        kinds = OBSTRUCTION_KINDS | ({"reward_file_written"} if writers_kept and verdict.error == "reward_missing"
                                     else frozenset())
        causes = [e for e in sealed + found if e["kind"] in kinds]
        if causes:
            details = {**verdict.details, "obstructed_by_agent": "; ".join(e["detail"] for e in causes)[:600],
                       "verifier_error": verdict.error}
            verdict = VerifierResult(0.0, False, verdict.output, None, details, {"reward": 0.0})
    return verdict, found


# What the guard's in-container listing covers (runner/guard.py `_CHANGES`), for a listing taken
# from outside (Environment.changes), which names every path the environment changed.
_TOP_NAMES = frozenset({*PYTEST_CONFIGS, ".pytest.ini", *STARTUP_HOOKS, "pytest.py", INSTALLER_CONFIG})
_WORKDIR_NAMES = frozenset({"pytest.py", "conftest.py", *STARTUP_HOOKS, VENV_INSTALLER_CONFIG})
_PYTHON_FOLDERS = re.compile(r"^/(usr/lib|usr/local/lib|root/\.local/lib)/python3[^/]*(/|$)|^/etc/python3[^/]*/"
                             r"|^/(usr/|usr/local/)lib/python3[0-9]*\.zip$")
_BIN_FOLDERS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})


def _python_folder(path: str, venvs: tuple[str, ...]) -> bool:
    return bool(_PYTHON_FOLDERS.search(path)) or any(re.match(re.escape(v.rstrip("/")) + r"/lib/python3[^/]*/", path)
                                                     for v in venvs)


def checked_path(path: str, tests_mount: str, workdir: str | None, venvs: tuple[str, ...] = (),
                 modules: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether the in-container check would list `path` had it changed (runner/guard_shell.py
    `CHANGES`). A folder of the Python library made a link, which the check inside lists by its
    type, is left out: a listing from outside has no types, and names a folder as changed whenever
    something in it did. `venvs`: the virtualenvs the verifier activates, whose Python folders
    (`lib/python3*`) count as the interpreter's."""
    pure = PurePosixPath(path)
    workdir = None if workdir == "/" else workdir  # the top of / is listed by its names alone
    if str(pure.parent) == "/" and pure.name in _TOP_NAMES:
        return True
    if any(under(path, root) for root in (VERIFIER_LOGS, tests_mount, "/solution")) or path == "/etc/ld.so.preload":
        return True
    if _INSTALLER_CONFIG.match(path) or (workdir and path == workdir.rstrip("/") + "/" + INSTALLER_CONFIG):
        return True
    if workdir and under(path, workdir) and len(pure.relative_to(workdir).parts) <= 4 and (
            pure.name in _WORKDIR_NAMES or path.endswith(("/pytest/__init__.py", "/_pytest/__init__.py"))):
        return True
    if pure.name == "pyvenv.cfg" and str(pure.parent) in venvs:
        return True
    if not _python_folder(path, venvs) or "/__pycache__/" in path:
        return False
    return (pure.name in STARTUP_HOOKS or pure.suffix == ".pth" or pure.name == "entry_points.txt"
            or bool(TEST_RUNNER.search(path)) or pth_module(path, modules)
            or (not _SITE.search(path) and pure.suffix in (".py", ".so", ".zip")))


def compiled_module(path: str, venvs: tuple[str, ...] = ()) -> bool:
    """A `.pyc` in a Python folder: the seal removes those the agent phase wrote (guard.py `_BYTECODE`)."""
    return path.endswith(".pyc") and _python_folder(path, venvs)


def programs_changed(changed: dict[str, int], tools: dict, programs: set[str], seen: set[str],
                     actions: list[tuple[int, str]]) -> list[Tampering]:
    """From a listing taken outside the environment: the programs the verifier or the guard's own
    check runs that were written, added or removed in a bin folder or at a path a tool resolved to
    at the baseline (`tools`). The check's digests come from programs inside, which a replaced
    `sha256sum` or `find` could make lie; the outside listing cannot. `seen`: tools already
    reported."""
    at = {}
    for name, state in tools.items():
        for key in ("path", "real"):
            if state and state.get(key):
                at[state[key]] = name
    out = []
    for path, kind in sorted(changed.items()):
        pure = PurePosixPath(path)
        name = at.get(path) or (pure.name if str(pure.parent) in _BIN_FOLDERS and pure.name in programs else None)
        if name is None or name in seen:
            continue
        seen.add(name)
        what = {0: ("toolchain_replaced", "was written"), 1: ("toolchain_added", "was added"),
                2: ("toolchain_removed", "was removed")}.get(kind, ("toolchain_replaced", "changed"))
        out.append(entry(what[0], f"`{name}` ({path}) {what[1]}, as seen from outside the environment", tool=name,
                         paths=[path], by_command=attribute_command(actions, name, [path])))
    return out
