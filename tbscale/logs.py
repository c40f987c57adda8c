"""Event streams on disk: one JSONL file per trial, appended as things happen.

Every event is one JSON object on one line with `type`, `ts` (unix seconds), `attempt` and
`turn`. Lines are flushed as they are written, so a crash (even SIGKILL) loses nothing that was
already done; a partial last line from a crash mid-write is skipped by readers. See docs/formats.md.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

from tbscale import SCHEMA_VERSION
from tbscale.models.llm import Usage, redact


def _default(o: Any):
    if hasattr(o, "as_dict"):
        return o.as_dict()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    if isinstance(o, Path):
        return str(o)
    return str(o)


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_default, ensure_ascii=False)


class EventLog:
    """Append-only JSONL writer shared by the attempts of one trial."""

    def __init__(self, path: Path, **base: Any):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._f = open(path, "w", encoding="utf-8")  # a rerun of an unfinished trial starts afresh
        self._lock = threading.Lock()
        self.base = base
        self.write("start", attempt=None, turn=None, schema_version=SCHEMA_VERSION, **base)

    def write(self, type: str, **fields: Any) -> None:
        line = redact(dumps({"type": type, "ts": round(time.time(), 4), **fields}))
        with self._lock:
            if self._f.closed:
                return
            self._f.write(line + "\n")
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()


class AttemptRecorder:
    """What one attempt reports: its events (tagged with attempt and turn) and token usage per
    role. Model wrappers call `record_call`; the agent loop sets `turn`."""

    def __init__(self, log: EventLog | None, attempt: int, label: str = "attempt"):
        self.log, self.attempt, self.label = log, attempt, label
        self.turn: int | None = None
        self.usage: dict[str, Usage] = defaultdict(Usage)

    def event(self, type: str, **fields: Any) -> None:
        if self.log is not None:
            fields.setdefault("turn", self.turn)
            self.log.write(type, attempt=self.attempt, **fields)

    def record_call(self, role: str, model: str, usage: Usage, latency_sec: float, *, n: int,
                    retries: int, error: str | None = None) -> None:
        self.usage[role].add(usage)
        self.event("model_call", role=role, model=model, n=n, usage=usage.as_dict(),
                   latency_sec=round(latency_sec, 4), retries=retries, error=error)

    def usage_dict(self) -> dict[str, dict[str, Any]]:
        return {role: u.as_dict() for role, u in sorted(self.usage.items())}


def merge_usage(*parts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for role, u in part.items():
            acc = out.setdefault(role, {k: 0 for k in u})
            for k, v in u.items():
                acc[k] = round(acc.get(k, 0) + v, 6)
    return out


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Read a JSONL file, skipping a torn last line left by a crash."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


class TrialIndex:
    """results/<run>/trials.jsonl: one line per finished trial, the index `report` reads and the
    record `run` consults to resume."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def finished_keys(self, retry_stop_reasons: set[str] | None = None) -> set[str]:
        """Keys of trials with a line; with retry_stop_reasons, a trial whose latest line stopped
        for one of those reasons counts as unfinished (its new line supersedes the old one)."""
        if not self.path.exists():
            return set()
        latest = {row["trial_key"]: row for row in read_jsonl(self.path) if "trial_key" in row}
        retry = retry_stop_reasons or set()
        return {k for k, row in latest.items() if row.get("stop_reason") not in retry}

    def append(self, row: dict[str, Any]) -> None:
        line = redact(dumps(row))
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
