"""Shell command text, split the way bash would read it: here-document bodies and comments
removed, commands split at newlines, `;`, `&&`, `||`, pipes and background `&` outside quotes,
words tokenized, and the program a command runs found behind assignments, keywords and wrappers
(sudo, timeout, env, xargs, ...). See the package docstring for the rules."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Segment:
    """One command, plus the bodies of here-documents it reads (kept only for write detection)."""

    text: str
    heredocs: list[str] = field(default_factory=list)


HEREDOC_OP = re.compile(
    r"""<<(?P<dash>-?)[ \t]*(?:'(?P<sq>[^'\n]*)'|"(?P<dq>[^"\n]*)"|\\?(?P<bare>[^\s;&|<>()'"]+))"""
)


def heredoc_delimiter(match: re.Match) -> tuple[str, bool]:
    """(delimiter word, strip leading tabs) of a HEREDOC_OP match: `<<'EOF'`, `<<-"EOF"`, `<<EOF`."""
    return match.group("sq") or match.group("dq") or match.group("bare") or "", bool(match.group("dash"))


def read_heredoc_body(text: str, i: int, delim: str, strip_tabs: bool) -> tuple[list[str], str | None, int]:
    """The here-document whose body starts at text[i]: its lines, the closing delimiter line as
    written (None when the text ends first, as bash allows with a warning) and the index after it."""
    body: list[str] = []
    n = len(text)
    while i < n:
        newline = text.find("\n", i)
        end = n if newline < 0 else newline
        line = text[i:end]
        i = end + 1
        if (line.lstrip("\t") if strip_tabs else line).rstrip() == delim:
            return body, line, i
        body.append(line)
    return body, None, i


def match_paren(text: str, open_index: int) -> int:
    """Index just past the ``)`` matching ``text[open_index] == '('``, skipping quoted text."""
    depth = 0
    i = open_index
    quote: str | None = None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote != "'":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def read_quoted(text: str, i: int) -> int:
    """Index just past the quoted string starting at ``text[i]`` (a quote char); end if unclosed."""
    quote = text[i]
    j = i + 1
    while j < len(text):
        if text[j] == "\\" and quote != "'":
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    return len(text)


def substitutions(text: str) -> list[str]:
    """The bodies of the command substitutions in `text` (`$(...)`, backticks, and the process
    substitutions `<(...)`, `>(...)`), outermost first, in double quotes too (where the shell runs
    them) but not in single quotes; `$((...))` is arithmetic, not a command."""
    found: list[str] = []
    i, n, in_double = 0, len(text), False
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            in_double = not in_double
        elif ch == "'" and not in_double:  # (a quote inside double quotes is a character)
            i = read_quoted(text, i)
            continue
        if ch in "$<>" and text.startswith("(", i + 1) and not text.startswith("((", i + 1):
            j = match_paren(text, i + 1)
            found.append(text[i + 2:j - 1])
            i = j
            continue
        if ch == "`":
            j = read_quoted(text, i)
            found.append(text[i + 1:j - 1])
            i = j
            continue
        i += 1
    return found


def split_segments(text: str) -> list[Segment]:
    """Lex shell text into commands; see the module docstring for the exact rules."""
    segments: list[Segment] = []
    current = Segment("")
    buf: list[str] = []
    pending: list[tuple[str, bool, Segment]] = []  # here-docs whose bodies start at next newline

    def flush() -> None:
        nonlocal current
        current.text = "".join(buf).strip()
        if current.text:
            segments.append(current)
        current = Segment("")
        buf.clear()

    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            j = read_quoted(text, i)
            buf.append(text[i:j])
            i = j
            continue
        if ch == "\\":
            if text.startswith("\\\n", i):  # line continuation joins lines
                i += 2
            else:
                buf.append(text[i : i + 2])
                i += 2
            continue
        if ch in "$<>" and text.startswith("(", i + 1):  # $(...), <(...), >(...)
            j = match_paren(text, i + 1)
            buf.append(text[i:j])
            i = j
            continue
        if ch == "$" and text.startswith("{", i + 1):  # ${var}, ${#arr[@]}: not a comment
            close = text.find("}", i)
            j = n if close < 0 else close + 1
            buf.append(text[i:j])
            i = j
            continue
        if ch == "#" and (not buf or buf[-1][-1:].isspace()):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if ch == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
            match = HEREDOC_OP.match(text, i)
            if match:
                pending.append((*heredoc_delimiter(match), current))
                buf.append(match.group(0))
                i = match.end()
                continue
        if ch == "\n":
            flush()
            i += 1
            for delim, strip_tabs, owner in pending:
                body, _closing, i = read_heredoc_body(text, i, delim, strip_tabs)
                owner.heredocs.append("\n".join(body))
            pending.clear()
            continue
        if ch == ";":
            flush()
            i += 1
            continue
        if ch == "|":
            flush()
            i += 2 if text.startswith(("||", "|&"), i) else 1
            continue
        if ch == "&":
            if text.startswith("&&", i):
                flush()
                i += 2
                continue
            prev = buf[-1][-1:] if buf else ""
            if prev not in ("<", ">") and not text.startswith("&>", i):
                flush()  # background job: a separate command
                i += 1
                continue
        buf.append(ch)
        i += 1
    flush()
    return segments


