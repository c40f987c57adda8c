"""Dockerfiles for the classic builder.

tbscale builds images through the docker SDK, and the Engine API's build endpoint runs the classic
builder, on every engine version (docker/docker-py#2916). The classic builder refuses BuildKit's
`COPY --chmod` ("the --chmod option requires BuildKit"), which many Harbor tasks use to make a
script executable. `for_classic_builder` rewrites such an instruction into the plain copy plus a
`RUN chmod` of exactly what was copied, under `USER root` when the stage runs as another user,
drops `--link` (a BuildKit cache hint with no effect on the files), and writes the folder that
several sources are copied into with its trailing `/` (`COPY a b .` becomes `COPY a b ./`), which
the classic builder insists on. Nothing else changes, so a Dockerfile without these is built as
written.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex

_COPY = re.compile(r"^(\s*)(COPY|ADD)(\s+)(.*)$", re.IGNORECASE | re.DOTALL)
_FROM = re.compile(r"^\s*FROM\s", re.IGNORECASE)
_USER = re.compile(r"^\s*USER\s+(\S+)", re.IGNORECASE)
_MODE = re.compile(r"^(?:[0-7]{3,4}|[ugoa]*[-+=][rwxXst]*(?:,[ugoa]*[-+=][rwxXst]*)*)$")


def logical_lines(text: str) -> list[str]:
    """Instructions with their backslash continuations joined (comments and blanks kept as lines)."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if pending and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction is dropped, as the builder does
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


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
    words = rest.strip()
    flags: list[str] = []
    while words.startswith("--"):
        flag, _, words = words.partition(" ")
        flags.append(flag)
        words = words.lstrip()
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
    changed = False
    for line in logical_lines(text):
        if _FROM.match(line):
            user = None
        elif m := _USER.match(line):
            user = m.group(1)
        m = _COPY.match(line)
        new = _rewrite_copy(m, user, is_dir) if m else None
        if new is None:
            out.append(line)
        else:
            out.extend(new)
            changed = True
    return "\n".join(out) + "\n" if changed else None
