"""The TypedDicts that describe what stays a plain dict at run time (a tampering entry, an attempt
brief as the report reads it, a sweep's processes) have the keys of the models and docs the same
data is read back through, so the two descriptions cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

from tbscale.types.events import AgentProcess, SweepEvent, TamperingEntry
from tbscale.types.guard import AgentProcessInfo, CommandAttribution, SweepRecord, Tampering, ToolState
from tbscale.types.results import AttemptBrief, AttemptBriefJSON

DOC = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()


def test_an_attempt_brief_as_json_has_the_models_keys_in_order() -> None:
    assert list(AttemptBriefJSON.__annotations__) == list(AttemptBrief.model_fields)
    dumped = AttemptBrief(index=0, label="a", stage="final", ending="pass", passed=True, reward=1.0).model_dump()
    assert list(dumped) == list(AttemptBriefJSON.__annotations__)


def test_tampering_entries_have_the_documented_keys() -> None:
    text = DOC[DOC.index("## Tampering entries"):DOC.index("| kind | source | meaning |")]
    head, _, rest = text.partition(", plus what applies")
    assert [k for k in Tampering.__annotations__][:3] == list(TamperingEntry.model_fields)
    top = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", rest))
    assert set(top) == set(Tampering.__annotations__) - set(TamperingEntry.model_fields)
    tool = re.search(r"`after`\s*\((.*?)\), `by_command`", rest, re.S).group(1)
    assert set(re.findall(r"`(\w+)`", tool)) == set(ToolState.__annotations__) - {"builtin"}
    by = re.search(r"`by_command` \((.*?)\)", rest, re.S).group(1)
    assert re.findall(r"`(\w+)`", by) == list(CommandAttribution.__annotations__)


def test_a_sweep_record_is_what_the_sweep_event_holds() -> None:
    assert list(AgentProcessInfo.__annotations__) == list(AgentProcess.model_fields)
    own = set(SweepEvent.model_fields) - {"type", "ts", "attempt", "turn", "tampering", "timing", "step"}
    assert set(SweepRecord.__annotations__) == own


def test_a_call_record_is_a_spend_line_without_the_trials_identity() -> None:
    from tbscale.types.spend import CallRecord, SpendLine

    added_by_the_run = ["ts", "trial_key", "setting", "task_id", "trial"]
    assert added_by_the_run + list(CallRecord.__annotations__) == list(SpendLine.model_fields)


def test_a_verifier_data_line_names_every_event_field_it_keeps() -> None:
    from tbscale.analysis.export_verifier import _KEEP, ExportLine
    from tbscale.types.events import VerifierCall

    assert set(_KEEP) <= set(ExportLine.__annotations__)
    assert set(_KEEP) <= set(VerifierCall.model_fields)
