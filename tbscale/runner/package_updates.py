"""A tool, test library or start-up hook the agent phase replaced by installing a published
release: settled against the release's files on PyPI, not counted as tampering.

An honest agent runs `pip install --upgrade pip setuptools` or `pip install -U pytest`. The
verifier then runs a `pip` or `pytest` that the agent phase wrote, or a Python that starts
setuptools' `.pth` hook, which the guard reports (`toolchain_replaced`, `test_library_changed`,
`startup_hook_planted`) and which made the trial a failure. Such an entry is settled when what the
verifier runs is, file for file, the release as PyPI publishes it:

* the program is a console-script launcher an installer writes (checked by its syntax tree: it
  imports the entry point and calls it, and does nothing else) whose interpreter is one the guard
  saw unchanged, or a file of the wheel's `.data/scripts` byte for byte;
* the wheel (runner/pypi_releases.py) declares that launcher's entry point under the program's name;
* the distribution is the one that name belongs to (`pip` for pip3, `pytest` for `_pytest`): a
  release of another name that ships a `pytest` program settles nothing;
* every file of the package's folders, read from outside the environment, is the wheel's member
  with the same digest, and none is missing or added (compiled modules aside: the seal removed
  those the agent phase wrote).

The settled entries leave the trial's tampering and go to the sweep's `package_updates`, each with
the release, its wheel's digest and the command that installed it. An entry that cannot be settled
stays, with `published_check` saying why (the index unreachable, a file that differs, ...). The
programs run inside only say where to look: what is compared is read from outside."""

from __future__ import annotations

import ast
import hashlib
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path, PurePosixPath
from typing import Callable

from tbscale.environments.base import Environment
from tbscale.errors import SandboxError
from tbscale.runner.findings import ENTRY_PATHS, TEST_RUNNER
from tbscale.runner.pypi_releases import ReleaseUnavailable, Wheel, canonical, published_wheel
from tbscale.types.guard import CommandAttribution, PackageUpdate, Tampering, ToolState

SETTLED_KINDS = ("toolchain_replaced", "toolchain_added", "test_library_changed", "startup_hook_planted")
# A program the verifier runs and the distribution it belongs to.
TOOL_DISTRIBUTIONS = {"pip": "pip", "pip3": "pip", "pytest": "pytest", "py.test": "pytest", "uv": "uv", "uvx": "uv"}
# The test runner's folders (findings.TEST_RUNNER) and the distribution each belongs to.
LIBRARY_DISTRIBUTIONS = {"_pytest": "pytest", "pytest": "pytest", "py.py": "pytest", "pluggy": "pluggy",
                         "iniconfig": "iniconfig", "packaging": "packaging", "exceptiongroup": "exceptiongroup",
                         "tomli": "tomli"}
# A start-up hook an honest install writes, and the distribution it belongs to: setuptools'
# `.pth`, which imports `_distutils_hack` at every start (`pip install -U pip setuptools wheel`).
STARTUP_DISTRIBUTIONS = {"distutils-precedence.pth": "setuptools", "_distutils_hack": "setuptools"}
_SITE_PATH = re.compile(r"^(?P<site>.*/(site|dist)-packages)/(?P<top>[^/]+)")
_INTERPRETERS = ("python3", "python")
PROGRAM_LIMIT = 256 * 2**20  # uv's binary is some tens of MB; a launcher a few hundred bytes
METADATA_LIMIT = 8 * 2**20
LAUNCHER_MAX_CHARS = 16_384
_FIXUP_NODES = (ast.Assign, ast.If, ast.Call, ast.Attribute, ast.Name, ast.Constant, ast.Subscript, ast.Slice,
                ast.UnaryOp, ast.USub, ast.Load, ast.Store, ast.Expr)


@dataclass(frozen=True)
class Launcher:
    """A console-script launcher: `#!interpreter`, `from module import name`, `sys.exit(target())`."""

    interpreter: str
    module: str
    target: str


