"""Whole trials through the Runner against a scripted model on the loopback server: real litellm
HTTP calls, real containers, real verifiers. The model replays the task's reference solution."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tbscale.types.actions import FINISH_MARKER
from tbscale.runner import load_experiment
from tbscale.logs import read_jsonl
from tbscale.runner import Runner
from tbscale.tasks import load_task, load_tasks
from tbscale_testing import LoopbackModel, Reply, context_length_error, rate_limit, server_error

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_available")]

REPO = Path(__file__).resolve().parents[1]
TASK_ID = "extract-emails"
STEPS = load_task(REPO / "tasks" / TASK_ID).solution_steps()
SUBMIT = f"echo {FINISH_MARKER}"
SELECTOR_MARK = "You are the selector"
# A wrong candidate that, if it ran, would make the verifier fail (it edits the documents).
WRONG = "echo WRONG >> /app/docs/team.txt"


def fenced(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def is_selector(body: dict) -> bool:
    return str(body["messages"][0].get("content", "")).startswith(SELECTOR_MARK)


def turn_of(body: dict) -> int:
    """The agent's turn a generator request is for: assistant messages so far, plus one."""
    return sum(m["role"] == "assistant" for m in body["messages"]) + 1


def step_for(turn: int) -> str:
    return STEPS[turn - 1] if turn <= len(STEPS) else SUBMIT


def solver(body: dict):
    """Generator: the reference step of this turn, then the submission. With n > 1, the correct
    step is at a turn-dependent index among wrong ones. Selector: names the correct candidate."""
    if is_selector(body):
        prompt = body["messages"][-1]["content"]
        done = len(re.findall(r'<action turn="\d+">', prompt.split("candidate next actions", 1)[0]))
        expected = step_for(done + 1)
        cands = re.findall(r'<candidate index="(\d+)">\n```bash\n(.*?)\n```\n</candidate>', prompt, re.DOTALL)
        index = next(int(i) for i, cmd in cands if cmd.strip() == expected)
        return json.dumps({"rationale": "it is the next reference step", "selected_index": index})
    turn, n = turn_of(body), int(body.get("n") or 1)
    if n == 1:
        return fenced(step_for(turn))
    good = turn % n
    return [fenced(step_for(turn) if i == good else WRONG) for i in range(n)]


