"""`tbscale run` and `tbscale models check`: running an experiment with a live display, then its
closing report (printed by cli/report.py, which `tbscale report` uses too)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import NamedTuple, Optional

import typer

from tbscale.cli.app import app, console, fail, labelled, models_app, out, say, sigterm_as_interrupt, split_list
from tbscale.errors import TbscaleError


class Progress(NamedTuple):
    """The counts both views show, taken once from a runner's counters."""

    finished: int  # this invocation's and the resumed
    rate: str  # the pass rate of this invocation's finished trials
    elapsed: float
    left: str | None  # time_left
    retries: str


def progress_of(c) -> Progress:
    return Progress(c.done + c.skipped, f"{c.passed / c.done:.0%}" if c.done else "-", time.monotonic() - c.started_at,
                    time_left(c), ", ".join(f"{k} {v}" for k, v in c.retries.most_common(3)))


def progress_view(title: str, c):
    from rich.table import Table

    p = progress_of(c)
    table = Table.grid(padding=(0, 2))
    bar_w = 30
    fill = int(bar_w * p.finished / c.total) if c.total else bar_w
    table.add_row(f"[bold]{title}[/]", f"[green]{'━' * fill}[/][dim]{'━' * (bar_w - fill)}[/]",
                  f"{p.finished}/{c.total} done", f"{c.running} running", f"{c.skipped} resumed",
                  f"[red]{c.errors} infra errors[/]" + (f" [red]{c.crashed} crashed[/]" if c.crashed else ""),
                  f"pass {p.rate}", f"{p.elapsed:5.0f} s" + (f" ({p.left})" if p.left else "")
                  + (f"  [yellow]retries: {p.retries}[/]" if p.retries else ""))
    return table


def time_left(c) -> str | None:
    """What is left of the run at the pace of this invocation's finished trials ("about 12 min
    left"); None before the first trial finishes or once none is left."""
    left = c.total - c.done - c.skipped - c.crashed
    if not c.done or left <= 0:
        return None
    sec = (time.monotonic() - c.started_at) / c.done * left
    return f"about {sec:.0f} s left" if sec < 120 else (
        f"about {sec / 60:.0f} min left" if sec < 7200 else f"about {sec / 3600:.1f} h left")


def progress_line(title: str, c) -> str:
    """The live view's counts as one plain line, for output that is not a terminal."""
    p = progress_of(c)
    return (f"{title}: {p.finished}/{c.total} done, {c.running} running, {c.skipped} resumed, {c.errors} infra errors"
            + (f", {c.crashed} crashed" if c.crashed else "") + f", pass {p.rate}, {p.elapsed:.0f} s"
            + (f" ({p.left})" if p.left else "") + (f", retries: {p.retries}" if p.retries else ""))


