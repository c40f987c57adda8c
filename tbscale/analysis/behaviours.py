"""Rule-based behaviour labels for Turn-BoN candidates (turn-bon Table 4 and Appendix D.1).

Figure 4 of turn-bon asks whether a selector prefers some kinds of action over others: for every
turn it compares the share of selected candidates showing a behaviour with the share expected if one
of the N candidates were picked uniformly at random. This module reproduces the labelling.

Pipeline
--------
1. **Command extraction** (:func:`extract_commands`, Appendix D.1): remove here-document bodies and
   comments, then split at newlines, ``;``, ``&&`` and ``||`` outside quotes. Beyond the paper we
   also split at pipes ``|`` and at a background ``&``, so every program of a pipeline is classified
   on its own (``cat log | grep err`` is two reads; ``python gen.py | tee out.txt`` runs code *and*
   writes a file). Splitting never happens inside quotes, ``$(...)``, backticks or ``<(...)``.
2. **Program** (:func:`program_of`): skip ``VAR=value`` assignments, shell keywords (``if``, ``then``,
   ``do``, ``!``, ...) and wrappers that run another command (``sudo``, ``doas``, ``timeout <dur>``,
   ``env``, ``nohup``, ``time``, ``nice``, ``ionice``, ``stdbuf``, ``xargs``, ``exec``, ``command``,
   ``builtin``, ``setsid``, ``unbuffer``, ``chronic``, and ``uv/poetry/pipenv/pdm/conda run``),
   then normalise: basename of a path, version suffixes dropped (``/usr/bin/python3.11`` ->
   ``python``, ``pip3`` -> ``pip``, ``py.test`` -> ``pytest``). ``xargs`` is a wrapper because what
   matters is the program it feeds (``find . | xargs rm`` removes files); ``watch`` is not, it is a
   monitoring command in its own right.
3. **Command kinds** (internal): each command gets a set of kinds -- edit, run, test/check, file
   operation, install, read, scratch write, wait -- from its program, arguments and redirections.
   ``bash -c '...'`` and ``find -exec ...`` are classified by the commands they contain.
4. **Behaviours** (:func:`label_candidate`): the eight Table 4 labels, from the kinds of all the
   candidate's commands plus, for two of them, what the attempt executed before (:class:`HistoryState`).

Decisions the paper leaves open (all deliberate; change them here, not at call sites)
-------------------------------------------------------------------------------------
* *Edits a file* means changing a file outside scratch space. Scratch is ``/tmp``, ``/var/tmp``
  and ``$TMPDIR``; writes to ``/dev/*`` (``2>/dev/null``) are not writes at all. The scratch rule
  applies to every write we can locate (redirects, ``tee``, ``sed -i``, Python ``open()``), not
  only the redirect and ``open()`` cases Table 4 names. Writes whose target cannot be read off the
  text (``open(path, 'w')`` with a variable) count as edits. Relative paths are taken to be in the
  workspace (we do not track ``cd /tmp``).
  Editing commands: output redirection, ``tee``, ``sed -i``, ``perl -i``, ``awk`` printing into a
  file, ``patch``, ``truncate``, ``ed``/``ex``, ``dd of=``, ``sort -o``, formatters in write mode
  (``black``, ``isort``, ``ruff format``/``--fix``, ``go fmt``, ``cargo fmt``), ``git
  apply/am/restore/stash/merge/pull/cherry-pick/revert/reset --hard/checkout -- <path>``, and Python
  ``-c`` code or a Python here-doc (``python - <<EOF``) that opens a file for writing or calls
  ``Path.write_text/write_bytes``, ``to_csv``/``to_json``/``to_parquet``/``to_excel``, ``savefig``,
  ``np.save``/``np.savetxt`` (Node: ``writeFileSync``/``appendFileSync``/``writeFile``/
  ``createWriteStream``). ``cp``/``mv`` into place are *file operations*, as in Table 4, not edits.
* *File operations* also include ``mkdir``, ``touch``, ``rsync`` and archive tools; listing an
  archive (``tar -t``, ``unzip -l``) is a read.
* *Runs a test or check*: test runners (``pytest``, ``python -m pytest/unittest``, ``tox``, ``npm
  test``, ``cargo test``, ``go test``, ``make test|check``, ...), comparisons (``diff``, ``cmp``,
  ``sha256sum -c``), ``test``/``[``/``[[``, linters and type checkers, syntax checks (``bash -n``,
  ``node --check``, ``python -m py_compile``), any script or binary whose path names a test or
  checker (``run-tests.sh``, ``check.py``, ``tests/...``), and ``curl``/``wget`` against localhost,
  since that exercises a service the agent built. Other ``curl``/``wget`` calls carry no label.
* *Runs code* (used by *tests its last edit*) is any test/check above plus interpreters (python,
  node, ruby, perl, ...), shells running a script or ``-c`` code, build tools and compilers (make,
  gcc, cargo build, ...), debuggers/profilers, database shells, and any program invoked by path
  (``./prog``, ``/app/bin/x``). Programs we do not recognise count as nothing, which keeps the
  label conservative. ``python -c`` always counts as running code, even if it only prints.
* *Only reads or inspects*: every command is a known read (``ls``, ``cat``, ``grep``, ``sed``
  without ``-i``, ``git status/log/diff/show``, ``pip list``, ``--version``/``--help`` of anything,
  ...), a shell no-op (``cd``, ``export``, ``source``, ``set``, loop headers), or a wait/monitor
  (``sleep``, ``tail``, ``watch``, ``wait``), and nothing is written -- even into ``/tmp``.
  Unrecognised programs break it.
* *Tests its last edit* is evaluated command by command, so an edit earlier in the same candidate
  counts as the latest edit (``cat > s.py <<EOF ... EOF`` then ``python s.py`` tests its edit).
  Within one command, running is checked before writing (``python gen.py > out.txt`` runs, then
  writes).
* *Loops on a command*: text compared after deleting all whitespace; the edit turn itself is not
  "since the last edit". The waiting/monitoring exclusion looks at the first command after any
  leading ``cd``/``export``/... (``cd /app && sleep 5`` still starts with a wait).
* A candidate that contains the finish marker is a submission and gets **no** labels, not even
  *cannot run*. ``None`` or blank command text, or ``cannot_run=True``, gives exactly
  ``{"cannot_run"}``. Command text with only comments gets no labels (it runs and does nothing).
* Here-document bodies are never classified as commands (``cat > run.sh <<EOF`` with ``pip
  install`` inside installs nothing). They are only scanned for file writes when the here-doc is a
  program for Python/Node on stdin. The terminator must match the delimiter like bash requires
  (leading tabs allowed for ``<<-``, trailing whitespace ignored); an unterminated body runs to the end.
* :func:`preference_table` skips turns whose ``selected_index`` is ``None`` (the paper excludes
  turns where every selector call failed, i.e. it is unknown which candidate ran).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tbscale.agent.actions import FINISH_MARKER
from tbscale.analysis.metrics import paired_bootstrap

BEHAVIOURS: tuple[str, ...] = (
    "edits_file",
    "tests_last_edit",
    "runs_test_or_check",
    "file_operations",
    "installs_package",
    "only_reads",
    "cannot_run",
    "loops_on_command",
)
"""The eight Table 4 behaviours, in the order of Figure 4."""


# Command kinds (internal vocabulary between classification and labelling).
EDIT = "edit"
RUN = "run"
TEST = "test"
FILEOP = "fileop"
INSTALL = "install"
READ = "read"
SCRATCH = "scratch_write"
WAIT = "wait"

_RUNS_CODE = frozenset({RUN, TEST})
_READ_COMPATIBLE = frozenset({READ, WAIT})
_MAX_NESTING = 3  # bash -c "bash -c '...'" recursion guard


def contains_finish_marker(command_text: str | None, marker: str = FINISH_MARKER) -> bool:
    """Whether a candidate is a submission: Appendix D.1 treats any candidate containing the marker so."""
    return command_text is not None and marker in command_text


def command_from_tool_arguments(arguments: str | Mapping[str, Any] | None) -> str | None:
    """The ``command`` of a bash tool call, or ``None`` when the harness could not run it.

    Table 4's example of *cannot run* is tool arguments that are not valid JSON; this mirrors that
    decision so that labelling and execution agree on what counts as runnable.
    """
    if arguments is None:
        return None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, Mapping):
        return None
    command = arguments.get("command")
    return command if isinstance(command, str) else None


# ---------------------------------------------------------------------------------------------
# Command extraction
# ---------------------------------------------------------------------------------------------


@dataclass
class _Segment:
    """One command, plus the bodies of here-documents it reads (kept only for write detection)."""

    text: str
    heredocs: list[str] = field(default_factory=list)


_HEREDOC_OP = re.compile(
    r"""<<(?P<dash>-?)[ \t]*(?:'(?P<sq>[^'\n]*)'|"(?P<dq>[^"\n]*)"|\\?(?P<bare>[^\s;&|<>()'"]+))"""
)


