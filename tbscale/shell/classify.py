"""Classification of one command into kinds (edit, run, test/check, file operation, install,
read, scratch write, wait) from its program, arguments and redirections; `bash -c` and
`find -exec` are classified by the commands they contain."""

from __future__ import annotations

import re

from tbscale.shell.kinds import (
    BUILD_PROGRAMS,
    EDIT,
    FILEOP,
    FILEOP_PROGRAMS,
    INTERPRETERS,
    MAX_NESTING,
    NOOP_PROGRAMS,
    PYTHON_TEST_MODULES,
    READ,
    READ_PROGRAMS,
    RUN,
    SHELLS,
    TEST,
    TEST_PROGRAMS,
    TESTISH,
    VERSION_FLAGS,
    WAIT,
    WAIT_PROGRAMS,
    awk_kinds,
    code_write_kinds,
    download_kinds,
    first_positional,
    formatter_kinds,
    git_kinds,
    package_manager_kinds,
    pip_kinds,
    positional_args,
    sed_kinds,
    write_kinds,
)
from tbscale.shell.parse import (
    OUTPUT_OPS,
    Invocation,
    Segment,
    invocation,
    normalise,
    resolve_program,
    split_segments,
)


def _python_kinds(inv: Invocation) -> set[str]:
    args = inv.args
    with_value = frozenset({"-W", "-X", "-c", "-m"})
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        flag = args[i]
        if flag == "-c":
            code = args[i + 1] if i + 1 < len(args) else ""
            return {RUN} | code_write_kinds(code, "python")
        if flag == "-m":
            module = args[i + 1] if i + 1 < len(args) else ""
            rest = args[i + 2 :]
            if module in PYTHON_TEST_MODULES:
                return {TEST}
            if module == "pip":
                return pip_kinds(rest)
            if module in ("json.tool", "site", "sysconfig", "platform"):
                return {READ}
            return {RUN}
        i += 2 if flag in with_value else 1
    script = args[i] if i < len(args) else "-"
    kinds = {RUN}
    if script != "-" and TESTISH.search(script):
        kinds.add(TEST)
    if script == "-":  # program on stdin, typically a here-doc
        for body in inv.heredocs:
            kinds |= code_write_kinds(body, "python")
    return kinds


def _node_kinds(inv: Invocation) -> set[str]:
    args = inv.args
    if inv.program == "node" and any(a in ("--check", "-c") for a in args):
        return {TEST}
    for flag in ("-e", "--eval", "-p", "--print"):
        if flag in args:
            idx = args.index(flag)
            code = args[idx + 1] if idx + 1 < len(args) else ""
            return {RUN} | code_write_kinds(code, "node")
    if inv.program in ("deno", "bun") and args[:1] == ["test"]:
        return {TEST}
    kinds = {RUN}
    script = first_positional(args)
    if script and TESTISH.search(script):
        kinds.add(TEST)
    if not script:
        for body in inv.heredocs:
            kinds |= code_write_kinds(body, "node")
    return kinds


def _shell_kinds(inv: Invocation, depth: int) -> set[str]:
    args = inv.args
    idx = 0
    while idx < len(args) and args[idx][:1] in ("-", "+") and args[idx] not in ("-", "--"):
        arg = args[idx]
        if arg in ("-o", "+o", "-O", "+O"):
            idx += 2
            continue
        letters = arg[1:] if not arg.startswith("--") else ""
        if "c" in letters:  # bash -c CODE (also -lc, -ec): classify the code itself
            code = args[idx + 1] if idx + 1 < len(args) else ""
            if depth >= MAX_NESTING:
                return {RUN}
            kinds: set[str] = set()
            for segment in split_segments(code):
                kinds |= _command_kinds(segment, depth + 1)
            return kinds
        if "n" in letters:
            return {TEST}  # bash -n: syntax check
        idx += 1
    script = first_positional(args[idx:])
    return {RUN, TEST} if script and TESTISH.search(script) else {RUN}


def _find_kinds(args: list[str], depth: int) -> set[str]:
    kinds = {READ}
    if "-delete" in args:
        kinds.add(FILEOP)
    for flag in ("-exec", "-execdir", "-ok", "-okdir"):
        for idx, arg in enumerate(args):
            if arg != flag:
                continue
            sub: list[str] = []
            for word in args[idx + 1 :]:
                if word in (";", "+"):
                    break
                sub.append(word)
            if sub and depth < MAX_NESTING:
                kinds |= _word_kinds(sub, depth + 1)
    return kinds


