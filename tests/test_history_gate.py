"""The nightly regression gate (`tbscale history --check`): a tracked setting's newest pass@1 is
compared with its previous date's by a paired bootstrap over their shared tasks; a drop whose whole
interval lies below zero fails, noise passes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tbscale.cli import app
from tbscale.sweeps import HistoryLine, compare_lines, regressions
from tbscale_testing.tasks import write_harbor_task


def line(date: str, rates: dict[str, float], setting: str = "baseline", run: str = "demo__trials-4",
         sweep: str = "nightly") -> HistoryLine:
    return HistoryLine(sweep=sweep, date=date, run=run, setting=setting, git_commit="abc", tasks=len(rates),
                       trials=4 * len(rates), pass_at_1=float(np.mean(list(rates.values()))), ci_lo=0.0, ci_hi=1.0,
                       turns_mean=5.0, total_out_tokens=1000, task_pass_rates=rates)


def draw(rng: np.random.Generator, p: np.ndarray, trials: int = 4) -> dict[str, float]:
    """Per-task pass rates of one night: `trials` Bernoulli trials per task at the task's rate."""
    return {f"task{i}": float(rng.binomial(trials, pi) / trials) for i, pi in enumerate(p)}


def write(path: Path, lines: list[HistoryLine]) -> Path:
    path.write_text("".join(json.dumps(x.model_dump(exclude_unset=True)) + "\n" for x in lines))
    return path


def test_a_constructed_drop_fails_the_gate(tmp_path):
    rng = np.random.default_rng(1)
    p = rng.uniform(0.2, 0.9, size=30)
    before = draw(rng, p)
    after = draw(rng, np.clip(p - 0.3, 0, 1))  # every task got 30 points harder
    (c,) = regressions([line("2026-11-28", before), line("2026-11-29", after)])
    assert c.regression and c.hi < 0 and c.tasks == 30
    assert c.diff == pytest.approx(c.current - c.previous)
    res = CliRunner().invoke(app, ["history", str(write(tmp_path / "h.jsonl", [line("2026-11-28", before),
                                                                                 line("2026-11-29", after)])),
                                   "--check"])
    assert res.exit_code == 1, res.output
    assert "regression: nightly demo__trials-4 baseline" in res.output


def test_noise_passes_the_gate(tmp_path):
    # Twenty nights of the same setting at unchanged per-task rates: the gate's false alarm rate
    # is about alpha per comparison; at 5% it should not fire more than a couple of times.
    alarms = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        p = rng.uniform(0.1, 0.9, size=20)
        comps = regressions([line("2026-11-28", draw(rng, p)), line("2026-11-29", draw(rng, p))])
        alarms += comps[0].regression
    assert alarms <= 2
    rng = np.random.default_rng(7)
    p = rng.uniform(0.1, 0.9, size=20)
    a, b = sorted([draw(rng, p), draw(rng, p)], key=lambda r: -np.mean(list(r.values())))
    assert np.mean(list(b.values())) < np.mean(list(a.values()))  # pass@1 did drop, by chance
    path = write(tmp_path / "h.jsonl", [line("2026-11-28", a), line("2026-11-29", b)])
    res = CliRunner().invoke(app, ["history", str(path), "--check"])
    assert res.exit_code == 0, res.output
    assert "no regression (1 setting(s) compared)" in res.output


def test_only_newest_against_previous_date_per_tracked_setting():
    rng = np.random.default_rng(3)
    good = {f"task{i}": 1.0 for i in range(12)}
    bad = {f"task{i}": 0.0 for i in range(12)}
    lines = [line("2026-11-27", good), line("2026-11-28", bad),  # an old drop, already reported
             line("2026-11-29", bad),  # newest vs previous: flat
             line("2026-11-28", good, setting="turn_bon"), line("2026-11-29", good, setting="turn_bon"),
             line("2026-11-29", bad, setting="pdr"),  # one date only: nothing to compare
             line("2026-11-28", good, sweep="other"), line("2026-11-29", bad, sweep="other")]
    comps = {(c.sweep, c.setting): c for c in regressions(lines)}
    assert set(comps) == {("nightly", "baseline"), ("nightly", "turn_bon"), ("other", "baseline")}
    assert not comps[("nightly", "baseline")].regression and comps[("nightly", "baseline")].previous_date == "2026-11-28"
    assert comps[("other", "baseline")].regression
    assert [c.setting for c in regressions(lines, sweep="nightly") if c.regression] == []
    # A rerun on the same date supersedes that date's earlier line.
    again = lines + [line("2026-11-29", good, sweep="other")]
    assert not [c for c in regressions(again, sweep="other") if c.regression]
    del rng


def test_only_shared_tasks_are_paired_and_old_lines_are_not_compared():
    a = {f"t{i}": 1.0 for i in range(10)}
    b = {f"t{i}": 0.0 for i in range(5, 15)}  # t5..t9 shared, all dropped
    c = compare_lines(line("2026-11-28", a), line("2026-11-29", b))
    assert c.tasks == 5 and c.previous == 1.0 and c.current == 0.0 and c.regression
    old = HistoryLine.model_validate(line("2026-11-28", a).model_dump(exclude={"task_pass_rates"}))
    c = compare_lines(old, line("2026-11-29", b))
    assert not c.regression and "no per-task pass rates" in c.note
    c = compare_lines(line("2026-11-28", {"t0": 1.0}), line("2026-11-29", {"t0": 0.0}))
    assert not c.regression and "fewer than 2" in c.note


@pytest.mark.docker
def test_sweep_history_carries_task_rates_and_the_gate_reads_it(tmp_path):
    for name in ("g1", "g2"):
        write_harbor_task(tmp_path / "tasks", name)
    (tmp_path / "exp.yaml").write_text(textwrap.dedent(f"""
        name: gate
        tasks: {{path: {tmp_path / 'tasks'}}}
        settings:
          - {{name: oracle, agent: oracle}}
          - {{name: nop, agent: nop}}
    """))
    for date in ("2026-11-28", "2026-11-29"):
        (tmp_path / "sweep.yaml").write_text(textwrap.dedent(f"""
            name: gate-test
            configs: [exp.yaml]
            output_dir: {tmp_path / 'sweeps'}
            history: {tmp_path / 'history.jsonl'}
            date: {date}
        """))
        res = subprocess.run([sys.executable, "-m", "tbscale.cli", "sweep", str(tmp_path / "sweep.yaml")],
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert {x["setting"]: x["task_pass_rates"] for x in lines} == {"oracle": {"g1": 1.0, "g2": 1.0},
                                                                   "nop": {"g1": 0.0, "g2": 0.0}}
    check = [sys.executable, "-m", "tbscale.cli", "history", str(tmp_path / "history.jsonl"), "--check"]
    res = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "no regression (2 setting(s) compared)" in res.stdout, res.stdout + res.stderr
    # The oracle stops passing on the newest night: the gate fails and names it.
    lines[-2 if lines[-2]["setting"] == "oracle" else -1]["task_pass_rates"] = {"g1": 0.0, "g2": 0.0}
    write(tmp_path / "history.jsonl", [HistoryLine.model_validate(x) for x in lines])
    res = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "regression: gate-test gate oracle" in res.stdout, res.stdout + res.stderr
