"""Run identity: a setting's key covers exactly what determines its trials; resuming never mixes
configurations; a torn last line is repaired; reports read only the current configuration."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from tbscale.errors import TbscaleError
from tbscale.logs import TrialIndex, read_trials
from tbscale.runner import Runner, load_experiment
from tbscale.runner.identity import setting_key
from tbscale.runner.rundir import RunFolder
from tbscale.tasks import load_tasks
from tbscale_testing.tasks import write_harbor_task


def config(tmp_path: Path, **changes) -> Path:
    doc = {"name": "ident", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 2, "seed": 0,
           "output_dir": str(tmp_path / "results"),
           "models": {"gen": {"model": "sim/policy", "temperature": 1.0}},
           "settings": [{"name": "base", "generator": "gen"}, {"name": "nop", "agent": "nop"}]}
    for key, value in changes.items():
        doc[key] = value
    path = tmp_path / f"exp-{len(list(tmp_path.glob('exp-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    write_harbor_task(tmp_path / "tasks", "write-done")
    return tmp_path / "tasks"


def keys(path: Path) -> dict[str, str]:
    exp = load_experiment(path)
    return {s.name: setting_key(exp, s) for s in exp.settings}


def test_seed_change_is_refused_and_named(tmp_path: Path, tasks_dir: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.write_manifest(folder.open_for(load_experiment(config(tmp_path)), {}))
    with pytest.raises(TbscaleError) as err:
        folder.open_for(load_experiment(config(tmp_path, seed=1)), {})
    assert "setting 'base' changed" in str(err.value) and "seed" in str(err.value)


def test_a_changed_model_parameter_is_named(tmp_path: Path, tasks_dir: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.write_manifest(folder.open_for(load_experiment(config(tmp_path)), {}))
    changed = config(tmp_path, models={"gen": {"model": "sim/policy", "temperature": 0.5}})
    with pytest.raises(TbscaleError, match=r"models\.generator\.temperature"):
        folder.open_for(load_experiment(changed), {})


def test_keys_cover_only_referenced_models(tmp_path: Path, tasks_dir: Path) -> None:
    before = keys(config(tmp_path))
    more_models = {"gen": {"model": "sim/policy", "temperature": 1.0}, "other": {"model": "sim/selector"}}
    assert keys(config(tmp_path, models=more_models)) == before  # an unused model changes nothing
    with_setting = config(tmp_path, models=more_models, settings=[
        {"name": "base", "generator": "gen"}, {"name": "nop", "agent": "nop"},
        {"name": "bon", "generator": "gen", "policy": {"name": "turn_bon", "n": 2, "selector": "other"}}])
    after = keys(with_setting)
    assert {k: after[k] for k in before} == before and "bon" in after


def test_editing_a_prompt_file_changes_the_key(tmp_path: Path, tasks_dir: Path) -> None:
    prompt = tmp_path / "system.j2"
    prompt.write_text("You are an agent in {{ workdir }}.")
    path = config(tmp_path, prompts={"system": str(prompt)})
    first = keys(path)
    prompt.write_text("You are a careful agent in {{ workdir }}.")  # same path, new contents
    second = keys(path)
    assert first["base"] != second["base"]


@pytest.mark.docker
def test_adding_a_setting_resumes_and_torn_line_is_repaired(tmp_path: Path, tasks_dir: Path,
                                                             docker_available) -> None:
    exp = load_experiment(config(tmp_path))
    tasks, _ = load_tasks(tasks_dir)
    run_dir = tmp_path / "results" / "ident"
    first = asyncio.run(Runner(exp, tasks, run_dir).run())
    assert first.done == 4 and first.skipped == 0
    # A crash tears the last line: cut it in the middle.
    index = run_dir / "trials.jsonl"
    data = index.read_bytes()
    index.write_bytes(data[:-40])
    grown = load_experiment(config(tmp_path, models={"gen": {"model": "sim/policy", "temperature": 1.0},
                                                     "sel": {"model": "sim/selector"}},
                                   settings=[{"name": "base", "generator": "gen"}, {"name": "nop", "agent": "nop"},
                                             {"name": "bon", "generator": "gen",
                                              "policy": {"name": "turn_bon", "n": 2, "selector": "sel"}}]))
    again = asyncio.run(Runner(grown, tasks, run_dir).run())
    # The torn trial runs again, the new setting's two trials run, the other three are resumed.
    assert again.skipped == 3 and again.done == 3
    lines = index.read_text().splitlines()
    assert all(json.loads(line) for line in lines) and len(lines) == 6
    assert (run_dir / "trials.jsonl.torn").is_file()
    assert len({r.trial_key for r in read_trials(index)}) == 6


def test_report_sets_aside_trials_of_an_earlier_configuration(tmp_path: Path) -> None:
    from tbscale.rundata import read_trial_table

    run = tmp_path / "run"
    run.mkdir()
    base = {"schema_version": 2, "run": "run", "task_format": "harbor", "ending": "pass", "passed": True,
            "task_hash": "h1"}
    rows = [dict(base, setting="a", setting_key="k-new", trial_key="1", task_id="t", trial=0),
            dict(base, setting="a", setting_key="k-old", trial_key="2", task_id="t", trial=1),  # old config
            dict(base, setting="a", setting_key="k-new", trial_key="3", task_id="t", trial=5),  # beyond trials
            dict(base, setting="a", setting_key="k-new", trial_key="4", task_id="u", trial=0, task_hash="old")]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "manifest.json").write_text(json.dumps({"current": {"setting_keys": {"a": "k-new"}, "trials": 2,
                                                               "task_hashes": {"t": "h1", "u": "h2"}}}))
    table = read_trial_table([run])
    assert list(table.df["trial_key"]) == ["1"] and table.set_aside == {str(run): 3}


def test_corrupt_lines_are_reported_with_line_numbers(tmp_path: Path, caplog) -> None:
    from tbscale.logs import ReadProblems, read_jsonl

    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"b": 2}\n{"c": 3')
    problems = ReadProblems(path)
    assert list(read_jsonl(path, problems)) == [{"a": 1}, {"b": 2}]
    assert problems.corrupt[0][0] == 2 and problems.torn_last_line
    problems.warn()
    assert "line 2" in caplog.text


def test_torn_tail_repair_keeps_the_fragment(tmp_path: Path) -> None:
    from tbscale.types.results import TrialResult

    index = TrialIndex(tmp_path / "trials.jsonl")
    (tmp_path / "trials.jsonl").write_text('{"trial_key": "a"}\n{"trial_key": "b", "pas')
    row = TrialResult(schema_version=2, run="r", setting="s", setting_key="k", trial_key="c", task_id="t", trial=0,
                      ending="pass", passed=True, reward=1.0)
    index.append(row)
    assert (tmp_path / "trials.jsonl").read_text().splitlines() == ['{"trial_key": "a"}', row.model_dump_json()]
    assert '"trial_key": "b"' in (tmp_path / "trials.jsonl.torn").read_text()


def test_import_cache_is_keyed_by_full_path_and_content(tmp_path: Path) -> None:
    from tbscale.ingest.runs import source_signature

    a, b = tmp_path / "A" / "out", tmp_path / "B" / "out"
    for d in (a, b):
        d.mkdir(parents=True)
        (d / "x.traj.json").write_text("{}")
    assert source_signature(a) != source_signature(b)  # same basename, other folder
    before = source_signature(a)
    (a / "x.traj.json").write_text('{"changed": true}')
    assert source_signature(a) != before