def _match_paren(text: str, open_index: int) -> int:
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


def _read_quoted(text: str, i: int) -> int:
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


def _split_segments(text: str) -> list[_Segment]:
    """Lex shell text into commands; see the module docstring for the exact rules."""
    segments: list[_Segment] = []
    current = _Segment("")
    buf: list[str] = []
    pending: list[tuple[str, bool, _Segment]] = []  # here-docs whose bodies start at next newline

    def flush() -> None:
        nonlocal current
        current.text = "".join(buf).strip()
        if current.text:
            segments.append(current)
        current = _Segment("")
        buf.clear()

    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            j = _read_quoted(text, i)
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
            j = _match_paren(text, i + 1)
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
            match = _HEREDOC_OP.match(text, i)
            if match:
                delim = match.group("sq") or match.group("dq") or match.group("bare") or ""
                pending.append((delim, bool(match.group("dash")), current))
                buf.append(match.group(0))
                i = match.end()
                continue
        if ch == "\n":
            flush()
            i += 1
            for delim, strip_tabs, owner in pending:
                body: list[str] = []
                while i < n:
                    newline = text.find("\n", i)
                    end = n if newline < 0 else newline
                    line = text[i:end]
                    i = end + 1
                    candidate = (line.lstrip("\t") if strip_tabs else line).rstrip()
                    if candidate == delim:
                        break
                    body.append(line)
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
    return [segment.text for segment in _split_segments(command_text)]


