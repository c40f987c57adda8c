"""`tbscale sweep` and `tbscale history`: grids of configurations run into dated folders, and the
kept history of their results."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import app, fail, out, say, sigterm_as_interrupt
from tbscale.errors import TbscaleError


@app.command()
def sweep(sweep_file: Path = typer.Argument(..., help="sweep YAML: configs and a grid of overrides"),
          concurrency: Optional[int] = typer.Option(None, min=1, help="override every config's concurrency")):
    """Run every config x grid point (resuming finished trials) and append results to the history."""
    from datetime import datetime, timezone

    from tbscale.cli.run import run_with_progress
    from tbscale.logs import TrialIndex
    from tbscale.runner import Runner, experiment_dataset, experiment_tasks, resolve_experiment
    from tbscale.sweeps import expand, experiment_of, history_lines, load_sweep

    try:
        sw = load_sweep(sweep_file)
        plan = expand(sw)
    except TbscaleError as e:
        fail(str(e))
    date = sw.date or datetime.now(timezone.utc).strftime("%Y-%m-%d")
    history = TrialIndex(Path(sw.history))
    Path(sw.history).parent.mkdir(parents=True, exist_ok=True)
    sigterm_as_interrupt()
    for name, doc, point, cfg_path in plan:
        if concurrency:
            doc["concurrency"] = concurrency
        try:
            exp = resolve_experiment(experiment_of(doc, cfg_path, point), f"{cfg_path} (grid point {point})")
            dataset = experiment_dataset(exp)
            task_list = experiment_tasks(exp, dataset=dataset)
        except TbscaleError as e:
            fail(str(e))
        run_dir = Path(sw.output_dir) / date / name
        runner = Runner(exp, task_list, run_dir, dataset=dataset.manifest() if dataset is not None else None)
        try:
            run_with_progress(runner, name)
        except KeyboardInterrupt:
            say(f"interrupted; rerun the same sweep to resume ({run_dir})", "yellow")
            raise typer.Exit(130)
        for line in history_lines(run_dir, sw, point, date):
            history.append(line)
        say(f"{name}: done ({run_dir})", to=out)
    say(f"history: {sw.history}", to=out)
    show_history(Path(sw.history), sw.name)


@app.command("history")
def history_cmd(path: Path = typer.Argument(Path("results/history.jsonl")),
                sweep_name: Optional[str] = typer.Option(None, "--sweep", help="only this sweep"),
                check: bool = typer.Option(False, "--check", help="compare each tracked setting's newest pass@1 with "
                                           "its previous date's; exit 1 when one dropped by more than the paired "
                                           "bootstrap interval (the nightly gate)"),
                alpha: float = typer.Option(0.05, min=0.0001, max=0.5, help="with --check: 1 - the interval's level"),
                min_tasks: int = typer.Option(2, min=1, help="with --check: fewest shared tasks to compare")):
    """Pass@1 per setting across sweep dates (the history `tbscale sweep` keeps); with --check, the
    regression gate."""
    if not path.exists():
        fail(f"{path}: no such history file (written by `tbscale sweep`)")
    show_history(path, sweep_name)
    if check:
        raise typer.Exit(check_history(path, sweep_name, alpha, min_tasks))


def check_history(path: Path, sweep_name: str | None, alpha: float = 0.05, min_tasks: int = 2) -> int:
    """Print every comparison and the regressions; 1 when there is a regression, else 0."""
    from rich.table import Table
    from rich.text import Text

    from tbscale.logs import read_jsonl
    from tbscale.sweeps import regressions

    comps = regressions(list(read_jsonl(path)), sweep_name, alpha=alpha, min_tasks=min_tasks)
    level = f"{100 * (1 - alpha):g}%"
    table = Table(title=f"newest vs previous date, paired bootstrap over shared tasks ({level} interval)")
    for col in ("sweep", "run", "setting", "dates", "pass@1", "diff [interval]", "tasks", "verdict"):
        table.add_column(col)
    for c in comps:
        pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
        verdict = "[red]REGRESSION[/]" if c.regression else (c.note or "ok")
        table.add_row(Text(c.sweep), Text(c.run), Text(c.setting), f"{c.previous_date} -> {c.date}",
                      f"{pct(c.previous)}% -> {pct(c.current)}%",
                      f"{pct(c.diff)} [{pct(c.lo)}, {pct(c.hi)}]" if c.note == "" else "-", str(c.tasks), verdict)
    out.print(table)
    bad = [c for c in comps if c.regression]
    for c in bad:
        out.print(f"regression: {c.sweep} {c.run} {c.setting}: pass@1 {100 * c.previous:.1f}% ({c.previous_date}) -> "
                  f"{100 * c.current:.1f}% ({c.date}), paired diff {100 * c.diff:.1f} points, {level} interval "
                  f"[{100 * c.lo:.1f}, {100 * c.hi:.1f}] over {c.tasks} tasks", highlight=False)
    if not comps:
        out.print("nothing to compare yet: no tracked setting has two dates")
    elif not bad:
        out.print(f"no regression ({len(comps)} setting(s) compared)")
    return 1 if bad else 0


def show_history(path: Path, sweep_name: str | None) -> None:
    from rich.table import Table
    from rich.text import Text

    from tbscale.logs import read_jsonl

    rows = [r for r in read_jsonl(path) if sweep_name is None or r.get("sweep") == sweep_name]
    table = Table(title=f"history: {path}")
    for col in ("date", "commit", "run", "setting", "pass@1 (95% CI)", "turns", "out tokens", "sim"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["date"], (r.get("git_commit") or "")[:8], Text(r["run"]), Text(r["setting"]),
                      f"{100 * r['pass_at_1']:.1f}% [{100 * r['ci_lo']:.1f}, {100 * r['ci_hi']:.1f}]",
                      f"{r['turns_mean']:.1f}", f"{r['total_out_tokens']:,.0f}", "yes" if r.get("simulated") else "")
    out.print(table)
