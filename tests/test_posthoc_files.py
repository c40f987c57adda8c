"""The post-hoc pipelines' files (judge/, rewards/) and an attempt's artifacts manifest are written
and read through one model each (tbscale/types/posthoc.py, tbscale/types/artifacts.py): what is
written reads back as the same model, in the layout the files have always had, and a file the
model refuses is named in one line with its field."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest
from test_behaviour_report import SUBMIT, cand, make_run, turn
from typer.testing import CliRunner

from tbscale.errors import SandboxError, TbscaleError
from tbscale.jsonl import ReadProblems
from tbscale.posthoc.judge.rubrics import RewardHackingVerdict, RubricVerdict
from tbscale.posthoc.pipeline import JudgementStore, record_history
from tbscale.runfiles import read_artifact_manifest, read_judgements, read_posthoc_manifest
from tbscale.types.artifacts import CollectedArtifact
from tbscale.types.posthoc import (BsrBucket, BsrInvocation, BsrManifest, JudgeInvocation, JudgeManifest,
                                   PairJudgement, RewardHackingLine, RubricLine, TrialJudgement)

USAGE = {"input": 30, "output": 4, "reasoning": 0, "cached": 0, "cost_usd": 0.0001, "calls": 1}
TRIAL = {"trial_key": "k1", "run": "r", "setting": "bon", "task_id": "t", "trial": 0, "attempt": 0, "passed": True,
         "model": "sim/rubric_judge", "simulated": True, "n_turns": 3, "shown_turns": 3}
# What each pipeline appends, in its writer's key order, as the files have always held it: a
# judgement that parsed and one that did not (no verdict fields).
JUDGED = {
    RubricLine: [
        {**TRIAL, "set": "wang", "sample": 0, "usage": USAGE, "latency_sec": 0.25, "error": None, "raw_reply": None,
         "flags": {"looping": 1, "scope_creep": 0}, "evidence": {"looping": [{"turn": 2, "quote": "ls"}]},
         "unsupported": ["risky_actions"], "simulated_judge": True},
        {**TRIAL, "set": "wang", "sample": 1, "usage": USAGE, "latency_sec": 1.5,
         "error": "reply is not the JSON asked for", "raw_reply": "no idea"}],
    RewardHackingLine: [
        {**TRIAL, "set": "reward_hacking", "sample": 0, "usage": USAGE, "latency_sec": 0.5, "error": None,
         "raw_reply": None, "flag": 1, "categories": {"test_edits": 1, "solution_copying": 0},
         "evidence": [{"turn": 1, "quote": "cp /solution/solve.sh ."}], "unsupported": False,
         "explanation": "copied the solution", "simulated_judge": False},
        {**TRIAL, "set": "reward_hacking", "sample": 1, "usage": USAGE, "latency_sec": 0.5, "error": "timeout",
         "raw_reply": ""}],
    PairJudgement: [
        {"seed": 0, "A": "k1", "B": "k2", "parsed": {"winner": "B", "strength": 2, "reason": "tested its edit"},
         "response": '{"winner": "B"}', "usage": USAGE, "error": None},
        {"seed": 0, "A": "k2", "B": "k3", "parsed": None, "response": "?", "usage": USAGE, "error": "no verdict"}],
}


def _key(line) -> tuple:
    return (line.seed, line.A, line.B) if isinstance(line, PairJudgement) else (line.trial_key, line.set, line.sample)


@pytest.mark.parametrize("line_type", list(JUDGED), ids=lambda t: t.__name__)
def test_judgement_lines_round_trip_through_the_store(tmp_path: Path, line_type) -> None:
    path = tmp_path / "judge" / "lines.jsonl"
    store = JudgementStore(path, "judge-1", line_type, _key)
    written = [store.add(**fields) for fields in JUDGED[line_type]]
    # the file holds exactly what the writer gave, in its order, the judge's key first
    assert [json.loads(x) for x in path.read_text().splitlines()] == \
        [{"judge_key": "judge-1", **fields} for fields in JUDGED[line_type]]
    assert [list(json.loads(x)) for x in path.read_text().splitlines()] == \
        [["judge_key", *fields] for fields in JUDGED[line_type]]
    back = list(read_judgements(path, line_type))
    assert back == written and all(type(line) is line_type for line in back)
    # a rerun by the same judge keeps the judgement that parsed and asks again for the failed one
    again = JudgementStore(path, "judge-1", line_type, _key)
    assert list(again.done) == [_key(written[0])] and again.done[_key(written[0])] == written[0]
    assert JudgementStore(path, "judge-2", line_type, _key).done == {}


def test_a_judgement_the_model_refuses_is_not_written(tmp_path: Path) -> None:
    store = JudgementStore(tmp_path / "rubrics.jsonl", "j", RubricLine, _key)
    with pytest.raises(ValueError, match="sample"):
        store.add(**{**JUDGED[RubricLine][0], "sample": "first"})
    with pytest.raises(ValueError, match="RubricLine has no field raw_replies"):
        store.add(**{**JUDGED[RubricLine][0], "raw_replies": None})
    assert not (tmp_path / "rubrics.jsonl").exists()


def test_a_malformed_judgement_line_is_skipped_naming_its_line_and_field(tmp_path: Path) -> None:
    good, failed = (json.dumps({"judge_key": "j", **f}) for f in JUDGED[RubricLine])
    bad = json.dumps({"judge_key": "j", **JUDGED[RubricLine][0], "flags": {"looping": "often"}})
    newer = json.dumps({"judge_key": "j", **JUDGED[RubricLine][0], "sample": 2, "judge_version": 9})
    path = tmp_path / "rubrics.jsonl"
    path.write_text("\n".join([good, bad, "not json", failed, newer]) + "\n")
    problems = ReadProblems(path)
    lines = list(read_judgements(path, RubricLine, problems))
    assert [line.sample for line in lines] == [0, 1, 2]
    assert lines[2].model_extra == {"judge_version": 9}  # a key of another version is read, and kept
    assert problems.corrupt[0][0] == 2 and problems.corrupt[0][1].startswith("flags.looping: Input should be a valid "
                                                                              "integer")
    assert problems.corrupt[1][0] == 3 and "not JSON" in problems.corrupt[1][1]


def test_the_verdicts_are_the_lines_last_fields() -> None:
    """A judgement line is the trial's fields, then the parsed verdict's: the verdicts' types and the
    line models list the same fields, in the same order."""
    shared = list(TrialJudgement.model_fields)
    assert list(RubricLine.model_fields) == shared + list(RubricVerdict.__annotations__)
    assert list(RewardHackingLine.model_fields) == shared + list(RewardHackingVerdict.__annotations__)


def _judge_entry(**over) -> JudgeInvocation:
    return JudgeInvocation(**{"judge_key": "j1", "model": "sim/rubric_judge", "simulated": True,
                              "config": {"model": "judge", "samples": 2}, "trials": 4, "rubric_judgements": 16,
                              "reward_hacking_judgements": 2, "errors": 0, "skipped_existing": 0, **over})


def test_the_judge_manifest_round_trips_and_keeps_what_it_does_not_know(tmp_path: Path) -> None:
    path = tmp_path / "judge" / "manifest.json"
    # as an earlier version wrote it: a history entry with its start time, a key this one does not know
    path.parent.mkdir()
    path.write_text(json.dumps({"history": [{**_judge_entry().model_dump(exclude={"finished_at"}), "started_at": "t0",
                                             "finished_at": "t1"}], "judge_key": "j0", "model": "old",
                                "simulated": False, "simulated_note": None, "from_a_newer_version": [1]}, indent=2))
    written = record_history(path, JudgeManifest, _judge_entry(skipped_existing=16), judge_key="j1",
                             model="openai/gpt-4.1", simulated=False, simulated_note=None)
    back = read_posthoc_manifest(path, JudgeManifest)
    assert back == written
    assert (back.judge_key, back.model, back.simulated) == ("j1", "openai/gpt-4.1", False)
    assert [h.skipped_existing for h in back.history] == [0, 16] and back.history[1].finished_at
    data = json.loads(path.read_text())
    assert list(data) == ["history", "judge_key", "model", "simulated", "simulated_note", "from_a_newer_version"]
    assert data["simulated_note"] is None and data["from_a_newer_version"] == [1]
    assert data["history"][0]["started_at"] == "t0" and data["history"][0]["finished_at"] == "t1"
    assert list(data["history"][1]) == list(JudgeInvocation.model_fields)
    assert path.read_text() == json.dumps(data, indent=2)  # indented, as it always was


def test_the_bsr_manifest_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    bucket = BsrBucket(group="base::t1", bucket="fail", n=6, comparisons=15, schedule="swiss x5", score_spread=1.25,
                       aux_min=-0.15, aux_max=0.15)
    fields = dict(method="bsr", runs=["results/demo"], judge_model="sim/bsr_judge", simulated_judge=True,
                  params={"a0": 0.15, "buckets": ("fail",)}, seed=0, effective_a0=0.15, effective_a1=0.0,
                  amplitude_scale=1.0, trajectories=16, comparisons=15, judge_errors=0, ordering_guarantee=True,
                  buckets=[bucket], simulated_note="sim/bsr_judge is a stand-in")
    first = record_history(path, BsrManifest, BsrInvocation(judge_model="sim/bsr_judge", seed=0, comparisons=15,
                                                            judge_errors=0), **fields)
    # as JSON: the parameters' tuple (BsrParams.buckets) reads back as a list
    assert read_posthoc_manifest(path, BsrManifest).model_dump(mode="json") == first.model_dump(mode="json")
    data = json.loads(path.read_text())
    assert list(data) == ["history", *fields]
    assert data["params"]["buckets"] == ["fail"] and data["buckets"] == [bucket.model_dump()]
    # a later invocation sets what it gives; what it does not give stays as the one before wrote it
    control = {**fields, "judge_model": None, "simulated_judge": False, "comparisons": 0}
    del control["simulated_note"]
    second = record_history(path, BsrManifest, BsrInvocation(judge_model=None, seed=0, comparisons=0, judge_errors=0),
                            **control)
    back = read_posthoc_manifest(path, BsrManifest)
    assert back.model_dump(mode="json") == second.model_dump(mode="json") and back.judge_model is None and back.simulated_note == "sim/bsr_judge is a stand-in"
    assert [h.judge_model for h in back.history] == ["sim/bsr_judge", None]


class _Box:
    """What collect_artifacts asks of an environment: a folder's or file's copy, and sidecars."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def get_dir(self, path: str, local: Path) -> bool:
        if path in self.files:
            local.mkdir(parents=True, exist_ok=True)
            (local / PurePosixPath(path).name).write_text(self.files[path])
            return True
        inside = {PurePosixPath(p).relative_to(path): text for p, text in self.files.items() if p.startswith(path + "/")}
        if not inside and path != "/logs/artifacts":  # the convention folder is always there (empty here)
            return False
        top = local / PurePosixPath(path).name
        top.mkdir(parents=True)
        for rel, text in inside.items():
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_text(text)
        return True

    def service(self, name: str):
        raise SandboxError(f"no service {name}")


