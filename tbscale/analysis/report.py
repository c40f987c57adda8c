"""`tbscale report`: the tables in the terminal (rich), and under each run's report/ folder as
markdown, CSV and summary.json, with plots and a single-file HTML report.

The sections run in a fixed order (REPORT_SECTIONS): the core tables, then each analysis that has
something to say about the run (behaviours, stages, the judge's results, CER), then the plots and
the HTML that draw on all of them. The caller may pass its own list.

In the terminal each table is laid out for the console's width (`report_console`: the terminal's
width, or COLUMNS when output is not a terminal, default 120): its key columns first
(TERMINAL_COLUMNS), a difference and its interval folded into one column, and the least important
columns left out, with a line naming them, until the table fits. The files (report.md, the CSVs,
summary.json) always hold every column. `render(ctx, fmt)` gives one of them as text, for
`tbscale report --format md|csv|json`.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from rich.console import Console
from rich.cells import cell_len
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tbscale.analysis import (
    adaptive_report,
    behaviour_report,
    cer_report,
    fork_report,
    html,
    judge_report,
    plots,
    published,
    stages,
    tables,
    task_rewards,
)
from tbscale.analysis.context import ReportContext, Section, fmt
from tbscale.errors import TbscaleError
from tbscale.names import remove_made_folders, writable_folder
from tbscale.rundata import read_trial_table
from tbscale.rundata.compact import system_allocator
from tbscale.rundata.spend import spend_totals
from tbscale.rundata.trials import ROLES

SectionFn = Callable[[ReportContext], None]
FALLBACK_WARNING = 0.05  # above this share of selector fallbacks, a setting's selection is flagged


def completeness(ctx: ReportContext) -> pd.DataFrame:
    """Per setting label: the trials its runs' plans hold and those that finished (have a line of
    the current configuration, for a task of the plan). Runs without a recorded plan are left out."""
    every = ctx.all_trials if ctx.all_trials is not None else ctx.df
    names = [s for plan in ctx.plans for s in plan.planned]
    rows = []
    for plan in ctx.plans:
        mine = every[every["run_dir"] == plan.run_dir]
        for setting, n in plan.planned.items():
            sub = mine[mine["setting"] == setting]
            if plan.tasks is not None:
                sub = sub[sub["task_id"].isin(plan.tasks)]
            label = sub["label"].iloc[0] if len(sub) else (
                f"{Path(plan.run_dir).name}/{setting}" if names.count(setting) > 1 else setting)
            rows.append({"setting": label, "planned": n, "finished": min(len(sub), n)})
    if not rows:
        return pd.DataFrame(columns=["setting", "planned", "finished"])
    return pd.DataFrame(rows).groupby("setting", sort=False, as_index=False)[["planned", "finished"]].sum()


def incomplete_banner(ctx: ReportContext, done: pd.DataFrame) -> str | None:
    missing = done[done["finished"] < done["planned"]]
    if missing.empty:
        return None
    planned, finished = int(done["planned"].sum()), int(done["finished"].sum())
    per = "; ".join(f"{r.setting}: {r.finished} of {r.planned}" for r in missing.itertuples())
    why = "; ".join(f"{Path(p.run_dir).name}: {p.stopped}" for p in ctx.plans if p.stopped)
    live = "; ".join(f"{Path(p.run_dir).name}: {p.running}" for p in ctx.plans if p.running)
    return (f"INCOMPLETE: {finished} of {planned} planned trials have finished ({per}); every number below covers "
            f"the finished trials only." + (f" Why: {why}." if why else "")
            + (f" Still running ({live}): the numbers will change as trials finish." if live else "")
            + (" Run the same command again to finish the plan." if why or not live else ""))


def core_sections(ctx: ReportContext) -> None:
    df, every = ctx.df, ctx.all_trials if ctx.all_trials is not None else ctx.df
    s = tables.summary(df, all_trials=every)
    done = completeness(ctx)
    if len(done):
        s = s.merge(done, on="setting", how="outer")
        s["trials"] = s["trials"].fillna(0).astype(int)
        s["infra_errors"] = s["infra_errors"].fillna(0).astype(int)
        s[["planned", "finished"]] = s[["planned", "finished"]].astype("Int64")
        banner = incomplete_banner(ctx, done)
        if banner:
            ctx.banners.insert(0, banner)  # first: every other number stands on it
    else:
        s["planned"], s["finished"] = pd.array([pd.NA] * len(s), dtype="Int64"), pd.array([pd.NA] * len(s), dtype="Int64")
    s["pass@1 (95% CI)"] = [f"{100 * m:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]" if m == m else "-"
                            for m, lo, hi in zip(s["pass@1"], s["ci_lo"], s["ci_hi"])]
    for lab, rate in zip(s["setting"], s["fallback"]):
        if rate == rate and rate > FALLBACK_WARNING:
            ctx.banners.append(f"SELECTOR FALLBACKS: in {lab}, {100 * rate:.1f}% of selection turns fell back to a "
                               "seeded pick because every selector call failed; those picks are not selections")
    for lab, n, n_pass in zip(s["setting"], s["tampered"], s["tampered_pass"]):
        if n:
            ctx.banners.append(f"TAMPERING: in {lab}, {n} trials changed what the verifier depends on or tried to forge "
                               f"its verdict ({n_pass} of them the verifier passed); they count as failures, and their "
                               "trial lines' `tampering` say what and by which command")
    if s["cost_usd_per_trial"].isna().any():
        ctx.banners.append("UNKNOWN PRICES: some models have no known price, so their cost shows as unknown (-); "
                           "give `prices:` for them in the config")
    ctx.sections.append(Section("summary", "Pass rate per setting", s[[
        "setting", "policy", "N", "trajectory", "generator", "selector", "tasks", "trials", "finished", "planned",
        "pass@1 (95% CI)", "infra_errors", "tampered", "tampered_pass", "fallback", "turns_mean", "turns_solved",
        "cost_usd_per_trial"]],
        "pass@1 is the mean over tasks of each task's pass rate over its trials; the interval is a "
        "percentile bootstrap over tasks (10,000 resamples). trials: those pass@1 counts; finished and planned: the "
        "trials of the run's plan that have finished, and all it holds (- when the run recorded no plan); "
        "infra_errors: trials the harness failed, left out; "
        "tampered: trials whose agent changed what the verifier depends on or tried to forge its verdict "
        "(docs/tasks.md), counted as failures; tampered_pass: of those, the ones the verifier passed; "
        "fallback: share of selection turns where every selector call failed.", ("fallback",)))
    if not df.empty:
        ctx.sections.append(Section("pass_at_k", "pass@k, pass^k and consistency@k", tables.pass_k(df),
                                    "pass@k: unbiased estimator (Chen et al. 2021); pass^k: all k of k succeed "
                                    "(tau-bench); consistency@k: share of tasks solved in at least k trials "
                                    "(turn-bon).", ("pass_at_k", "pass_hat_k", "consistency_at_k")))
    costs = tables.costs(every, ctx.baseline)
    ctx.sections.append(Section("costs", "Tokens per attempt (turn-bon Table 1)", costs,
                                f"Output tokens per trial, averaged over trials; total_vs_baseline = (all output) / "
                                f"baseline generator output; baseline = {ctx.baseline or 'none found'}."
                                + "".join(f" {note}." for note in tables.environment_notes(costs))))
    ctx.sections.append(Section("endings", "How attempts end (turn-bon Table 2)", tables.endings(every),
                                "infra_error: the share whose cause was the harness (also counted under its ending).",
                                (*tables.ENDINGS, "infra_error")))
    spend = spend_section(ctx)
    if spend is not None:
        ctx.sections.append(spend)
    history = history_section(df)
    if history is not None:
        ctx.sections.append(history)
        for r in history.frame.itertuples():
            if r.exposed:
                ctx.banners.append(
                    f"HISTORY BEYOND HEAD: in {r.setting}, {r.exposed} trials ran where the repository to fix kept "
                    f"commits made after its HEAD that HEAD does not lead to, where a fix may be ({r.exposed_pass} of them passed, "
                    f"{r.read} ran git commands that read past HEAD); `environment.repository_history: scrub` removes "
                    "them before the agent starts (docs/swebench.md)")
            elif r.read:
                ctx.banners.append(
                    f"HISTORY READS: in {r.setting}, {r.read} trials ran git commands that read a repository past its "
                    f"HEAD ({r.read_pass} of them passed): where the task is to fix a repository at its HEAD "
                    "(SWE-bench), a fix may have come from there; the run did not record what the repository held "
                    "(the `repository_history` table)")
    unenforced = not_enforced_section(every)
    if unenforced is not None:
        ctx.sections.append(unenforced)
        ctx.banners.append(f"NOT ENFORCED HERE: {len(unenforced.frame)} task key(s) were not carried out as the task "
                           "wrote them (run as the reference harness runs them); the `not_enforced` table says "
                           "which and why")
    if ctx.compare and not df.empty:
        if len(ctx.compare) != 2:
            raise TbscaleError("--compare takes exactly two setting names")
        a, b = (compare_label(df, name, ctx.run_aliases) for name in ctx.compare)
        ctx.sections.append(Section("compare", f"{b} vs {a} (paired bootstrap over tasks)",
                                    tables.compare(df, a, b), "diff = B - A; p is two-sided."))


def history_section(df: pd.DataFrame) -> Section | None:
    """Per setting, the trials whose repository kept commits beyond its HEAD when the agent started,
    and those whose commands read past HEAD (runner/repository_history.py, shell/git_history.py);
    None when no trial has either."""
    if df.empty or "history_exposed" not in df or not (df["history_exposed"].any() or df["history_reads"].any()):
        return None
    rows = []
    for label in tables.settings_order(df):
        sub = df[df["label"] == label]
        exposed, read = sub["history_exposed"], sub["history_reads"] > 0
        rows.append({"setting": label, "trials": len(sub), "exposed": int(exposed.sum()),
                     "exposed_pass": int((exposed & sub["passed"]).sum()), "read": int(read.sum()),
                     "read_pass": int((read & sub["passed"]).sum()),
                     "exposed_and_read": int((exposed & read).sum())})
    return Section("repository_history", "The repository's history beyond HEAD", pd.DataFrame(rows),
                   "exposed: trials whose repository to fix kept commits made after its HEAD that HEAD does not lead "
                   "to when the agent started (from tags, branches, reflogs, or none: a fix may be among them); read: trials "
                   "whose commands read past HEAD (`git log --all`, `git reflog`, a ref beyond HEAD by name; "
                   "docs/swebench.md); _pass: of those, the ones that passed. Imported runs have no exposure "
                   "figure, only their commands.")


def not_enforced_section(every: pd.DataFrame) -> Section | None:
    """Each task key some trials did not carry out as written, why, and how many tasks and trials."""
    if "not_enforced" not in every or every["not_enforced"].isna().all():
        return None
    groups: dict[tuple[str, str], tuple[set[str], int]] = {}
    for task_id, items in zip(every["task_id"], every["not_enforced"]):
        for key, why in items or ():
            tasks, n = groups.get((key, why), (set(), 0))
            tasks.add(task_id)
            groups[(key, why)] = (tasks, n + 1)
    if not groups:
        return None
    rows = [{"key": k, "tasks": len(t), "trials": n, "why": w,
             "examples": ", ".join(sorted(t)[:3]) + (" ..." if len(t) > 3 else "")}
            for (k, w), (t, n) in sorted(groups.items(), key=lambda x: (-x[1][1], x[0]))]
    return Section("not_enforced", "Task keys not enforced here", pd.DataFrame(rows),
                   "Keys these trials did not carry out as the task wrote them, and why: a key the reference harness "
                   "ignores too, or one this engine cannot give where the reference does not give it either. "
                   "Refusing such tasks instead is opt-in (docs/tasks.md).")


def compare_label(df: pd.DataFrame, name: str, aliases: dict[str, Path]) -> str:
    """A --compare name as a setting label: a label itself, or a run folder's alias (a path given
    to --import) when that run holds one setting."""
    labels = tables.settings_order(df)
    if name in labels or name not in aliases:
        return name
    mine = tables.settings_order(df[df["run_dir"] == str(aliases[name])])
    if len(mine) != 1:
        raise TbscaleError(f"--compare: {name} holds {len(mine)} settings ({', '.join(mine) or 'none measured'}); "
                           "name one of them")
    return mine[0]


def spend_section(ctx: ReportContext) -> Section | None:
    """What each run spent (every model call in its ledger, crashed and retried trials included)
    beside what the tables count (the trials of the current configuration)."""
    every = ctx.all_trials if ctx.all_trials is not None else ctx.df
    rows = []
    for run in ctx.run_dirs:
        spent = spend_totals(run)
        if spent is None:
            continue
        mine = every[every["run_dir"] == str(run)]
        counted = {k: float(mine[[f"{r}_{k}" for r in ROLES]].to_numpy().sum()) for k in ("input", "output", "calls")}
        cost_cols = mine[[f"{r}_cost" for r in ROLES]].to_numpy()
        rows.append({"run": Path(run).name, "spent_calls": float(spent.calls), "counted_calls": counted["calls"],
                     "spent_tokens": float(spent.input_tokens + spent.output_tokens),
                     "counted_tokens": counted["input"] + counted["output"],
                     "spent_cost_usd": spent.cost_usd, "counted_cost_usd": float(cost_cols.sum()),
                     "trials_with_calls": spent.trials, "trials_counted": len(mine)})
    if not rows:
        return None
    return Section("spend", "Spent and counted", pd.DataFrame(rows),
                   "spent: every model call the run ever made (spend.jsonl), crashed, retried and superseded "
                   "trials included; counted: the calls of the trials the tables above count. A cost of - is "
                   "unknown (a model without a known price).")


REPORT_SECTIONS: list[SectionFn] = [core_sections, published.published_sections, task_rewards.task_reward_sections, adaptive_report.adaptive_sections,
                                    behaviour_report.behaviour_sections, stages.stage_sections,
                                    judge_report.judge_sections, cer_report.cer_sections, fork_report.fork_sections,
                                    plots.plot_sections,
                                    html.html_section]


def rich_table(section: Section, columns: list[str] | None = None) -> Table:
    t = Table(title=section.title, title_justify="left", show_lines=False)
    frame = section.frame if columns is None else section.frame[columns]
    for col in frame.columns:
        t.add_column(str(col), overflow="fold")
    for _, row in frame.iterrows():  # cells are text as it is (a `[environment]` is no markup)
        t.add_row(*[Text(fmt(v, c in section.percent_cols)) for c, v in row.items()])
    return t


# ---- the terminal ---------------------------------------------------------------------------------
DEFAULT_WIDTH = 120  # when output is not a terminal and COLUMNS is not set
MIN_COLUMNS = 2  # columns a terminal table keeps however narrow the console (rich folds them)
# Per section, the columns that matter most, in the order the terminal shows them; the others
# follow in the table's order and are the first left out when the table does not fit.
TERMINAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "summary": ("setting", "pass@1 (95% CI)", "N", "trials", "finished", "planned", "cost_usd_per_trial", "turns_mean",
                "fallback", "infra_errors", "tampered", "policy", "turns_solved", "tasks"),
    "pass_at_k": ("setting", "k", "pass_at_k", "pass_hat_k", "consistency_at_k"),
    "costs": ("setting", "total_out", "total_vs_baseline", "generator_out", "selector_out", "cost_usd", "avg_turns"),
    "endings": ("setting", "pass", "tampered", "wrong_submission", "time_limit", "agent_error"),
    "compare": ("metric", "diff [95% CI]", "p_value"),
    "published": ("setting", "run", "stated_accuracy", "as_published", "matches", "pass@1", "infra_errors",
                  "trials", "k", "pass@k_as_published", "stated_pass@k", "pass@k", "passed_after_agent_failure"),
    "spend": ("run", "spent_tokens", "counted_tokens", "spent_cost_usd", "counted_cost_usd"),
    "adaptive_paths": ("setting", "pass@1 (95% CI)", "agreed_share", "selector_calls", "selector_tokens",
                       "samples_per_turn", "generator_input", "generator_output", "choice_turns"),
    "adaptive_vs_plain": ("setting", "metric", "diff [95% CI]", "p_value", "saved_share", "plain", "adaptive", "vs"),
    "behaviour_preference": ("setting", "behaviour", "selected", "uniform", "difference [95% CI]", "p_value"),
}


def report_console(stderr: bool = False) -> Console:
    """A console for the report: the terminal's width on a terminal; otherwise COLUMNS, or 120."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    try:
        width = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        width = 0
    return Console(stderr=stderr, width=width if width > 0 else DEFAULT_WIDTH)


