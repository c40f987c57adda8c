"""Tests for tbscale.analysis.bsr (behavioral self-rewarding) and `tbscale rewards`. No Docker."""

from __future__ import annotations

import asyncio
import json
import math
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from test_behaviour_report import SUBMIT, cand, make_run, turn
from typer.testing import CliRunner

from tbscale.posthoc import bsr
from tbscale.posthoc.bsr import BsrParams, Step
from tbscale_sim import provider as sim

# ---- scheduling -----------------------------------------------------------------------------------


def _run_schedule(n: int, seed: int = 0) -> tuple[list[list[tuple[int, int]]], set[frozenset[int]]]:
    """Drive the Swiss scheduler the way _judge_bucket does, with random outcomes."""
    rng = random.Random(seed)
    played: set[frozenset[int]] = set()
    net = [0.0] * n
    rounds = []
    for _ in range(bsr.swiss_rounds(n)):
        pairs = bsr.swiss_round_pairs(net, played, rng)
        if not pairs:
            break
        for i, j in pairs:
            assert frozenset((i, j)) not in played, "a pair was scheduled twice"
            played.add(frozenset((i, j)))
            w, lo = (i, j) if rng.random() < 0.5 else (j, i)
            net[w] += 1
            net[lo] -= 1
        rounds.append(pairs)
    return rounds, played


