"""Trajectory formats written by other harnesses: mini-swe-agent's bare list of messages, ATIF
with commands in the text, continuation files, multi-step trials, unknown cost; and SWE-bench
predictions exported from an imported run. Fixtures are written here in each format's shape."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from tbscale.analysis import tables
from tbscale.analysis.behaviour_report import iter_labelled
from tbscale.analysis.report import build_report
from tbscale.analysis.swebench_export import export_predictions
from tbscale.errors import TbscaleError
from tbscale.ingest import runs as I
from tbscale.ingest.harbor import parse_atif
from tbscale.ingest.text_actions import command_from_text
from tbscale.types.actions import ACTION_IN_TEXT, FINAL_MESSAGE, NOT_A_SHELL_TOOL

PATCH = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-def f()\n+def f():\n"


def _quiet() -> Console:
    return Console(file=open(os.devnull, "w"))


def _bare_list(submit: bool = True) -> list[dict]:
    """mini-swe-agent's first format (its tests/test_data): a bare list of messages."""
    msgs = [{"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
            {"role": "user", "content": "Please solve this issue: calc.py has a syntax error."},
            {"role": "assistant", "content": "Let me look.\n\n```mswea_bash_command\ncat calc.py\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\ndef f()\n</output>"},
            {"role": "assistant", "content": "Fix it.\n\n```mswea_bash_command\nsed -i 's/f()$/f():/' calc.py\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"}]
    if submit:
        msgs += [{"role": "assistant", "content": "Done.\n\n```mswea_bash_command\n"
                                                  "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```"},
                 {"role": "user", "content": PATCH}]
    return msgs


def test_mini_swe_agent_bare_list_detected_by_content_and_exported(tmp_path: Path) -> None:
    run = tmp_path / "mini-run"
    run.mkdir()
    (run / "repo__calc-1.json").write_text(json.dumps(_bare_list()))  # not named *.traj.json
    (run / "repo__calc-2.json").write_text(json.dumps(_bare_list(submit=False)))
    (run / "preds.json").write_text(json.dumps({"repo__calc-1": {"model_patch": PATCH}}))  # not a trajectory
    assert I.detect_format(run) == "mini-swe-agent" and I.detect_format(run / "repo__calc-1.json") == "mini-swe-agent"
    assert I.detect_format(run / "preds.json") is None
    verdicts = tmp_path / "report.json"
    verdicts.write_text(json.dumps({"resolved_ids": ["repo__calc-1"], "unresolved_ids": ["repo__calc-2"]}))
    res = I.import_runs([run], tmp_path / "results" / "mini", resolved=verdicts)
    df = tables.load_trials([res.run_dir]).set_index("task_id")
    assert res.trials == 2 and df.loc["repo__calc-1", "ending"] == "pass" and df.loc["repo__calc-1", "turns"] == 3
    assert df.loc["repo__calc-2", "ending"] == "agent_error" and df.loc["repo__calc-2", "stop_reason"] == "unknown"
    assert df["cost_usd"].isna().all()  # the bare list records no cost: unknown, not $0
    labelled = [lt for r, lt in iter_labelled(tables.load_trials([res.run_dir])) if r.task_id == "repo__calc-1"]
    assert labelled[0].labels[0] == {"only_reads"} and labelled[1].labels[0] == {"edits_file"}

    files = export_predictions(res.run_dir, tmp_path / "preds")
    preds = {p["instance_id"]: p["model_patch"] for f in files for p in f.predictions}
    assert preds == {"repo__calc-1": PATCH, "repo__calc-2": ""}


def test_mini_swe_agent_1_and_1_1_files(tmp_path: Path) -> None:
    """The dict formats: v1 (fenced command in the text) and 1.1 (package 2.x: extra.actions,
    a tool call, an exit message); the patch is info.submission."""
    v1 = {"trajectory_format": "mini-swe-agent-1", "info": {"exit_status": "Submitted", "submission": PATCH,
                                                         "model_stats": {"instance_cost": 0.25, "api_calls": 2}},
          "messages": _bare_list()[:-1]}
    v11 = {"trajectory_format": "mini-swe-agent-1.1", "instance_id": "t-2",
           "info": {"exit_status": "Submitted", "submission": PATCH},
           "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Fix calc.py"},
                        {"role": "assistant", "content": "", "tool_calls": [
                            {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "cat calc.py"}'}}],
                         "extra": {"actions": [{"command": "cat calc.py"}], "cost": 0.1}},
                        {"role": "tool", "content": "def f()", "extra": {"returncode": 0, "raw_output": "def f()"}},
                        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "t-1.traj.json").write_text(json.dumps(v1))
    (tmp_path / "a" / "other-name.json").write_text(json.dumps(v11))
    res = I.import_runs([tmp_path / "a"], tmp_path / "out", missing_as_failed=True)
    df = tables.load_trials([res.run_dir]).set_index("task_id")
    assert sorted(df.index) == ["t-1", "t-2"] and df.loc["t-1", "cost_usd"] == 0.25
    assert df.loc["t-2", "cost_usd"] == pytest.approx(0.1) and df.loc["t-2", "turns"] == 1
    preds = export_predictions(res.run_dir, tmp_path / "p")[0].predictions
    assert {p["instance_id"]: p["model_patch"] for p in preds} == {"t-1": PATCH, "t-2": PATCH}


def test_text_actions_are_read_where_the_agent_put_them() -> None:
    terminus_json = json.dumps({"analysis": "a", "plan": "p", "task_complete": False,
                                "commands": [{"keystrokes": "ls -la\n", "duration": 0.1},
                                             {"keystrokes": "cat out.txt\n", "duration": 0.1}]})
    assert command_from_text(terminus_json) == ("ls -la\ncat out.txt", False)
    assert command_from_text('{"analysis": "done", "commands": [], "task_complete": true}') == (None, True)
    xml = "<response><commands><keystrokes duration=\"1\">make test\n</keystrokes></commands>" \
          "<task_complete>false</task_complete></response>"
    assert command_from_text(xml) == ("make test", False)
    openhands = "I will list.\n<function=execute_bash>\n<parameter=command>ls /app</parameter>\n</function>"
    assert command_from_text(openhands) == ("ls /app", False)
    edit = "<function=str_replace_editor>\n<parameter=command>view</parameter>\n<parameter=path>/a.py</parameter>\n" \
           "</function>"
    assert command_from_text(edit) == ("cat /a.py", False)
    assert command_from_text("<function=finish>\n</function>") == (None, True)
    assert command_from_text("Running command: pytest -q") == ("pytest -q", False)
    assert command_from_text("Just thinking out loud.") == (None, False)


def _step(i: int, source: str, message, **extra) -> dict:
    return {"step_id": i, "source": source, "message": message, **extra}


def test_atif_text_actions_are_not_counted_as_cannot_run() -> None:
    steps = [_step(1, "user", "Make out.txt"),
             _step(2, "agent", json.dumps({"commands": [{"keystrokes": "echo 42 > out.txt\n"}],
                                           "task_complete": False}),
                   observation={"results": [{"content": "$ echo 42 > out.txt"}]}),
             _step(3, "agent", "I ran something the importer cannot read.",
                   observation={"results": [{"content": "ok"}]}),
             _step(4, "agent", "<function=execute_bash>\n<parameter=command>cat out.txt</parameter>\n</function>",
                   observation={"results": [{"content": "42"}]}),
             _step(5, "agent", json.dumps({"commands": [], "task_complete": True}))]
    turns, instruction = parse_atif({"schema_version": "ATIF-v1.6", "agent": {"name": "x", "version": "1"},
                                     "steps": steps})
    assert instruction == "Make out.txt"
    assert [t.command for t in turns] == ["echo 42 > out.txt", None, "cat out.txt",
                                          "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert turns[1].parse_error == ACTION_IN_TEXT and turns[1].output == "ok" and turns[3].submission


def _harbor_trial(d: Path, *, task: str = "t", reward: float | None = 1.0, cost=None, steps=None,
                  step_results=None) -> None:
    (d / "agent").mkdir(parents=True, exist_ok=True)
    result = {"task_name": task, "trial_name": d.name, "trial_uri": f"file://{d}", "task_checksum": "c",
              "agent_info": {"name": "terminus-2", "version": "2", "model_info": {"name": "m", "provider": "p"}},
              "agent_result": {"n_input_tokens": 100, "n_output_tokens": 10, "cost_usd": cost} if not step_results
              else None,
              "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
              "started_at": "2026-01-01T10:00:00", "finished_at": "2026-01-01T10:01:00"}
    if step_results is not None:
        result["step_results"] = step_results
    (d / "result.json").write_text(json.dumps(result))
    if steps is not None:
        (d / "agent" / "trajectory.json").write_text(json.dumps(
            {"schema_version": "ATIF-v1.6", "agent": {"name": "terminus-2", "version": "2"}, "steps": steps}))


def _keys(i: int, cmd: str, **extra) -> dict:
    return _step(i, "agent", f"step {i}", tool_calls=[{"tool_call_id": f"c{i}", "function_name": "bash_command",
                                                       "arguments": {"keystrokes": cmd + "\n"}}],
                 observation={"results": [{"content": "ok"}]}, **extra)


def test_atif_continuations_multi_step_and_unknown_cost(tmp_path: Path) -> None:
    job = tmp_path / "job"
    # a trajectory continued after summarization: the copied context is not counted twice
    _harbor_trial(job / "cont__1", steps=[_step(1, "user", "Do it"), _keys(2, "ls"), _keys(3, "pwd")])
    first = json.loads((job / "cont__1" / "agent" / "trajectory.json").read_text())
    first["continued_trajectory_ref"] = "trajectory.cont-1.json"
    (job / "cont__1" / "agent" / "trajectory.json").write_text(json.dumps(first))
    (job / "cont__1" / "agent" / "trajectory.cont-1.json").write_text(json.dumps(
        {"schema_version": "ATIF-v1.6", "agent": {"name": "terminus-2", "version": "2"},
         "steps": [_step(1, "user", "Summary of the work so far"), _keys(2, "pwd", is_copied_context=True),
                   _keys(3, "make"), _keys(4, "make test")]}))
    # a multi-step trial: per-step verdicts and per-step trajectories under steps/<name>/agent/
    ms = job / "multi__1"
    _harbor_trial(ms, task="multi", reward=0.5, step_results=[
        {"step_name": "build", "agent_result": {"n_input_tokens": 50, "n_output_tokens": 5, "cost_usd": 0.01},
         "verifier_result": {"rewards": {"reward": 1.0}}},
        {"step_name": "deploy", "agent_result": {"n_input_tokens": 70, "n_output_tokens": 7, "cost_usd": None},
         "verifier_result": {"rewards": {"reward": 0.0}}, "exception_info": {"exception_type": "AgentTimeoutError"}}])
    for name, cmds in (("build", ["make"]), ("deploy", ["./deploy.sh", "./deploy.sh --retry"])):
        d = ms / "steps" / name / "agent"
        d.mkdir(parents=True)
        (d / "trajectory.json").write_text(json.dumps({"schema_version": "ATIF-v1.6", "agent": {
            "name": "terminus-2", "version": "2"}, "steps": [_step(1, "user", f"{name} it")] + [
            _keys(i + 2, c) for i, c in enumerate(cmds)]}))
    res = I.import_runs([job], tmp_path / "out")
    df = tables.load_trials([res.run_dir]).set_index("task_id")
    assert df.loc["t", "turns"] == 4  # ls, pwd, then make and make test; the copied pwd once
    assert df.loc["t", "cost_usd"] != df.loc["t", "cost_usd"]  # null cost_usd: unknown, never $0
    multi = df.loc["multi"]
    assert multi["turns"] == 3 and multi["reward"] == 0.5 and multi["generator_input"] == 120
    assert multi["cost_usd"] != multi["cost_usd"]  # one step's cost unknown
    assert [(s["name"], s["passed"], s["ending"], s["turns"]) for s in multi["steps"]] == [
        ("build", True, "pass", 1), ("deploy", False, "time_limit", 2)]
    ctx = build_report([res.run_dir], _quiet(), plots=False)
    assert "steps" in {s.key for s in ctx.sections}
    with pytest.raises(TbscaleError, match="hold no submitted patch"):
        export_predictions(res.run_dir, tmp_path / "p")


def test_an_rfc_shaped_trajectory_imports(tmp_path: Path) -> None:
    """The shape of the ATIF RFC's example: a user step, an agent step with two calls of a tool that
    is not a shell and their observations, then a final answer; per-step metrics with cost."""
    steps = [_step(1, "user", "What is the weather in Paris?", timestamp="2026-01-01T10:00:00Z"),
             _step(2, "agent", "I will look it up.", reasoning_content="Two lookups at once.",
                   tool_calls=[{"tool_call_id": "a", "function_name": "weather_lookup",
                                "arguments": {"city": "Paris", "field": "temp"}},
                               {"tool_call_id": "b", "function_name": "weather_lookup",
                                "arguments": {"city": "Paris", "field": "sky"}}],
                   observation={"results": [{"source_call_id": "a", "content": "18C"},
                                            {"source_call_id": "b", "content": "cloudy"}]},
                   metrics={"prompt_tokens": 300, "completion_tokens": 40, "cached_tokens": 100, "cost_usd": 0.002}),
             _step(3, "agent", "It is 18C and cloudy in Paris.",
                   metrics={"prompt_tokens": 350, "completion_tokens": 20, "cost_usd": 0.001,
                            "extra": {"reasoning_tokens": 5}})]
    d = tmp_path / "job" / "weather__1"
    _harbor_trial(d, task="weather", cost=0.003, steps=steps)
    res = I.import_runs([tmp_path / "job"], tmp_path / "out")
    row = tables.load_trials([res.run_dir]).iloc[0]
    assert row["turns"] == 2 and row["cost_usd"] == pytest.approx(0.003) and row["passed"]
    turns, instruction = parse_atif(json.loads((d / "agent" / "trajectory.json").read_text()))
    assert instruction == "What is the weather in Paris?"
    assert [t.parse_error for t in turns] == [NOT_A_SHELL_TOOL, FINAL_MESSAGE]
    assert turns[0].output == "18C\ncloudy" and turns[1].usage.reasoning == 5
    labels = [lt.labels[0] for _, lt in iter_labelled(tables.load_trials([res.run_dir]))]
    assert labels == [set(), set()]  # neither counted as a response that cannot run

    alone = tmp_path / "weather.json"  # the trajectory file by itself: no verdict
    doc = json.loads((d / "agent" / "trajectory.json").read_text())
    alone.write_text(json.dumps({**doc, "final_metrics": {"total_prompt_tokens": 650, "total_cost_usd": 0.003}}))
    assert I.detect_format(alone) == "harbor"
    res2 = I.import_runs([alone], tmp_path / "out2")
    row2 = tables.load_trials([res2.run_dir]).iloc[0]
    assert row2["task_id"] == "weather" and row2["ending"] == "unverified" and not row2["passed"]
    assert row2["turns"] == 2 and row2["cost_usd"] == pytest.approx(0.003) and row2["generator_input"] == 650