def folded(section: Section) -> Section:
    """The section with a difference and its interval (`diff`/`difference`, `ci_lo`, `ci_hi`)
    folded into one column, `diff [95% CI]`, where the difference stood."""
    frame = section.frame
    value = next((c for c in ("diff", "difference") if c in frame.columns), None)
    if value is None or not {"ci_lo", "ci_hi"} <= set(frame.columns):
        return section
    pct = value in section.percent_cols
    text = [f"{fmt(v, pct)} [{fmt(lo, pct)}, {fmt(hi, pct)}]" if v == v else "-"
            for v, lo, hi in zip(frame[value], frame["ci_lo"], frame["ci_hi"])]
    out = frame.drop(columns=["ci_lo", "ci_hi"])
    out.insert(list(out.columns).index(value), f"{value} [95% CI]", text)
    out = out.drop(columns=[value])
    return Section(section.key, section.title, out, section.note, section.percent_cols)


def terminal_table(section: Section, console: Console) -> tuple[Table, list[str]]:
    """The section's table as it fits the console: key columns first, the least important left out
    until its natural width fits (then rich folds what is left). Returns it and the columns left out."""
    section = folded(section)
    cols = [str(c) for c in section.frame.columns]
    first = [c for c in TERMINAL_COLUMNS.get(section.key, ()) if c in cols]
    keep = first + [c for c in cols if c not in first]
    dropped: list[str] = []
    table = rich_table(section, keep)
    widths = column_widths(table, console)
    # pandas hands each row over as objects when a column that is not numeric is kept (the first
    # MIN_COLUMNS always are), so a cell reads the same in every table that keeps its column and the
    # widths are counted once. Rows of numbers alone are cast to a common type (an int column may
    # read 1,234.0 -> "1,234" beside floats), so such a table is rebuilt and counted at each try.
    as_objects = any(not pd.api.types.is_numeric_dtype(section.frame[c]) for c in keep[:MIN_COLUMNS])
    while len(keep) > MIN_COLUMNS and table_width(table, widths[:len(keep)]) > console.width:
        dropped.insert(0, keep.pop())
        if not as_objects:
            table = rich_table(section, keep)
            widths = column_widths(table, console)
    if dropped and as_objects:
        table = rich_table(section, keep)
    return table, dropped