# ---------------------------------------------------------------------------------------------
# Tokens and programs
# ---------------------------------------------------------------------------------------------

_REDIRECT_OPS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<")
_OUTPUT_OPS = frozenset({"&>>", "&>", ">>", ">|", ">&", "<>", ">"})


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
            j = _read_quoted(text, i)
            closed = j - 1 > i and text[j - 1] == ch  # an unclosed quote (cut-off text) runs to the end
            inner = text[i + 1 : j - 1 if closed else j]
            cur.append(inner if ch == "'" else _unquote_double(inner))
            in_word, i = True, j
        elif ch == "`":
            j = _read_quoted(text, i)
            cur.append(text[i:j])
            in_word, i = True, j
        elif ch == "\\":
            cur.append(text[i + 1 : i + 2])
            in_word, i = True, i + 2
        elif ch in "$<>" and text.startswith("(", i + 1):
            j = _match_paren(text, i + 1)
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


def _normalise(raw: str) -> str:
    base = raw.rsplit("/", 1)[-1]
    match = _VERSIONED.match(base)
    if match:
        base = match.group(1)
    return {"nodejs": "node", "py.test": "pytest", "pypy": "python", "[[": "["}.get(base, base)


@dataclass
class _Invocation:
    program: str  # normalised; "" for a no-op such as a loop header or a bare redirection
    raw_program: str
    args: list[str]
    redirects: list[tuple[str, str]]
    heredocs: list[str]


def _skip_options(words: list[str], i: int, with_value: frozenset[str]) -> int:
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return i + 1
        i += 2 if words[i] in with_value else 1
    return i


def _resolve(words: list[str]) -> tuple[str, list[str]]:
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
        name = _normalise(word)
        wrapper = _WRAPPERS.get(name)
        if wrapper is not None:
            j = i + 1
            if any(w in wrapper.stop_options for w in words[j:j + 1]):
                return word, words[i + 1 :]
            j = _skip_options(words, j, wrapper.options_with_value)
            if name == "nice":  # nice -10 cmd
                while j < len(words) and re.fullmatch(r"-\d+", words[j]):
                    j += 1
            j += wrapper.positionals
            last_wrapper = word
            i = j
            continue
        if name in _RUNNERS and i + 1 < len(words) and words[i + 1] == "run":
            last_wrapper = word
            i = _skip_options(words, i + 2, _RUNNERS[name])
            continue
        return word, words[i + 1 :]
    return last_wrapper, []


def _invocation(segment: _Segment) -> _Invocation:
    tokens = _tokenize(segment.text)
    raw, args = _resolve(tokens.words)
    return _Invocation(_normalise(raw) if raw else "", raw, args, tokens.redirects, segment.heredocs)


def program_of(command: str) -> str:
    """Normalised program a single command runs (``FOO=bar timeout 10 python3 x.py`` -> ``python``).

    Returns ``""`` when the command runs nothing (a loop header, a bare redirection). If the text
    holds several commands, the first one is used.
    """
    segments = _split_segments(command)
    return _invocation(segments[0]).program if segments else ""


# ---------------------------------------------------------------------------------------------
# Classification of one command into kinds
# ---------------------------------------------------------------------------------------------

_SCRATCH_PREFIXES = ("/tmp/", "/var/tmp/", "$TMPDIR/", "${TMPDIR}/")
_LOCALHOST = re.compile(r"^(?:[a-z]+://)?(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])(?:[:/]|$)", re.I)
_TESTISH = re.compile(
    r"(?:^|[^a-z])(?:tests?|testing|check|checks|checker|verify|verifier|grade|grader|"
    r"validate|validator|evaluate|eval|judge)(?:[^a-z]|$)",
    re.I,
)

