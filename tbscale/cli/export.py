"""Exports from finished runs: `tbscale export verifier-data` (every verifier call, for
distillation) and `tbscale export swebench-preds` (predictions for swebench's own evaluation);
and `tbscale swebench list`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import console, export_app, swebench_app
from tbscale.cli.app import out as stdout
from tbscale.errors import TbscaleError


@export_app.command("verifier-data")
def verifier_data(
        runs: list[Path] = typer.Argument(..., help="run folders, or a folder of runs"),
        out: Path = typer.Option(..., "-o", "--out", help="JSONL file to write"),
        role: Optional[list[str]] = typer.Option(None, "--role", help="verifier, judge, summarizer (repeatable; default all)"),
        method: Optional[list[str]] = typer.Option(None, "--method", help="pointwise, pairwise, listwise, ... (repeatable)"),
        setting: Optional[list[str]] = typer.Option(None, "--setting", help="only these settings (repeatable)"),
        include_failed: bool = typer.Option(False, help="keep calls whose reply could not be parsed"),
        include_simulated: bool = typer.Option(False, help="keep calls made by simulated models (sim/...)")):
    """Every verifier, judge and summarizer call of RUNS as a distillation set: messages, response,
    parsed scores or preference, and the attempt's outcome (JSONL)."""
    from tbscale.analysis.export_verifier import export_verifier_data

    counts = export_verifier_data(runs, out, roles=role, methods=method, settings=setting,
                                  include_failed=include_failed, include_simulated=include_simulated)
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("written", "calls"))
    stdout.print(f"wrote {counts['written']} of {counts['calls']} calls to {out}" + (f" ({detail})" if detail else ""))
    if counts["skipped_simulated"] and not counts["written"]:
        console.print("[yellow]every call came from simulated models; pass --include-simulated to export them anyway[/]")


@export_app.command("swebench-preds")
def export_swebench_preds(
        run: Path = typer.Argument(..., help="a run folder (results/<run>)"),
        out: Optional[Path] = typer.Option(None, help="output folder (default: RUN/swebench_predictions)"),
        setting: Optional[list[str]] = typer.Option(None, help="only these settings (repeatable)"),
        model_name: str = typer.Option("{run}__{setting}__t{trial}",
                                       help="model_name_or_path of each file; fields {run} {setting} {trial}")):
    """Predictions JSONL for `python -m swebench.harness.run_evaluation`, one file per (setting, trial index)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tbscale.analysis.swebench_export import export_predictions

    files = export_predictions(run, out, setting, model_name)
    table = Table(title=f"SWE-bench predictions from {run}")
    for col in ("setting", "trial", "instances", "empty patches", "file"):
        table.add_column(col)
    for f in files:
        table.add_row(*map(Text, (f.setting, str(f.trial), str(len(f.predictions)), str(f.empty), str(f.path))))
    Console().print(table)
    first = files[0]
    print(f"evaluate one with: python -m swebench.harness.run_evaluation -d <dataset> -s <split> "
          f"-p {first.path} -id {first.predictions[0]['model_name_or_path']}")


@swebench_app.command("list")
def swebench_list(config: Path = typer.Argument(..., help="experiment YAML with tasks: {swebench: ...}")):
    """The instances a config selects, with the image each runs in (nothing is built or pulled)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tbscale.runner import load_experiment
    from tbscale.tasks.swebench import select_instances
    from tbscale.tasks.swebench.images import resolve_image

    exp = load_experiment(config)
    if exp.tasks.swebench is None:
        raise TbscaleError(f"{config}: tasks has no `swebench` block")
    src, rows = select_instances(exp.tasks.swebench, exp.tasks.include, exp.tasks.exclude)
    images = [resolve_image(r, src) for r in rows]
    table = Table(title=f"{len(rows)} SWE-bench instances ({src.dataset or src.task_repo}, split {src.split})")
    for col in ("instance_id", "repo", "version", "FAIL_TO_PASS", "image"):
        table.add_column(col)
    import json

    for r, img in zip(rows, images):
        f2p = r["FAIL_TO_PASS"]
        n = len(json.loads(f2p) if isinstance(f2p, str) else f2p)
        table.add_row(*map(Text, (r["instance_id"], r["repo"], str(r["version"]), str(n))), img)
    Console(width=200).print(table)
