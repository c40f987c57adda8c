"""`tbscale report`: the tables in the terminal (rich), and under each run's report/ folder as
markdown, CSV and summary.json. Further sections (behaviours, judge, stages, plots, HTML) are
added by the analysis modules that compute them, through `SECTIONS`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from rich.console import Console
from rich.table import Table

from tbscale.analysis import tables


@dataclass
class Section:
    key: str
    title: str
    frame: pd.DataFrame
    note: str = ""
    percent_cols: tuple[str, ...] = ()


@dataclass
class ReportContext:
    df: pd.DataFrame
    run_dirs: list[Path]
    out_dir: Path
    baseline: str | None
    compare: list[str] | None = None
    plots: bool = True
    sections: list[Section] = field(default_factory=list)
    images: list[tuple[str, Path]] = field(default_factory=list)
    simulated: bool = False


# Extra sections: callables that append to ctx.sections / ctx.images, run in order after the
# core tables. Each analysis module registers its own with `section`; the modules listed in
# SECTION_MODULES are imported when a report is built (absent ones are skipped).
SECTIONS: list[Callable[[ReportContext], None]] = []
SECTION_MODULES = ["tbscale.analysis.behaviour_report", "tbscale.analysis.stages", "tbscale.analysis.judge",
                   "tbscale.analysis.cer_report", "tbscale.analysis.plots", "tbscale.analysis.html"]


def section(fn: Callable[[ReportContext], None]) -> Callable[[ReportContext], None]:
    if fn not in SECTIONS:
        SECTIONS.append(fn)
    return fn


def _load_sections() -> None:
    import importlib

    for mod in SECTION_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


def _fmt(v: Any, pct: bool) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{100 * v:.1f}%" if pct else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}")
    return str(v)


def core_sections(ctx: ReportContext) -> None:
    df = ctx.df
    s = tables.summary(df)
    s["pass@1 (95% CI)"] = [f"{100 * m:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"
                            for m, lo, hi in zip(s["pass@1"], s["ci_lo"], s["ci_hi"])]
    ctx.sections.append(Section("summary", "Pass rate per setting", s[[
        "setting", "policy", "N", "trajectory", "generator", "selector", "tasks", "trials", "pass@1 (95% CI)",
        "turns_mean", "turns_solved", "cost_usd_per_trial"]],
        "pass@1 is the mean over tasks of each task's pass rate over its trials; the interval is a "
        "percentile bootstrap over tasks (10,000 resamples)."))
    ctx.sections.append(Section("pass_at_k", "pass@k, pass^k and consistency@k", tables.pass_k(df),
                                "pass@k: unbiased estimator (Chen et al. 2021); pass^k: all k of k succeed "
                                "(tau-bench); consistency@k: share of tasks solved in at least k trials (turn-bon).",
                                ("pass_at_k", "pass_hat_k", "consistency_at_k")))
    ctx.sections.append(Section("costs", "Tokens per attempt (turn-bon Table 1)", tables.costs(df, ctx.baseline),
                                f"Output tokens per trial, averaged over trials; total_vs_baseline = (all output) / "
                                f"baseline generator output; baseline = {ctx.baseline or 'none found'}."))
    ctx.sections.append(Section("endings", "How attempts end (turn-bon Table 2)", tables.endings(df),
                                "", tuple(e for e in tables.ENDINGS)))
    if ctx.compare:
        if len(ctx.compare) != 2:
            from tbscale.errors import TbscaleError

            raise TbscaleError("--compare takes exactly two setting names")
        a, b = ctx.compare
        ctx.sections.append(Section("compare", f"{b} vs {a} (paired bootstrap over tasks)",
                                    tables.compare(df, a, b), "diff = B - A; p is two-sided."))


def rich_table(section: Section) -> Table:
    t = Table(title=section.title, title_justify="left", show_lines=False)
    for col in section.frame.columns:
        t.add_column(str(col), overflow="fold")
    for _, row in section.frame.iterrows():
        t.add_row(*[_fmt(v, c in section.percent_cols) for c, v in row.items()])
    return t


def markdown(section: Section) -> str:
    cols = list(section.frame.columns)
    lines = [f"## {section.title}", ""]
    if section.note:
        lines += [section.note, ""]
    lines.append("| " + " | ".join(map(str, cols)) + " |")
    lines.append("|" + "---|" * len(cols))
    for _, row in section.frame.iterrows():
        lines.append("| " + " | ".join(_fmt(v, c in section.percent_cols) for c, v in row.items()) + " |")
    return "\n".join(lines) + "\n"


def build_report(paths: list[Path], console: Console, *, compare: list[str] | None = None, plots: bool = True,
                 baseline: str | None = None, out_dir: Path | None = None) -> ReportContext:
    run_dirs = tables.find_run_dirs(paths)
    df = tables.load_trials(run_dirs)
    target = out_dir or (run_dirs[0] / "report" if len(run_dirs) == 1 else Path(paths[0]) / "report")
    ctx = ReportContext(df=df, run_dirs=run_dirs, out_dir=target, baseline=tables.baseline_label(df, baseline),
                        compare=compare, plots=plots, simulated=bool(df["simulated"].any()))
    core_sections(ctx)
    _load_sections()
    for extra in SECTIONS:
        extra(ctx)
    write(ctx, console)
    return ctx


def write(ctx: ReportContext, console: Console) -> None:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    banner = ("SIMULATED MODELS: these runs used tbscale's embedded simulated model (sim/...), not a language "
              "model. The numbers exercise the harness and the strategies' mechanics only.")
    if ctx.simulated:
        console.print(f"[bold yellow]{banner}[/]")
    md = ["# tbscale report", "", f"Runs: {', '.join(str(r) for r in ctx.run_dirs)}", ""]
    if ctx.simulated:
        md += [f"> **{banner}**", ""]
    summary: dict[str, Any] = {"runs": [str(r) for r in ctx.run_dirs], "simulated": ctx.simulated,
                               "baseline": ctx.baseline, "tables": {}}
    for sec in ctx.sections:
        console.print(rich_table(sec))
        if sec.note:
            console.print(f"[dim]{sec.note}[/]")
        md.append(markdown(sec))
        sec.frame.to_csv(ctx.out_dir / f"{sec.key}.csv", index=False)
        summary["tables"][sec.key] = json.loads(sec.frame.to_json(orient="records"))
    for title, img in ctx.images:
        md.append(f"## {title}\n\n![{title}]({img.name})\n")
    (ctx.out_dir / "report.md").write_text("\n".join(md))
    (ctx.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    console.print(f"report written to {ctx.out_dir}")