def column_widths(table: Table, console: Console) -> list[int]:
    """Each column's natural width, padding included, as rich measures a `rich_table` (Text cells,
    header strings, rich's default padding), counted from the cells' text. rich's own measure walks
    every cell's renderables twice, and a terminal table was measured once for each column it might
    drop: most of `tbscale report`'s terminal time. tests/test_report_terminal.py holds
    `table_width` equal to rich's measure."""
    unbounded = console.options.update_width(1_000_000)
    _, right, _, left = table.padding
    widths = []
    for column in table.columns:
        header = Measurement.get(console, unbounded, column.header).maximum if table.show_header else 0
        cells = (max((cell_len(line) for line in cell.plain.splitlines()), default=0) for cell in column.cells)
        widths.append(max(header, *cells, 0) + left + right)
    return widths


def table_width(table: Table, widths: list[int]) -> int:
    """The natural width of `table` with the columns of these widths: theirs, and the box's lines."""
    lines = (2 if table.show_edge else 0) + len(widths) - 1 if table.box else 0
    return lines + sum(widths)


def print_section(console: Console, section: Section) -> None:
    table, dropped = terminal_table(section, console)
    console.print(table)
    notes = []
    if dropped:
        notes.append(f"Not shown here ({console.width} columns): {', '.join(dropped)}; every column is in "
                     f"{section.key}.csv and report.md.")
    if section.note:
        notes.append(section.note)
    for note in notes:
        console.print(f"[dim]{escape(note)}[/]", highlight=False)


