"""Dockerfiles for the classic builder.

tbscale builds images through the docker SDK, and the Engine API's build endpoint runs the classic
builder, on every engine version (docker/docker-py#2916). The classic builder refuses BuildKit's
`COPY --chmod` ("the --chmod option requires BuildKit"), which many Harbor tasks use to make a
script executable. `for_classic_builder` rewrites such an instruction into the plain copy plus a
`RUN chmod` of exactly what was copied, under `USER root` when the stage runs as another user,
drops `--link` (a BuildKit cache hint with no effect on the files), and writes the folder that
several sources are copied into with its trailing `/` (`COPY a b .` becomes `COPY a b ./`), which
the classic builder insists on. A `RUN` with here-documents (`RUN cat > f <<'EOF'` and its lines,
or `RUN <<EOF` and a script), which the classic builder reads as instructions of their own, becomes
the one exec-form `RUN` of the stage's shell with the same text, which is what BuildKit runs.
Nothing else changes, so a Dockerfile without these is built as written; a here-document the
classic builder cannot be given (`COPY <<EOF`, a script with its own `#!`) is an error that says
it requires BuildKit.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field

_COPY = re.compile(r"^(\s*)(COPY|ADD)(\s+)(.*)$", re.IGNORECASE | re.DOTALL)
_FROM = re.compile(r"^\s*FROM\s", re.IGNORECASE)
_USER = re.compile(r"^\s*USER\s+(\S+)", re.IGNORECASE)
_MODE = re.compile(r"^(?:[0-7]{3,4}|[ugoa]*[-+=][rwxXst]*(?:,[ugoa]*[-+=][rwxXst]*)*)$")


_HEREDOC_VERB = re.compile(r"^\s*(RUN|COPY|ADD)\s", re.IGNORECASE)
_HEREDOC = re.compile(r"(?<!<)<<(-?)[ \t]*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_RUN = re.compile(r"^(\s*)(RUN)(\s+)(.*)$", re.IGNORECASE | re.DOTALL)
_SHELL = re.compile(r"^\s*SHELL\s+(\[.*\])\s*$", re.IGNORECASE | re.DOTALL)
DEFAULT_SHELL = ["/bin/sh", "-c"]


@dataclass
class Instruction:
    """One logical line of a Dockerfile (continuations joined; comments and blanks are lines too),
    its 1-based line number, and the here-documents that follow it: (the raw lines of each body, its
    raw terminating line), in order."""

    text: str
    number: int
    heredocs: list[tuple[list[str], str]] = field(default_factory=list)


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's logical lines. A `<<WORD` in a RUN, COPY or ADD line starts a here-document
    only when a line ending it follows (as BuildKit reads it); without one the line stays as it is."""
    lines = text.splitlines()
    out: list[Instruction] = []
    pending, start, i = "", 0, 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if pending and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction is dropped, as the builder does
        if not pending:
            start = i
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        item = Instruction(pending + line, start)
        pending = ""
        if _HEREDOC_VERB.match(item.text):
            j = i
            for dash, _, word in _HEREDOC.findall(item.text):
                end = next((k for k in range(j, len(lines)) if (lines[k].lstrip("\t") if dash else lines[k]) == word), None)
                if end is None:
                    item.heredocs = []
                    break
                item.heredocs.append((lines[j:end], lines[end]))
                j = end + 1
            if item.heredocs:
                i = j
        out.append(item)
    if pending:
        out.append(Instruction(pending, start))
    return out


def _flags(words: str) -> tuple[list[str], str]:
    """An instruction's leading `--flag`s, and the rest of its text."""
    flags: list[str] = []
    words = words.strip()
    while words.startswith("--"):
        flag, _, words = words.partition(" ")
        flags.append(flag)
        words = words.lstrip()
    return flags, words


