"""Reading JSONL files the way every reader in tbscale needs: line numbers kept, a torn last line
(a write cut short by a crash) told apart from corruption elsewhere, and nothing imported beyond
the standard library. The readers of a run folder's files (tbscale/runfiles.py) validate what this
reads through each file's model."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger("tbscale")


@dataclass
class ReadProblems:
    """Lines a reader could not use: (line number, why). A torn last line is expected after a
    crash and reported apart from corruption elsewhere."""

    path: Path
    corrupt: list[tuple[int, str]] = field(default_factory=list)
    torn_last_line: bool = False
    torn_line: int | None = None  # its number

    def torn(self, n: int) -> None:
        self.torn_last_line, self.torn_line = True, n

    def summary(self) -> str | None:
        """One line naming the file and the lines skipped, or None when none was."""
        parts = []
        if self.corrupt:
            where = ", ".join(f"line {n} ({why})" for n, why in self.corrupt[:5])
            more = f" and {len(self.corrupt) - 5} more" if len(self.corrupt) > 5 else ""
            parts.append(f"{len(self.corrupt)} unreadable line{'s' if len(self.corrupt) > 1 else ''}: {where}{more}")
        if self.torn_last_line:
            parts.append(f"a torn last line{f' (line {self.torn_line})' if self.torn_line else ''}, cut short by a crash")
        return f"{self.path}: skipped {'; and '.join(parts)}" if parts else None

    def warn(self, sink=None) -> None:
        """The summary as a warning: to `sink(text)` when given, else to the log."""
        text = self.summary()
        if text:
            (sink or log.warning)(text)


def read_jsonl(path: Path, problems: ReadProblems | None = None) -> Iterator[dict[str, Any]]:
    """Read a JSONL file, skipping a torn last line left by a crash and reporting other unreadable
    lines in `problems` (or as a warning when none is given)."""
    for _, obj in numbered_jsonl(path, problems):
        yield obj


def numbered_jsonl(path: Path, problems: ReadProblems | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every readable line of a JSONL file; see `read_jsonl`."""
    for n, obj, _ in jsonl_with_text(path, problems):
        yield n, obj


def jsonl_with_text(path: Path, problems: ReadProblems | None = None) -> Iterator[tuple[int, dict[str, Any], str]]:
    """(line number, object, the line's text) for every readable line of a JSONL file (the text
    lets a reader tell a changed line from an unchanged one); see `read_jsonl`."""
    own = problems is None
    problems = problems or ReadProblems(Path(path))
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                if line.endswith("\n"):
                    problems.corrupt.append((n, f"not JSON: {e.msg}"))
                else:  # only the last line can lack its newline: a write torn by a crash
                    problems.torn(n)
                continue
            if isinstance(obj, dict):
                yield n, obj, text
            else:
                problems.corrupt.append((n, "not a JSON object"))
    if own:
        problems.warn()