def launcher(text: str) -> Launcher | None:
    """The launcher `text` is, or None when it does anything a launcher pip, uv or installer
    writes does not (any statement but the imports, the `sys.argv[0]` clean-up and the call)."""
    first, _, rest = text.partition("\n")
    interpreter = first[2:].strip() if first.startswith("#!") else ""
    # a launcher is a few hundred bytes; the agent's text could be one nested past what the
    # parser's stack or memory takes
    if not interpreter or " " in interpreter or len(rest) > LAUNCHER_MAX_CHARS:
        return None
    try:
        return _launcher(interpreter, ast.parse(rest).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _launcher(interpreter: str, body: list[ast.stmt]) -> Launcher | None:
    while body and isinstance(body[0], ast.Import) and all(a.name in ("re", "sys") and not a.asname
                                                              for a in body[0].names):
        body = body[1:]
    if len(body) != 2 or not isinstance(body[0], ast.ImportFrom) or body[0].level or len(body[0].names) != 1 \
            or body[0].names[0].asname or not body[0].module:
        return None
    module, name = body[0].module, body[0].names[0].name
    main = body[1]
    if not (isinstance(main, ast.If) and not main.orelse and ast.unparse(main.test).replace("'", '"')
            == '__name__ == "__main__"' and main.body):
        return None
    *fixups, last = main.body
    if not all(_argv_fixup(s) for s in fixups):
        return None
    call = last.value if isinstance(last, ast.Expr) else None
    if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "sys.exit" and len(call.args) == 1
            and not call.keywords and isinstance(call.args[0], ast.Call) and not call.args[0].args
            and not call.args[0].keywords):
        return None
    target = ast.unparse(call.args[0].func)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", target) or target.split(".")[0] != name:
        return None
    return Launcher(interpreter, module, target)


def _argv_fixup(statement: ast.stmt) -> bool:
    """`sys.argv[0] = re.sub(...)` (distlib's, as pip 23 writes it), `sys.argv[0] =
    sys.argv[0].removesuffix('.exe')` (as pip 26 writes it), or `if sys.argv[0].endswith(...):
    sys.argv[0] = sys.argv[0][:-4]` (uv)."""
    for node in ast.walk(statement):
        if not isinstance(node, _FIXUP_NODES):
            return False
        if isinstance(node, ast.Name) and node.id not in ("sys", "re"):
            return False
        if isinstance(node, ast.Attribute) and node.attr not in ("argv", "sub", "endswith", "removesuffix"):
            return False
        if isinstance(node, ast.Call) and ast.unparse(node.func) not in ("re.sub", "sys.argv[0].endswith",
                                                                         "sys.argv[0].removesuffix"):
            return False
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] != ["sys.argv[0]"]:
            return False
    return isinstance(statement, (ast.Assign, ast.If))


@dataclass
class _Candidate:
    """A (site, package folder) an entry needs checked; `why` says what kept it from settling."""

    entry: Tampering
    distribution: str
    top: str = ""
    sites: list[str] = field(default_factory=list)  # where to look, first found first (tools)
    site: str = ""
    dist_info: str = ""
    program: str = ""  # the program's name and content (tools)
    content: bytes = b""
    launcher: Launcher | None = None
    why: str | None = None


@dataclass
class _Release:
    """One installed distribution: what its metadata says, and the published wheel it is checked against."""

    site: str
    dist_info: str
    name: str = ""
    version: str = ""
    tags: list[str] = field(default_factory=list)
    wheel: Wheel | None = None
    problem: str | None = None
    folders: dict[str, str | None] = field(default_factory=dict)  # package folder -> what differs