def markdown(section: Section) -> str:
    cols = list(section.frame.columns)
    lines = [f"## {section.title}", ""]
    if section.note:
        lines += [section.note, ""]
    lines.append("| " + " | ".join(map(str, cols)) + " |")
    lines.append("|" + "---|" * len(cols))
    for _, row in section.frame.iterrows():
        lines.append("| " + " | ".join(fmt(v, c in section.percent_cols) for c, v in row.items()) + " |")
    return "\n".join(lines) + "\n"


def build_report(paths: list[Path], console: Console, *, compare: list[str] | None = None, plots: bool = True,
                 baseline: str | None = None, out_dir: Path | None = None,
                 sections: list[SectionFn] | None = None, include_infra_errors: bool = False,
                 adaptive_pair: list[str] | None = None, tables_to_console: bool = True,
                 run_aliases: dict[str, Path] | None = None) -> ReportContext:
    """Compute the report's sections, write its files under out_dir, and print it to `console`
    (banners always; the tables unless `tables_to_console` is off, as for `--format`)."""
    with system_allocator():  # the sections copy columns of the trial table too (see compact.py)
        return _build_report(paths, console, compare=compare, plots=plots, baseline=baseline, out_dir=out_dir,
                             sections=sections, include_infra_errors=include_infra_errors,
                             adaptive_pair=adaptive_pair, tables_to_console=tables_to_console,
                             run_aliases=run_aliases or {})