def extract_commands(command_text: str) -> list[str]:
    """Individual commands of a tool call's ``command`` field (Appendix D.1 command extraction).

    Here-document bodies and comments are removed; the here-doc operator stays on its command
    (``cat > f <<EOF``) because it shows where the text goes.
    """
    return [segment.text for segment in split_segments(command_text)]


# ---------------------------------------------------------------------------------------------
# Tokens and programs
# ---------------------------------------------------------------------------------------------

_REDIRECT_OPS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<")
OUTPUT_OPS = frozenset({"&>>", "&>", ">>", ">|", ">&", "<>", ">"})


@dataclass
class _Tokens:
    words: list[str]
    redirects: list[tuple[str, str]]  # (operator, target word)


def _unquote_double(body: str) -> str:
    return re.sub(r'\\([\\"$`])', r"\1", body)


def _tokenize(text: str) -> _Tokens:
    """Split one command into words (quotes removed) and redirections.

    ``(``/``)`` of subshells are dropped; ``$(...)`` and backticks stay verbatim inside their word.
    """
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    cur: list[str] = []
    in_word = False
    pending_op: str | None = None

    def end_word() -> None:
        nonlocal in_word, pending_op
        if not in_word:
            return
        word = "".join(cur)
        cur.clear()
        in_word = False
        if pending_op is not None:
            redirects.append((pending_op, word))
            pending_op = None
        else:
            words.append(word)

    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            end_word()
            i += 1
        elif ch in "'\"":
            j = read_quoted(text, i)
            closed = j - 1 > i and text[j - 1] == ch  # an unclosed quote (cut-off text) runs to the end
            inner = text[i + 1 : j - 1 if closed else j]
            cur.append(inner if ch == "'" else _unquote_double(inner))
            in_word, i = True, j
        elif ch == "`":
            j = read_quoted(text, i)
            cur.append(text[i:j])
            in_word, i = True, j
        elif ch == "\\":
            cur.append(text[i + 1 : i + 2])
            in_word, i = True, i + 2
        elif ch in "$<>" and text.startswith("(", i + 1):
            j = match_paren(text, i + 1)
            cur.append(text[i:j])
            in_word, i = True, j
        elif ch in "()":
            end_word()
            i += 1
        elif ch in "<>" or text.startswith("&>", i):
            if in_word and pending_op is None and "".join(cur).isdigit():
                cur.clear()  # "2>" : the digits name a file descriptor
                in_word = False
            else:
                end_word()
            op = next(o for o in _REDIRECT_OPS if text.startswith(o, i))
            pending_op = op
            i += len(op)
        else:
            cur.append(ch)
            in_word, i = True, i + 1
    end_word()
    return _Tokens(words, redirects)


@dataclass(frozen=True)
class _Wrapper:
    """A command that runs the rest of its arguments as another command."""

    options_with_value: frozenset[str] = frozenset()
    positionals: int = 0  # e.g. timeout's duration
    stop_options: frozenset[str] = frozenset()  # options after which it runs nothing (command -v)


_WRAPPERS: dict[str, _Wrapper] = {
    "sudo": _Wrapper(frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"})),
    "doas": _Wrapper(frozenset({"-u", "-C"})),
    "timeout": _Wrapper(frozenset({"-s", "-k", "--signal", "--kill-after"}), positionals=1),
    "env": _Wrapper(frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})),
    "nohup": _Wrapper(),
    "time": _Wrapper(frozenset({"-f", "-o", "--format", "--output"})),
    "nice": _Wrapper(frozenset({"-n", "--adjustment"})),
    "ionice": _Wrapper(frozenset({"-c", "-n", "-p", "--class", "--classdata"})),
    "stdbuf": _Wrapper(frozenset({"-i", "-o", "-e"})),
    "xargs": _Wrapper(
        frozenset({"-n", "-I", "-P", "-d", "-L", "-s", "-E", "-a", "--max-args", "--max-procs",
                   "--delimiter", "--arg-file", "--max-lines", "--max-chars"})
    ),
    "exec": _Wrapper(frozenset({"-a"})),
    "command": _Wrapper(stop_options=frozenset({"-v", "-V"})),
    "builtin": _Wrapper(),
    "setsid": _Wrapper(),
    "unbuffer": _Wrapper(),
    "chronic": _Wrapper(),
}