@pytest.mark.parametrize("n", [5, 6, 7, 8, 9, 12, 16, 33])
def test_swiss_rounds_and_per_round_limits(n: int) -> None:
    expected_t = min(math.ceil(math.log2(n)) + 2, n - 1)
    assert bsr.swiss_rounds(n) == expected_t
    for seed in range(5):
        rounds, played = _run_schedule(n, seed)
        assert len(rounds) <= expected_t
        for pairs in rounds:
            assert len(pairs) <= n // 2
            members = [x for p in pairs for x in p]
            assert len(members) == len(set(members)), "a trajectory played twice in one round"
        assert sum(len(p) for p in rounds) == len(played)
        assert len(played) <= min(expected_t * (n // 2), n * (n - 1) // 2)
        assert len(played) < n * (n - 1) // 2 or n <= 6  # fewer calls than exhaustive from n = 7 on


def test_swiss_first_round_is_full() -> None:
    rounds, _ = _run_schedule(8)
    assert len(rounds[0]) == 4


def test_exhaustive_below_five_through_the_judge() -> None:
    calls: list[tuple[str, str]] = []

    async def judge(messages, seed):
        text = messages[-1]["content"]
        calls.append((text.count('<trajectory label="A">'), seed))
        return json.dumps({"winner": "A", "strength": 2, "reason": "x"}), {}

    for n in (2, 3, 4):
        members = [bsr.Trajectory(k, {"trial_key": f"t{k}"}, [], "task", {}, f"<stats>{{}}</stats>\nS{k}", bsr.FAIL)
                   for k in range(n)]
        records: list[dict] = []
        results, errors = asyncio.run(bsr._judge_bucket("g", bsr.FAIL, members, judge, BsrParams(),
                                                        asyncio.Semaphore(4), records))
        assert errors == 0
        assert len(results) == len(records) == n * (n - 1) // 2
        pairs = {frozenset((r["A"], r["B"])) for r in records}
        assert len(pairs) == n * (n - 1) // 2
        assert all(t.comparisons == n - 1 for t in members)
    assert bsr.exhaustive_pairs(4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


# ---- Bradley-Terry ---------------------------------------------------------------------------------


def test_bradley_terry_recovers_a_known_ordering() -> None:
    rng = np.random.default_rng(3)
    true = np.array([2.0, 1.2, 0.5, -0.3, -1.0, -2.2])
    comps = []
    for _ in range(60):
        for i in range(6):
            for j in range(i + 1, 6):
                p = 1 / (1 + np.exp(-(true[i] - true[j])))
                w, lo = (i, j) if rng.random() < p else (j, i)
                comps.append((w, lo, float(rng.integers(1, 4))))
    s = bsr.fit_bradley_terry(6, comps, l2=0.1)
    assert list(np.argsort(-s)) == list(range(6))
    assert np.corrcoef(s, true)[0, 1] > 0.98


def test_bradley_terry_weights_and_regularization() -> None:
    # 0 beats 1 strongly once, 1 beats 0 slightly once: 0 ends up ahead because of the weights.
    s = bsr.fit_bradley_terry(2, [(0, 1, 3.0), (1, 0, 1.0)], l2=0.1)
    assert s[0] > s[1]
    # a player that never loses stays finite thanks to L2, and scores sum to zero by symmetry
    s = bsr.fit_bradley_terry(3, [(0, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0)], l2=0.5)
    assert np.all(np.isfinite(s)) and s[0] > s[1] > s[2]
    assert abs(s.sum()) < 1e-8
    assert np.all(bsr.fit_bradley_terry(4, [], l2=0.1) == 0)
    with pytest.raises(ValueError):
        bsr.fit_bradley_terry(2, [(0, 1, 1.0)], l2=0.0)


# ---- reward mapping --------------------------------------------------------------------------------


def test_soft_deadzone_shape() -> None:
    z = np.linspace(-3, 3, 61)
    d = bsr.soft_deadzone(z, 0.5, 0.5)
    assert np.all(np.diff(d) >= 0) and d[30] == 0.0  # monotone, 0 at 0
    assert np.allclose(d, -d[::-1])  # odd
    hard = bsr.soft_deadzone(z, 0.5, 0.0)
    assert np.all(hard[np.abs(z) <= 0.5] == 0) and np.isclose(hard[-1], 2.5)
    assert np.allclose(bsr.soft_deadzone(z, 0.0, 0.0), z)


def test_refined_rewards_keep_every_pass_above_every_fail() -> None:
    for case in range(300):
        rng = np.random.default_rng(case)
        n = int(rng.integers(2, 20))
        passed = rng.random(n) < rng.random()
        # verifier rewards: 1/0, or partial credit for failures below the passes
        fail_r = rng.choice([0.0, 0.3, 0.9]) * rng.random(n)
        rewards = np.where(passed, 1.0, fail_r)
        a0, a1 = float(rng.uniform(0, 0.8)), float(rng.uniform(0, 0.8))
        e0, e1, _ = bsr.effective_amplitudes(rewards, passed, a0, a1)
        aux = np.zeros(n)
        for bucket, amp in ((False, e0), (True, e1)):
            idx = np.where(passed == bucket)[0]
            if len(idx):
                aux[idx] = bsr.aux_from_scores(rng.normal(0, 3, len(idx)), amp, float(rng.uniform(0, 1)),
                                               float(rng.uniform(0, 1)))
                assert np.all(np.abs(aux[idx]) <= amp + 1e-12)
                assert abs(aux[idx].mean()) < 1e-9  # centred
        assert bsr.check_ordering(rewards + aux, passed), f"case {case}"


def test_ordering_check_detects_a_violation() -> None:
    assert bsr.check_ordering([1.0, 0.5], [True, False])
    assert not bsr.check_ordering([0.4, 0.5], [True, False])
    with pytest.raises(Exception, match="no refinement"):
        bsr.effective_amplitudes([0.2, 0.5], [True, False], 0.15, 0.0)


def test_random_control_has_the_same_amplitude() -> None:
    for case in range(50):
        rng = np.random.default_rng(case)
        n = int(rng.integers(2, 12))
        a = 0.15
        real = bsr.aux_from_scores(rng.normal(size=n), a, 0.5, 0.5)
        rand = bsr.random_aux(n, a, np.random.default_rng(1000 + case))
        assert np.isclose(np.max(np.abs(rand)), a) and np.isclose(np.max(np.abs(real)), a)
        assert abs(rand.mean()) < 1e-12
    assert np.all(bsr.random_aux(1, 0.15, np.random.default_rng(0)) == 0)


# ---- behaviour statistics --------------------------------------------------------------------------

HAND = [
    ('grep -rn "def foo" src', 0),       # 1 search
    ("cat src/foo.py", 0),               # 2 read
    ("sed -i 's/a/b/' src/foo.py", 0),   # 3 edit (first edit)
    ("python -m pytest tests", 1),       # 4 test, tests the edit, error
    ("python -m pytest tests", 1),       # 5 test, duplicate since the last edit, error
    ("echo x >> src/bar.py", 0),         # 6 edit (final edit)
    ("cat src/foo.py", 0),               # 7 read (not a duplicate: an edit came between)
    (SUBMIT, 0),                         # 8 submission
]


def test_behaviour_stats_match_hand_counts() -> None:
    steps = [Step(i + 1, c, e, "out") for i, (c, e) in enumerate(HAND)]
    st = bsr.behaviour_stats(steps)
    assert st == {
        "steps": 8, "commands": 7, "first_edit_step": 3, "search": 1, "read": 2, "edit": 2, "test": 2,
        "post_edit_tests": 1, "post_edit_test_rate": 0.5, "search_to_edit": 1.0, "duplicate_rate": 1 / 7,
        "errors": 2, "files_read": 1, "files_edited": 2, "commands_before_final_edit": 5,
        "commands_after_final_edit": 1}


def test_summary_drops_thinking_and_truncates() -> None:
    long = "line\n" * 2000
    err = "x" * 2000 + "\nTraceback (most recent call last):\nValueError: boom\n"
    steps = [Step(1, "ls", 0, "a b"), Step(2, "cat big.txt", 0, long), Step(3, "python x.py", 1, err),
             Step(4, "cat > f.py <<EOF\nprint(1)\nEOF", 0, ""), Step(5, None, output="no block")]
    p = BsrParams()
    text = bsr.summarize(steps, bsr.behaviour_stats(steps), p)
    assert text.startswith("<stats>{")
    assert 'bash(command="ls")\n-> exit 0\na b' in text
    assert "characters omitted" in text and len(text) < len(long)
    assert "ValueError: boom" in text and err in text  # errors kept whole up to error_obs_chars
    assert 'bash(command="""\ncat > f.py <<EOF\nprint(1)\nEOF\n""")' in text
    assert "no runnable action" in text


# ---- simulated judge and end to end ----------------------------------------------------------------


def test_sim_judge_prefers_better_statistics_and_says_it_is_simulated() -> None:
    good = {"steps": 5, "edit": 2, "post_edit_test_rate": 1.0, "duplicate_rate": 0.0, "errors": 0}
    bad = {"steps": 5, "edit": 0, "post_edit_test_rate": None, "duplicate_rate": 0.6, "errors": 4}
    wins = 0
    for seed in range(40):
        msgs = bsr.judge_messages("do it", bsr.FAIL, f"<stats>{json.dumps(bad)}</stats>\nB",
                                  f"<stats>{json.dumps(good)}</stats>\nG")
        reply = json.loads(sim.simulate("bsr_judge", msgs, 1, seed, {"accuracy": 1.0})[0])
        assert "simulated" in reply["reason"]
        wins += reply["winner"] == "B"
        assert reply["strength"] == 3
    assert wins == 40


def _synthetic_run(tmp_path: Path) -> Path:
    good = [turn([cand("cat a.py")]), turn([cand("sed -i 's/x/y/' a.py")]), turn([cand("python -m pytest")]),
            turn([cand(SUBMIT)])]
    meh = [turn([cand("ls")]), turn([cand("ls")], exit_code=2), turn([cand("echo z > a.py")]), turn([cand(SUBMIT)])]
    bad = [turn([cand("ls")]), turn([cand("ls")]), turn([cand("ls")], exit_code=1), turn([cand(SUBMIT)])]
    trials = []
    k = 0
    for task in ("t1", "t2"):
        for turns, passed, copies in ((good, True, 2), (good, False, 2), (meh, False, 2), (bad, False, 2)):
            for _ in range(copies):
                trials.append({"setting": "base", "task": task, "trial": k, "turns": turns, "passed": passed,
                               "instruction": f"fix {task}"})
                k += 1
    return make_run(tmp_path, trials)


def _cli() -> typer.Typer:
    from tbscale.cli import app

    return app


@pytest.mark.litellm
def test_rewards_command_end_to_end(tmp_path: Path) -> None:
    run = _synthetic_run(tmp_path)
    res = CliRunner().invoke(_cli(), ["rewards", str(run), "--judge-model", "sim/bsr_judge", "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert "ordering guarantee" in res.output and "holds" in res.output
    out = run / "rewards"
    rows = [json.loads(x) for x in (out / "bsr.jsonl").read_text().splitlines()]
    assert len(rows) == 16
    assert {"trial_key", "task_id", "setting", "passed", "reward", "bt_score", "aux_reward", "refined_reward",
            "bucket", "comparisons"} <= set(rows[0])
    passes = [r["refined_reward"] for r in rows if r["passed"]]
    fails = [r["refined_reward"] for r in rows if not r["passed"]]
    assert min(passes) > max(fails)
    assert all(r["aux_reward"] == 0 for r in rows if r["passed"])  # a1 = 0, pass bucket not judged
    # 6 failures per task -> Swiss: T = min(ceil(log2 6) + 2, 5) = 5 rounds of <= 3 comparisons
    comps = [json.loads(x) for x in (out / "comparisons.jsonl").read_text().splitlines()]
    assert comps and all(c["bucket"] == "fail" and c["parsed"] and c["prompt"] and c["response"] for c in comps)
    for task in ("t1", "t2"):
        mine = [c for c in comps if c["group"] == f"base::{task}"]
        assert 0 < len(mine) <= 5 * 3
        assert len({frozenset((c["A"], c["B"])) for c in mine}) == len(mine)
    # the simulated judge prefers tested edits: the failing "good" trajectories get the top aux rewards
    by_key = {r["trial_key"]: r for r in rows}
    trials = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    good_fail = [by_key[t["trial_key"]]["aux_reward"] for t in trials if not t["passed"] and t["trial"] % 8 in (2, 3)]
    bad_fail = [by_key[t["trial_key"]]["aux_reward"] for t in trials if t["trial"] % 8 in (6, 7)]
    assert min(good_fail) > max(bad_fail)
    stats = pd.read_csv(out / "stats.csv")
    assert len(stats) == 16 and {"post_edit_test_rate", "duplicate_rate", "files_edited"} <= set(stats.columns)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["judge_model"] == "sim/bsr_judge" and manifest["simulated_judge"] is True
    assert manifest["seed"] == 0 and manifest["params"]["a0"] == 0.15 and manifest["ordering_guarantee"]


@pytest.mark.litellm
def test_rewards_random_control_and_determinism(tmp_path: Path) -> None:
    run = _synthetic_run(tmp_path)
    app = _cli()
    res = CliRunner().invoke(app, ["rewards", str(run), "--random-control", "--output", str(tmp_path / "rc")])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "rc" / "bsr.jsonl").read_text().splitlines()]
    fails = [r["aux_reward"] for r in rows if not r["passed"]]
    assert max(abs(a) for a in fails) == pytest.approx(0.15, abs=1e-6)
    assert (tmp_path / "rc" / "comparisons.jsonl").read_text() == ""
    assert json.loads((tmp_path / "rc" / "manifest.json").read_text())["judge_model"] is None
    # same seed, same rewards
    for name in ("s1", "s2"):
        assert CliRunner().invoke(app, ["rewards", str(run), "--output", str(tmp_path / name)]).exit_code == 0
    assert (tmp_path / "s1" / "bsr.jsonl").read_text() == (tmp_path / "s2" / "bsr.jsonl").read_text()
    calls = [(tmp_path / n / "comparisons.jsonl").read_text() for n in ("s1", "s2")]
    assert calls[0] == calls[1] and calls[0]


def test_group_by_task_pools_settings(tmp_path: Path) -> None:
    t = [turn([cand("ls")]), turn([cand(SUBMIT)])]
    trials = [{"setting": s, "task": "t1", "trial": i, "turns": t, "passed": False} for s in ("a", "b") for i in range(2)]
    run = make_run(tmp_path, trials)
    from tbscale.analysis import tables

    df = tables.load_trials([run])
    by_setting = asyncio.run(bsr.refine(df, BsrParams(random_control=True), None))
    pooled = asyncio.run(bsr.refine(df, BsrParams(random_control=True, group_by="task"), None))
    assert sorted(b.n for b in by_setting.buckets) == [2, 2]
    assert [b.n for b in pooled.buckets] == [4]


@pytest.mark.litellm
def test_rewards_rerun_reuses_the_judgements(tmp_path: Path) -> None:
    """The shared post-hoc store: a second run with the same judge and seed asks nothing new."""
    run = _synthetic_run(tmp_path)
    args = ["rewards", str(run), "--judge-model", "sim/bsr_judge", "--seed", "0"]
    assert CliRunner().invoke(_cli(), args).exit_code == 0
    store = run / "rewards" / "judgements.jsonl"
    first = store.read_text().splitlines()
    rewards = (run / "rewards" / "bsr.jsonl").read_text()
    assert first
    assert CliRunner().invoke(_cli(), args).exit_code == 0
    assert store.read_text().splitlines() == first and (run / "rewards" / "bsr.jsonl").read_text() == rewards
    manifest = json.loads((run / "rewards" / "manifest.json").read_text())
    assert len(manifest["history"]) == 2
