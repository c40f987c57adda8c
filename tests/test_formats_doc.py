"""docs/formats.md tells the truth: its tables of trial-line fields and event fields are exactly
the fields of the models the writers and readers use."""

from __future__ import annotations

import re
from pathlib import Path

from tbscale.types.events import EVENT_TYPES, EventBase
from tbscale.types.results import TrialResult

DOC = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()


def section(title: str) -> str:
    start = DOC.index(f"## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def table_rows(text: str) -> list[list[str]]:
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("|---")]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in rows[1:]]


def test_trial_line_fields_match_the_model() -> None:
    documented = [re.fullmatch(r"`(\w+)`", row[0]).group(1) for row in table_rows(section("trials.jsonl"))]
    assert documented == list(TrialResult.model_fields)


def test_event_fields_match_the_models() -> None:
    base = set(EventBase.model_fields) | {"type"}
    rows = table_rows(section("Trajectory events"))
    documented = {}
    for type_cell, fields_cell in rows:
        # The first-level field names: backticked names outside any parenthesis.
        top = re.sub(r"\([^)]*\)", "", fields_cell)
        documented[type_cell.strip("`")] = re.findall(r"`(\w+)`", top)
    assert list(documented) == list(EVENT_TYPES)
    for type_, model in EVENT_TYPES.items():
        assert documented[type_] == [f for f in model.model_fields if f not in base], type_


def test_a_real_runs_events_read_back_through_their_models(tmp_path: Path) -> None:
    """Events written by the writers validate against the models when read back (typed reader)."""
    from tbscale.logs import AttemptRecorder, EventLog, read_events
    from tbscale.types import Usage
    from tbscale.types.events import ModelCall, Observation, Start

    log = EventLog(tmp_path / "t.jsonl", trial_key="k", task_id="t", setting="s", setting_key="sk", trial=0, seed=1)
    rec = AttemptRecorder(log, attempt=0)
    rec.turn = 1
    rec.record_call("generator", "openai/m", Usage(input_tokens=3, output_tokens=2, calls=1), 0.5, n=1, retries=1,
                    retry_causes=["rate_limit"])
    rec.event("observation", exit_code=0, output="hi\n", timed_out=False, duration_sec=0.1)
    log.close()
    events = list(read_events(tmp_path / "t.jsonl"))
    assert [type(e) for e in events] == [Start, ModelCall, Observation]
    assert events[1].retry_causes == ["rate_limit"] and events[1].usage.output == 2
