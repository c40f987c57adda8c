"""Lookahead trials through the Runner on Docker, against a scripted model on the loopback server:
every candidate runs in its own container fork, the pick's fork goes on and is what the verifier
judges, what the other forks did never reaches it, the verification-integrity checks still see
what the agent did, and nothing of the run is left on the engine. With the simulated models,
lookahead inside PDR and inside CER (prefixes continued from snapshots of its forks): a real
verdict, the fork counts on the trial line, and nothing left once the trial is over."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import docker
import pytest
import yaml

from tests.test_agent_loopback import (REPO, SUBMIT, STEPS, WRONG, events, fenced, is_selector, run_experiment,
                                       turn_of)
from tbscale.logs import read_jsonl
from tbscale.runner import Runner, load_experiment
from tbscale.tasks import load_tasks
from tbscale_testing import LoopbackModel
from tbscale_testing.docker_events import ContainerCreations
from tbscale_testing.docker_events import leftovers as leftovers_of

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


# ---- inside PDR and CER, with the simulated models ------------------------------------------------------
SIM_MODELS = {"policy": {"model": "sim/policy", "sim": {"skill": 0.9}},
              "selector": {"model": "sim/selector", "sim": {"accuracy": 0.9}},
              "judge": {"model": "sim/judge", "sim": {"accuracy": 0.9}},
              "summarizer": {"model": "sim/summarizer", "sim": {"accuracy": 0.9}},
              "cer_judge": {"model": "sim/cer_judge", "sim": {"accuracy": 0.9}}}
NOTHING = {"containers": [], "images": [], "networks": []}


def run_simulated(tmp_path: Path, trajectory: dict) -> tuple[dict, list[dict], dict]:
    """One trial of lookahead (N=2) inside `trajectory` on extract-emails, in this process (so what
    the trial left is seen before the process's exit would remove it); its line, its events and
    what the engine still holds of the run."""
    config = {"name": "inside", "tasks": {"path": str(REPO / "tasks"), "include": ["extract-emails"]}, "trials": 1,
              "concurrency": 2, "output_dir": str(tmp_path / "results"), "models": SIM_MODELS,
              "settings": [{"name": "la", "generator": "policy",
                            "policy": {"name": "lookahead", "n": 2, "selector": "selector"},
                            "trajectory": trajectory}],
              "limits": {"max_turns": 8, "command_timeout_sec": 60}}
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    exp = load_experiment(path)
    tasks, _ = load_tasks(Path(exp.tasks.path), include=exp.tasks.include)
    run_dir = (tmp_path / "results" / exp.name).resolve()
    label = f"org.tbscale.run={run_dir}"
    with ContainerCreations(label) as created:
        asyncio.run(Runner(exp, tasks, run_dir).run())
    (row,) = read_jsonl(run_dir / "trials.jsonl")
    return row, events(run_dir, row), leftovers_of(label, created)


def forks_by_attempt(evs: list[dict], row: dict) -> dict[int, dict[str, set[str]]]:
    """What holds of every trial of lookahead inside a strategy: a real verdict; the trial line's
    fork counts are those of its events (as for best-of-N); every attempt ran lookahead turns, on
    forks of its own environments only; every snapshot was released. Returns, per attempt, the
    containers it ran in and the snapshots it took, by purpose."""
    assert not row["infra_error"] and row["reward"] is not None and row["error"] is None, row
    assert any(e["type"] == "verifier" and e["attempt"] == row["final_attempt"] for e in evs)
    forks = [e for e in evs if e["type"] == "fork"]
    looks = [e for e in evs if e["type"] == "lookahead"]
    assert row["snapshots"] == len([e for e in forks if e["op"] == "snapshot"]) == len(row["snapshot_sec"])
    assert row["forks"] == len([e for e in forks if e["op"] == "fork"]) == len(row["fork_sec"])
    assert row["candidate_execs"] == sum(len(e["ran"]) for e in looks) > len(looks)
    assert row["candidate_exec_sec"] == pytest.approx(sum(e["exec_added_sec"] for e in looks), abs=1e-3)
    assert row["candidate_exec_sec"] > 0
    attempts = sorted(a["index"] for a in row["attempts"])
    assert sorted({e["attempt"] for e in looks}) == attempts
    assert all(e.get("ran_in_fork") for e in evs if e["type"] == "action")
    mine: dict[int, dict[str, set[str]]] = {}
    for e in evs:
        m = mine.setdefault(e["attempt"], {"containers": set(), "lookahead": set(), "prefix": set()})
        if e["type"] == "attempt_start":
            m["containers"].add(e["container"])
        elif e["type"] == "fork" and e["op"] == "snapshot":
            assert e["container"] in m["containers"], e  # taken of this attempt's own environment
            m[e["purpose"]].add(e["snapshot"])
        elif e["type"] == "fork" and e["op"] == "fork" and e["purpose"] == "lookahead":
            assert e["snapshot"] in m["lookahead"], e  # a fork of this attempt's own snapshot
            m["containers"].add(e["container"])
    taken = [s for m in mine.values() for s in m["lookahead"] | m["prefix"]]
    assert len(taken) == len(set(taken)) == row["snapshots"]
    assert {e["snapshot"] for e in forks if e["op"] == "release"} == set(taken)
    return mine


def test_lookahead_inside_pdr_forks_each_attempt_on_its_own_and_leaves_nothing(tmp_path: Path) -> None:
    row, evs, left = run_simulated(tmp_path, {"name": "pdr", "n": 2, "iterations": 2, "k": 1, "group_size": 2,
                                              "votes": 1, "judge": "judge", "summarizer": "summarizer"})
    assert row["trajectory"] == "pdr" and row["n_attempts"] == 4, row
    assert [a["stage"] for a in row["attempts"]] == ["iter0", "iter0", "iter1", "iter1"]
    assert all(a["reward"] is not None for a in row["attempts"]), row["attempts"]
    mine = forks_by_attempt(evs, row)
    # every attempt starts fresh (only the summaries carry over): no prefix, no snapshot but its own
    assert all(m["lookahead"] and not m["prefix"] for m in mine.values() if m["containers"])
    assert not any(e.get("prefix_of") is not None for e in evs if e["type"] == "attempt_start")
    assert left == NOTHING


def test_lookahead_inside_cer_continues_prefixes_from_snapshots_of_its_forks_and_leaves_nothing(
        tmp_path: Path) -> None:
    row, evs, left = run_simulated(tmp_path, {"name": "cer", "m": 2, "beam": 1, "segment_turns": 1, "rounds": 2,
                                              "judge": "cer_judge", "prefix_restore": "fork"})
    record = row["strategy_record"]
    assert row["trajectory"] == "cer" and record["params"]["prefix_restore"] == "fork"
    continued = [e for e in evs if e["type"] == "attempt_start" and e.get("prefix_of") is not None]
    assert continued and all(e["prefix_restore"] == "fork" for e in continued), continued
    assert record["prefix_restores"] == {"fork": len(continued)}
    mine = forks_by_attempt(evs, row)
    # Each paused segment's snapshot (CER's) was taken of the lookahead fork its attempt went on in,
    # and each continuation started from one: the continuation's own lookahead chain grows on it.
    prefix_snaps = {e["snapshot"]: e for e in evs if e["type"] == "fork" and e["op"] == "snapshot"
                    and e["purpose"] == "prefix"}
    lookahead_forks = {e["container"] for e in evs if e["type"] == "fork" and e["op"] == "fork"
                       and e["purpose"] == "lookahead"}
    assert prefix_snaps and all(e["container"] in lookahead_forks for e in prefix_snaps.values()), prefix_snaps
    from_prefix = [e for e in evs if e["type"] == "fork" and e["op"] == "fork" and e["purpose"] == "prefix"]
    assert len(from_prefix) == len(continued) and all(e["snapshot"] in prefix_snaps for e in from_prefix)
    assert all(mine[e["attempt"]]["lookahead"] for e in continued)
    assert left == NOTHING