def settle(entries: list[Tampering], box: Environment, tools_before: dict[str, ToolState],
           tools_after: dict[str, ToolState], changes: dict[str, int] | None, *, home: str = "/root",
           fetch: Callable[..., Wheel] = published_wheel) -> tuple[list[Tampering], list[PackageUpdate]]:
    """(the entries that stay, the package updates that settled the others). Costs nothing when no
    entry is of a settled kind for a program or folder a published release can explain."""
    candidates = _candidates(entries, tools_before, tools_after, changes or {}, box, home)
    if not candidates:
        return entries, []
    _locate([c for c in candidates if not c.why], box)
    releases: dict[str, _Release] = {}
    for c in candidates:
        if c.why:
            continue
        release = releases.setdefault(c.dist_info, _Release(c.site, c.dist_info))
        if not release.name and release.problem is None:
            _identify(release, box)
        c.why = _verdict(c, release, box, fetch)
    kept: list[Tampering] = []
    updates: dict[str, PackageUpdate] = {}
    for e in entries:
        group = [c for c in candidates if c.entry is e]
        if not group:
            kept.append(e)
            continue
        problems = list(dict.fromkeys(c.why for c in group if c.why))
        if problems:
            e["published_check"] = "; ".join(problems)[:600]
            kept.append(e)
            continue
        for c in group:
            release = releases[c.dist_info]
            assert release.wheel is not None
            row = updates.setdefault(c.dist_info, {
                "package": release.name, "version": release.version, "wheel": release.wheel.filename,
                "wheel_sha256": release.wheel.sha256, "site": release.site, "settles": [], "by_command": None})
            if e["detail"] not in row["settles"]:
                row["settles"].append(e["detail"])
            row["by_command"] = install_command(row["by_command"], e.get("by_command"))
    return kept, list(updates.values())


def install_command(kept: CommandAttribution | None, other: CommandAttribution | None) -> CommandAttribution | None:
    """The command a settled release names, of two entries' (`by_command`): the install, rather
    than a later command that merely names the program."""
    if other and (kept is None or (other.get("package_install") and not kept.get("package_install"))):
        return other
    return kept


def _candidates(entries: list[Tampering], tools_before: dict[str, ToolState], tools_after: dict[str, ToolState],
                changes: dict[str, int], box: Environment, home: str) -> list[_Candidate]:
    out: list[_Candidate] = []
    vouched = {p for n in _INTERPRETERS if (s := tools_before.get(n)) and s == tools_after.get(n)
               and not s.get("builtin") for p in (s.get("path"), s.get("real")) if p}
    for e in entries:
        if e["kind"] not in SETTLED_KINDS:
            continue
        if e["kind"] in ("toolchain_replaced", "toolchain_added"):
            name, after = e.get("tool") or "", e.get("after")
            dist = TOOL_DISTRIBUTIONS.get(name) or ("pip" if re.fullmatch(r"pip3\.[0-9]+", name) else None)
            # an entry from the listing outside (`file_checks: outside`) names the program's path
            real = after.get("real") if isinstance(after, dict) else (e.get("paths") or [None])[0]
            if not dist or not real:
                continue
            c = _Candidate(e, dist, program=name)
            out.append(c)
            try:
                content = box.read_file(real, limit=PROGRAM_LIMIT)
            except SandboxError as err:
                c.why = str(err)
                continue
            if content is None:
                c.why = f"{real} could not be read from outside the environment"
                continue
            if isinstance(after, dict) and after.get("sha256") and hashlib.sha256(content).hexdigest() != after["sha256"]:
                c.why = f"{real} read from outside is not what the check inside digested"
                continue
            c.content = content
            c.launcher = launcher(content.decode("utf-8", "replace")) if content[:2] == b"#!" else None
            if c.launcher:
                if c.launcher.interpreter not in vouched:
                    c.why = (f"{real} runs {c.launcher.interpreter}, not a Python the verifier's "
                             f"{'/'.join(_INTERPRETERS)} resolved to, unchanged")
                    continue
                c.top, prefix = c.launcher.module.split(".")[0], str(PurePosixPath(c.launcher.interpreter).parent.parent)
            elif content[:2] == b"#!":
                c.why = f"{real} is a script that does more than start an entry point"
                continue
            else:  # a program shipped in the wheel's `.data/scripts` (uv's binary)
                c.top, prefix = canonical(dist).replace("-", "_"), str(PurePosixPath(real).parent.parent)
            q = "" if prefix == "/" else shlex.quote(prefix.rstrip("/"))
            # as sys.path orders them for the launcher: its own folder, the user's site, the prefix's
            c.sites = [shlex.quote(str(PurePosixPath(real).parent)),
                       f"{shlex.quote(home.rstrip('/'))}/.local/lib/python3.*/site-packages",
                       f"{q}/local/lib/python3.*/dist-packages", f"{q}/lib/python3.*/site-packages",
                       f"{q}/lib/python3.*/dist-packages", f"{q}/lib/python3/dist-packages"]
        else:  # test_library_changed, startup_hook_planted
            known = LIBRARY_DISTRIBUTIONS if e["kind"] == "test_library_changed" else STARTUP_DISTRIBUTIONS
            paths = set(e.get("paths") or [])
            if not any((m := _SITE_PATH.match(p)) and m["top"] in known for p in paths):
                continue  # (npm's test library, a hook no install writes: nothing to settle)
            if e["kind"] == "test_library_changed":  # every changed path, not only those the entry names
                paths |= {p for p in changes if TEST_RUNNER.search(p) and "/__pycache__/" not in p}
            elif len(paths) >= ENTRY_PATHS:
                out.append(_Candidate(e, "", why="the entry names only the first of its paths"))
                continue
            folders = {}
            for p in sorted(paths):
                m = _SITE_PATH.match(p)
                if m:
                    folders.setdefault((m["site"], m["top"]), p)
            for p in sorted(paths - {q for q in paths if _SITE_PATH.match(q)}):
                out.append(_Candidate(e, "", why=f"{p} is in no packages folder"))
            for (site, top), p in folders.items():
                dist = known.get(top)
                c = _Candidate(e, dist or "", top=top, site=site)
                if not dist:
                    c.why = f"{p} is no file of {' or '.join(sorted(set(known.values())))}"
                out.append(c)
    return out


