"""The trial table (rundata/trials.py) reads trial lines through the one reader every reader uses
(runfiles.trial_chunks, the typed model): it takes exactly the lines the model takes, gives the
values the model gives, and reports the others as the typed reader does. Generated lines are
checked the same way in test_trial_lines_property.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tbscale.errors import TbscaleError
from tbscale.jsonl import ReadProblems
from tbscale.runfiles import read_trials
from tbscale.rundata import read_trial_table
from tbscale.rundata.compact import unpack_json
from tbscale.rundata.trials import ROLES, TOKEN_KINDS

BASE = {"schema_version": 2, "run": "r", "setting": "s", "setting_key": "k", "task_id": "t", "ending": "pass"}
USAGE = {"input": 10, "output": 5, "reasoning": 1, "cached": 2, "cost_usd": 0.5, "calls": 3}
ATTEMPT = {"index": 0, "label": "iter0", "stage": "iter0", "ending": "pass", "passed": True, "turns": 4,
           "context": [], "usage": {"generator": USAGE}}

GOOD = [
    {},  # every optional field left to its default
    {"tokens": {"generator": USAGE, "selector": {"output": 7}, "planner": {"input": 3, "output": 4}},
     "timing": {"trial_wall": 3, "agent": 1.5}, "reward": 1, "cost_usd": None, "policy_params": {"n": 4, "a": [1]},
     "simulated_roles": ["selector"], "seed": None, "rewards": {"a": 1, "b": 0.5}, "reward_key": "a"},
    {"n_attempts": 2, "attempts": [ATTEMPT, {"index": 1, "label": "x", "stage": "iter1", "ending": "time_limit",
                                             "reward": 0, "usage": {"judge": {"calls": 1}}}],
     "strategy_record": {"kind": "pdr", "stages": [{"stage": "final", "kind": "select", "selected": [1]}]},
     "error": {"type": "Timeout", "message": "m"}, "steps": [{"name": "one", "reward": 1, "passed": True}]},
    # Values the model coerces (a number as a string, a whole float for an int): the model's values win.
    {"turns": "7", "passed": 1, "tokens": {"generator": {"input": "12"}}},
]
BAD = [
    {"surprise": 1},  # a field the model does not declare
    {"turns": "many"},
    {"tokens": {"generator": {"input": 1, "tokenz": 2}}},
    {"attempts": [dict(ATTEMPT, turns="x")], "n_attempts": 2},
    {"timing": {"agent": "slow"}},
    # Verdicts that cannot be true: corrupt, never counted (let alone as a pass).
    {"reward": float("nan"), "passed": True},
    {"rewards": {"a": float("inf")}},
    {"passed": True, "reward": 0.25},
    {"passed": True, "ending": "wrong_submission", "reward": 1.0},
    {"attempts": [dict(ATTEMPT, reward=float("nan"))], "n_attempts": 2},
    # Names and paths that would lead a reader (the viewer, an export) out of the run folder.
    {"trajectory_path": "../../../etc/passwd"},
    {"setting": "../x"},
]


def _lines(tmp_path: Path) -> tuple[Path, list[dict]]:
    run = tmp_path / "run"
    run.mkdir()
    rows = [dict(BASE, trial_key=f"g{i}", trial=i, **extra) for i, extra in enumerate(GOOD)]
    rows[3]["trial"] = 3.0  # a whole float for an int
    text = "".join(json.dumps(r) + "\n" for r in rows)
    text += "".join(json.dumps(dict(BASE, trial_key=f"b{i}", trial=10 + i, **extra)) + "\n" for i, extra in enumerate(BAD))
    missing = dict(BASE, trial_key="m", trial=20)
    del missing["ending"]
    text += json.dumps(missing) + "\n" + "[1, 2]\n" + "not json\n" + '{"schema_version": 2, "run": "r", "tor'
    (run / "trials.jsonl").write_text(text)
    return run, rows


def test_values_are_the_models_and_problems_those_of_the_typed_reader(tmp_path: Path) -> None:
    run, rows = _lines(tmp_path)
    table = read_trial_table([run])
    expected = ReadProblems(run / "trials.jsonl")
    models = list(read_trials(run / "trials.jsonl", expected))
    assert table.problems[0].corrupt == expected.corrupt and len(expected.corrupt) == len(BAD) + 3
    assert table.problems[0].torn_last_line and expected.torn_last_line
    df = table.df.set_index("trial_key")
    assert list(df.index) == [m.trial_key for m in models] == [f"g{i}" for i in range(len(GOOD))]
    for m in models:
        row = df.loc[m.trial_key]
        for name in ("trial", "turns", "passed", "n_attempts", "seed", "selector_model", "reward_key"):
            value = row[name]
            assert value == getattr(m, name) or (getattr(m, name) is None and (value is None or value != value))
        assert row["reward"] == m.reward or (m.reward is None and math.isnan(row["reward"]))
        assert row["cost_usd"] == m.cost_usd or (m.cost_usd is None and math.isnan(row["cost_usd"]))
        assert row["trial_wall"] == m.timing.get("trial_wall", math.nan) or "trial_wall" not in m.timing
        assert tuple(row["simulated_roles"]) == tuple(m.simulated_roles)
        assert row["rewards"] == m.rewards or (m.rewards is None and row["rewards"] is None)
        assert row["policy_params"] == (json.dumps(m.policy_params, sort_keys=True) if m.policy_params else None) \
            or (not m.policy_params and row["policy_params"] != row["policy_params"])
        for role in ROLES:
            u = m.tokens.get(role)
            for kind in TOKEN_KINDS:
                assert row[f"{role}_{kind}"] == (float(getattr(u, kind)) if u else 0.0)
        other = [u for role, u in m.tokens.items() if role not in ROLES]
        assert row["other_input"] == sum(u.input for u in other)
        if m.n_attempts > 1:
            assert unpack_json(row["attempts"]) == [a.model_dump() for a in m.attempts]
            assert unpack_json(row["strategy_record"]) == m.strategy_record
            assert row["steps"] == [s.model_dump() for s in m.steps] and row["error_type"] == m.error.type
    coerced = df.loc["g3"]
    assert coerced["turns"] == 7 and coerced["generator_input"] == 12.0 and bool(coerced["passed"])


def test_a_newer_schema_version_stops_the_read(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    lines = [dict(BASE, trial_key="a", trial=0), dict(BASE, trial_key="b", trial=1, schema_version=99)]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(TbscaleError, match="schema version 99 is newer"):
        read_trial_table([run])


def test_a_rerun_line_supersedes_the_earlier_one_across_chunks(tmp_path: Path, monkeypatch) -> None:
    from tbscale import runfiles

    monkeypatch.setattr(runfiles, "CHUNK_LINES", 2)  # the rerun lands in another chunk
    run = tmp_path / "run"
    run.mkdir()
    rows = [dict(BASE, trial_key=k, trial=t, turns=n) for k, t, n in (("a", 0, 1), ("b", 1, 2), ("c", 2, 3),
                                                                      ("a2", 0, 9))]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    df = read_trial_table([run]).df
    assert list(df["trial_key"]) == ["b", "c", "a2"] and list(df["turns"]) == [2, 3, 9]
