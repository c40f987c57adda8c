"""`tbscale sweep` and `tbscale history`: grids of configurations run into dated folders, and the
kept history of their results."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tbscale.cli.app import app, console, fail, out, say, sigterm_as_interrupt
from rich.markup import escape

from tbscale.errors import ModelUnavailable, TbscaleError

if TYPE_CHECKING:
    from tbscale.sweeps import HistoryLine


@app.command()
def sweep(sweep_file: Path = typer.Argument(..., help="sweep YAML: configs and a grid of overrides"),
          concurrency: Optional[int] = typer.Option(None, min=1, help="override every config's concurrency"),
          preflight: bool = typer.Option(True, help="check every point's models (key and endpoint) before the first "
                                                    "point starts"),
          probe: bool = typer.Option(False, help="with --preflight, also make a one-token call to each model")):
    """Run every config x grid point (resuming finished trials) and append results to the history."""
    from datetime import datetime, timezone

    from tbscale.cli.run import preflight_models, progress_every_sec, run_with_progress
    from tbscale.config import bounds, check_tasks_path
    from tbscale.environments import open_backend
    from tbscale.names import remove_made_folders, writable_folder
    from tbscale.runner import Runner, experiment_dataset, experiment_tasks, resolve_experiment
    from tbscale.runner.checks import before_first_container, run_folder
    from tbscale.sweeps import HistoryFile, expand, experiment_of, history_lines, load_sweep

    sw = load_sweep(sweep_file)
    every = progress_every_sec()
    plan = expand(sw)
    date = sw.date or datetime.now(timezone.utc).strftime("%Y-%m-%d")
    if concurrency and (problem := bounds.over_limit("concurrency", concurrency)):
        fail(f"--concurrency: {problem}")
    if Path(sw.history).is_dir():
        fail(f"{sweep_file}: history: {sw.history} is a folder, not a file")
    # Every grid point is loaded and checked before the first one runs: a bad point costs no work,
    # and the folders made for the sweep so far are removed again.
    made: list[Path] = []
    points = []
    runners: list = []
    try:
        writable_folder(Path(sw.history).parent, f"{sweep_file}: history folder", made)
        for name, doc, point, cfg_path in plan:
            if concurrency:
                doc["concurrency"] = concurrency
            where = f"{cfg_path} (grid point {point})"
            exp = resolve_experiment(experiment_of(doc, cfg_path, point), where)
            check_tasks_path(exp, cfg_path, where)
            dataset = experiment_dataset(exp)
            task_list = experiment_tasks(exp, dataset=dataset, before_build=lambda ts, exp=exp, where=where:
                                         before_first_container(exp, ts, where, open_backend(exp.environment)))
            if preflight:  # as `tbscale run` does: a key missing at the last point stops the sweep here
                preflight_models(exp, where, probe)
            run_dir = run_folder(Path(sw.output_dir) / date, name, where, made)
            points.append((name, point, exp, dataset, task_list, run_dir))
        history = HistoryFile(Path(sw.history))
        # Every point's run folder is claimed now and held until its turn: a point another run
        # holds, or whose settings changed since its run began, stops the sweep before any runs.
        for name, point, exp, dataset, task_list, run_dir in points:
            runner = Runner(exp, task_list, run_dir, dataset=dataset.manifest() if dataset is not None else None)
            runner.claim_folder()
            runners.append(runner)
    except BaseException:
        for runner in runners:
            runner.folder.lock.release(remove=runner.run_dir in made)
        remove_made_folders(made)
        raise
    sigterm_as_interrupt()
    for runner, (name, point, exp, dataset, task_list, run_dir) in zip(runners, points):
        try:
            run_with_progress(runner, name, every)
        except KeyboardInterrupt:
            say(f"interrupted; rerun the same sweep to resume ({run_dir})", "yellow")
            raise typer.Exit(130)
        except ModelUnavailable as e:
            console.print(f"[bold red]stopped:[/] {escape(str(e))}; the finished trials are kept in {run_dir} and no "
                          "history line was written for it; rerun the same sweep to resume", highlight=False)
            raise typer.Exit(4)
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
    if path.is_dir():
        fail(f"{path}: a folder, not a history file (give results/history.jsonl or the sweep's `history:`)")
    lines = history_lines_of(path, required=check)
    show_history(path, sweep_name, lines)
    if check:
        raise typer.Exit(check_history(path, sweep_name, alpha, min_tasks, lines))


def history_lines_of(path: Path, required: bool = True) -> list[HistoryLine]:
    """The readable lines of a history file, the unreadable ones warned about with their line
    numbers; with `required`, a file with no readable line is an error (the gate must not pass on
    a history it cannot read)."""
    from tbscale.jsonl import ReadProblems
    from tbscale.sweeps import read_history

    problems = ReadProblems(path)
    lines = read_history(path, problems)
    problems.warn()
    if not lines and (required or problems.corrupt or problems.torn_last_line):
        skipped = len(problems.corrupt) + problems.torn_last_line
        first = f"; first: line {problems.corrupt[0][0]}: {problems.corrupt[0][1]}" if problems.corrupt else ""
        raise TbscaleError(f"{path}: no readable history line ({skipped} unreadable{first}); nothing to check")
    return lines


def check_history(path: Path, sweep_name: str | None, alpha: float = 0.05, min_tasks: int = 2,
                  lines: list[HistoryLine] | None = None) -> int:
    """Print every comparison and the regressions; 1 when there is a regression, else 0."""
    from rich.table import Table
    from rich.text import Text

    from tbscale.sweeps import regressions

    lines = history_lines_of(path) if lines is None else lines
    if sweep_name is not None and not any(r.sweep == sweep_name for r in lines):
        raise TbscaleError(f"{path}: no history line of sweep {sweep_name!r}; nothing to check")
    comps = regressions(lines, sweep_name, alpha=alpha, min_tasks=min_tasks)
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


def show_history(path: Path, sweep_name: str | None, lines: list[HistoryLine] | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    lines = history_lines_of(path, required=False) if lines is None else lines
    rows = [r for r in lines if sweep_name is None or r.sweep == sweep_name]
    table = Table(title=f"history: {path}")
    for col in ("date", "commit", "run", "setting", "pass@1 (95% CI)", "turns", "out tokens", "sim"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.date, (r.git_commit or "")[:8], Text(r.run), Text(r.setting),
                      f"{100 * r.pass_at_1:.1f}% [{100 * r.ci_lo:.1f}, {100 * r.ci_hi:.1f}]",
                      f"{r.turns_mean:.1f}", f"{r.total_out_tokens:,.0f}", "yes" if r.simulated else "")
    out.print(table)