def _locate(candidates: list[_Candidate], box: Environment) -> None:
    """Which installed distribution lists each candidate's folder in its RECORD, and where (one
    exec; what it prints only says where to look, the checks read from outside)."""
    if not candidates:
        return
    lines = []
    for i, c in enumerate(candidates):
        pattern = shlex.quote("^" + re.escape(c.top) + r"(/|,|\.py,)")
        where = " ".join(c.sites) if c.sites else shlex.quote(c.site)
        top = shlex.quote(c.top)
        # the first folder that holds the module as a package or a file is the one imported
        lines.append(f"for d in {where}; do [ -d \"$d\"/{top} ] || [ -f \"$d\"/{top} -a \"$d\" = {shlex.quote(c.site)} ] "
                     f"|| [ -f \"$d\"/{top}.py ] || continue; "
                     f"for r in \"$d\"/*.dist-info/RECORD; do grep -qE {pattern} \"$r\" 2>/dev/null && "
                     f"printf 'L\\t{i}\\t%s\\t%s\\n' \"$d\" \"${{r%/RECORD}}\"; done; break; done")
    res = box.exec("\n".join(lines), 60, user="0", output_limit=200_000)
    found: dict[int, list[tuple[str, str]]] = {}
    for line in res.output.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[0] == "L" and parts[1].isdigit() and int(parts[1]) < len(candidates):
            found.setdefault(int(parts[1]), []).append((parts[2], parts[3]))
    for i, c in enumerate(candidates):
        hits = found.get(i, [])
        if len(hits) != 1:
            c.why = (f"no installed distribution lists {c.top} where {c.program or c.site} takes it from" if not hits
                     else f"{len(hits)} installed distributions list {c.top}: " + ", ".join(h[1] for h in hits[:3]))
            continue
        c.site, c.dist_info = hits[0]