def _build_report(paths: list[Path], console: Console, *, compare: list[str] | None, plots: bool,
                  baseline: str | None, out_dir: Path | None, sections: list[SectionFn] | None,
                  include_infra_errors: bool, adaptive_pair: list[str] | None,
                  tables_to_console: bool, run_aliases: dict[str, Path]) -> ReportContext:
    run_dirs = tables.find_run_dirs(paths)
    judge_report.check_manifests(run_dirs)
    target = out_dir or (run_dirs[0] / "report" if len(run_dirs) == 1 else Path(paths[0]) / "report")
    made: list[Path] = []  # the folders made for the report: removed again if it stops before writing
    try:  # before any work: a report that cannot be written is said at once
        writable_folder(target, "report folder", made)
    except TbscaleError as e:
        raise TbscaleError(f"{e}; give --out DIR to write the report elsewhere") from None
    try:
        return _report_into(target, run_dirs, console, compare=compare, plots=plots, baseline=baseline,
                            sections=sections, include_infra_errors=include_infra_errors,
                            adaptive_pair=adaptive_pair, tables_to_console=tables_to_console,
                            run_aliases=run_aliases)
    except BaseException:
        remove_made_folders(made)
        raise


def _report_into(target: Path, run_dirs: list[Path], console: Console, *, compare: list[str] | None, plots: bool,
                 baseline: str | None, sections: list[SectionFn] | None, include_infra_errors: bool,
                 adaptive_pair: list[str] | None, tables_to_console: bool,
                 run_aliases: dict[str, Path]) -> ReportContext:
    table = read_trial_table(run_dirs)
    for p in table.problems:
        p.warn()
    everything = table.df
    df = tables.scored(everything, include_infra_errors)
    ctx = ReportContext(df=df, run_dirs=run_dirs, out_dir=target, baseline=tables.baseline_label(everything, baseline),
                        compare=compare, plots=plots, simulated=bool(everything["simulated"].any()),
                        all_trials=everything, adaptive_pair=adaptive_pair, run_aliases=run_aliases, plans=table.plans)
    infra = int(everything["infra_error"].sum())
    if infra:
        how = "counted as failures" if include_infra_errors else "left out of pass@1 (--include-infra-errors counts them)"
        ctx.banners.append(f"INFRASTRUCTURE ERRORS: {infra} of {len(everything)} trials failed because of the harness "
                           f"(model endpoint, container engine, image build or verifier); they are {how}. "
                           "`tbscale run` retries them on its next invocation.")
    if table.set_aside:
        ctx.banners.append(f"{sum(table.set_aside.values())} trial lines set aside: they belong to an earlier "
                           "configuration of the run (a changed setting, task, or fewer trials)")
    chosen = sections if sections is not None else REPORT_SECTIONS
    if df.empty:  # every trial was an infrastructure error: nothing to measure beyond the counts
        ctx.banners.append("No trial measured the agent: the tables below show only what failed.")
        chosen = [core_sections]
    for fn in chosen:
        fn(ctx)
    write(ctx, console, tables_to_console)
    return ctx