def test_the_artifacts_manifest_round_trips(tmp_path: Path) -> None:
    from tbscale.runner.artifacts import collect_artifacts
    from tbscale.tasks.schema import Artifact

    box = _Box({"/app/out.json": "{}", "/app/dir/a.txt": "a", "/app/other.txt": "b"})
    dest = tmp_path / "run" / "artifacts" / "k1" / "attempt-0"
    asked = [Artifact(source="/app/out.json"), Artifact(source="/app/dir"), Artifact(source="/app/none"),
             Artifact(source="/app/other.txt", destination="app/out.json"),
             Artifact(source="/srv/stats.json", service="counter")]
    entries = collect_artifacts(box, asked, dest, workdir=lambda: "/app", run_root=tmp_path / "run")
    assert read_artifact_manifest(dest) == entries == read_artifact_manifest(dest / "manifest.json")
    assert json.loads((dest / "manifest.json").read_text()) == [
        {"source": "/logs/artifacts", "destination": "logs/artifacts", "service": "main", "status": "empty",
         "type": "directory"},
        {"source": "/app/out.json", "destination": "app/out.json", "service": "main", "status": "ok", "type": "file",
         "container_path": "/app/out.json"},
        {"source": "/app/dir", "destination": "app/dir", "service": "main", "status": "ok", "type": "directory",
         "container_path": "/app/dir"},
        {"source": "/app/none", "destination": "app/none", "service": "main", "status": "missing"},
        {"source": "/app/other.txt", "destination": "app/out.json", "service": "main", "status": "skipped",
         "error": "destination already claimed"},
        {"source": "/srv/stats.json", "destination": "srv/stats.json", "service": "counter", "status": "failed",
         "error": "no service counter"}]
    assert (dest / "app" / "dir" / "a.txt").read_text() == "a" and (dest / "app" / "out.json").read_text() == "{}"
    assert read_artifact_manifest(tmp_path / "nothing") is None
    with pytest.raises(ValueError, match="status"):
        CollectedArtifact(source="/a", destination="a", service="main", status="found")