def _identify(release: _Release, box: Environment) -> None:
    """The distribution's name, version and tags, as its `.dist-info` says (read from outside)."""
    try:
        metadata = box.read_file(release.dist_info + "/METADATA", limit=METADATA_LIMIT)
        wheel = box.read_file(release.dist_info + "/WHEEL", limit=METADATA_LIMIT)
    except SandboxError as err:
        release.problem = str(err)
        return
    if metadata is None or wheel is None:
        release.problem = f"{release.dist_info} has no METADATA or WHEEL"
        return
    headers = Parser().parsestr(metadata.decode("utf-8", "replace"), headersonly=True)
    release.name, release.version = (headers.get("Name") or "").strip(), (headers.get("Version") or "").strip()
    release.tags = [t.strip() for t in Parser().parsestr(wheel.decode("utf-8", "replace")).get_all("Tag") or []]


def _verdict(c: _Candidate, release: _Release, box: Environment, fetch: Callable[..., Wheel]) -> str | None:
    """None when the candidate is the published release's; else what differs."""
    if release.problem:
        return release.problem
    if canonical(release.name) != c.distribution:
        return f"{c.top} in {release.site} belongs to {release.name or release.dist_info}, not {c.distribution}"
    if release.wheel is None:
        try:
            release.wheel = fetch(release.name, release.version, release.tags)
        except ReleaseUnavailable as e:
            release.problem = f"{release.name} {release.version} was not checked against its release: {e}"
            return release.problem
    wheel = release.wheel
    if c.top not in release.folders:
        release.folders[c.top] = _folder_differs(release, c.top, box)
    if release.folders[c.top]:
        return release.folders[c.top]
    if not c.program:
        return None
    if c.launcher is None:
        digest = hashlib.sha256(c.content).hexdigest()
        if not any(re.fullmatch(r"[^/]+\.data/scripts/" + re.escape(c.program), m) and d == digest
                   for m, d in wheel.files.items()):
            return f"{c.program} is no program of {wheel.filename}"
        return None
    declared = _console_scripts(wheel.entry_points)
    name = "pip" if release.name.lower() == "pip" and re.fullmatch(r"pip3(\.[0-9]+)?", c.program) \
        and c.program not in declared else c.program
    if declared.get(name) != f"{c.launcher.module}:{c.launcher.target}":
        return f"{c.program} starts {c.launcher.module}:{c.launcher.target}, which {wheel.filename} does not declare as {name}"
    return None


def _folder_differs(release: _Release, top: str, box: Environment) -> str | None:
    """What in `top` is not the wheel's (compiled modules aside), read from outside."""
    wheel = release.wheel
    assert wheel is not None
    want = {m: d for m, d in wheel.files.items() if m == top or m.startswith(top + "/")}
    if not want:
        return f"{wheel.filename} has no {top}"
    # the tar of the wheel's files, with room for a header and padding each and for compiled
    # modules: a folder the agent filled past that is not the release
    limit = sum(wheel.sizes.get(m, 0) for m in want) + 2048 * len(want) + 32 * 2**20
    with tempfile.TemporaryDirectory(prefix="tbscale-release-") as tmp:
        try:
            if not box.get_dir(f"{release.site}/{top}", Path(tmp), limit=limit):
                return f"{release.site}/{top} could not be read from outside the environment"
        except SandboxError as err:
            return str(err)
        have = {}
        for f in Path(tmp).rglob("*"):
            rel = f.relative_to(tmp).as_posix()
            if f.is_symlink():
                return f"{release.site}/{rel} is a link"
            if f.is_file() and "__pycache__" not in rel.split("/"):
                have[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
    extra = sorted(set(have) - set(want))
    missing = sorted(set(want) - set(have))
    changed = sorted(m for m in set(want) & set(have) if want[m] != have[m])
    for what, found in (("differs from", changed), ("is not in", extra), ("is missing, though in", missing)):
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            return f"{release.site}/{found[0]}{more} {what} {wheel.filename}"
    return None


def _console_scripts(text: str) -> dict[str, str]:
    """`[console_scripts]` of an entry_points.txt: name -> `module:attr` (spaces and extras dropped)."""
    out, section = {}, ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == "console_scripts" and "=" in line and not line.startswith(("#", ";")):
            name, _, value = line.partition("=")
            out[name.strip()] = re.sub(r"\s+", "", value.split("[")[0])
    return out