_READ_PROGRAMS = frozenset(
    """ls ll la dir cat head tail less more grep egrep fgrep rg ag ack find locate wc stat file pwd
    echo printf which whereis type printenv ps pgrep top htop df du free tree cut sort uniq tr column
    jq yq xxd hexdump od strings readlink realpath basename dirname id whoami groups hostname uname
    date nproc lscpu lsblk lsof netstat ss nl tac rev fold fmt paste join comm expand seq nm objdump
    readelf ldd getent locale man info help tldr base64 sha256sum sha1sum sha512sum md5sum b2sum
    cksum dpkg-query apt-cache diffstat lsattr getfacl pstree uptime w ifconfig ip env""".split()
)
_NOOP_PROGRAMS = frozenset(
    """cd pushd popd export set unset source . alias unalias clear shopt declare local read true
    false : exit return trap ulimit umask hash history reset typeset readonly let""".split()
)
_WAIT_PROGRAMS = frozenset({"sleep", "wait", "watch", "tail"})
_FILEOP_PROGRAMS = frozenset(
    """mv cp rm rmdir unlink shred ln chmod chown chgrp mkdir touch rsync tar zip unzip gzip gunzip
    bzip2 bunzip2 xz unxz 7z 7za zstd unzstd kill pkill killall fuser""".split()
)
_TEST_PROGRAMS = frozenset(
    """pytest tox nox jest mocha vitest ava rspec phpunit ctest bats diff cmp test [ mypy flake8
    pylint pyflakes pyright pycodestyle shellcheck eslint hadolint yamllint""".split()
)
_PYTHON_TEST_MODULES = frozenset(
    """pytest unittest doctest py_compile compileall mypy flake8 pylint pyflakes pyright
    pycodestyle nose nose2""".split()
)
_INTERPRETERS = frozenset(
    """node deno bun ruby php java Rscript R julia lua luajit octave swift kotlin scala ts-node tsx
    runghc ghci sqlite3 psql mysql redis-cli valgrind gdb lldb strace ltrace perf hyperfine
    dotnet elixir erl iex guile racket sbcl ocaml""".split()
)
_BUILD_PROGRAMS = frozenset(
    """make cmake ninja meson gcc g++ cc c++ clang clang++ rustc javac mvn gradle gradlew tsc zig ghc
    nasm as ld ant bazel scons autoreconf""".split()
)
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_VERSION_FLAGS = frozenset({"--version", "-V", "--help", "-h"})


def _is_scratch(path: str) -> bool:
    return path in ("/tmp", "/var/tmp") or path.startswith(_SCRATCH_PREFIXES)


def _write_kinds(path: str | None) -> set[str]:
    """What writing to ``path`` amounts to: nothing for devices (``2>/dev/null``), a scratch
    write for temporary space, and an edit otherwise -- including an unknown (``None``) target."""
    if path is not None and path.startswith("/dev/"):
        return set()
    return {SCRATCH} if path is not None and _is_scratch(path) else {EDIT}


def _positionals(args: list[str], with_value: frozenset[str] = frozenset()) -> list[str]:
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


def _first_positional(args: list[str], with_value: frozenset[str] = frozenset()) -> str:
    positionals = _positionals(args, with_value)
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
    end = _match_paren(code, open_paren)
    inner = code[open_paren + 1 : end - 1]
    args: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(inner):
        ch = inner[i]
        if ch in "'\"":
            i = _read_quoted(inner, i)
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


def _code_write_kinds(code: str, language: str) -> set[str]:
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
        kinds |= _write_kinds(_literal(args[0]))
    if language == "python":
        for match in _PATH_WRITE.finditer(code):
            kinds |= _write_kinds(_literal(match.group(1)) if match.group(1) else None)
    return kinds


# --- per-program rules -------------------------------------------------------------------------


def _python_kinds(inv: _Invocation) -> set[str]:
    args = inv.args
    with_value = frozenset({"-W", "-X", "-c", "-m"})
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        flag = args[i]
        if flag == "-c":
            code = args[i + 1] if i + 1 < len(args) else ""
            return {RUN} | _code_write_kinds(code, "python")
        if flag == "-m":
            module = args[i + 1] if i + 1 < len(args) else ""
            rest = args[i + 2 :]
            if module in _PYTHON_TEST_MODULES:
                return {TEST}
            if module == "pip":
                return _pip_kinds(rest)
            if module in ("json.tool", "site", "sysconfig", "platform"):
                return {READ}
            return {RUN}
        i += 2 if flag in with_value else 1
    script = args[i] if i < len(args) else "-"
    kinds = {RUN}
    if script != "-" and _TESTISH.search(script):
        kinds.add(TEST)
    if script == "-":  # program on stdin, typically a here-doc
        for body in inv.heredocs:
            kinds |= _code_write_kinds(body, "python")
    return kinds


