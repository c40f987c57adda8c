"""Tests for tbscale.analysis.importers: runs made by mini-swe-agent and Harbor, read and reported."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from tbscale.ingest import mini_swe_agent as IM, runs as I
from tbscale.analysis import tables
from tbscale.analysis.behaviour_report import iter_labelled
from tbscale.types import Usage
from tbscale.analysis.report import build_report
from tbscale.errors import TbscaleError


def _quiet() -> Console:
    return Console(file=open(os.devnull, "w"))


# --- mini-swe-agent, the real thing ------------------------------------------------------------

MINI_SCRIPT = textwrap.dedent('''
    import sys
    from pathlib import Path
    import yaml, minisweagent
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.test_models import DeterministicModel, make_output

    out, work, task_id, *cmds = sys.argv[1:]
    cfg = yaml.safe_load((Path(minisweagent.__file__).parent / "config" / "mini_textbased.yaml").read_text())
    outputs = [make_output(f"THOUGHT: step {i}\\n\\n```mswea_bash_command\\n{c}\\n```", [{"command": c}], cost=0.01)
               for i, c in enumerate(cmds)]
    agent = DefaultAgent(DeterministicModel(outputs=outputs, cost_per_call=0.01), LocalEnvironment(cwd=work),
                         output_path=Path(out) / task_id / f"{task_id}.traj.json",
                         system_template=cfg["agent"]["system_template"],
                         instance_template=cfg["agent"]["instance_template"], cost_limit=0, step_limit=len(cmds) + 1)
    print(agent.run(f"Task {task_id}: write hello to hello.txt"))
''')


@pytest.fixture(scope="module")
def minisweagent_python() -> str:
    """A Python with mini-swe-agent: this one, installing the package from PyPI if it is missing."""
    if importlib.util.find_spec("minisweagent") is None:
        res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "mini-swe-agent"], capture_output=True,
                             text=True, timeout=300)
        if res.returncode != 0 or subprocess.run([sys.executable, "-c", "import minisweagent"],
                                                 capture_output=True).returncode != 0:
            pytest.skip(f"mini-swe-agent is not installed and `pip install mini-swe-agent` failed: {res.stderr[-300:]}")
    return sys.executable


def _run_mini(python: str, tmp: Path, out: Path, task_id: str, cmds: list[str]) -> Path:
    work = tmp / f"work-{task_id}-{out.name}"
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MSWEA_GLOBAL_CONFIG_DIR": str(tmp / "mswea-config"), "MSWEA_SILENT_STARTUP": "1"}
    res = subprocess.run([python, "-c", MINI_SCRIPT, str(out), str(work), task_id, *cmds], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    return out / task_id / f"{task_id}.traj.json"


SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def test_a_trajectory_written_by_mini_swe_agent_is_read_and_reported(minisweagent_python: str, tmp_path: Path) -> None:
    run1, run2 = tmp_path / "mini-run1", tmp_path / "mini-run2"
    good = ["ls -la", "printf 'hello\\n' > hello.txt", "cat nope.txt", "cat nope.txt",
            "python3 -c \"print(open('hello.txt').read())\"", SUBMIT]
    traj = _run_mini(minisweagent_python, tmp_path, run1, "write-hello", good)
    _run_mini(minisweagent_python, tmp_path, run2, "write-hello", ["ls", SUBMIT])
    _run_mini(minisweagent_python, tmp_path, run1, "other-task", ["ls", SUBMIT])
    data = json.loads(traj.read_text())
    assert data["trajectory_format"].startswith("mini-swe-agent") and data["info"]["exit_status"] == "Submitted"

    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text(json.dumps({"resolved_ids": ["write-hello"], "unresolved_ids": ["other-task"]}))
    res = I.import_runs([run1, run2], tmp_path / "results" / "mini", resolved=verdicts)
    assert res.format == "mini-swe-agent" and res.trials == 3 and res.tasks == 2

    df = tables.load_trials([res.run_dir]).set_index(["task_id", "trial"])
    first = df.loc[("write-hello", 0)]
    assert first["passed"] and first["ending"] == "pass" and first["turns"] == 6
    assert first["setting"] == "mini-swe-agent_deterministic" and first["generator_model"] == "deterministic"
    assert first["cost_usd"] == pytest.approx(0.06) and first["agent"] == "mini-swe-agent"
    assert df.loc[("write-hello", 1), "turns"] == 2  # the second PATH is trial 1
    assert df.loc[("other-task", 0), "ending"] == "wrong_submission"

    labelled = [(r.task_id, r.trial, lt) for r, lt in iter_labelled(tables.load_trials([res.run_dir]))]
    turns = [lt for task, trial, lt in labelled if task == "write-hello" and trial == 0]
    picked = [lt.labels[0] for lt in turns]
    assert picked[0] == {"only_reads"} and picked[1] == {"edits_file"}
    assert "loops_on_command" in picked[3] and "tests_last_edit" in picked[4] and picked[5] == set()
    assert turns[2].trace.observation.exit_code == 1 and "No such file" in turns[2].trace.observation.output

    ctx = build_report([res.run_dir], _quiet(), plots=False)
    keys = {s.key for s in ctx.sections}
    assert {"summary", "pass_at_k", "costs", "endings", "behaviour_shares", "turn_size"} <= keys
    pk = next(s.frame for s in ctx.sections if s.key == "pass_at_k").set_index("k")
    assert pk.loc[1, "pass_at_k"] == pytest.approx(0.5)  # write-hello 2/2, other-task 0/1


def test_an_imported_run_that_reads_a_repository_past_head_is_reported(minisweagent_python: str, tmp_path: Path) -> None:
    """mini-swe-agent's own trajectory, with the search public SWE-bench Pro runs made for the fix in
    the repository's history (mini-swe-agent issue #787): the import lists the commands, the
    report says so above its tables, and it cannot say what the repository held."""
    run = tmp_path / "mini-history"
    cmds = ["git log --oneline -3", "git log --all --oneline --grep=median", "git show HEAD", SUBMIT]
    _run_mini(minisweagent_python, tmp_path, run, "statskit__statskit-7", cmds)
    _run_mini(minisweagent_python, tmp_path, run, "statskit__statskit-8", ["git log --oneline -3", SUBMIT])
    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text(json.dumps(["statskit__statskit-7", "statskit__statskit-8"]))
    res = I.import_runs([run], tmp_path / "results" / "mini", resolved=verdicts)
    rows = {r["task_id"]: r for r in map(json.loads, (res.run_dir / "trials.jsonl").read_text().splitlines())}
    assert rows["statskit__statskit-7"]["history_reads"] == ["git log --all --oneline --grep=median"]
    assert rows["statskit__statskit-8"]["history_reads"] == [] and rows["statskit__statskit-8"]["repositories"] == []
    ctx = build_report([res.run_dir], _quiet(), plots=False)
    section = next(s.frame for s in ctx.sections if s.key == "repository_history").iloc[0]
    assert (section["read"], section["read_pass"], section["exposed"]) == (1, 1, 0)
    assert any(b.startswith("HISTORY READS: in mini-swe-agent_deterministic, 1 trials") for b in ctx.banners)


def test_mini_swe_agent_needs_verdicts(minisweagent_python: str, tmp_path: Path) -> None:
    out = tmp_path / "mini"
    _run_mini(minisweagent_python, tmp_path, out, "t1", ["ls", SUBMIT])
    with pytest.raises(TbscaleError, match="no verdict for 1 submitted tasks"):
        I.import_runs([out], tmp_path / "r1")
    res = I.import_runs([out], tmp_path / "r2", missing_as_failed=True)
    row = tables.load_trials([res.run_dir]).iloc[0]
    assert row["ending"] == "unverified" and not row["passed"]
    with pytest.raises(TbscaleError, match="already exists"):
        I.import_runs([out], tmp_path / "r2", missing_as_failed=True)


def test_mini_swe_agent_v2_toolcall_and_format_error_messages() -> None:
    """v2 keeps an unparsable response only inside the FormatError message; tool calls carry the
    commands in extra.actions; a step-limit exit is a time_limit ending (Table 5)."""
    data = {"trajectory_format": "mini-swe-agent-1.1", "info": {"exit_status": "LimitsExceeded"}, "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Fix the bug in calc.py"},
        {"role": "assistant", "content": None, "reasoning_content": "think hard",
         "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'}}],
         "extra": {"actions": [{"command": "pytest -q", "tool_call_id": "c1"}], "cost": 0.5,
                   "response": {"usage": {"prompt_tokens": 100, "completion_tokens": 40,
                                          "completion_tokens_details": {"reasoning_tokens": 30}}}}},
        {"role": "tool", "tool_call_id": "c1", "content": "<returncode>1</returncode>",
         "extra": {"raw_output": "1 failed", "returncode": 1}},
        {"role": "user", "content": "Format error: no tool call", "extra": {"interrupt_type": "FormatError",
                                                                           "model_response": "I will now think."}},
        {"role": "exit", "content": "LimitsExceeded", "extra": {"exit_status": "LimitsExceeded"}},
    ]}
    turns, status, instruction = IM.parse_mini_trajectory(data)
    assert status == "LimitsExceeded" and instruction == "Fix the bug in calc.py"
    assert [t.runnable for t in turns] == [True, False]
    assert turns[0].command == "pytest -q" and turns[0].exit_code == 1 and turns[0].output == "1 failed"
    assert turns[0].usage == Usage(input=100, output=40, reasoning=30, cached=0, cost_usd=0.5)
    assert turns[0].reasoning == "think hard" and turns[0].tool_calls[0]["name"] == "bash"
    assert turns[1].text == "I will now think." and turns[1].command is None
    assert IM.mini_ending(status, None) == "time_limit"
    assert IM.mini_ending("ContextWindowExceededError", None) == "out_of_context"
    assert IM.mini_ending("RepeatedFormatError", None) == "agent_error"


# --- Harbor -----------------------------------------------------------------------------------


def _harbor_trial(job: Path, name: str, task: str, *, reward: float | None, exc: str | None, started: str,
                  steps: list[dict] | None, agent="terminus-2", model=("gpt-5", "openai")) -> None:
    d = job / name
    (d / "agent").mkdir(parents=True)
    (d / "verifier").mkdir()
    result = {
        "id": "00000000-0000-0000-0000-000000000000", "task_name": task, "trial_name": name,
        "trial_uri": f"file://{d}", "task_id": {"path": f"tasks/{task}"}, "source": "terminal-bench",
        "task_checksum": "abc", "config": {"agent": {"name": agent}},
        "agent_info": {"name": agent, "version": "1.0", "model_info": {"name": model[0], "provider": model[1]}},
        "agent_result": {"n_input_tokens": 1200, "n_cache_tokens": 200, "n_output_tokens": 300, "cost_usd": 0.02},
        "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
        "exception_info": {"exception_type": exc, "exception_message": "ran past budget", "exception_traceback": "",
                           "occurred_at": started} if exc else None,
        "started_at": started, "finished_at": started,
    }
    (d / "result.json").write_text(json.dumps(result))
    (d / "verifier" / "test-stdout.txt").write_text("test output\n")
    if steps is not None:
        (d / "agent" / "trajectory.json").write_text(json.dumps({
            "schema_version": "ATIF-v1.6", "session_id": "s", "agent": {"name": agent, "version": "1.0"},
            "steps": steps}))


def _atif_steps(*commands: str, done: bool = True) -> list[dict]:
    steps = [{"step_id": 1, "source": "system", "message": "You are an agent."},
             {"step_id": 2, "source": "user", "message": "Create /app/out.txt containing 42."}]
    for c in commands:
        steps.append({"step_id": len(steps) + 1, "source": "agent", "message": f"Running {c}",
                      "reasoning_content": "thinking...",
                      "tool_calls": [{"tool_call_id": f"t{len(steps)}", "function_name": "bash_command",
                                      "arguments": {"keystrokes": c + "\n", "duration": 1.0}}],
                      "observation": {"results": [{"content": f"$ {c}\n"}]},
                      "metrics": {"prompt_tokens": 400, "completion_tokens": 100, "cached_tokens": 50,
                                  "cost_usd": 0.005}})
    if done:
        steps.append({"step_id": len(steps) + 1, "source": "agent", "message": "Done.",
                      "tool_calls": [{"tool_call_id": "end", "function_name": "mark_task_complete", "arguments": {}}]})
    return steps


def test_harbor_job_folder(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "2026-01-01__10-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    (job / "result.json").write_text(json.dumps({"id": "x", "started_at": "2026-01-01T10:00:00"}))
    _harbor_trial(job, "make-42__b", "make-42", reward=1.0, exc=None, started="2026-01-01T10:05:00",
                  steps=_atif_steps("ls /app", "echo 42 > /app/out.txt", "cat /app/out.txt"))
    _harbor_trial(job, "make-42__a", "make-42", reward=1.0, exc="AgentTimeoutError", started="2026-01-01T10:01:00",
                  steps=_atif_steps("ls /app", "ls /app", "ls /app", done=False))
    _harbor_trial(job, "other__a", "other", reward=0.0, exc=None, started="2026-01-01T10:02:00",
                  steps=_atif_steps("true"))
    _harbor_trial(job, "ctx__a", "ctx", reward=None, exc="ContextLengthExceededError", started="2026-01-01T10:03:00",
                  steps=None)
    assert I.detect_format(tmp_path / "jobs") == "harbor"
    res = I.import_runs([tmp_path / "jobs"], tmp_path / "results" / "harbor")
    assert res.format == "harbor" and res.trials == 4 and any("no agent trajectory" in w for w in res.warnings)
    df = tables.load_trials([res.run_dir]).set_index(["task_id", "trial"])
    timed_out, passed = df.loc[("make-42", 0)], df.loc[("make-42", 1)]  # numbered by start time
    assert timed_out["ending"] == "time_limit" and not timed_out["passed"]  # an exception never passes (Table 5)
    assert passed["ending"] == "pass" and passed["passed"] and passed["turns"] == 4
    assert df.loc[("other", 0), "ending"] == "wrong_submission"
    assert df.loc[("ctx", 0), "ending"] == "out_of_context" and df.loc[("ctx", 0), "turns"] == 0
    assert passed["setting"] == "terminus-2_gpt-5" and passed["generator_model"] == "openai/gpt-5"
    assert passed["generator_input"] == 1200 and passed["generator_output"] == 300 and passed["cost_usd"] == 0.02

    lts = [lt for r, lt in iter_labelled(tables.load_trials([res.run_dir])) if r.trial_key == passed["trial_key"]]
    assert [lt.labels[0] for lt in lts] == [{"only_reads"}, {"edits_file"}, {"only_reads"}, set()]
    assert lts[0].trace.candidates[0].reasoning == "thinking..."
    loops = [lt for r, lt in iter_labelled(tables.load_trials([res.run_dir])) if r.trial_key == timed_out["trial_key"]]
    assert "loops_on_command" in loops[1].labels[0]

    ctx = build_report([res.run_dir], _quiet(), plots=False)
    endings = next(s.frame for s in ctx.sections if s.key == "endings").set_index("setting").iloc[0]
    assert endings["pass"] == 0.25 and endings["time_limit"] == 0.25 and endings["out_of_context"] == 0.25

    # the judge reads the instruction stored by the importer
    from tbscale.rundata import read_trial
    from tbscale.posthoc.judge import task_context

    path = res.run_dir / passed["trajectory_path"]
    assert "42" in task_context(res.run_dir, "make-42", read_trial(path).start).instruction


def test_harbor_setting_override_and_single_trial_folder(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    _harbor_trial(job, "t__1", "org/task", reward=0.5, exc=None, started="2026-01-01T10:00:00",
                  steps=_atif_steps("ls"), agent="claude-code", model=("claude-x", "anthropic"))
    res = I.import_runs([job / "t__1"], tmp_path / "out", setting="cc")
    row = tables.load_trials([res.run_dir]).iloc[0]
    assert row["setting"] == "cc" and row["task_id"] == "org__task" and row["ending"] == "wrong_submission"
    assert row["reward"] == 0.5
    with pytest.raises(TbscaleError, match="--setting"):
        I.import_runs([job], tmp_path / "out2", setting="bad name")


def test_cli_import(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tbscale.cli import app

    job = tmp_path / "job"
    job.mkdir()
    _harbor_trial(job, "t__1", "t", reward=1.0, exc=None, started="2026-01-01T10:00:00", steps=_atif_steps("ls"))
    res = CliRunner().invoke(app, ["import", str(job), "--name", "h", "--output-dir", str(tmp_path / "results")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "results" / "h" / "trials.jsonl").is_file()
    rep = CliRunner().invoke(app, ["report", str(tmp_path / "results" / "h"), "--no-plots"])
    assert rep.exit_code == 0, rep.output
    assert "100.0%" in rep.output
    bad = CliRunner().invoke(app, ["import", str(tmp_path / "nothing"), "--name", "x"])
    assert bad.exit_code == 2


def test_auto_import_for_report_paths(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    _harbor_trial(job, "t__1", "t", reward=1.0, exc=None, started="2026-01-01T10:00:00", steps=_atif_steps("ls"))
    cache = tmp_path / "cache"
    run = I.auto_import(job, cache)
    # Cached under the folder's name and a signature of its full path and content.
    assert run.parent == cache and run.name.startswith("job-") and (run / "trials.jsonl").is_file()
    mtime = (run / "trials.jsonl").stat().st_mtime
    assert I.auto_import(job, cache) == run and (run / "trials.jsonl").stat().st_mtime == mtime  # cached
    assert I.auto_import(tmp_path / "cache" / "job" / "trajectories", cache) is None
