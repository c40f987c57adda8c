"""The `tbscale` command line: run, report, tasks, clean (and the analysis commands).

Kept light at import time: heavy modules (litellm, docker, pandas, matplotlib) are imported
inside the commands that need them, so `tbscale --help` answers at once.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Tuple

import typer
from rich.console import Console

from tbscale.errors import TbscaleError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Run LLM agents on terminal and coding tasks under test-time-scaling strategies, "
                       "and measure what the extra compute buys.")
tasks_app = typer.Typer(no_args_is_help=True, help="Inspect and check task directories.")
app.add_typer(tasks_app, name="tasks")
console = Console(stderr=True)
# Not a terminal (CI logs, pipes): wide enough that tables stay readable.
out = Console(width=None if sys.stdout.isatty() else 200)

# Modules that add commands: each defines `register(app)` and imports heavy things lazily.
COMMAND_MODULES = ["tbscale.analysis.commands", "tbscale.analysis.bsr_commands", "tbscale.swebench.commands",
                   "tbscale.strategies.commands", "tbscale.viewer.commands"]


def fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _sigterm_as_interrupt() -> None:
    # A SIGTERM (CI timeout, `kill`) takes the same path as Ctrl-C: containers are removed and
    # the finished trials stay on disk.
    def handler(_signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def _run_with_progress(runner, title: str) -> None:
    from rich.live import Live
    from rich.table import Table

    def view(c) -> Table:
        table = Table.grid(padding=(0, 2))
        finished = c.done + c.skipped
        rate = f"{c.passed / c.done:.0%}" if c.done else "-"
        elapsed = time.monotonic() - c.started_at
        bar_w = 30
        fill = int(bar_w * finished / c.total) if c.total else bar_w
        table.add_row(f"[bold]{title}[/]", f"[green]{'━' * fill}[/][dim]{'━' * (bar_w - fill)}[/]",
                      f"{finished}/{c.total} done", f"{c.running} running", f"{c.skipped} resumed",
                      f"[red]{c.errors} errors[/]" + (f" [red]{c.crashed} crashed[/]" if c.crashed else ""),
                      f"pass {rate}", f"{elapsed:5.0f} s")
        return table

    with Live(view(runner.counters), console=console, refresh_per_second=4, transient=False) as live:
        runner.on_update = lambda c, row: live.update(view(c))
        asyncio.run(runner.run())


@app.command()
def run(config: Path = typer.Argument(..., help="experiment YAML"),
        run_name: Optional[str] = typer.Option(None, help="folder under output_dir (default: the experiment name)"),
        output_dir: Optional[Path] = typer.Option(None, help="override the config's output_dir"),
        concurrency: Optional[int] = typer.Option(None, help="override the config's concurrency"),
        tasks: Optional[str] = typer.Option(None, help="comma-separated task ids (a subset of the config's)"),
        trials: Optional[int] = typer.Option(None, help="override the number of trials"),
        report: bool = typer.Option(True, help="print the report when the run finishes"),
        retry_errors: bool = typer.Option(False, help="also rerun finished trials that ended in an "
                                          "infrastructure error (sandbox_error, model_error)")):
    """Run an experiment; rerunning the same config resumes it (finished trials are kept)."""
    from tbscale.config import load_experiment
    from tbscale.runner import Runner

    overrides = {}
    if concurrency:
        overrides["concurrency"] = concurrency
    if trials:
        overrides["trials"] = trials
    try:
        exp = load_experiment(config, overrides)
        task_list = _load_experiment_tasks(exp, tasks)
        from tbscale.env.docker import client

        client()
    except TbscaleError as e:
        fail(str(e))
    run_dir = (output_dir or Path(exp.output_dir)) / (run_name or exp.name)
    runner = Runner(exp, task_list, run_dir,
                    retry_stop_reasons={"sandbox_error", "model_error"} if retry_errors else None)
    if runner.simulated:
        console.print("[yellow]Simulated models (sim/...): these runs exercise the harness; "
                      "they measure no language model.[/]")
    _sigterm_as_interrupt()
    try:
        _run_with_progress(runner, exp.name)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: {runner.counters.done} trials finished this time are saved in "
                      f"{run_dir}; run the same command again to resume.[/]")
        raise typer.Exit(130)
    except TbscaleError as e:
        fail(str(e))
    console.print(f"results: {run_dir}")
    if runner.crashes:
        for spec, why in runner.crashes[:10]:
            console.print(f"[red]crashed:[/] {spec.setting.name} {spec.task.id} trial {spec.trial}: {why}",
                          highlight=False, soft_wrap=True)
        console.print(f"[red]{len(runner.crashes)} trials crashed[/] (tracebacks in {run_dir / 'crashes.log'}); "
                      "they are not recorded: run the same command again to retry them.")
    if report and runner.counters.done + runner.counters.skipped:
        _report([run_dir], compare=None, plots=True)
    if runner.crashes:
        raise typer.Exit(1)


def _load_experiment_tasks(exp, only: str | None):
    from tbscale.tasks import load_tasks

    include = exp.tasks.include
    if only:
        include = [t.strip() for t in only.split(",") if t.strip()]
    if exp.tasks.swebench is not None:
        from tbscale.swebench import load_swebench_tasks

        return load_swebench_tasks(exp.tasks.swebench, include=include, exclude=exp.tasks.exclude)
    tasks, _ = load_tasks(Path(exp.tasks.path), include=include, exclude=exp.tasks.exclude)
    return tasks


@app.command()
def report(runs: list[Path] = typer.Argument(..., help="run folders, or a folder of runs"),
           compare: Optional[Tuple[str, str]] = typer.Option(None, help="two setting names: A B (reports B - A)"),
           plots: bool = typer.Option(True, help="write PNG plots and the HTML report")):
    """Tables (and plots) from finished runs: pass@k, consistency, turns, endings, costs, significance."""
    try:
        _report(runs, list(compare) if compare else None, plots)
    except TbscaleError as e:
        fail(str(e))


def _report(runs: list[Path], compare, plots: bool) -> None:
    from tbscale.analysis.report import build_report

    build_report(runs, out, compare=compare, plots=plots)


@tasks_app.command("list")
def tasks_list(path: Path = typer.Argument(Path("tasks"), help="a task directory or a folder of them")):
    """List the tasks under PATH; broken ones are listed with what is wrong."""
    from rich.table import Table

    from tbscale.tasks import load_tasks

    try:
        tasks, problems = load_tasks(path, on_error="collect")
    except TbscaleError as e:
        fail(str(e))
    table = Table(title=f"{len(tasks)} tasks in {path}")
    for col in ("id", "format", "difficulty", "category", "steps", "agent timeout", "instruction"):
        table.add_column(col)
    for t in tasks:
        table.add_row(t.id, t.format, str(t.metadata.get("difficulty", "")), str(t.metadata.get("category", "")),
                      str(len(t.solution_steps())), f"{t.agent_timeout_sec:.0f} s",
                      t.instruction.splitlines()[0][:60])
    out.print(table)
    for p, msg in problems:
        console.print(f"[red]broken:[/] {msg}", highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)


@tasks_app.command("check")
def tasks_check(path: Path = typer.Argument(Path("tasks")),
                concurrency: int = typer.Option(4, help="containers at once"),
                keep: Optional[Path] = typer.Option(None, help="keep the check's run folder here")):
    """Run the oracle and the nop agent on every task: every oracle must pass and every nop fail."""
    from rich.table import Table

    from tbscale.config import Experiment
    from tbscale.runner import Runner, load_rows
    from tbscale.tasks import load_tasks

    try:
        tasks, problems = load_tasks(path, on_error="collect")
        from tbscale.env.docker import client

        client()
    except TbscaleError as e:
        fail(str(e))
    for p, msg in problems:
        console.print(f"[red]broken:[/] {msg}", highlight=False, soft_wrap=True)
    exp = Experiment.model_validate({
        "name": "tasks-check", "tasks": {"path": str(path)}, "trials": 1, "concurrency": concurrency,
        "settings": [{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"}]})
    run_dir = keep or Path(tempfile.mkdtemp(prefix="tbscale-check-")) / "tasks-check"
    runner = Runner(exp, tasks, run_dir)
    _sigterm_as_interrupt()
    try:
        _run_with_progress(runner, "tasks check")
    except KeyboardInterrupt:
        raise typer.Exit(130)
    rows = load_rows(run_dir)
    offenders = [r for r in rows if (r["setting"] == "oracle") != bool(r["passed"])]
    if offenders or problems:
        table = Table(title="offenders")
        for col in ("task", "agent", "reward", "ending", "error"):
            table.add_column(col)
        for r in sorted(offenders, key=lambda r: r["task_id"]):
            why = "oracle failed" if r["setting"] == "oracle" else "nop passed"
            table.add_row(r["task_id"], f"{r['setting']} ({why})", str(r["reward"]), r["ending"],
                          ((r.get("error") or {}).get("message") or "")[:80])
        for p, msg in problems:
            table.add_row(p.name, "-", "-", "broken", msg[:80])
        out.print(table)
        console.print(f"[red]{len(offenders) + len(problems)} problems[/] (trajectories in {run_dir})")
        raise typer.Exit(1)
    out.print(f"[green]all {len(tasks)} tasks ok[/]: every oracle passes, every nop fails")


@app.command()
def sweep(sweep_file: Path = typer.Argument(..., help="sweep YAML: configs and a grid of overrides"),
          concurrency: Optional[int] = typer.Option(None, help="override every config's concurrency")):
    """Run every config x grid point (resuming finished trials) and append results to the history."""

    from tbscale.config import Experiment, _format_validation_error
    from tbscale.logs import TrialIndex
    from tbscale.runner import Runner
    from tbscale.sweep import expand, history_lines, load_sweep

    try:
        sw = load_sweep(sweep_file)
        plan = expand(sw)
    except TbscaleError as e:
        fail(str(e))
    from datetime import datetime, timezone

    from pydantic import ValidationError

    date = sw.date or datetime.now(timezone.utc).strftime("%Y-%m-%d")
    history = TrialIndex(Path(sw.history))
    Path(sw.history).parent.mkdir(parents=True, exist_ok=True)
    _sigterm_as_interrupt()
    for name, doc, point, cfg_path in plan:
        if concurrency:
            doc["concurrency"] = concurrency
        try:
            if isinstance(doc.get("tasks"), dict) and doc["tasks"].get("path") and not Path(doc["tasks"]["path"]).exists():
                doc["tasks"]["path"] = str(cfg_path.parent / doc["tasks"]["path"])
            exp = Experiment.model_validate(doc)
            task_list = _load_experiment_tasks(exp, None)
        except ValidationError as e:
            fail(_format_validation_error(cfg_path, e).replace(f"{cfg_path}:", f"{cfg_path} (grid point {point}):", 1))
        except TbscaleError as e:
            fail(str(e))
        run_dir = Path(sw.output_dir) / date / name
        runner = Runner(exp, task_list, run_dir)
        try:
            _run_with_progress(runner, name)
        except KeyboardInterrupt:
            console.print(f"[yellow]interrupted; rerun the same sweep to resume ({run_dir})[/]")
            raise typer.Exit(130)
        for line in history_lines(run_dir, sw, point, date):
            history.append(line)
        out.print(f"{name}: done ({run_dir})")
    out.print(f"history: {sw.history}")
    _show_history(Path(sw.history), sw.name)


@app.command("history")
def history_cmd(path: Path = typer.Argument(Path("results/history.jsonl")),
                sweep_name: Optional[str] = typer.Option(None, "--sweep", help="only this sweep")):
    """Pass@1 per setting across sweep dates (the history `tbscale sweep` keeps)."""
    if not path.exists():
        fail(f"{path}: no such history file (written by `tbscale sweep`)")
    _show_history(path, sweep_name)


def _show_history(path: Path, sweep_name: str | None) -> None:
    from rich.table import Table

    from tbscale.logs import read_jsonl

    rows = [r for r in read_jsonl(path) if sweep_name is None or r.get("sweep") == sweep_name]
    table = Table(title=f"history: {path}")
    for col in ("date", "commit", "run", "setting", "pass@1 (95% CI)", "turns", "out tokens", "sim"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["date"], (r.get("git_commit") or "")[:8], r["run"], r["setting"],
                      f"{100 * r['pass_at_1']:.1f}% [{100 * r['ci_lo']:.1f}, {100 * r['ci_hi']:.1f}]",
                      f"{r['turns_mean']:.1f}", f"{r['total_out_tokens']:,.0f}", "yes" if r.get("simulated") else "")
    out.print(table)


@app.command()
def clean(all_sessions: bool = typer.Option(True, "--all/--orphans",
                                           help="every tbscale container, or only those of dead processes on this host")):
    """Remove containers left behind by tbscale processes that were killed."""
    from tbscale.env.docker import cleanup_labelled, cleanup_orphans

    try:
        out.print(f"removed {cleanup_labelled() if all_sessions else cleanup_orphans()} containers")
    except TbscaleError as e:
        fail(str(e))


def _register_commands() -> None:
    import importlib

    for mod in COMMAND_MODULES:
        try:
            importlib.import_module(mod).register(app)
        except ModuleNotFoundError as e:
            if e.name != mod and not mod.startswith(e.name or "\0"):
                raise


_register_commands()


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
