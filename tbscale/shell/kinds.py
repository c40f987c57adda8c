"""The vocabulary of command kinds, the program tables behind it, and what the classifier
needs to locate writes: scratch paths, positional arguments, and files a Python or Node
snippet writes. Tool-specific rules for package managers, build tools, git, sed and awk."""

from __future__ import annotations

import re

from tbscale.shell.parse import match_paren, read_quoted

# Command kinds (internal vocabulary between classification and labelling).
EDIT = "edit"
RUN = "run"
TEST = "test"
FILEOP = "fileop"
INSTALL = "install"
READ = "read"
SCRATCH = "scratch_write"
WAIT = "wait"

RUNS_CODE = frozenset({RUN, TEST})
READ_COMPATIBLE = frozenset({READ, WAIT})
MAX_NESTING = 3  # bash -c "bash -c '...'" recursion guard


_SCRATCH_PREFIXES = ("/tmp/", "/var/tmp/", "$TMPDIR/", "${TMPDIR}/")
_LOCALHOST = re.compile(r"^(?:[a-z]+://)?(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])(?:[:/]|$)", re.I)
TESTISH = re.compile(
    r"(?:^|[^a-z])(?:tests?|testing|check|checks|checker|verify|verifier|grade|grader|"
    r"validate|validator|evaluate|eval|judge)(?:[^a-z]|$)",
    re.I,
)

READ_PROGRAMS = frozenset(
    """ls ll la dir cat head tail less more grep egrep fgrep rg ag ack find locate wc stat file pwd
    echo printf which whereis type printenv ps pgrep top htop df du free tree cut sort uniq tr column
    jq yq xxd hexdump od strings readlink realpath basename dirname id whoami groups hostname uname
    date nproc lscpu lsblk lsof netstat ss nl tac rev fold fmt paste join comm expand seq nm objdump
    readelf ldd getent locale man info help tldr base64 sha256sum sha1sum sha512sum md5sum b2sum
    cksum dpkg-query apt-cache diffstat lsattr getfacl pstree uptime w ifconfig ip env""".split()
)
NOOP_PROGRAMS = frozenset(
    """cd pushd popd export set unset source . alias unalias clear shopt declare local read true
    false : exit return trap ulimit umask hash history reset typeset readonly let""".split()
)
WAIT_PROGRAMS = frozenset({"sleep", "wait", "watch", "tail"})
FILEOP_PROGRAMS = frozenset(
    """mv cp rm rmdir unlink shred ln chmod chown chgrp mkdir touch rsync tar zip unzip gzip gunzip
    bzip2 bunzip2 xz unxz 7z 7za zstd unzstd kill pkill killall fuser""".split()
)
TEST_PROGRAMS = frozenset(
    """pytest tox nox jest mocha vitest ava rspec phpunit ctest bats diff cmp test [ mypy flake8
    pylint pyflakes pyright pycodestyle shellcheck eslint hadolint yamllint""".split()
)
PYTHON_TEST_MODULES = frozenset(
    """pytest unittest doctest py_compile compileall mypy flake8 pylint pyflakes pyright
    pycodestyle nose nose2""".split()
)
INTERPRETERS = frozenset(
    """node deno bun ruby php java Rscript R julia lua luajit octave swift kotlin scala ts-node tsx
    runghc ghci sqlite3 psql mysql redis-cli valgrind gdb lldb strace ltrace perf hyperfine
    dotnet elixir erl iex guile racket sbcl ocaml""".split()
)
BUILD_PROGRAMS = frozenset(
    """make cmake ninja meson gcc g++ cc c++ clang clang++ rustc javac mvn gradle gradlew tsc zig ghc
    nasm as ld ant bazel scons autoreconf""".split()
)
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
VERSION_FLAGS = frozenset({"--version", "-V", "--help", "-h"})


def _is_scratch(path: str) -> bool:
    return path in ("/tmp", "/var/tmp") or path.startswith(_SCRATCH_PREFIXES)


