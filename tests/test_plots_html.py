"""Tests for the report's plots (tbscale.analysis.plots) and the single-file HTML (tbscale.analysis.html)."""

from __future__ import annotations

import asyncio
import base64
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console
from test_behaviour_report import SUBMIT, cand, make_run, turn

from tbscale_testing.browser import Browser

from tbscale.analysis import html as H
from tbscale.posthoc import judge as J
from tbscale.analysis import plots as P
from tbscale.analysis import report as R
from tbscale.analysis.report import build_report

PNG = b"\x89PNG\r\n\x1a\n"
ALL_PLOTS = {"pass_at_k.png", "consistency_at_k.png", "turns_solved.png", "behaviour_preference.png",
             "turn_size.png", "pareto.png", "judge_rubrics.png"}


def _quiet() -> Console:
    return Console(file=open(os.devnull, "w"))


def _bon_run(tmp_path: Path) -> Path:
    edit, read, bad = cand("sed -i 's/a/b/' x.py"), cand("ls"), cand(None)
    trials = []
    for task in ("A", "B", "C", "D"):
        for trial in range(2):
            solved = task != "D" and (trial == 0 or task == "A")
            trials.append({"setting": "baseline", "task": task, "trial": trial, "n": 1, "passed": solved,
                           "turns": [turn([read]), turn([read]), turn([edit]), turn([cand("python x.py")]),
                                     turn([cand(SUBMIT)], output=SUBMIT)]})
            trials.append({"setting": "bon4", "task": task, "trial": trial, "n": 4, "passed": task != "D",
                           "tokens": {"generator": {"input": 900, "output": 200}, "selector": {"input": 500, "output": 30}},
                           "turns": [turn([edit, read, read, bad], pick=0), turn([cand("python x.py"), read, read, bad], pick=0),
                                     turn([cand(SUBMIT), read, read, bad], pick=0, output=SUBMIT)]})
    return make_run(tmp_path, trials)


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> R.ReportContext:
    run = _bon_run(tmp_path_factory.mktemp("plots"))
    cfg = J.JudgeConfig(models={"j": {"model": "sim/rubric_judge"}}, model="j")
    asyncio.run(J.run_judge(run, cfg))
    return build_report([run], _quiet(), compare=["baseline", "bon4"])


@pytest.mark.litellm
def test_every_plot_is_written(reported: R.ReportContext) -> None:
    names = {p.name for _, p in reported.images}
    assert ALL_PLOTS <= names  # other analysis modules may add plots of their own
    for _, path in reported.images:
        data = path.read_bytes()
        assert path.parent == reported.out_dir and data.startswith(PNG) and len(data) > 5_000, path
    md = (reported.out_dir / "report.md").read_text()
    for name in ALL_PLOTS:
        assert f"]({name})" in md


