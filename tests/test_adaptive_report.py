"""The adaptive Turn-BoN report sections on a hand-made run: pairs found by N (or named), path
counts read from trajectories, and the paired differences, checked against hand arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from tbscale.analysis import adaptive_report, tables
from tbscale.analysis.report import build_report
from tbscale.errors import TbscaleError

TASKS = ("a", "b", "c")
# setting -> task -> passes out of 2 trials
PASSES = {"baseline": {"a": 1, "b": 0, "c": 0}, "turn_bon_n4": {"a": 2, "b": 1, "c": 0},
          "turn_bon_n4_random": {"a": 1, "b": 1, "c": 0}, "turn_bon_n4_adaptive": {"a": 2, "b": 0, "c": 1},
          "turn_bon_n4_all_agree": {"a": 2, "b": 1, "c": 1}}
SETTINGS = ("baseline", "turn_bon_n4", "turn_bon_n4_random", "turn_bon_n4_adaptive")
POLICY = {"baseline": ("baseline", 1, {}),
          "turn_bon_n4": ("turn_bon", 4, {"n": 4, "selector": "sel"}),
          "turn_bon_n4_random": ("turn_bon", 4, {"n": 4, "selector": "rand"}),
          "turn_bon_n4_adaptive": ("turn_bon", 4, {"n": 4, "selector": "sel", "adaptive": {"first": 2}}),
          "turn_bon_n4_all_agree": ("turn_bon", 4, {"n": 4, "selector": "sel", "adaptive": {"mode": "all_agree"}})}
SELECTOR_MODEL = {"turn_bon_n4_random": "sim/random-selector"}


def candidates_event(turn: int, n: int, path: str | None) -> dict:
    ev = {"type": "candidates", "ts": 0, "attempt": 0, "turn": turn,
          "candidates": [{"text": "x", "command": "ls", "runnable": True}] * n}
    if path is not None:
        ev["path"] = path
    return ev


def turns_of(setting: str) -> list[dict]:
    """Plain: three choice turns of 4 candidates. Adaptive: agreed (2), selected (4), agreed (2)."""
    if setting == "baseline":
        return [candidates_event(t, 1, None) for t in (1, 2, 3)]
    if setting == "turn_bon_n4_adaptive":
        return [candidates_event(1, 2, "agreed_first"), candidates_event(2, 4, "selected"),
                candidates_event(3, 2, "agreed_first")]
    if setting == "turn_bon_n4_all_agree":
        return [candidates_event(1, 4, "agreed_all"), candidates_event(2, 4, "selected"),
                candidates_event(3, 4, "selected")]
    return [candidates_event(t, 4, None) for t in (1, 2, 3)]


def usage(setting: str) -> dict:
    gen = {"input": 1000, "output": 200, "reasoning": 0, "cached": 0, "calls": 3}
    if setting == "baseline":
        return {"generator": gen}
    if setting == "turn_bon_n4_adaptive":
        return {"generator": {**gen, "input": 800, "output": 150, "calls": 4},
                "selector": {"input": 100, "output": 10, "reasoning": 0, "cached": 0, "calls": 1}}
    return {"generator": gen, "selector": {"input": 300, "output": 30, "reasoning": 0, "cached": 0, "calls": 3}}


def write_run(root: Path, name: str = "r1", settings=SETTINGS) -> Path:
    run = root / name
    rows = []
    for setting in settings:
        policy, n, params = POLICY[setting]
        for task in TASKS:
            for i in range(2):
                rel = f"trajectories/{task}/{setting}__t{i}.jsonl"
                (run / rel).parent.mkdir(parents=True, exist_ok=True)
                (run / rel).write_text("\n".join(json.dumps(e) for e in turns_of(setting)) + "\n")
                passed = i < PASSES[setting][task]
                rows.append({
                    "schema_version": 1, "run": name, "setting": setting, "setting_key": setting[:5],
                    "trial_key": f"{setting}-{task}-{i}", "task_id": task, "trial": i, "seed": i, "agent": "bash",
                    "policy": policy, "policy_params": params, "n": n, "trajectory": "single",
                    "generator_model": "sim/policy",
                    "selector_model": None if n == 1 else SELECTOR_MODEL.get(setting, "sim/selector"),
                    "simulated": True, "reward": float(passed), "passed": passed,
                    "ending": "pass" if passed else "wrong_submission", "turns": 3, "cost_usd": 0.0,
                    "trajectory_path": rel, "tokens": usage(setting)})
    (run / "trials.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return run


def test_pairs_by_n_prefer_the_same_models(tmp_path: Path) -> None:
    df = tables.load_trials([write_run(tmp_path)])
    assert adaptive_report.find_pairs(df) == [("turn_bon_n4", "turn_bon_n4_adaptive")]
    # Without a plain setting of the same models, any plain Turn-BoN of the same N.
    df2 = tables.load_trials([write_run(tmp_path, "r2", ("baseline", "turn_bon_n4_random", "turn_bon_n4_adaptive"))])
    assert adaptive_report.find_pairs(df2) == [("turn_bon_n4_random", "turn_bon_n4_adaptive")]
    # No plain Turn-BoN of that N: no pair, no section.
    df3 = tables.load_trials([write_run(tmp_path, "r3", ("baseline", "turn_bon_n4_adaptive"))])
    assert adaptive_report.find_pairs(df3) == []


def test_named_pair_and_its_errors(tmp_path: Path) -> None:
    df = tables.load_trials([write_run(tmp_path)])
    assert adaptive_report.find_pairs(df, ["turn_bon_n4_random", "turn_bon_n4_adaptive"]) == [
        ("turn_bon_n4_random", "turn_bon_n4_adaptive")]
    with pytest.raises(TbscaleError, match="no setting named 'nope'"):
        adaptive_report.find_pairs(df, ["turn_bon_n4", "nope"])
    with pytest.raises(TbscaleError, match="'turn_bon_n4' is not an adaptive Turn-BoN setting"):
        adaptive_report.find_pairs(df, ["turn_bon_n4_adaptive", "turn_bon_n4"])


def test_path_counts_from_trajectories(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    assert adaptive_report.trial_paths(run / "trajectories/a/turn_bon_n4_adaptive__t0.jsonl") == {
        "choice_turns": 3, "agreed_first": 2, "agreed_all": 0, "selected": 1, "samples": 8}
    assert adaptive_report.trial_paths(run / "trajectories/a/turn_bon_n4__t0.jsonl") == {
        "choice_turns": 3, "agreed_first": 0, "agreed_all": 0, "selected": 3, "samples": 12}
    assert adaptive_report.trial_paths(run / "trajectories/a/baseline__t0.jsonl")["choice_turns"] == 0
    assert adaptive_report.trial_paths(run / "missing.jsonl") is None


def test_sections_against_hand_arithmetic(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    ctx = build_report([run], Console(file=open(tmp_path / "out.txt", "w"), width=120), plots=False)
    by_key = {s.key: s.frame for s in ctx.sections}
    paths = by_key["adaptive_paths"].set_index("setting")
    assert paths.loc["turn_bon_n4_adaptive", "choice_turns"] == 18
    assert paths.loc["turn_bon_n4_adaptive", "agreed_first"] == 12
    assert paths.loc["turn_bon_n4_adaptive", "selected"] == 6
    assert paths.loc["turn_bon_n4_adaptive", "agreed_share"] == pytest.approx(12 / 18)
    assert paths.loc["turn_bon_n4_adaptive", "samples_per_turn"] == pytest.approx(48 / 18)
    assert paths.loc["turn_bon_n4", "agreed_share"] == 0 and paths.loc["turn_bon_n4", "samples_per_turn"] == 4
    assert paths.loc["turn_bon_n4", "selector_calls"] == 3 and paths.loc["turn_bon_n4_adaptive", "selector_tokens"] == 110
    assert paths.loc["turn_bon_n4_adaptive", "generator_calls"] == 4
    assert paths.loc["turn_bon_n4_adaptive", "role"] == "adaptive vs turn_bon_n4"
    assert paths.loc["turn_bon_n4", "role"] == "plain" and len(paths) == 2
    # pass@1: plain 1, 0.5, 0 -> 0.5; adaptive 1, 0, 0.5 -> 0.5
    assert paths.loc["turn_bon_n4", "pass@1 (95% CI)"].startswith("50.0% [")

    cmp = by_key["adaptive_vs_plain"].set_index("metric")
    assert cmp.loc["pass@1", "plain"] == pytest.approx(0.5) and cmp.loc["pass@1", "adaptive"] == pytest.approx(0.5)
    assert cmp.loc["pass@1", "diff"] == pytest.approx(0.0)
    assert cmp.loc["pass@1", "ci_lo"] < 0 < cmp.loc["pass@1", "ci_hi"]  # tasks moved both ways
    assert cmp.loc["selector calls / trial", "diff"] == pytest.approx(-2)
    assert cmp.loc["selector calls / trial", "ci_lo"] == cmp.loc["selector calls / trial", "ci_hi"] == pytest.approx(-2)
    assert cmp.loc["selector tokens / trial", "diff"] == pytest.approx(110 - 330)
    assert cmp.loc["selector tokens / trial", "saved_share"] == pytest.approx(220 / 330)
    assert cmp.loc["generator input / trial", "diff"] == pytest.approx(800 - 1000)
    assert cmp.loc["generator output / trial", "diff"] == pytest.approx(150 - 200)
    assert cmp.loc["generator calls / trial", "diff"] == pytest.approx(4 - 3)
    assert cmp.loc["all tokens / trial", "diff"] == pytest.approx((950 + 110) - (1200 + 330))
    assert cmp.loc["turns / trial", "diff"] == 0
    assert set(cmp["tasks"]) == {3} and set(cmp["vs"]) == {"turn_bon_n4"}
    assert set(cmp["setting"]) == {"turn_bon_n4_adaptive"}
    # The files carry the sections too.
    assert (run / "report" / "adaptive_vs_plain.csv").is_file()
    assert "adaptive_paths" in json.loads((run / "report" / "summary.json").read_text())["tables"]


def test_no_adaptive_setting_no_section(tmp_path: Path) -> None:
    run = write_run(tmp_path, settings=("baseline", "turn_bon_n4"))
    ctx = build_report([run], Console(file=open(tmp_path / "out.txt", "w"), width=120), plots=False)
    assert not {"adaptive_paths", "adaptive_vs_plain"} & {s.key for s in ctx.sections}


def test_two_adaptive_settings_share_their_plain_pair(tmp_path: Path) -> None:
    run = write_run(tmp_path, settings=("turn_bon_n4", "turn_bon_n4_adaptive", "turn_bon_n4_all_agree"))
    df = tables.load_trials([run])
    assert adaptive_report.find_pairs(df) == [("turn_bon_n4", "turn_bon_n4_adaptive"),
                                              ("turn_bon_n4", "turn_bon_n4_all_agree")]
    ctx = build_report([run], Console(file=open(tmp_path / "out.txt", "w"), width=120), plots=False)
    by_key = {s.key: s.frame for s in ctx.sections}
    paths = by_key["adaptive_paths"].set_index("setting")
    assert list(paths.index) == ["turn_bon_n4", "turn_bon_n4_adaptive", "turn_bon_n4_all_agree"]  # plain once
    assert paths.loc["turn_bon_n4_all_agree", ["agreed_all", "selected", "samples_per_turn"]].tolist() == [6, 12, 4]
    cmp = by_key["adaptive_vs_plain"]
    assert cmp.groupby("setting").size().to_dict() == {"turn_bon_n4_adaptive": 8, "turn_bon_n4_all_agree": 8}