def _rewrite_heredoc_run(item: Instruction, shell: list[str]) -> str:
    """A RUN with here-documents as one exec-form RUN of `shell` with the same text: the command
    line, then each body and its end line, as BuildKit gives them to the shell. `RUN <<EOF` alone
    runs its body as the script."""
    m = _RUN.match(item.text)
    if m is None:
        verb = item.text.split(None, 1)[0].upper()
        raise ValueError(f"line {item.number}: {verb} with a here-document requires BuildKit (the classic "
                         "builder, which the Engine API runs, has no way to take it)")
    indent, verb, space, rest = m.groups()
    flags, command = _flags(rest)
    command = command.rstrip()
    if alone := _HEREDOC.fullmatch(command):
        body, _ = item.heredocs[0]
        if alone.group(1):  # <<-: leading tabs go
            body = [line.lstrip("\t") for line in body]
        if body and body[0].startswith("#!"):
            raise ValueError(f"line {item.number}: RUN {command} with its own #! interpreter requires "
                             "BuildKit (the classic builder, which the Engine API runs, has no way to take it)")
        script = "\n".join(body)
    else:
        script = "\n".join([command, *(line for body, end in item.heredocs for line in (*body, end))])
    return f"{indent}{verb}{space}{' '.join([*flags, json.dumps([*shell, script], ensure_ascii=False)])}"


def _quote(path: str) -> str:
    return path if any(c in path for c in "*?[") else shlex.quote(path)  # globs stay for the shell


def _chmod_command(mode: str, sources: list[str], dest: str, is_dir) -> str:
    """A shell command that gives `mode` to what a copy of `sources` to `dest` created. A folder
    source's contents land in dest (so dest, recursively); a file lands at dest, or inside dest when
    dest ends with `/`, there are several sources, or dest is a folder already (checked at build)."""
    dirs = [s for s in sources if s.endswith("/") or s in (".", "./") or is_dir(s)]
    files = [s for s in sources if s not in dirs]
    parts = [f"chmod -R {mode} {_quote(dest)}"] if dirs else []
    if len(sources) == 1 and files and not dest.endswith("/"):
        inside = posixpath.join(dest, posixpath.basename(files[0]))
        parts.append(f"if [ -d {_quote(dest)} ]; then chmod {mode} {_quote(inside)}; else chmod {mode} {_quote(dest)}; fi")
    elif files:
        parts.append(f"chmod {mode} " + " ".join(_quote(posixpath.join(dest, posixpath.basename(f))) for f in files))
    return " && ".join(parts)


def _rewrite_copy(match: re.Match, user: str | None, is_dir) -> list[str] | None:
    indent, verb, space, rest = match.groups()
    flags, words = _flags(rest)
    chmod = [f for f in flags if f.startswith("--chmod=")]
    # The shell form splits on whitespace only (no quotes: a path with spaces needs the JSON form).
    args = json.loads(words) if words.startswith("[") else words.split()
    # Several sources go into a folder; BuildKit takes `.` for it, the classic builder wants `./`.
    folder_dest = len(args) > 2 and not args[-1].endswith("/")
    if not chmod and not folder_dest and not any(f == "--link" or f.startswith("--link=") for f in flags):
        return None
    kept = [f for f in flags if not f.startswith(("--chmod=", "--link"))]
    if folder_dest:
        args[-1] += "/"
    if words.startswith("["):
        body = json.dumps(args)
    else:  # the author's text, with the folder's slash added where it was missing
        body = f"{words.rstrip()}/" if folder_dest else words
    lines = [f"{indent}{verb}{space}{' '.join([*kept, body])}"]
    if chmod:
        mode = chmod[-1].split("=", 1)[1]
        if not _MODE.match(mode):
            raise ValueError(f"{verb} {chmod[-1]}: not a file mode")
        from_stage = any(f.startswith("--from=") for f in flags)
        run = "RUN " + _chmod_command(mode, args[:-1], args[-1], (lambda _s: False) if from_stage else is_dir)
        lines += ["USER root", run, f"USER {user}"] if user not in (None, "root", "0") else [run]
    return lines


def for_classic_builder(text: str, is_dir=lambda source: False) -> str | None:
    """The Dockerfile rewritten for the classic builder, or None when it needs no change.
    `is_dir(source)` says whether a source path names a folder in the build context."""
    out: list[str] = []
    user: str | None = None
    # The stage's SHELL as this file sets it (one a base image set is not seen: the default then).
    shell = DEFAULT_SHELL
    changed = False
    for item in instructions(text):
        line = item.text
        if _FROM.match(line):
            user, shell = None, DEFAULT_SHELL
        elif m := _USER.match(line):
            user = m.group(1)
        elif m := _SHELL.match(line):
            shell = json.loads(m.group(1))
        if item.heredocs:
            out.append(_rewrite_heredoc_run(item, shell))
            changed = True
            continue
        m = _COPY.match(line)
        new = _rewrite_copy(m, user, is_dir) if m else None
        if new is None:
            out.append(line)
        else:
            out.extend(new)
            changed = True
    return "\n".join(out) + "\n" if changed else None
