"""What forks cost in the report (docs/forks-and-lookahead.md, docs/analysis.md): the cost table
carries forks per trial and the seconds spent taking snapshots and starting forks, the Pareto
frontier counts those seconds with the exec seconds candidates added, and the Pareto plot shows
that second cost. A run without forks keeps the tables it always had."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from tbscale.analysis import plots, tables
from tbscale.analysis.report import build_report, core_sections
from tbscale.types.results import TrialResult

NO_FORK_COSTS = ["setting", "generator_out", "selector_out", "other_out", "total_out", "total_vs_baseline",
                 "input_tokens", "avg_turns", "cost_usd"]
NO_FORK_PARETO = ["setting", "total_tokens", "pass@1", "ci_lo", "ci_hi", "on_frontier"]


def _line(setting: str, task: str, trial: int, passed: bool, tokens: int, *, snapshot_sec: tuple = (),
          fork_sec: tuple = (), execs: int = 0, exec_sec: float = 0.0) -> TrialResult:
    return TrialResult(
        schema_version=2, run="r", setting=setting, setting_key=setting, trial_key=f"{setting}-{task}-{trial}",
        task_id=task, trial=trial, reward=float(passed), passed=passed, ending="pass" if passed else "wrong_submission",
        turns=3, snapshots=len(snapshot_sec), snapshot_sec=list(snapshot_sec), forks=len(fork_sec),
        fork_sec=list(fork_sec), candidate_execs=execs, candidate_exec_sec=exec_sec,
        tokens={"generator": {"input": tokens, "output": 0, "calls": 3}}, cost_usd=0.0)


def _run(folder: Path, lines: list[TrialResult]) -> Path:
    folder.mkdir(parents=True)
    (folder / "trials.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in lines))
    return folder


def _report(run: Path):
    return build_report([run], Console(file=open(os.devnull, "w")), plots=False,
                        sections=[core_sections, plots.plot_sections])


def _section(ctx, key: str):
    return next(s for s in ctx.sections if s.key == key)


def test_the_cost_table_gives_forks_and_their_seconds_per_trial_beside_the_candidate_executions(tmp_path):
    lines = []
    for task in ("a", "b"):
        lines.append(_line("plain", task, 0, True, 1000))
        # Lookahead: 4 forks and 1 snapshot in one trial, 2 and 2 in the other.
        lines.append(_line("lookahead", task, 0, True, 800, snapshot_sec=(0.5,), fork_sec=(1.0, 1.0, 0.5, 0.5),
                           execs=4, exec_sec=1.5))
        lines.append(_line("lookahead", task, 1, False, 800, snapshot_sec=(0.5, 0.25), fork_sec=(2.0, 1.0),
                           execs=2, exec_sec=0.5))
        # CER continuing its prefixes from forks: forks, and no candidate commands.
        lines.append(_line("cer_fork", task, 0, True, 900, snapshot_sec=(0.2, 0.2), fork_sec=(0.8, 0.8)))
    ctx = _report(_run(tmp_path / "r", lines))
    costs = _section(ctx, "costs")
    assert list(costs.frame.columns) == [*NO_FORK_COSTS, "candidate_execs", "candidate_exec_sec", "forks",
                                         "snapshot_fork_sec"]
    t = costs.frame.set_index("setting")
    assert t.loc["lookahead", "forks"] == 3 and t.loc["lookahead", "candidate_execs"] == 3
    assert t.loc["lookahead", "snapshot_fork_sec"] == pytest.approx((3.5 + 3.75) / 2)
    assert t.loc["cer_fork", "forks"] == 2 and t.loc["cer_fork", "snapshot_fork_sec"] == pytest.approx(2.0)
    assert t.loc["cer_fork", "candidate_execs"] == 0
    assert t.loc["plain", "forks"] == 0 and t.loc["plain", "snapshot_fork_sec"] == 0
    assert "forks and snapshot_fork_sec: forks started per trial" in costs.note
    md = (ctx.out_dir / "report.md").read_text()
    assert "| candidate_execs | candidate_exec_sec | forks | snapshot_fork_sec |" in md
    assert "| lookahead | 0 | 0 | 0 | 0 | - | 800 | 3 | 0 | 3 | 1 | 3 | 3.62 |" in md

    # CER on forks alone: the fork columns without the candidate ones.
    cer = tables.costs(tables.load_trials([_run(tmp_path / "cer", [x for x in lines if x.setting != "lookahead"])]),
                       None)
    assert list(cer.columns) == [*NO_FORK_COSTS, "forks", "snapshot_fork_sec"]


def test_fork_seconds_put_a_setting_off_the_pareto_frontier_and_the_plot_draws_that_frontier(tmp_path):
    # Same tokens and pass@1; `cheap_execs` adds fewer candidate exec seconds (1 against 2) but
    # spends 8 s a trial on snapshots and forks, `cheap_forks` 1 s: counted together (9 s against
    # 3 s), `cheap_execs` is the one beaten.
    lines = []
    for task in ("a", "b"):
        for trial, passed in enumerate((True, False)):
            lines.append(_line("cheap_execs", task, trial, passed, 2000, snapshot_sec=(2.0,),
                               fork_sec=(2.0, 2.0, 2.0), execs=3, exec_sec=1.0))
            lines.append(_line("cheap_forks", task, trial, passed, 2000, snapshot_sec=(0.25,),
                               fork_sec=(0.25, 0.25, 0.25), execs=3, exec_sec=2.0))
    run = _run(tmp_path / "r", lines)
    pt = plots.pareto_table(tables.load_trials([run]))
    assert list(pt.columns) == ["setting", "total_tokens", "candidate_execs", "candidate_exec_sec", "forks",
                                "snapshot_fork_sec", "pass@1", "ci_lo", "ci_hi", "on_frontier"]
    by = pt.set_index("setting")
    assert by.loc["cheap_execs", "snapshot_fork_sec"] == 8.0 and by.loc["cheap_forks", "snapshot_fork_sec"] == 1.0
    assert not by.loc["cheap_execs", "on_frontier"] and by.loc["cheap_forks", "on_frontier"]
    note = _section(_report(run), "pareto").note
    assert "environment seconds (candidate_exec_sec + snapshot_fork_sec)" in note

    # The plot: pass@1 against each cost, the frontier's settings ringed where the table puts them.
    fig = plots.pareto_figure(pt)
    try:
        tokens_ax, env_ax = fig.axes
        assert "environment seconds" in env_ax.get_xlabel() and "tokens" in tokens_ax.get_xlabel()
        rings = [c for c in env_ax.collections if c.get_label().startswith("on the Pareto frontier")]
        assert len(rings) == 1
        assert np.allclose(rings[0].get_offsets(), [[2.0 + 1.0, 50.0]])  # cheap_forks: 3 s, pass@1 50%
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    assert plots.plot_pareto(pt, tmp_path / "pareto.png").read_bytes().startswith(b"\x89PNG")


def test_the_fork_columns_appear_only_once_a_trial_has_forks(tmp_path):
    lines = [_line(s, task, 0, passed, tokens) for s, passed, tokens in (("plain", True, 1000), ("bon", False, 3000))
             for task in ("a", "b")]
    ctx = _report(_run(tmp_path / "none", lines))
    assert list(_section(ctx, "costs").frame.columns) == NO_FORK_COSTS
    pareto = _section(ctx, "pareto")
    assert list(pareto.frame.columns) == NO_FORK_PARETO
    assert pareto.note.endswith("on_frontier: no other setting has both fewer tokens and a higher pass@1.")
    md = (ctx.out_dir / "report.md").read_text()
    assert "forks" not in md and "snapshot_fork_sec" not in md and "candidate_exec" not in md

    # One trial of the same run with a fork brings the fork columns, and only them.
    forked = [*lines, _line("bon", "c", 0, False, 3000, snapshot_sec=(0.5,), fork_sec=(1.5,))]
    ctx = _report(_run(tmp_path / "one", forked))
    assert list(_section(ctx, "costs").frame.columns) == [*NO_FORK_COSTS, "forks", "snapshot_fork_sec"]
    assert list(_section(ctx, "pareto").frame.columns) == [*NO_FORK_PARETO[:2], "forks", "snapshot_fork_sec",
                                                           *NO_FORK_PARETO[2:]]
