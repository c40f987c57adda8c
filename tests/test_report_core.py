"""`tbscale report` core tables on a hand-made run: values checked against hand arithmetic."""

import json
import subprocess
import sys

import pytest

from tbscale.analysis import tables

# task -> passes out of 4 trials, per setting
PASSES = {"baseline": {"a": 1, "b": 0, "c": 4}, "bon": {"a": 3, "b": 2, "c": 4}}


def write_run(root, name="r1"):
    run = root / name
    run.mkdir(parents=True)
    rows = []
    for setting, per_task in PASSES.items():
        for task, c in per_task.items():
            for i in range(4):
                passed = i < c
                gen_out = 100 if setting == "baseline" else 400
                rows.append({
                    "schema_version": 1, "run": name, "setting": setting, "setting_key": setting[:3],
                    "trial_key": f"{setting}-{task}-{i}", "task_id": task, "trial": i, "seed": i,
                    "agent": "bash", "policy": "baseline" if setting == "baseline" else "turn_bon",
                    "n": 1 if setting == "baseline" else 4, "trajectory": "single",
                    "generator_model": "sim/policy", "selector_model": None if setting == "baseline" else "sim/selector",
                    "simulated": True, "reward": float(passed), "passed": passed,
                    "ending": "pass" if passed else ("wrong_submission" if i % 2 else "time_limit"),
                    "turns": 10 if passed else 20, "cost_usd": 0.0,
                    "trajectory_path": f"trajectories/{task}/{setting}__t{i}.jsonl",
                    "tokens": {"generator": {"input": 1000, "output": gen_out, "reasoning": 0, "cached": 0, "calls": 10},
                               **({} if setting == "baseline" else
                                  {"selector": {"input": 500, "output": 50, "reasoning": 0, "cached": 0, "calls": 10}})},
                })
    (run / "trials.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return run


def test_summary_and_pass_k(tmp_path):
    df = tables.load_trials([write_run(tmp_path)])
    s = tables.summary(df, n_resamples=2000).set_index("setting")
    # baseline per-task rates 1/4, 0, 1 -> mean 5/12; bon 3/4, 2/4, 1 -> 9/12
    assert s.loc["baseline", "pass@1"] == pytest.approx(5 / 12)
    assert s.loc["bon", "pass@1"] == pytest.approx(9 / 12)
    assert s.loc["bon", "ci_lo"] <= 9 / 12 <= s.loc["bon", "ci_hi"]
    assert s.loc["baseline", "turns_solved"] == 10
    pk = tables.pass_k(df).set_index(["setting", "k"])
    # baseline pass@2: task a (n=4,c=1): 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; b: 0; c: 1 -> 0.5
    assert pk.loc[("baseline", 2), "pass_at_k"] == pytest.approx(0.5)
    # consistency@3 for bon: tasks with c >= 3: a (3), c (4) -> 2/3
    assert pk.loc[("bon", 3), "consistency_at_k"] == pytest.approx(2 / 3)
    # pass^2 for bon: a: C(3,2)/C(4,2)=0.5, b: C(2,2)/6=1/6, c: 1 -> (0.5+1/6+1)/3
    assert pk.loc[("bon", 2), "pass_hat_k"] == pytest.approx((0.5 + 1 / 6 + 1) / 3)


def test_costs_and_endings(tmp_path):
    df = tables.load_trials([write_run(tmp_path)])
    base = tables.baseline_label(df)
    assert base == "baseline"
    c = tables.costs(df, base).set_index("setting")
    assert c.loc["bon", "generator_out"] == 400 and c.loc["bon", "selector_out"] == 50
    assert c.loc["bon", "total_vs_baseline"] == pytest.approx(4.5)
    e = tables.endings(df).set_index("setting")
    # baseline: 5 passes of 12; failures alternate time_limit (even i) / wrong_submission (odd i)
    assert e.loc["baseline", "pass"] == pytest.approx(5 / 12)
    assert e.loc["baseline", ["pass", "wrong_submission", "out_of_context", "time_limit", "agent_error"]].sum() == pytest.approx(1)


def test_compare_paired(tmp_path):
    df = tables.load_trials([write_run(tmp_path)])
    cmp = tables.compare(df, "baseline", "bon", n_resamples=2000).set_index("metric")
    assert cmp.loc["pass@1", "diff"] == pytest.approx(4 / 12)
    assert cmp.loc["turns", "diff"] < 0
    assert 0 <= cmp.loc["pass@1", "p_value"] <= 1
    with pytest.raises(Exception, match="no setting named 'nope'"):
        tables.compare(df, "baseline", "nope")


def test_cli_report_writes_files(tmp_path):
    run = write_run(tmp_path)
    res = subprocess.run([sys.executable, "-m", "tbscale.cli", "report", str(run), "--compare", "baseline", "bon",
                          "--no-plots"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "SIMULATED MODELS" in res.stdout
    for name in ("report.md", "summary.json", "summary.csv", "pass_at_k.csv", "costs.csv", "endings.csv", "compare.csv"):
        assert (run / "report" / name).is_file(), name
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["simulated"] and summary["baseline"] == "baseline"
    assert "41.7%" in (run / "report" / "report.md").read_text()  # baseline pass@1 = 5/12


# Runs the CLI as `tbscale` does, and says at exit which heavy modules the process imported.
IMPORTS_AT_EXIT = ("import atexit, sys\n"
                   "atexit.register(lambda: print('imported:', *sorted(m for m in ('pandas', 'numpy', 'litellm') "
                   "if m in sys.modules), file=sys.stderr))\n"
                   "sys.argv[0] = 'tbscale'\n"
                   "import runpy; runpy.run_module('tbscale.cli', run_name='__main__')\n")


@pytest.mark.parametrize("command, message", [("report", "no such run folder"), ("rewards", "no such run folder"),
                                              ("judge", "not a run folder (no trials.jsonl)")])
def test_a_missing_run_folder_is_one_line_said_before_the_analyses_are_imported(tmp_path, command, message):
    res = subprocess.run([sys.executable, "-c", IMPORTS_AT_EXIT, command, str(tmp_path / "none")],
                         capture_output=True, text=True)
    lines = res.stderr.splitlines()
    assert res.returncode == 2 and lines[0] == f"error: {tmp_path / 'none'}: {message}", res.stderr
    assert lines[-1] == "imported:", res.stderr  # no pandas, numpy or litellm: the answer comes at once


def test_reward_keys_average_the_trials_whose_reward_json_names_no_reward_key(tmp_path):
    """A reward.json with several keys and no `reward` (Harbor's multi-reward recipe) gives no
    verdict: pass@1 leaves the trial out, and the reward_keys table still averages its keys, as
    Harbor's mean metric does; a trial with tampering recorded is not averaged."""
    from typer.testing import CliRunner

    from tbscale.cli import app

    run = tmp_path / "mk"
    run.mkdir()

    def line(i, rewards, **kw):
        return {"schema_version": 1, "run": "mk", "setting": "oracle", "setting_key": "o", "trial_key": f"t{i}",
                "task_id": "multi-reward", "trial": i, "agent": "oracle", "reward": None, "passed": False,
                "ending": "verifier_error", "stop_reason": "reward_missing", "infra_error": True,
                "rewards": rewards, "trajectory_path": f"trajectories/multi-reward/oracle__t{i}.jsonl", **kw}

    rows = [line(0, {"correctness": 1.0, "performance": 0.5}), line(1, {"correctness": 0.0, "performance": 1.0}),
            line(2, {"correctness": 1.0, "performance": 1.0},
                 tampering=[{"kind": "reward_file_written", "source": "environment"}]),
            # the agent's failure (scored, so in pass@1's trials), counted once
            {**line(4, {"correctness": 0.0, "performance": 0.0}), "infra_error": False},
            {**line(3, {"correctness": 1.0, "performance": 0.0}), "task_id": "keyed", "reward": 1.0,
             "passed": True, "ending": "pass", "stop_reason": None, "infra_error": False, "reward_key": "correctness",
             "trajectory_path": "trajectories/keyed/oracle__t3.jsonl"}]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = CliRunner().invoke(app, ["report", str(run), "--no-plots", "--format", "json"])
    assert out.exit_code == 0, out.output
    keys = {r["task"]: r for r in json.loads(out.stdout)["tables"]["reward_keys"]}
    assert keys["multi-reward"] == {"setting": "oracle", "task": "multi-reward", "trials": 3, "no_verdict": 2,
                                    "reward_key": "-", "key_means": "correctness=0.333, performance=0.5"}
    assert keys["keyed"]["no_verdict"] == 0 and keys["keyed"]["reward_key"] == "correctness"