def _node_kinds(inv: _Invocation) -> set[str]:
    args = inv.args
    if inv.program == "node" and any(a in ("--check", "-c") for a in args):
        return {TEST}
    for flag in ("-e", "--eval", "-p", "--print"):
        if flag in args:
            idx = args.index(flag)
            code = args[idx + 1] if idx + 1 < len(args) else ""
            return {RUN} | _code_write_kinds(code, "node")
    if inv.program in ("deno", "bun") and args[:1] == ["test"]:
        return {TEST}
    kinds = {RUN}
    script = _first_positional(args)
    if script and _TESTISH.search(script):
        kinds.add(TEST)
    if not script:
        for body in inv.heredocs:
            kinds |= _code_write_kinds(body, "node")
    return kinds


def _shell_kinds(inv: _Invocation, depth: int) -> set[str]:
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
            if depth >= _MAX_NESTING:
                return {RUN}
            kinds: set[str] = set()
            for segment in _split_segments(code):
                kinds |= _command_kinds(segment, depth + 1)
            return kinds
        if "n" in letters:
            return {TEST}  # bash -n: syntax check
        idx += 1
    script = _first_positional(args[idx:])
    return {RUN, TEST} if script and _TESTISH.search(script) else {RUN}


def _pip_kinds(args: list[str]) -> set[str]:
    sub = _first_positional(args)
    if sub == "install":
        return {INSTALL}
    if sub in ("list", "show", "freeze", "check", "search", "index", "inspect", "config", "debug", "help"):
        return {READ}
    if not sub and any(a in _VERSION_FLAGS for a in args):
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


def _package_manager_kinds(program: str, args: list[str]) -> set[str] | None:
    """Kinds for package-manager-like tools, or None if ``program`` is not one."""
    if program == "pip" or program == "pip-install":
        return _pip_kinds(args)
    if program in ("easy_install", "cpanm", "cpan"):
        return {INSTALL}
    if program == "uv":
        sub = _positionals(args)
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
    sub = _first_positional(args, frozenset({"-C", "--prefix", "-n", "--name", "-c", "--channel"}))
    if sub in _INSTALL_SUBCOMMANDS[program] or (program == "yarn" and not sub):
        return {INSTALL}
    if program in ("npm", "pnpm", "yarn", "bun"):
        return _js_script_kinds(program, args, sub)
    if program == "cargo":
        return _cargo_kinds(sub)
    if program == "go":
        return _go_kinds(sub, args)
    if sub in _PACKAGE_READ_SUBCOMMANDS or (not sub and any(a in _VERSION_FLAGS for a in args)):
        return {READ}
    return set()


def _js_script_kinds(program: str, args: list[str], sub: str) -> set[str]:
    if sub in ("test", "t", "tst"):
        return {TEST}
    if sub in ("run", "run-script"):
        positionals = _positionals(args)
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
        action = _positionals(args)[1:2]
        return {INSTALL} if action in (["tidy"], ["download"]) else set()
    return {READ} if sub in ("version", "env", "list", "doc") else set()


_GIT_READ = frozenset(
    """status log diff show ls-files ls-tree blame rev-parse describe shortlog reflog grep cat-file
    whatchanged help version""".split()
)
_GIT_EDIT = frozenset({"apply", "am", "restore", "merge", "pull", "cherry-pick", "revert", "rebase"})


def _git_kinds(args: list[str]) -> set[str]:
    positionals = _positionals(args, frozenset({"-C", "-c", "--git-dir", "--work-tree"}))
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


def _sed_kinds(args: list[str]) -> set[str]:
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


def _awk_kinds(args: list[str]) -> set[str]:
    if "inplace" in args and "-i" in args:
        return {EDIT}
    script = _first_positional(args, frozenset({"-F", "-v", "-f", "-i"}))
    kinds: set[str] = set()
    for match in _AWK_PRINT_TO_FILE.finditer(script):
        kinds |= _write_kinds(match.group(1))
    if "system(" in script:
        kinds.add(RUN)
    return kinds or {READ}


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
            if sub and depth < _MAX_NESTING:
                kinds |= _word_kinds(sub, depth + 1)
    return kinds


