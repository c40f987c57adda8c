"""docs/formats.md tells the truth: its tables of the fields of trial lines, events, the manifest,
the spend ledger and a sweep's history are exactly the fields of the models the writers and readers
use, and the models it names exist."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

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


def first_column(title: str) -> list[str]:
    """The backticked names of a section's table's first column, in order (a cell may name several)."""
    return [name for row in table_rows(section(title)) for name in re.findall(r"`(\w+)`", row[0])]


def top_level(cell: str) -> list[str]:
    """The backticked names of a cell outside any parenthesis (a nested model's own fields)."""
    return re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", cell))


def meaning(title: str, field: str) -> str:
    return next(row[1] for row in table_rows(section(title)) if f"`{field}`" in row[0])


def test_the_models_named_exist_and_are_the_ones_used() -> None:
    rows = table_rows(DOC[DOC.index("| file | model |"):DOC.index("## manifest.json")])
    assert len(rows) == 11
    for row in rows:
        dotted = re.match(r"`([\w.]+)`", row[1]).group(1)
        if row[0] == "trajectory events":  # a module of models, one per event type
            assert importlib.import_module(dotted).EVENT_TYPES
            continue
        module, _, name = dotted.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), row[1]


def test_manifest_fields_match_the_model() -> None:
    from tbscale.types.manifest import CurrentConfig, DatasetRecord, ImportedFrom, Invocation, PublishedRun, RunManifest

    assert first_column("manifest.json") == list(RunManifest.model_fields)
    assert top_level(meaning("manifest.json", "invocations")) == list(Invocation.model_fields)
    assert [n for n in top_level(meaning("manifest.json", "current")) if n != "tasks"] == list(CurrentConfig.model_fields)
    assert top_level(meaning("manifest.json", "dataset")) == list(DatasetRecord.model_fields)
    assert top_level(meaning("manifest.json", "imported_from")) == list(ImportedFrom.model_fields)
    published = re.search(r"`published` \(([^)]*)\)", meaning("manifest.json", "imported_from")).group(1)
    assert re.findall(r"`(\w+)`", published) == list(PublishedRun.model_fields)


@pytest.mark.parametrize("title, model", [("spend.jsonl", "tbscale.types.spend.SpendLine"),
                                          ("history.jsonl (sweeps)", "tbscale.sweeps.HistoryLine"),
                                          ("artifacts/<trial_key>/attempt-<i>/manifest.json",
                                           "tbscale.types.artifacts.CollectedArtifact"),
                                          ("judge/manifest.json", "tbscale.types.posthoc.JudgeManifest"),
                                          ("judge/rubrics.jsonl", "tbscale.types.posthoc.RubricLine"),
                                          ("rewards/manifest.json", "tbscale.types.posthoc.BsrManifest"),
                                          ("rewards/judgements.jsonl", "tbscale.types.posthoc.PairJudgement")])
def test_line_fields_match_the_model(title: str, model: str) -> None:
    module, _, name = model.rpartition(".")
    assert first_column(title) == list(getattr(importlib.import_module(module), name).model_fields)


def test_posthoc_nested_fields_match_their_models() -> None:
    from tbscale.types.posthoc import (BsrBucket, BsrInvocation, JudgeInvocation, Judgment, RewardHackingLine,
                                       TrialJudgement)

    assert top_level(meaning("judge/manifest.json", "history")) == list(JudgeInvocation.model_fields)
    assert top_level(meaning("rewards/manifest.json", "history")) == list(BsrInvocation.model_fields)
    assert top_level(meaning("rewards/manifest.json", "buckets")) == list(BsrBucket.model_fields)
    assert top_level(meaning("rewards/judgements.jsonl", "parsed")) == list(Judgment.__annotations__)
    # reward_hacking.jsonl: a rubrics.jsonl line's fields up to raw_reply, then its own verdict
    assert list(TrialJudgement.model_fields)[-1] == "raw_reply"
    assert first_column("judge/reward_hacking.jsonl") == \
        [f for f in RewardHackingLine.model_fields if f not in TrialJudgement.model_fields]


def test_usage_and_tampering_entries_match_their_models() -> None:
    from tbscale.types.completion import Usage
    from tbscale.types.events import TamperingEntry

    usage = re.search(r"`tbscale\.types\.completion\.Usage` \((.*?)\)\.", DOC, re.S).group(1)
    assert re.findall(r"`(\w+)`", usage) == list(Usage.model_fields)
    assert re.search(r"`\{([^}]*)\}`", meaning("spend.jsonl", "usage")).group(1).split(", ") == \
        list(Usage.model_fields)
    entry = section("Tampering entries (`tampering`)").split(", plus what applies")[0]
    assert top_level(entry) == list(TamperingEntry.model_fields)


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
    rec.record_call("generator", "openai/m", Usage(input=3, output=2, calls=1), 0.5, n=1, retries=1,
                    retry_causes=["rate_limit"])
    rec.event("observation", exit_code=0, output="hi\n", timed_out=False, duration_sec=0.1)
    log.close()
    events = list(read_events(tmp_path / "t.jsonl"))
    assert [type(e) for e in events] == [Start, ModelCall, Observation]
    assert events[1].retry_causes == ["rate_limit"] and events[1].usage.output == 2
