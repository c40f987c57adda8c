"""What the verifier's command and test scripts say it will run, source, make and read, read off
their text with the shell tokenizer (shell/parse.py) before anything runs: the verifier guard
(runner/guard.py) digests these at the baseline and after the agent phase."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tbscale.runner.build_tools import TOOLS
from tbscale.runner.findings import path_folder, under
from tbscale.runner.npm_project import npm_commands
from tbscale.runner.script_folders import moved
from tbscale.shell.parse import invocation, skip_options, split_segments, substitutions

DEFAULT_TOOLS = ("bash", "sh", "env", "python3", "python", "pytest", "uv", "uvx", "pip", "pip3", "timeout")
MAX_TOOLS = 48
_SHELL_WORDS = frozenset("""! [ [[ ]] { } alias bg break builtin case cd command continue declare do done echo elif else
    esac eval exec exit export false fc fg fi for function getopts hash if in jobs kill let local printf pwd read
    readonly return select set shift source test then time trap true type typeset ulimit umask unalias unset until
    wait while . :""".split())


def script_texts(verifier) -> list[str]:
    """The verifier's command and its test scripts, as shell text (no other question asked of them)."""
    return _verifier_texts(verifier, None)[0]


def _verifier_texts(verifier, tests_dirs: list[Path] | None) -> tuple[list[str], list[str]]:
    """(the verifier's command and its test scripts, as shell text; the first lines of the files
    in its tests folders, or copied into it, that start with `#!`)."""
    texts, shebangs = [verifier.command or ""], []
    # the files copied into the tests folder one by one too: a Terminal-Bench task.yaml task's
    # run-tests.sh, which is its test script (tasks/terminal_bench.py)
    files = [Path(f) for f in (getattr(verifier, "tests_files", None) or {}).values()]
    for folder in tests_dirs if tests_dirs is not None else verifier.tests_dirs:
        folder = Path(folder)
        if folder.is_dir():
            files += sorted(folder.rglob("*"))
    for path in files:
        if not path.is_file() or path.stat().st_size >= 2_000_000:
            continue
        try:
            head = path.read_bytes()[:4096].decode("utf-8", errors="replace")
        except OSError:
            continue
        if head.startswith("#!"):
            shebangs.append(head[2:].splitlines()[0])
        if path.suffix in (".sh", "") or head.startswith("#!") and "sh" in head.splitlines()[0]:
            try:
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                pass
    return texts, shebangs


def tool_names(verifier, tests_dirs: list[Path] | None = None) -> list[str]:
    """The programs the verifier runs: the command's program, the programs of its test script(s)
    and the interpreters their shebangs name, and DEFAULT_TOOLS; then the same names in the folders
    the scripts it sources put first on PATH (`path_folder`) and those it puts ahead of PATH itself
    (`path_prepends`), as paths (`read_verifier` gives the two apart)."""
    reads = read_verifier(verifier, tests_dirs)
    return reads.names + reads.in_folders


def _program_names(texts: list[str], shebangs: list[str], defaults: tuple[str, ...] = DEFAULT_TOOLS) -> list[str]:
    names: list[str] = list(defaults)

    def add(word: str) -> None:
        if word and word not in _SHELL_WORDS and re.fullmatch(r"[A-Za-z0-9_./+-]+", word) and word not in names:
            names.append(word)

    for line in shebangs:
        for w in line.split()[:2]:
            if not w.startswith("-"):
                add(w.rsplit("/", 1)[-1] if w.startswith("/") and PurePosixPath(w).name in ("env",) else w)
    for segment in _commands(texts):
        inv = invocation(segment)
        add(inv.raw_program)
        if inv.program in ("python", "python3") and inv.args[:1] == ["-m"] and len(inv.args) > 1:
            add(inv.args[1])  # python -m pytest: the module's console script too
        if inv.raw_program == "uvx" or (inv.raw_program == "uv" and inv.args[:2] == ["tool", "run"]):
            for word in _uv_tools(inv.args[2:] if inv.raw_program == "uv" else inv.args):
                add(word)
    return names[:MAX_TOOLS]


def _commands(texts: list[str]):
    """Each command of the scripts, in order, and those run inside their command substitutions
    (`norm=$(printf ... | awk ...)`: an awk the agent made print the expected line passed such a
    check unseen while only the commands outside were read)."""
    queue = deque(texts)
    while queue:
        for segment in split_segments(queue.popleft()):
            queue.extend(substitutions(segment.text))
            yield segment


def _in_folders(names: list[str], texts: list[str], sourced: list[str]) -> list[str]:
    """`names` in the folders the scripts put first on PATH. After `source ~/.local/bin/env` or a
    virtualenv's `activate`, a name resolves in that folder first: a `python3.13` the agent left
    there is what `uvx -p 3.13` finds. A script that fetches uv's installer has it replace uv and
    uvx in the installer's folder: one an honest agent installed there is not what the verifier runs."""
    replaced = {"uv", "uvx"} if any("astral.sh/uv" in text for text in texts) else set()
    folders = [path_folder(script) for script in sourced] + path_prepends(texts)
    out: list[str] = []
    for folder in dict.fromkeys(f for f in folders if f):
        skip = _NOT_IN_FOLDERS | (replaced if folder in _INSTALLER_FOLDERS else set())
        out += [f"{folder}/{n}" for n in names if "/" not in n and n not in skip]
    return out[:MAX_TOOLS]


_INSTALLER_FOLDERS = frozenset({"~/.local/bin", "~/.cargo/bin"})  # where uv's installers put uv and uvx
_PATH_ASSIGNMENT = re.compile(r"(?:^|[\s;&|(])(?:export\s+)?PATH=([\"']?)([^\"'\s;&|]+)\1")


def path_prepends(texts: list[str]) -> list[str]:
    """The folders the scripts put ahead of the PATH they were given (`export PATH="$HOME/.local/bin:$PATH"`,
    as some terminal-bench scripts do after uv's installer instead of sourcing its env script), by a
    path the guard can name: absolute, or under the home as `~/...`."""
    out: list[str] = []
    for text in texts:
        for match in _PATH_ASSIGNMENT.finditer(text):
            parts = match.group(2).split(":")
            if not any(p in ("$PATH", "${PATH}") for p in parts):
                continue  # a PATH of its own: the folders it names are the only ones, not ahead of others
            for part in parts[:[i for i, p in enumerate(parts) if p in ("$PATH", "${PATH}")][0]]:
                folder = re.sub(r"^(\$HOME|\$\{HOME\}|~)/", "~/", part).rstrip("/")
                if re.fullmatch(r"(~/|/)[A-Za-z0-9_./+-]+", folder) and "/../" not in folder and folder not in out:
                    out.append(folder)
    return out[:8]


# Shell-level programs the test script runs before a sourced script changes its PATH, or that no
# installer or virtualenv puts in its folder.
_NOT_IN_FOLDERS = frozenset({"bash", "sh", "env", "timeout", "apt-get", "apt", "curl", "wget", "mkdir"})


def sourced_scripts(verifier, tests_dirs: list[Path] | None = None, texts: list[str] | None = None) -> list[str]:
    """The scripts the verifier's command and test scripts source (`source F`, `. F`) outside its
    tests folder, by a path the guard can name: absolute, under the home (`$HOME/...`, `${HOME}/...`,
    `~/...`, given as `~/...`), or relative (read from the workdir, where the script runs). Harbor's
    test scripts source the env script uv's installer writes (`source $HOME/.local/bin/env`), which
    that installer keeps when one is there; others a virtualenv's `activate`. What they define (a function named like a tool, a folder first
    on PATH, a trap that writes the reward) runs in the verifier's shell (findings.sourced_changed)."""
    if texts is None:
        texts = _verifier_texts(verifier, tests_dirs)[0]
    mounts = [verifier.tests_mount] if getattr(verifier, "tests_mount", None) else []
    out: list[str] = []
    for text in texts:
        for segment in split_segments(text):
            inv = invocation(segment)
            if inv.raw_program not in ("source", ".") or not inv.args:
                continue
            path = re.sub(r"^(\$HOME|\$\{HOME\}|~)/", "~/", inv.args[0])
            if (not re.fullmatch(r"(~/)?[A-Za-z0-9_./+-]+", path) or "/../" in path or path.startswith("../")
                    or any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts) or path in out):
                continue
            out.append(path)
    return out[:16]


