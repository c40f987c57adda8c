"""Many scripted agents at once: each case is a copy of one task whose instruction names the case,
and the loopback model answers each with that case's commands, one a turn, then finishes. All
cases run as the tasks of one experiment, four at a time, through the real model path (litellm over
HTTP). For the tests that plant something where the verifier looks and check what the guard made
of it (tests/test_python_startup_integrity.py, tests/test_installer_config_integrity.py,
tests/test_npm_and_go_integrity.py, tests/test_cargo_and_cmake_integrity.py,
tests/test_shared_library_integrity.py)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from tbscale.logs import read_jsonl
from tbscale.runner import Runner, load_experiment
from tbscale.tasks import load_tasks
from tbscale.types.actions import FINISH_MARKER


def fenced(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def run_cases(tmp: Path, srv, task: Path, commands: dict[str, list[str]], *,
              prepare: Callable[[str, Path], None] | None = None, max_turns: int = 5,
              environment: dict | None = None) -> dict[str, dict]:
    """Run every case of `commands` (case -> the agent's commands) on a copy of `task`, after
    `prepare(case, copy)` when given, with the experiment's `environment` settings when given;
    returns each case's trial line, with its trajectory's sweep events under "sweeps"."""
    for case in commands:
        copy = tmp / "tasks" / case
        shutil.copytree(task, copy)
        if prepare:
            prepare(case, copy)
        instruction = copy / "instruction.md"
        instruction.write_text(f"[case {case}]\n\n" + instruction.read_text())

    def replies(body: dict) -> str:
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        case = next(c for c in commands if f"[case {c}]\n" in first)
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return fenced(commands[case][turn] if turn < len(commands[case]) else f"echo {FINISH_MARKER}")

    srv.responder = replies
    config = {
        "name": "cases", "tasks": {"path": str(tmp / "tasks")}, "trials": 1, "concurrency": 4,
        "output_dir": str(tmp / "results"),
        "models": {"m": {"model": "openai/scripted", "api_base": srv.base_url, "max_retries": 1,
                         "retry_backoff_sec": 0.01}},
        "settings": [{"name": "baseline", "generator": "m", "policy": {"name": "baseline"}}],
        "limits": {"max_turns": max_turns, "command_timeout_sec": 120},
        **({"environment": environment} if environment else {}),
    }
    path = tmp / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    exp = load_experiment(path)
    found, _ = load_tasks(Path(exp.tasks.path))
    run_dir = tmp / "results" / exp.name
    asyncio.run(Runner(exp, found, run_dir).run())
    # A trial the engine failed (an infrastructure error: under load, a container the guard had
    # just restarted was once reported stopped mid-verification) is run again, once, as
    # `tbscale run` on the same folder runs it again: these cases are about verdicts, not the engine.
    if any(row.get("infra_error") for row in read_jsonl(run_dir / "trials.jsonl")):
        asyncio.run(Runner(exp, found, run_dir).run())
    rows = {row["task_id"]: row for row in read_jsonl(run_dir / "trials.jsonl")}  # the last line of each
    for row in rows.values():
        row["sweeps"] = [e for e in read_jsonl(run_dir / row["trajectory_path"]) if e["type"] == "sweep"]
    return rows


def run_case_sets(tmp: Path, sets: list[tuple[Path, dict[str, list[str]]]], **options) -> dict[str, dict]:
    """`run_cases` for each (task, commands) of `sets`, one after the other in a folder of `tmp`
    named after the task, with one loopback model; a reply it could not give is raised. The cases'
    names are unique across the sets: their trial lines come back in one dict."""
    from tbscale_testing.openai_server import LoopbackModel

    found: dict[str, dict] = {}
    with LoopbackModel(max_lifetime_sec=900) as srv:
        for task, commands in sets:
            found.update(run_cases(tmp / task.name, srv, task, commands, **options))
    if srv.errors:
        raise srv.errors[0]
    return found


def forged_and_seen(row: dict, kind: str) -> dict:
    """The plant made the verifier pass (reward 1), and the guard recorded it: the trial is
    `tampered`, not passed, with one entry of `kind`, which is returned."""
    assert row["reward"] == 1.0 and row["passed"] is False and row["ending"] == "tampered", row
    found = [e for e in row["tampering"] if e["kind"] == kind]
    assert len(found) == 1, row["tampering"]
    return found[0]