def _download_kinds(args: list[str]) -> set[str]:
    """curl/wget: a check when aimed at a local service the agent runs; otherwise unlabelled."""
    return {TEST} if any(_LOCALHOST.match(a) for a in args) else set()


def _formatter_kinds(program: str, args: list[str]) -> set[str]:
    checking = any(a in ("--check", "--diff", "-c") for a in args)
    if program == "ruff":
        if "format" in args:
            return {TEST} if checking else {EDIT}
        return {TEST, EDIT} if "--fix" in args else {TEST}
    return {TEST} if checking else {EDIT}


def _program_kinds(inv: _Invocation, depth: int) -> set[str]:
    program, args = inv.program, inv.args
    if not program or program in _NOOP_PROGRAMS:
        return {READ}
    if program == "command":  # command -v NAME: a lookup
        return {READ}
    if program == "tail":
        return {READ, WAIT}
    if program in _WAIT_PROGRAMS:
        return {WAIT}
    if len(args) == 1 and args[0] in _VERSION_FLAGS and program not in _TEST_PROGRAMS:
        return {READ}
    if program in ("python", "ipython"):
        return _python_kinds(inv)
    if program == "perl":
        # -i, -pi, -pie, -i.bak edit in place; -Mstrict or -I/lib merely contain an "i"
        in_place = any(re.match(r"-[nplaswWT0-9]*i", a) for a in args)
        return {EDIT} if in_place else {RUN}
    if program in ("node", "deno"):
        return _node_kinds(inv)
    if program in _SHELLS:
        return _shell_kinds(inv, depth)
    package = _package_manager_kinds(program, args)
    if package is not None:
        return package
    if program == "git":
        return _git_kinds(args)
    if program == "make":
        targets = _positionals(args, frozenset({"-C", "-f", "-j", "-l", "-o", "-W", "-I"}))
        return {RUN, TEST} if any(_TESTISH.search(t) for t in targets) else {RUN}
    if program in ("mvn", "gradle", "gradlew", "dotnet", "bazel") and any(
        a in ("test", "verify", "check") for a in args
    ):
        return {RUN, TEST}
    if program == "sed":
        return _sed_kinds(args)
    if program in ("awk", "gawk", "mawk", "nawk"):
        return _awk_kinds(args)
    if program == "find":
        return _find_kinds(args, depth)
    if program == "tee":
        files = _positionals(args)
        return set().union(*(_write_kinds(f) for f in files)) or {READ}
    if program == "sort":
        for idx, arg in enumerate(args):
            if arg == "-o" and idx + 1 < len(args):
                return _write_kinds(args[idx + 1]) or {READ}
            if arg.startswith(("--output=", "-o")) and len(arg) > 2:
                return _write_kinds(arg.split("=", 1)[-1] if "=" in arg else arg[2:]) or {READ}
        return {READ}
    if program == "dd":
        out = next((a[3:] for a in args if a.startswith("of=")), None)
        return (_write_kinds(out) or {READ}) if out is not None else {READ}
    if program == "tar" and ("--list" in args or re.match(r"-?[a-zA-Z]*t", args[0] if args else "")):
        return {READ}  # tar -tzf lists an archive
    if program == "unzip" and any(a in ("-l", "-Z", "-v", "-t") for a in args):
        return {READ}
    if program in ("sha256sum", "sha1sum", "sha512sum", "md5sum", "b2sum") and any(
        a in ("-c", "--check") for a in args
    ):
        return {TEST}
    if program in ("curl", "wget", "http", "https", "httpie", "nc"):
        return _download_kinds(args)
    if program in ("ruff", "black", "isort", "autopep8", "yapf"):
        return _formatter_kinds(program, args)
    if program == "gofmt":
        return {EDIT} if "-w" in args else {READ}
    if program in ("patch",):
        return {TEST} if "--dry-run" in args else {EDIT}
    if program in ("truncate", "ed", "ex"):
        return {EDIT}
    if program in ("npx", "bunx", "pnpx"):
        tool = _normalise(_first_positional(args))
        return {TEST} if tool in _TEST_PROGRAMS or tool == "playwright" else {RUN}
    if program in _TEST_PROGRAMS:
        return {TEST}
    if program in _FILEOP_PROGRAMS:
        return {FILEOP}
    if program in _BUILD_PROGRAMS or program in _INTERPRETERS:
        return {RUN}
    if program in _READ_PROGRAMS:
        return {READ}
    if "/" in inv.raw_program:  # ./prog, /app/bin/x, build/run.sh
        return {RUN, TEST} if _TESTISH.search(inv.raw_program) else {RUN}
    return set()