# The options of `uv venv`, `python3 -m venv` and `virtualenv` that take a value (`--prompt X`), skipped
# when looking for the folder they make; the rest are flags (`--seed`, `--clear`, `--upgrade-deps`).
_VENV_VALUE_OPTIONS = frozenset({"-p", "--python", "--prompt", "--index-url", "-i", "--extra-index-url", "--index",
                                 "-f", "--find-links", "--cache-dir", "--directory", "--project", "--python-preference",
                                 "--index-strategy", "--exclude-newer", "--keyring-provider", "--activators",
                                 "--creator", "--seeder", "--discovery", "--app-data"})


def verifier_venvs(texts: list[str]) -> list[str]:
    """The virtualenvs the verifier's scripts make (`uv venv [PATH]`, `.venv` when none is given;
    `python3 -m venv PATH`; `virtualenv PATH`), by their `pyvenv.cfg`: a relative one is in the
    workdir. terminal-bench's scripts run `uv venv .tbench-testing` and go on into it: uv 0.9 makes
    it again over one already there, keeping what the agent put in it (a `.pth` line), and later
    versions refuse, the script going on into the agent's (findings.sourced_changed)."""
    out: list[str] = []
    for text in texts:
        for segment in split_segments(text):
            inv = invocation(segment)
            if inv.raw_program == "uv" and inv.args[:1] == ["venv"]:
                at = skip_options(inv.args, 1, _VENV_VALUE_OPTIONS)
                path = inv.args[at] if at < len(inv.args) else ".venv"
            elif inv.program in ("python", "python3") and inv.args[:2] == ["-m", "venv"] or inv.raw_program == "virtualenv":
                args = inv.args[2:] if inv.raw_program != "virtualenv" else inv.args
                at = skip_options(args, 0, _VENV_VALUE_OPTIONS)
                path = args[at] if at < len(args) else ""
            else:
                continue
            cfg = path.rstrip("/") + "/pyvenv.cfg"
            if path and re.fullmatch(r"[A-Za-z0-9_./+-]+", path) and "/../" not in cfg and cfg not in out:
                out.append(cfg)
    return out[:8]


