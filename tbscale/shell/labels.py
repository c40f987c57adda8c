"""The eight behaviours of turn-bon Table 4, for one candidate command given what the attempt
executed before it (Appendix D.1). Shared by the behaviour report and the simulated judge."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tbscale.shell.classify import command_kind_list
from tbscale.shell.kinds import (
    EDIT,
    FILEOP,
    INSTALL,
    READ_COMPATIBLE,
    RUNS_CODE,
    TEST,
    WAIT_PROGRAMS,
)
from tbscale.shell.parse import Segment, invocation
from tbscale.types.actions import FINISH_MARKER

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



def contains_finish_marker(command_text: str | None, marker: str = FINISH_MARKER) -> bool:
    """Whether a candidate is a submission: Appendix D.1 treats any candidate containing the marker so."""
    return command_text is not None and marker in command_text


def _squash(command_text: str) -> str:
    return "".join(command_text.split())


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
        for kinds in command_kind_list(command_text)[1]:
            if kinds & RUNS_CODE:
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


def _starts_with_wait(segments: list[Segment]) -> bool:
    for segment in segments:
        program = invocation(segment).program
        if program in ("cd", "pushd", "popd", "export", "set", "source", ".", ""):
            continue
        return program in WAIT_PROGRAMS
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
    segments, kind_list = command_kind_list(command_text)
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
    if all(kinds and kinds <= READ_COMPATIBLE for kinds in kind_list):
        labels.add("only_reads")

    untested = history.last_edit_turn is not None and not history.ran_since_last_edit
    for kinds in kind_list:
        if untested and kinds & RUNS_CODE:
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
