"""Lookahead trials through the Runner on Docker, against a scripted model on the loopback server:
every candidate runs in its own container fork, the pick's fork goes on and is what the verifier
judges, what the other forks did never reaches it, the verification-integrity checks still see
what the agent did, and nothing of the run is left on the engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import docker
import pytest

from tests.test_agent_loopback import SUBMIT, STEPS, WRONG, events, fenced, is_selector, run_experiment, turn_of
from tbscale_testing import LoopbackModel

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_available")]
LOOKAHEAD = {"name": "lookahead_n3", "generator": "m", "policy": {"name": "lookahead", "n": 3, "selector": "sel"}}
FORGE = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"


def step_for(turn: int) -> str:
    return STEPS[turn - 1] if turn <= len(STEPS) else SUBMIT


def ran_commands(prompt: str) -> list[tuple[int, str, int]]:
    return [(int(i), c.strip(), int(code)) for i, c, code in re.findall(
        r'<candidate index="(\d+)">\n```bash\n(.*?)\n```\n<outcome exit_code="(-?\d+)"', prompt, re.DOTALL)]


def picker(wanted):
    """Generator: the reference step of the turn among wrong ones (or `wanted`'s own list); the
    selector picks the candidate `wanted(turn)` names, by its command, among those that ran."""
    def responder(body):
        if is_selector(body):
            prompt = body["messages"][-1]["content"]
            turn = 1 + len(re.findall(r'<action turn="\d+">', prompt.split("candidate next actions", 1)[0]))
            want = wanted(turn)[0]
            index = next(i for i, c, _ in ran_commands(prompt) if c == want)
            return json.dumps({"rationale": "scripted", "selected_index": index})
        return [fenced(c) for c in wanted(turn_of(body))[:int(body.get("n") or 1)]]
    return responder


def leftovers(run_dir: Path) -> tuple[list, list]:
    client = docker.from_env()
    label = f"org.tbscale.run={run_dir.resolve()}"
    return (client.containers.list(all=True, filters={"label": label}),
            client.images.list(filters={"label": label}))


def test_the_pick_goes_on_and_the_other_forks_never_reach_the_verifier(tmp_path: Path,
                                                                      loopback_model: LoopbackModel) -> None:
    loopback_model.responder = picker(lambda t: [step_for(t), WRONG, WRONG + " # twice"])
    (row,), run_dir = run_experiment(tmp_path, loopback_model, [LOOKAHEAD])
    assert row["passed"] is True and row["ending"] == "pass" and row["tampering"] == [], row
    turns = len(STEPS) + 1
    assert row["turns"] == turns
    # Two distinct commands a turn (the two WRONG ones share a fork): each ran in its own fork.
    evs = events(run_dir, row)
    looks = [e for e in evs if e["type"] == "lookahead"]
    assert len(looks) == turns and all(len(e["ran"]) == 2 for e in looks)
    assert all(any(r["command"] == WRONG and r["candidates"] == [1, 2] and r["exit_code"] == 0 for r in e["ran"])
               for e in looks)
    assert row["candidate_execs"] == 2 * turns and row["forks"] >= 2 * turns and row["snapshots"] == turns
    assert row["candidate_exec_sec"] > 0
    assert [e["command"] for e in evs if e["type"] == "action"] == STEPS + [SUBMIT]
    assert all(e.get("ran_in_fork") for e in evs if e["type"] == "action")
    # The verifier ran in the last fork: WRONG, which edits the documents, ran every turn
    # elsewhere, and the verdict is still a pass.
    (verdict,) = [e for e in evs if e["type"] == "verifier"]
    assert verdict["passed"] is True
    assert leftovers(run_dir) == ([], [])


def test_a_forged_reward_in_the_picked_fork_is_still_caught(tmp_path: Path, loopback_model: LoopbackModel) -> None:
    loopback_model.responder = picker(lambda t: [FORGE, "ls /app"] if t == 1 else [SUBMIT, "ls /app"])
    (row,), run_dir = run_experiment(tmp_path, loopback_model, [LOOKAHEAD])
    assert row["ending"] != "pass" and not row["passed"], row
    kinds = {e["kind"] for e in row["tampering"]}
    assert "reward_file_written" in kinds, row["tampering"]
    (sweep,) = [e for e in events(run_dir, row) if e["type"] == "sweep"]
    assert sweep["method"] == "restart"
    assert leftovers(run_dir) == ([], [])


def test_lookahead_inside_best_of_n_forks_each_attempt_on_its_own(tmp_path: Path,
                                                                  loopback_model: LoopbackModel) -> None:
    loopback_model.responder = picker(lambda t: [step_for(t), WRONG])
    setting = {**LOOKAHEAD, "name": "bon2_lookahead", "trajectory": {"name": "best_of_n", "n": 2, "selector": "random"}}
    (row,), run_dir = run_experiment(tmp_path, loopback_model, [setting])
    assert row["passed"] is True and row["n_attempts"] == 2, row
    turns = len(STEPS) + 1
    assert all(a["passed"] and a["turns"] == turns for a in row["attempts"])
    looks = [e for e in events(run_dir, row) if e["type"] == "lookahead"]
    assert sorted({e["attempt"] for e in looks}) == [0, 1] and len(looks) == 2 * turns
    assert row["candidate_execs"] == 2 * 2 * turns and row["snapshots"] == 2 * turns
    assert leftovers(run_dir) == ([], [])