def progress_every_sec() -> float:
    """How often a run whose output is not a terminal says where it is (TBSCALE_PROGRESS_EVERY_SEC)."""
    raw = os.environ.get("TBSCALE_PROGRESS_EVERY_SEC", "30")
    try:
        value = float(raw)
    except ValueError:
        raise TbscaleError(f"TBSCALE_PROGRESS_EVERY_SEC: a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise TbscaleError(f"TBSCALE_PROGRESS_EVERY_SEC: more than 0 seconds, got {raw!r}")
    return value


def run_with_progress(runner, title: str, every: float | None = None) -> None:
    """Run `runner` with a live view on a terminal, else with a plain line every `every` seconds
    (default: progress_every_sec())."""
    from rich.live import Live

    every = every or progress_every_sec()
    # The folder first (`tbscale run` has claimed it already): a run holding it, or a setting changed
    # since the run began, is one line before any view starts (a sweep's point, `tasks check`).
    runner.claim_folder()
    for line in runner.notice():  # once per run: the keys not enforced here, and why
        say(line, "yellow")
    if console.is_terminal:
        with Live(progress_view(title, runner.counters), console=console, refresh_per_second=4,
                  transient=False) as live:
            runner.on_update = lambda c, row: live.update(progress_view(title, c))
            asyncio.run(runner.run())
        return
    # A CI log or a nightly sweep's file: a live view would print nothing until the run ends (hours,
    # for a sweep). A line when the counts have changed, at most every `every` seconds, and at
    # least every ten times that while a long trial runs; then the last.
    c = runner.counters
    stop = threading.Event()

    def counts() -> tuple:
        return c.done, c.skipped, c.running, c.errors, c.crashed, c.passed, sum(c.retries.values())

    def report() -> None:
        said, said_at = counts(), time.monotonic()
        while not stop.wait(every):
            now = counts()
            if now != said or time.monotonic() - said_at >= 10 * every:
                say(progress_line(title, c))
                said, said_at = now, time.monotonic()

    reporter = threading.Thread(target=report, name="tbscale-progress", daemon=True)
    reporter.start()
    try:
        asyncio.run(runner.run())
    finally:
        stop.set()
        reporter.join()
        say(progress_line(title, c))


def _count(name: str, value: int | None) -> int | None:
    """A count given on the command line: at least 1, and within its bound (config/bounds.py)."""
    from tbscale.config import bounds

    if value is not None and value < 1:
        fail(f"--{name}: must be at least 1, got {value}")
    if value is not None and (problem := bounds.over_limit(name, value)):
        fail(f"--{name}: {problem}")
    return value


@app.command()
def run(config: Path = typer.Argument(..., help="experiment YAML"),
        run_name: Optional[str] = typer.Option(None, help="folder under output_dir (default: the experiment name)"),
        output_dir: Optional[Path] = typer.Option(None, help="override the config's output_dir"),
        concurrency: Optional[int] = typer.Option(None, help="override the config's concurrency"),
        tasks: Optional[list[str]] = typer.Option(None, help="task ids (a subset of the config's): comma-separated or repeated"),
        trials: Optional[int] = typer.Option(None, help="override the number of trials"),
        report: bool = typer.Option(True, help="print the report when the run finishes"),
        retry_errors: bool = typer.Option(True, "--retry-errors/--keep-errors",
                                          help="rerun finished trials that ended in an infrastructure error "
                                               "(model, sandbox, image build, verifier), or keep them"),
        preflight: bool = typer.Option(True, help="check every model's key and endpoint before starting"),
        probe: bool = typer.Option(False, help="with --preflight, also make a one-token call to each model"),
        dry_run: bool = typer.Option(False, "--dry-run",
                                     help="check everything a run checks, say which trials it would run and which "
                                          "it would keep from an earlier run, and stop: nothing is started or "
                                          "written")):
    """Run an experiment; rerunning the same config resumes it (finished trials are kept).

    Exit codes: 0 done; 1 some trials crashed (not recorded, rerun to retry); 2 bad input;
    3 some trials ended in an infrastructure error; 4 a model was unavailable and the run stopped;
    130 interrupted."""
    from tbscale.cli.report import closing_report
    from tbscale.environments import open_backend
    from tbscale.runner import Runner, experiment_dataset, experiment_tasks, load_experiment
    from tbscale.config import check_tasks_path
    from tbscale.names import remove_made_folders
    from tbscale.runner.checks import before_first_container, run_folder

    overrides = {}
    if _count("concurrency", concurrency):
        overrides["concurrency"] = concurrency
    if _count("trials", trials):
        overrides["trials"] = trials
    exp = load_experiment(config, overrides)
    every = progress_every_sec()
    made: list[Path] = []  # the folders made for the run: removed again if it stops before it starts
    runner = None
    try:
        check_tasks_path(exp, config)
        run_dir = run_folder(output_dir or Path(exp.output_dir), run_name or exp.name,
                             "--run-name" if run_name is not None else f"{config}: name", made)
        backend = open_backend(exp.environment)
        dataset = experiment_dataset(exp, log=lambda m: say(m))
        # Everything the config names is checked before anything is built or started.
        task_list = experiment_tasks(exp, split_list(tasks), dataset=dataset, build_images=not dry_run,
                                     before_build=lambda ts: before_first_container(exp, ts, config, backend),
                                     backend=backend)
        if preflight:
            preflight_models(exp, config, probe)
        runner = Runner(exp, task_list, run_dir, retry_infra_errors=retry_errors,
                        dataset=dataset.manifest() if dataset is not None else None)
        if dry_run:
            planned = runner.dry_run()
            remove_made_folders(made)  # a folder made for the run, and still empty: the dry run leaves none
            _say_plan(exp.name, run_dir, planned)
            return
        runner.claim_folder()  # another run writing into this folder is refused here, before the live view
        backend.check()
    except BaseException:
        if runner is not None:
            runner.folder.lock.release(remove=runner.run_dir in made)
        remove_made_folders(made)
        raise
    if runner.simulated:
        say("Simulated models (sim/...): these runs exercise the harness; they measure no language model.", "yellow")
    sigterm_as_interrupt()
    try:
        run_with_progress(runner, exp.name, every)
    except KeyboardInterrupt:
        say(f"interrupted: {runner.counters.done} trials finished this time are saved in {run_dir}; run the same "
            "command again to resume.", "yellow")
        raise typer.Exit(130)
    except Exception as e:
        from tbscale.errors import ModelUnavailable

        if not isinstance(e, ModelUnavailable):
            raise
    say(f"results: {run_dir}")
    _after_run(runner, run_dir)
    if report and runner.counters.done + runner.counters.skipped:
        closing_report(run_dir, plots=runner.stopped is None)
    raise typer.Exit(runner.exit_code)


def _say_plan(name: str, run_dir: Path, planned: list) -> None:
    """`run --dry-run`'s account: per setting, the trials planned, kept and to run."""
    from tbscale.runfiles import run_holder
    from tbscale.runner.runner import PlannedSetting

    def counts(p: PlannedSetting) -> str:
        return (f"{p.planned} planned, {p.kept} kept from an earlier run, {p.to_run} to run"
                + (f" ({p.rerun} of them again, after an infrastructure error)" if p.rerun else ""))

    total = PlannedSetting("all", *(sum(getattr(p, k) for p in planned) for k in ("planned", "kept", "rerun")))
    lines = [f"dry run of {name} into {run_dir}: {counts(total)}", *(f"  {p.setting}: {counts(p)}" for p in planned)]
    holder = run_holder(run_dir)
    if holder is not None:  # the counts are of now: that run's trials are kept as they finish
        lines.append(f"another tbscale run is running trials into this folder now ({holder}): it would have to "
                     "finish first")
    lines.append("nothing was started or written; run the same command without --dry-run to run them")
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def _after_run(runner, run_dir: Path) -> None:
    if runner.stopped is not None:
        console.print(labelled("stopped:", "bold red", str(runner.stopped)), highlight=False, soft_wrap=True)
        say(f"{runner.counters.done} trials finished and are kept in {run_dir}; fix the model and run the same "
            "command again to resume.")
    if runner.crashes:
        for spec, why in runner.crashes[:10]:
            console.print(labelled("crashed:", "red", f"{spec.setting.name} {spec.task.id} trial {spec.trial}: {why}"),
                          highlight=False, soft_wrap=True)
        console.print(labelled(f"{len(runner.crashes)} trials crashed", "red",
                               f"(tracebacks in {run_dir / 'crashes.log'}); they are not recorded: run the same "
                               "command again to retry them."), highlight=False, soft_wrap=True)
    if runner.infra_errors:
        causes: dict[str, int] = {}
        for row in runner.infra_errors:
            causes[row.stop_reason or "?"] = causes.get(row.stop_reason or "?", 0) + 1
        console.print(f"[red]{len(runner.infra_errors)} trials ended in an infrastructure error[/] "
                      f"({', '.join(f'{k} {v}' for k, v in sorted(causes.items()))}); they are left out of pass@1 "
                      "and a rerun retries them.", highlight=False)


def preflight_models(exp, config: Path | str, probe: bool) -> None:
    """Every model the experiment uses: its key is set and its endpoint answers (with `probe`, a
    one-token call succeeds); the first problem as a one-line error naming `config` and the key."""
    from tbscale.models.preflight import check_models
    from tbscale.runner.resolve import referenced_models

    problems = [c for c in asyncio.run(check_models(referenced_models(exp), probe=probe)) if not c.ok]
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more; `tbscale models check {config}` lists them)" if len(problems) > 1 else ""
        raise TbscaleError(f"{config}: models.{first.key}: {first.problem}{more}")


@models_app.command("check")
def models_check(config: Path = typer.Argument(..., help="experiment YAML"),
                 probe: bool = typer.Option(False, help="also make a one-token call to each model (costs a little)")):
    """Check every model the config's settings use: its key variable is set, its api_base answers,
    and (with --probe) a one-token call succeeds. Exit 1 when any check fails."""
    from rich.table import Table
    from rich.text import Text

    from tbscale.models.preflight import check_models
    from tbscale.runner import load_experiment
    from tbscale.runner.resolve import referenced_models

    exp = load_experiment(config)
    checks = asyncio.run(check_models(referenced_models(exp), probe=probe))
    table = Table(title=f"models of {config}")
    for col in ("key", "model", "checked", "result"):
        table.add_column(col)
    for c in checks:
        result = Text("ok" + (f" ({c.latency_sec:.2f} s)" if c.latency_sec is not None else ""), style="green") \
            if c.ok else Text(str(c.problem), style="red")
        table.add_row(Text(c.key), Text(c.model), Text(", ".join(c.checked)), result)
    out.print(table)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
