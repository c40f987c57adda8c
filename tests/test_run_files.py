"""The run folder's other files, each written and read through its model (tbscale/runfiles.py): the
manifest keeps what it does not know and reads old shapes, the spend ledger and trajectories report
their bad lines by number, a sweep's history is typed on both sides, and an import record refuses a
wrong type as an importer builds it."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from tbscale.errors import TbscaleError
from tbscale.jsonl import ReadProblems
from tbscale.runfiles import manifest_json, manifest_of, read_events, read_manifest, read_spend
from tbscale.types.events import Observation, Start
from tbscale.types.manifest import Invocation, RunManifest
from tbscale.types.spend import SpendLine


def test_a_manifest_keeps_what_this_version_does_not_know(tmp_path: Path) -> None:
    written_by_another_version = {
        "schema_version": 2, "run_name": "r", "experiment": {"name": "r"}, "setting_keys": {"base": "k"},
        "invocations": [{"started_at": "t0", "argv": ["tbscale", "run"], "finished_at": "t1", "gpu_hours": 3,
                         "executor": {"name": "ray", "address": "auto", "nodes_used": 2, "zone": "b"}}],
        "current": {"settings": ["base"], "setting_keys": {"base": "k"}, "trials": 2, "seed": 0,
                    "task_hashes": {"t1": "h1", "t2": "h2"}, "shard": 1},
        "a_future_key": {"x": [1, 2]}}
    (tmp_path / "manifest.json").write_text(json.dumps(written_by_another_version))
    manifest = read_manifest(tmp_path)
    assert manifest.invocations[0].executor.nodes_used == 2 and manifest.current.trials == 2
    # A later invocation adds to it; what it did not know is written back as it was.
    manifest.invocations.append(Invocation(started_at="t2", argv=["tbscale", "run"]))
    manifest.invocations[-1].update(finished_at="t3", trials_run=4, executor={"name": "ray", "nodes_used": 1})
    manifest.not_enforced = [{"key": "storage_mb", "why": "no quota", "tasks": ["t1"]}]
    again = json.loads(manifest_json(manifest))
    assert again["a_future_key"] == {"x": [1, 2]} and again["current"]["shard"] == 1
    assert again["invocations"][0]["gpu_hours"] == 3 and again["invocations"][0]["executor"]["zone"] == "b"
    assert again["invocations"][1] == {"started_at": "t2", "argv": ["tbscale", "run"], "finished_at": "t3",
                                       "trials_run": 4, "executor": {"name": "ray", "nodes_used": 1}}
    assert "dataset" not in again and "created_at" not in again  # what the run never had stays out
    # Assignments are checked like the fields read.
    with pytest.raises(ValidationError):
        manifest.invocations[-1].update(trials_run="many")


def test_the_ray_executors_retries_are_kept_as_it_records_them(tmp_path: Path) -> None:
    # The shape RayExecutor.summary() gives the invocation: a list of the trials run again.
    retries = [{"trial_key": "1b41", "attempt": 0, "error": "NodeDiedError", "at": 1796150419.37,
                "retry_started_at": 1796150425.938}, {"trial_key": "1348", "attempt": 0, "error": "WorkerCrashedError",
                                                      "at": 1796150419.456}]
    inv = Invocation(started_at="t0", argv=["tbscale", "run"])
    inv.update(finished_at="t1", executor={"name": "ray", "address": "a:1", "nodes_used": 3, "infra_retries": retries})
    manifest = RunManifest(schema_version=2, run_name="r", invocations=[inv])
    (tmp_path / "manifest.json").write_text(manifest_json(manifest))
    again = read_manifest(tmp_path).invocations[0].executor
    assert [(r.trial_key, r.error, r.retry_started_at) for r in again.infra_retries] == [
        ("1b41", "NodeDiedError", 1796150425.938), ("1348", "WorkerCrashedError", None)]
    assert json.loads((tmp_path / "manifest.json").read_text())["invocations"][0]["executor"]["infra_retries"] == retries


def test_a_manifest_before_planned_trials_still_gives_the_plan(tmp_path: Path) -> None:
    from tbscale.rundata.trials import run_plan

    (tmp_path / "manifest.json").write_text(json.dumps({
        "schema_version": 2, "run_name": "old", "invocations": [{"started_at": "t0", "argv": []}],
        "current": {"settings": ["a", "b"], "setting_keys": {}, "trials": 3, "seed": 0,
                    "task_hashes": {"t1": "h", "t2": "h"}}}))
    plan = run_plan(tmp_path)
    assert plan.planned == {"a": 6, "b": 6} and plan.tasks == {"t1", "t2"}
    assert "never recorded its end" in plan.stopped


def test_a_broken_manifest_is_named_and_readers_go_on_without_it(tmp_path: Path, caplog) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"run_name": "r", "invocations": [{"argv": []}]}))
    with pytest.raises(TbscaleError, match=r"manifest.json: not a run manifest \(invocations.0.started_at: Field "
                                           r"required\)"):
        read_manifest(tmp_path / "manifest.json")
    with caplog.at_level(logging.WARNING, logger="tbscale"):
        assert manifest_of(tmp_path) is None
    assert "its trials are read without it" in caplog.text
    assert read_manifest(tmp_path / "nothing-here") is None


def test_the_spend_ledger_is_read_as_its_model(tmp_path: Path) -> None:
    from tbscale.rundata.spend import spend_totals

    good = SpendLine(ts=1.0, trial_key="a", setting="s", task_id="t", trial=0, attempt=0, turn=1, role="generator",
                     model="m", usage={"input": 10, "output": 2, "cost_usd": None, "calls": 1})
    other = good.model_copy(update={"trial_key": "b", "usage": good.usage.model_copy(update={"cost_usd": 0.5})})
    lines = [good.model_dump_json(), '{"ts": 2, "trial_key": "c"}', other.model_dump_json(), "{torn"]
    (tmp_path / "spend.jsonl").write_text("\n".join(lines))
    problems = ReadProblems(tmp_path / "spend.jsonl")
    assert [x.trial_key for x in read_spend(tmp_path / "spend.jsonl", problems)] == ["a", "b"]
    assert problems.corrupt == [(2, "setting: Field required")] and problems.torn_line == 4
    totals = spend_totals(tmp_path)
    assert (totals.calls, totals.input_tokens, totals.trials) == (2, 20, 2) and math.isnan(totals.cost_usd)


def test_a_line_that_is_not_an_event_is_skipped_with_its_number(tmp_path: Path, caplog) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([json.dumps({"type": "start", "trial_key": "k"}),
                               json.dumps({"type": "observation", "attempt": 0, "turn": 1, "exit_code": 0, "output": "a"}),
                               json.dumps({"type": "observation", "attempt": 0, "turn": 2, "exit_cod": 0}),
                               json.dumps({"type": "telepathy"})]) + "\n")
    with caplog.at_level(logging.WARNING, logger="tbscale"):
        events = list(read_events(path))
    assert [type(e) for e in events] == [Start, Observation] and events[1].output == "a"
    assert "line 3 (not a 'observation' event" in caplog.text and "line 4 (not a 'telepathy' event" in caplog.text


def test_history_lines_are_typed_on_both_sides(tmp_path: Path, caplog) -> None:
    from tbscale.sweeps import HistoryFile, HistoryLine, read_history

    line = HistoryLine(sweep="s", date="2026-12-01", run="r", setting="base", pass_at_1=0.5, ci_lo=0.25, ci_hi=0.75,
                       cost_usd=math.nan, endings={"pass": 0.5}, grid_point={"trials": 4})
    path = tmp_path / "history.jsonl"
    path.write_text('{"sweep": "s", "date": "2026-11-30", "run": "r", "setting": "base", "pass_at_1": 1.0, '
                    '"ci_lo": 1.0, "ci_hi": 1.0, "kept": true}\n{"sweep": "s", "da')  # an old line; a torn one
    with caplog.at_level(logging.WARNING, logger="tbscale"):
        HistoryFile(path).append(line)
    assert "cut a torn last line" in caplog.text and (tmp_path / "history.jsonl.torn").is_file()
    old, new = read_history(path)
    assert old.model_extra == {"kept": True} and old.task_pass_rates is None
    assert math.isnan(new.cost_usd) and new.grid_point == {"trials": 4} and new.endings == {"pass": 0.5}
    # What the gate reads must be a rate: a line that says otherwise is never written.
    with pytest.raises(ValidationError, match="pass_at_1"):
        HistoryLine(sweep="s", date="d", run="r", setting="x", pass_at_1=math.nan, ci_lo=0, ci_hi=0)


def test_an_import_record_refuses_a_wrong_type_as_it_is_built() -> None:
    from tbscale.ingest.model import ImportedTrial, ImportedTurn
    from tbscale.types import Usage

    turn = ImportedTurn("reply", "ls", True, usage={"input": 3, "output": 1, "cost_usd": None})
    assert turn.usage == Usage(input=3, output=1, cost_usd=None)
    with pytest.raises(ValidationError, match="usage.input"):
        ImportedTurn("reply", "ls", True, usage={"input": "lots"})
    with pytest.raises(ValidationError, match="steps.0.reward"):
        ImportedTrial(source="s", task_id="t", setting="x", agent="a", model=None, turns=[turn], stop_reason="done",
                      ending="pass", reward=1.0, passed=True, tokens={}, steps=[{"name": "one", "reward": math.inf}])


def test_a_fresh_manifest_is_written_in_the_order_readers_expect(tmp_path: Path) -> None:
    manifest = RunManifest(schema_version=2, run_name="r", experiment={}, setting_keys={}, setting_identities={},
                           created_at="t", invocations=[])
    manifest.current = {"settings": [], "setting_keys": {}, "trials": 1, "seed": 0, "task_hashes": {},
                        "planned_trials": {}}
    manifest.simulated_models, manifest.simulated_note = False, None
    assert list(json.loads(manifest_json(manifest))) == [
        "schema_version", "run_name", "experiment", "setting_keys", "setting_identities", "created_at", "invocations",
        "current", "simulated_models", "simulated_note"]
