"""`tbscale report`: tables (and plots) from finished runs, and runs made elsewhere imported first;
and the closing report `tbscale run` prints when its run ends. The report is printed here, in the
CLI: the runner writes trial lines and knows nothing of analysis."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import typer

from tbscale.cli.app import app, console, fail, labelled, say
from tbscale.errors import TbscaleError


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
    paths = list(runs or [])
    if not paths and not imports:
        fail("give run folders, or runs made elsewhere with --import PATH")
    if not imports:
        # A folder that holds no run is named before the analyses are imported (pandas and numpy
        # take most of a second); the report reads the folders again.
        from tbscale.runfiles import find_run_dirs

        find_run_dirs(paths)
    from tbscale.analysis.report import FORMATS

    if format_ is not None and format_ not in FORMATS:
        fail(f"--format: {format_!r} is not one of {', '.join(FORMATS)}")
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


def closing_report(run_dir: Path, *, plots: bool) -> None:
    """The report `tbscale run` prints when its run ends; a report that fails is a warning there,
    never the run's failure (its trials are kept either way)."""
    try:
        _report([run_dir], compare=None, plots=plots)
    except TbscaleError as e:
        console.print(labelled("report:", "red", str(e)), highlight=False, soft_wrap=True)
