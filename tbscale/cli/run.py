"""`tbscale run`, `tbscale report`, `tbscale clean`: running an experiment with a live display,
reporting on finished runs, and removing what killed processes left behind."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Optional, Tuple

import typer

from tbscale.cli.app import app, console, fail, labelled, models_app, out, say, sigterm_as_interrupt, split_list
from tbscale.errors import TbscaleError


def progress_view(title: str, c):
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    finished = c.done + c.skipped
    rate = f"{c.passed / c.done:.0%}" if c.done else "-"
    elapsed = time.monotonic() - c.started_at
    bar_w = 30
    fill = int(bar_w * finished / c.total) if c.total else bar_w
    retries = ", ".join(f"{k} {v}" for k, v in c.retries.most_common(3))
    table.add_row(f"[bold]{title}[/]", f"[green]{'━' * fill}[/][dim]{'━' * (bar_w - fill)}[/]",
                  f"{finished}/{c.total} done", f"{c.running} running", f"{c.skipped} resumed",
                  f"[red]{c.errors} infra errors[/]" + (f" [red]{c.crashed} crashed[/]" if c.crashed else ""),
                  f"pass {rate}", f"{elapsed:5.0f} s" + (f"  [yellow]retries: {retries}[/]" if retries else ""))
    return table


def run_with_progress(runner, title: str) -> None:
    from rich.live import Live

    for line in runner.notice():  # once per run: the keys not enforced here, and why
        say(line, "yellow")
    with Live(progress_view(title, runner.counters), console=console, refresh_per_second=4, transient=False) as live:
        runner.on_update = lambda c, row: live.update(progress_view(title, c))
        asyncio.run(runner.run())


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
        probe: bool = typer.Option(False, help="with --preflight, also make a one-token call to each model")):
    """Run an experiment; rerunning the same config resumes it (finished trials are kept).

    Exit codes: 0 done; 1 some trials crashed (not recorded, rerun to retry); 2 bad input;
    3 some trials ended in an infrastructure error; 4 a model was unavailable and the run stopped;
    130 interrupted."""
    from tbscale.environments import get_backend
    from tbscale.runner import Runner, experiment_dataset, experiment_tasks, load_experiment
    from tbscale.runner.checks import before_first_container, run_folder

    overrides = {}
    if _count("concurrency", concurrency):
        overrides["concurrency"] = concurrency
    if _count("trials", trials):
        overrides["trials"] = trials
    exp = load_experiment(config, overrides)
    run_dir = run_folder(output_dir or Path(exp.output_dir), run_name or exp.name,
                         "--run-name" if run_name is not None else f"{config}: name")
    backend = get_backend(exp.environment.backend, host=exp.environment.docker_host)
    dataset = experiment_dataset(exp, log=lambda m: say(m))
    # Everything the config names is checked before anything is built or started.
    task_list = experiment_tasks(exp, split_list(tasks), dataset=dataset,
                                 before_build=lambda ts: before_first_container(exp, ts, config, backend))
    if preflight:
        _preflight(exp, config, probe)
    backend.check()
    runner = Runner(exp, task_list, run_dir, retry_infra_errors=retry_errors,
                    dataset=dataset.manifest() if dataset is not None else None)
    if runner.simulated:
        console.print("[yellow]Simulated models (sim/...): these runs exercise the harness; "
                      "they measure no language model.[/]")
    sigterm_as_interrupt()
    try:
        run_with_progress(runner, exp.name)
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
        try:
            _report([run_dir], compare=None, plots=runner.stopped is None)
        except TbscaleError as e:
            console.print(labelled("report:", "red", str(e)), highlight=False, soft_wrap=True)
    raise typer.Exit(runner.exit_code)


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


def _preflight(exp, config: Path, probe: bool) -> None:
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


@app.command()
def report(runs: Optional[list[Path]] = typer.Argument(None, help="run folders, or a folder of runs"),
           compare: Optional[Tuple[str, str]] = typer.Option(None, help="two setting names, or two paths given to "
                                                                         "--import: A B (reports B - A)"),
           plots: bool = typer.Option(True, help="write PNG plots and the HTML report"),
           imports: Optional[list[Path]] = typer.Option(
               None, "--import", help="a run made elsewhere (terminal-bench `tb run` folder or submission, Harbor "
                                      "job, mini-swe-agent output), imported once into results/imported/; "
                                      "repeatable. With --import, other PATHs that are not tbscale runs are "
                                      "imported too"),
           include_infra_errors: bool = typer.Option(False, help="count trials that ended in an infrastructure "
                                                               "error as failures in pass@1"),
           adaptive_pair: Optional[Tuple[str, str]] = typer.Option(
               None, metavar="PLAIN ADAPTIVE", help="the plain and the adaptive Turn-BoN setting to compare "
                                                    "(default: every adaptive setting with a plain one of the same N)"),
           format_: Optional[str] = typer.Option(
               None, "--format", metavar="md|csv|json",
               help="print one format to stdout for scripts, and nothing else (messages go to stderr): md, the "
                    "report.md text; csv, each table after a `# table: <key>` line; json, summary.json"),
           out_dir: Optional[Path] = typer.Option(None, "--out", help="write the report's files here (default: "
                                                                    "RUN/report, or FOLDER/report for a folder of runs)")):
    """Tables (and plots) from finished runs: pass@k, consistency, turns, endings, costs, significance.

    In a terminal the tables fit its width (COLUMNS, or 120, when output is not a terminal), key
    columns first; report/ holds every column (report.md, one CSV per table, summary.json)."""
    from tbscale.analysis.report import FORMATS

    if format_ is not None and format_ not in FORMATS:
        fail(f"--format: {format_!r} is not one of {', '.join(FORMATS)}")
    paths = list(runs or [])
    if not paths and not imports:
        fail("give run folders, or runs made elsewhere with --import PATH")
    aliases: dict[str, Path] = {}
    if imports:
        paths, aliases = _imported([*imports, *paths])
    _report(paths, list(compare) if compare else None, plots, include_infra_errors=include_infra_errors,
            adaptive_pair=list(adaptive_pair) if adaptive_pair else None, format_=format_, run_aliases=aliases,
            out_dir=out_dir)


def _imported(paths: list[Path]) -> tuple[list[Path], dict[str, Path]]:
    """Run folders for PATHs (imported when they are not tbscale runs), and the names --compare may
    use for each: the path as given, and its folder name when no other path has it."""
    from tbscale.ingest import auto_import

    runs: list[Path] = []
    aliases: dict[str, Path] = {}
    names: dict[str, int] = {}
    for p in paths:
        if (Path(p) / "trials.jsonl").is_file():
            run = Path(p)
        else:
            if not Path(p).exists():
                raise TbscaleError(f"{p}: no such file or directory")
            imported = auto_import(Path(p))
            if imported is None:
                raise TbscaleError(f"{p}: neither a tbscale run nor a run in a format tbscale imports "
                                   "(terminal-bench, Harbor, mini-swe-agent)")
            say(f"imported {p} as {imported}")
            run = imported
        runs.append(run)
        aliases[str(p)] = run
        aliases[str(p).rstrip("/")] = run
        name = Path(p).resolve().name
        names[name] = names.get(name, 0) + 1
        aliases.setdefault(f"name:{name}", run)
    for name, count in names.items():
        run = aliases.pop(f"name:{name}")
        if count == 1:
            aliases.setdefault(name, run)
    return runs, aliases


def _report(runs: list[Path], compare, plots: bool, include_infra_errors: bool = False,
            adaptive_pair: list[str] | None = None, format_: str | None = None,
            run_aliases: dict[str, Path] | None = None, out_dir: Path | None = None) -> None:
    import sys

    from tbscale.analysis.report import build_report, render, report_console

    if format_ is None:
        build_report(runs, report_console(), compare=compare, plots=plots, include_infra_errors=include_infra_errors,
                     adaptive_pair=adaptive_pair, run_aliases=run_aliases, out_dir=out_dir)
        return
    ctx = build_report(runs, report_console(stderr=True), compare=compare, plots=plots, out_dir=out_dir,
                       include_infra_errors=include_infra_errors, adaptive_pair=adaptive_pair, tables_to_console=False,
                       run_aliases=run_aliases)
    sys.stdout.write(render(ctx, format_))
    sys.stdout.flush()


@app.command()
def clean(all_sessions: bool = typer.Option(False, "--all/--orphans",
                                           help="every tbscale container on the engine, live runs' too (asks first); "
                                                "default: only those whose owning process is gone"),
          yes: bool = typer.Option(False, "--yes", "-y", help="with --all: remove without asking"),
          run: Optional[list[Path]] = typer.Option(None, "--run", help="also remove this run folder's containers and "
                                                                    "networks while it is running (repeatable)"),
          label: Optional[list[str]] = typer.Option(None, "--label", help="only resources carrying this label "
                                                                        "(key or key=value; repeatable)"),
          images: bool = typer.Option(False, "--images", help="also remove images tbscale built whose builder is "
                                                             "gone, that no container uses and no trial used lately"),
          docker_host: Optional[str] = typer.Option(None, help="a Docker host other than DOCKER_HOST / the local one")):
    """Remove what tbscale processes that are gone left behind: containers (a compose project whole),
    the networks made for them, and with --images the images they built. Every resource carries its
    owner (host, pid, process start time): a live run's are left alone unless the run is named."""
    from tbscale.config.experiment import DOCKER_SCHEMES, url_problem
    from tbscale.environments.cleanup import clean as clean_engine
    from tbscale.environments.cleanup import cleanup_labelled

    if docker_host is not None and (problem := url_problem(docker_host, DOCKER_SCHEMES)):
        fail(f"--docker-host: {problem}")
    for text in label or []:
        if not text or "," in text or text.startswith("="):
            fail(f"--label: {text!r} is not key or key=value")
    if all_sessions:
        if not yes:
            try:
                sure = typer.confirm("Remove every tbscale container on this engine, including those of runs in "
                                     "progress?", err=True)
            except typer.Abort:  # no answer (stdin closed): the prompt's line is ended first
                console.print()
                sure = False
            if not sure:
                fail("--all: not confirmed, nothing removed (add --yes to confirm without a prompt)")
        out.print(f"removed {cleanup_labelled(host=docker_host, labels=label or [])} containers")
        return
    runs = [str(Path(r).resolve()) for r in run or []]
    result = clean_engine(docker_host, runs=runs, labels=label or [], images=images)
    out.print(f"removed {result.containers} containers and {result.networks} networks"
              + (f" and {result.images} images" if images else ""), highlight=False)
    for who, n in sorted(result.kept.items()):
        out.print(f"kept {n} containers of a live or unknown owner ({who}); `tbscale clean --run RUN` removes a "
                  "live run's", highlight=False, soft_wrap=True)