def _redirect_kinds(redirects: list[tuple[str, str]]) -> set[str]:
    kinds: set[str] = set()
    for op, target in redirects:
        if op not in _OUTPUT_OPS:
            continue
        if op == ">&" and (target.isdigit() or target == "-"):
            continue  # fd duplication such as 2>&1
        kinds |= _write_kinds(target)
    return kinds


def _command_kinds(segment: _Segment, depth: int = 0) -> set[str]:
    inv = _invocation(segment)
    return _program_kinds(inv, depth) | _redirect_kinds(inv.redirects)


def _word_kinds(words: list[str], depth: int) -> set[str]:
    raw, args = _resolve(words)
    inv = _Invocation(_normalise(raw) if raw else "", raw, args, [], [])
    return _program_kinds(inv, depth)


# ---------------------------------------------------------------------------------------------
# Behaviour labels
# ---------------------------------------------------------------------------------------------


def _squash(command_text: str) -> str:
    return "".join(command_text.split())


def _command_kind_list(command_text: str) -> tuple[list[_Segment], list[set[str]]]:
    segments = _split_segments(command_text)
    return segments, [_command_kinds(segment) for segment in segments]


@dataclass
class HistoryState:
    """What the attempt has executed so far: only the selected actions, in order.

    ``last_edit_turn`` indexes ``commands``; ``ran_since_last_edit`` says whether any command after
    the last edit (in that turn or later) ran or tested code. Build it with :meth:`after`.
    """

    commands: list[str] = field(default_factory=list)
    last_edit_turn: int | None = None
    ran_since_last_edit: bool = False

    def after(self, command_text: str | None) -> HistoryState:
        """State after the harness executes ``command_text``; ``None``/blank executed nothing."""
        if command_text is None or not command_text.strip():
            return HistoryState(list(self.commands), self.last_edit_turn, self.ran_since_last_edit)
        turn = len(self.commands)
        last_edit, ran = self.last_edit_turn, self.ran_since_last_edit
        for kinds in _command_kind_list(command_text)[1]:
            if kinds & _RUNS_CODE:
                ran = True
            if EDIT in kinds:
                last_edit, ran = turn, False
        return HistoryState([*self.commands, command_text], last_edit, ran)

    @classmethod
    def replay(cls, executed: Iterable[str | None]) -> HistoryState:
        """State after executing each command text in order."""
        state = cls()
        for command_text in executed:
            state = state.after(command_text)
        return state


def _starts_with_wait(segments: list[_Segment]) -> bool:
    for segment in segments:
        program = _invocation(segment).program
        if program in ("cd", "pushd", "popd", "export", "set", "source", ".", ""):
            continue
        return program in _WAIT_PROGRAMS
    return False


def label_candidate(
    command_text: str | None,
    *,
    is_submission: bool,
    cannot_run: bool,
    history: HistoryState,
) -> set[str]:
    """Table 4 behaviours of one candidate, given what the attempt executed before it.

    ``is_submission`` wins over everything (no labels at all); otherwise ``cannot_run`` or a missing
    command gives exactly ``{"cannot_run"}``.
    """
    if is_submission:
        return set()
    if cannot_run or command_text is None or not command_text.strip():
        return {"cannot_run"}
    segments, kind_list = _command_kind_list(command_text)
    if not segments:
        return set()
    union: set[str] = set().union(*kind_list)
    labels: set[str] = set()
    if EDIT in union:
        labels.add("edits_file")
    if TEST in union:
        labels.add("runs_test_or_check")
    if FILEOP in union:
        labels.add("file_operations")
    if INSTALL in union:
        labels.add("installs_package")
    if all(kinds and kinds <= _READ_COMPATIBLE for kinds in kind_list):
        labels.add("only_reads")

    untested = history.last_edit_turn is not None and not history.ran_since_last_edit
    for kinds in kind_list:
        if untested and kinds & _RUNS_CODE:
            labels.add("tests_last_edit")
            break
        if EDIT in kinds:
            untested = True

    if not _starts_with_wait(segments):
        start = 0 if history.last_edit_turn is None else history.last_edit_turn + 1
        squashed = _squash(command_text)
        if any(_squash(previous) == squashed for previous in history.commands[start:]):
            labels.add("loops_on_command")
    return labels


# ---------------------------------------------------------------------------------------------
# Selector preference (Figure 4)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnLabels:
    """Labels of all N candidates at one turn, which one ran, and (optionally) the task."""

    candidate_labels: Sequence[AbstractSet[str]]
    selected_index: int | None
    task: Hashable | None = None


TurnLike = TurnLabels | Mapping[str, Any]


def _coerce(turn: TurnLike) -> TurnLabels:
    if isinstance(turn, TurnLabels):
        return turn
    return TurnLabels(turn["candidate_labels"], turn["selected_index"], turn.get("task"))