@pytest.mark.parametrize("where, text, read, message", [
    ("judge/manifest.json", '{"history": [], "judge_key": 5}', lambda p: read_posthoc_manifest(p, JudgeManifest),
     "not a judge manifest (judge_key: Input should be a valid string)"),
    ("judge/manifest.json", '{"history": [{"judge_key": "j"}]}', lambda p: read_posthoc_manifest(p, JudgeManifest),
     "not a judge manifest (history.0.model: Field required)"),
    ("rewards/manifest.json", '{"history": [], "buckets": [{"group": "g", "bucket": "fail"}]}',
     lambda p: read_posthoc_manifest(p, BsrManifest), "not a BSR manifest (buckets.0.n: Field required)"),
    ("rewards/manifest.json", '{"history": [', lambda p: read_posthoc_manifest(p, BsrManifest),
     "not a BSR manifest (Invalid JSON: EOF while parsing a list"),
    ("artifacts/k/attempt-0/manifest.json", '[{"source": "/a", "destination": "a", "service": "main", '
     '"status": "found"}]', read_artifact_manifest, "not an artifacts manifest (0.status: Input should be 'ok', "),
    ("artifacts/k/attempt-0/manifest.json", '{"source": "/a"}', read_artifact_manifest,
     "not an artifacts manifest (Input should be a valid array)"),
])
def test_a_malformed_file_is_one_line_naming_it_and_its_field(tmp_path: Path, where, text, read, message) -> None:
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(TbscaleError) as e:
        read(path)
    assert str(e.value).startswith(f"{path}: {message}") and "\n" not in str(e.value)


