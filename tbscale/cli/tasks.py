"""`tbscale tasks list` and `tbscale tasks check`: what is under a folder of tasks, and whether each
task is honest (its reference solution passes, doing nothing fails)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import console, fail, out, sigterm_as_interrupt, split_list, tasks_app
from tbscale.errors import TbscaleError


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
                      t.instruction.splitlines()[0][:60] if t.instruction else "")
    out.print(table)
    for p, msg in problems:
        console.print(f"[red]broken:[/] {msg}", highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)


@tasks_app.command("check")
def tasks_check(path: Path = typer.Argument(Path("tasks")),
                concurrency: int = typer.Option(4, min=1, help="containers at once"),
                include: Optional[str] = typer.Option(None, help="comma-separated task ids to check"),
                exclude: Optional[str] = typer.Option(None, help="comma-separated task ids to skip"),
                keep: Optional[Path] = typer.Option(None, help="keep the check's run folder here")):
    """Run the oracle and the nop agent on every task: every oracle must pass and every nop fail."""
    from rich.table import Table

    from tbscale.cli.run import run_with_progress
    from tbscale.config import Experiment
    from tbscale.environments import get_backend
    from tbscale.runner import Runner, load_rows
    from tbscale.tasks import load_tasks

    try:
        tasks, problems = load_tasks(path, include=split_list(include), exclude=split_list(exclude),
                                     on_error="collect")
        get_backend("docker").check()
    except TbscaleError as e:
        fail(str(e))
    for p, msg in problems:
        console.print(f"[red]broken:[/] {msg}", highlight=False, soft_wrap=True)
    exp = Experiment.model_validate({
        "name": "tasks-check", "tasks": {"path": str(path)}, "trials": 1, "concurrency": concurrency,
        "settings": [{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"}]})
    run_dir = keep or Path(tempfile.mkdtemp(prefix="tbscale-check-")) / "tasks-check"
    runner = Runner(exp, tasks, run_dir)
    sigterm_as_interrupt()
    try:
        run_with_progress(runner, "tasks check")
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