def _turn_matrix(turns: Iterable[TurnLike]) -> tuple[list[Hashable | None], np.ndarray, np.ndarray]:
    """Per usable turn: task, selected indicator per behaviour, uniform-choice share per behaviour."""
    tasks: list[Hashable | None] = []
    selected_rows: list[list[float]] = []
    uniform_rows: list[list[float]] = []
    for raw in turns:
        turn = _coerce(raw)
        if turn.selected_index is None:
            continue
        candidates = list(turn.candidate_labels)
        if not candidates:
            raise ValueError("a turn has no candidates")
        if not 0 <= turn.selected_index < len(candidates):
            raise ValueError(
                f"selected_index {turn.selected_index} out of range for {len(candidates)} candidates"
            )
        chosen = candidates[turn.selected_index]
        tasks.append(turn.task)
        selected_rows.append([float(b in chosen) for b in BEHAVIOURS])
        uniform_rows.append([sum(b in c for c in candidates) / len(candidates) for b in BEHAVIOURS])
    if not tasks:
        raise ValueError("no turn with a known selected candidate")
    return tasks, np.array(selected_rows), np.array(uniform_rows)


def preference_table(turns: Iterable[TurnLike]) -> pd.DataFrame:
    """Figure 4: per behaviour, share of turns whose pick shows it vs. the uniform-choice expectation.

    Shares are pooled over turns (each turn weighs the same), as in the paper. Index: behaviour, in
    Figure 4 order; columns: ``selected_share``, ``uniform_share``, ``difference``, ``n_turns``.
    """
    _, selected, uniform = _turn_matrix(turns)
    table = pd.DataFrame(
        {
            "selected_share": selected.mean(axis=0),
            "uniform_share": uniform.mean(axis=0),
        },
        index=pd.Index(BEHAVIOURS, name="behaviour"),
    )
    table["difference"] = table["selected_share"] - table["uniform_share"]
    table["n_turns"] = selected.shape[0]
    return table


def preference_by_task(turns_with_task_id: Iterable[TurnLike]) -> pd.DataFrame:
    """Per (task, behaviour): selected and uniform shares over that task's turns, and ``n_turns``.

    This is the input of a paired bootstrap over tasks (``a=uniform_share``, ``b=selected_share``).
    Weighting tasks by ``n_turns`` reproduces the pooled shares of :func:`preference_table`.
    """
    tasks, selected, uniform = _turn_matrix(turns_with_task_id)
    if any(task is None for task in tasks):
        raise ValueError("every turn needs a task id for the per-task table")
    frames = []
    for b_index, behaviour in enumerate(BEHAVIOURS):
        frames.append(
            pd.DataFrame(
                {
                    "task": tasks,
                    "behaviour": behaviour,
                    "selected": selected[:, b_index],
                    "uniform": uniform[:, b_index],
                }
            )
        )
    long = pd.concat(frames, ignore_index=True)
    grouped = long.groupby(["task", "behaviour"], sort=False)
    out = grouped.agg(
        selected_share=("selected", "mean"),
        uniform_share=("uniform", "mean"),
        n_turns=("selected", "size"),
    ).reset_index()
    out["behaviour"] = pd.Categorical(out["behaviour"], categories=list(BEHAVIOURS), ordered=True)
    return out.sort_values(["behaviour", "task"], kind="stable").reset_index(drop=True)


def preference_significance(
    turns_with_task_id: Iterable[TurnLike],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Figure 4 with its significance test: pooled shares plus a paired bootstrap over tasks.

    Tasks are weighted by their number of turns so the tested difference is exactly the pooled
    ``difference`` of :func:`preference_table`, while resampling whole tasks keeps the correlation
    between turns of one task out of the p-value.
    """
    by_task = preference_by_task(turns_with_task_id)
    rows = []
    for behaviour in BEHAVIOURS:
        part = by_task[by_task["behaviour"] == behaviour]
        weights = part["n_turns"].to_numpy(dtype=float)
        result = paired_bootstrap(
            part["uniform_share"].to_numpy(),
            part["selected_share"].to_numpy(),
            n_resamples=n_resamples,
            seed=seed,
            alpha=alpha,
            weights=weights,
        )
        rows.append(
            {
                "behaviour": behaviour,
                "selected_share": float(np.average(part["selected_share"], weights=weights)),
                "uniform_share": float(np.average(part["uniform_share"], weights=weights)),
                "difference": result.diff,
                "lo": result.lo,
                "hi": result.hi,
                "p_value": result.p_value,
                "n_tasks": len(part),
                "n_turns": int(weights.sum()),
            }
        )
    return pd.DataFrame(rows).set_index("behaviour")