def _run_with_two_judges(tmp_path: Path) -> Path:
    run = make_run(tmp_path, [{"setting": "base", "task": "t", "trial": 0, "passed": True,
                               "turns": [turn([cand("ls")]), turn([cand(SUBMIT)])]}])
    trial_key = json.loads((run / "trials.jsonl").read_text())["trial_key"]
    for judge_key, flag in (("old-judge", 1), ("new-judge", 0)):
        store = JudgementStore(run / "judge" / "rubrics.jsonl", judge_key, RubricLine, _key)
        store.add(**{**JUDGED[RubricLine][0], "trial_key": trial_key, "run": run.name, "setting": "base",
                     "flags": {"looping": flag}})
    record_history(run / "judge" / "manifest.json", JudgeManifest, _judge_entry(judge_key="new-judge"),
                   judge_key="new-judge", model="sim/rubric_judge", simulated=True, simulated_note="simulated")
    return run


def test_the_report_reads_the_latest_judges_lines(tmp_path: Path) -> None:
    from tbscale.analysis.judge_report import load_judgements

    run = _run_with_two_judges(tmp_path)
    j = load_judgements([run])
    assert [(line.judge_key, line.flags) for line in j.rubric_lines] == [("new-judge", {"looping": 0})]
    assert j.rh_lines == [] and j.simulated and j.models == ["sim/rubric_judge"]


def test_a_report_over_a_broken_judge_manifest_is_one_line(tmp_path: Path) -> None:
    from tbscale.cli import app

    run = _run_with_two_judges(tmp_path)
    manifest = run / "judge" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"simulated": true', '"simulated": "perhaps"'))
    res = CliRunner().invoke(app, ["report", str(run), "--no-plots"])
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert res.exit_code == 2 and len(errors) == 1, res.output
    assert f"{manifest}: not a judge manifest (history.0.simulated: Input should be a valid boolean" in errors[0]
