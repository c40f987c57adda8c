"""Event streams and the trial index on disk, written through the typed models (and read back
through the same models by tbscale/runfiles.py).

Every event is one JSON object on one line with `type`, `ts` (unix seconds), `attempt` and
`turn`, validated against its model in tbscale.types.events as it is written. Lines are flushed
as they are written, so a crash (even SIGKILL) loses nothing that was already done. A crash in
the middle of a write can leave a torn last line: readers skip it, and an appended file (the trial
index, a sweep's history) repairs it before appending. Any other unreadable line is reported with
its line number. See docs/formats.md.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from tbscale import SCHEMA_VERSION
from tbscale.jsonl import ReadProblems, jsonl_with_text, numbered_jsonl, read_jsonl  # noqa: F401  (re-exported)
from tbscale.runfiles import check_schema_version, latest_trials, read_events, read_trials  # noqa: F401  (re-exported)
from tbscale.secrets import redact
from tbscale.types import Usage
from tbscale.types.events import EVENT_TYPES
from tbscale.types.results import TrialResult
from tbscale.types.spend import CallRecord

log = logging.getLogger("tbscale")


def _default(o: Any):
    if hasattr(o, "as_dict"):
        return o.as_dict()
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json", exclude_unset=True)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    return str(o)


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_default, ensure_ascii=False)


def event_line(type: str, fields: dict[str, Any]) -> str:
    """One event as its JSON line: validated against the event's model (a wrong field is a bug,
    raised here rather than written), with only the fields that were given."""
    model = EVENT_TYPES.get(type)
    if model is None:
        raise ValueError(f"unknown event type {type!r}")
    event = model.model_validate({"type": type, "ts": round(time.time(), 4), **fields})
    return redact(dumps({"type": type, **event.model_dump(mode="json", exclude_unset=True)}))


class EventLog:
    """Append-only JSONL writer shared by the attempts of one trial. With `sink`, every line goes
    to `sink(line)` instead of the file (a Ray worker streams its lines to the driver, which alone
    writes the run folder); side files still go beside `path`."""

    def __init__(self, path: Path, sink: Callable[[str], None] | None = None, **base: Any):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.sink, self._closed = path, sink, False
        # A rerun of an unfinished trial starts afresh.
        self._f = open(path, "w", encoding="utf-8") if sink is None else None
        self._lock = threading.Lock()
        self.base = base
        self.write("start", attempt=None, turn=None, schema_version=SCHEMA_VERSION, **base)

    def write(self, type: str, **fields: Any) -> None:
        line = event_line(type, fields)
        with self._lock:
            if self._closed:
                return
            if self._f is None:
                self.sink(line)
                return
            self._f.write(line + "\n")
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            if not self._closed and self._f is not None:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
            self._closed = True


class AttemptRecorder:
    """What one attempt reports: its events (tagged with attempt and turn) and token usage per
    role. Model wrappers call `record_call`; the agent loop sets `turn`."""

    def __init__(self, log: EventLog | None, attempt: int, label: str = "attempt",
                 on_call: Callable[[CallRecord], None] | None = None):
        self.log, self.attempt, self.label = log, attempt, label
        self.turn: int | None = None
        self.usage: dict[str, Usage] = defaultdict(Usage)
        self.on_call = on_call  # sees every model call as it is made (spend ledger, live progress)
        self.selections = self.fallbacks = 0
        self.snapshot_sec: list[float] = []  # `fork` events, op "snapshot" (the trial line sums them)
        self.fork_sec: list[float] = []  # `fork` events, op "fork"
        self.candidate_execs = 0  # candidate commands run in forks (a lookahead policy)
        self.candidate_exec_sec = 0.0

    def event(self, type: str, **fields: Any) -> None:
        if type == "selection":
            self.selections += 1
            self.fallbacks += bool(fields.get("selector_failed"))
        elif type == "fork" and fields.get("op") in ("snapshot", "fork"):
            (self.snapshot_sec if fields["op"] == "snapshot" else self.fork_sec).append(float(fields.get("sec") or 0.0))
        if self.log is not None:
            fields.setdefault("turn", self.turn)
            self.log.write(type, attempt=self.attempt, **fields)

    def note_candidate_exec(self, sec: float) -> None:
        """A candidate command run in a fork and the seconds it took (the trial line's
        `candidate_execs` and `candidate_exec_sec`)."""
        self.candidate_execs += 1
        self.candidate_exec_sec += sec

    def record_call(self, role: str, model: str, usage: Usage, latency_sec: float, *, n: int,
                    retries: int, error: str | None = None, retry_causes: list[str] | None = None) -> None:
        self.usage[role].add(usage)
        record = {"role": role, "model": model, "n": n, "usage": usage.recorded(), "latency_sec": round(latency_sec, 4),
                  "retries": retries, "error": error}
        if retry_causes:
            record["retry_causes"] = retry_causes
        self.event("model_call", **record)
        if self.on_call is not None:
            self.on_call(CallRecord(attempt=self.attempt, turn=self.turn, **record))  # type: ignore[typeddict-item]

    def recorded_usage(self) -> dict[str, Usage]:
        """Usage per role, as records hold it (Usage.recorded), roles in order."""
        return {role: u.recorded() for role, u in sorted(self.usage.items())}

    def side_file(self, name: str) -> Path:
        """A file beside the trajectory for this attempt and turn (whole command outputs):
        `<trajectory stem>.files/a<attempt>_t<turn>_<name>`."""
        if self.log is None:
            raise ValueError("no event log to put a side file beside")
        folder = self.log.path.with_name(self.log.path.stem + ".files")
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"a{self.attempt}_t{self.turn}_{name}"

    def relative(self, path: Path) -> str:
        """A side file's path relative to the trajectory's folder, as events record it."""
        return path.relative_to(self.log.path.parent).as_posix() if self.log else str(path)


class AppendedLines:
    """A JSONL file lines are appended to, one at a time and synced, by one process: a torn last
    line left by a crash is cut off first (kept in `<file>.torn`), so the next line starts on a
    line of its own. With `sync` (the trial index), each line is on disk before `append_line` returns."""

    def __init__(self, path: Path, sync: bool = True):
        self.path, self.sync = path, sync
        self._lock = threading.Lock()
        self._repaired = False

    def repair_torn_tail(self) -> str | None:
        """Cut a torn last line (a crash mid-write) off the file, keeping it in `<file>.torn`, so
        the next line appended starts on a line of its own. Returns the fragment, if any."""
        if not self.path.exists():
            return None
        with open(self.path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                return None
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return None
            f.seek(max(0, size - (1 << 20)))
            tail = f.read()
            cut = tail.rfind(b"\n") + 1
            keep = size - len(tail) + cut
            fragment = tail[cut:]
            with open(self.path.with_name(self.path.name + ".torn"), "ab") as t:
                t.write(fragment + b"\n")
            f.truncate(keep)
        return fragment.decode("utf-8", errors="replace")

    def append_line(self, line: str) -> None:
        with self._lock:
            if not self._repaired:
                fragment = self.repair_torn_tail()
                if fragment:
                    log.warning(f"{self.path}: cut a torn last line ({len(fragment)} chars, kept in "
                                f"{self.path.name}.torn) before appending")
                self._repaired = True
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
                if self.sync:
                    f.flush()
                    os.fsync(f.fileno())


class TrialIndex(AppendedLines):
    """results/<run>/trials.jsonl: one line per finished trial, the index `report` reads and the
    record `run` consults to resume."""

    def latest(self) -> dict[str, TrialResult]:
        """The latest readable line of every trial key (a rerun's line supersedes the old one)."""
        if not self.path.exists():
            return {}
        return latest_trials(self.path)

    def finished_keys(self, retry_stop_reasons: set[str] | None = None, retry_infra_errors: bool = False,
                      latest: dict[str, TrialResult] | None = None) -> set[str]:
        """Keys of trials with a readable line. A trial whose latest line stopped for one of
        `retry_stop_reasons`, or (with retry_infra_errors) was an infrastructure error, counts as
        unfinished: its new line will supersede the old one. So does a trial whose only lines are
        unreadable (warned about with their line numbers). `latest`: `self.latest()` when the
        caller has read it already."""
        retry = retry_stop_reasons or set()
        return {k for k, row in (self.latest() if latest is None else latest).items()
                if row.stop_reason not in retry and not (retry_infra_errors and row.infra_error)}

    def append(self, row: TrialResult) -> None:
        self.append_line(redact(row.model_dump_json()))


def model_line(model: BaseModel) -> str:
    """A model as one JSON line holding the fields it was given (as every line writer but the trial
    index writes them: json's own number format, non-ASCII kept), keys redacted."""
    return redact(dumps(model.model_dump(exclude_unset=True)))
