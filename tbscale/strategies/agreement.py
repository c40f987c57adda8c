"""When two sampled actions are the same action: the comparison adaptive Turn-BoN uses to skip the
selector (docs/adaptive-turn-bon.md).

Two candidates agree when both can run and their command keys are equal. With `match: exact` the
key is the command text with its outer whitespace stripped. With `match: normalized` (the
default) it is the command text with the differences bash itself ignores taken out, and nothing
else:

- runs of spaces and tabs outside quotes become one space; whitespace at the start and end of a
  line is dropped, and so are blank lines;
- a backslash-newline (line continuation) is removed, as bash removes it;
- comments (a `#` that starts a word, to the end of the line) are dropped;
- the control operators `;`, `&&`, `||`, `|`, `|&` (and a case's `;;`, `;&`, `;;&`) are written
  with one space on each side, so `a&&b`, `a && b` and `a  &&  b` are one key.

Quoted strings ('...', "...", `...`), `$(...)`, `${...}` and here-document bodies are compared
character for character: whitespace inside them is data (a file's indentation, a printed string).
A response that cannot run has no key and agrees with nothing, not even another unrunnable one.

Why not the shell tokenizer's segments (tbscale.shell): they drop the operators between commands,
so `make && ./run` and `make; ./run` (or `a | b`) would count as one action though they differ.
"""

from __future__ import annotations

import re
from typing import Literal, Sequence

from tbscale.shell.parse import HEREDOC_OP, heredoc_delimiter, match_paren, read_heredoc_body, read_quoted
from tbscale.types.actions import Action

Match = Literal["normalized", "exact"]

_OPERATORS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "|")  # longest first


def normalize_command(text: str) -> str:
    """The command with insignificant whitespace and comments taken out (see the module doc)."""
    lines: list[str] = []
    line: list[str] = []
    space = False  # whitespace seen since the last emitted text
    heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs) waiting for the newline

    def emit(s: str) -> None:
        nonlocal space
        if space and line:
            line.append(" ")
        space = False
        line.append(s)

    def end_line() -> None:
        nonlocal space
        s = "".join(line).strip()
        line.clear()
        space = False
        if s:
            lines.append(s)

    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            j = read_quoted(text, i)
            emit(text[i:j])
            i = j
        elif ch == "\\":
            if text.startswith("\\\n", i):
                i += 2
            else:
                emit(text[i:i + 2])
                i += 2
        elif ch == "$" and text.startswith("(", i + 1):
            j = match_paren(text, i + 1)
            emit(text[i:j])
            i = j
        elif ch == "$" and text.startswith("{", i + 1):
            close = text.find("}", i)
            j = n if close < 0 else close + 1
            emit(text[i:j])
            i = j
        elif ch in " \t\r":
            space = True
            i += 1
        elif ch == "#" and (space or not line):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
        elif ch == "<" and text.startswith("<<", i) and not text.startswith("<<<", i) and HEREDOC_OP.match(text, i):
            m = HEREDOC_OP.match(text, i)
            heredocs.append(heredoc_delimiter(m))
            emit(re.sub(r"[ \t]+", "", m.group(0)))
            i = m.end()
        elif ch == "\n":
            end_line()
            i += 1
            for delim, strip_tabs in heredocs:  # bodies are data: kept line for line
                body, closing, i = read_heredoc_body(text, i, delim, strip_tabs)
                lines.append("\n".join(body if closing is None else [*body, closing]))
            heredocs.clear()
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op == "|" and not space and line and line[-1].endswith(">"):
                op = None  # `>|`: a redirection that overwrites, not a pipe
            if op is not None:
                space = True
                emit(op)
                space = True
                i += len(op)
            else:
                emit(ch)
                i += 1
    end_line()
    return "\n".join(lines)


def command_key(action: Action, match: Match = "normalized") -> str | None:
    """What two candidates must share to agree; None for a response that cannot run."""
    if not action.runnable or not action.command or not action.command.strip():
        return None
    return action.command.strip() if match == "exact" else normalize_command(action.command)


def all_agree(actions: Sequence[Action], match: Match = "normalized") -> bool:
    """Whether every action can run and all share one command key (at least two actions)."""
    keys = [command_key(a, match) for a in actions]
    return len(keys) >= 2 and keys[0] is not None and all(k == keys[0] for k in keys)