def write(ctx: ReportContext, console: Console, tables_to_console: bool = True) -> None:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    banner = ("SIMULATED MODELS: these runs used tbscale's embedded simulated model (sim/...), not a language "
              "model. The numbers exercise the harness and the strategies' mechanics only.")
    if ctx.simulated:
        console.print(f"[bold yellow]{banner}[/]", highlight=False)
    md = ["# tbscale report", "", f"Runs: {', '.join(str(r) for r in ctx.run_dirs)}", ""]
    if ctx.simulated:
        md += [f"> **{banner}**", ""]
    for note in ctx.banners:
        console.print(f"[bold yellow]{escape(note)}[/]", highlight=False)
        md += [f"> **{note}**", ""]
    summary: dict[str, Any] = {"runs": [str(r) for r in ctx.run_dirs], "simulated": ctx.simulated,
                               "baseline": ctx.baseline, "banners": ctx.banners, "tables": {}}
    for sec in ctx.sections:
        if tables_to_console:
            print_section(console, sec)
        md.append(markdown(sec))
        sec.frame.to_csv(ctx.out_dir / f"{sec.key}.csv", index=False)
        summary["tables"][sec.key] = json.loads(sec.frame.to_json(orient="records"))
    for title, img in ctx.images:
        md.append(f"## {title}\n\n![{title}]({img.name})\n")
    (ctx.out_dir / "report.md").write_text("\n".join(md))
    (ctx.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    console.print(f"report written to {escape(str(ctx.out_dir))}", highlight=False)


FORMATS = ("md", "csv", "json")


def render(ctx: ReportContext, fmt_name: str) -> str:
    """One of the report's files as text, for scripts: md, the report.md text; csv, each table as
    CSV after a line `# table: <key>` naming it (tables apart by a blank line); json, summary.json."""
    if fmt_name == "md":
        return (ctx.out_dir / "report.md").read_text()
    if fmt_name == "json":
        return (ctx.out_dir / "summary.json").read_text() + "\n"
    if fmt_name == "csv":
        parts = []
        for sec in ctx.sections:
            buf = io.StringIO()
            sec.frame.to_csv(buf, index=False)
            parts.append(f"# table: {sec.key}\n{buf.getvalue()}")
        return "\n".join(parts)
    raise TbscaleError(f"--format: {fmt_name!r} is not one of {', '.join(FORMATS)}")
