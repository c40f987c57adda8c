"""Shell renderings of the non-shell tools that agents in other harnesses call.

An imported trajectory is analysed by its commands (kinds of action, repeats, edits before
tests), so a Claude Code `Write` or an OpenHands `str_replace_editor` call is rendered as the
shell command that would do the same thing. The rendering is for analysis only: the turn keeps
the original tool call next to it, and tools with no shell meaning (to-do lists, web fetches,
sub-agents) render as nothing.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

# Keys under which agents put a shell command. `command` is also the sub-command of the
# Anthropic/OpenHands text editor, which is why editors are matched by name first.
COMMAND_KEYS = ("command", "cmd", "keystrokes", "script", "code")
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "edit_file"})


def _path(args: Mapping[str, Any]) -> str | None:
    for key in ("file_path", "path", "filename", "notebook_path"):
        v = args.get(key)
        if isinstance(v, str) and v:
            return v
    return None


def _heredoc(path: str, content: str) -> str:
    delimiter = "TBSCALE_EOF"
    while delimiter in content:
        delimiter += "_"
    body = content if content.endswith("\n") else content + "\n"
    return f"cat > {shlex.quote(path)} <<'{delimiter}'\n{body}{delimiter}"


def _sed_pattern(text: str) -> str:
    return re.sub(r"([\\/.*\[\]^$])", r"\\\1", text).replace("\n", "\\n")


def _sed_replacement(text: str) -> str:
    return re.sub(r"([\\/&])", r"\\\1", text).replace("\n", "\\n")


def _replace(path: str, pairs: list[tuple[str, str, bool]]) -> str:
    """GNU sed replacing literal strings in place, as an Edit tool does. `-z` reads the file as
    one record, so strings spanning lines match; `g` only when the tool replaced every match."""
    expressions = " ".join(
        "-e " + shlex.quote(f"s/{_sed_pattern(old)}/{_sed_replacement(new)}/{'g' if every else ''}")
        for old, new, every in pairs)
    return f"sed -z -i {expressions} {shlex.quote(path)}"


def _read(path: str, args: Mapping[str, Any]) -> str:
    offset, limit = args.get("offset"), args.get("limit")
    view = args.get("view_range")
    if isinstance(view, list) and len(view) == 2 and all(isinstance(x, int) for x in view):
        end = "$" if view[1] < 0 else view[1]
        return f"sed -n '{view[0]},{end}p' {shlex.quote(path)}"
    if isinstance(offset, int) or isinstance(limit, int):
        start = offset if isinstance(offset, int) and offset > 0 else 1
        end = start + limit - 1 if isinstance(limit, int) else "$"
        return f"sed -n '{start},{end}p' {shlex.quote(path)}"
    return f"cat {shlex.quote(path)}"


def _editor(args: Mapping[str, Any]) -> str | None:
    sub, path = args.get("command"), _path(args)
    if not isinstance(path, str):
        return None
    if sub == "view":
        return _read(path, args)
    if sub == "create" and isinstance(args.get("file_text"), str):
        return _heredoc(path, args["file_text"])
    if sub == "str_replace" and isinstance(args.get("old_str"), str):
        return _replace(path, [(args["old_str"], str(args.get("new_str") or ""), False)])
    if sub == "insert" and isinstance(args.get("insert_line"), int) and isinstance(args.get("new_str"), str):
        # sed's a/i text: a backslash escapes, and a line ending in a backslash continues it
        text = "\\\n".join(line.replace("\\", "\\\\") for line in args["new_str"].split("\n"))
        line = args["insert_line"]
        where = "1i" if line == 0 else f"{line}a"
        return f"sed -i {shlex.quote(where + chr(92) + chr(10) + text)} {shlex.quote(path)}"
    return None


def _search(name: str, args: Mapping[str, Any]) -> str | None:
    pattern = args.get("pattern")
    if not isinstance(pattern, str):
        return None
    root = str(args.get("path") or ".").rstrip("/") or "/"
    where = shlex.quote(root)
    if name == "glob":
        # find's `*` already crosses `/`, so `**/` folds into it (a top-level `*.py` then also
        # matches deeper files: close enough for reading what an agent looked for)
        return f"find {where} -path {shlex.quote(root + '/' + pattern.replace('**/', '*'))}"
    include = args.get("glob") or args.get("include")
    flags = "-rn" + ("i" if args.get("-i") or args.get("case_insensitive") else "")
    extra = f" --include={shlex.quote(include)}" if isinstance(include, str) else ""
    return f"grep {flags}{extra} -e {shlex.quote(pattern)} {where}"


def tool_command(name: str | None, args: Mapping[str, Any] | None) -> str | None:
    """The shell command a tool call amounts to, or None when it has none."""
    if not isinstance(args, Mapping):
        return None
    key = (name or "").lower()
    if key in EDITOR_TOOLS:
        return _editor(args)
    path = _path(args)
    if key in ("write", "write_file", "create_file") and path and isinstance(args.get("content"), str):
        return _heredoc(path, args["content"])
    if key in ("edit", "replace") and path and isinstance(args.get("old_string"), str):
        return _replace(path, [(args["old_string"], str(args.get("new_string") or ""),
                                bool(args.get("replace_all")))])
    if key == "multiedit" and path and isinstance(args.get("edits"), list):
        pairs = [(e["old_string"], str(e.get("new_string") or ""), bool(e.get("replace_all")))
                 for e in args["edits"] if isinstance(e, dict) and isinstance(e.get("old_string"), str)]
        return _replace(path, pairs) if pairs else None
    if key in ("read", "read_file", "view_file") and path:
        return _read(path, args)
    if key in ("grep", "glob", "search", "search_files"):
        return _search("glob" if key == "glob" else "grep", args)
    if key in ("ls", "list_dir", "list_directory"):
        return f"ls {shlex.quote(str(args.get('path') or '.'))}"
    for k in COMMAND_KEYS:
        v = args.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return " ".join(v)
    return None