# "<tool> run <cmd>" environment runners.
_RUNNERS: dict[str, frozenset[str]] = {
    tool: frozenset({"-n", "--name", "-p", "--prefix", "--with", "--python", "--project",
                     "--directory", "-e", "--env", "--env-file", "--group", "--extra"})
    for tool in ("uv", "poetry", "pipenv", "pdm", "conda", "mamba", "micromamba", "pixi", "hatch")
}

# Leading words that do not name the program (skipped) and words that make up a whole no-op command.
_SKIP_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}",
                            "fi", "done", "esac", ";;"})
_HEADER_KEYWORDS = frozenset({"for", "select", "case", "function"})

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_VERSIONED = re.compile(
    r"^(python|pypy|pip|pytest|ruby|perl|php|node|nodejs|gcc|g\+\+|clang|clang\+\+|lua|java|go)"
    r"[-_.]?[0-9][0-9.]*[mu]?$"
)


def normalise(raw: str) -> str:
    base = raw.rsplit("/", 1)[-1]
    match = _VERSIONED.match(base)
    if match:
        base = match.group(1)
    return {"nodejs": "node", "py.test": "pytest", "pypy": "python", "[[": "["}.get(base, base)


@dataclass
class Invocation:
    program: str  # normalised; "" for a no-op such as a loop header or a bare redirection
    raw_program: str
    args: list[str]
    redirects: list[tuple[str, str]]
    heredocs: list[str]


def skip_options(words: list[str], i: int, with_value: frozenset[str]) -> int:
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return i + 1
        i += 2 if words[i] in with_value else 1
    return i


def resolve_program(words: list[str]) -> tuple[str, list[str]]:
    """(raw program, its arguments) after assignments, keywords and wrappers."""
    i = 0
    last_wrapper = ""
    while i < len(words):
        word = words[i]
        if word in _SKIP_KEYWORDS or _ASSIGNMENT.match(word):
            i += 1
            continue
        if word in _HEADER_KEYWORDS:
            return "", []
        name = normalise(word)
        wrapper = _WRAPPERS.get(name)
        if wrapper is not None:
            j = i + 1
            if any(w in wrapper.stop_options for w in words[j:j + 1]):
                return word, words[i + 1 :]
            j = skip_options(words, j, wrapper.options_with_value)
            if name == "nice":  # nice -10 cmd
                while j < len(words) and re.fullmatch(r"-\d+", words[j]):
                    j += 1
            j += wrapper.positionals
            last_wrapper = word
            i = j
            continue
        if name in _RUNNERS and i + 1 < len(words) and words[i + 1] == "run":
            last_wrapper = word
            i = skip_options(words, i + 2, _RUNNERS[name])
            continue
        return word, words[i + 1 :]
    return last_wrapper, []


_DECLARES = frozenset({"export", "readonly", "declare", "local", "typeset"})


def shell_variables(segment: Segment) -> dict[str, str | None]:
    """The variables a segment sets in the shell that runs it, with their values as the shell reads
    them (unquoted): `NAME=VALUE ...` alone, `export`/`readonly`/`declare`/`local NAME=VALUE`, and
    `for NAME in WORDS` (the words, space-separated). None for a value that cannot be read off the
    text: an append (`NAME+=...`) or an array's element. `NAME=VALUE cmd` sets NAME for cmd alone."""
    words = _tokenize(segment.text).words
    while words and words[0] in _SKIP_KEYWORDS:  # `then P=curl`
        words = words[1:]
    if len(words) >= 3 and words[0] == "for" and words[2] == "in":
        return {words[1]: " ".join(w for w in words[3:] if w not in ("do", ";"))}
    if words[:1] and words[0] in _DECLARES:
        words = [w for w in words[1:] if not w.startswith("-")]
    elif not words or not all(_ASSIGNMENT.match(w) for w in words):
        return {}
    found: dict[str, str | None] = {}
    for word in words:
        m = _ASSIGNMENT.match(word)
        if m:
            name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", word)[0]  # type: ignore[index]
            found[name] = None if m.group(1) or m.group(0).endswith("+=") else word[m.end():]
    return found


def invocation(segment: Segment) -> Invocation:
    tokens = _tokenize(segment.text)
    raw, args = resolve_program(tokens.words)
    return Invocation(normalise(raw) if raw else "", raw, args, tokens.redirects, segment.heredocs)


def program_of(command: str) -> str:
    """Normalised program a single command runs (``FOO=bar timeout 10 python3 x.py`` -> ``python``).

    Returns ``""`` when the command runs nothing (a loop header, a bare redirection). If the text
    holds several commands, the first one is used.
    """
    segments = split_segments(command)
    return invocation(segments[0]).program if segments else ""