def _program_kinds(inv: Invocation, depth: int) -> set[str]:
    program, args = inv.program, inv.args
    if not program or program in NOOP_PROGRAMS:
        return {READ}
    if program == "command":  # command -v NAME: a lookup
        return {READ}
    if program == "tail":
        return {READ, WAIT}
    if program in WAIT_PROGRAMS:
        return {WAIT}
    if len(args) == 1 and args[0] in VERSION_FLAGS and program not in TEST_PROGRAMS:
        return {READ}
    if program in ("python", "ipython"):
        return _python_kinds(inv)
    if program == "perl":
        # -i, -pi, -pie, -i.bak edit in place; -Mstrict or -I/lib merely contain an "i"
        in_place = any(re.match(r"-[nplaswWT0-9]*i", a) for a in args)
        return {EDIT} if in_place else {RUN}
    if program in ("node", "deno"):
        return _node_kinds(inv)
    if program in SHELLS:
        return _shell_kinds(inv, depth)
    package = package_manager_kinds(program, args)
    if package is not None:
        return package
    if program == "git":
        return git_kinds(args)
    if program == "make":
        targets = positional_args(args, frozenset({"-C", "-f", "-j", "-l", "-o", "-W", "-I"}))
        return {RUN, TEST} if any(TESTISH.search(t) for t in targets) else {RUN}
    if program in ("mvn", "gradle", "gradlew", "dotnet", "bazel") and any(
        a in ("test", "verify", "check") for a in args
    ):
        return {RUN, TEST}
    if program == "sed":
        return sed_kinds(args)
    if program in ("awk", "gawk", "mawk", "nawk"):
        return awk_kinds(args)
    if program == "find":
        return _find_kinds(args, depth)
    if program == "tee":
        files = positional_args(args)
        return set().union(*(write_kinds(f) for f in files)) or {READ}
    if program == "sort":
        for idx, arg in enumerate(args):
            if arg == "-o" and idx + 1 < len(args):
                return write_kinds(args[idx + 1]) or {READ}
            if arg.startswith(("--output=", "-o")) and len(arg) > 2:
                return write_kinds(arg.split("=", 1)[-1] if "=" in arg else arg[2:]) or {READ}
        return {READ}
    if program == "dd":
        out = next((a[3:] for a in args if a.startswith("of=")), None)
        return (write_kinds(out) or {READ}) if out is not None else {READ}
    if program == "tar" and ("--list" in args or re.match(r"-?[a-zA-Z]*t", args[0] if args else "")):
        return {READ}  # tar -tzf lists an archive
    if program == "unzip" and any(a in ("-l", "-Z", "-v", "-t") for a in args):
        return {READ}
    if program in ("sha256sum", "sha1sum", "sha512sum", "md5sum", "b2sum") and any(
        a in ("-c", "--check") for a in args
    ):
        return {TEST}
    if program in ("curl", "wget", "http", "https", "httpie", "nc"):
        return download_kinds(args)
    if program in ("ruff", "black", "isort", "autopep8", "yapf"):
        return formatter_kinds(program, args)
    if program == "gofmt":
        return {EDIT} if "-w" in args else {READ}
    if program in ("patch",):
        return {TEST} if "--dry-run" in args else {EDIT}
    if program in ("truncate", "ed", "ex"):
        return {EDIT}
    if program in ("npx", "bunx", "pnpx"):
        tool = normalise(first_positional(args))
        return {TEST} if tool in TEST_PROGRAMS or tool == "playwright" else {RUN}
    if program in TEST_PROGRAMS:
        return {TEST}
    if program in FILEOP_PROGRAMS:
        return {FILEOP}
    if program in BUILD_PROGRAMS or program in INTERPRETERS:
        return {RUN}
    if program in READ_PROGRAMS:
        return {READ}
    if "/" in inv.raw_program:  # ./prog, /app/bin/x, build/run.sh
        return {RUN, TEST} if TESTISH.search(inv.raw_program) else {RUN}
    return set()


def _redirect_kinds(redirects: list[tuple[str, str]]) -> set[str]:
    kinds: set[str] = set()
    for op, target in redirects:
        if op not in OUTPUT_OPS:
            continue
        if op == ">&" and (target.isdigit() or target == "-"):
            continue  # fd duplication such as 2>&1
        kinds |= write_kinds(target)
    return kinds


def _command_kinds(segment: Segment, depth: int = 0) -> set[str]:
    inv = invocation(segment)
    return _program_kinds(inv, depth) | _redirect_kinds(inv.redirects)


def _word_kinds(words: list[str], depth: int) -> set[str]:
    raw, args = resolve_program(words)
    inv = Invocation(normalise(raw) if raw else "", raw, args, [], [])
    return _program_kinds(inv, depth)


# ---------------------------------------------------------------------------------------------
# Behaviour labels
# ---------------------------------------------------------------------------------------------


def command_kind_list(command_text: str) -> tuple[list[Segment], list[set[str]]]:
    segments = split_segments(command_text)
    return segments, [_command_kinds(segment) for segment in segments]