@pytest.mark.litellm
def test_html_is_one_file_with_every_table_and_plot(reported: R.ReportContext) -> None:
    page = (reported.out_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for sec in reported.sections:
        assert f"<h2>{H.html.escape(sec.title)}</h2>" in page, sec.key
    assert {s.key for s in reported.sections} >= {"summary", "pass_at_k", "costs", "endings", "compare",
                                                  "behaviour_preference", "behaviour_shares", "turn_size",
                                                  "judge_rubrics", "judge_rubrics_failures", "judge_counts",
                                                  "judge_reward_hacking", "pareto"}
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(reported.images) >= len(ALL_PLOTS)
    assert all(base64.b64decode(i).startswith(PNG) for i in images)
    # no external assets: nothing fetched from a URL or another file (links to the run's viewer aside)
    assert not re.search(r'(src|href)="(?!data:|#|\.\./view/index\.html)', page)
    assert "<link" not in page and "<script" not in page and "@import" not in page
    assert "SIMULATED MODELS" in page
    # percentages and significance are rendered like the markdown
    assert "% [" in page and 'class="num sig"' in page


def test_html_section_runs_last() -> None:
    order = [getattr(f, "__module__", "") for f in R.REPORT_SECTIONS]
    assert order.index("tbscale.analysis.html") == len(order) - 1
    assert order.index("tbscale.analysis.behaviour_report") < order.index("tbscale.analysis.judge_report") \
        < order.index("tbscale.analysis.plots")


def test_no_plots_no_html(tmp_path: Path) -> None:
    run = _bon_run(tmp_path)
    ctx = build_report([run], _quiet(), plots=False)
    assert ctx.images == [] and not (ctx.out_dir / "report.html").exists()
    assert "pareto" in {s.key for s in ctx.sections}


def test_plots_are_skipped_without_data(tmp_path: Path) -> None:
    run = make_run(tmp_path, [{"setting": "only", "task": "A", "trial": 0, "passed": False,
                               "turns": [turn([cand("ls")])]}])
    ctx = build_report([run], _quiet())
    names = {p.name for _, p in ctx.images}
    assert "behaviour_preference.png" not in names and "turns_solved.png" not in names and "judge_rubrics.png" not in names
    assert {"pass_at_k.png", "pareto.png"} <= names
    assert P.plot_preference(None, tmp_path / "x.png") is None and not (tmp_path / "x.png").exists()


def test_pareto_frontier() -> None:
    pts = [(100, 0.5), (200, 0.8), (150, 0.4), (300, 0.8), (50, 0.2), (200, 0.7), (400, 0.9)]
    assert P.pareto_frontier(pts) == [4, 0, 1, 6]
    assert P.pareto_frontier([(1, 0.5), (1, 0.5)]) == [0]
    assert P.pareto_frontier([(5, 0.1)]) == [0]


def test_pareto_frontier_counts_what_candidate_runs_added() -> None:
    # (tokens, exec seconds candidate runs added, pass@1): a lookahead setting that spends fewer
    # tokens but runs candidates is not beaten by one that spends more tokens and runs none; one
    # that costs more on both and passes less is.
    pts = [(1000, 0.0, 0.5), (800, 30.0, 0.6), (900, 40.0, 0.55), (1200, 0.0, 0.6)]
    assert P.pareto_frontier(pts) == [1, 0, 3]
    assert P.pareto_frontier([(800, 30.0, 0.6), (800, 0.0, 0.6)]) == [1]  # same tokens and pass, no exec: it wins


@pytest.mark.litellm
def test_pareto_table_uses_total_tokens(reported: R.ReportContext) -> None:
    pt = next(s.frame for s in reported.sections if s.key == "pareto").set_index("setting")
    assert pt.loc["bon4", "total_tokens"] == 900 + 200 + 500 + 30
    assert pt.loc["baseline", "total_tokens"] == 100 + 20
    assert pt["on_frontier"].all()  # bon4 costs more but passes more
    # No setting ran candidates in forks: the table is the one runs without lookahead always had.
    assert "candidate_execs" not in pt.columns and "candidate_exec_sec" not in pt.columns


@pytest.mark.litellm
def test_html_renders_in_headless_chromium(browser: Browser, reported: R.ReportContext, tmp_path: Path) -> None:
    from PIL import Image

    shot = browser.screenshot((reported.out_dir / "report.html").resolve().as_uri(), tmp_path / "shot.png", 1400, 2400)
    assert shot.is_file()
    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 2400)
    colors = img.getcolors(maxcolors=1_000_000)
    assert colors is not None and len(colors) > 50  # text, tables and the banner, not a blank page


@pytest.mark.litellm
def test_candidate_columns_and_the_joint_frontier_appear_with_lookahead(reported: R.ReportContext) -> None:
    from tbscale.analysis import plots, tables

    df = reported.df.copy()
    # The same run as if bon4 had been a lookahead setting: 3 commands per trial in forks, 2 s added.
    la = df["label"] == "bon4"
    df.loc[la, "candidate_execs"], df.loc[la, "candidate_exec_sec"] = 3.0, 2.0
    df.loc[~la, "candidate_execs"], df.loc[~la, "candidate_exec_sec"] = 0.0, 0.0
    costs = tables.costs(df, "baseline").set_index("setting")
    assert costs.loc["bon4", "candidate_execs"] == 3.0 and costs.loc["baseline", "candidate_exec_sec"] == 0.0
    pt = plots.pareto_table(df).set_index("setting")
    assert pt.loc["bon4", "candidate_exec_sec"] == 2.0 and pt["on_frontier"].all()
    # A setting no cheaper on either cost and no better on pass@1 is off the joint frontier.
    worse = df[la].assign(label="bon4_worse", passed=False, candidate_exec_sec=5.0)
    pt = plots.pareto_table(pd.concat([df, worse], ignore_index=True)).set_index("setting")
    assert not pt.loc["bon4_worse", "on_frontier"] and pt.loc["bon4", "on_frontier"]
    # Without any candidate run the tables are those of a run without lookahead.
    assert "candidate_execs" not in tables.costs(reported.df, "baseline").columns