def run_experiment(tmp_path: Path, srv: LoopbackModel, settings: list[dict], **limits) -> tuple[list[dict], Path]:
    config = {
        "name": "loopback",
        "tasks": {"path": str(REPO / "tasks"), "include": [TASK_ID]},
        "trials": 1,
        "concurrency": 4,
        "output_dir": str(tmp_path / "results"),
        "models": {"m": {"model": "openai/scripted", "api_base": srv.base_url, "max_retries": 3,
                         "retry_backoff_sec": 0.01},
                   "sel": {"model": "openai/selector", "api_base": srv.base_url, "max_retries": 3,
                           "retry_backoff_sec": 0.01}},
        "settings": settings,
        "limits": {"max_turns": 8, "command_timeout_sec": 30, **limits},
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    exp = load_experiment(path)
    tasks, _ = load_tasks(Path(exp.tasks.path), include=exp.tasks.include)
    run_dir = tmp_path / "results" / exp.name
    asyncio.run(Runner(exp, tasks, run_dir).run())
    return list(read_jsonl(run_dir / "trials.jsonl")), run_dir


def events(run_dir: Path, row: dict) -> list[dict]:
    return list(read_jsonl(run_dir / row["trajectory_path"]))


BASELINE = {"name": "baseline", "generator": "m", "policy": {"name": "baseline"}}


def test_scripted_model_solves_task_through_runner(tmp_path: Path, loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = solver
    srv.cached_tokens = 3
    (row,), run_dir = run_experiment(tmp_path, srv, [BASELINE])

    assert row["passed"] is True and row["ending"] == "pass", row
    assert row["stop_reason"] == "submitted" and row["turns"] == len(STEPS) + 1
    evs = events(run_dir, row)
    types = Counter(e["type"] for e in evs)
    assert types["model_call"] == len(STEPS) + 1
    assert types["action"] == len(STEPS) + 1 and types["observation"] == len(STEPS) + 1
    assert types["verifier"] == 1 and types["end"] == 1
    assert [e["command"] for e in evs if e["type"] == "action"] == STEPS + [SUBMIT]
    (verdict,) = [e for e in evs if e["type"] == "verifier"]
    assert verdict["passed"] is True and verdict["reward"] == 1.0

    reqs = srv.requests
    assert len(reqs) == len(STEPS) + 1 and all(r.ok and r.n == 1 for r in reqs)
    told = row["tokens"]["generator"]
    assert told["input"] == sum(r.usage["prompt_tokens"] for r in reqs)
    assert told["output"] == sum(r.usage["completion_tokens"] for r in reqs)
    assert told["cached"] == 3 * len(reqs)
    assert told["calls"] == len(reqs)
    per_call = [e["usage"]["output"] for e in evs if e["type"] == "model_call"]
    assert per_call == [r.usage["completion_tokens"] for r in reqs]


def test_turn_bon_beside_baseline_selects_the_right_candidate(tmp_path: Path, loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = solver
    turn_bon = {"name": "turn_bon_n3", "generator": "m", "policy": {"name": "turn_bon", "n": 3, "selector": "sel"}}
    rows, run_dir = run_experiment(tmp_path, srv, [BASELINE, turn_bon])
    by_setting = {r["setting"]: r for r in rows}
    assert set(by_setting) == {"baseline", "turn_bon_n3"}
    for row in rows:
        assert row["passed"] is True and row["ending"] == "pass", row
        assert row["turns"] == len(STEPS) + 1

    turns = len(STEPS) + 1
    reqs = srv.requests
    gen_n3 = [r for r in reqs if not is_selector(r.body) and r.n == 3]
    gen_n1 = [r for r in reqs if not is_selector(r.body) and r.n == 1]
    sel = [r for r in reqs if is_selector(r.body)]
    assert len(gen_n1) == turns  # the baseline
    # Turn-BoN: per turn one generator request with n=3 and one selector request.
    assert sorted(turn_of(r.body) for r in gen_n3) == list(range(1, turns + 1))
    sel_turns = [len(re.findall(r'<action turn="\d+">', r.messages[-1]["content"])) + 1 for r in sel]
    assert sorted(sel_turns) == list(range(1, turns + 1))
    assert all(r.body["model"] == "selector" for r in sel)

    tb = by_setting["turn_bon_n3"]
    evs = events(run_dir, tb)
    actions = [e for e in evs if e["type"] == "action"]
    assert [a["command"] for a in actions] == STEPS + [SUBMIT]
    assert [a["selected_index"] for a in actions] == [t % 3 for t in range(1, turns + 1)]
    assert all(a["n_candidates"] == 3 for a in actions)
    selections = [e for e in evs if e["type"] == "selection"]
    assert len(selections) == turns and not any(s["selector_failed"] for s in selections)
    assert tb["tokens"]["generator"]["output"] == sum(r.usage["completion_tokens"] for r in gen_n3)
    assert tb["tokens"]["selector"]["calls"] == turns
    assert tb["selector_model"] == "openai/selector"


def test_context_length_error_ends_out_of_context(tmp_path: Path, loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = lambda body: context_length_error() if turn_of(body) == 2 else solver(body)
    (row,), run_dir = run_experiment(tmp_path, srv, [BASELINE])
    assert row["ending"] == "out_of_context" and row["stop_reason"] == "context_window"
    assert row["passed"] is False and row["turns"] == 2
    assert [r.status for r in srv.requests] == [200, 400]  # not retried
    calls = [e for e in events(run_dir, row) if e["type"] == "model_call"]
    assert calls[-1]["error"].startswith("ContextWindowExceededError")


def test_length_cut_response_ends_out_of_context(tmp_path: Path, loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.responder = lambda body: (Reply(content="THOUGHT: a long argument that never ends and", finish_reason="length")
                                  if turn_of(body) == 2 else solver(body))
    (row,), run_dir = run_experiment(tmp_path, srv, [BASELINE])
    assert row["ending"] == "out_of_context" and row["stop_reason"] == "output_length"
    assert row["passed"] is False and row["turns"] == 2
    assert [e["type"] for e in events(run_dir, row)].count("action") == 1


def test_transient_errors_during_run_are_retried(tmp_path: Path, loopback_model: LoopbackModel) -> None:
    srv = loopback_model
    srv.fail_next(rate_limit())  # the first request of turn 1
    lock, failed_once = threading.Lock(), []

    def responder(body):
        with lock:
            if turn_of(body) == 2 and not failed_once:  # the first request of turn 2
                failed_once.append(True)
                return server_error()
        return solver(body)

    srv.responder = responder
    (row,), run_dir = run_experiment(tmp_path, srv, [BASELINE])
    assert row["passed"] is True and row["ending"] == "pass", row
    assert [r.status for r in srv.requests] == [429, 200, 500, 200] + [200] * (len(STEPS) - 1)
    calls = [e for e in events(run_dir, row) if e["type"] == "model_call"]
    assert [c["retries"] for c in calls] == [1, 1] + [0] * (len(STEPS) - 1)
    assert all(c["error"] is None for c in calls)