# uv's commands that read the project in their working folder: its pyproject.toml (`[tool.uv]`, and
# the dependencies `uv run` and `uv sync` install) and its uv.lock. terminal-bench's test scripts run
# `uv venv .tbench-testing`, `uv pip install pytest==...` and `uv run pytest ...` in the workdir.
_PROJECT_COMMANDS = re.compile(r"(^|[\s;&|(])(\S*/)?uv\s+(run|sync|pip|add|lock|venv|export)\b")


def reads_project(texts: list[str]) -> bool:
    return any(_PROJECT_COMMANDS.search(text) for text in texts)


# uv's commands that run in or install into an environment they find by the folder they run in:
# the project's `.venv` (`uv run`, `uv sync`, `uv add`, `uv remove`; made when missing) and, with no
# virtualenv active, a `.venv` there for `uv run` and `uv pip` too. terminal-bench's task template
# runs `uv init`, `uv add pytest==8.4.1` and `uv run pytest ...` in the workdir.
_ENV_COMMANDS = re.compile(r"(?:^|[\s;&|(])(?:\S*/)?uv\s+(init|run|sync|add|remove|pip)\b")
# Options with which `uv pip` uses another environment than the `.venv` (`uv run --active` too).
_OTHER_ENV = re.compile(r"(?:^|\s)(?:--system|--python(?:=|\s)|-p\s|--target|--prefix)")
_ACTIVATES = re.compile(r"(?:^|[\s;&|(])(?:source|\.)\s+\S*bin/activate\b|\bconda\s+activate\b")


