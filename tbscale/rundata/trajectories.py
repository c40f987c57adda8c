"""A trial's event stream, grouped into attempts and turns (what each turn offered, chose, ran
and saw), for the analyses, the judge and the viewer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbscale.logs import check_schema_version, read_jsonl



@dataclass
class TurnTrace:
    """One turn of one attempt, as the event log recorded it."""

    turn: int
    candidates: list[dict[str, Any]] = field(default_factory=list)
    selection: dict[str, Any] | None = None
    action: dict[str, Any] | None = None
    observation: dict[str, Any] | None = None
    format_error: dict[str, Any] | None = None
    path: str | None = None  # adaptive Turn-BoN: agreed_first, agreed_all or selected

    @property
    def executed_index(self) -> int | None:
        """Index of the candidate that the harness acted on (even a fallback pick), if known."""
        if len(self.candidates) == 1:
            return 0
        if self.selection is not None and isinstance(self.selection.get("index"), int):
            return self.selection["index"]
        if self.action is not None and isinstance(self.action.get("selected_index"), int):
            return self.action["selected_index"]
        return None

    @property
    def selector_failed(self) -> bool:
        return bool(self.selection and self.selection.get("selector_failed"))

    @property
    def executed_command(self) -> str | None:
        return self.action.get("command") if self.action else None

    @property
    def executed_candidate(self) -> dict[str, Any] | None:
        i = self.executed_index
        return self.candidates[i] if i is not None and 0 <= i < len(self.candidates) else None


@dataclass
class AttemptTrace:
    attempt: int
    stage: str | None = None
    turns: list[TurnTrace] = field(default_factory=list)
    verifier: dict[str, Any] | None = None
    end: dict[str, Any] | None = None


@dataclass
class TrialTrace:
    start: dict[str, Any]
    attempts: dict[int, AttemptTrace]
    end: dict[str, Any] | None = None

    def final_attempt(self) -> AttemptTrace | None:
        if not self.attempts:
            return None
        idx = (self.end or {}).get("final_attempt")
        if idx in self.attempts:
            return self.attempts[idx]
        return self.attempts[max(self.attempts)]


def read_trial(path: Path) -> TrialTrace:
    """Group a trial's events into attempts and turns. Missing files give an empty trace."""
    start: dict[str, Any] = {}
    attempts: dict[int, AttemptTrace] = {}
    end = None
    if not Path(path).is_file():
        return TrialTrace(start, attempts, end)
    for ev in read_jsonl(Path(path)):
        kind = ev.get("type")
        if kind == "start":
            if ev.get("schema_version") is not None:  # hand-made event files may leave it out
                check_schema_version(ev["schema_version"], str(path))
            start = ev
            continue
        if kind == "end":
            end = ev
            continue
        a = ev.get("attempt")
        if not isinstance(a, int) or a < 0:
            continue  # calls the trajectory strategy made itself (attempt -1)
        att = attempts.setdefault(a, AttemptTrace(a))
        if kind == "attempt_start":
            att.stage = ev.get("stage")
        elif kind == "verifier":
            att.verifier = ev
        elif kind == "attempt_end":
            att.end = ev
        elif kind in ("candidates", "selection", "action", "observation", "format_error"):
            turn = ev.get("turn")
            if not isinstance(turn, int):
                continue
            if not att.turns or att.turns[-1].turn != turn:
                att.turns.append(TurnTrace(turn))
            t = att.turns[-1]
            if kind == "candidates":
                t.candidates = list(ev.get("candidates") or [])
                t.path = ev.get("path")
            else:
                setattr(t, kind, ev)
    return TrialTrace(start, attempts, end)
