"""Shell command text as tbscale reads it: extraction, tokenizing, program resolution, command
kinds and the Table 4 behaviour labels (turn-bon Table 4 and Appendix D.1).

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

from tbscale.shell.labels import (
    BEHAVIOURS,
    HistoryState,
    contains_finish_marker,
    label_candidate,
)
from tbscale.shell.parse import extract_commands, program_of

__all__ = ["BEHAVIOURS", "HistoryState", "contains_finish_marker", "extract_commands", "label_candidate", "program_of"]