def write_kinds(path: str | None) -> set[str]:
    """What writing to ``path`` amounts to: nothing for devices (``2>/dev/null``), a scratch
    write for temporary space, and an edit otherwise -- including an unknown (``None``) target."""
    if path is not None and path.startswith("/dev/"):
        return set()
    return {SCRATCH} if path is not None and _is_scratch(path) else {EDIT}


def positional_args(args: list[str], with_value: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i + 1 :])
            break
        if arg.startswith("-") and arg != "-":
            i += 2 if arg in with_value else 1
            continue
        out.append(arg)
        i += 1
    return out


def first_positional(args: list[str], with_value: frozenset[str] = frozenset()) -> str:
    positionals = positional_args(args, with_value)
    return positionals[0] if positionals else ""


# --- code strings (python -c, python here-docs, node -e) -------------------------------------

_STRING_LITERAL = re.compile(r"""^\s*[rRbBuUfF]{0,2}(['"])(.*)\1\s*$""", re.S)
_PY_WRITER_CALLS = re.compile(
    r"(?<![\w.])open\(|\.to_(?:csv|json|parquet|excel|pickle)\(|savefig\(|(?:np|numpy)\.save(?:txt|z)?\("
)
_NODE_WRITER_CALLS = re.compile(r"(?:writeFileSync|appendFileSync|writeFile|appendFile|createWriteStream)\(")
_PATH_WRITE = re.compile(
    r"""Path\(\s*([rRfF]?(['"]).*?\2)?[^()]*\)\s*\.write_(?:text|bytes)\(|\.write_(?:text|bytes)\("""
)


def _call_args(code: str, open_paren: int) -> list[str]:
    """Top-level comma-separated arguments of the call whose ``(`` is at ``open_paren``."""
    end = match_paren(code, open_paren)
    inner = code[open_paren + 1 : end - 1]
    args: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(inner):
        ch = inner[i]
        if ch in "'\"":
            i = read_quoted(inner, i)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(inner[start:i].strip())
            start = i + 1
        i += 1
    args.append(inner[start:].strip())
    return [a for a in args if a]


def _literal(expr: str) -> str | None:
    match = _STRING_LITERAL.match(expr)
    return match.group(2) if match else None


def code_write_kinds(code: str, language: str) -> set[str]:
    """EDIT/SCRATCH for each file the code visibly writes (Python or Node)."""
    kinds: set[str] = set()
    calls = _PY_WRITER_CALLS if language == "python" else _NODE_WRITER_CALLS
    for match in calls.finditer(code):
        args = _call_args(code, match.end() - 1)
        if not args:
            continue
        if match.group(0).endswith("open("):
            mode_expr = next((a.split("=", 1)[1] for a in args[1:] if a.startswith("mode")), None)
            if mode_expr is None:
                mode_expr = args[1] if len(args) > 1 and "=" not in args[1] else "'r'"
            mode = _literal(mode_expr)
            if mode is not None and not set(mode) & set("wax+"):
                continue
        kinds |= write_kinds(_literal(args[0]))
    if language == "python":
        for match in _PATH_WRITE.finditer(code):
            kinds |= write_kinds(_literal(match.group(1)) if match.group(1) else None)
    return kinds


# --- per-program rules -------------------------------------------------------------------------


def pip_kinds(args: list[str]) -> set[str]:
    sub = first_positional(args)
    if sub == "install":
        return {INSTALL}
    if sub in ("list", "show", "freeze", "check", "search", "index", "inspect", "config", "debug", "help"):
        return {READ}
    if not sub and any(a in VERSION_FLAGS for a in args):
        return {READ}
    return set()