def project_envs(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """The `.venv` folders the verifier's uv commands would use, by the folder each runs in (the
    workdir, as a relative `.venv`, until a `cd` to a path the script names; a folder under the
    tests mount is left out: the verifier's own). One the agent made there before the verifier ran
    is what `uv add` installs into and `uv run` runs: a `.pth` line in it, or a `pytest` in its
    `bin`, passed fix-python-inventory unseen before 2026-12-05. Where the script activates a
    virtualenv, uv uses the `.venv` only for a project: such a folder comes with a `?` in front, and
    the check takes it only where a `pyproject.toml` is beside it (or the script runs `uv init`
    there first)."""
    project_only: dict[str, bool] = {}  # env -> taken only beside a pyproject.toml
    for text in texts:
        activated, cwd, made = bool(_ACTIVATES.search(text)), "", set()
        for segment in split_segments(text):
            inv = invocation(segment)
            if inv.raw_program == "cd":
                cwd = moved(cwd, inv.args[0] if inv.args else "~")
                continue
            found = _ENV_COMMANDS.search(segment.text)
            if not found or cwd is None or (tests_mount and cwd.startswith("/") and under(cwd, tests_mount)):
                continue
            rest = segment.text[found.end():]
            if _OTHER_ENV.search(rest) if found.group(1) == "pip" else re.search(r"(?:^|\s)--active\b", rest):
                continue  # the interpreter's own (`uv pip install --system`), one it names, or the active one
            if found.group(1) == "init":
                made.add(cwd)
                continue
            env = f"{cwd.rstrip('/')}/.venv" if cwd else ".venv"
            project_only[env] = project_only.get(env, True) and activated and cwd not in made
    return [("?" if only else "") + env for env, only in project_only.items()][:8]


# uv's options that take a value (`-p 3.13`, `--with pytest==8.4.1`): skipped when looking for the
# program it runs. Harbor's test scripts run `uvx -p 3.13 -w pytest==8.4.1 ... pytest ...`.
_UV_VALUE_OPTIONS = frozenset({"-p", "--python", "-w", "--with", "--from", "--with-requirements", "--with-editable",
                               "--index", "--index-url", "-i", "--extra-index-url", "-f", "--find-links",
                               "--config-file", "--cache-dir", "-C", "--config-setting", "--directory", "--project",
                               "--env-file", "--index-strategy", "--python-preference", "--constraints",
                               "--overrides", "--build-constraints", "--exclude-newer"})


def _uv_tools(args: list[str]) -> list[str]:
    """What `uvx` (`uv tool run`) runs: the program it names, and the interpreter it asks for (`-p
    3.13` is `python3.13`, which uv finds on PATH among others: one the agent put there is then a
    tool added). `uv run CMD` is read as CMD by the shell parser (shell/parse.py)."""
    start = skip_options(args, 0, _UV_VALUE_OPTIONS)
    out = [args[start]] if start < len(args) else []
    for i, word in enumerate(args[:start]):
        option, _, inline = word.partition("=")
        if option in ("-p", "--python"):
            value = inline or (args[i + 1] if i + 1 < start else "")
            out.append(f"python{value}" if re.fullmatch(r"3(\.\d+)*", value) else value)
    return out


@dataclass(frozen=True)
class VerifierReads:
    names: list[str]  # the programs it runs, by name (or by the path the script gives)
    in_folders: list[str]  # the same in the folders it puts first on PATH: `~/` the home, relative the workdir
    sourced: list[str]  # the scripts it sources, then the pyvenv.cfg of each virtualenv it makes
    project: bool  # it runs uv commands that read the workdir's project (`reads_project`)
    envs: list[str]  # the `.venv` folders its uv commands use (`project_envs`; `?`: only beside a project)
    npm: list[str] = ()  # the folders its npm commands run in (`+`: an npm install runs there; npm_project.npm_commands)
    npm_scripts: list[str] = ()  # the package.json scripts those run
    # where it runs each build tool of runner/build_tools.py (its `folders`), by the tool's key
    tools: dict[str, list[str]] = field(default_factory=dict)
    uv: bool = False  # its scripts run uv or uvx (runner/uv_cache.py)


def read_verifier(verifier, tests_dirs: list[Path] | None = None) -> VerifierReads:
    """The scripts read once, and each question asked of their text. The programs the scripts run
    are also looked for in the `bin` of each `.venv` their uv commands use (`uv run` puts it first
    on PATH), with the interpreter the console scripts there start."""
    texts, shebangs = _verifier_texts(verifier, tests_dirs)
    names, sourced = _program_names(texts, shebangs), sourced_scripts(verifier, tests_dirs, texts)
    mount = getattr(verifier, "tests_mount", None)
    npm, npm_scripts = npm_commands(texts, mount)
    if npm and "node" not in names:
        names.append("node")  # npm and npx start by `#!/usr/bin/env node`: the first `node` on PATH
    tools = {t.key: f for t in TOOLS if (f := t.folders(texts, mount))}
    names += list(dict.fromkeys(p for t in TOOLS if t.key in tools for p in t.started(tools[t.key]) if p not in names))
    envs = project_envs(texts, mount)
    scripted = _program_names(texts, [], ("python", "python3"))
    run = [n for n in scripted if "/" not in n and n not in _NOT_IN_FOLDERS and n not in ("uv", "uvx")]
    in_envs = [f"{env.lstrip('?')}/bin/{n}" for env in envs for n in run]
    project = reads_project(texts)
    return VerifierReads(names, (_in_folders(names, texts, sourced) + in_envs)[:MAX_TOOLS], sourced + verifier_venvs(texts),
                         project, envs, npm, npm_scripts, tools,
                         # `uv run` is read as the program it runs: its `.venv` says it is there
                         bool({"uv", "uvx"} & set(scripted) or envs or project))
