"""A trial's event stream, grouped into attempts and turns (what each turn offered, chose, ran
and saw), for the analyses, the judge and the viewer. Events are read through their models
(runfiles.read_events): a turn's candidates, selection, action and observation are the typed
events themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tbscale.jsonl import ReadProblems
from tbscale.runfiles import read_events
from tbscale.types.events import (ActionEvent, AttemptEnd, AttemptStart, Candidates, CandidateRecord, End,
                                  FormatError, Observation, Selection, Start, VerifierEvent)


def runnable(candidate: CandidateRecord) -> bool:
    """Whether the candidate could run (a record that does not say: whether it had a command)."""
    if "runnable" in candidate.model_fields_set:
        return candidate.runnable
    return candidate.command is not None


@dataclass
class TurnTrace:
    """One turn of one attempt, as the event log recorded it."""

    turn: int
    candidates: list[CandidateRecord] = field(default_factory=list)
    selection: Selection | None = None
    action: ActionEvent | None = None
    observation: Observation | None = None
    format_error: FormatError | None = None
    path: str | None = None  # adaptive Turn-BoN: agreed_first, agreed_all or selected

    @property
    def executed_index(self) -> int | None:
        """Index of the candidate that the harness acted on (even a fallback pick), if known."""
        if len(self.candidates) == 1:
            return 0
        if self.selection is not None:
            return self.selection.index
        if self.action is not None and "selected_index" in self.action.model_fields_set:
            return self.action.selected_index
        return None

    @property
    def selector_failed(self) -> bool:
        return bool(self.selection and self.selection.selector_failed)

    @property
    def executed_command(self) -> str | None:
        return self.action.command if self.action else None

    @property
    def executed_candidate(self) -> CandidateRecord | None:
        i = self.executed_index
        return self.candidates[i] if i is not None and 0 <= i < len(self.candidates) else None


@dataclass
class AttemptTrace:
    attempt: int
    stage: str | None = None
    turns: list[TurnTrace] = field(default_factory=list)
    verifier: VerifierEvent | None = None
    end: AttemptEnd | None = None


@dataclass
class TrialTrace:
    start: Start | None
    attempts: dict[int, AttemptTrace]
    end: End | None = None

    def final_attempt(self) -> AttemptTrace | None:
        if not self.attempts:
            return None
        if self.end is not None and self.end.final_attempt in self.attempts:
            return self.attempts[self.end.final_attempt]
        return self.attempts[max(self.attempts)]


_TURN_PARTS = {Selection: "selection", ActionEvent: "action", Observation: "observation", FormatError: "format_error"}


def read_trial(path: Path, problems: ReadProblems | None = None) -> TrialTrace:
    """Group a trial's events into attempts and turns. Missing files give an empty trace; lines that
    are not events are skipped and noted in `problems` (or warned about when none is given)."""
    start: Start | None = None
    attempts: dict[int, AttemptTrace] = {}
    end: End | None = None
    if not Path(path).is_file():
        return TrialTrace(start, attempts, end)
    for ev in read_events(Path(path), problems):
        if isinstance(ev, Start):
            start = ev
            continue
        if isinstance(ev, End):
            end = ev
            continue
        a = ev.attempt
        if a is None or a < 0:
            continue  # calls the trajectory strategy made itself (attempt -1)
        att = attempts.setdefault(a, AttemptTrace(a))
        if isinstance(ev, AttemptStart):
            att.stage = ev.stage
        elif isinstance(ev, VerifierEvent):
            att.verifier = ev
        elif isinstance(ev, AttemptEnd):
            att.end = ev
        elif isinstance(ev, (Candidates, *_TURN_PARTS)):
            if ev.turn is None:
                continue
            if not att.turns or att.turns[-1].turn != ev.turn:
                att.turns.append(TurnTrace(ev.turn))
            t = att.turns[-1]
            if isinstance(ev, Candidates):
                t.candidates = list(ev.candidates)
                t.path = ev.path
            else:
                setattr(t, _TURN_PARTS[type(ev)], ev)
    return TrialTrace(start, attempts, end)