_INSTALL_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "apt": frozenset({"install", "reinstall", "build-dep", "upgrade", "full-upgrade", "dist-upgrade"}),
    "apt-get": frozenset({"install", "reinstall", "build-dep", "upgrade", "dist-upgrade"}),
    "aptitude": frozenset({"install", "reinstall"}),
    "apk": frozenset({"add"}),
    "yum": frozenset({"install", "groupinstall", "localinstall"}),
    "dnf": frozenset({"install", "groupinstall"}),
    "zypper": frozenset({"install", "in"}),
    "brew": frozenset({"install", "reinstall"}),
    "conda": frozenset({"install", "create"}),
    "mamba": frozenset({"install", "create"}),
    "micromamba": frozenset({"install", "create"}),
    "poetry": frozenset({"add", "install"}),
    "pipenv": frozenset({"install"}),
    "pipx": frozenset({"install", "inject"}),
    "pdm": frozenset({"add", "install", "sync"}),
    "gem": frozenset({"install"}),
    "bundle": frozenset({"install", "add"}),
    "npm": frozenset({"install", "i", "ci", "add", "isntall", "in"}),
    "pnpm": frozenset({"install", "i", "add"}),
    "yarn": frozenset({"install", "add"}),
    "bun": frozenset({"install", "i", "add"}),
    "cargo": frozenset({"install", "add"}),
    "go": frozenset({"install", "get"}),
    "pixi": frozenset({"add", "install"}),
}
_PACKAGE_READ_SUBCOMMANDS = frozenset(
    {"list", "ls", "show", "search", "policy", "info", "view", "outdated", "why", "env", "version",
     "doc", "tree", "metadata", "config"}
)


def package_manager_kinds(program: str, args: list[str]) -> set[str] | None:
    """Kinds for package-manager-like tools, or None if ``program`` is not one."""
    if program == "pip" or program == "pip-install":
        return pip_kinds(args)
    if program in ("easy_install", "cpanm", "cpan"):
        return {INSTALL}
    if program == "uv":
        sub = positional_args(args)
        if sub[:2] == ["pip", "install"] or sub[:1] in (["add"], ["sync"]) or sub[:2] == ["tool", "install"]:
            return {INSTALL}
        if sub[:1] == ["pip"] and sub[1:2] and sub[1] in ("list", "show", "freeze", "tree"):
            return {READ}
        return set()
    if program == "dpkg":
        if any(a in ("-i", "--install") for a in args):
            return {INSTALL}
        queries = ("-l", "-L", "-s", "-S", "--list", "--status", "--search")
        return {READ} if any(a in queries for a in args) else set()
    if program == "pacman":
        flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        if "S" in flags and not set(flags) & set("sicgl"):
            return {INSTALL}
        return {READ} if "Q" in flags or "S" in flags else set()
    if program not in _INSTALL_SUBCOMMANDS:
        return None
    sub = first_positional(args, frozenset({"-C", "--prefix", "-n", "--name", "-c", "--channel"}))
    if sub in _INSTALL_SUBCOMMANDS[program] or (program == "yarn" and not sub):
        return {INSTALL}
    if program in ("npm", "pnpm", "yarn", "bun"):
        return _js_script_kinds(program, args, sub)
    if program == "cargo":
        return _cargo_kinds(sub)
    if program == "go":
        return _go_kinds(sub, args)
    if sub in _PACKAGE_READ_SUBCOMMANDS or (not sub and any(a in VERSION_FLAGS for a in args)):
        return {READ}
    return set()


def _js_script_kinds(program: str, args: list[str], sub: str) -> set[str]:
    if sub in ("test", "t", "tst"):
        return {TEST}
    if sub in ("run", "run-script"):
        positionals = positional_args(args)
        script = positionals[1] if len(positionals) > 1 else ""
        return {TEST} if re.search(r"test|check|lint|verify", script) else {RUN}
    if sub in ("start", "exec", "x", "dlx"):
        return {RUN}
    if program == "bun" and sub and sub not in _PACKAGE_READ_SUBCOMMANDS:  # bun script.ts
        return {RUN}
    if sub in _PACKAGE_READ_SUBCOMMANDS:
        return {READ}
    if program == "yarn" and sub:  # yarn <script>
        return {TEST} if re.search(r"test|check|lint", sub) else {RUN}
    return set()


def _cargo_kinds(sub: str) -> set[str]:
    if sub in ("test", "t", "check", "c", "clippy", "bench"):
        return {TEST}
    if sub in ("build", "b", "run", "r"):
        return {RUN}
    if sub == "fmt":
        return {EDIT}
    return {READ} if sub in ("tree", "metadata", "--version", "version") else set()


def _go_kinds(sub: str, args: list[str]) -> set[str]:
    if sub in ("test", "vet"):
        return {TEST}
    if sub in ("run", "build", "generate"):
        return {RUN}
    if sub == "fmt":
        return {EDIT}
    if sub == "mod":
        action = positional_args(args)[1:2]
        return {INSTALL} if action in (["tidy"], ["download"]) else set()
    return {READ} if sub in ("version", "env", "list", "doc") else set()


_GIT_READ = frozenset(
    """status log diff show ls-files ls-tree blame rev-parse describe shortlog reflog grep cat-file
    whatchanged help version""".split()
)
_GIT_EDIT = frozenset({"apply", "am", "restore", "merge", "pull", "cherry-pick", "revert", "rebase"})


def git_kinds(args: list[str]) -> set[str]:
    positionals = positional_args(args, frozenset({"-C", "-c", "--git-dir", "--work-tree"}))
    sub = positionals[0] if positionals else ""
    rest = args[args.index(sub) + 1 :] if sub in args else []
    if sub in _GIT_READ:
        return {READ}
    if sub == "stash":  # plain "git stash" / pop / apply rewrite working-tree files
        action = rest[0] if rest else "push"
        if action in ("list", "show"):
            return {READ}
        return set() if action in ("drop", "clear") else {EDIT}
    if sub in ("branch", "tag", "remote", "config"):
        flags_only = all(a.startswith("-") for a in rest)
        listing = bool(rest) and rest[0] in ("list", "show", "get-url", "-l", "--list", "-v", "-a", "--get")
        return {READ} if flags_only or listing else set()
    if sub == "apply":
        return {TEST} if any(a in ("--check", "--stat", "--numstat", "--summary") for a in rest) else {EDIT}
    if sub in _GIT_EDIT:
        return {EDIT}
    if sub == "reset" and "--hard" in rest:
        return {EDIT}
    if sub == "checkout" and "--" in rest:
        return {EDIT}
    if sub in ("rm", "mv", "clean"):
        return {FILEOP}
    return set()


def sed_kinds(args: list[str]) -> set[str]:
    in_place = False
    script_given = False
    files: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-e", "--expression", "-f", "--file"):
            script_given = True
            i += 2
            continue
        if arg.startswith(("--expression=", "--file=")):
            script_given = True
        elif arg == "--in-place" or arg.startswith("--in-place="):
            in_place = True
        elif arg.startswith("-") and arg != "-" and not arg.startswith("--"):
            letters = arg[1:]
            if re.match(r"[nErsuz]*i", letters):
                in_place = True
            if re.match(r"[nErsuzi]*[ef]", letters):
                script_given = True
                i += 2
                continue
        else:
            files.append(arg)
        i += 1
    if not in_place:
        return {READ}
    targets = files if script_given else files[1:]
    if targets and all(_is_scratch(t) for t in targets):
        return {SCRATCH}
    return {EDIT}


_AWK_PRINT_TO_FILE = re.compile(r"""\bprintf?\b[^;{}|]*?>>?\s*(?:"([^"]*)"|[A-Za-z_$(])""")


def awk_kinds(args: list[str]) -> set[str]:
    if "inplace" in args and "-i" in args:
        return {EDIT}
    script = first_positional(args, frozenset({"-F", "-v", "-f", "-i"}))
    kinds: set[str] = set()
    for match in _AWK_PRINT_TO_FILE.finditer(script):
        kinds |= write_kinds(match.group(1))
    if "system(" in script:
        kinds.add(RUN)
    return kinds or {READ}


def download_kinds(args: list[str]) -> set[str]:
    """curl/wget: a check when aimed at a local service the agent runs; otherwise unlabelled."""
    return {TEST} if any(_LOCALHOST.match(a) for a in args) else set()


def formatter_kinds(program: str, args: list[str]) -> set[str]:
    checking = any(a in ("--check", "--diff", "-c") for a in args)
    if program == "ruff":
        if "format" in args:
            return {TEST} if checking else {EDIT}
        return {TEST, EDIT} if "--fix" in args else {TEST}
    return {TEST} if checking else {EDIT}
